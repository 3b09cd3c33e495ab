"""The logged-feature ranker learns what retrieval order misses, and the gate tells."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models.logged_ranker import (
    SCORE_BUCKETS,
    GradedList,
    LoggedRanker,
    gate,
    graded_ndcg_at_10,
)

N_FEATURES = 4


def _lists(n: int, seed: int, signal: bool = True) -> list[GradedList]:
    """Lists of 10 shown candidates in retrieval order; with `signal`, the clicked one is the
    candidate with the highest column 2 (which the retriever score does not know)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        vectors = rng.normal(size=(10, N_FEATURES)).astype(np.float32)
        vectors[:, 0] = np.sort(rng.normal(size=10))[::-1]  # retrieval order
        grades = np.zeros(10, dtype=np.int64)
        grades[int(np.argmax(vectors[:, 2])) if signal else int(rng.integers(10))] = 1
        out.append(GradedList(vectors, grades))
    return out


def _trained(lists: list[GradedList]) -> LoggedRanker:
    ranker = LoggedRanker(N_FEATURES)
    for _ in range(8):
        for lo in range(0, len(lists), 64):
            ranker.partial_fit(lists[lo : lo + 64])
    return ranker


def test_an_untrained_ranker_orders_exactly_as_retrieval() -> None:
    lists = _lists(20, seed=1)
    ranker = LoggedRanker(N_FEATURES)
    for item in lists:
        assert list(np.argsort(-ranker.score(item.vectors))) == list(range(10))


def test_micro_batches_teach_it_a_signal_and_the_gate_promotes_it() -> None:
    ranker = _trained(_lists(300, seed=2))
    decision = gate(ranker, _lists(100, seed=3))
    assert decision.promote, decision
    assert decision.ranker_ndcg > decision.retrieval_ndcg + 0.2


def test_without_a_signal_the_gate_keeps_retrieval_order() -> None:
    ranker = _trained(_lists(300, seed=4, signal=False))
    decision = gate(ranker, _lists(100, seed=5, signal=False), min_gain=0.02)
    assert not decision.promote and decision.reason == "does not beat retrieval order"


def test_too_few_labelled_lists_never_promote() -> None:
    ranker = _trained(_lists(300, seed=2))
    decision = gate(ranker, _lists(10, seed=3), min_lists=50)
    assert not decision.promote and decision.lists == 10


def test_a_stored_ranker_scores_as_the_one_it_was_saved_from() -> None:
    ranker = _trained(_lists(64, seed=6))
    again = LoggedRanker.from_tensors(ranker.tensors(), ranker.manifest_config())
    vectors = _lists(1, seed=7)[0].vectors
    np.testing.assert_array_equal(again.score(vectors), ranker.score(vectors))


def test_graded_ndcg_rewards_the_stronger_act_first() -> None:
    item = GradedList(np.zeros((3, N_FEATURES), np.float32), np.array([1, 3, 0]))
    best = graded_ndcg_at_10([item], [np.array([0.0, 1.0, -1.0], np.float32)])
    worse = graded_ndcg_at_10([item], [np.array([1.0, 0.0, -1.0], np.float32)])
    assert best == 1.0 and worse < best


def test_on_cpu_it_scores_eagerly_without_graphs() -> None:
    ranker = LoggedRanker(N_FEATURES, device=torch.device("cpu"))
    ranker.capture()
    ranker.score(_lists(1, seed=8)[0].vectors)
    assert ranker.device.type == "cpu" and ranker._graphs.replays == 0


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@needs_cuda
def test_on_cuda_bf16_training_learns_the_signal_and_graphs_score_like_eager() -> None:
    ranker = LoggedRanker(N_FEATURES, device=torch.device("cuda"))
    lists = _lists(300, seed=2)
    for _ in range(8):
        for lo in range(0, len(lists), 64):
            ranker.partial_fit(lists[lo : lo + 64])
    held_back = _lists(100, seed=3)
    decision = gate(ranker, held_back)
    assert decision.promote and decision.ranker_ndcg > decision.retrieval_ndcg + 0.2, decision
    assert ranker._graphs.replays == len(held_back)  # each list of 10 padded to 64 rows
    vectors = np.concatenate([item.vectors for item in held_back])  # 1,000 rows: the 1,024 graph
    graphed = ranker.score(vectors)
    assert ranker._graphs.replays == len(held_back) + 1
    on_cpu = LoggedRanker.from_tensors(
        ranker.tensors(), ranker.manifest_config(), torch.device("cpu")
    )
    np.testing.assert_allclose(graphed, on_cpu.score(vectors), rtol=1e-4, atol=1e-4)


@needs_cuda
def test_on_cuda_a_loaded_ranker_captures_every_bucket_before_its_first_request() -> None:
    trained = LoggedRanker(N_FEATURES, device=torch.device("cuda"))
    trained.partial_fit(_lists(64, seed=9))
    served = LoggedRanker.from_tensors(
        trained.tensors(), trained.manifest_config(), torch.device("cuda")
    )
    served.capture()
    assert served._graphs.replays == len(SCORE_BUCKETS)
    vectors = _lists(30, seed=10)
    scores = served.score(np.concatenate([item.vectors for item in vectors]))  # 300 rows
    np.testing.assert_allclose(
        scores, trained.score(np.concatenate([item.vectors for item in vectors])), rtol=1e-5,
        atol=1e-5,
    )
