"""Tumbling KPI windows per model version and experiment arm, by `served_at`, built from
finalised responses.

A window [start, start + size) is complete once every response served in it has been finalised,
i.e. when the attribution join's watermark passes `start + size + attribution window`; the caller
passes that bound to `close`. Rates use the window's responses as denominator, so each is the
share of responses with at least one hit / click / purchase.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field

from schemas.kpi import KpiReport
from streams.monitor.attribution import ResponseOutcome


@dataclass(frozen=True, order=True)
class _Key:
    start: float
    version: str
    experiment: str
    """"" outside any experiment (and `arm` too)."""
    arm: str


@dataclass
class _Counts:
    responses: int = 0
    hits: int = 0
    clicks: int = 0
    conversions: int = 0


@dataclass
class KpiWindows:
    size_s: float
    k: int
    closed_through: float = -math.inf
    late: int = 0
    source: str = ""
    """The input partitions these windows count (set on assignment); part of each report id."""
    _open: dict[_Key, _Counts] = field(default_factory=dict)

    def start_of(self, at: float) -> float:
        return math.floor(at / self.size_s) * self.size_s

    @property
    def oldest_start(self) -> float | None:
        return min((key.start for key in self._open), default=None)

    def add(self, outcome: ResponseOutcome) -> bool:
        """Count one outcome; False (and counted as late) when its window was already reported."""
        start = self.start_of(outcome.served_at)
        if start + self.size_s <= self.closed_through:
            self.late += 1
            return False
        key = _Key(start, outcome.model_version, outcome.experiment or "", outcome.arm or "")
        counts = self._open.setdefault(key, _Counts())
        counts.responses += 1
        counts.hits += outcome.hit
        counts.clicks += outcome.clicked
        counts.conversions += outcome.converted
        return True

    def close(self, through: float) -> list[KpiReport]:
        """Reports for every window ending at or before `through`, oldest first."""
        self.closed_through = max(self.closed_through, through)
        done = sorted(key for key in self._open if key.start + self.size_s <= self.closed_through)
        return [self._report(key, self._open.pop(key)) for key in done]

    def _report(self, key: _Key, c: _Counts) -> KpiReport:
        start = key.start
        # Responses outside any experiment keep the report id they always had.
        arm = f"|{key.experiment}|{key.arm}" if key.arm else ""
        name = f"{key.version}|{start!r}|{start + self.size_s!r}|{self.source}{arm}"
        return KpiReport(
            report_id=hashlib.sha256(name.encode()).hexdigest()[:32],
            model_version=key.version,
            experiment=key.experiment or None,
            arm=key.arm or None,
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
