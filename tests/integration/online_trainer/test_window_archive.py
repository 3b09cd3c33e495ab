"""The window archive on the real Kafka: the compaction job, its dead letters and re-runs, and a
retrain window read from the archive plus the Kafka tail against a pure Kafka replay."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pandas as pd
import pytest

from deploy.generators.dataset_replay import frame_events
from online_trainer.archive_job import archive_root, run_archive
from online_trainer.archive_loader import ArchiveLoader
from online_trainer.archive_settings import ArchiveSettings
from online_trainer.online_model import Interaction
from online_trainer.replay import replay_window
from online_trainer.retrain_job import run_retrain
from online_trainer.window import load_window
from schemas import DeadLetter, InteractionEvent, decode, encode
from schemas.topics import INTERACTIONS, INTERACTIONS_DLQ
from streams.kafka.connection import KafkaConnection
from streams.kafka.principals import ARCHIVER, TRAINER
from streams.kafka.producer import EventProducer
from tests.integration.kafka_helpers import read_all
from tests.integration.online_trainer.conftest import publish, train_settings


def _produce(kafka: KafkaConnection, events: list[InteractionEvent], first_ms: int) -> None:
    producer = EventProducer(kafka)
    for n, event in enumerate(events):
        producer.send_raw(
            kafka.topic(INTERACTIONS), event.user_id, encode(event), timestamp_ms=first_ms + n
        )
    producer.flush()


def _settings(kafka: KafkaConnection, tmp_path: Path) -> ArchiveSettings:
    return ArchiveSettings(
        kafka=kafka.as_principal(ARCHIVER),
        archive_dir=tmp_path / "archive",
        group_id=f"archiver-{kafka.topic_prefix}",
        batch_max_events=700,
    )


def test_archive_plus_tail_reads_exactly_the_examples_of_a_kafka_replay(
    kafka: KafkaConnection, ml100k: pd.DataFrame, tmp_path: Path
) -> None:
    events = list(frame_events(ml100k.iloc[:8000]))
    base_ms = int(time.time() * 1000) - 3_600_000
    _produce(kafka, events[:6000], base_ms)
    bad = EventProducer(kafka)
    for n in range(2):
        bad.send_raw(
            kafka.topic(INTERACTIONS), b"u1", b"{not json", timestamp_ms=base_ms + 6000 + n
        )
    bad.flush()
    settings = _settings(kafka, tmp_path)

    first = run_archive(settings)
    assert (first.rows, first.invalid, first.complete) == (6000, 2, True)
    assert first.batches > 4  # several batches per partition: offset ranges inside files matter
    letters = [decode(DeadLetter, m.value()) for m in read_all(
        kafka, kafka.topic(INTERACTIONS_DLQ), 2)]
    assert [(d.service, d.stage) for d in letters] == [("archiver", "decode")] * 2
    again = run_archive(settings)
    assert (again.rows, again.invalid, again.batches) == (0, 0, 0)

    _produce(kafka, events[6000:], base_ms + 10_000)
    reader = kafka.as_principal(TRAINER)
    since = (base_ms + 3000) / 1000  # the window starts inside the archive's files
    archive = archive_root(settings)
    mixed = load_window(reader, since, archive, ArchiveLoader(workers=3, prefetch=2))
    pure = load_window(reader, since, None)
    replay = replay_window(reader, since)

    assert mixed.interactions == pure.interactions
    assert pure.interactions == [
        Interaction(e.user_id, e.item_id, int(e.timestamp)) for e in replay.events
    ]
    assert (mixed.archived, mixed.replayed, pure.replayed) == (3000, 2000, 5000)
    assert mixed.start_offsets == replay.start_offsets
    assert mixed.end_offsets == replay.end_offsets

    tail = run_archive(settings)
    assert (tail.rows, tail.invalid) == (2000, 0)
    archived = load_window(reader, since, archive, ArchiveLoader(workers=2, prefetch=1))
    assert (archived.archived, archived.replayed) == (5000, 0)
    assert archived.interactions == pure.interactions
    rows = sum(b.rows for b in archive.batches())
    assert rows == 8000  # no row archived twice across the three runs


def test_a_retrain_with_an_archive_reads_it_and_replays_only_the_tail(
    kafka: KafkaConnection, ml100k: pd.DataFrame, tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    publish(kafka, ml100k.iloc[:2000])
    settings = _settings(kafka, tmp_path)
    assert run_archive(settings).rows == 2000
    publish(kafka, ml100k.iloc[2000:3000])
    trainer = train_settings(kafka, tmp_path, archive_dir=settings.archive_dir, archive_workers=2)
    with caplog.at_level(logging.INFO, logger="online_trainer.window"):
        version = run_retrain(1, trainer)
    assert version
    assert "archived=2000 replayed=1000 invalid=0" in caplog.text

