"""The serving state read off model.updates: the same on the whole log and on any compaction of
it, and what the operator's view of the control steps (tests/model_oracle.py) says serves."""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.model_log import ModelLog, ServingState
from schemas.model_updates import ModelUpdate, parse_update_key
from tests.model_oracle import ServingOracle, steps

MODEL = "session"
KEEP = 2

Entry = tuple[str, ModelUpdate | None]
"""(key, record), None for a tombstone."""


def _record(version: str, stage: str) -> ModelUpdate:
    return ModelUpdate.model_validate(
        {"model_name": MODEL, "version": version, "kind": "full", "stage": stage,
         "sha256": "0" * 64, "published_at": time.time()}
    )


def _fold(entries: list[Entry]) -> ServingState:
    log = ModelLog()
    for key, record in entries:
        if record is None:
            log.retire(*parse_update_key(key.encode()))
        else:
            log.apply(record)
    return log.state(MODEL)


def _versions(state: ServingState) -> tuple[str | None, str | None]:
    return state.version, state.candidate.version if state.candidate else None


class Driver:
    """Turns steps into records as the trainer and the canary do: each acts on the state the
    log gives it (the canary on its candidate, the trainer on what serves), then the trainer
    retires what no state can reach any more."""

    def __init__(self) -> None:
        self.log = ModelLog()
        self.entries: list[Entry] = []
        self.oracle = ServingOracle(keep=KEEP)

    def step(self, name: str) -> None:
        state = self.log.state(MODEL)
        oracle = self.oracle
        if name in ("publish", "candidate", "retrain", "retrain_candidate"):
            stage = "candidate" if name.endswith("candidate") else "serving"
            version = oracle.next_version(major=name.startswith("retrain"))
            self._send(_record(version, stage))
            oracle.published(version, stage)
        elif name in ("promote", "canary_rollback"):
            if state.candidate is None:
                return
            stage = "serving" if name == "promote" else "rolled_back"
            self._send(state.candidate.model_copy(update={"stage": stage}))
            oracle.promoted() if name == "promote" else oracle.canary_rolled_back()
        elif len(state.serving) >= 2:  # the trainer rolls back only to an earlier version
            self._send(state.serving[0].model_copy(update={"stage": "rolled_back"}))
            oracle.trainer_rolled_back()
        for version in self.log.retirable(MODEL, keep=KEEP):
            self.log.retire(MODEL, version)
            self.entries.append((f"{MODEL}/{version}", None))

    def _send(self, record: ModelUpdate) -> None:
        self.log.apply(record)
        self.entries.append((record.log_key, record))


def compacted(entries: list[Entry], kept: list[bool], tombstones_gone: bool) -> list[Entry]:
    """What a compaction may leave: every key's last entry (its tombstone perhaps removed too,
    once `delete.retention.ms` passed), any of the earlier ones, in log order."""
    last = {key: i for i, (key, _) in enumerate(entries)}
    out = []
    for i, (key, record) in enumerate(entries):
        if last[key] == i:
            if record is not None or not tombstones_gone:
                out.append((key, record))
        elif kept[i % len(kept)]:
            out.append((key, record))
    return out


@settings(max_examples=300, deadline=None)
@given(steps(30), st.lists(st.booleans(), min_size=1, max_size=40), st.booleans())
def test_the_whole_log_any_compaction_and_the_operators_view_agree(
    names: list[str], kept: list[bool], tombstones_gone: bool
) -> None:
    driver = Driver()
    for name in names:
        driver.step(name)
        expected = (driver.oracle.serving, driver.oracle.candidate)
        assert _versions(driver.log.state(MODEL)) == expected, names
        assert _versions(_fold(driver.entries)) == expected
        assert _versions(_fold(compacted(driver.entries, kept, tombstones_gone))) == expected


def test_a_canary_rollback_leaves_the_serving_version_serving_on_a_compacted_log() -> None:
    entries: list[Entry] = [
        (u.log_key, u)
        for u in (_record("1.0", "serving"), _record("2.0", "serving"),
                  _record("2.1", "candidate"), _record("2.1", "rolled_back"))
    ]
    assert _versions(_fold(compacted(entries, [False], False))) == ("2.0", None)


def test_the_trainers_rollback_returns_to_the_version_before_whatever_happened_between() -> None:
    records = [_record("1.0", "serving"), _record("1.1", "candidate"),
               _record("1.1", "rolled_back"), _record("1.2", "serving"),
               _record("1.2", "rolled_back")]
    assert _versions(_fold([(u.log_key, u) for u in records])) == ("1.0", None)


def test_only_versions_past_the_kept_fallbacks_are_retirable() -> None:
    log = ModelLog()
    for version, stage in (("1.0", "serving"), ("1.1", "rolled_back"), ("1.2", "serving"),
                           ("1.3", "candidate"), ("1.4", "serving"), ("1.5", "serving")):
        log.apply(_record(version, stage))
    assert log.retirable(MODEL, keep=2) == ["1.0", "1.1"]
    assert log.retirable(MODEL, keep=3) == []
