"""The live terminal dashboard (rich): one renderable rebuilt from the run state each refresh."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from deploy.demo.arms import recent_rates
from deploy.demo.phases import hit_rate_series

if TYPE_CHECKING:
    from deploy.demo.run_state import RunState

_BARS = " ▁▂▃▄▅▆▇█"
_MIN_WINDOW_RESPONSES = 20
_ARM_SPAN_S = 60.0
"""The arms' row counts the answers to requests of the last minute."""


def _fmt(value: float | None, unit: str = "", digits: int = 1) -> str:
    return "—" if value is None else f"{value:,.{digits}f}{unit}"


def sparkline(values: list[float], width: int = 48) -> str:
    values = values[-width:]
    if not values:
        return ""
    top = max(values) or 1.0
    return "".join(_BARS[min(8, int(v / top * 8))] for v in values)


def _traffic(state: RunState) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    last = state.timeline.samples[-1] if state.timeline.samples else None
    stats = state.traffic.stats if state.traffic else None
    table.add_row("phase", state.phase)
    table.add_row("live", _fmt(last.t if last else None, " s"))
    table.add_row("events/s", _fmt(last.events_per_s if last else None))
    table.add_row("events backfill / live",
                  f"{state.backfill:,} / {stats.events if stats else 0:,}")
    table.add_row("features applied", _fmt(last.applied if last else None, digits=0))
    table.add_row("trained online", _fmt(last.trained if last else None, digits=0))
    table.add_row("requests / answered",
                  f"{stats.requests:,} / {stats.answered:,}" if stats else "—")
    answered = state.timeline.newest_answered()
    table.add_row("latency p50 / p99",
                  f"{_fmt(answered.latency_p50_ms if answered else None, ' ms')} / "
                  f"{_fmt(answered.latency_p99_ms if answered else None, ' ms')}")
    table.add_row("feature freshness p50",
                  _fmt(answered.freshness_p50_ms if answered else None, " ms"))
    return table


def _quality(state: RunState) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    observed = state.observer.snapshot() if state.observer else None
    # A window with a handful of responses (the first, the last) would show a noisy extreme.
    series = [w for w in hit_rate_series(observed.kpis) if w[2] >= _MIN_WINDOW_RESPONSES] \
        if observed else []
    table.add_row("window hit@10, all arms (kpi.metrics)",
                  _fmt(series[-1][1] if series else None, digits=3))
    table.add_row("over time", Text(sparkline([h for _, h, _ in series]), style="green"))
    if state.traffic and state.settings.experiment:
        rates = recent_rates(state.traffic.stats.served, time.time() - _ARM_SPAN_S)
        table.add_row(f"strict hit@10 by arm, last {_ARM_SPAN_S:.0f} s",
                      "  ".join(f"{arm} {rate:.3f} ({n})" for arm, (rate, n) in rates.items())
                      or "—")
    if observed:
        versions = ", ".join(f"{u.model_name}:{u.version}" for u in observed.updates[-6:]) or "—"
        table.add_row("model versions", versions)
        for alert in observed.alerts[-3:]:
            table.add_row(Text("alert", style="bold red"),
                          f"{alert.detector} {alert.baseline:.3f}→{alert.current:.3f} "
                          f"{alert.severity} → {alert.suggested_action}")
    origin = state.live_start or 0.0
    if state.drift_at:
        table.add_row("drift injected", f"at {state.drift_at - origin:.0f} s")
    if state.retrained_at:
        table.add_row("retrained", f"published at {state.retrained_at - origin:.0f} s")
    return table


def render(state: RunState) -> RenderableType:
    title = f"streamrec demo — {state.run.run_id}"
    return Panel(Group(
        Panel(_traffic(state), title="stream · serving", border_style="cyan"),
        Panel(_quality(state), title="quality · models · alerts", border_style="magenta"),
    ), title=title)
