"""The published ranker judged on its live experiment arm: kept while its answers are not worse
than the `model` arm's (the same live version in retrieval order), rolled back otherwise.

The ranker gate promotes on held-back lists; what users do with the ranker's answers is the
evidence that counts. With an experiment that has both arms, the monitor's per-arm KPI reports
(`kpi.metrics`, one per version, arm and window) are pooled per arm from the moment the current
ranker started serving. Once each arm has `min_responses` attributed responses, a one-sided
z-test decides: the ranker arm's rate below the model arm's with z at most `-z` rolls the
ranker back (a `rolled_back` record for its version on `model.updates`: the
newest earlier serving ranker, or retrieval order, serves). A ranker that is not worse stays,
and the comparison goes on with every new window.

Users, not answers, are randomized into arms, and one user's answers hit or miss together, so
the test's variance is the user-clustered (delta-method) variance of each arm's ratio of hits
to responses, computed over the reports' user buckets (`clustered_z`). Treating every answer
as an independent trial would take a difference due to which users fell into which arm for
evidence about the ranker.

The trainer promotes a newer version of the same online-trained ranker whenever its gate
passes, often sooner than one version gathers `min_responses` per arm; were each version judged
afresh, a ranker losing live would be kept by its own promotions. So a newer version continues
the comparison (its evidence is the ranker's since it started serving) and the verdict rolls
back whichever version serves then; a verdict, or a ranker serving again after none did, starts
a fresh one.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from schemas.kpi import KpiReport, empty_buckets
from schemas.limits import USER_BUCKETS
from schemas.model_updates import ModelUpdate
from serving.settings import RankerArmPolicy

logger = logging.getLogger(__name__)


@dataclass
class _Arm:
    responses: int = 0
    hits: int = 0
    bucket_responses: list[int] = field(default_factory=empty_buckets)
    bucket_hits: list[int] = field(default_factory=empty_buckets)

    @property
    def rate(self) -> float:
        return self.hits / self.responses if self.responses else 0.0

    def add(self, report: KpiReport) -> None:
        self.responses += report.responses
        self.hits += report.hits
        for b in range(USER_BUCKETS):
            self.bucket_responses[b] += report.bucket_responses[b]
            self.bucket_hits[b] += report.bucket_hits[b]


@dataclass(frozen=True)
class ArmVerdict:
    ranker_version: str
    ranker_rate: float
    model_rate: float
    ranker_responses: int
    model_responses: int
    z: float

    @property
    def reason(self) -> str:
        return (f"ranker arm hit rate {self.ranker_rate:.4f} ({self.ranker_responses}) vs model "
                f"arm {self.model_rate:.4f} ({self.model_responses}): z {self.z:.2f}")


def clustered_variance(bucket_responses: Sequence[int], bucket_hits: Sequence[int]) -> float:
    """Variance of an arm's hit rate p = sum(h) / sum(n) with user buckets as clusters (the
    delta-method, cluster-robust variance of a ratio): B / (B - 1) * sum_b (h_b - p n_b)^2 /
    (sum n)^2 over the B buckets. 0 without responses."""
    total = sum(bucket_responses)
    if total == 0:
        return 0.0
    rate = sum(bucket_hits) / total
    buckets = len(bucket_responses)
    residuals = sum((h - rate * n) ** 2
                    for n, h in zip(bucket_responses, bucket_hits, strict=True))
    return buckets / (buckets - 1) * residuals / total**2


def clustered_z(ranker: _Arm, model: _Arm) -> float:
    """z statistic of the ranker arm's hit rate minus the model arm's, each rate's variance
    clustered by user bucket (0 without spread).

    The randomization unit is the user and a user's answers are correlated, so the per-answer
    binomial variance understates the noise by a lot (hundreds of users, thousands of answers):
    which users the draw put in each arm would pass for a difference between the arms. Buckets
    of users are independent across the draw; their spread is the honest variance."""
    spread = (clustered_variance(ranker.bucket_responses, ranker.bucket_hits)
              + clustered_variance(model.bucket_responses, model.bucket_hits))
    return (ranker.rate - model.rate) / math.sqrt(spread) if spread > 0 else 0.0


@dataclass
class RankerArmJudge:
    policy: RankerArmPolicy
    _version: str | None = None
    _since: float = 0.0
    _arms: dict[str, _Arm] = field(default_factory=dict)
    _counted: set[str] = field(default_factory=set)
    _decided: bool = False

    def watch(self, version: str | None, since: float) -> None:
        """A fresh comparison when a ranker starts serving after none, or after a verdict; a
        newer version replacing one still judged goes on with the evidence so far."""
        if version == self._version:
            return
        if version is not None and self._version is not None and not self._decided:
            self._version = version
            return
        self._version, self._since, self._decided = version, since, False
        self._arms = {self.policy.ranker_arm: _Arm(), self.policy.model_arm: _Arm()}
        self._counted = set()

    def record(self, report: KpiReport) -> ArmVerdict | None:
        """The verdict when this report makes the ranker arm worse with confidence, else None."""
        arm = self._arms.get(report.arm or "")
        if (arm is None or self._version is None or self._decided
                or report.window_start < self._since or report.report_id in self._counted):
            return None
        self._counted.add(report.report_id)
        arm.add(report)
        ranker, model = self._arms[self.policy.ranker_arm], self._arms[self.policy.model_arm]
        if min(ranker.responses, model.responses) < self.policy.min_responses:
            return None
        z = clustered_z(ranker, model)
        if z > -self.policy.z:
            return None
        self._decided = True
        verdict = ArmVerdict(self._version, ranker.rate, model.rate, ranker.responses,
                             model.responses, z)
        logger.warning("ranker arm rollback version=%s reason=%s", self._version, verdict.reason)
        return verdict


def rollback_update(verdict: ArmVerdict, current: ModelUpdate) -> ModelUpdate:
    """The `rolled_back` record the scorer publishes for the ranker version it judged."""
    return current.model_copy(update={
        "stage": "rolled_back",
        "metrics": {"ranker_arm_hit_rate": verdict.ranker_rate,
                    "model_arm_hit_rate": verdict.model_rate,
                    "ranker_arm_responses": float(verdict.ranker_responses),
                    "model_arm_responses": float(verdict.model_responses),
                    "z": verdict.z},
        "note": f"ranker arm rollback: {verdict.reason}"[:2048],
    })
