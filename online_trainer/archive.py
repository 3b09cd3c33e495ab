"""The window archive on disk: `interactions` as Parquet, one folder per event day.

Layout under the archive root (one root per topic, prefix included):

    date=YYYY-MM-DD/p<partition>-<start>-<end>.parquet   the batch's rows of that day
    _batches/p<partition>-<start>-<end>.json              the batch's record (written last)

A batch covers the Kafka offsets [start, end) of one partition. Its rows are split by the UTC day
of their event time; the batch record lists those files and is written only after every one of
them is durably on disk (temporary file, fsync, rename, fsync of the folder). A batch without a
record is an interrupted write: readers ignore its files and the next run writes them again under
the same names, so a re-run never duplicates rows. The records are also where a run resumes:
the next batch of a partition starts at the highest `end` recorded for it.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

BATCHES_DIR = "_batches"
COVERS_KEY = "streamrec.covers"

SCHEMA = pa.schema([
    ("event_id", pa.string()),
    ("user_id", pa.string()),
    ("session_id", pa.string()),
    ("item_id", pa.string()),
    ("event_type", pa.string()),
    ("timestamp", pa.float64()),
    ("context", pa.string()),
    ("kafka_partition", pa.int32()),
    ("kafka_offset", pa.int64()),
    ("kafka_timestamp_ms", pa.int64()),
])
"""Every field of an InteractionEvent (`context` as its JSON) and where Kafka kept the record."""


@dataclass(frozen=True)
class ArchivedRow:
    event_id: str
    user_id: str
    session_id: str
    item_id: str
    event_type: str
    timestamp: float
    context: str | None
    kafka_partition: int
    kafka_offset: int
    kafka_timestamp_ms: int


@dataclass(frozen=True)
class Batch:
    """What one batch record says: the offsets it covers and the files that hold its rows."""

    partition: int
    start: int
    end: int
    files: tuple[str, ...]
    rows: int
    invalid: int

    @property
    def name(self) -> str:
        return f"p{self.partition:04d}-{self.start:020d}-{self.end:020d}"


def event_day(timestamp: float) -> date:
    return datetime.fromtimestamp(timestamp, tz=UTC).date()


def day_folder(day: date) -> str:
    return f"date={day.isoformat()}"


class WindowArchive:
    def __init__(self, root: Path) -> None:
        self.root = root

    @classmethod
    def of_topic(cls, archive_dir: Path, topic: str) -> WindowArchive:
        """Each topic (its prefix included) has its own root under `archive_dir`."""
        return cls(archive_dir / topic)

    def batches(self) -> list[Batch]:
        folder = self.root / BATCHES_DIR
        if not folder.exists():
            return []
        found = [_read_batch(path) for path in sorted(folder.glob("*.json"))]
        return sorted(found, key=lambda b: (b.partition, b.start))

    def next_offsets(self) -> dict[int, int]:
        """Per partition, the offset the next batch starts at."""
        ends: dict[int, int] = {}
        for batch in self.batches():
            ends[batch.partition] = max(ends.get(batch.partition, 0), batch.end)
        return ends

    def write_batch(
        self, partition: int, start: int, end: int, rows: list[ArchivedRow], invalid: int
    ) -> Batch:
        """Writes the rows of offsets [start, end) of `partition` (the `invalid` records among
        them went to the dead letters), then the batch record that makes them visible."""
        if end <= start:
            raise ValueError(f"empty offset range [{start}, {end}) of partition {partition}")
        by_day: dict[date, list[ArchivedRow]] = defaultdict(list)
        for row in rows:
            by_day[event_day(row.timestamp)].append(row)
        name = f"p{partition:04d}-{start:020d}-{end:020d}"
        files = []
        for day, day_rows in sorted(by_day.items()):
            relative = f"{day_folder(day)}/{name}.parquet"
            covers = {"topic": self.root.name, "partition": partition, "start": start,
                      "end": end}
            _write_parquet(self.root / relative, day_rows, covers)
            files.append(relative)
        batch = Batch(partition, start, end, tuple(files), len(rows), invalid)
        record = json.dumps({
            "partition": partition, "start": start, "end": end, "files": files,
            "rows": len(rows), "invalid": invalid,
        }).encode()
        _write_durably(self.root / BATCHES_DIR / f"{name}.json", record)
        return batch

    def coverage(self) -> dict[int, tuple[int, int]]:
        """Per partition, the offsets [first, end) the archive holds without a gap and with
        every file present, counted back from the newest batch (retention removes the oldest
        days, so older batches may have lost files)."""
        by_partition: dict[int, list[Batch]] = defaultdict(list)
        for batch in self.batches():
            by_partition[batch.partition].append(batch)
        covered = {}
        for partition, batches in by_partition.items():
            newest = batches[-1]
            first = newest.end
            for batch in reversed(batches):
                if batch.end != first or not self._complete(batch):
                    break
                first = batch.start
            if first < newest.end:
                covered[partition] = (first, newest.end)
        return covered

    def _complete(self, batch: Batch) -> bool:
        return all((self.root / f).exists() for f in batch.files)

    def prune_before(self, cutoff: date) -> int:
        """Retention: deletes the day folders before `cutoff`, and the records of batches left
        without any file; returns how many day folders went."""
        removed = 0
        for folder in sorted(self.root.glob("date=*")):
            if folder.is_dir() and date.fromisoformat(folder.name[5:]) < cutoff:
                shutil.rmtree(folder)
                removed += 1
        for batch in self.batches():
            if batch.files and not any((self.root / f).exists() for f in batch.files):
                (self.root / BATCHES_DIR / f"{batch.name}.json").unlink()
        return removed


def _read_batch(path: Path) -> Batch:
    raw = json.loads(path.read_text())
    return Batch(
        int(raw["partition"]), int(raw["start"]), int(raw["end"]),
        tuple(str(f) for f in raw["files"]), int(raw["rows"]), int(raw["invalid"]),
    )


def _columns(rows: Iterable[ArchivedRow]) -> pa.Table:
    listed = list(rows)
    return pa.table(
        {field.name: [getattr(row, field.name) for row in listed] for field in SCHEMA},
        schema=SCHEMA,
    )


def _write_parquet(path: Path, rows: list[ArchivedRow], covers: dict[str, object]) -> None:
    """`covers` goes into the file's own metadata (key `streamrec.covers`): a file copied
    out of the archive still says which topic, partition and offsets its batch spans."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    table = _columns(rows).replace_schema_metadata({COVERS_KEY: json.dumps(covers)})
    pq.write_table(table, temporary, compression="zstd")
    _fsync(temporary)
    os.replace(temporary, path)
    _fsync(path.parent)


def _write_durably(path: Path, content: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    with open(temporary, "wb") as handle:
        handle.write(content)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    _fsync(path.parent)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
