import pytest

from schemas.limits import USER_BUCKETS
from streams.monitor.join import ResponseOutcome
from streams.monitor.windows import Counts, KpiWindows

T0 = 1_750_000_200.0  # a multiple of 300 s: window boundaries fall on round numbers


def outcome(at: float, hit: bool = False, click: bool = False, buy: bool = False,
            version: str = "v1", arm: str | None = None, bucket: int = 0) -> ResponseOutcome:
    return ResponseOutcome(version, at, hit, click, buy, "exp" if arm else None, arm,
                           user_bucket=bucket)


def test_a_window_reports_counts_and_rates_per_model_version() -> None:
    windows = KpiWindows(size_s=300, k=10)
    for o in [
        outcome(T0, hit=True, click=True),
        outcome(T0 + 10, hit=True, buy=True),
        outcome(T0 + 20),
        outcome(T0 + 30),
        outcome(T0 + 40, hit=True, click=True, version="v2"),
    ]:
        windows.add(o)
    reports = {r.model_version: r for r in windows.close(T0 + 300)}
    v1 = reports["v1"]
    assert (v1.window_start, v1.window_end, v1.k) == (T0, T0 + 300, 10)
    assert (v1.responses, v1.hits, v1.clicks, v1.conversions) == (4, 2, 1, 1)
    assert (v1.hit_rate_at_k, v1.ctr, v1.conversion_rate) == (0.5, 0.25, 0.25)
    assert reports["v2"].responses == 1


def test_a_window_reports_each_arm_summed_over_partitions() -> None:
    windows = KpiWindows(size_s=300, k=10)
    windows.add(outcome(T0, hit=True, click=True, arm="model"), partition=0)
    windows.add(outcome(T0 + 1, arm="model"), partition=1)
    windows.add(outcome(T0 + 2, arm="popularity"), partition=0)
    windows.add(outcome(T0 + 3))  # served outside the experiment
    reports = {r.arm: r for r in windows.close(T0 + 300)}
    assert set(reports) == {"model", "popularity", None}
    model = reports["model"]  # summed over partitions
    assert (model.experiment, model.responses, model.hits, model.clicks) == ("exp", 2, 1, 1)
    assert (model.hit_rate_at_k, model.ctr) == (0.5, 0.5)
    assert reports[None].experiment is None and reports["popularity"].hits == 0
    assert len({r.report_id for r in reports.values()}) == 3


def test_windows_stay_open_until_their_end_passes() -> None:
    windows = KpiWindows(size_s=300, k=10)
    windows.add(outcome(T0 + 5))
    windows.add(outcome(T0 + 305))
    assert windows.close(T0 + 299) == []
    assert [r.window_start for r in windows.close(T0 + 300)] == [T0]
    assert windows.oldest_start == T0 + 300


def test_outcomes_for_reported_windows_are_counted_late_not_reopened() -> None:
    windows = KpiWindows(size_s=300, k=10)
    windows.add(outcome(T0))
    windows.close(T0 + 300)
    assert not windows.add(outcome(T0 + 100))
    assert windows.late == 1
    assert windows.close(T0 + 600) == []


def test_windows_are_aligned_to_their_size() -> None:
    assert KpiWindows(size_s=300, k=1).start_of(T0 + 299.9) == pytest.approx(T0)


def test_a_window_reported_again_after_a_restart_keeps_its_id() -> None:
    def report_ids(source: str) -> list[str]:
        windows = KpiWindows(size_s=300, k=10, source=source)
        windows.add(outcome(T0))
        windows.add(outcome(T0 + 1, version="v2"))
        windows.add(outcome(T0 + 301))
        return [r.report_id for r in windows.close(T0 + 600)]

    first = report_ids("responses:0,responses:1")
    assert first == report_ids("responses:0,responses:1")
    assert len(set(first)) == 3  # per version and window
    assert set(first).isdisjoint(report_ids("responses:2"))  # another instance's counts


def test_a_window_splits_responses_and_hits_by_user_bucket_summed_over_partitions() -> None:
    windows = KpiWindows(size_s=300, k=10)
    windows.add(outcome(T0, hit=True, arm="model", bucket=3), partition=0)
    windows.add(outcome(T0 + 1, arm="model", bucket=3), partition=1)
    windows.add(outcome(T0 + 2, hit=True, arm="model", bucket=63), partition=1)
    windows.add(outcome(T0 + 3, arm="ranker", bucket=3), partition=0)
    reports = {r.arm: r for r in windows.close(T0 + 300)}
    model, ranker = reports["model"], reports["ranker"]
    expected_n, expected_h = [0] * USER_BUCKETS, [0] * USER_BUCKETS
    expected_n[3], expected_n[63], expected_h[3], expected_h[63] = 2, 1, 1, 1
    assert (model.bucket_responses, model.bucket_hits) == (expected_n, expected_h)
    assert ranker.bucket_responses[3] == 1 and sum(ranker.bucket_responses) == 1
    assert sum(ranker.bucket_hits) == 0


def test_counts_persisted_before_user_buckets_restore_as_one_bucket() -> None:
    counts = Counts.from_dict({"responses": 5, "hits": 2, "clicks": 1, "conversions": 0})
    assert (counts.bucket_responses[0], counts.bucket_hits[0]) == (5, 2)
    assert sum(counts.bucket_responses) == 5 and sum(counts.bucket_hits) == 2
    again = Counts.from_dict(counts.to_dict())
    assert again == counts
