"""A faust transport whose consumer lets the broker batch fetches for a few milliseconds.

faust builds its aiokafka consumer with `fetch_max_wait_ms=1500` and aiokafka's
`fetch_min_bytes=1`: the broker answers a fetch as soon as one byte is ready, so at a steady
1,000 events/s every producer flush (a few ms apart) is its own fetch, its own hand-over from
faust's consumer thread to the agent, and a handful of records per round. That churn, not the
events, was most of the worker's CPU (~70 % of a core at 1,000 events/s on 2 shared cores).

Here the broker holds a fetch until `min_bytes` are ready or `max_wait_ms` passed: at low rates
a fetch carries `max_wait_ms` worth of events (the worker's CPU fell to ~40 % of a core), at
high rates `min_bytes` is reached first and nothing waits. The price is at most `max_wait_ms`
of feature freshness, paid only when the stream is slow.

faust exposes neither setting, so the app builds its transport from a subclass of faust's own
aiokafka driver; the two values are set on the consumer before it starts its fetcher, which
reads them then (aiokafka is pinned below 0.15 in pyproject.toml).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import faust
from faust.transport.drivers import aiokafka as driver

from streams.feature_worker.eager_delivery import EagerDeliveryMixin


@dataclass(frozen=True)
class FetchBatching:
    """How long the broker may hold one of the app's fetches, and for how many bytes."""

    min_bytes: int
    max_wait_ms: int


class _ConsumerThread(driver.AIOKafkaConsumerThread):
    def _create_worker_consumer(self, transport: Any) -> Any:
        consumer = super()._create_worker_consumer(transport)
        policy: FetchBatching = self.app.fetch_batching  # type: ignore[attr-defined]
        consumer._fetch_min_bytes = policy.min_bytes
        consumer._fetch_max_wait_ms = policy.max_wait_ms
        return consumer


class _Consumer(EagerDeliveryMixin, driver.Consumer):
    def _new_consumer_thread(self) -> Any:
        return _ConsumerThread(self, loop=self.loop, beacon=self.beacon)


class _Transport(driver.Transport):
    Consumer = _Consumer


class BatchingApp(faust.App):
    """A faust.App whose consumer follows `fetch_batching` and delivers records eagerly
    (streams/feature_worker/eager_delivery.py)."""

    def __init__(self, *args: Any, fetch_batching: FetchBatching, **kwargs: Any) -> None:
        self.fetch_batching = fetch_batching
        super().__init__(*args, **kwargs)

    def _new_transport(self) -> Any:
        return _Transport(self.conf.broker_consumer, self)
