"""The published ranker judged on its live arm: rolled back only when its arm's hit rate is
below the model arm's with confidence, on reports since it started serving, each counted once."""

from __future__ import annotations

import math
import uuid
from pathlib import Path

import pytest

from models.store import ModelStore
from online_trainer.ranker_training import RankerTraining
from schemas.kpi import KpiReport
from schemas.limits import USER_BUCKETS
from schemas.model_updates import ModelUpdate
from schemas.topics import MODEL_UPDATES
from serving.canary_decisions import CanaryDecisions
from serving.metrics import ServeMetrics
from serving.ranker_arm import RankerArmJudge, clustered_variance, rollback_update
from serving.ranker_slot import RankerSlot
from serving.registry import ModelRegistry
from serving.settings import RankerArmPolicy, ServeSettings
from streams.kafka.contract_loop import Envelope
from streams.kafka.deadletter import SourcePosition
from tests.kpi_buckets import spread
from tests.unit.online_trainer.helpers import ranker_examples, train_ranker
from tests.unit.serving.fakes import update

POLICY = RankerArmPolicy(min_responses=500, z=1.96)
T = 1_800_000_000.0


def report(arm: str, responses: int, hits: int, start: float = T,
           report_id: str | None = None) -> KpiReport:
    """A report whose counts are spread evenly over the user buckets."""
    return bucketed(arm, **spread(responses, hits), start=start, report_id=report_id)


def bucketed(arm: str, bucket_responses: list[int], bucket_hits: list[int], start: float = T,
             report_id: str | None = None) -> KpiReport:
    responses, hits = sum(bucket_responses), sum(bucket_hits)
    return KpiReport(
        report_id=report_id or uuid.uuid4().hex, model_version="1.3", experiment="live",
        arm=arm, window_start=start, window_end=start + 5, k=10, responses=responses, hits=hits,
        clicks=hits, conversions=0, hit_rate_at_k=hits / responses, ctr=hits / responses,
        conversion_rate=0.0, bucket_responses=bucket_responses, bucket_hits=bucket_hits,
    )


def pooled_z(ranker: tuple[int, int], model: tuple[int, int]) -> float:
    """The two-proportion z that counts every answer as an independent trial."""
    (n_r, h_r), (n_m, h_m) = ranker, model
    pooled = (h_r + h_m) / (n_r + n_m)
    return (h_r / n_r - h_m / n_m) / math.sqrt(pooled * (1 - pooled) * (1 / n_r + 1 / n_m))


def alternating(n: int, low: int, high: int) -> tuple[list[int], list[int]]:
    """Every bucket with n responses, hits alternating low and high from bucket to bucket."""
    return [n] * USER_BUCKETS, [low if b % 2 else high for b in range(USER_BUCKETS)]


def watching(version: str = "2.0", since: float = T) -> RankerArmJudge:
    judge = RankerArmJudge(POLICY)
    judge.watch(version, since)
    return judge


def test_a_ranker_arm_worse_with_confidence_is_rolled_back() -> None:
    judge = watching()
    assert judge.record(report("model", 600, 120)) is None  # the ranker arm has no answers yet
    verdict = judge.record(report("ranker", 600, 80))
    assert verdict is not None and verdict.ranker_version == "2.0"
    assert verdict.z < -1.96 and (verdict.ranker_rate, verdict.model_rate) == (80 / 600, 0.2)
    assert judge.record(report("ranker", 600, 10)) is None  # decided once per version


def test_a_small_or_uncertain_difference_keeps_the_ranker() -> None:
    judge = watching()
    assert judge.record(report("model", 400, 80)) is None
    assert judge.record(report("ranker", 400, 40)) is None  # under min_responses
    assert judge.record(report("model", 600, 120)) is None
    assert judge.record(report("ranker", 600, 170)) is None  # 0.21 vs 0.20: not worse


def test_the_clustered_variance_is_the_spread_of_the_user_buckets_around_the_arm_rate() -> None:
    assert clustered_variance([10, 10, 20], [2, 2, 4]) == 0.0  # every bucket at the arm's rate
    # p = 0.25; residuals 2 - 2.5, 3 - 2.5 and 0: 3 / 2 * 0.5 / 400
    assert clustered_variance([10, 10, 0], [2, 3, 0]) == pytest.approx(1.5 * 0.5 / 400)
    assert clustered_variance([0, 0], [0, 0]) == 0.0


def test_a_lower_rate_from_a_few_heavy_users_keeps_the_ranker() -> None:
    """Users differ a lot (hit rates 0.06 to 0.54 per bucket in both arms); the ranker arm's
    rate is lower because the draw gave it four heavy users' buckets at 0.2. Per answer the gap
    looks certain; per user it is within what the draw does."""
    model_n, model_h = alternating(50, 3, 27)  # 0.3 overall
    ranker_n = [500] * 4 + [20] * (USER_BUCKETS - 4)
    ranker_h = [100] * 4 + [2 if b % 2 else 10 for b in range(USER_BUCKETS - 4)]
    totals = (sum(ranker_n), sum(ranker_h)), (sum(model_n), sum(model_h))
    assert pooled_z(*totals) <= -POLICY.z  # the per-answer test would roll it back
    judge = watching()
    assert judge.record(bucketed("model", model_n, model_h)) is None
    assert judge.record(bucketed("ranker", ranker_n, ranker_h)) is None


