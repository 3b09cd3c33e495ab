"""Realistic synthetic interactions for tests, benchmarks and the demo (`streamrec produce-sample`).

The generator models what the features and models are supposed to discover:
- users with stable preferences (a few favourite categories each);
- a popularity skew (Zipf) inside each category;
- sessions: bursts of events seconds apart, separated by hours;
- the funnel view -> click -> add_to_cart -> purchase on the same item;
- new items entering the catalog over time (cold start);
- item metadata for the whole catalog up front (`catalog.items`): each item's category as its
  genre, and a release year, so new items have content before their first event.
"""

from __future__ import annotations

import bisect
import itertools
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from schemas.catalog import CatalogItem
from schemas.events import EventContext, EventType, InteractionEvent
from schemas.topics import CATALOG_ITEMS, INTERACTIONS
from streams.kafka.connection import KafkaConnection
from streams.kafka.producer import EventProducer
from streams.pacing import Pacer

_DEVICES = ("web", "ios", "android", "tv")


class SampleConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    users: int = Field(2_000, ge=1, description="Distinct users.")
    items: int = Field(5_000, ge=10, description="Items in the catalog at the end of the run.")
    categories: int = Field(20, ge=1)
    initial_catalog_share: float = Field(
        0.8, gt=0, le=1, description="Share of items available at the start; the rest appear later."
    )
    zipf_s: float = Field(1.1, gt=0, description="Popularity skew inside a category.")
    favourite_categories: int = Field(3, ge=1)
    p_click: float = Field(0.35, ge=0, le=1)
    p_cart: float = Field(0.3, ge=0, le=1)
    p_purchase: float = Field(0.5, ge=0, le=1)
    session_length_mean: float = Field(6.0, gt=0, description="Views per session, on average.")
    seed: int = 7


@dataclass(frozen=True)
class _User:
    favourites: tuple[int, ...]
    device: str


class SampleGenerator:
    """Deterministic for a seed. `clock` gives event times: simulated (start + spacing) or live."""

    def __init__(
        self, config: SampleConfig, start_ts: float | None = None, live: bool = False
    ) -> None:
        self.c = config
        self.rng = random.Random(config.seed)
        self.live = live
        self._start_ts = start_ts
        self.now = 0.0
        self._item_category = [self.rng.randrange(config.categories) for _ in range(config.items)]
        self._by_category: list[list[int]] = [[] for _ in range(config.categories)]
        for item, category in enumerate(self._item_category):
            self._by_category[category].append(item)
        # Zipf weights over each category's items, as cumulative sums for bisect sampling.
        self._cum: list[list[float]] = [
            list(
                itertools.accumulate(
                    1.0 / (rank + 1) ** config.zipf_s for rank in range(len(items))
                )
            )
            for items in self._by_category
        ]
        self._users = [
            _User(
                tuple(
                    self.rng.sample(
                        range(config.categories),
                        min(config.favourite_categories, config.categories),
                    )
                ),
                self.rng.choice(_DEVICES),
            )
            for _ in range(config.users)
        ]
        self._sessions = [0] * config.users
        self._seq = 0

    def _available(self, produced: int, total: int) -> int:
        """How many items (by index) exist after `produced` of `total` events."""
        share = self.c.initial_catalog_share + (1 - self.c.initial_catalog_share) * produced / max(
            total, 1
        )
        return max(1, int(self.c.items * min(share, 1.0)))

    def _pick_item(self, user: _User, available: int) -> int:
        # 85% from a favourite category, else anywhere: preferences are stable but not exclusive.
        category = (
            self.rng.choice(user.favourites)
            if self.rng.random() < 0.85
            else self.rng.randrange(self.c.categories)
        )
        items, cum = self._by_category[category], self._cum[category]
        for _ in range(8):
            item = items[bisect.bisect_left(cum, self.rng.random() * cum[-1])] if items else 0
            if item < available:
                return item
        return self.rng.randrange(available)

    def _event(self, user_idx: int, session: str, item: int, kind: EventType) -> InteractionEvent:
        self._seq += 1
        self.now = time.time() if self.live else self.now + self.rng.uniform(1.0, 20.0)
        category = self._item_category[item]
        return InteractionEvent(
            event_id=f"e{self.c.seed}-{self._seq}",
            user_id=f"u{user_idx}",
            session_id=session,
            item_id=f"i{item}",
            event_type=kind,
            timestamp=self.now,
            context=EventContext(
                price=round(5.0 + 3.0 * category + (item % 17), 2),
                category=f"c{category}",
                device=self._users[user_idx].device,
            ),
        )

    def _session(self, user_idx: int, available: int) -> Iterator[InteractionEvent]:
        user = self._users[user_idx]
        self._sessions[user_idx] += 1
        session = f"u{user_idx}-s{self._sessions[user_idx]}"
        views = max(1, int(self.rng.expovariate(1 / self.c.session_length_mean)))
        for _ in range(views):
            item = self._pick_item(user, available)
            yield self._event(user_idx, session, item, EventType.VIEW)
            if self.rng.random() >= self.c.p_click:
                continue
            yield self._event(user_idx, session, item, EventType.CLICK)
            if self.rng.random() >= self.c.p_cart:
                continue
            yield self._event(user_idx, session, item, EventType.ADD_TO_CART)
            if self.rng.random() < self.c.p_purchase:
                yield self._event(user_idx, session, item, EventType.PURCHASE)

    def catalog(self, updated_at: float) -> Iterator[CatalogItem]:
        """Every item's metadata (the items that appear later included)."""
        for item, category in enumerate(self._item_category):
            yield CatalogItem(
                item_id=f"i{item}",
                title=f"Item {item}",
                genres=[f"c{category}"],
                release_year=1980 + (item * 7 + category) % 45,
                updated_at=updated_at,
            )

    def events(self, count: int) -> Iterator[InteractionEvent]:
        # Simulated time ends about now: ~25 s per event on average (events plus session gaps).
        self.now = self._start_ts if self._start_ts is not None else time.time() - 25.0 * count - 60
        produced = 0
        while produced < count:
            user_idx = self.rng.randrange(self.c.users)
            for event in self._session(user_idx, self._available(produced, count)):
                yield event
                produced += 1
                if produced >= count:
                    return
            if not self.live:
                # Hours between sessions of the same population, spread over all users.
                self.now += self.rng.uniform(0.0, 30.0)


def publish_sample(
    kafka: KafkaConnection, config: SampleConfig, count: int, rate: float, live: bool
) -> str:
    """Publishes the catalog's metadata to `catalog.items`, then `count` generated events to
    `interactions` at `rate` events/s (0 = at once); returns the events' topic."""
    producer = EventProducer(kafka)
    generator = SampleGenerator(config, live=live)
    topic = kafka.topic(INTERACTIONS)
    pacer = Pacer(rate)
    try:
        catalog = kafka.topic(CATALOG_ITEMS)
        for item in generator.catalog(time.time()):
            producer.send(catalog, item.item_id, item)
        for event in generator.events(count):
            pacer.wait()
            producer.send(topic, event.user_id, event)
    finally:
        producer.close()
    return topic
