"""`bench online` scores its frozen comparison model after the run: the same answers it would
have given live, whatever the online model learned in between."""

from __future__ import annotations

from bench.online import _score_frozen
from online_trainer.online_model import Interaction, OnlineModel
from online_trainer.prequential import RunningMetrics
from tests.unit.online_trainer.helpers import TINY


def _batches() -> list[list[Interaction]]:
    events = [Interaction(f"u{n % 7}", f"i{(n * 5) % 23}", 1_000 + n) for n in range(240)]
    return [events[lo : lo + 40] for lo in range(0, len(events), 40)]


def test_frozen_scores_after_the_run_equal_its_scores_between_the_online_models_batches() -> None:
    online = OnlineModel(TINY, context=20)
    warmup = [Interaction(f"u{n % 7}", f"i{(n * 3) % 23}", n) for n in range(200)]
    online.learn(warmup, steps=3)
    after, live = online.frozen_copy(), online.frozen_copy()

    interleaved = RunningMetrics()
    for batch in _batches():
        interleaved.add(live.ranks(live.queries(batch, 0.5)))
        live.learn(batch, steps=0)
        online.learn(batch, steps=2)  # the online model moves on between the frozen scorings

    assert _score_frozen(after, _batches(), 0.5).summary() == interleaved.summary()
    assert 0 < interleaved.summary()["events"] < sum(map(len, _batches()))
