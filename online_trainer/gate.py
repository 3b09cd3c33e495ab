"""The validation gate: a candidate is published only if it is not worse than the serving model
on the most recent held-out events by more than a margin.

Held-out means scored before either model trained on them: each micro-batch is scored by the
candidate (prequentially, before it learns) and by a frozen copy of the serving version, so both
windows cover exactly the same events.
"""

from __future__ import annotations

from dataclasses import dataclass

from online_trainer.prequential import RunningMetrics


@dataclass(frozen=True)
class GateDecision:
    publish: bool
    candidate: float
    serving: float
    events: int
    reason: str


class ValidationGate:
    def __init__(self, metric: str, margin: float, window: int, min_events: int) -> None:
        self.metric = metric
        self.margin = margin
        self.min_events = min_events
        self.candidate = RunningMetrics(window=window)
        self.serving = RunningMetrics(window=window)
        self.undecided = 0
        """Held-out events observed since the last decision (or reset)."""

    def ready(self, has_serving: bool) -> bool:
        """Whether a decision now would weigh enough new evidence: `min_events` held-out events
        since the last one, so that a held candidate is judged again only on events its
        previous decision did not see (nothing to compare against: always)."""
        return not has_serving or self.undecided >= self.min_events

    def observe(self, candidate_ranks: list[float], serving_ranks: list[float]) -> None:
        if len(candidate_ranks) != len(serving_ranks):
            raise ValueError("both models must be scored on the same events")
        self.candidate.add(candidate_ranks)
        self.serving.add(serving_ranks)
        self.undecided += len(candidate_ranks)

    def decide(self, has_serving: bool) -> GateDecision:
        self.undecided = 0
        cand = self.candidate.recent()
        serv = self.serving.recent()
        events = int(cand["events"])
        c, s = cand[self.metric], serv[self.metric]
        if not has_serving:
            return GateDecision(True, c, s, events, "no serving version yet")
        if events < self.min_events:
            return GateDecision(False, c, s, events, f"only {events} held-out events")
        if c + self.margin < s:
            return GateDecision(False, c, s, events, f"{self.metric} {c:.4f} < serving {s:.4f}")
        return GateDecision(True, c, s, events, f"{self.metric} {c:.4f} vs serving {s:.4f}")

    def reset_serving(self) -> None:
        """After a publication the serving model changed: its window starts over, and so does the
        candidate's, so the next comparison covers the same events for both."""
        window = self.candidate.window
        self.candidate = RunningMetrics(window=window)
        self.serving = RunningMetrics(window=window)
        self.undecided = 0
