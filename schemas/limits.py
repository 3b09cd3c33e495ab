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

MAX_CLOCK_SKEW_S = 24 * 3600.0
"""How far in the future a timestamp may be, to tolerate producers with skewed clocks."""

MIN_TIMESTAMP_S = 0.0
"""Timestamps are Unix seconds and strictly positive; historical replays (1990s data) are fine."""

MAX_JSON_DEPTH = 16
"""No contract nests deeper than this; deeper input is rejected before it reaches pydantic."""
