"""Arms of the user-level experiment: stable, weighted, and as few moves as weights change."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from serving.experiment import Experiment, ExperimentArm
from serving.settings import ServeSettings

USERS = [f"user-{n}" for n in range(20_000)]


def experiment(*weights: float, name: str = "e", salt: str | None = None) -> Experiment:
    arms = [ExperimentArm(name=f"a{n}", policy="model", weight=w) for n, w in enumerate(weights)]
    return Experiment(name=name, salt=salt, arms=tuple(arms))


def assignment(e: Experiment) -> dict[str, str]:
    return {u: e.assign(u).name for u in USERS}


def shares(assigned: dict[str, str]) -> dict[str, float]:
    counts: dict[str, int] = {}
    for arm in assigned.values():
        counts[arm] = counts.get(arm, 0) + 1
    return {arm: n / len(assigned) for arm, n in counts.items()}


def moved(before: dict[str, str], after: dict[str, str]) -> list[tuple[str, str]]:
    return [(before[u], after[u]) for u in USERS if before[u] != after[u]]


def test_a_user_stays_in_one_arm_and_arms_get_their_weights_share() -> None:
    e = experiment(1.0, 3.0)
    assigned = assignment(e)
    assert assignment(experiment(1.0, 3.0)) == assigned  # another scorer, another start
    got = shares(assigned)
    assert got["a0"] == pytest.approx(0.25, abs=0.01)
    assert got["a1"] == pytest.approx(0.75, abs=0.01)


def test_raising_one_weight_only_moves_users_into_that_arm_and_no_more_than_needed() -> None:
    before = assignment(experiment(0.5, 0.3, 0.2))
    after = assignment(experiment(0.5, 0.3, 0.4))  # a2: 0.2 -> 0.4 of 1.2 = 1/3
    changes = moved(before, after)
    assert changes and all(to == "a2" for _, to in changes)
    assert len(changes) / len(USERS) == pytest.approx(1 / 3 - 0.2, abs=0.01)


def test_lowering_one_weight_only_moves_users_out_of_that_arm() -> None:
    before = assignment(experiment(0.5, 0.3, 0.2))
    after = assignment(experiment(0.5, 0.1, 0.2))
    assert all(source == "a1" for source, _ in moved(before, after))


def test_two_arms_move_exactly_the_change_of_share() -> None:
    before = assignment(experiment(0.5, 0.5))
    after = assignment(experiment(0.3, 0.7))
    changes = moved(before, after)
    assert all(change == ("a0", "a1") for change in changes)
    assert len(changes) / len(USERS) == pytest.approx(0.2, abs=0.01)


def test_scaling_every_weight_moves_nobody_and_an_arm_at_zero_only_loses_its_users() -> None:
    base = assignment(experiment(1.0, 2.0, 3.0))
    assert assignment(experiment(10.0, 20.0, 30.0)) == base
    without = assignment(experiment(1.0, 0.0, 3.0))
    assert all(source == "a1" for source, _ in moved(base, without))
    assert "a1" not in without.values()


def test_a_new_salt_draws_everyone_afresh() -> None:
    first = assignment(experiment(1.0, 1.0, salt="s1"))
    second = assignment(experiment(1.0, 1.0, salt="s2"))
    assert len(moved(first, second)) / len(USERS) == pytest.approx(0.5, abs=0.02)
    assert assignment(experiment(1.0, 1.0, name="s1")) == first  # no salt: the name


def test_a_frozen_arm_names_its_version_and_only_it_does() -> None:
    with pytest.raises(ValidationError, match="frozen"):
        ExperimentArm(name="f", policy="frozen")
    with pytest.raises(ValidationError, match="frozen"):
        ExperimentArm(name="m", policy="model", version="1.0")
    e = Experiment(arms=(ExperimentArm(name="f", policy="frozen", version="1.0"),
                         ExperimentArm(name="z", policy="frozen", version="2.0", weight=0.0)))
    assert e.pinned == frozenset({"1.0"})


def test_arms_must_be_named_apart_and_assign_someone() -> None:
    arm = ExperimentArm(name="a", policy="model")
    with pytest.raises(ValidationError, match="differ"):
        Experiment(arms=(arm, arm))
    with pytest.raises(ValidationError, match="positive"):
        Experiment(arms=(arm.model_copy(update={"weight": 0.0}),))


def test_the_scorers_settings_read_the_arms_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STREAMREC_EXPERIMENT__NAME", "live-1")
    monkeypatch.setenv("STREAMREC_EXPERIMENT__ARMS", '[{"name": "m", "policy": "model", '
                       '"weight": 3}, {"name": "f", "policy": "frozen", "version": "1.0"}]')
    configured = ServeSettings().experiment
    assert configured.name == "live-1" and configured.pinned == frozenset({"1.0"})
    assert [(a.name, a.weight) for a in configured.arms] == [("m", 3.0), ("f", 1.0)]
    monkeypatch.delenv("STREAMREC_EXPERIMENT__NAME")
    monkeypatch.delenv("STREAMREC_EXPERIMENT__ARMS")
    assert [a.policy for a in ServeSettings().experiment.arms] == ["ranker"]
