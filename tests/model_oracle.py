"""What an operator expects to serve after a sequence of model control steps: the reference the
model.updates property tests compare against. It keeps the history as an operator thinks of it
(a stack of the versions that served, one candidate), not as records, so it shares nothing with
schemas/model_log.py, which reads the state off the records.

Steps: `publish` (a gated online version straight to serving), `candidate` (one for the canary),
`retrain` / `retrain_candidate` (a new major version, either way), `promote` and
`canary_rollback` (the canary's decisions on the candidate), `trainer_rollback` (the drift
policy takes the serving version out).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

STEPS = (
    "publish", "candidate", "retrain", "retrain_candidate", "promote", "canary_rollback",
    "trainer_rollback",
)


def steps(max_size: int) -> st.SearchStrategy[list[str]]:
    return st.lists(st.sampled_from(STEPS), min_size=1, max_size=max_size)


@dataclass
class ServingOracle:
    keep: int | None = None
    """How many earlier serving versions a rollback can return to (None: all)."""
    served: list[str] = field(default_factory=list)
    """Versions that served and were not rolled back, oldest first: the last one serves."""
    candidate: str | None = None
    last: tuple[int, int] = (0, 0)

    @property
    def serving(self) -> str | None:
        return self.served[-1] if self.served else None

    def next_version(self, major: bool) -> str:
        """The trainer's numbering: past every version published so far."""
        a, b = self.last
        self.last = (a + 1, 0) if major or a == 0 else (a, b + 1)
        return f"{self.last[0]}.{self.last[1]}"

    def published(self, version: str, stage: str) -> None:
        if stage == "serving":
            self._serve(version)
            self.candidate = None  # a newer version serving ends the canary
        else:
            self.candidate = version

    def promoted(self) -> None:
        assert self.candidate is not None
        self._serve(self.candidate)
        self.candidate = None

    def canary_rolled_back(self) -> None:
        self.candidate = None

    def trainer_rolled_back(self) -> None:
        self.served.pop()

    def _serve(self, version: str) -> None:
        self.served.append(version)
        if self.keep is not None:
            del self.served[: -(self.keep + 1)]
