"""The session Transformer's recipe: the same rules for every dataset.

Most hyper-parameters are fixed: the :class:`SessionTransformerConfig` defaults. The others
follow statistics of the *training* sequences (never of the validation or test events), each
for a stated reason; :func:`fitted_to` applies them.

- ``max_len``: the 90th percentile of the training sequence lengths, rounded up to a multiple of
  50, within [50, 200]. Longer windows cost attention time and leave position embeddings
  untrained; shorter ones cut the long histories that carry the signal.
- ``dropout`` and ``item_lr_multiplier``, by density (the share of the user x item matrix with
  an event): sparse data (below 1%) gets dropout 0.6 and the item table trained at the full
  rate; dense data gets dropout 0.3 and the item table at a tenth of the rate. On sparse data an
  item row has few contexts to learn from and few updates as a target, so it needs the full
  rate, and the encoder the stronger dropout (SASRec chose 0.5 for the sparse Amazon data and
  0.2 for dense MovieLens; with the item dropout below, 0.6 validates better on Amazon); on
  dense data each row is a target dozens of times an epoch and overfits first at the full rate.
- ``item_dropout``, by density too: sparse data gets dropout 0.4 on the item vectors the loss
  scores (targets and negatives), dense data none. A sparse item row is learnt from a handful of
  events at the full rate and overfits them first; the dropout regularises the rows where
  ``dropout`` only reaches the encoder (eSASRec drops the item table at 0.2 on the same data;
  with 1,024 negatives, 0.4 validates best of 0.3, 0.4 and 0.5 averaged over the Amazon sets).
- ``weight_decay``, by density too: sparse data gets AdamW's decoupled weight decay 0.3,
  dense data none. The wide table of sparse data holds more parameters than there are events,
  and a rare item's row is moved by a handful of them; the decay pulls every row back towards
  zero at each step, so a row keeps only what repeated events hold up (0.3 validates best of
  0.1, 0.3, 0.5 and 1.0 on the Amazon sets; 1.0 underfits).
- The shape, also by density. Sparse data gets the field's sampled-softmax SASRec shape: one
  block of width 256 with one head and a 20-epoch budget. Its histories are short (a second
  block has little order to model) and most of what it knows sits in the item table, which a
  wider row holds better; a wide table fits sparse data within a few epochs and then overfits,
  so the cosine schedule ends there. Dense data keeps the defaults (two blocks of width 64,
  75 epochs): long histories need depth more than width. Both keep the default 1,024 sampled
  negatives: the field's 256 leave the softmax too easy on a catalog of tens of thousands of
  items, and 2,048 validate no better. A shape field the caller set explicitly
  (``streamrec eval --epochs``) is kept.
- ``batch_size``: the largest power of two up to 128 that still gives at least 25 optimisation
  steps per epoch, so that the epoch budget means enough updates on data with few users.
- ``lr``: 1e-3 at 700 predicted positions per step, scaled with the square root of the mean
  positions a step predicts (square-root scaling of Adam's rate with the batch): a step over
  a few long histories averages more gradient than one over many short ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from models.sequences import UserSequences
from models.session_config import SessionTransformerConfig

MIN_LEN, MAX_LEN, LEN_STEP = 50, 200, 50
SPARSE_DENSITY = 0.01
SPARSE_DROPOUT, DENSE_DROPOUT = 0.6, 0.3
SPARSE_ITEM_LR, DENSE_ITEM_LR = 1.0, 0.1
SPARSE_ITEM_DROPOUT, DENSE_ITEM_DROPOUT = 0.4, 0.0
SPARSE_WEIGHT_DECAY, DENSE_WEIGHT_DECAY = 0.3, 0.0
SPARSE_SHAPE = {"dim": 256, "layers": 1, "heads": 1, "epochs": 20}
MAX_BATCH, MIN_STEPS_PER_EPOCH = 128, 25
BASE_LR, BASE_POSITIONS = 1e-3, 700


@dataclass(frozen=True)
class DataShape:
    """The statistics of the training sequences the recipe reads."""

    users: int
    items: int
    events: int
    p90_length: float
    lengths: tuple[int, ...]
    """Every training sequence's length."""

    def positions_per_user(self, max_len: int) -> float:
        """Mean predicted positions per trainable user with a window of ``max_len`` events."""
        trainable = [min(n - 1, max_len) for n in self.lengths if n >= 2]
        return float(np.mean(trainable)) if trainable else 1.0

    @property
    def density(self) -> float:
        """Share of the user x item matrix with an event."""
        return self.events / max(1, self.users * self.items)


def data_shape(train: UserSequences) -> DataShape:
    lengths = np.array([len(s) for s in train.items], dtype=np.int64)
    users = int((lengths >= 2).sum())
    return DataShape(users, train.n_items, int(lengths.sum()),
                     float(np.percentile(lengths, 90)) if len(lengths) else 0.0,
                     tuple(int(n) for n in lengths))


def fitted_to(config: SessionTransformerConfig, train: UserSequences) -> SessionTransformerConfig:
    """``config`` with the data-derived hyper-parameters set from ``train``."""
    shape = data_shape(train)
    max_len = min(MAX_LEN, max(MIN_LEN, LEN_STEP * math.ceil(shape.p90_length / LEN_STEP)))
    sparse = shape.density < SPARSE_DENSITY
    dropout = SPARSE_DROPOUT if sparse else DENSE_DROPOUT
    fits = max(1, shape.users // MIN_STEPS_PER_EPOCH)
    batch_size = min(MAX_BATCH, 2 ** int(math.log2(fits)))
    positions = batch_size * shape.positions_per_user(max_len)
    lr = BASE_LR * math.sqrt(positions / BASE_POSITIONS)
    return config.model_copy(update={
        "max_len": max_len, "dropout": dropout, "batch_size": batch_size, "lr": round(lr, 6),
        "item_lr_multiplier": SPARSE_ITEM_LR if sparse else DENSE_ITEM_LR,
        "item_dropout": SPARSE_ITEM_DROPOUT if sparse else DENSE_ITEM_DROPOUT,
        "weight_decay": SPARSE_WEIGHT_DECAY if sparse else DENSE_WEIGHT_DECAY,
        **{k: v for k, v in (SPARSE_SHAPE if sparse else {}).items()
           if k not in config.model_fields_set},
    })
