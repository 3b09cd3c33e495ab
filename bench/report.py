"""How every benchmark records what it measured: a JSON file plus a short table on stdout, both
with how fast the host ran meanwhile (bench/calibration.py)."""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.calibration import Calibration, finish

_WRITTEN: dict[str, Calibration] = {}
"""The calibration of the result this process wrote last (its table prints the warnings)."""


def environment(calibration: Calibration | None = None) -> dict[str, Any]:
    """Enough context to tell whether two result files are comparable."""
    import confluent_kafka

    return {
        **({"calibration": calibration.as_json()} if calibration is not None else {}),
        "host_cpus": os.cpu_count(),
        # Other work on a shared machine skews timings; keep the context with the figures.
        "load_average_1m": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
        "librdkafka": confluent_kafka.libversion()[0],
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def write_result(
    path: Path,
    result: dict[str, Any],
    normalised: Callable[[Calibration], dict[str, Any]] | None = None,
) -> Calibration:
    """Writes `result` with its environment and the host's calibration (timed now, and when the
    bench began: `bench.calibration.begin`); `normalised` gives the headline figures as the
    reference machine would have measured them, kept under `normalised`."""
    calibration = _WRITTEN["last"] = finish()
    if normalised is not None:
        result = {**result, "normalised": normalised(calibration)}
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {**result, "environment": environment(calibration)}
    path.write_text(json.dumps(document, indent=2) + "\n")
    return calibration


def print_table(title: str, rows: Sequence[tuple[str, str]]) -> None:
    """The figures, then the host's speed against the reference and why the raw figures may
    not compare (a slow or loaded host)."""
    table = Table("figure", "value", title=title)
    for name, value in rows:
        table.add_row(name, value)
    calibration = _WRITTEN.get("last")
    if calibration is not None:
        table.add_row(
            "host calibration (python / torch s)",
            f"{calibration.python_s:.3f} / {calibration.torch_s:.3f} = "
            f"{calibration.python_slowdown:.2f}x / {calibration.torch_slowdown:.2f}x the "
            "reference's time",
        )
        for warning in calibration.warnings():
            table.add_row("WARNING", warning)
    Console().print(table)


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in [0, 100]) of a non-empty sample."""
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]
