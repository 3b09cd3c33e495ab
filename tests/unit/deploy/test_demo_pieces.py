"""The demo's pure pieces: the drift remap, KPI phases and the SVG charts (no services)."""

from __future__ import annotations

import pandas as pd

from deploy.demo.phases import Marks, first_retrain, hit_rate_series, phases
from deploy.demo.svg import line_chart
from deploy.demo.timeline import Timeline
from deploy.demo.traffic import ItemRemap, TrafficStats, live_event
from deploy.generators.dataset_replay import frame_events
from online_trainer.ranker_training import RANKER_MODEL_NAME
from schemas import KpiReport, ModelUpdate
from tests.kpi_buckets import spread


def _kpi(start: float, responses: int, hits: int, version: str = "1.0") -> KpiReport:
    return KpiReport(
        report_id=f"{version}-{start}", model_version=version,
        window_start=start, window_end=start + 5.0, k=10,
        responses=responses, hits=hits, clicks=hits, conversions=0,
        hit_rate_at_k=hits / responses, ctr=hits / responses, conversion_rate=0.0,
        **spread(responses, hits),
    )


def _update(version: str, at: float, model_name: str = "m") -> ModelUpdate:
    return ModelUpdate(model_name=model_name, version=version, kind="full", sha256="0" * 64,
                       published_at=at)


def test_remap_is_a_permutation_of_the_chosen_share() -> None:
    items = [str(i) for i in range(100)]
    remap = ItemRemap(items, 0.5, seed=1)
    assert len(remap.mapping) == 50
    assert sorted(remap.mapping.values()) == sorted(remap.mapping)
    assert sorted(remap(i) for i in items) == sorted(items)


def test_live_events_never_share_a_session_or_event_id_with_the_backfill() -> None:
    day = 86_400.0
    frame = pd.DataFrame({
        "user_id": [1, 1, 2, 1, 2, 3],
        "item_id": [10, 11, 12, 13, 14, 15],
        "timestamp": [1e9, 1e9 + 60, 1e9 + 90, 1e9 + day, 1e9 + day, 1e9 + day + 60],
    })
    backfill = list(frame_events(frame.iloc[:3], shift_to_now=2e9))
    replayed = list(frame_events(frame.iloc[3:]))
    # Each half numbers its sessions from 1: replayed as framed, user 1's live session would be
    # their first backfill session, whose sequence the feature store still holds.
    assert {e.session_id for e in replayed} & {e.session_id for e in backfill}
    live = [live_event(e) for e in replayed]
    assert not {e.session_id for e in live} & {e.session_id for e in backfill}
    assert not {e.event_id for e in live} & {e.event_id for e in backfill}
    assert len({e.session_id for e in live}) == len({e.session_id for e in replayed})
    assert [(e.user_id, e.item_id, e.timestamp) for e in live] == [
        (e.user_id, e.item_id, e.timestamp) for e in replayed]


def test_phases_split_by_drift_and_retrain() -> None:
    base = 1_700_000_000.0
    kpis = [_kpi(base + t, 100, h) for t, h in ((0, 10), (10, 30), (20, 10), (40, 28))]
    marks = Marks(base, base + 5, base + 20, base + 30, settle_s=5)
    result = phases(kpis, marks, end=base + 50)
    assert result["before_drift"].hit_rate == 0.3
    assert result["after_drift"].hit_rate == 0.1
    assert result["after_recovery"].hit_rate == 0.28


def test_first_retrain_is_the_session_models_first_new_major_after_the_drift() -> None:
    base = 1_700_000_000.0
    published = (("1.0", 1), ("1.1", 5), ("2.0", 9), ("3.0", 12))
    updates = [_update(version, base + at) for version, at in published]
    updates.append(_update("2.0", base + 7, model_name=RANKER_MODEL_NAME))
    found = first_retrain(updates, after=base + 2.0)
    assert found is not None and found.version == "2.0"
    assert first_retrain(updates, after=None) is None


def test_series_sums_versions_per_window_and_charts_render() -> None:
    kpis = [_kpi(1_700_000_000.0, 100, 10), _kpi(1_700_000_000.0, 100, 30, "2.0")]
    series = hit_rate_series(kpis)
    assert series == [(1_700_000_005.0, 0.2, 200)]
    svg = line_chart("t", {"a": [(0.0, 1.0), (1.0, 2.0)]}, [(0.5, "drift <x>")])
    assert svg.startswith("<svg") and "drift &lt;x&gt;" in svg
    assert "no data" in line_chart("empty", {"a": []})


def test_the_dashboard_keeps_the_last_latencies_once_requests_stop() -> None:
    timeline, stats = Timeline(), TrafficStats()
    assert timeline.newest_answered() is None
    stats.answered, stats.latencies_ms = 3, [10.0, 12.0, 30.0]
    timeline.add(1.0, stats, {}, alerts=0, versions=1)
    timeline.add(2.0, stats, {}, alerts=0, versions=1)  # the closing phase: no new answers
    assert timeline.samples[-1].latency_p50_ms is None
    answered = timeline.newest_answered()
    assert answered is not None and answered.t == 1.0
    assert answered.latency_p50_ms == 12.0
