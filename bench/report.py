"""How every benchmark records what it measured: a JSON file plus a short table on stdout."""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table


def environment() -> dict[str, Any]:
    """Enough context to tell whether two result files are comparable."""
    import confluent_kafka

    return {
        "host_cpus": os.cpu_count(),
        # Other work on a shared machine skews timings; keep the context with the figures.
        "load_average_1m": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
        "librdkafka": confluent_kafka.libversion()[0],
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def write_result(path: Path, result: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**result, "environment": environment()}, indent=2) + "\n")


def print_table(title: str, rows: Sequence[tuple[str, str]]) -> None:
    table = Table("figure", "value", title=title)
    for name, value in rows:
        table.add_row(name, value)
    Console().print(table)


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in [0, 100]) of a non-empty sample."""
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]
