"""The Redis feature layout, defined once: which fields each entity's hash holds, how the
per-partition, counter, affinity and bucket fields are spelled, and the key suffixes beside the
hash. Keys are built by `keys.py`, windows are defined in `windows.py`, sizes in
`definitions.py`.

The feature worker writes this layout (fold.py builds the field names it sends; apply.lua merges
them) and the scorer reads it (serving/features.py), both through these names. apply.lua cannot
import Python: tests/unit/streams/features/test_layout.py checks every field name it spells
against this module, and tests/integration/streams/feature_worker/test_feature_writer.py checks
every field the real writer leaves in Redis, so neither can drift from it unnoticed.
"""

from __future__ import annotations

from streams.features.definitions import TYPE_CODES

# Every hash: the last offset applied per source partition (idempotence, see apply.lua).
APPLIED_PREFIX = "_p"

# Users, items and categories (counted entities); popularity shards hold counters and mx_h too.
COUNTER_PREFIX = "n_"
LAST_TS = "last_ts"
FIRST_TS = "first_ts"
NEWEST_MINUTE = "mx_m"
NEWEST_HOUR = "mx_h"

# Users.
PREV_GAP = "prev_gap"
LAST_PURCHASE_TS = "last_purchase_ts"
LAG_MS = "lag_ms"
TTL_FROM_MS = "ttl_from_ms"
AFFINITY_PREFIX = "aff:"

# Sessions (LAST_TS and TTL_FROM_MS too).
SESSION_USER = "user"
SESSION_EVENTS = "n"
START_TS = "start_ts"
LAST_GAP = "last_gap"
GAP_SUM = "gap_sum"
GAP_MAX = "gap_max"

# Items.
CATEGORY = "cat"

SEQUENCE_SUFFIX = ":seq"
"""A user's or session's newest events, `item ts type`, newest first."""
MINUTE_BUCKETS_SUFFIX = ":m"
HOUR_BUCKETS_SUFFIX = ":h"
"""An entity's bucket hashes (bucket number -> count); a popularity shard's bucket sorted sets
are `<shard key>:h<bucket>`."""

COUNTER_FIELDS: tuple[str, ...] = tuple(COUNTER_PREFIX + code for code in TYPE_CODES.values())
"""One counter per event type, in the funnel's order."""


def applied_field(partition: int) -> str:
    return f"{APPLIED_PREFIX}{partition}"


def counter_field(code: str) -> str:
    return COUNTER_PREFIX + code


def affinity_field(category: str) -> str:
    return AFFINITY_PREFIX + category


HASH_FIELDS: dict[str, frozenset[str]] = {
    "u": frozenset({LAST_TS, FIRST_TS, NEWEST_MINUTE, NEWEST_HOUR, PREV_GAP, LAST_PURCHASE_TS,
                    LAG_MS, TTL_FROM_MS, *COUNTER_FIELDS}),
    "s": frozenset({SESSION_USER, SESSION_EVENTS, LAST_TS, START_TS, LAST_GAP, GAP_SUM, GAP_MAX,
                    TTL_FROM_MS}),
    "i": frozenset({LAST_TS, FIRST_TS, NEWEST_MINUTE, NEWEST_HOUR, CATEGORY, *COUNTER_FIELDS}),
    "c": frozenset({LAST_TS, FIRST_TS, NEWEST_MINUTE, NEWEST_HOUR, *COUNTER_FIELDS}),
    "p": frozenset({NEWEST_HOUR, *COUNTER_FIELDS}),
}
"""The fixed fields of each entity kind's hash (u user, s session, i item, c category, p
popularity shard), besides the `_p<partition>` fields every hash has and users' `aff:<category>`
fields."""


def is_layout_field(kind: str, name: str) -> bool:
    """Whether `name` is a field the layout lets a `kind` hash hold."""
    if name in HASH_FIELDS[kind]:
        return True
    if name.startswith(APPLIED_PREFIX) and name[len(APPLIED_PREFIX):].isdigit():
        return True
    return kind == "u" and name.startswith(AFFINITY_PREFIX) and len(name) > len(AFFINITY_PREFIX)
