"""What the feature writer keeps per entity, in one place shared by the Lua script and the oracle.

Everything the script needs (sequence length, window sizes, affinity weights) is passed to it as
arguments from here, so Python, Lua and the oracle cannot drift apart.
"""

from __future__ import annotations

from schemas.events import EventType

SEQUENCE_LENGTH = 50
"""Newest entries kept in each user's and session's sequence list."""

MINUTE_BUCKETS = 60
"""Minute buckets kept per entity: the 1 h window is the current minute plus the 59 before."""

HOUR_BUCKETS = 168
"""Hour buckets kept per entity: 24 h = this hour + the 23 before; 7 d = this hour + 167 before."""

POPULARITY_BUCKETS = 24
"""Popularity sorted sets kept, one per bucket of `popularity_bucket_s`."""

POPULARITY_BUCKET_S = 3600
"""Default width of a popularity bucket. The scorer's cold-start list is the newest bucket's
counts plus half of the previous one's, so the list follows the traffic of the last one to two
bucket widths."""

POPULARITY_SHARDS = 8
"""Shards of the global popularity keys (by item id hash): spread over hash slots, hence over a
cluster's masters, instead of one hot key every batch writes."""

TYPE_CODES: dict[str, str] = {
    EventType.VIEW: "view",
    EventType.CLICK: "click",
    EventType.ADD_TO_CART: "cart",
    EventType.PURCHASE: "purchase",
}
"""Short event-type names used in hash fields (`n_<code>`) and sequence entries."""

AFFINITY_WEIGHTS: dict[str, int] = {"view": 1, "click": 2, "cart": 3, "purchase": 5}
"""User x category affinity adds these integer weights, so the crossing stays exact."""

TIME_FORMAT = "%.3f"
"""Derived durations (gaps) are stored with millisecond precision, formatted identically by Lua
and Python (both use correctly rounded printf), so the oracle can match them byte for byte."""

CTR_PRIOR_WEIGHT = 20.0
"""Pseudo-views behind the global prior in smoothed rates: (clicks + m * p) / (views + m)."""

CVR_PRIOR_WEIGHT = 20.0
"""Pseudo-clicks behind the global prior in conversion: (purchases + m * p) / (clicks + m)."""
