"""The KPI phases of a run, from the monitor's kpi.metrics windows: before the drift (after a
warm-up), after it (until the retrained major version was published) and after recovery."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from online_trainer.ranker_training import RANKER_MODEL_NAME
from schemas import KpiReport, ModelUpdate


@dataclass(frozen=True)
class Marks:
    live_start: float
    warm_until: float
    drift_at: float | None
    retrained_at: float | None
    settle_s: float


@dataclass(frozen=True)
class PhaseKpi:
    responses: int
    hits: int

    @property
    def hit_rate(self) -> float | None:
        return self.hits / self.responses if self.responses else None


def major(version: str) -> int:
    return int(version.split(".", maxsplit=1)[0])


def first_retrain(updates: Sequence[ModelUpdate], after: float | None) -> ModelUpdate | None:
    """The session model's first major version above 1 published after the drift (the drift
    retrain); the ranker's versions are its own."""
    if after is None:
        return None
    found = [
        u for u in updates
        if u.model_name != RANKER_MODEL_NAME and major(u.version) > 1 and u.published_at >= after
    ]
    return min(found, key=lambda u: u.published_at) if found else None


def _sum(kpis: Sequence[KpiReport], start: float, end: float) -> PhaseKpi:
    inside = [k for k in kpis if k.window_start >= start and k.window_end <= end]
    return PhaseKpi(sum(k.responses for k in inside), sum(k.hits for k in inside))


def phase_spans(marks: Marks, end: float) -> dict[str, tuple[float, float]]:
    """(start, end) of each phase the run reached."""
    drift = marks.drift_at if marks.drift_at is not None else end
    spans = {"before_drift": (marks.warm_until, drift)}
    if marks.drift_at is not None:
        until = marks.retrained_at if marks.retrained_at is not None else end
        spans["after_drift"] = (marks.drift_at, until)
    if marks.retrained_at is not None:
        spans["after_recovery"] = (marks.retrained_at + marks.settle_s, end)
    return spans


def phases(kpis: Sequence[KpiReport], marks: Marks, end: float) -> dict[str, PhaseKpi]:
    spans = phase_spans(marks, end)
    return {name: _sum(kpis, start, stop) for name, (start, stop) in spans.items()}


def hit_rate_series(kpis: Sequence[KpiReport]) -> list[tuple[float, float, int]]:
    """(window end, hit rate over all versions, responses) per KPI window, in time order."""
    windows: dict[float, list[int]] = {}
    for k in kpis:
        acc = windows.setdefault(k.window_end, [0, 0])
        acc[0] += k.hits
        acc[1] += k.responses
    return [(end, h / n, n) for end, (h, n) in sorted(windows.items()) if n]
