"""Tumbling KPI windows per model version and experiment arm, by `served_at`, built from
closed answers.

A window [start, start + size) is complete once every response served in it has closed, i.e.
when the join's watermark passes `start + size + attribution window`; the caller passes that
bound to `close`. Rates use the window's responses as denominator. Counts are kept per input
partition (the state a partition carries through a rebalance, streams/monitor/state.py) and
summed over this worker's partitions when reported.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, dataclass, field

from schemas.kpi import KpiReport
from streams.monitor.join import ResponseOutcome

WindowKey = tuple[int, float, str, str | None, str | None]
"""(partition, window start, model version, experiment, arm)"""


@dataclass
class Counts:
    responses: int = 0
    hits: int = 0
    clicks: int = 0
    conversions: int = 0

    def add(self, other: Counts) -> None:
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


@dataclass
class KpiWindows:
    size_s: float
    k: int
    closed_through: float = -math.inf
    late: int = 0
    source: str = ""
    """The input partitions these windows count (set on assignment); part of each report id."""
    _open: dict[WindowKey, Counts] = field(default_factory=dict)

    def start_of(self, at: float) -> float:
        return math.floor(at / self.size_s) * self.size_s

    @property
    def oldest_start(self) -> float | None:
        return min((key[1] for key in self._open), default=None)

    def items(self) -> list[tuple[WindowKey, Counts]]:
        return list(self._open.items())

    def restore(self, key: WindowKey, counts: Counts) -> None:
        self._open[key] = counts

    def add(self, outcome: ResponseOutcome, partition: int = 0) -> bool:
        """Count one outcome; False (and counted as late) when its window was already reported."""
        start = self.start_of(outcome.served_at)
        if start + self.size_s <= self.closed_through:
            self.late += 1
            return False
        key = (partition, start, outcome.model_version, outcome.experiment, outcome.arm)
        counts = self._open.setdefault(key, Counts())
        counts.responses += 1
        counts.hits += outcome.hit
        counts.clicks += outcome.clicked
        counts.conversions += outcome.converted
        return True

    def close(self, through: float) -> list[KpiReport]:
        """Reports for every window ending at or before `through`, oldest first, one per
        model version and arm (summed over partitions)."""
        self.closed_through = max(self.closed_through, through)
        done = [key for key in self._open if key[1] + self.size_s <= self.closed_through]
        summed: dict[tuple[float, str, str | None, str | None], Counts] = {}
        for key in done:
            summed.setdefault(key[1:], Counts()).add(self._open.pop(key))
        return [self._report(label, summed[label])
                for label in sorted(summed, key=lambda s: (s[0], s[1], s[2] or "", s[3] or ""))]

    def _report(self, label: tuple[float, str, str | None, str | None], c: Counts) -> KpiReport:
        start, version, experiment, arm = label
        arm_part = "" if arm is None else f"|{experiment}|{arm}"
        key = f"{version}|{start!r}|{start + self.size_s!r}|{self.source}{arm_part}"
        return KpiReport(
            report_id=hashlib.sha256(key.encode()).hexdigest()[:32],
            model_version=version,
            experiment=experiment,
            arm=arm,
            window_start=start,
            window_end=start + self.size_s,
            k=self.k,
            responses=c.responses,
            hits=c.hits,
            clicks=c.clicks,
            conversions=c.conversions,
            hit_rate_at_k=c.hits / c.responses,
            ctr=c.clicks / c.responses,
            conversion_rate=c.conversions / c.responses,
        )
