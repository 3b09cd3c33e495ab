"""Prequential ("predict, then learn") evaluation: every event is scored before it is trained on.

Ranks are full-catalog ranks of the true next item (1 = best); a target the model has never seen
(a brand-new item) counts as a miss, which is what it is for the user at that moment.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

MISS = math.inf


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
