import math

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
