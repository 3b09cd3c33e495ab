import random

import pytest

from schemas.alerts import DriftAlert
from schemas.events import EventType
from schemas.kpi import KpiReport
from streams.monitor.drift.config import DriftSettings
from streams.monitor.pipeline import MonitorPipeline
from streams.monitor.settings import MonitorSettings

from .records import T0, interaction, response

WALL = 0.0  # a constant wall clock: only event time drives the pipeline


def settings(**drift: object) -> MonitorSettings:
    return MonitorSettings(
        metrics_port=0, k=3, attribution_window_s=60, window_s=300, allowed_lateness_s=0,
        drift=DriftSettings(**drift),
    )


def flush(pipeline: MonitorPipeline) -> tuple[list[KpiReport], list[DriftAlert]]:
    published = pipeline.advance(wall=1e12)  # idle long enough to close everything
    return published.reports, published.alerts


def test_responses_and_later_interactions_become_a_kpi_report() -> None:
    pipeline = MonitorPipeline(settings())
    assert pipeline.on_response(response("r1", user="u1"), WALL) == "applied"
    pipeline.on_response(response("r2", user="u2"), WALL)
    pipeline.on_response(response("r3", user="u3"), WALL)
    assert pipeline.on_interaction(interaction("a", T0 + 5, user="u1"), WALL) == "applied"
    pipeline.on_interaction(interaction("b", T0 + 6, EventType.PURCHASE, user="u2"), WALL)
    pipeline.on_interaction(interaction("b", T0 + 7, EventType.VIEW, user="u3"), WALL)
    reports, _ = flush(pipeline)
    [report] = reports
    assert (report.responses, report.hits, report.clicks, report.conversions) == (3, 2, 1, 1)
    assert report.hit_rate_at_k == 2 / 3


def test_nothing_is_reported_before_the_attribution_window_closes() -> None:
    pipeline = MonitorPipeline(settings())
    pipeline.on_response(response("r1", served_at=T0), WALL)
    window_end = pipeline.windows.start_of(T0) + 300
    # Event time passes the window's end, but not its end plus the attribution window (60 s).
    pipeline.on_interaction(interaction("zz", window_end + 30, EventType.VIEW), WALL)
    assert pipeline.advance(WALL).reports == []
    assert pipeline.windows.oldest_start == window_end - 300  # the window is still open
    pipeline.on_interaction(interaction("zz", window_end + 61, EventType.VIEW), WALL)
    assert [r.responses for r in pipeline.advance(WALL).reports] == [1]


def test_a_response_older_than_the_watermark_is_late() -> None:
    pipeline = MonitorPipeline(settings())
    pipeline.on_interaction(interaction("zz", T0 + 1000, EventType.VIEW), WALL)
    assert pipeline.on_response(response("r1", served_at=T0), WALL) == "late"


def simulate(pipeline: MonitorPipeline, phases: list[tuple[int, float, str]]) -> list[DriftAlert]:
    rng = random.Random(11)
    at, n, alerts = T0, 0, []
    for count, p_hit, version in phases:
        for _ in range(count):
            user = f"u{n}"
            pipeline.on_response(response(f"r{n}", user=user, served_at=at, version=version), WALL)
            if rng.random() < p_hit:
                pipeline.on_interaction(interaction("a", at + 1, user=user), WALL)
            n += 1
            at += 2.0
            if n % 500 == 0:
                alerts += pipeline.advance(WALL).alerts
    return alerts + flush(pipeline)[1]


def test_a_kpi_drop_raises_one_retrain_alert() -> None:
    alerts = simulate(MonitorPipeline(settings(kpi_metrics=("hit_rate",))),
                      [(6_000, 0.3, "v1"), (3_000, 0.1, "v1")])
    assert len(alerts) == 1
    [alert] = alerts
    assert (alert.detector, alert.suggested_action, alert.model_version) == (
        "kpi.hit_rate", "retrain", "v1"
    )
    assert alert.baseline > 0.25 and alert.current < 0.15
    assert alert.detected_at > T0 + 6_000 * 2.0


