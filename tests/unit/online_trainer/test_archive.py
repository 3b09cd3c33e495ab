from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pyarrow.parquet as pq

from online_trainer.archive import BATCHES_DIR, COVERS_KEY, ArchivedRow, WindowArchive
from online_trainer.archive_loader import ArchiveLoader

DAY = 86_400.0


def _row(partition: int, offset: int, timestamp: float) -> ArchivedRow:
    return ArchivedRow(f"e{partition}-{offset}", "u1", "s1", f"i{offset}", "click", timestamp,
                       None, partition, offset, int(timestamp * 1000))


def _rows(partition: int, start: int, end: int, first_ts: float) -> list[ArchivedRow]:
    return [_row(partition, o, first_ts + (o - start) * 3600.0) for o in range(start, end)]


def test_a_batch_is_split_by_event_day_and_recorded_with_its_offsets(tmp_path: Path) -> None:
    archive = WindowArchive(tmp_path)
    batch = archive.write_batch(0, 10, 40, _rows(0, 10, 40, 0.0), invalid=0)
    assert [f.split("/")[0] for f in batch.files] == ["date=1970-01-01", "date=1970-01-02"]
    rows = sum(pq.read_table(tmp_path / f).num_rows for f in batch.files)
    assert rows == 30
    metadata = pq.read_schema(tmp_path / batch.files[1]).metadata[COVERS_KEY.encode()]
    assert json.loads(metadata) == {"topic": tmp_path.name, "partition": 0, "start": 10,
                                    "end": 40}
    assert archive.batches() == [batch]
    assert archive.next_offsets() == {0: 40}


def test_files_without_a_batch_record_are_invisible_and_rewritten_by_the_retry(
    tmp_path: Path,
) -> None:
    archive = WindowArchive(tmp_path)
    archive.write_batch(0, 0, 5, _rows(0, 0, 5, 0.0), invalid=0)
    interrupted = archive.write_batch(0, 5, 9, _rows(0, 5, 9, 0.0), invalid=0)
    (tmp_path / BATCHES_DIR / f"{interrupted.name}.json").unlink()  # crashed before the record
    assert archive.next_offsets() == {0: 5}
    assert ArchiveLoader(workers=2).load(archive, {0: (0, 9)}).num_rows == 5
    archive.write_batch(0, 5, 9, _rows(0, 5, 9, 0.0), invalid=0)
    table = ArchiveLoader(workers=2).load(archive, {0: (0, 9)})
    assert sorted(table["kafka_offset"].to_pylist()) == list(range(9))


def test_coverage_is_the_gapless_run_of_complete_batches_ending_at_the_newest(
    tmp_path: Path,
) -> None:
    archive = WindowArchive(tmp_path)
    archive.write_batch(1, 0, 10, _rows(1, 0, 10, 0.0), invalid=0)
    archive.write_batch(1, 20, 30, _rows(1, 20, 30, 3 * DAY), invalid=0)  # a gap before it
    archive.write_batch(1, 30, 35, _rows(1, 30, 34, 3 * DAY), invalid=1)
    archive.write_batch(2, 0, 3, _rows(2, 0, 3, 0.0), invalid=0)
    assert archive.coverage() == {1: (20, 35), 2: (0, 3)}


def test_retention_removes_old_days_and_the_records_left_without_files(tmp_path: Path) -> None:
    archive = WindowArchive(tmp_path)
    archive.write_batch(0, 0, 10, _rows(0, 0, 10, 0.0), invalid=0)  # day 1 only
    archive.write_batch(0, 10, 40, _rows(0, 10, 40, DAY - 5 * 3600.0), invalid=0)  # days 1-2
    assert archive.prune_before(date(1970, 1, 2)) == 1
    assert [(b.start, b.end) for b in archive.batches()] == [(10, 40)]
    assert archive.coverage() == {}  # the newest batch lost its first day's file
    assert archive.next_offsets() == {0: 40}  # the job still resumes after it


def test_the_loader_keeps_only_the_asked_offsets_of_each_partition(tmp_path: Path) -> None:
    archive = WindowArchive(tmp_path)
    archive.write_batch(0, 0, 50, _rows(0, 0, 50, 0.0), invalid=0)
    archive.write_batch(3, 0, 50, _rows(3, 0, 50, 0.0), invalid=0)
    table = ArchiveLoader(workers=3, prefetch=1, engine="pyarrow").load(
        archive, {0: (10, 20), 3: (45, 50)}
    )
    got = sorted(zip(table["kafka_partition"].to_pylist(), table["kafka_offset"].to_pylist(),
                     strict=True))
    assert got == [(0, o) for o in range(10, 20)] + [(3, o) for o in range(45, 50)]
