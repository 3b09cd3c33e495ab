"""The scorer's four doors on the real Kafka: every record of each door's hostile corpus lands
in that door's dead-letter topic (a bad request with recoverable ids also gets an error
answer), and the scorer keeps serving, its loops alive."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from schemas.deadletter import DeadLetter
from schemas.topics import (
    CATALOG_ITEMS,
    KPI_METRICS,
    MODEL_UPDATES,
    REC_REQUESTS,
    dead_letter_topic,
)
from schemas.wire import decode
from serving.responses import recover_ids
from serving.service import ScorerService
from streams.kafka.connection import KafkaConnection
from streams.kafka.contract_loop import ContractLoop
from streams.kafka.producer import EventProducer
from streams.redis.connection import RedisConnection
from tests.hostile_corpus import Hostile, corpus
from tests.integration.kafka_helpers import read_all
from tests.integration.serving.helpers import (
    request,
    responses,
    running,
    send_requests,
    settings,
    wait_for,
)

pytestmark = pytest.mark.e2e


def _send(kafka: KafkaConnection, door: str, records: list[Hostile]) -> None:
    producer = EventProducer(kafka)
    for record in records:
        producer.send_raw(kafka.topic(door), record.key, record.value, record.headers)
    producer.flush()


def _letters(kafka: KafkaConnection, door: str, expected: int) -> list[DeadLetter]:
    topic = dead_letter_topic(kafka.topic(door))
    return [decode(DeadLetter, m.value()) for m in read_all(kafka, topic, expected)]


def _keyed(records: list[Hostile]) -> list[Hostile]:
    # A compacted topic refuses records without a key at the broker: they cannot arrive.
    return [r for r in records if r.key is not None]


def test_every_hostile_record_at_the_scorers_doors_is_dead_lettered_and_serving_goes_on(
    kafka: KafkaConnection, scorer_redis_connection: RedisConnection, tmp_path: Path
) -> None:
    sent = {
        REC_REQUESTS.name: corpus(REC_REQUESTS.name),
        MODEL_UPDATES.name: _keyed(corpus(MODEL_UPDATES.name)),
        KPI_METRICS.name: corpus(KPI_METRICS.name),
        CATALOG_ITEMS.name: _keyed(corpus(CATALOG_ITEMS.name)),
    }
    for door, records in sent.items():
        _send(kafka, door, records)
    good = request("u-good")
    send_requests(kafka, [good])

    answerable = [r for r in sent[REC_REQUESTS.name] if recover_ids(r.value) is not None]
    assert 10 < len(answerable) < len(sent[REC_REQUESTS.name])
    service = ScorerService(settings(kafka, scorer_redis_connection, tmp_path))
    with running(service):
        answered = responses(kafka, 1 + len(answerable))
        loops: dict[str, ContractLoop[Any]] = {
            REC_REQUESTS.name: service.requests_loop,
            MODEL_UPDATES.name: service.updates_loop,
            KPI_METRICS.name: service.kpi_loop,
            CATALOG_ITEMS.name: service.catalog_loop,
        }
        assert wait_for(
            lambda: all(loops[d].counters.consumed >= len(sent[d]) for d in sent), 60
        )
        assert service.healthy()
        later = request("u-later")
        send_requests(kafka, [later])
        assert wait_for(lambda: service.requests_loop.counters.handled == 2, 30)

    assert len(answered) == 1 + len(answerable)
    (ok,) = [a for a in answered if a.status == "ok"]
    assert ok.request_id == good.request_id
    # Answers arrive in partition order, not send order: every answer but the good one.
    others = [a for a in answered if a is not ok]
    wrong = [
        (a.status, a.error) for a in others if a.error is None or a.error.code != "invalid_request"
    ]
    assert wrong == []
    for door, records in sent.items():
        letters = _letters(kafka, door, len(records))
        assert sorted(_original(x) for x in letters) == sorted(
            _original(r) for r in records
        ), door
        assert all(x.stage == "validate" and x.service == "scorer" for x in letters)
        assert loops[door].counters.dead_lettered == len(records), door


def _original(r: DeadLetter | Hostile) -> tuple[bool, bytes, bool, bytes]:
    if isinstance(r, DeadLetter):
        key, value = r.original_key, r.original_value
    else:
        key, value = r.key, r.value
    return key is None, key or b"", value is None, value or b""
