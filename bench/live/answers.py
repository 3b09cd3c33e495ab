"""Each arm's live answers judged by the one definition of a hit (schemas/hits.py) against what
the users did afterwards, with users as the unit of every interval.

Per arm: answers, users, strict hit@10 (the event the request preceded is in the top 10),
window hit@10 (any of the user's interactions within the attribution window is, an interaction
naming another answer excepted), NDCG@10 of the next item. Ratios compare arms' strict hit rates
on their own, randomly assigned users, each arm's users resampled separately: the rate is per
answer (hits over answers, as the KPI counts), the unit of the interval is the user.

Beside each plain ratio, its CUPED twin (models/user_bootstrap.adjusted_ratio_ci) adjusts for
covariates fixed before any user was assigned: a user's events in the replay (the dataset sets
them, whatever the arm), and those times log(1 + the user's pre-training events) and times
"no pre-training event". A replay's arms differ most by which heavy users they drew; these
covariates say how heavy and how known each user was. The plain figure stays the headline.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from deploy.demo.traffic import Published, Served
from models.user_bootstrap import (
    ArmUsers,
    adjusted_ratio_ci,
    independent_ratio_ci,
    rate_ci,
    ratio,
)
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


def _user_counts(judged: Sequence[Judged], arm: str) -> dict[str, list[int]]:
    """Per user of `arm`: [strict hits, answers]."""
    users: dict[str, list[int]] = {}
    for j in judged:
        if arm_of(j) == arm:
            counts = users.setdefault(j.served.user_id, [0, 0])
            counts[0] += j.strict
            counts[1] += 1
    return users


def _per_user(judged: Sequence[Judged], arm: str) -> tuple[np.ndarray, np.ndarray]:
    users = _user_counts(judged, arm)
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


Covariates = dict[str, tuple[float, ...]]
_UNREPLAYED = (0.0, 0.0, 0.0)
"""The covariates of a user answered without any replayed event of theirs (none replayed)."""


def user_covariates(pretrain_users: Iterable[str], published: Iterable[Published]) -> Covariates:
    """Each replayed user's covariates, all known before assignment: events replayed, and
    those times log(1 + pre-training events) and times "no pre-training event"."""
    before: dict[str, int] = {}
    for user in pretrain_users:
        before[user] = before.get(user, 0) + 1
    replayed: dict[str, int] = {}
    for p in published:
        replayed[p.user_id] = replayed.get(p.user_id, 0) + 1
    return {user: (float(n), n * math.log1p(before.get(user, 0)), float(n * (user not in before)))
            for user, n in replayed.items()}


def _arm_users(judged: Sequence[Judged], arm: str, covariates: Covariates) -> ArmUsers:
    users = _user_counts(judged, arm)
    table = np.array(list(users.values()), dtype=np.float64).reshape(-1, 2)
    rows = np.array([covariates.get(u, _UNREPLAYED) for u in users],
                    dtype=np.float64).reshape(len(users), -1)
    return ArmUsers(table[:, 0], table[:, 1], rows)


def arm_ratios_cuped(judged: Sequence[Judged], covariates: Covariates,
                     seed: int) -> dict[str, dict[str, Any]]:
    """`arm_ratios` adjusted by CUPED on `covariates` (one row per user who was answered),
    with the share of the plain interval's width it keeps."""
    arms = {arm_of(j) for j in judged}
    answered = {j.served.user_id for j in judged}
    mean = np.array([covariates.get(u, _UNREPLAYED) for u in sorted(answered)],
                    dtype=np.float64).mean(axis=0)
    out: dict[str, dict[str, Any]] = {}
    plain = arm_ratios(judged, seed)
    for a, b in RATIOS:
        if a in arms and b in arms:
            value, low, high = adjusted_ratio_ci(_arm_users(judged, a, covariates),
                                                 _arm_users(judged, b, covariates), mean,
                                                 seed=seed)
            width = plain[f"{a}_vs_{b}"]["ci95"][1] - plain[f"{a}_vs_{b}"]["ci95"][0]
            out[f"{a}_vs_{b}"] = {"ratio": _round(value), "ci95": [_round(low), _round(high)],
                                  "width_vs_plain": _round((high - low) / width)
                                  if width > 0 else math.nan}
    return out
