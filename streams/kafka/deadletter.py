"""Dead-letter writer: every rejected record is wrapped with its context and kept, never dropped."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Literal, Protocol

from pydantic import BaseModel

from schemas.deadletter import MAX_ORIGINAL_BYTES, DeadLetter
from schemas.fields import printable_text
from schemas.limits import MAX_ID_LENGTH
from schemas.topics import dead_letter_topic
from schemas.wire import ContractError

logger = logging.getLogger(__name__)

Stage = Literal["decode", "validate", "apply", "score", "train", "monitor"]


@dataclass(frozen=True)
class SourcePosition:
    """Where a record came from; enough to find it again with a plain consumer."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int | None = None


def _error_class(error: BaseException) -> str:
    name = error.kind if isinstance(error, ContractError) else type(error).__name__
    # An Id: printable ASCII only (an exception class may have any name).
    return "".join(c for c in name if "!" <= c <= "~")[:MAX_ID_LENGTH] or "Error"


def _message(error: BaseException) -> str:
    try:
        text = str(error)
    except Exception:  # an exception's __str__ is arbitrary code
        text = f"unprintable {type(error).__name__}"
    return printable_text(text)


def _clip(raw: bytes | None) -> tuple[bytes | None, bool]:
    if raw is None or len(raw) <= MAX_ORIGINAL_BYTES:
        return raw, False
    return raw[:MAX_ORIGINAL_BYTES], True


def build_dead_letter(
    key: bytes | None,
    value: bytes | None,
    error: BaseException,
    source: SourcePosition,
    stage: Stage,
    service: str,
) -> DeadLetter:
    original_key, key_clipped = _clip(key)
    original_value, value_clipped = _clip(value)
    # The message is built from field locations and reasons only (see schemas.wire), so it is
    # safe to store; it is still clipped and made printable because exceptions can say anything.
    return DeadLetter(
        original_key=original_key,
        original_value=original_value,
        original_truncated=key_clipped or value_clipped,
        error_class=_error_class(error),
        error_message=_message(error),
        source_topic=source.topic,
        source_partition=source.partition,
        source_offset=source.offset,
        source_timestamp_ms=source.timestamp_ms
        if source.timestamp_ms is not None and source.timestamp_ms >= 0
        else None,
        stage=stage,
        service=service,
        failed_at=time.time(),
    )


class RecordSender(Protocol):
    """What a dead-letter writer sends through: the service's EventProducer, or a faust app's
    producer (streams/kafka/faust_app.py)."""

    def send(self, topic: str, key: str | bytes | None, record: BaseModel) -> None: ...


class DeadLetterWriter:
    """Produces dead letters to `<source topic>.dlq` through the service's idempotent producer.

    Callers flush the producer before committing the source offsets, so a crash between the two
    re-delivers the bad record (a duplicate dead letter, never a lost one).
    """

    def __init__(self, producer: RecordSender, service: str) -> None:
        self._producer = producer
        self._service = service
        self.written = 0

    def write(
        self,
        key: bytes | None,
        value: bytes | None,
        error: BaseException,
        source: SourcePosition,
        stage: Stage = "validate",
    ) -> None:
        """Never raises for anything the record holds: when the full letter cannot be built or
        produced (a key beyond the producer's limits, say), a letter with the position and the
        reasons but without the originals is sent instead. Only a producer that refuses even
        that raises (the caller then must not commit past the record)."""
        topic = dead_letter_topic(source.topic)
        try:
            letter = build_dead_letter(key, value, error, source, stage, self._service)
            self._producer.send(topic, key, letter)
        except Exception as failure:
            logger.error(
                "dead letter without originals topic=%s partition=%d offset=%d failure=%s",
                source.topic, source.partition, source.offset, type(failure).__name__,
            )
            unkept = ContractError(
                _error_class(error),
                f"{_message(error)} (originals dropped: {_error_class(failure)})",
            )
            letter = build_dead_letter(None, None, unkept, source, stage, self._service)
            self._producer.send(topic, None, letter.model_copy(update={"original_truncated": True}))
        logger.warning(
            "dead-lettered topic=%s partition=%d offset=%d error=%s",
            source.topic,
            source.partition,
            source.offset,
            letter.error_class,
        )
        self.written += 1

