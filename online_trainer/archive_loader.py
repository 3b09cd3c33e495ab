"""Reads offset ranges of the window archive with several workers, files read ahead of use.

Parquet decoding releases the GIL, so threads read files in parallel; at most `prefetch` files
are read ahead of the one being consumed, which bounds memory. With a GPU and cudf installed,
cudf decodes the files on the device (`engine="auto"`); the CPU path (pyarrow) is the default
everywhere else and gives the same table.
"""

from __future__ import annotations

import importlib
import logging
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from online_trainer.archive import SCHEMA, WindowArchive

logger = logging.getLogger(__name__)

Engine = Literal["auto", "pyarrow", "cudf"]

COLUMNS = ("user_id", "item_id", "timestamp", "kafka_timestamp_ms", "kafka_partition",
           "kafka_offset")
"""What a retrain needs of a row: who, what, when, and the position that orders ties."""


def cudf_available() -> bool:
    try:
        import torch

        if not torch.cuda.is_available():
            return False
        importlib.import_module("cudf")
        return True
    except ImportError:
        return False


class ArchiveLoader:
    def __init__(self, workers: int = 4, prefetch: int = 8, engine: Engine = "auto") -> None:
        if workers < 1 or prefetch < 1:
            raise ValueError("workers and prefetch must be at least 1")
        self.workers = workers
        self.prefetch = prefetch
        self.engine: Literal["pyarrow", "cudf"] = (
            ("cudf" if cudf_available() else "pyarrow") if engine == "auto" else engine
        )

    def load(self, archive: WindowArchive, ranges: dict[int, tuple[int, int]]) -> pa.Table:
        """The rows of offsets [start, end) of each partition in `ranges` (COLUMNS only)."""
        wanted = [
            (archive.root / name, batch.partition, *ranges[batch.partition])
            for batch in archive.batches()
            if batch.partition in ranges
            and batch.start < ranges[batch.partition][1]
            and batch.end > ranges[batch.partition][0]
            for name in batch.files
        ]
        tables = list(self._read_ahead(wanted))
        logger.info("archive read files=%d engine=%s workers=%d", len(wanted), self.engine,
                    self.workers)
        if not tables:
            return pa.table({c: pa.array([], SCHEMA.field(c).type) for c in COLUMNS})
        return pa.concat_tables(tables)

    def _read_ahead(self, wanted: list[tuple[Path, int, int, int]]) -> Iterator[pa.Table]:
        with ThreadPoolExecutor(self.workers, thread_name_prefix="archive-read") as pool:
            in_flight: deque[Future[pa.Table]] = deque()
            for path, _partition, start, end in wanted:
                if len(in_flight) >= self.prefetch:
                    yield in_flight.popleft().result()
                in_flight.append(pool.submit(self._read, path, start, end))
            while in_flight:
                yield in_flight.popleft().result()

    def _read(self, path: Path, start: int, end: int) -> pa.Table:
        table = _read_cudf(path, start, end) if self.engine == "cudf" else _read_arrow(path)
        offsets = table["kafka_offset"]
        keep = pc.and_(pc.greater_equal(offsets, start), pc.less(offsets, end))
        return table.filter(keep)


def _read_arrow(path: Path) -> pa.Table:
    return pq.read_table(path, columns=list(COLUMNS))


def _read_cudf(path: Path, start: int, end: int) -> pa.Table:
    cudf: Any = importlib.import_module("cudf")
    frame = cudf.read_parquet(str(path), columns=list(COLUMNS))
    frame = frame[(frame["kafka_offset"] >= start) & (frame["kafka_offset"] < end)]
    table: pa.Table = frame.to_arrow()
    return table.cast(pa.schema([SCHEMA.field(c) for c in COLUMNS]))
