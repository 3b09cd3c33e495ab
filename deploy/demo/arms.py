"""A run's experiment as its client sees it: every answer read in time, credited to the arm the
response names, judged by the one definition of a hit (schemas/hits.py: the strict hit, the
event the request preceded is among the top 10).

The scorer assigns users to arms by a hash of the user id, so each arm's users are a random
share of the traffic and the arms' hit rates compare like with like (which a per-strategy table,
whose strategies serve different users, does not). Intervals are bootstrap percentiles with
users resampled (models/user_bootstrap.py): one user's requests are not independent draws.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import numpy as np
import redis

from deploy.demo.traffic import Served
from models.user_bootstrap import rate_ci
from schemas.hits import strict_hit
from serving.features import ServingKeys

EXPERIMENT = "demo"
ARMS = ("popularity", "frozen", "model", "ranker")
"""One policy per arm, named after it, equal weights (serving/experiment.py)."""
HIT_K = 10
ARM_BIN_S = 30.0
"""Each arm's hit rate over time is counted per this many seconds of the run."""


def experiment_arms(frozen_version: str) -> list[dict[str, object]]:
    """The arms as the scorer's settings take them (STREAMREC_EXPERIMENT__ARMS)."""
    return [{"name": arm, "policy": arm, "weight": 1.0,
             **({"version": frozen_version} if arm == "frozen" else {})} for arm in ARMS]


class FrozenPin:
    """The `frozen` arm's version, following the drift retrain.

    `frozen` is the control for online learning: the version its users get is the one `model`
    started from, never updated. After a drift retrain publishes a new major version, the
    pre-drift version knows none of the new regime's items, and holding it pinned would measure
    the drift, not online learning (and weigh on the pooled KPI the recovery is judged by).
    So, as an operator would, the run re-pins the arm to the retrained version through the
    scorer's run-time experiment document (docs/operations.md, "Experiment arms at run time")."""

    def __init__(self, client: redis.Redis, key_prefix: str, version: str) -> None:
        self._client, self._key = client, ServingKeys(key_prefix).experiment
        self.version = version

    def follow(self, version: str) -> bool:
        """Pins `version` (True) unless it already is."""
        if version == self.version:
            return False
        document = {"name": EXPERIMENT, "arms": experiment_arms(version)}
        self._client.set(self._key, json.dumps(document))
        self.version = version
        return True


def _hit(served: Served) -> bool:
    return strict_hit(served.items, served.next_item, HIT_K)


def arm_figures(served: Sequence[Served], seed: int = 0) -> dict[str, dict[str, object]]:
    """Per arm: answers, users, strict hit rate@10 and its 95% interval over users."""
    by_arm: dict[str, dict[str, list[int]]] = {}
    for s in served:
        user = by_arm.setdefault(s.arm or "none", {}).setdefault(s.user_id, [0, 0])
        user[0] += _hit(s)
        user[1] += 1
    out: dict[str, dict[str, object]] = {}
    for arm, users in sorted(by_arm.items()):
        counts = np.array(list(users.values()), dtype=np.float64)
        hits, requests = counts[:, 0], counts[:, 1]
        low, high = rate_ci(hits, requests, seed=seed)
        out[arm] = {"answers": int(requests.sum()), "users": len(users),
                    "hit_rate": round(float(hits.sum() / requests.sum()), 4),
                    "ci95": [round(low, 4), round(high, 4)]}
    return out


def recent_rates(served: Sequence[Served], since: float) -> dict[str, tuple[float, int]]:
    """Per arm: (strict hit rate@10, answers) of the answers to requests sent at `since` or
    later (the dashboard's live figure)."""
    counts: dict[str, list[int]] = {}
    for s in served:
        if s.sent_at < since:
            continue
        arm = counts.setdefault(s.arm or "none", [0, 0])
        arm[0] += _hit(s)
        arm[1] += 1
    return {arm: (h / n, n) for arm, (h, n) in sorted(counts.items())}


def arms_by_phase(
    served: Sequence[Served], spans: Mapping[str, tuple[float, float]], seed: int = 0
) -> dict[str, dict[str, dict[str, object]]]:
    """`arm_figures` within each phase's span (requests sent in it)."""
    return {name: arm_figures([s for s in served if start <= s.sent_at < end], seed)
            for name, (start, end) in spans.items()}


def arm_series(
    served: Sequence[Served], origin: float, bin_s: float, seed: int = 0
) -> list[dict[str, object]]:
    """Each arm's strict hit rate per `bin_s` of the run (t: the bin's start, seconds from
    `origin`) and its 95% interval over the bin's users (`<arm>_ci95`)."""
    bins: dict[int, list[Served]] = {}
    for s in served:
        bins.setdefault(int((s.sent_at - origin) // bin_s), []).append(s)
    rows: list[dict[str, object]] = []
    for b, answers in sorted(bins.items()):
        row: dict[str, object] = {"t": round(b * bin_s, 2)}
        for arm, figures in arm_figures(answers, seed).items():
            row[arm], row[f"{arm}_ci95"] = figures["hit_rate"], figures["ci95"]
        rows.append(row)
    return rows
