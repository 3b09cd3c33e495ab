"""`summary.json`: the figures of one run, from what the services published to Kafka (KPIs,
alerts, versions) and what the traffic generator measured (latency, freshness)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from deploy.demo.arms import ARM_BIN_S, arm_figures, arm_series, arms_by_phase
from deploy.demo.phases import Marks, hit_rate_series, major, phase_spans, phases
from deploy.demo.ranking import gate_decisions
from deploy.demo.timeline import summary_ms
from online_trainer.ranker_training import RANKER_MODEL_NAME

if TYPE_CHECKING:
    from deploy.demo.run_state import RunState


def _rel(t: float | None, origin: float) -> float | None:
    return None if t is None else round(t - origin, 2)


def build_summary(
    state: RunState, marks: Marks, return_codes: dict[str, int | None]
) -> dict[str, object]:
    assert state.observer is not None and state.traffic is not None
    observed = state.observer.snapshot()
    stats, s, origin = state.traffic.stats, state.settings, marks.live_start
    end = max((k.window_end for k in observed.kpis), default=time.time())
    kpi = {name: {"hit_rate": p.hit_rate, "responses": p.responses, "hits": p.hits}
           for name, p in phases(observed.kpis, marks, end).items()}
    before = kpi["before_drift"]["hit_rate"]
    after = kpi.get("after_recovery", {}).get("hit_rate")
    ratio = None
    if isinstance(after, float) and isinstance(before, float) and before > 0:
        ratio = after / before
    worker = state.services.get("worker", {})
    return {
        "run_id": state.run.run_id,
        "live_s": round(time.time() - origin, 1),
        "settings": s.model_dump(mode="json"),
        "dataset": state.dataset.name,
        "dataset_sha256": state.dataset.sha256,
        "events": {"backfill": state.backfill, "live": stats.events,
                   "applied_by_worker": worker.get("streamrec_stream_events_applied_total")},
        "requests": stats.requests,
        "responses": {"received": observed.responses, "in_time": stats.answered,
                      "late": stats.late},
        "latency_ms": summary_ms(stats.latencies_ms),
        "feature_freshness_ms": summary_ms(stats.feature_freshness_ms),
        "client_hit_rate": stats.client_hits / stats.answered if stats.answered else None,
        "kpi": kpi,
        "arms": arm_figures(stats.served, s.seed) if s.experiment else {},
        "arms_by_phase": (arms_by_phase(stats.served, phase_spans(marks, end), s.seed)
                          if s.experiment else {}),
        "arm_series": (arm_series(stats.served, origin, ARM_BIN_S, s.seed)
                       if s.experiment else []),
        "ranker_gate": gate_decisions(
            observed.updates, state.services.get("trainer", {}), RANKER_MODEL_NAME, origin
        ),
        "recovery_ratio": round(ratio, 3) if ratio is not None else None,
        "recovered": ratio is not None and ratio >= s.recovery_ratio,
        "drift": {"at_s": _rel(marks.drift_at, origin), "item_share": s.drift_item_share,
                  "kind": "permutation of item ids"},
        "alerts": [
            {"at_s": _rel(a.detected_at, origin), "detector": a.detector, "metric": a.metric,
             "severity": a.severity, "action": a.suggested_action, "baseline": a.baseline,
             "current": a.current, "model_version": a.model_version}
            for a in observed.alerts
        ],
        "retrains": sum(1 for u in observed.updates if major(u.version) > 1),
        "retrained_at_s": _rel(marks.retrained_at, origin),
        "frozen_pins": [{"at_s": at, "version": v} for at, v in state.frozen_pins],
        "versions": [
            {"model": u.model_name, "version": u.version, "kind": u.kind,
             "at_s": _rel(u.published_at, origin)}
            for u in observed.updates
        ],
        "versions_served": stats.versions,
        "kpi_series": [
            {"t": round(t - origin, 2), "hit_rate": round(h, 4), "responses": n}
            for t, h, n in hit_rate_series(observed.kpis)
        ],
        "timeline": state.timeline.as_dicts(),
        "monitor_last_scrape": {
            k: v for k, v in state.services.get("monitor", {}).items()
            if k.startswith(("streamrec_drift", "streamrec_kpi_rate"))
        },
        "service_exit_codes": return_codes,
        "run_dir": str(state.run.root),
    }
