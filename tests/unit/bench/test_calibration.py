"""Bench results carry the host's calibration, and headline figures as on the reference."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import calibration
from bench.calibration import REFERENCE, Calibration, HostSpeed
from bench.ingest import normalised as ingest_normalised
from bench.report import write_result
from bench.serve import _spread


def _host(slowdown: float, wall_share: float = 1.0) -> HostSpeed:
    python_s = REFERENCE.python_s * slowdown
    return HostSpeed(python_s, REFERENCE.torch_s * slowdown, python_s * wall_share)


def test_a_host_twice_as_slow_halves_rates_and_doubles_costs_on_the_reference() -> None:
    c = Calibration(_host(2.0), _host(2.0))
    result = {
        "events_per_s": 10_000, "cpu_us_per_event": {"worker": 40.0}, "redis_us_per_event": 20.0,
        "interleaved": {"events_per_s": 8_000, "worker_cpu_us_per_event": 50.0,
                        "redis_us_per_event": 30.0},
    }
    figures = ingest_normalised(result, c)
    assert figures["events_per_s"] == 20_000
    assert figures["worker_cpu_us_per_event"] == 20.0
    assert figures["interleaved"] == {
        "events_per_s": 16_000, "worker_cpu_us_per_event": 25.0, "redis_us_per_event": 15.0,
    }
    assert any("slow host" in w for w in c.warnings())


def test_a_host_whose_speed_changed_or_that_was_shared_says_so() -> None:
    steady = Calibration(_host(1.0), _host(1.0)).warnings()
    assert all("load average" in w for w in steady)  # the one warning the machine's state gives
    assert any("changed" in w for w in Calibration(_host(1.0), _host(1.4)).warnings())
    assert any("of a core" in w for w in Calibration(_host(1.0, 2.0), _host(1.0)).warnings())


def test_every_result_carries_the_calibration_of_its_start_and_end(tmp_path: Path) -> None:
    calibration.begin()
    path = tmp_path / "r.json"
    write_result(path, {"figure": 1}, lambda c: {"figure": c.python_slowdown})
    document = json.loads(path.read_text())
    measured = document["environment"]["calibration"]
    assert measured["python_s"] > 0 and measured["torch_s"] > 0
    assert set(measured["start"]) == {"python_s", "torch_s", "python_wall_s"}
    expected = measured["python_s"] / REFERENCE.python_s
    assert document["normalised"]["figure"] == pytest.approx(expected, rel=1e-3)


def test_a_rate_measured_several_times_keeps_every_runs_p99_and_the_median_run() -> None:
    runs = [{"p50_ms": 5.0, "p99_ms": p99, "n": n} for n, p99 in enumerate([30.0, 10.0, 20.0])]
    spread = _spread(runs)
    assert spread["p99_ms_runs"] == [30.0, 10.0, 20.0]
    assert spread["runs"] == 3
    assert spread["n"] == 2  # the median run's own figures
