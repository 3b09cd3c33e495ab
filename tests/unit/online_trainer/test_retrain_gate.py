"""A drift retrain is judged against the version serving when it began, on the retrain's own
validation queries: a retrain after a real change beats it, one after a false alarm does not."""

from __future__ import annotations

import random

from online_trainer.online_model import Interaction, OnlineModel
from online_trainer.retrain import full_retrain
from tests.unit.online_trainer.helpers import TINY

STRONG = TINY.model_copy(update={"epochs": 8})


def _stream(n: int, permuted: bool = False, users: int = 40, items: int = 60
            ) -> list[Interaction]:
    """Each user walks the catalogue in steps of one from their own start: the next item follows
    from the last. `permuted`: every item id names another item (the demo's drift)."""
    rng = random.Random(3)
    starts = [rng.randrange(items) for _ in range(users)]
    names = list(range(items))
    if permuted:
        rng.shuffle(names)
    return [Interaction(f"u{k % users}", f"i{names[(starts[k % users] + k // users) % items]}",
                        1_700_000_000 + k) for k in range(n)]


def _serving(interactions: list[Interaction]) -> OnlineModel:
    return full_retrain(interactions, OnlineModel(STRONG), STRONG).model


def test_a_retrain_after_a_real_change_beats_the_serving_version() -> None:
    serving = _serving(_stream(1200))
    result = full_retrain(_stream(1200, permuted=True), serving, STRONG, incumbent=serving)
    assert result.shared is not None
    retrained, before = result.shared
    assert retrained["hr@10"] > before["hr@10"] and result.beats_incumbent(), result.shared


def test_a_short_retrain_after_a_false_alarm_loses_to_the_serving_version() -> None:
    stream = _stream(1200)
    serving = _serving(stream)
    weak = TINY.model_copy(update={"epochs": 1})
    result = full_retrain(stream[-120:], serving, weak, incumbent=serving)
    assert result.shared is not None
    retrained, before = result.shared
    assert before["hr@10"] > retrained["hr@10"] and not result.beats_incumbent(), result.shared


def test_without_a_serving_version_every_retrain_is_published() -> None:
    result = full_retrain(_stream(500), OnlineModel(TINY), TINY)
    assert result.shared is None and result.beats_incumbent()
