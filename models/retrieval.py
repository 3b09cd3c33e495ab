"""Candidate retrieval: (approximate) maximum inner product search over item vectors with faiss.

:class:`CandidateIndex` is the protocol the scorer depends on; :class:`FaissItemIndex` is the
implementation. Index kind follows the catalog size: exact ``IndexFlatIP`` below
``exact_threshold`` items (exact search is both fast and perfect there), HNSW above it (or IVF
when configured). Item ids are the model's integer item indices, stored with ``IndexIDMap2`` so
a rebuilt or grown index keeps returning the same ids.

The session Transformer scores ``h . e_j + b_j``; :func:`mips_item_vectors` and
:func:`mips_queries` fold the bias into an extra coordinate so that inner-product search returns
exactly the model's top items.

Scorer usage::

    index = FaissItemIndex(RetrievalConfig())
    index.build(item_ids, mips_item_vectors(table, bias))
    scores, ids = index.search(mips_queries(query_vectors), n=300)
"""

from __future__ import annotations

import logging
import threading
from typing import Literal, Protocol

import faiss
import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field

log = logging.getLogger(__name__)
_omp = threading.local()
FloatArray = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.int64]


class CandidateIndex(Protocol):
    """What the scorer needs from a retrieval index."""

    def build(self, ids: IntArray, vectors: FloatArray) -> None:
        """Replaces the contents with ``vectors[i]`` stored under ``ids[i]``."""

    def search(self, queries: FloatArray, n: int) -> tuple[FloatArray, IntArray]:
        """Top-``n`` (scores, ids) per query row; missing slots have id -1."""

    def __len__(self) -> int:
        """Number of indexed items."""


class RetrievalConfig(BaseModel):
    """How the item index is built and searched."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["auto", "flat", "hnsw", "ivf"] = Field(
        "auto", description="auto = flat below exact_threshold, hnsw above."
    )
    exact_threshold: int = Field(50_000, ge=1, description="Catalog size for exact search.")
    hnsw_m: int = Field(32, ge=4, description="HNSW graph degree.")
    hnsw_ef_construction: int = Field(200, ge=8, description="HNSW build beam width.")
    hnsw_ef_search: int = Field(512, ge=8, description="HNSW search beam (>= n requested).")
    ivf_lists_per_sqrt: float = Field(4.0, gt=0, description="nlist = this * sqrt(n).")
    ivf_nprobe: int = Field(32, ge=1, description="IVF lists probed per query.")
    threads: int = Field(0, ge=0, description="faiss OpenMP threads; 0 keeps the default.")


class FaissItemIndex:
    """Inner-product index over item vectors; see the module docstring."""

    def __init__(self, config: RetrievalConfig | None = None) -> None:
        self.config = config or RetrievalConfig()
        self._index: faiss.Index | None = None
        self._hnsw: faiss.IndexHNSWFlat | None = None
        self.kind = "empty"

    def __len__(self) -> int:
        return 0 if self._index is None else int(self._index.ntotal)

    def _choose_kind(self, n: int) -> str:
        if self.config.kind != "auto":
            return self.config.kind
        return "flat" if n < self.config.exact_threshold else "hnsw"

    def _use_configured_threads(self) -> None:
        # OpenMP's thread count is a per-thread setting: set once in the thread that loaded the
        # index, it left searches from any other thread at the default (every core). In an
        # offline harness the idle OpenMP workers then spun after each search, doubling its CPU.
        wanted = self.config.threads
        if wanted and getattr(_omp, "threads", None) != wanted:
            faiss.omp_set_num_threads(wanted)
            _omp.threads = wanted

    def build(self, ids: IntArray, vectors: FloatArray) -> None:
        self._use_configured_threads()
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        if len(ids) != len(vectors):
            raise ValueError(f"{len(ids)} ids for {len(vectors)} vectors")
        dim = vectors.shape[1]
        self._hnsw = None
        self.kind = self._choose_kind(len(ids))
        base = self._make_base(self.kind, dim, len(ids))
        if not base.is_trained:
            base.train(vectors)
        index = faiss.IndexIDMap2(base)
        index.add_with_ids(vectors, ids)
        self._index = index
        log.info("built index kind=%s items=%d dim=%d", self.kind, len(ids), dim)

    def _make_base(self, kind: str, dim: int, n: int) -> faiss.Index:
        cfg = self.config
        if kind == "flat":
            return faiss.IndexFlatIP(dim)
        if kind == "hnsw":
            hnsw = faiss.IndexHNSWFlat(dim, cfg.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            hnsw.hnsw.efConstruction = cfg.hnsw_ef_construction
            self._hnsw = hnsw
            return hnsw
        nlist = max(1, min(n // 39, int(cfg.ivf_lists_per_sqrt * np.sqrt(n))))
        ivf = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, nlist, faiss.METRIC_INNER_PRODUCT)
        ivf.nprobe = min(nlist, cfg.ivf_nprobe)
        return ivf

    def search(self, queries: FloatArray, n: int) -> tuple[FloatArray, IntArray]:
        if self._index is None:
            raise RuntimeError("search before build")
        self._use_configured_threads()
        n = min(n, len(self))
        if self._hnsw is not None:  # the beam must be at least as wide as the answer
            self._hnsw.hnsw.efSearch = max(n, self.config.hnsw_ef_search)
        scores, ids = self._index.search(_rows(queries), n)
        return scores.astype(np.float32), ids.astype(np.int64)


def _rows(queries: FloatArray) -> FloatArray:
    return np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32)


def mips_item_vectors(table: FloatArray, bias: FloatArray) -> FloatArray:
    """Item vectors with the bias appended, so that ``[h, 1] . [e, b] = h . e + b``."""
    return np.concatenate([table, bias[:, None]], axis=1).astype(np.float32)


def mips_queries(queries: FloatArray) -> FloatArray:
    """Query vectors with a constant 1 appended (pairs with :func:`mips_item_vectors`)."""
    ones = np.ones((len(queries), 1), dtype=np.float32)
    return np.concatenate([_rows(queries), ones], axis=1)


def recall_at(approx_ids: IntArray, exact_ids: IntArray) -> float:
    """Mean share of exact top-n ids that the approximate search also returned."""
    hits = [len(np.intersect1d(a[a >= 0], e)) / len(e) for a, e in zip(approx_ids, exact_ids,
                                                                          strict=True)]
    return float(np.mean(hits))
