"""Redis key names. Every key carries its entity in a hash tag (`{...}`), so all keys of one
entity hash to the same Redis Cluster slot and a per-entity script step stays single-slot.

Suffixes are fixed and never end in `}`, so ids containing braces cannot make two entities'
keys collide: `<kind>:{<id>}<suffix>` is injective over (kind, id, suffix).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from streams.features.definitions import POPULARITY_SHARDS
from streams.features.layout import HOUR_BUCKETS_SUFFIX, SEQUENCE_SUFFIX


def popularity_shard(item_id: str) -> int:
    """The popularity shard an item's counts go to: fixed per item, so an item's count in a
    bucket lives in exactly one shard and readers merge shards without double counting."""
    return zlib.crc32(item_id.encode()) % POPULARITY_SHARDS


@dataclass(frozen=True)
class FeatureKeys:
    prefix: str

    def user(self, user_id: str) -> str:
        return f"{self.prefix}u:{{{user_id}}}"

    def user_sequence(self, user_id: str) -> str:
        return self.user(user_id) + SEQUENCE_SUFFIX

    def session(self, session_id: str) -> str:
        return f"{self.prefix}s:{{{session_id}}}"

    def session_sequence(self, session_id: str) -> str:
        return self.session(session_id) + SEQUENCE_SUFFIX

    def item(self, item_id: str) -> str:
        return f"{self.prefix}i:{{{item_id}}}"

    def category(self, category: str) -> str:
        return f"{self.prefix}c:{{{category}}}"

    def popularity(self, shard: int) -> str:
        """One shard of the global totals (priors for target encoding) and its newest
        popularity bucket (field `mx_h`). Global keys are sharded (each shard its own hash
        slot) so the writes of every batch do not serialise on one key; readers sum or merge
        all shards."""
        return f"{self.prefix}pop:{{{shard}}}"

    def popularity_bucket(self, shard: int, bucket: int) -> str:
        """The shard's sorted set of item counts in one popularity bucket (event time //
        `popularity_bucket_s`)."""
        return f"{self.popularity(shard)}{HOUR_BUCKETS_SUFFIX}{bucket}"

    def popularity_shards(self) -> list[str]:
        return [self.popularity(shard) for shard in range(POPULARITY_SHARDS)]
