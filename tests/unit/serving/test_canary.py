import time
import uuid

import pytest

from schemas.kpi import KpiReport
from serving.canary import CanaryJudge, KpiTotals, decision_update, judge
from serving.settings import CanaryPolicy
from tests.kpi_buckets import spread
from tests.unit.serving.fakes import update

POLICY = CanaryPolicy(min_responses=100, max_regression=0.1, min_uplift=0.0)


def totals(responses: int, rate: float) -> KpiTotals:
    t = KpiTotals()
    t.add(responses, rate)
    return t


def report(
    version: str, responses: int, hit_rate: float, start: float, report_id: str | None = None
) -> KpiReport:
    hits = round(responses * hit_rate)
    return KpiReport(
        report_id=report_id or uuid.uuid4().hex,
        model_version=version, window_start=start, window_end=start + 60, k=10,
        responses=responses, hits=hits, clicks=hits, conversions=0,
        hit_rate_at_k=hit_rate, ctr=hit_rate, conversion_rate=0.0,
        **spread(responses, hits),
    )


def test_no_decision_before_both_versions_reach_minimum_traffic() -> None:
    assert judge(POLICY, "1.0", "1.1", totals(1000, 0.2), totals(99, 0.0)) is None
    assert judge(POLICY, "1.0", "1.1", totals(99, 0.2), totals(1000, 0.9)) is None


def test_a_regression_beyond_the_guardrail_rolls_back() -> None:
    decision = judge(POLICY, "1.0", "1.1", totals(500, 0.20), totals(500, 0.17))
    assert decision is not None and decision.action == "rollback"


def test_a_regression_within_the_guardrail_waits_for_evidence() -> None:
    strict = POLICY.model_copy(update={"min_uplift": 0.01})
    assert judge(strict, "1.0", "1.1", totals(500, 0.20), totals(500, 0.19)) is None


def test_a_better_candidate_is_promoted() -> None:
    decision = judge(POLICY, "1.0", "1.1", totals(500, 0.20), totals(500, 0.25))
    assert decision is not None and decision.action == "promote"
    assert decision.candidate_kpi == pytest.approx(0.25)


def test_judge_pools_windows_and_decides_once() -> None:
    now = time.time()
    j = CanaryJudge(POLICY)
    j.watch("1.0", "1.1", since=now)
    assert j.record(report("1.0", 80, 0.2, now)) is None
    assert j.record(report("1.1", 80, 0.1, now)) is None
    assert j.record(report("1.0", 80, 0.2, now)) is None
    decision = j.record(report("1.1", 80, 0.1, now))
    assert decision is not None and decision.action == "rollback"
    assert j.record(report("1.1", 80, 0.1, now)) is None


def test_a_report_published_twice_is_counted_once() -> None:
    now = time.time()
    j = CanaryJudge(POLICY)
    j.watch("1.0", "1.1", since=now)
    j.record(report("1.0", 160, 0.2, now))
    j.record(report("1.1", 80, 0.1, now, report_id="w1"))
    assert j.record(report("1.1", 80, 0.1, now, report_id="w1")) is None  # 160 if counted twice
    assert j.duplicates == 1


def test_windows_from_before_the_canary_started_are_ignored() -> None:
    now = time.time()
    j = CanaryJudge(POLICY)
    j.watch("1.0", "1.1", since=now)
    j.record(report("1.0", 1000, 0.5, now - 600))
    j.record(report("1.1", 1000, 0.0, now - 600))
    assert j.record(report("1.1", 1000, 0.0, now)) is None


def test_a_new_candidate_starts_a_fresh_comparison() -> None:
    now = time.time()
    j = CanaryJudge(POLICY)
    j.watch("1.0", "1.1", since=now)
    j.record(report("1.0", 1000, 0.2, now))
    j.watch("1.0", "1.2", since=now)
    assert j.record(report("1.2", 1000, 0.9, now)) is None  # serving has no traffic yet


def test_decision_is_published_as_a_model_update_with_the_stage_and_kpis() -> None:
    decision = judge(POLICY, "1.0", "1.1", totals(500, 0.2), totals(500, 0.1))
    assert decision is not None
    published = decision_update(decision, update("1.1", "candidate"), "hit_rate_at_k")
    assert published.stage == "rolled_back"
    assert published.version == "1.1"
    assert published.metrics["candidate_hit_rate_at_k"] == pytest.approx(0.1)
