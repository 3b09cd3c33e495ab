from __future__ import annotations

import time

from schemas.events import EventType, InteractionEvent
from schemas.wire import encode
from streams.feature_worker.pipeline import SourceRecord, validate
from streams.metrics import histogram_quantile


def _record(offset: int, value: bytes | None) -> SourceRecord:
    return SourceRecord("interactions", 2, offset, b"k", value)


def test_validation_keeps_positions_and_rejects_without_dropping() -> None:
    good = InteractionEvent(
        event_id="e",
        user_id="u",
        session_id="s",
        item_id="i",
        event_type=EventType.CLICK,
        timestamp=time.time(),
    )
    valid, rejected = validate([_record(7, encode(good)), _record(8, b"{"), _record(9, None)])
    assert [(r.offset, e.partition, e.offset) for r, e in valid] == [(7, 2, 7)]
    read = valid[0][1].event
    assert {name: getattr(read, name) for name in InteractionEvent.model_fields} == dict(good)
    assert [(r.record.offset, r.stage) for r in rejected] == [(8, "validate"), (9, "validate")]


def test_histogram_quantile_interpolates_inside_the_bucket() -> None:
    samples = {
        'h_bucket{le="0.1"}': 50.0,
        'h_bucket{le="0.2"}': 100.0,
        'h_bucket{le="+Inf"}': 100.0,
    }
    assert histogram_quantile(samples, "h", 0.5) == 0.1
    assert abs(histogram_quantile(samples, "h", 0.75) - 0.15) < 1e-9
