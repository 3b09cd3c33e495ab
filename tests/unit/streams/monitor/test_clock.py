import math
import random

from streams.monitor.clock import EventClock


def test_the_watermark_trails_the_newest_event_by_the_allowed_lateness() -> None:
    clock = EventClock(allowed_lateness_s=30, idle_advance_s=10)
    assert clock.watermark(wall=0.0) == -math.inf
    clock.observe(1000.0, wall=0.0)
    clock.observe(900.0, wall=0.0)  # out of order: does not move it back
    assert clock.watermark(wall=0.0) == 970.0


def test_the_watermark_never_moves_backwards() -> None:
    clock = EventClock(allowed_lateness_s=0, idle_advance_s=10)
    clock.observe(1000.0, wall=0.0)
    assert clock.watermark(wall=50.0) == 1040.0  # idle for 50 s
    clock.observe(1001.0, wall=50.0)
    assert clock.watermark(wall=50.0) == 1040.0


def test_event_time_follows_the_wall_clock_only_once_idle() -> None:
    clock = EventClock(allowed_lateness_s=0, idle_advance_s=10)
    clock.observe(1000.0, wall=100.0)
    assert clock.watermark(wall=109.0) == 1000.0
    assert clock.watermark(wall=130.0) == 1020.0


def test_a_partition_replayed_ahead_does_not_make_a_slower_one_late() -> None:
    clock = EventClock(allowed_lateness_s=0, idle_advance_s=10)
    clock.observe(5000.0, wall=0.0, source="p0")
    clock.observe(1000.0, wall=0.0, source="p1")
    assert clock.watermark(wall=0.0) == 1000.0
    clock.observe(4000.0, wall=1.0, source="p1")
    assert clock.watermark(wall=1.0) == 4000.0


def test_a_silent_partition_stops_holding_the_watermark_back() -> None:
    clock = EventClock(allowed_lateness_s=0, idle_advance_s=10)
    clock.observe(1000.0, wall=0.0, source="p1")
    clock.observe(5000.0, wall=15.0, source="p0")
    assert clock.watermark(wall=15.0) == 5000.0


def test_a_forgotten_partition_no_longer_counts() -> None:
    clock = EventClock(allowed_lateness_s=0, idle_advance_s=10)
    clock.observe(5000.0, wall=0.0, source="p0")
    clock.observe(1000.0, wall=0.0, source="p1")
    clock.forget("p1")
    assert clock.watermark(wall=0.0) == 5000.0


def test_an_assigned_partition_holds_the_watermark_until_it_delivers_or_idles() -> None:
    clock = EventClock(allowed_lateness_s=0, idle_advance_s=10)
    clock.register("p1", wall=0.0)
    clock.observe(5000.0, wall=8.0, source="p0")
    assert clock.watermark(wall=8.0) == -math.inf
    assert clock.watermark(wall=11.0) == 5000.0  # p1 silent for 11 s, p0 still active


def _reference_watermarks(steps: list[tuple[str, float, float]]) -> list[float]:
    """The watermark after each record, recomputed from every source's state each time."""
    newest: dict[str, float] = {}
    arrived: dict[str, float] = {}
    watermark, out = -math.inf, []
    for source, event_time, wall in steps:
        newest[source] = max(newest.get(source, -math.inf), event_time)
        arrived[source] = wall
        active = [newest[s] for s in newest if wall - arrived[s] <= 10.0]
        if active:
            candidate = min(active)
        else:
            candidate = max(newest.values()) + wall - max(arrived.values()) - 10.0
        if math.isfinite(candidate):
            watermark = max(watermark, candidate - 5.0)
        out.append(watermark)
    return out


def test_the_kept_candidate_gives_the_watermark_a_recomputation_gives() -> None:
    rng = random.Random(5)
    steps, wall, times = [], 0.0, {f"p{n}": 1000.0 for n in range(6)}
    for _ in range(5000):
        if rng.random() < 0.02:
            wall += rng.choice([0.5, 4.0, 12.0])  # a new batch; sometimes sources fall idle
        source = rng.choice(list(times)[: rng.randint(1, 6)])
        times[source] += rng.uniform(-3.0, 6.0)  # out of order now and then
        steps.append((source, times[source], wall))
    clock = EventClock(allowed_lateness_s=5.0, idle_advance_s=10.0)
    got = []
    for source, event_time, at in steps:
        clock.observe(event_time, at, source)
        got.append(clock.watermark(at))
    assert got == _reference_watermarks(steps)
