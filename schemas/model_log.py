"""What `model.updates` says serves: a function of each version's newest record, nothing else.

The topic is compacted and keyed by `<model>/<version>`, so compaction keeps exactly the newest
record of every version, in log order. Whatever order the trainer's publications and rollbacks
and the canaries' decisions interleave in, the serving state is read off those records alone:

- **serving**: the newest version whose record says `serving`; the older such versions, newest
  first, are its fallbacks (a version whose bytes fail verification is skipped for the next);
- **candidate**: the newest version of all, when its record says `candidate` (a newer
  publication of any kind, a promotion or a rollback of it ends the canary).

So a rollback is a `rolled_back` record for the version it removes (serving then falls to the
newest version still `serving`), and a promotion a `serving` record for the candidate. Because
the state depends on no record a compaction may remove, a scorer that reads the whole log, the
compacted log or any mix of the two holds the state the running scorers hold. A tombstone (a key
without a value) retires a version: the trainer retires versions past the fallbacks it keeps
(`retirable`), which bounds the topic.
"""

from __future__ import annotations

from dataclasses import dataclass

from schemas.model_updates import ModelUpdate, version_key

FALLBACK_VERSIONS = 8
"""Serving versions kept on the log besides the newest: how far a failed load can fall back."""


@dataclass(frozen=True)
class ServingState:
    serving: tuple[ModelUpdate, ...] = ()
    """Versions whose newest record says `serving`, newest first: the first serves, the rest
    are where a failed load falls back."""
    candidate: ModelUpdate | None = None

    @property
    def version(self) -> str | None:
        """The version that serves when every load succeeds."""
        return self.serving[0].version if self.serving else None


class ModelLog:
    """The newest record of each version of each model, as the compacted log keeps them."""

    def __init__(self) -> None:
        self._records: dict[str, dict[str, ModelUpdate]] = {}

    def apply(self, update: ModelUpdate) -> None:
        self._records.setdefault(update.model_name, {})[update.version] = update

    def retire(self, model_name: str, version: str) -> None:
        """A tombstone: the version's key is gone from the log."""
        self._records.get(model_name, {}).pop(version, None)

    def record(self, model_name: str, version: str) -> ModelUpdate | None:
        return self._records.get(model_name, {}).get(version)

    def state(self, model_name: str) -> ServingState:
        records = sorted(
            self._records.get(model_name, {}).values(),
            key=lambda u: version_key(u.version),
            reverse=True,
        )
        serving = tuple(u for u in records if u.stage == "serving")
        candidate = records[0] if records and records[0].stage == "candidate" else None
        return ServingState(serving, candidate)

    def retirable(self, model_name: str, keep: int = FALLBACK_VERSIONS) -> list[str]:
        """Versions no state can reach again: those older than the `keep + 1` newest serving
        versions (a retired version would only have been a deeper fallback)."""
        serving = self.state(model_name).serving
        if len(serving) <= keep + 1:
            return []
        oldest_kept = version_key(serving[keep].version)
        return sorted(
            (v for v in self._records.get(model_name, {}) if version_key(v) < oldest_kept),
            key=version_key,
        )
