"""Publishing session Transformer versions and serving from them (encode -> ANN -> rank)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from models.ranker import DLRMConfig, DLRMRanker
from models.retrieval import FaissItemIndex, mips_queries
from models.sequence_training import SessionTrainer
from models.sequences import Queries
from models.session_checkpoint import SessionPublisher, index_payload, load_trainer
from models.session_config import SessionTransformerConfig
from models.store import ModelStore

CONFIG = SessionTransformerConfig(dim=16, heads=2, layers=1, max_len=8, dropout=0.0)
SEQS = [np.array([1, 2, 3, 4]), np.array([2, 3, 4, 5])]
TIMES = [np.arange(4) * 60, np.arange(4) * 60]


def _queries() -> Queries:
    return Queries([np.array([1, 2, 3]), np.array([4])], [np.array([0, 1, 2]), np.array([0])],
                   np.array([10, 10]), np.array([4, 5]))


def test_delta_publication_reloads_to_the_trained_model(tmp_path: Path) -> None:
    store = ModelStore(tmp_path)
    publisher = SessionPublisher(store)
    trainer = SessionTrainer(5, CONFIG, torch.device("cpu"))
    ids = {str(k): k for k in range(1, 6)}
    assert publisher.publish(trainer, metrics={}, window={"start": 0, "end": 1},
                             item_ids=ids) == "1.0"
    trainer.partial_fit(SEQS, TIMES)
    trainer.grow_items(7)  # two ids admitted live
    version = publisher.publish(trainer, metrics={"ndcg@10": 0.5},
                                window={"start": 0, "end": 2}, item_ids=ids)
    assert version == "1.1"

    restored, manifest = load_trainer(store)
    assert manifest.kind == "delta" and manifest.parent == "1.0"
    assert restored.model.n_items == 7
    assert np.allclose(restored.score(_queries()), trainer.score(_queries()), atol=1e-6)


def test_ann_over_published_vectors_returns_the_models_top_items() -> None:
    trainer = SessionTrainer(30, CONFIG, torch.device("cpu"))
    for _ in range(5):
        trainer.partial_fit(SEQS, TIMES)
    ids, vectors = index_payload(trainer)
    index = FaissItemIndex()
    index.build(ids, vectors)
    queries = _queries()
    query_vectors = trainer.encode_histories(queries.histories, queries.history_times)
    _, found = index.search(mips_queries(query_vectors.numpy()), 10)
    expected = np.argsort(-trainer.score(queries)[:, 1:], axis=1)[:, :10] + 1
    assert np.array_equal(found, expected)

    ranker = DLRMRanker(DLRMConfig(n_dense=4, n_sparse=2, dim=CONFIG.dim)).eval()
    table = trainer.model.item_vectors().detach()
    scores = ranker.score_candidates(query_vectors[0], table[torch.from_numpy(found[0])],
                                     torch.zeros(10, 4))
    assert scores.shape == (10,)