def test_a_ranker_worse_for_users_in_every_bucket_is_rolled_back_on_pooled_reports() -> None:
    model_n, model_h = alternating(4, 1, 2)  # 0.25 / 0.5 per bucket
    ranker_n, ranker_h = alternating(4, 0, 1)  # 0 / 0.25: lower in every bucket
    judge = watching()
    assert judge.record(bucketed("model", model_n, model_h)) is None
    assert judge.record(bucketed("ranker", ranker_n, ranker_h)) is None  # 256 each: too few
    assert judge.record(bucketed("model", model_n, model_h)) is None
    verdict = judge.record(bucketed("ranker", ranker_n, ranker_h))
    assert verdict is not None
    pooled_n = [2 * n for n in ranker_n]
    spread_ = (clustered_variance(pooled_n, [2 * h for h in ranker_h])
               + clustered_variance([2 * n for n in model_n], [2 * h for h in model_h]))
    assert verdict.z == pytest.approx((verdict.ranker_rate - verdict.model_rate)
                                      / math.sqrt(spread_))
    assert verdict.z <= -POLICY.z and verdict.ranker_responses == 512


def test_reports_before_the_ranker_served_other_arms_and_repeats_do_not_count() -> None:
    judge = watching(since=T)
    assert judge.record(report("ranker", 5000, 0, start=T - 50)) is None  # before it served
    assert judge.record(report("popularity", 5000, 0)) is None
    judge.record(report("model", 600, 120, report_id="m"))
    judge.record(report("ranker", 600, 80, report_id="r"))
    again = watching(since=T)
    again.record(report("model", 600, 120, report_id="m"))
    assert again.record(report("model", 600, 120, report_id="m")) is None
    assert again.record(report("ranker", 300, 40, report_id="r")) is None
    assert again.record(report("ranker", 300, 40, report_id="r")) is None  # counted once


def test_a_newer_ranker_version_goes_on_with_the_evidence_and_is_the_one_rolled_back() -> None:
    """Promotions that come faster than a verdict do not keep a losing ranker serving."""
    judge = watching("2.0")
    judge.record(report("model", 400, 80))
    judge.record(report("ranker", 400, 50))  # each arm under min_responses
    judge.watch("2.1", T + 100)
    assert judge.record(report("model", 200, 40, start=T + 100)) is None
    verdict = judge.record(report("ranker", 200, 25, start=T + 100))
    assert verdict is not None and verdict.ranker_version == "2.1"
    assert (verdict.ranker_responses, verdict.model_responses) == (600, 600)


def test_after_a_verdict_or_a_time_without_ranker_the_comparison_starts_afresh() -> None:
    judge = watching("2.0")
    judge.record(report("model", 600, 120))
    assert judge.record(report("ranker", 600, 80)) is not None
    judge.watch("1.9", T + 100)  # the earlier ranker serves again after the rollback
    assert judge.record(report("ranker", 600, 80, start=T + 100)) is None  # model arm reset
    assert judge.record(report("model", 600, 120, start=T + 100)) is not None
    judge.watch(None, T + 200)
    judge.watch("2.2", T + 300)
    assert judge.record(report("ranker", 600, 80, start=T + 250)) is None  # before it served


def test_the_rollback_record_names_the_ranker_version_and_the_evidence() -> None:
    judge = watching()
    judge.record(report("model", 600, 120))
    verdict = judge.record(report("ranker", 600, 80))
    assert verdict is not None
    current = update("2.0")
    rolled = rollback_update(verdict, current)
    assert rolled.stage == "rolled_back" and rolled.version == "2.0"
    assert rolled.sha256 == current.sha256 and rolled.log_key == current.log_key
    assert rolled.metrics["z"] == verdict.z and "ranker arm rollback" in (rolled.note or "")


def envelope(record: KpiReport) -> Envelope[KpiReport]:
    return Envelope(record, None, SourcePosition("kpi.metrics", 0, 0, None), b"")


def _no_loads(_update: ModelUpdate) -> None:
    raise AssertionError("no session model is loaded here")


class _Producer:
    def __init__(self) -> None:
        self.sent: list[tuple[str, object]] = []

    def send(self, topic: str, key: object, record: object) -> None:
        self.sent.append((topic, record))


def test_the_scorer_rolls_its_ranker_back_and_publishes_the_record(tmp_path: Path) -> None:
    store = ModelStore(tmp_path)
    training = RankerTraining(store, held_back=100, gate_every=2, min_lists=50)
    for epoch in range(6):
        train_ranker(training, ranker_examples(300, seed=epoch))
    published = training.published[-1]
    slot = RankerSlot(store, "ranker")
    assert slot.apply(published)
    settings = ServeSettings(ranker_arm=POLICY)
    producer = _Producer()
    metrics = ServeMetrics()
    registry = ModelRegistry("session", _no_loads, 0.0)  # type: ignore[arg-type]
    handler = CanaryDecisions(settings, registry, producer, metrics, slot)  # type: ignore[arg-type]
    since = slot.since
    handler.handle([envelope(report("model", 600, 120, start=since)),
                    envelope(report("ranker", 600, 80, start=since))])
    assert slot.current() is None  # retrieval order: no earlier serving ranker
    [(topic, record)] = producer.sent
    assert topic == settings.kafka.topic(MODEL_UPDATES)
    assert isinstance(record, ModelUpdate) and record.version == published.version
    assert record.stage == "rolled_back"
    assert metrics.ranker_rollbacks._value.get() == 1
