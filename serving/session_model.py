"""The real recommender: the session Transformer of models/ behind the scorer's protocols.

Versions are read in the format of models/session_checkpoint.py. Retrieval is maximum inner
product over `h . e_j + b_j` (models.retrieval folds the bias in): exact (a flat index) for a
catalog smaller than the retrieval settings' `exact_threshold`, so a served list is the one the
offline reference ranks (models/reference_answer.py), approximate (the configured kind) above
it. A version trained with the masked objective is refused: its queries end in a mask token,
which the scorer's causal encoder does not append.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

from models.accelerators import BucketedGraphs, default_device, traced_inference
from models.onnx_inference import onnx_inference
from models.ranker import DLRMRanker
from models.retrieval import FaissItemIndex, RetrievalConfig, mips_item_vectors, mips_queries
from models.sequence_training import history_batch
from models.session_checkpoint import load_session_model
from models.session_transformer import QueryEncoder, SessionTransformer
from models.store import ModelStore
from serving.model_bundle import FloatArray, History, IntArray, ModelBundle
from serving.settings import CpuRuntime

logger = logging.getLogger(__name__)


def _examples(n_items: int, max_len: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Inputs of several shapes, padded rows included, for checking a trace."""
    generator = torch.Generator().manual_seed(0)
    out = []
    for batch, length in ((2, min(8, max_len)), (1, max_len), (3, min(3, max_len))):
        items = torch.randint(1, n_items + 1, (batch, length), generator=generator)
        items[0, length // 2 + 1 :] = 0
        gaps = torch.randint(0, 100_000, (batch, length), generator=generator)
        gaps[items == 0] = -1
        out.append((items, gaps))
    return out


class SessionRecommender:
    """Encodes histories into MIPS queries. On CPU: an ONNX Runtime session of the encoder
    (``cpu_runtime="onnxruntime"``), else, or when it cannot be built, a TorchScript trace. On
    CUDA: graph replays of the encoder at a fixed history length (one graph per batch-size
    bucket, all captured here, so a hot swap's first requests pay no capture)."""

    def __init__(
        self,
        model: SessionTransformer,
        history_length: int,
        device: torch.device | None = None,
        cpu_runtime: CpuRuntime = "onnxruntime",
    ) -> None:
        self.model = model.eval()
        self.history_length = min(history_length, model.config.max_len)
        self.device = device or default_device()
        with torch.no_grad():
            self._vectors = model.item_vectors().detach().float().cpu().numpy().copy()
            self._bias = model.item_bias.detach().float().cpu().numpy().copy()
        examples = _examples(model.n_items, self.history_length)
        self._encode: Callable[..., torch.Tensor]
        if self.device.type == "cuda":
            graphs = BucketedGraphs(QueryEncoder(self.model.to(self.device)), pad_values=(0, -1))
            with torch.inference_mode():
                graphs.capture(*self._inputs(*examples[1]))
            self._encode = graphs
        else:
            self._encode = self._cpu_encoder(cpu_runtime, examples)

    def _cpu_encoder(
        self, runtime: CpuRuntime, examples: list[tuple[torch.Tensor, torch.Tensor]]
    ) -> Callable[..., torch.Tensor]:
        if runtime == "onnxruntime":
            encoder = onnx_inference(
                QueryEncoder(self.model), examples, ("items", "gaps"),
                {"items": {0: "batch", 1: "length"}, "gaps": {0: "batch", 1: "length"}},
                threads=torch.get_num_threads(),
            )
            if encoder is not None:
                return encoder
        return traced_inference(QueryEncoder(self.model), examples)

    def _inputs(self, x: torch.Tensor, gaps: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.device.type != "cuda":
            return x, gaps
        # Right padding to the fixed length a graph was captured at: the blocks are causal,
        # so the trailing pads change no real position (the query is the last real one).
        extra = self.history_length - x.shape[1]
        x = torch.nn.functional.pad(x, (0, extra), value=0)
        gaps = torch.nn.functional.pad(gaps, (0, extra), value=-1)
        return x.to(self.device, non_blocking=True), gaps.to(self.device, non_blocking=True)

    def encode(self, histories: Sequence[History]) -> FloatArray:
        items = [np.fromiter((i for i, _ in h), np.int64, len(h)) for h in histories]
        # Gaps are whole seconds in training (models.sequence_training); keep the same scale.
        times = [np.fromiter((int(t) for _, t in h), np.int64, len(h)) for h in histories]
        x, gaps = history_batch(items, times, self.history_length)
        with torch.inference_mode():
            queries = self._encode(*self._inputs(x, gaps)).float().cpu().numpy()
        return mips_queries(queries)

    def item_vectors(self, indices: IntArray) -> FloatArray:
        return self._vectors[indices]

    def index_vectors(self, indices: IntArray) -> tuple[IntArray, FloatArray]:
        """MIPS vectors of the given rows (the trainer grows its table ahead of its id map:
        rows without an id are never indexed)."""
        return indices, mips_item_vectors(self._vectors[indices], self._bias[indices])


class DlrmCandidateRanker:
    """Sparse slots: the query vector and the candidate's item vector; dense: user counters."""

    def __init__(self, ranker: DLRMRanker, recommender: SessionRecommender) -> None:
        self.ranker = ranker.eval()
        self.recommender = recommender

    def score(self, queries: FloatArray, candidates: IntArray, dense: FloatArray) -> FloatArray:
        n, c = candidates.shape
        width = self.ranker.config.n_dense
        dense_in = np.zeros((n, width), dtype=np.float32)
        dense_in[:, : min(width, dense.shape[1])] = dense[:, :width]
        query = torch.from_numpy(np.ascontiguousarray(queries[:, :-1]))  # drop the bias slot
        items = torch.from_numpy(self.recommender.item_vectors(candidates.reshape(-1)))
        sparse = torch.stack(
            [query.repeat_interleave(c, dim=0), items], dim=1
        )
        with torch.inference_mode():
            logits = self.ranker(torch.from_numpy(dense_in).repeat_interleave(c, dim=0), sparse)
        return torch.sigmoid(logits).numpy().reshape(n, c).astype(np.float32)


def load_session_bundle(
    store_root: Path,
    name: str,
    version: str,
    retrieval: RetrievalConfig,
    history_length: int,
    published_at: float | None = None,
    cpu_runtime: CpuRuntime = "onnxruntime",
    sha256: str | None = None,
) -> ModelBundle:
    """The version's bundle; with `sha256`, only if the stored bytes have that digest."""
    started = time.perf_counter()
    stored = load_session_model(ModelStore(store_root), name, version, sha256)
    model = stored.model
    if model.config.objective != "causal":
        raise ValueError(f"version {version} is trained with the {model.config.objective} "
                         "objective; the scorer encodes causally")
    recommender = SessionRecommender(model, history_length, cpu_runtime=cpu_runtime)
    if len(stored.item_rows) < retrieval.exact_threshold:
        retrieval = retrieval.model_copy(update={"kind": "flat"})
    index = FaissItemIndex(retrieval)
    index.build(*recommender.index_vectors(np.array(sorted(stored.item_rows.values()), np.int64)))
    item_ids = [""] * (model.n_items + 1)
    for item_id, i in stored.item_rows.items():
        item_ids[i] = item_id
    bundle = ModelBundle(
        version=version,
        published_at=published_at if published_at is not None else stored.manifest.created_at,
        item_ids=item_ids,
        item_index=stored.item_rows,
        recommender=recommender,
        index=index,
        ranker=DlrmCandidateRanker(stored.ranker, recommender) if stored.ranker else None,
    )
    logger.info(
        "loaded model=%s version=%s items=%d ranker=%s seconds=%.2f",
        name, version, model.n_items, bundle.ranker is not None, time.perf_counter() - started,
    )
    return bundle

