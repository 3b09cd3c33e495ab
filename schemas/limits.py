"""Bounds every record shares: sizes, lengths and the sane range for timestamps.

They are deliberately far below Kafka's 1 MB default so that a record that passes validation can
always be produced, dead-lettered with its context, and stored in Redis without surprises.
"""

from __future__ import annotations

MAX_PAYLOAD_BYTES = 256 * 1024
"""Largest encoded record accepted or produced (bytes)."""

MAX_ID_LENGTH = 128
MAX_TEXT_LENGTH = 2048
MAX_LIST_LENGTH = 1000
MAX_K = 500
"""Most items one recommendation may ask for (and one response may carry)."""

USER_BUCKETS = 64
"""How many user buckets a KPI report splits its counts into (schemas.kpi.user_bucket): the
per-user spread a judge needs for a variance at the level users are randomized, in a report
of bounded size."""

MIN_TIMESTAMP_S = 631_152_000.0
"""Timestamps are Unix seconds after 1990-01-01T00:00:00Z (exclusive): historical replays (1990s
data) are fine; zero, negative and small values (a counter, a duration) are not times."""

MAX_TIMESTAMP_S = 4_102_444_800.0
"""Timestamps are Unix seconds up to 2100-01-01T00:00:00Z: a fixed bound every validator can
check (the JSON Schemas carry it), which also turns away milliseconds (1.7e12 today) and
nanoseconds sent where seconds are due. How far ahead of *now* a record may be is a reader's
question, answered with `DEFAULT_MAX_FUTURE_SKEW_S` (see schemas.wire.decode)."""

DEFAULT_MAX_FUTURE_SKEW_S = 300.0
"""How far ahead of the reading process's clock a timestamp may be: room for producers whose
clocks run a little fast, not for records dated hours ahead (they would empty time-bucketed
features and advance event-time watermarks). Services take it from `max_future_skew_s`."""
