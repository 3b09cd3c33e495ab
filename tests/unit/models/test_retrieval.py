"""Retrieval: ANN recall against exact search, and MIPS over a trained model's item vectors."""

from __future__ import annotations

import threading

import faiss
import numpy as np
import numpy.typing as npt
import torch

from models.retrieval import (
    FaissItemIndex,
    RetrievalConfig,
    mips_item_vectors,
    mips_queries,
    recall_at,
)
from models.sequence_training import SessionTrainer
from models.sequences import Queries
from models.session_config import SessionTransformerConfig


def _realistic_embeddings(n: int, dim: int, seed: int = 0) -> np.ndarray:
    """Clustered, low-rank vectors with long-tailed norms, like trained item tables."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(64, dim))
    assignment = rng.integers(0, 64, n)
    vectors = centers[assignment] + 0.5 * rng.normal(size=(n, dim))
    popularity = rng.zipf(1.5, n).clip(max=100)
    out: npt.NDArray[np.float32] = (vectors * np.log1p(popularity)[:, None]).astype(np.float32)
    return out


def _exact_top(items: np.ndarray, queries: np.ndarray, n: int) -> np.ndarray:
    return np.argsort(-(queries @ items.T), axis=1)[:, :n]


def test_small_catalog_uses_exact_search() -> None:
    items = _realistic_embeddings(500, 16)
    queries = _realistic_embeddings(20, 16, seed=1)
    index = FaissItemIndex()
    index.build(np.arange(500), items)
    _, ids = index.search(queries, 50)
    assert index.kind == "flat"
    assert recall_at(ids, _exact_top(items, queries, 50)) == 1.0


def test_hnsw_recall_against_exact_search() -> None:
    items = _realistic_embeddings(20_000, 32)
    queries = _realistic_embeddings(50, 32, seed=1)
    index = FaissItemIndex(RetrievalConfig(exact_threshold=1_000))
    index.build(np.arange(20_000) + 1, items)
    _, ids = index.search(queries, 200)
    assert index.kind == "hnsw"
    assert recall_at(ids - 1, _exact_top(items, queries, 200)) >= 0.95


def test_ivf_recall_against_exact_search() -> None:
    items = _realistic_embeddings(20_000, 32)
    queries = _realistic_embeddings(50, 32, seed=1)
    index = FaissItemIndex(RetrievalConfig(kind="ivf", ivf_nprobe=160))
    index.build(np.arange(20_000), items)
    _, ids = index.search(queries, 200)
    assert recall_at(ids, _exact_top(items, queries, 200)) >= 0.9


def test_bias_folded_into_mips_returns_the_models_top_items() -> None:
    rng = np.random.default_rng(3)
    table = rng.normal(size=(300, 8)).astype(np.float32)
    bias = (3 * rng.normal(size=300)).astype(np.float32)
    hidden = rng.normal(size=(5, 8)).astype(np.float32)
    index = FaissItemIndex()
    index.build(np.arange(300), mips_item_vectors(table, bias))
    scores, ids = index.search(mips_queries(hidden), 10)
    expected = np.argsort(-(hidden @ table.T + bias), axis=1)[:, :10]
    assert np.array_equal(ids, expected)
    assert np.allclose(scores[:, 0], (hidden @ table.T + bias).max(axis=1), atol=1e-4)


def test_searches_from_another_thread_than_the_build_use_the_configured_threads() -> None:
    # OpenMP thread counts are per thread: the scorer builds in its loader thread and searches
    # in its request thread. 3 differs from any default on the 2-core machines this runs on.
    items = _realistic_embeddings(500, 16)
    index = FaissItemIndex(RetrievalConfig(threads=3))
    builder = threading.Thread(target=index.build, args=(np.arange(500), items))
    builder.start()
    builder.join()
    seen: list[int] = []

    def search() -> None:
        index.search(items[:4], 10)
        seen.append(faiss.omp_get_max_threads())

    searcher = threading.Thread(target=search)
    searcher.start()
    searcher.join()

    assert seen == [3]


def test_ann_over_a_trained_models_item_vectors_returns_its_top_items() -> None:
    config = SessionTransformerConfig(dim=16, heads=2, layers=1, max_len=8, dropout=0.0)
    trainer = SessionTrainer(30, config, torch.device("cpu"))
    sequences = [np.array([1, 2, 3, 4]), np.array([2, 3, 4, 5])]
    for _ in range(5):
        trainer.partial_fit(sequences, [np.arange(4) * 60] * 2)
    table = trainer.model.item_vectors().detach().float().numpy()[1:]
    bias = trainer.model.item_bias.detach().float().numpy()[1:]
    index = FaissItemIndex()
    index.build(np.arange(1, 31, dtype=np.int64), mips_item_vectors(table, bias))
    queries = Queries([np.array([1, 2, 3]), np.array([4])], [np.array([0, 1, 2]), np.array([0])],
                      np.array([10, 10]), np.array([4, 5]))
    query_vectors = trainer.encode_histories(queries.histories, queries.history_times)
    _, found = index.search(mips_queries(query_vectors.numpy()), 10)
    expected = np.argsort(-trainer.score(queries)[:, 1:], axis=1)[:, :10] + 1
    assert np.array_equal(found, expected)
