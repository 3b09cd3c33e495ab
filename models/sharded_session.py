"""The session Transformer with its embedding tables sharded by TorchRec.

The item vectors, positions and gap buckets are one TorchRec ``EmbeddingCollection`` (an
equal width is what an ``EmbeddingCollection`` requires), the item bias a second one (4 wide:
FBGEMM's rows are multiples of 4 floats; column 0 is the bias, the others stay zero). Under
``DistributedModelParallel`` each process holds only the shards the plan gives it
(models.sharding_plan), built on the meta device first so no process ever allocates a whole
table; the dense encoder is replicated and data-parallel (DMP wraps it in DDP).

One lookup per step. The forward pass asks the item table for the batch's items and for every
row of the catalog in the same ``KeyedJaggedTensor``: the tied full softmax needs every item's
vector, and a table looked up twice in one step would be updated twice by its fused optimizer.
The tables' optimizer runs inside the backward pass (TorchRec's fused FBGEMM kernels), so their
gradients are never materialised; TorchRec divides them by the number of processes as DDP
averages the dense ones.

Table rows start from seeded blocks of rows (``initial_rows``), identical however a table is
split, so 1 and N processes start from the same weights.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import torch
from fbgemm_gpu.tbe.config import WeightDecayMode
from torch import nn
from torch.distributed._shard.sharded_tensor.api import ShardedTensor
from torchrec import EmbeddingCollection, EmbeddingConfig, KeyedJaggedTensor
from torchrec.distributed import DistributedModelParallel
from torchrec.distributed.embedding import EmbeddingCollectionSharder
from torchrec.distributed.types import ShardingPlan
from torchrec.optim import optimizers as torchrec_optimizers
from torchrec.optim.apply_optimizer_in_backward import apply_optimizer_in_backward
from torchrec.optim.keyed import KeyedOptimizer
from torchrec.optim.rowwise_adagrad import RowWiseAdagrad

from models.embeddings import padded_width
from models.session_config import SessionTransformerConfig
from models.session_transformer import N_GAP_BUCKETS, CausalBlock, gap_buckets

INIT_BLOCK = 1024
BIAS_WIDTH = 4
# Table -> the SessionTransformer parameter it becomes when the shards are assembled.
TABLES = {
    "item": "item_embedding.weight",
    "item_bias": "item_bias",
    "position": "position_embedding.weight",
    "gap": "gap_embedding.weight",
}
# Features of the D-wide collection, in its order: the batch's items, the whole catalog (for
# the softmax), each position's index and gap bucket. The bias collection has the catalog only.
FEATURES = ("item", "catalog", "position", "gap")
BIAS_FEATURE = "catalog_bias"
ITEM_TABLES = ("item", "item_bias")
# The table optimiser the planner's storage estimate and the fused kernels both see: row-wise
# Adagrad (one accumulator per row), which FBGEMM implements on CPU and CUDA alike; Adam has
# no CPU kernel. `sgd` exists for the gradient checks (a step of rate 1 moves a row by minus
# its gradient).
TableOptimizerKind = Literal["rowwise_adagrad", "sgd"]


@dataclass(frozen=True)
class TableOptimizer:
    kind: TableOptimizerKind
    item_lr: float
    lr: float
    weight_decay: float = 0.0


def table_configs(n_items: int, config: SessionTransformerConfig) -> list[EmbeddingConfig]:
    dim = padded_width(config.dim)
    return [
        EmbeddingConfig(name="item", embedding_dim=dim, num_embeddings=n_items + 1,
                        feature_names=["item", "catalog"]),
        EmbeddingConfig(name="position", embedding_dim=dim, num_embeddings=config.max_len,
                        feature_names=["position"]),
        EmbeddingConfig(name="gap", embedding_dim=dim, num_embeddings=N_GAP_BUCKETS,
                        feature_names=["gap"]),
    ]


def bias_config(n_items: int) -> EmbeddingConfig:
    return EmbeddingConfig(name="item_bias", embedding_dim=BIAS_WIDTH,
                           num_embeddings=n_items + 1, feature_names=[BIAS_FEATURE])


class DenseEncoder(nn.Module):
    """The replicated part of the session Transformer (SessionTransformer's parameter names)."""

    def __init__(self, dim: int, config: SessionTransformerConfig) -> None:
        super().__init__()
        self.input_dropout = nn.Dropout(config.dropout)
        self.input_norm = nn.LayerNorm(dim)
        self.blocks = nn.ModuleList(
            CausalBlock(dim, config.heads, config.ffn_multiplier, config.dropout)
            for _ in range(config.layers)
        )
        self.output_norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.input_dropout(self.input_norm(x))
        for block in self.blocks:
            x = block(x)
        out: torch.Tensor = self.output_norm(x)
        return out


class SessionModule(nn.Module):
    """What DistributedModelParallel shards: the two collections and the dense encoder."""

    def __init__(self, n_items: int, config: SessionTransformerConfig) -> None:
        super().__init__()
        self.n_items = n_items
        self.max_len = config.max_len
        self.dim = padded_width(config.dim)
        meta = torch.device("meta")
        self.tables = EmbeddingCollection(tables=table_configs(n_items, config), device=meta)
        self.bias = EmbeddingCollection(tables=[bias_config(n_items)], device=meta)
        torch.manual_seed(config.seed)
        self.encoder = DenseEncoder(self.dim, config)

    def forward(
        self, items: torch.Tensor, gaps_s: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Hidden states ``[batch, length, dim]``, the catalog's vectors ``[rows, dim]`` and
        biases ``[rows]``, all from one lookup per collection."""
        batch, length = items.shape
        device = items.device
        rows = self.n_items + 1
        catalog = torch.arange(rows, device=device)
        per_row = torch.full((batch,), length, dtype=torch.int64, device=device)
        # The catalog rides on the first row of the batch (a feature's lengths are per row).
        catalog_lengths = torch.zeros(batch, dtype=torch.int64, device=device)
        catalog_lengths[0] = rows
        found = self.tables(KeyedJaggedTensor.from_lengths_sync(
            keys=list(FEATURES),
            values=torch.cat([
                items.reshape(-1), catalog,
                torch.arange(length, device=device).repeat(batch),
                gap_buckets(gaps_s).reshape(-1),
            ]),
            lengths=torch.cat([per_row, catalog_lengths, per_row, per_row]),
        ))
        biases = self.bias(KeyedJaggedTensor.from_lengths_sync(
            keys=[BIAS_FEATURE], values=catalog, lengths=catalog_lengths,
        ))[BIAS_FEATURE].values()[:, 0]
        shape = (batch, length, self.dim)
        # Row 0 is padding: a zero vector that takes no gradient from the inputs.
        vectors = found["item"].values().view(shape) * (items != 0).unsqueeze(-1)
        x = vectors * math.sqrt(self.dim) + found["position"].values().view(shape)
        x = x + found["gap"].values().view(shape)
        return self.encoder(x), found["catalog"].values(), biases


def apply_table_optimizer(module: SessionModule, optimizer: TableOptimizer) -> None:
    """Registers the fused optimiser on each table (before planning: the planner counts its
    state, and the sharder builds it into the kernels)."""
    for name in ("item", "position", "gap"):
        lr = optimizer.item_lr if name in ITEM_TABLES else optimizer.lr
        _register(module.tables.embeddings[name].parameters(), optimizer, lr)
    _register(module.bias.parameters(), optimizer, optimizer.item_lr)


def _register(params: Iterator[nn.Parameter], optimizer: TableOptimizer, lr: float) -> None:
    if optimizer.kind == "sgd":
        apply_optimizer_in_backward(torchrec_optimizers.SGD, params, {"lr": lr})
        return
    # Decoupled weight decay, as AdamW applies it.
    apply_optimizer_in_backward(RowWiseAdagrad, params, {
        "lr": lr, "eps": 1e-8, "weight_decay": optimizer.weight_decay,
        "weight_decay_mode": WeightDecayMode.DECOUPLE,
    })


@dataclass(frozen=True)
class Shard:
    """Rows ``[row, row + rows)`` and columns ``[column, column + columns)`` of a table."""

    table: str
    row: int
    column: int
    tensor: torch.Tensor


class ShardedSessionModel:
    """SessionModule under DistributedModelParallel, with what SessionTrainer's loss calls:
    ``model(items, gaps)`` for hidden states and ``model.logits(hidden)`` for full-catalog
    scores (against the catalog looked up by that forward call)."""

    def __init__(
        self, module: SessionModule, plan: ShardingPlan, device: torch.device, seed: int
    ) -> None:
        self.n_items = module.n_items
        self.dim = module.dim
        self.dmp = DistributedModelParallel(
            module, device=device, plan=plan, sharders=[EmbeddingCollectionSharder()]
        )
        self._catalog: tuple[torch.Tensor, torch.Tensor] | None = None
        self._initialise(seed)

    @property
    def module(self) -> SessionModule:
        inner: SessionModule = self.dmp.module
        return inner

    @property
    def fused_optimizer(self) -> KeyedOptimizer:
        fused: KeyedOptimizer = self.dmp.fused_optimizer
        return fused

    def __call__(self, items: torch.Tensor, gaps_s: torch.Tensor) -> torch.Tensor:
        hidden, vectors, biases = self.dmp(items, gaps_s)
        self._catalog = (vectors, biases)
        out: torch.Tensor = hidden
        return out

    def catalog(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Every row of the item table and of the item bias, as the last forward call looked
        them up (gradients flow back to the shards)."""
        if self._catalog is None:
            raise RuntimeError("the catalog is read by a forward call first")
        return self._catalog

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """``hidden @ E.T + b`` over every row of the item table (column 0 is padding)."""
        vectors, biases = self.catalog()
        return hidden @ vectors.to(hidden.dtype).T + biases.to(hidden.dtype)

    @property
    def training(self) -> bool:
        """Whether the module is in training mode (as ``nn.Module.training``)."""
        return bool(self.dmp.training)

    def train(self) -> None:
        self.dmp.train()

    def eval(self) -> None:
        self.dmp.eval()

    def dense_parameters(self) -> dict[str, nn.Parameter]:
        return {f"encoder.{n}": p for n, p in self.module.encoder.named_parameters()}

    def shards(self) -> list[Shard]:
        """This process's shards of every table (views of the weights the kernels train)."""
        out = []
        for key, value in self.dmp.state_dict().items():
            if not isinstance(value, ShardedTensor):
                continue
            table = key.split(".")[-2]
            for local in value.local_shards():
                row, column = local.metadata.shard_offsets
                out.append(Shard(table, row, column, local.tensor))
        return out

    def state_dict(self) -> dict[str, torch.Tensor]:
        """A copy of this process's shards and the dense weights (the best-epoch snapshot)."""
        out = {f"table.{s.table}.{s.row}.{s.column}": s.tensor.detach().clone()
               for s in self.shards()}
        for name, tensor in self.module.encoder.state_dict().items():
            out[f"encoder.{name}"] = tensor.detach().clone()
        return out

    @torch.no_grad()
    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        for shard in self.shards():
            shard.tensor.copy_(state[f"table.{shard.table}.{shard.row}.{shard.column}"])
        prefix = "encoder."
        self.module.encoder.load_state_dict(
            {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
        )

    def embedding_bytes(self) -> int:
        return sum(s.tensor.numel() * s.tensor.element_size() for s in self.shards())

    @torch.no_grad()
    def _initialise(self, seed: int) -> None:
        widths = {"item": self.dim, "position": self.dim, "gap": self.dim,
                  "item_bias": BIAS_WIDTH}
        std = 1.0 / math.sqrt(self.dim)
        for shard in self.shards():
            rows, columns = shard.tensor.shape
            if shard.table == "item_bias":
                shard.tensor.zero_()
                continue
            block_seed = seed * 1009 + list(widths).index(shard.table) + 1
            drawn = initial_rows(shard.row, shard.row + rows, widths[shard.table], block_seed)
            values = drawn[:, shard.column : shard.column + columns] * std
            if shard.table == "item" and shard.row == 0:
                values[0] = 0.0
            shard.tensor.copy_(values.to(shard.tensor.device))


def initial_rows(lo: int, hi: int, dim: int, seed: int) -> torch.Tensor:
    """Standard normal rows ``[lo, hi)`` drawn in fixed blocks of INIT_BLOCK rows, each from its
    own seed: a row starts the same however the table is split, so runs on 1 and N processes
    differ only in how batches are split, and no process draws rows it does not hold."""
    blocks = []
    for block in range(lo // INIT_BLOCK, -(-hi // INIT_BLOCK)):
        generator = torch.Generator().manual_seed(seed * 1_000_003 + block)
        drawn = torch.randn(INIT_BLOCK, dim, generator=generator)
        start = block * INIT_BLOCK
        blocks.append(drawn[max(lo, start) - start : min(hi, start + INIT_BLOCK) - start])
    return torch.cat(blocks) if blocks else torch.zeros(0, dim)


def assemble(parts: list[dict[str, torch.Tensor]], shapes: dict[str, tuple[int, int]]) -> (
    dict[str, torch.Tensor]
):
    """The SessionTransformer state dict from every process's ``state_dict()``."""
    whole = {name: torch.zeros(shape) for name, shape in shapes.items()}
    filled = dict.fromkeys(shapes, 0)
    tensors: dict[str, torch.Tensor] = {}
    for part in parts:
        for key, tensor in part.items():
            if key.startswith("encoder."):
                tensors[key[len("encoder."):]] = tensor
                continue
            _, table, row, column = key.split(".")
            rows, columns = tensor.shape
            whole[table][int(row) : int(row) + rows, int(column) : int(column) + columns] = tensor
            filled[table] += tensor.numel()
    for table, shape in shapes.items():
        if filled[table] != shape[0] * shape[1]:
            raise ValueError(f"table={table} shards cover {filled[table]} of {shape} values")
        target = TABLES[table]
        tensors[target] = whole[table][:, 0] if table == "item_bias" else whole[table]
    return tensors


def table_shapes(n_items: int, config: SessionTransformerConfig) -> dict[str, tuple[int, int]]:
    dim = padded_width(config.dim)
    return {"item": (n_items + 1, dim), "item_bias": (n_items + 1, BIAS_WIDTH),
            "position": (config.max_len, dim), "gap": (N_GAP_BUCKETS, dim)}
