"""How fast the host ran while a benchmark ran: two fixed workloads timed at its start and end.

The same code measures several times apart on two machines of the same nominal kind (a slower
core, other work sharing it), so a figure alone cannot tell a regression from a slow host. Each
bench times a fixed pure-Python workload (dicts, strings and integers, what the feature worker's
and the scorer's Python does) and a fixed numpy/torch one (single-threaded float32 products, what
the encoder and ranker do) when it starts and when it writes its JSON, records both in
`environment.calibration`, and states its headline figures also as the reference machine
(`REFERENCE`, docs/architecture.md "Benchmarks on any machine") would have measured them: a rate
times the host's slowdown, a time per event or request divided by it.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass
from typing import Any

PYTHON_ITERATIONS = 1_500_000
TORCH_PRODUCTS = 480
TORCH_SIZE = 256
LOADED_SPREAD = 0.2
"""Start and end times further apart than this share: the host's load changed during the run."""
SLOW = 1.5
"""A host slower than the reference by this factor is called slow in the table."""


@dataclass(frozen=True)
class HostSpeed:
    python_s: float
    """CPU seconds of the Python workload: how fast a core is, whatever else runs."""
    torch_s: float
    python_wall_s: float = 0.0
    """Wall seconds of the same: above its CPU time when other work takes the core."""


REFERENCE = HostSpeed(python_s=0.31, torch_s=0.26)
"""The reference machine's CPU seconds for the two workloads: dev-2c (2 vCPUs of an AMD EPYC
Zen 4 under KVM, Python 3.11, torch's CPU build), the fastest of repeated runs there."""


def python_workload() -> float:
    """CPU seconds of a fixed pure-Python loop (about 0.3 s on the reference)."""
    started = time.process_time()
    counts: dict[str, int] = {}
    total = 0
    for i in range(PYTHON_ITERATIONS):
        key = f"k{i & 1023}"
        counts[key] = counts.get(key, 0) + 1
        total += len(key) * i
    assert total > 0 and len(counts) == 1024
    return time.process_time() - started


def torch_workload() -> float:
    """CPU seconds of fixed single-threaded float32 matrix products (about 0.26 s on the
    reference);
    the caller's torch thread setting is restored."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        generator = torch.Generator().manual_seed(0)
        a = torch.rand(TORCH_SIZE, TORCH_SIZE, generator=generator)
        b = torch.rand(TORCH_SIZE, TORCH_SIZE, generator=generator)
        started = time.process_time()
        for _ in range(TORCH_PRODUCTS):
            a = torch.tanh(a @ b)
        assert math.isfinite(float(a.sum()))
        return time.process_time() - started
    finally:
        torch.set_num_threads(threads)


def measure() -> HostSpeed:
    wall = time.perf_counter()
    python_s = python_workload()
    wall = time.perf_counter() - wall
    return HostSpeed(python_s, torch_workload(), wall)


_STARTED: dict[str, HostSpeed] = {}
"""The start's times of the benchmark this process runs (a process runs one)."""


def begin() -> None:
    """Times the workloads now, as the start of the benchmark this process runs."""
    _STARTED["start"] = measure()


@dataclass(frozen=True)
class Calibration:
    start: HostSpeed
    end: HostSpeed

    @property
    def python_s(self) -> float:
        return (self.start.python_s + self.end.python_s) / 2

    @property
    def torch_s(self) -> float:
        return (self.start.torch_s + self.end.torch_s) / 2

    @property
    def python_slowdown(self) -> float:
        """How many times the reference's time this host took for the Python workload."""
        return self.python_s / REFERENCE.python_s

    @property
    def torch_slowdown(self) -> float:
        return self.torch_s / REFERENCE.torch_s

    @property
    def mixed_slowdown(self) -> float:
        """For figures that are part Python, part torch (serving): the geometric mean."""
        return math.sqrt(self.python_slowdown * self.torch_slowdown)

    def spread(self) -> float:
        """The larger relative difference between the start and end times of a workload."""
        return max(
            abs(self.end.python_s - self.start.python_s) / min(self.end.python_s,
                                                               self.start.python_s),
            abs(self.end.torch_s - self.start.torch_s) / min(self.end.torch_s,
                                                             self.start.torch_s),
        )

    def warnings(self) -> list[str]:
        """Why this run's raw figures should not be compared with the reference's as they are."""
        notes = []
        if max(self.python_slowdown, self.torch_slowdown) >= SLOW:
            notes.append(
                f"slow host: {self.python_slowdown:.2f}x (python) / "
                f"{self.torch_slowdown:.2f}x (torch) the reference's time"
            )
        shared = max(s.python_wall_s / s.python_s for s in (self.start, self.end))
        if shared > 1 + LOADED_SPREAD:
            notes.append(f"loaded host: the calibration got {1 / shared:.0%} of a core")
        if self.spread() > LOADED_SPREAD:
            notes.append(
                f"loaded host: calibration changed by {self.spread():.0%} between start and end"
            )
        load, cpus = os.getloadavg()[0], os.cpu_count() or 1
        if load > cpus * (1 + LOADED_SPREAD):
            notes.append(f"loaded host: load average {load:.1f} on {cpus} cpus")
        return notes

    def as_json(self) -> dict[str, Any]:
        return {
            "python_s": round(self.python_s, 4),
            "torch_s": round(self.torch_s, 4),
            "start": {k: round(v, 4) for k, v in asdict(self.start).items()},
            "end": {k: round(v, 4) for k, v in asdict(self.end).items()},
            "reference": {"python_s": REFERENCE.python_s, "torch_s": REFERENCE.torch_s},
            "python_slowdown": round(self.python_slowdown, 3),
            "torch_slowdown": round(self.torch_slowdown, 3),
            "warnings": self.warnings(),
        }


def finish() -> Calibration:
    """Times the workloads again; with the start's times (now's, if `begin` never ran)."""
    end = measure()
    return Calibration(_STARTED.get("start", end), end)


def per_reference_rate(value: float, slowdown: float) -> float:
    """A rate (events/s) as the reference would have measured it."""
    return value * slowdown


def per_reference_time(value: float, slowdown: float) -> float:
    """A time or CPU cost (us per event, ms) as the reference would have measured it."""
    return value / slowdown
