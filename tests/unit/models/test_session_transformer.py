"""Session Transformer: causal, learns sequential patterns, trains online."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models.metrics import exclude, metrics_from_ranks, target_ranks
from models.sequence_training import SessionTrainer, keep_last_targets, make_batch
from models.sequences import Queries, UserSequences
from models.session_config import SessionTransformerConfig
from models.session_transformer import Dropout, SessionTransformer, gap_buckets

SMALL = SessionTransformerConfig(dim=32, heads=2, layers=1, max_len=16, dropout=0.0, lr=5e-3,
                                 batch_size=16, warmup_frac=0.0, eval_every=5, patience=5)


def test_positions_never_see_later_items() -> None:
    model = SessionTransformer(10, SMALL).eval()
    items = torch.tensor([[1, 2, 3, 4, 5]])
    gaps = torch.tensor([[-1, 5, 5, 5, 5]])
    changed = items.clone()
    changed[0, 3:] = torch.tensor([9, 8])
    a, b = model(items, gaps), model(changed, gaps)
    assert torch.allclose(a[0, :3], b[0, :3], atol=1e-6)
    assert not torch.allclose(a[0, 3], b[0, 3])


def test_dropout_zeroes_a_p_share_and_scales_the_rest_and_its_gradient() -> None:
    torch.manual_seed(0)
    dropout = Dropout(0.3).train()
    x = torch.full((200, 500), 2.0, requires_grad=True)
    out = dropout(x)
    kept = out != 0
    assert float(kept.float().mean()) == pytest.approx(0.7, abs=0.01)
    assert torch.allclose(out[kept], torch.tensor(2.0 / 0.7))
    (grad,) = torch.autograd.grad(out.sum(), x)
    assert torch.equal(grad != 0, kept)
    assert torch.allclose(grad[kept], torch.tensor(1.0 / 0.7))
    assert torch.equal(dropout.eval()(x), x)


def test_gap_buckets_separate_seconds_from_days() -> None:
    buckets = gap_buckets(torch.tensor([-1, 0, 1, 60, 86_400, 10**12]))
    assert buckets[0] == 0
    assert len(set(buckets[1:].tolist())) == 5
    assert int(buckets.max()) < 40


def test_each_position_predicts_the_next_item() -> None:
    batch = make_batch([np.array([1, 2, 3, 4]), np.array([5, 6])], [np.arange(4), np.arange(2)],
                       max_len=8)
    assert batch.items.tolist() == [[1, 2, 3], [5, 0, 0]]
    assert batch.targets.tolist() == [[2, 3, 4], [6, 0, 0]]


def _cyclic_data(n_users: int, n_items: int, length: int) -> UserSequences:
    rng = np.random.default_rng(0)
    items, times = [], []
    for _ in range(n_users):
        start = int(rng.integers(0, n_items))
        items.append((start + np.arange(length)) % n_items + 1)
        times.append(np.arange(length) * 60)
    return UserSequences(items, times, n_items)


def test_fit_learns_a_deterministic_successor_pattern() -> None:
    train = _cyclic_data(n_users=64, n_items=20, length=12)
    histories = [s[:-1] for s in train.items[:16]]
    queries = Queries(histories, [t[:-1] for t in train.times[:16]],
                      np.array([10_000] * 16), np.array([int(s[-1]) for s in train.items[:16]]))
    trainer = SessionTrainer(20, SMALL.model_copy(update={"epochs": 30}), torch.device("cpu"))
    report = trainer.fit(train, queries)
    assert report.best_val_ndcg10 > 0.9
    assert trainer.evaluate(queries)["hr@10"] == 1.0


def test_partial_fit_lowers_the_loss_on_repeated_micro_batches() -> None:
    train = _cyclic_data(n_users=8, n_items=12, length=10)
    trainer = SessionTrainer(12, SMALL, torch.device("cpu"))
    first = trainer.partial_fit(train.items, train.times)
    for _ in range(30):
        last = trainer.partial_fit(train.items, train.times)
    assert last < 0.5 * first


def test_item_dropout_changes_the_training_loss_only_while_training() -> None:
    train = _cyclic_data(n_users=8, n_items=12, length=10)
    batch = make_batch(train.items, train.times, max_len=SMALL.max_len)
    losses = {}
    for drop in (0.0, 0.5):
        trainer = SessionTrainer(12, SMALL.model_copy(update={"item_dropout": drop}),
                                 torch.device("cpu"))
        trainer.model.eval()
        evaluated = float(trainer.loss(batch).detach())
        trainer.model.train()
        losses[drop] = (evaluated, float(trainer.loss(batch).detach()))
    assert losses[0.5][0] == pytest.approx(losses[0.0][0], rel=1e-6)
    assert losses[0.5][1] != pytest.approx(losses[0.0][1], rel=1e-3)


def test_only_the_fresh_events_of_each_sequence_stay_targets() -> None:
    batch = make_batch([np.array([1, 2, 3, 4, 5]), np.array([6, 7, 8])],
                       [np.arange(5), np.arange(3)], max_len=8)
    keep_last_targets(batch, [4, 2], [1, 2])
    assert batch.targets[0].tolist() == [0, 0, 0, 5]
    assert batch.targets[1].tolist() == [7, 8, 0, 0]


def test_partial_fit_with_no_fresh_event_takes_no_step() -> None:
    train = _cyclic_data(n_users=4, n_items=12, length=10)
    trainer = SessionTrainer(12, SMALL, torch.device("cpu"))
    before = [p.detach().clone() for p in trainer.model.parameters()]
    assert np.isnan(trainer.partial_fit(train.items, train.times, [0, 0, 0, 0]))
    after = list(trainer.model.parameters())
    assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))
    assert not np.isnan(trainer.partial_fit(train.items, train.times, [1, 0, 0, 0]))


def test_encode_returns_one_query_vector_per_history() -> None:
    trainer = SessionTrainer(12, SMALL, torch.device("cpu"))
    vectors = trainer.encode_histories([np.array([1, 2]), np.array([3])],
                                       [np.array([0, 5]), np.array([0])])
    assert vectors.shape == (2, trainer.model.dim)


def test_encode_is_the_full_forward_at_each_rows_last_real_item() -> None:
    torch.manual_seed(1)
    for layers in (1, 3):
        config = SessionTransformerConfig(dim=32, heads=2, layers=layers, max_len=16)
        model = SessionTransformer(50, config).eval()
        items = torch.randint(1, 51, (4, 12))
        items[1, 5:] = 0  # rows of different lengths, one empty
        items[2, 1:] = 0
        items[3] = 0
        gaps = torch.randint(0, 10_000, (4, 12))
        gaps[items == 0] = -1
        last = ((items > 0).sum(dim=1).clamp(min=1) - 1).tolist()
        with torch.no_grad():
            hidden = model(items, gaps)
            expected = torch.stack([hidden[row, at] for row, at in enumerate(last)])
            assert torch.allclose(model.encode(items, gaps), expected, atol=1e-5)


def test_evaluate_ranks_exactly_as_the_full_score_matrix_does() -> None:
    train = _cyclic_data(n_users=40, n_items=30, length=9)
    trainer = SessionTrainer(30, SMALL.model_copy(update={"epochs": 3}), torch.device("cpu"))
    trainer.fit(train)
    histories = [s[:-1] for s in train.items]
    targets = np.array([int(s[-1]) for s in train.items])
    targets[0] = int(histories[0][2])  # an already-seen target never hits
    queries = Queries(histories, [t[:-1] for t in train.times], np.zeros(40, np.int64), targets)
    plain = metrics_from_ranks(target_ranks(exclude(trainer.score(queries), histories), targets))
    assert trainer.evaluate(queries, batch_size=7) == pytest.approx(plain)


def test_the_wall_clock_cap_says_at_which_epoch_it_stopped() -> None:
    train = _cyclic_data(n_users=16, n_items=12, length=8)
    capped = SMALL.model_copy(update={"epochs": 50, "time_budget_s": 1e-9})
    report = SessionTrainer(12, capped, torch.device("cpu")).fit(train)
    assert (report.epochs, report.capped_at_epoch) == (1, 1)
    free = SMALL.model_copy(update={"epochs": 2})
    assert SessionTrainer(12, free, torch.device("cpu")).fit(train).capped_at_epoch is None
