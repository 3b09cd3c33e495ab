"""What each arm's answers were worth, per request and per arm, with users as the unit.

Hits (the project's one definition, schemas/hits.py; docs/architecture.md "What a hit is"):
- strict hit@k: the event the request precedes (the user's next interaction) is in the top k;
- window hit@k: any of the user's interactions from the request up to the attribution window
  after it is in the top k;
- NDCG@k of the next item: 1 / log2(rank + 1) when it is at rank <= k.

Two views of the same replay. `assigned`: each user belongs to the arm the scorer's experiment
assigns (serving/experiment.py: weighted rendezvous hashing of the user id), and an arm is
measured on its users only (what a live experiment can see). `counterfactual`: every arm
answered every request, which only an offline replay can do; arms are compared on the same
users, so the interval is narrower.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from models.user_bootstrap import independent_ratio_ci, paired_ratio_ci, ratio
from schemas.hits import ndcg, strict_hit

Float64Array = npt.NDArray[np.float64]
RATIOS = (("model", "popularity"), ("model", "frozen"), ("ranker", "model"),
          ("frozen", "popularity"), ("ranker", "popularity"))


@dataclass
class ArmRecord:
    """Per request: the arm's strict and window hits, NDCG of the next item, whether the
    answer came from popularity, and whether it held the next item among the same-second ones."""

    strict: list[bool] = field(default_factory=list)
    window: list[bool] = field(default_factory=list)
    ndcg: list[float] = field(default_factory=list)
    popular: list[bool] = field(default_factory=list)
    tied: list[bool] = field(default_factory=list)

    def add(self, items: Sequence[str], target: str, window: frozenset[str],
            tied: frozenset[str], strategy: str, k: int) -> None:
        self.strict.append(strict_hit(items, target, k))
        self.window.append(any(i in window for i in items[:k]))
        self.ndcg.append(ndcg(items, target, k))
        self.popular.append(strategy == "popularity")
        self.tied.append(any(i in tied for i in items[:k]))


def _per_user(users: npt.NDArray[np.int64], n_users: int, values: Sequence[float] | Sequence[
        bool], mask: npt.NDArray[np.bool_]) -> Float64Array:
    sums = np.bincount(users[mask], weights=np.asarray(values, np.float64)[mask],
                       minlength=n_users)
    return sums.astype(np.float64)


def _figures(record: ArmRecord, mask: npt.NDArray[np.bool_]) -> dict[str, float]:
    n = int(mask.sum())
    def mean(values: Sequence[float] | Sequence[bool]) -> float:
        return round(float(np.asarray(values, np.float64)[mask].mean()), 5) if n else math.nan
    return {"answers": n, "hit@10": mean(record.strict), "hit@10_window": mean(record.window),
            "ndcg@10": mean(record.ndcg), "hit@10_same_second": mean(record.tied),
            "popularity_share": mean(record.popular)}


def summarise(
    users: Sequence[str], records: Mapping[str, ArmRecord], assignment: Mapping[str, str],
    segments: Mapping[str, npt.NDArray[np.bool_]], seed: int,
) -> dict[str, Any]:
    """Both views, per-segment figures of the counterfactual, and the ratios' intervals."""
    codes, uniques = np.unique(np.asarray(users), return_inverse=True)
    index = uniques.astype(np.int64)
    everyone = np.ones(len(users), dtype=np.bool_)
    arm_users = {arm: np.array([assignment[u] == arm for u in codes]) for arm in records}
    assigned_mask = {arm: arm_users[arm][index] for arm in records}
    requests = _per_user(index, len(codes), [1.0] * len(users), everyone)
    out: dict[str, Any] = {
        "assigned": {"arms": {a: _figures(r, assigned_mask[a]) for a, r in records.items()},
                     "ratios": {}, "ratios_window": {}},
        "counterfactual": {"arms": {a: _figures(r, everyone) for a, r in records.items()},
                           "ratios": {}, "ratios_window": {}},
        "segments": {name: {a: _figures(r, mask) for a, r in records.items()}
                     for name, mask in segments.items()},
        "by_strategy": {a: _by_strategy(r) for a, r in records.items()},
    }
    for a, b in RATIOS:
        if a not in records or b not in records:
            continue
        name = f"{a}_vs_{b}"
        for key, attribute in (("ratios", "strict"), ("ratios_window", "window")):
            hits_a = _per_user(index, len(codes), getattr(records[a], attribute), everyone)
            hits_b = _per_user(index, len(codes), getattr(records[b], attribute), everyone)
            value = ratio(hits_a, requests, hits_b, requests)
            ci = paired_ratio_ci(hits_a, hits_b, requests, seed=seed)
            out["counterfactual"][key][name] = _ratio(value, ci)
            ua, ub = arm_users[a], arm_users[b]
            if ua.any() and ub.any():
                value = ratio(hits_a[ua], requests[ua], hits_b[ub], requests[ub])
                ci = independent_ratio_ci(hits_a[ua], requests[ua], hits_b[ub], requests[ub],
                                          seed=seed)
                out["assigned"][key][name] = _ratio(value, ci)
    return out


def _by_strategy(record: ArmRecord) -> dict[str, dict[str, float]]:
    """The arm's answers split by what served them (popularity fallback or its model): the
    per-strategy table a confounded report shows, whose strategies served different users."""
    popular = np.asarray(record.popular, dtype=np.bool_)
    return {"popularity": _figures(record, popular), "model": _figures(record, ~popular)}


def _ratio(value: float, ci: tuple[float, float]) -> dict[str, Any]:
    return {"ratio": round(value, 4), "ci95": [round(ci[0], 4), round(ci[1], 4)]}
