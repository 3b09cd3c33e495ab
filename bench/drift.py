"""Drift detection, measured end to end through the monitor's own pipeline (no Kafka).

A synthetic stream of recommendation responses and the interactions that follow them goes
through `MonitorPipeline` exactly as the service feeds it (attribution join -> KPI windows ->
ADWIN -> alert policy). Each response is one Bernoulli trial: with probability `p_hit` the user
clicks / adds to cart / buys one of its top-k items some seconds later; noise the join must not
count (views of recommended items, clicks on other items) is mixed in.

- Shift: `p_hit` drops abruptly (0.30 -> 0.15 by default); the delay is the number of responses
  served from the shift up to the one whose outcome raised the KPI alert.
- Stationary: 200,000 responses at a constant `p_hit`; every alert of any detector is a false alarm.

Several seeds; the table reports the worst and the mean. The configuration under test is the
documented `DriftSettings` default (streams/monitor/drift/config.py), recorded in the JSON.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import random
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.report import print_table, write_result
from schemas.alerts import DriftAlert
from schemas.events import EventContext, EventType, InteractionEvent
from schemas.recommendations import RecommendationResponse, ScoredItem
from streams.monitor.pipeline import MonitorPipeline
from streams.monitor.settings import MonitorSettings

_USERS = 5_000
_ITEMS = 2_000
_RATE_PER_S = 20.0
"""Responses per second of event time (only sets how many fall in one KPI window)."""
_HIT_TYPES = (EventType.CLICK, EventType.ADD_TO_CART, EventType.PURCHASE)
_HIT_WEIGHTS = (0.7, 0.2, 0.1)


@dataclass(frozen=True)
class Phase:
    responses: int
    p_hit: float
    model_version: str = "v1"


@dataclass(frozen=True)
class RunResult:
    alerts: list[DriftAlert]
    served_at: list[float]
    kpi_cuts: int


def _response(
    rng: random.Random, n: int, at: float, version: str, k: int
) -> RecommendationResponse:
    items = rng.sample(range(_ITEMS), k)
    return RecommendationResponse(
        request_id=f"r{n}",
        user_id=f"u{rng.randrange(_USERS)}",
        status="ok",
        items=[ScoredItem(item_id=f"i{i}", score=1.0 - j / k) for j, i in enumerate(items)],
        model_version=version,
        served_at=at,
    )


def _interaction(n: int, user: str, item: str, kind: EventType, at: float) -> InteractionEvent:
    return InteractionEvent(
        event_id=f"e{n}", user_id=user, session_id=f"s{user}", item_id=item, event_type=kind,
        timestamp=at, context=EventContext(device="web", source="recommendation", price=19.0),
    )


def _follow_ups(
    rng: random.Random, response: RecommendationResponse, p_hit: float, n: int
) -> Iterator[InteractionEvent]:
    """What the user does after one response: maybe a hit, plus noise that must not count."""
    user, shown, at = response.user_id, response.items, response.served_at
    if rng.random() < p_hit:
        kind = rng.choices(_HIT_TYPES, _HIT_WEIGHTS)[0]
        yield _interaction(n, user, rng.choice(shown).item_id, kind, at + rng.uniform(1, 120))
    if rng.random() < 0.5:
        yield _interaction(n + 1, user, rng.choice(shown).item_id, EventType.VIEW,
                           at + rng.uniform(1, 60))
    if rng.random() < 0.2:
        other = f"i{_ITEMS + rng.randrange(_ITEMS)}"  # never recommended
        yield _interaction(n + 2, user, other, EventType.CLICK, at + rng.uniform(1, 60))


def run_stream(phases: list[Phase], seed: int, settings: MonitorSettings) -> RunResult:
    """Feed the phases' responses and follow-ups in event-time order; collect every alert."""
    rng = random.Random(seed)
    pipeline = MonitorPipeline(settings)
    wall = 0.0  # a constant wall clock: event time alone drives the watermark
    total = sum(p.responses for p in phases)
    at = time.time() - total / _RATE_PER_S - 2 * settings.attribution_window_s
    later: list[tuple[float, int, InteractionEvent]] = []
    alerts: list[DriftAlert] = []
    served_at: list[float] = []
    n = 0
    order = itertools.count()
    for phase in phases:
        for _ in range(phase.responses):
            while later and later[0][0] <= at:
                pipeline.on_interaction(heapq.heappop(later)[2], wall)
            response = _response(rng, n, at, phase.model_version, settings.k)
            pipeline.on_response(response, wall)
            served_at.append(at)
            for event in _follow_ups(rng, response, phase.p_hit, 3 * n):
                heapq.heappush(later, (event.timestamp, next(order), event))
            n += 1
            at += 1.0 / _RATE_PER_S
            if n % 1_000 == 0:
                alerts += pipeline.advance(wall).alerts
    for _, _, event in sorted(later):
        pipeline.on_interaction(event, wall)
    alerts += pipeline.advance(wall + 10 * settings.attribution_window_s).alerts
    cuts = sum(d.cuts for d in pipeline.detectors.values())
    return RunResult(alerts, served_at, cuts)