def test_a_kpi_drop_right_after_a_new_version_suggests_rollback() -> None:
    alerts = simulate(MonitorPipeline(settings(kpi_metrics=("hit_rate",))),
                      [(6_000, 0.3, "v1"), (3_000, 0.1, "v2")])
    assert [(a.suggested_action, a.model_version) for a in alerts] == [("rollback", "v2")]


def test_stale_features_raise_a_freshness_alert() -> None:
    pipeline = MonitorPipeline(settings(freshness_sample_responses=10, freshness_consecutive=1))
    for n in range(10):
        pipeline.on_response(
            response(f"r{n}", served_at=T0 + n, feature_freshness_ms=120_000.0), WALL
        )
    _, alerts = flush(pipeline)
    assert [(a.detector, a.current) for a in alerts] == [("freshness.feature", 120.0)]


def test_a_shifted_interaction_mix_raises_a_psi_alert() -> None:
    pipeline = MonitorPipeline(settings(psi_sample_events=200))
    for n in range(200):  # the bootstrapped reference: mostly views
        kind = EventType.VIEW if n % 10 else EventType.CLICK
        pipeline.on_interaction(interaction("x", T0 + n, kind, event_id=f"e{n}"), WALL)
    for n in range(200):  # now mostly purchases
        kind = EventType.PURCHASE if n % 10 else EventType.VIEW
        pipeline.on_interaction(interaction("x", T0 + 200 + n, kind, event_id=f"f{n}"), WALL)
    published = pipeline.advance(WALL)
    assert [a.detector for a in published.alerts] == ["psi.event_type"]
    assert published.psi["event_type"] > 0.25


def test_after_a_restart_windows_already_reported_are_not_reported_again() -> None:
    pipeline = MonitorPipeline(settings())
    window_start = pipeline.windows.start_of(T0)
    pipeline.resume_after(window_start + 300)  # the previous run reported this window
    pipeline.on_response(response("r1", served_at=T0), WALL)
    pipeline.on_response(response("r2", served_at=window_start + 301), WALL)
    reports, _ = flush(pipeline)
    assert [r.window_start for r in reports] == [window_start + 300]


def test_an_early_click_waits_for_its_response_and_counts_for_it() -> None:
    pipeline = MonitorPipeline(settings())
    assert pipeline.on_interaction(interaction("a", T0 + 50), WALL) == "applied"
    pipeline.on_response(response("r1", served_at=T0), WALL)
    [report] = flush(pipeline)[0]
    assert (report.responses, report.hits, report.clicks) == (1, 1, 1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_stationary_stream_of_user_bursts_raises_no_kpi_alert(seed: int) -> None:
    """Users act in bursts, as in the demo's replay of ML-100K: dozens of requests and acts of
    one user within one attribution window, every user alike (one act in ten on one of the 30
    items their answers draw from). An act that names no answer counts for one of them (last
    touch); were it counted for every answer of the burst that showed its item, a burst's
    answers would hit or miss together and ADWIN, which takes them as independent, would cut
    on a stream that never changed."""
    pipeline = MonitorPipeline(MonitorSettings(
        metrics_port=0, k=10, attribution_window_s=4.0, window_s=5.0, allowed_lateness_s=0,
        drift=DriftSettings(kpi_metrics=("hit_rate",)),
    ))
    rng = random.Random(seed)
    at, n, alerts = T0, 0, []
    for burst in range(400):
        user = f"u{burst}"
        pool = [f"{user}-i{j}" for j in range(30)]
        for _ in range(rng.randint(1, 60)):
            shown = tuple(rng.sample(pool, 10))
            pipeline.on_response(response(f"r{n}", user=user, served_at=at, items=shown), WALL)
            item = rng.choice(pool) if rng.random() < 0.1 else f"elsewhere{n}"
            named = f"r{n}" if item in shown else None  # the client names the answer it came from
            pipeline.on_interaction(
                interaction(item, at + 0.5, user=user, request_id=named, event_id=f"e{n}"), WALL
            )
            n += 1
            at += 0.0125  # 80 events/s
        alerts += pipeline.advance(WALL).alerts
    assert alerts + flush(pipeline)[1] == []
