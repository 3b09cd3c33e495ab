"""Reading a table topic to its end before serving, as a global table is restored before a
stream processor starts: until then a service would act on a state the log has moved past."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaException

from streams.kafka.admin import end_offsets
from streams.kafka.connection import KafkaConnection
from streams.kafka.contract_loop import ContractLoop

logger = logging.getLogger(__name__)


def read_to_end(
    loop: ContractLoop[Any],
    kafka: KafkaConnection,
    topic: str,
    timeout_s: float,
    wait: Callable[[], object] = lambda: time.sleep(0.05),
) -> bool:
    """Waits until `loop` has finished every record up to the end offsets `topic` has now;
    False when `timeout_s` passed first or the ends are unknown. `wait` is what passes the time:
    a sleep while the loop runs on a thread of its own, the loop's `run_once` on this one."""
    started = time.monotonic()
    try:
        ends = end_offsets(kafka, topic)
    except KafkaException as error:
        logger.warning("end of topic unknown topic=%s error=%s", topic, error)
        return False
    while any(loop.finished.get((topic, p), 0) < end for p, end in ends.items()):
        if time.monotonic() - started > timeout_s:
            logger.warning("topic not read to its end topic=%s waited_s=%.1f", topic,
                           time.monotonic() - started)
            return False
        wait()
    logger.info("topic read to its end topic=%s seconds=%.2f", topic, time.monotonic() - started)
    return True
