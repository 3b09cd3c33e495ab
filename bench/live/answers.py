"""Each arm's live answers judged by the one definition of a hit (schemas/hits.py) against what
the users did afterwards, with users as the unit of every interval.

Per arm: answers, users, strict hit@10 (the event the request preceded is in the top 10),
window hit@10 (any of the user's interactions within the attribution window is, an interaction
naming another answer excepted), NDCG@10 of the next item. Ratios compare arms' strict hit rates
on their own, randomly assigned users, each arm's users resampled separately.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from deploy.demo.traffic import Published, Served
from models.user_bootstrap import independent_ratio_ci, rate_ci, ratio
from schemas.events import EventType
from schemas.hits import Act, judge

K = 10
RATIOS = (("model", "popularity"), ("model", "frozen"), ("ranker", "model"),
          ("frozen", "popularity"), ("ranker", "popularity"))


@dataclass(frozen=True)
class Judged:
    served: Served
    strict: bool
    window: bool
    ndcg: float


def arm_of(judged: Judged) -> str:
    return judged.served.arm or "none"


class Acts:
    """Each user's published interactions in time order."""

    def __init__(self, published: Iterable[Published]) -> None:
        self._times: dict[str, list[float]] = {}
        self._acts: dict[str, list[Act]] = {}
        for p in sorted(published, key=lambda p: p.timestamp):
            self._times.setdefault(p.user_id, []).append(p.timestamp)
            self._acts.setdefault(p.user_id, []).append(
                Act(p.item_id, p.timestamp, EventType.CLICK, p.request_id))

    def within(self, user: str, start: float, end: float) -> list[Act]:
        times = self._times.get(user, [])
        return self._acts.get(user, [])[bisect.bisect_left(times, start):
                                        bisect.bisect_right(times, end)]


def judge_all(served: Sequence[Served], published: Sequence[Published],
              window_s: float) -> list[Judged]:
    acts = Acts(published)
    out = []
    for s in served:
        outcome = judge(s.items, s.sent_at, window_s,
                        acts.within(s.user_id, s.sent_at, s.sent_at + window_s), K, s.request_id)
        out.append(Judged(s, outcome.strict_hit, outcome.window_hit, outcome.ndcg))
    return out


def _per_user(judged: Sequence[Judged], arm: str) -> tuple[np.ndarray, np.ndarray]:
    users: dict[str, list[int]] = {}
    for j in judged:
        if arm_of(j) == arm:
            counts = users.setdefault(j.served.user_id, [0, 0])
            counts[0] += j.strict
            counts[1] += 1
    table = np.array(list(users.values()), dtype=np.float64).reshape(-1, 2)
    return table[:, 0], table[:, 1]


def arm_figures(judged: Sequence[Judged], seed: int) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for arm in sorted({arm_of(j) for j in judged}):
        mine = [j for j in judged if arm_of(j) == arm]
        hits, requests = _per_user(judged, arm)
        low, high = rate_ci(hits, requests, seed=seed)
        out[arm] = {
            "answers": len(mine), "users": len(hits),
            "hit@10": _mean([j.strict for j in mine]),
            "hit@10_ci95": [round(low, 5), round(high, 5)],
            "hit@10_window": _mean([j.window for j in mine]),
            "ndcg@10": _mean([j.ndcg for j in mine]),
            "popularity_share": _mean([j.served.strategy == "popularity" for j in mine]),
        }
    return out


def arm_ratios(judged: Sequence[Judged], seed: int) -> dict[str, dict[str, Any]]:
    """Strict hit@10 ratios between arms with their bootstrap 95% intervals over users."""
    arms = {arm_of(j) for j in judged}
    out: dict[str, dict[str, Any]] = {}
    for a, b in RATIOS:
        if a in arms and b in arms:
            hits_a, requests_a = _per_user(judged, a)
            hits_b, requests_b = _per_user(judged, b)
            value = ratio(hits_a, requests_a, hits_b, requests_b)
            low, high = independent_ratio_ci(hits_a, requests_a, hits_b, requests_b, seed=seed)
            out[f"{a}_vs_{b}"] = {"ratio": _round(value), "ci95": [_round(low), _round(high)]}
    return out


def _mean(values: Sequence[float] | Sequence[bool]) -> float:
    return round(float(np.mean(np.asarray(values, dtype=np.float64))), 5) if values else math.nan


def _round(value: float) -> float:
    return round(value, 4)
