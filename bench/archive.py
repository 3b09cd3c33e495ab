"""`streamrec bench archive`: a retrain's window read from the Parquet archive vs replayed from
Kafka, for the same window (all of ML-100K's 100k interactions on the local broker).

Both paths end in the retrain's interaction list, in the same order (checked equal here): the
Kafka replay decodes and validates every record, the archive reads the columns the retrain
needs. Each is timed `repeats` times and the median kept; the compaction run itself is timed
once (its cost is paid ahead of any retrain).
"""

from __future__ import annotations

import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient

from bench.report import print_table, write_result
from deploy.generators.dataset_replay import frame_events
from models.datasets import load_ml100k
from online_trainer.archive_job import archive_root, run_archive
from online_trainer.archive_loader import ArchiveLoader
from online_trainer.archive_settings import ArchiveSettings
from online_trainer.window import Window, load_window
from schemas.topics import CATALOG, INTERACTIONS
from streams.kafka.acls import grant_acls
from streams.kafka.admin import create_topics
from streams.kafka.connection import KafkaConnection
from streams.kafka.principals import ADMIN, ARCHIVER, TRAINER
from streams.kafka.producer import EventProducer


def _timed(load: Any, repeats: int) -> tuple[float, Window]:
    times, window = [], None
    for _ in range(repeats):
        began = time.perf_counter()
        window = load()
        times.append(time.perf_counter() - began)
    assert window is not None
    return statistics.median(times), window


def run(json_path: Path, repeats: int = 3, workers: int = 4) -> dict[str, Any]:
    settings = ArchiveSettings()
    kafka = settings.kafka.as_principal(ADMIN).model_copy(
        update={"topic_prefix": f"bench-archive-{uuid.uuid4().hex[:8]}."}
    )
    create_topics(kafka)
    grant_acls(kafka)
    try:
        return _measure(json_path, kafka, settings, repeats, workers)
    finally:
        admin = AdminClient(kafka.client_config())
        for future in admin.delete_topics([kafka.topic(s) for s in CATALOG]).values():
            future.result()


def _measure(
    json_path: Path, kafka: KafkaConnection, settings: ArchiveSettings, repeats: int, workers: int
) -> dict[str, Any]:
    producer = EventProducer(kafka)
    events = 0
    for event in frame_events(load_ml100k()):
        producer.send(kafka.topic(INTERACTIONS), event.user_id, event)
        events += 1
    producer.flush()
    with tempfile.TemporaryDirectory(prefix="streamrec-bench-archive-") as folder:
        archiving = settings.model_copy(update={
            "kafka": kafka.as_principal(ARCHIVER), "archive_dir": Path(folder),
            "group_id": f"bench-archiver-{kafka.topic_prefix}",
        })
        began = time.perf_counter()
        archived = run_archive(archiving)
        compaction_s = time.perf_counter() - began
        archive = archive_root(archiving)
        reader = kafka.as_principal(TRAINER)
        kafka_s, replayed = _timed(lambda: load_window(reader, 0.0, None), repeats)
        loaders = {n: ArchiveLoader(workers=n) for n in sorted({1, workers})}
        archive_s = {
            n: _timed(lambda loader=loader: load_window(reader, 0.0, archive, loader), repeats)
            for n, loader in loaders.items()
        }
        size = sum(p.stat().st_size for p in archive.root.rglob("*.parquet"))
    for _, window in archive_s.values():
        if window.interactions != replayed.interactions or window.replayed:
            raise AssertionError("the archive's window differs from the Kafka replay's")
    result = {
        "events": events,
        "archived_rows": archived.rows,
        "archive_bytes": size,
        "compaction_s": round(compaction_s, 3),
        "kafka_replay_s": round(kafka_s, 3),
        "archive_load_s": round(archive_s[workers][0], 3),
        "archive_load_s_by_workers": {str(n): round(s, 3) for n, (s, _) in archive_s.items()},
        "speedup": round(kafka_s / archive_s[workers][0], 2),
        "engine": loaders[workers].engine,
        "repeats": repeats,
    }
    write_result(json_path, result)
    print_table("window archive vs Kafka replay (ML-100K)", [
        ("events", str(events)),
        ("kafka replay s", f"{kafka_s:.2f}"),
        *((f"archive load s ({n} workers)", f"{s:.2f}") for n, (s, _) in archive_s.items()),
        ("compaction s (once)", f"{compaction_s:.2f}"),
        ("archive MB", f"{size / 1e6:.1f}"),
    ])
    return result
