"""Settings of the window archive's compaction job (`streamrec archive`)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import Field

from streams.kafka.principals import ARCHIVER
from streams.service_settings import ServiceSettings


class ArchiveSettings(ServiceSettings):
    KAFKA_PRINCIPAL: ClassVar[str | None] = ARCHIVER
    archive_dir: Path = Field(
        Path(".streamrec/archive"), description="Root of the archives; each topic (prefix "
        "included) gets its own folder, the retrain reads the same one (STREAMREC_ARCHIVE_DIR)."
    )
    group_id: str = Field(
        "streamrec-archiver", description="Consumer group whose commits show the job's lag; "
        "the archive's own batch records, not the group, say where a run resumes."
    )
    batch_max_events: int = Field(
        200_000, ge=1, le=10_000_000, description="Most records of one partition per batch "
        "(per Parquet file and day): larger files read faster, a crash re-reads at most this many."
    )
    run_timeout_s: float = Field(
        3600.0, gt=0, description="A run stops after this long with what it has written; the "
        "next run goes on from there."
    )
    retention_days: int | None = Field(
        None, ge=1, description="Day folders older than this many days (by event time, UTC) "
        "are deleted at the end of each run; None keeps everything."
    )