def _delay(result: RunResult, shift_index: int) -> tuple[int | None, str | None, int]:
    """(responses from the shift to the alert, its action, alerts before the shift)."""
    shift_at = result.served_at[shift_index]
    before = [a for a in result.alerts if a.detected_at < shift_at]
    after = [
        a for a in result.alerts if a.detected_at >= shift_at and a.detector.startswith("kpi.")
    ]
    if not after:
        return None, None, len(before)
    first = min(after, key=lambda a: a.detected_at)
    delay = sum(1 for t in result.served_at[shift_index:] if t <= first.detected_at)
    return delay, first.suggested_action, len(before)


def bench_drift(
    json_path: Path,
    seeds: int = 5,
    stationary_events: int = 200_000,
    warmup_events: int = 20_000,
    p_before: float = 0.30,
    p_after: float = 0.15,
) -> dict[str, object]:
    settings = MonitorSettings(metrics_port=0, psi_reference_path=None)
    # Every alert is counted in the result; one log line per alert would drown the table.
    policy_log = logging.getLogger("streams.monitor.drift.policy")
    level = policy_log.level
    policy_log.setLevel(logging.ERROR)
    try:
        result = _measure(settings, seeds, stationary_events, warmup_events, p_before, p_after)
    finally:
        policy_log.setLevel(level)
    write_result(json_path, result)
    _print(result)
    return result


def _measure(
    settings: MonitorSettings,
    seeds: int,
    stationary_events: int,
    warmup_events: int,
    p_before: float,
    p_after: float,
) -> dict[str, object]:
    delays: list[int] = []
    missed = false_before = false_stationary = cuts_stationary = 0
    actions: set[str] = set()
    started = time.perf_counter()
    for seed in range(seeds):
        shifted = run_stream([Phase(warmup_events, p_before), Phase(10_000, p_after)],
                             seed, settings)
        delay, action, before = _delay(shifted, warmup_events)
        false_before += before
        if delay is None:
            missed += 1
        else:
            delays.append(delay)
            actions.add(str(action))
        stationary = run_stream([Phase(stationary_events, p_before)], 1_000 + seed, settings)
        false_stationary += len(stationary.alerts)
        cuts_stationary += stationary.kpi_cuts
    deployed = run_stream(
        [Phase(warmup_events, p_before, "v1"), Phase(10_000, p_after, "v2")], seeds, settings
    )
    _, deploy_action, _ = _delay(deployed, warmup_events)
    result: dict[str, object] = {
        "detection_delay_events": max(delays) if delays and not missed else None,
        "false_alarms_stationary": false_stationary,
        "stationary_events": stationary_events,
        "stationary_events_all_seeds": stationary_events * seeds,
        "detection_delay_events_mean": round(statistics.fmean(delays), 1) if delays else None,
        "detection_delay_events_per_seed": delays,
        "missed_shifts": missed,
        "false_alarms_before_shift": false_before,
        "stationary_detector_cuts": cuts_stationary,
        "seeds": seeds,
        "event_unit": "attributed responses (one Bernoulli hit trial each)",
        "p_hit_before": p_before,
        "p_hit_after": p_after,
        "shift_action": sorted(actions),
        "shift_with_new_version_action": deploy_action,
        "responses_per_event_second": _RATE_PER_S,
        "attribution_window_s": settings.attribution_window_s,
        "kpi_window_s": settings.window_s,
        "drift_settings": settings.drift.model_dump(mode="json"),
        "elapsed_s": round(time.perf_counter() - started, 1),
    }
    return result


def _print(result: dict[str, object]) -> None:
    print_table(
        "drift detection (ADWIN on per-response KPI indicators, full monitor pipeline)",
        [
            ("shift", f"p_hit {result['p_hit_before']} -> {result['p_hit_after']}"),
            ("detection delay, worst (responses)", str(result["detection_delay_events"])),
            ("detection delay, mean (responses)", str(result["detection_delay_events_mean"])),
            ("missed shifts", str(result["missed_shifts"])),
            ("suggested action (same version / new version)",
             f"{result['shift_action']} / {result['shift_with_new_version_action']}"),
            ("stationary responses per seed", f"{result['stationary_events']:,}"),
            ("false alarms (all seeds, all detectors)", str(result["false_alarms_stationary"])),
            ("stationary responses, all seeds", f"{result['stationary_events_all_seeds']:,}"),
            ("raw ADWIN cuts on stationary streams", str(result["stationary_detector_cuts"])),
            ("seeds", str(result["seeds"])),
        ],
    )
