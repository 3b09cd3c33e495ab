"""Prequential ("predict, then learn") evaluation: events are scored before they are trained on.

Scoring is per event while learning is per user, so the trainer scores a share of the events
(:func:`in_sample`): a hash of the event picks them, and any other model (the serving twin the
gate compares with, a frozen copy in a benchmark) scores exactly the same ones.

Ranks are full-catalog ranks of the true next item (1 = best); a target the model has never seen
(a brand-new item) counts as a miss, which is what it is for the user at that moment.
"""

from __future__ import annotations

import math
import zlib
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

MISS = math.inf
_BUCKETS = 1 << 32


def in_sample(user: str, item: str, timestamp: int, share: float) -> bool:
    """Whether the prequential sample holds this event: the same answer in every process."""
    if share >= 1.0:
        return True
    key = f"{user}\x1f{item}\x1f{timestamp}".encode()
    return zlib.crc32(key) < share * _BUCKETS


def hit_at(rank: float, k: int) -> float:
    return 1.0 if rank <= k else 0.0


def ndcg_at(rank: float, k: int) -> float:
    return 1.0 / math.log2(rank + 1.0) if rank <= k else 0.0


@dataclass
class RunningMetrics:
    """HR@10 and NDCG@10 over everything seen, and over a sliding window of recent events."""

    window: int = 2_000
    count: int = 0
    hits: float = 0.0
    ndcg: float = 0.0
    _recent: deque[tuple[float, float]] = field(default_factory=deque)

    def add(self, ranks: Iterable[float], k: int = 10) -> None:
        for rank in ranks:
            hit, gain = hit_at(rank, k), ndcg_at(rank, k)
            self.count += 1
            self.hits += hit
            self.ndcg += gain
            self._recent.append((hit, gain))
            if len(self._recent) > self.window:
                self._recent.popleft()

    def summary(self) -> dict[str, float]:
        n = max(self.count, 1)
        return {"hr@10": self.hits / n, "ndcg@10": self.ndcg / n, "events": float(self.count)}

    def recent(self) -> dict[str, float]:
        n = max(len(self._recent), 1)
        return {
            "hr@10": sum(h for h, _ in self._recent) / n,
            "ndcg@10": sum(g for _, g in self._recent) / n,
            "events": float(len(self._recent)),
        }
