"""Canary decisions: promote or roll back a candidate version from KPIs, with guardrails.

KPI windows (`kpi.metrics`, one per model version and window) are accumulated per version from
the moment the candidate went live; both versions are measured over the same period, so a
traffic or seasonality shift affects both sides alike. A decision needs `min_responses`
attributed responses on *each* side. Rates are pooled (responses-weighted), not averaged per
window, so a tiny window cannot swing the comparison.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from schemas.kpi import KpiReport
from schemas.model_updates import ModelUpdate
from serving.settings import CanaryPolicy

logger = logging.getLogger(__name__)


@dataclass
class KpiTotals:
    responses: int = 0
    weighted: float = 0.0

    def add(self, responses: int, rate: float) -> None:
        self.responses += responses
        self.weighted += responses * rate

    @property
    def rate(self) -> float:
        return self.weighted / self.responses if self.responses else 0.0


@dataclass(frozen=True)
class Decision:
    action: Literal["promote", "rollback"]
    candidate: str
    serving: str
    candidate_kpi: float
    serving_kpi: float
    candidate_responses: int
    serving_responses: int
    reason: str

    def metrics(self, kpi: str) -> dict[str, float]:
        return {
            f"candidate_{kpi}": self.candidate_kpi,
            f"serving_{kpi}": self.serving_kpi,
            "candidate_responses": float(self.candidate_responses),
            "serving_responses": float(self.serving_responses),
        }


def judge(
    policy: CanaryPolicy, serving: str, candidate: str, s: KpiTotals, c: KpiTotals
) -> Decision | None:
    """The decision the guardrails allow now, or None while the evidence is insufficient."""
    if min(s.responses, c.responses) < policy.min_responses:
        return None
    base, rate = s.rate, c.rate
    # Relative change; against a zero baseline any positive rate counts as a full uplift.
    change = (rate - base) / base if base > 0 else (0.0 if rate == 0 else 1.0)
    common = (candidate, serving, rate, base, c.responses, s.responses)
    if change < -policy.max_regression:
        limit = policy.max_regression
        reason = f"{policy.kpi} {rate:.4f} vs {base:.4f}: {change:+.1%} beyond -{limit:.1%}"
        return Decision("rollback", *common, reason)
    if change >= policy.min_uplift:
        reason = f"{policy.kpi} {rate:.4f} vs {base:.4f}: {change:+.1%} >= {policy.min_uplift:+.1%}"
        return Decision("promote", *common, reason)
    return None


class CanaryJudge:
    """Accumulates KPIs for the current (serving, candidate) pair and decides once."""

    def __init__(self, policy: CanaryPolicy) -> None:
        self.policy = policy
        self._pair: tuple[str, str] | None = None
        self._since = 0.0
        self._totals: dict[str, KpiTotals] = {}
        self._counted: set[str] = set()
        self._decided = False
        self.duplicates = 0

    def watch(self, serving: str | None, candidate: str | None, since: float) -> None:
        """Starts a fresh comparison whenever the pair changes (a new candidate or serving)."""
        pair = (serving, candidate) if serving and candidate else None
        if pair == self._pair:
            return
        self._pair, self._since, self._decided = pair, since, False
        self._totals = {v: KpiTotals() for v in pair} if pair else {}
        self._counted = set()
        if pair:
            logger.info("canary started serving=%s candidate=%s", *pair)

    def record(self, report: KpiReport) -> Decision | None:
        totals = self._totals.get(report.model_version)
        if totals is None or self._decided or report.window_start < self._since:
            return None
        if report.report_id in self._counted:
            self.duplicates += 1
            return None
        self._counted.add(report.report_id)
        totals.add(report.responses, float(getattr(report, self.policy.kpi)))
        assert self._pair is not None  # totals exist only for a watched pair
        serving, candidate = self._pair
        decision = judge(
            self.policy, serving, candidate, self._totals[serving], self._totals[candidate]
        )
        if decision is not None:
            self._decided = True
            log = logger.info if decision.action == "promote" else logger.warning
            log(
                "canary decision action=%s candidate=%s serving=%s reason=%s",
                decision.action, candidate, serving, decision.reason,
            )
        return decision


def decision_update(decision: Decision, candidate: ModelUpdate, kpi: str) -> ModelUpdate:
    """What the scorer publishes on model.updates so every scorer (and operators) follow.

    `published_at` stays the candidate's: model freshness is measured from training, not from
    the promotion."""
    return candidate.model_copy(
        update={
            "stage": "serving" if decision.action == "promote" else "rolled_back",
            "metrics": {**decision.metrics(kpi)},
            "note": f"canary {decision.action}: {decision.reason}"[:2048],
        }
    )
