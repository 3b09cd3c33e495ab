"""The `catalog.items` loop's handler, and the wait for the catalog before serving.

As a global table is restored before processing starts, the scorer consumes requests only once
its catalog loop has finished every record up to the end offsets it found at start (or after
`catalog_catch_up_s`): answers never go out with content the scorer has not read yet, and the
read does not compete with the first requests for the CPU. A tombstone deletes an item's record.
"""

from __future__ import annotations

import logging
import time

from confluent_kafka import KafkaException

from schemas.catalog import CatalogItem, item_key
from schemas.topics import CATALOG_ITEMS
from serving.item_catalog import ItemCatalog
from serving.metrics import ServeMetrics
from streams.kafka.admin import end_offsets
from streams.kafka.connection import KafkaConnection
from streams.kafka.contract_loop import ContractLoop, Envelope, RecordRejected, Tombstone

logger = logging.getLogger(__name__)


class CatalogFollower:
    def __init__(self, catalog: ItemCatalog, metrics: ServeMetrics) -> None:
        self._catalog = catalog
        self._metrics = metrics

    def handle(self, batch: list[Envelope[CatalogItem]]) -> list[RecordRejected]:
        self._catalog.apply(e.record for e in batch)
        self._metrics.catalog_items.set(len(self._catalog))
        return []

    def delete(self, tombstone: Tombstone) -> None:
        self._catalog.delete(item_key(tombstone.key))
        self._metrics.catalog_items.set(len(self._catalog))

    def catch_up(
        self, loop: ContractLoop[CatalogItem], kafka: KafkaConnection, timeout_s: float
    ) -> None:
        """Waits until `loop` has read catalog.items to the end it has now, at most
        `timeout_s`."""
        topic = kafka.topic(CATALOG_ITEMS)
        started = time.monotonic()
        try:
            ends = end_offsets(kafka, topic)
        except KafkaException as error:
            logger.warning("catalog end unknown error=%s", error)
            return
        finished = loop.finished
        while any(finished.get((topic, p), 0) < end for p, end in ends.items()):
            if time.monotonic() - started > timeout_s:
                logger.warning("catalog not caught up waited_s=%.1f items=%d",
                               time.monotonic() - started, len(self._catalog))
                return
            time.sleep(0.05)
        logger.info("catalog caught up items=%d seconds=%.2f", len(self._catalog),
                    time.monotonic() - started)
