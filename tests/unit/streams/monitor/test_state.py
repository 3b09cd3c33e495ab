"""The monitor's state rows: a worker restored from them finishes what was open and reports
nothing twice; a segment leaves the table once everything in it has closed."""

from __future__ import annotations

from collections.abc import Iterator

from schemas import encode
from schemas.events import EventType, InteractionEvent
from schemas.kpi import KpiReport, user_bucket
from schemas.recommendations import RecommendationResponse
from streams.monitor.pipeline import MonitorPipeline
from streams.monitor.settings import MonitorSettings
from streams.monitor.state import MonitorState

from .records import T0, interaction, response

WALL = 0.0
SETTINGS = MonitorSettings(metrics_port=0, k=3, attribution_window_s=60, window_s=300,
                           allowed_lateness_s=0)


class Table:
    """The rows as the changelog would keep them (a dict per partition, tombstones applied)."""

    def __init__(self) -> None:
        self.data: dict[bytes, tuple[int, bytes]] = {}

    def put(self, partition: int, key: bytes, value: bytes) -> None:
        self.data[key] = (partition, value)

    def delete(self, partition: int, key: bytes) -> None:
        self.data.pop(key, None)

    def items(self) -> Iterator[tuple[int, bytes, bytes]]:
        for key, (partition, value) in list(self.data.items()):
            yield partition, key, value


def step(
    pipeline: MonitorPipeline, state: MonitorState,
    records: list[RecommendationResponse | InteractionEvent],
) -> list[KpiReport]:
    for record in records:
        if isinstance(record, RecommendationResponse):
            if pipeline.on_response(record, WALL, "responses:0") == "applied":
                state.response(0, record.request_id, encode(record))
        elif pipeline.on_interaction(record, WALL, "interactions:0") == "applied":
            state.act(0, record.event_id, encode(record))
    published = pipeline.advance(WALL)
    state.advanced(pipeline, published, [0], WALL)
    return published.reports


def fresh() -> MonitorPipeline:
    pipeline = MonitorPipeline(SETTINGS)
    pipeline.clock.register("responses:0", WALL)
    pipeline.clock.register("interactions:0", WALL)
    return pipeline


def pushers(at: float) -> list[RecommendationResponse | InteractionEvent]:
    """Records at `at` on both sources that count for nothing (they move the watermark)."""
    return [interaction("zz", at, EventType.VIEW, user="p"),
            response(f"p{at}", user="p", items=("zz",), served_at=at)]


BATCHES: list[list[RecommendationResponse | InteractionEvent]] = [
    [response("r1", user="u1", served_at=T0), response("r2", user="u2", served_at=T0 + 301),
     interaction("a", T0 + 5, user="u1"), *pushers(T0 + 301)],
    [*pushers(T0 + 362)],  # closes the first window (end + attribution), not the second
    [interaction("b", T0 + 310, user="u2"), *pushers(T0 + 700)],
]


Reported = tuple[float, str, int, int, tuple[int, ...], tuple[int, ...]]


def reports_of(runs: list[list[KpiReport]]) -> list[Reported]:
    return sorted((r.window_start, r.model_version, r.responses, r.hits,
                   tuple(r.bucket_responses), tuple(r.bucket_hits))
                  for run in runs for r in run if r.model_version == "v1")


def test_a_restored_worker_reports_what_an_uninterrupted_one_does_and_nothing_twice() -> None:
    table = Table()
    pipeline, state = fresh(), MonitorState(table)
    first = [step(pipeline, state, b) for b in BATCHES[:2]]
    restored, state = fresh(), MonitorState(table)
    assert state.restore(restored, WALL) > 0
    rest = [step(restored, state, b) for b in BATCHES[1:]]  # batch 2 re-delivered after a crash
    assert reports_of(first + rest) == reports_of([step_all(BATCHES)])
    assert len(reports_of(first + rest)) == 2


def test_an_open_window_restores_its_counts_per_user_bucket() -> None:
    table = Table()
    pipeline, state = fresh(), MonitorState(table)
    first = [step(pipeline, state, BATCHES[0])]  # r1 closed and counted, its window open
    restored, state = fresh(), MonitorState(table)
    state.restore(restored, WALL)
    rest = [step(restored, state, b) for b in BATCHES[1:]]
    reports = reports_of(first + rest)
    assert reports == reports_of([step_all(BATCHES)])
    bucket_responses, bucket_hits = reports[0][4], reports[0][5]
    assert bucket_responses[user_bucket("u1")] == 1 and bucket_hits[user_bucket("u1")] == 1


def step_all(batches: list[list[RecommendationResponse | InteractionEvent]]) -> list[KpiReport]:
    pipeline, state = fresh(), MonitorState(Table())
    return [r for b in batches for r in step(pipeline, state, b)]


def test_segments_leave_the_table_once_all_they_kept_has_closed() -> None:
    table = Table()
    pipeline, state = fresh(), MonitorState(table)
    for batch in BATCHES:
        step(pipeline, state, batch)
    step(pipeline, state, pushers(T0 + 10_000))
    segments = [k for k in table.data if k.startswith(b"s")]
    # Only the last batch's segment (its pushers, still within their window) remains.
    assert len(segments) == 1


def test_a_large_batch_is_split_into_segments_below_the_broker_message_limit() -> None:
    table = Table()
    pipeline, state = fresh(), MonitorState(table)
    items = tuple(f"{'x' * 120}{i}" for i in range(500))
    big: list[RecommendationResponse | InteractionEvent] = [
        response(f"r{n}", user=f"u{n}", items=items, served_at=T0) for n in range(12)
    ]  # ~80 KB each
    step(pipeline, state, big)
    sizes = [len(value) for key, (_, value) in table.data.items() if key.startswith(b"s")]
    assert len(sizes) >= 2 and max(sizes) < 1_000_000
    restored = fresh()
    assert MonitorState(table).restore(restored, WALL) == 12
