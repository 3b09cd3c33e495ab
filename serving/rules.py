"""The operator's business rules: campaign boosts, pinned and banned items, category diversity.

They come from configuration (`ServeSettings.rules`) or, while present, from a JSON document in
Redis (`<prefix>cfg:{serving}:rules`, serving/features.py), so operators change them without a
redeploy. The filtering stage applies the bans, the ordering stage the rest.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from schemas.fields import Id, IdList
from schemas.limits import MAX_K

Boost = Annotated[float, Field(gt=0.0, le=1000.0)]


class BusinessRules(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    item_boosts: Annotated[dict[Id, Boost], Field(max_length=10_000)] = Field(
        default_factory=dict, description="Campaign multipliers per item (>1 promotes)."
    )
    category_boosts: Annotated[dict[Id, Boost], Field(max_length=1_000)] = Field(
        default_factory=dict, description="Campaign multipliers per category."
    )
    pinned: Annotated[dict[Id, Annotated[int, Field(ge=0, lt=MAX_K)]], Field(max_length=100)] = (
        Field(default_factory=dict, description="Item -> 0-based position it must occupy.")
    )
    banned_items: IdList = Field(default_factory=list)
    banned_categories: IdList = Field(default_factory=list)
    max_per_category: int | None = Field(
        None, ge=1, le=MAX_K, description="Diversity: at most this many items of one category "
        "before items of other categories (soft: backfilled when nothing else is left).",
    )

    @property
    def use_categories(self) -> bool:
        """Whether applying them needs the candidates' categories."""
        return bool(self.category_boosts or self.banned_categories or self.max_per_category)
