"""Tumbling KPI windows per model version and experiment arm, by `served_at`, built from
closed answers.

A window [start, start + size) is complete once every response served in it has closed, i.e.
when the join's watermark passes `start + size + attribution window`; the caller passes that
bound to `close`. Rates use the window's responses as denominator; responses and hits are
also split by the answered user's bucket (schemas.kpi.user_bucket), so a judge of arms can
measure how much they vary from user to user. Counts are kept per input
partition (the state a partition carries through a rebalance, streams/monitor/state.py) and
summed over this worker's partitions when reported.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from schemas.kpi import KpiReport, empty_buckets
from schemas.limits import USER_BUCKETS
from streams.monitor.join import ResponseOutcome

WindowKey = tuple[int, float, str, str | None, str | None]
"""(partition, window start, model version, experiment, arm)"""


@dataclass
class Counts:
    responses: int = 0
    hits: int = 0
    clicks: int = 0
    conversions: int = 0
    bucket_responses: list[int] = field(default_factory=empty_buckets)
    """Responses per user bucket (schemas.kpi.user_bucket)."""
    bucket_hits: list[int] = field(default_factory=empty_buckets)

    def add(self, other: Counts) -> None:
        self.responses += other.responses
        self.hits += other.hits
        self.clicks += other.clicks
        self.conversions += other.conversions
        for b in range(USER_BUCKETS):
            self.bucket_responses[b] += other.bucket_responses[b]
            self.bucket_hits[b] += other.bucket_hits[b]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> Counts:
        """Counts as `to_dict` wrote them. A row written before counts were split by user
        bucket has all of its responses in bucket 0: one cluster, the most conservative
        spread for a judge."""
        counts = cls(responses=int(row["responses"]), hits=int(row["hits"]),
                     clicks=int(row["clicks"]), conversions=int(row["conversions"]))
        if "bucket_responses" in row:
            counts.bucket_responses = [int(n) for n in row["bucket_responses"]]
            counts.bucket_hits = [int(h) for h in row["bucket_hits"]]
        else:
            counts.bucket_responses[0], counts.bucket_hits[0] = counts.responses, counts.hits
        return counts


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
        counts.bucket_responses[outcome.user_bucket] += 1
        counts.bucket_hits[outcome.user_bucket] += outcome.hit
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
            bucket_responses=list(c.bucket_responses),
            bucket_hits=list(c.bucket_hits),
        )
