"""Redis key names. Every key carries its entity in a hash tag (`{...}`), so all keys of one
entity hash to the same Redis Cluster slot and a per-entity script step stays single-slot.

Suffixes are fixed and never end in `}`, so ids containing braces cannot make two entities'
keys collide: `<kind>:{<id>}<suffix>` is injective over (kind, id, suffix).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FeatureKeys:
    prefix: str

    def user(self, user_id: str) -> str:
        return f"{self.prefix}u:{{{user_id}}}"

    def user_sequence(self, user_id: str) -> str:
        return f"{self.user(user_id)}:seq"

    def session(self, session_id: str) -> str:
        return f"{self.prefix}s:{{{session_id}}}"

    def session_sequence(self, session_id: str) -> str:
        return f"{self.session(session_id)}:seq"

    def item(self, item_id: str) -> str:
        return f"{self.prefix}i:{{{item_id}}}"

    def category(self, category: str) -> str:
        return f"{self.prefix}c:{{{category}}}"

    def popularity(self) -> str:
        """Global totals (priors for target encoding) and the newest popularity hour."""
        return f"{self.prefix}pop:{{all}}"

    def popularity_hour(self, hour: int) -> str:
        return f"{self.popularity()}:h{hour}"
