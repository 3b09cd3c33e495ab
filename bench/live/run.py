"""`streamrec bench live`: the run, its JSON and its table.

Protocol: the dataset (ML-100K, or a CSV of user_id,item_id,timestamp: deploy/demo/dataset.py)
in time order; its first half pre-trains version 1.0 and is the feature store's
history (the demo's bootstrap, deploy/demo/scenario.py); the second half's first `events` events
(all of it by default) are replayed live at `events_per_s`, each preceded by a request for its
user, with no injected
shift. The scorer's experiment (deploy/demo/arms.py) assigns users to `popularity`, `frozen`
(1.0 pinned), `model` (the online trainer's newest version) and `ranker`. The run's own folder
keeps the services' logs, the model store and the demo's report.html (each arm over time).
"""

from __future__ import annotations

import logging
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.live.answers import (
    Judged,
    arm_figures,
    arm_ratios,
    arm_ratios_cuped,
    judge_all,
    user_covariates,
)
from bench.live.gap import PastEvent, gap, offline_answers
from bench.report import print_table, write_result
from deploy.demo import report, scenario
from deploy.demo.dataset import DemoDataset
from deploy.demo.live import terminate
from deploy.demo.run_state import RunState
from deploy.demo.settings import DemoSettings
from deploy.generators.dataset_replay import frame_events, frame_items
from online_trainer.ranker_training import RANKER_MODEL_NAME
from serving.item_catalog import ItemCatalog
from serving.settings import ServeSettings

logger = logging.getLogger(__name__)


PRETRAIN_CAP_S = 900.0
"""The pre-training runs its passes; this only stops a stuck one."""


@dataclass(frozen=True)
class Options:
    interactions: Path | None = None
    """CSV with user_id,item_id,timestamp; None: ML-100K (with its item catalog)."""
    events: int | None = None
    """Events of the dataset's second half replayed live (each preceded by a request); None:
    all of it (ML-100K: 50,000 events of 586 users)."""
    events_per_s: float = 100.0
    """The replay's slot rate; user pacing holds a user's burst behind it, so a heavy user's
    events (ML-100K: 737 in the second half, at least `request_lead_s + user_gap_s` apart) set
    the run's length more than the rate does."""
    request_lead_s: float = 0.5
    """A request leaves this long before its event: the answer must arrive within it or the
    request counts as late (on a loaded 2-core host the scorer's p99 nears 250 ms at the
    replay's peak rate)."""
    publish_every_s: float = 10.0
    """The online trainer's cadence of gated minor versions (what the `model` arm serves)."""
    pretrain_epochs: int = 10
    seed: int = 7
    user_gap_s: float | None = 0.25
    """User-paced (deploy/generators/replay_schedule.py): a user's next request leaves this
    long after their previous event, and not before the feature store holds it (as a person's
    next visit would: deploy/demo/user_store.py)."""
    reports_dir: Path = Path("reports")
    """The run's folder (logs, model store, report.html) goes here."""


def settings(options: Options) -> DemoSettings:
    return DemoSettings(
        interactions=options.interactions, experiment=True, drift_after_s=None,
        live_events=options.events,
        events_per_s=options.events_per_s, request_share=1.0, user_gap_s=options.user_gap_s,
        request_lead_s=options.request_lead_s,
        online_publish_every_s=options.publish_every_s, warmup_s=0.0,
        pretrain_epochs=options.pretrain_epochs, pretrain_budget_s=PRETRAIN_CAP_S,
        max_live_s=3600.0, dashboard=False, seed=options.seed,
        reports_dir=options.reports_dir,
    )


def run(json_path: Path, options: Options, dataset: DemoDataset) -> dict[str, Any]:
    """`dataset`: deploy.demo.dataset.load of `settings(options)`, checked before the run."""
    started = time.perf_counter()
    demo = settings(options)
    last: list[RunState] = []
    # SIGTERM unwinds through the scenario's finally blocks: services and the stack stop.
    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        run_dir, summary = scenario.run(demo, dataset, lambda state: last.__setitem__(
            slice(None), [state]))
    finally:
        signal.signal(signal.SIGTERM, previous)
    report.write(run_dir, summary)
    state = last[0]
    assert state.traffic is not None and state.observer is not None
    stats = state.traffic.stats
    judged = judge_all(stats.served, stats.published, demo.attribution_window_s)
    out: dict[str, Any] = {
        "dataset": dataset.name,
        "dataset_sha256": dataset.sha256,
        "protocol": {"pretrain_share": demo.pretrain_share,
                     "live_events": len(dataset.second.iloc[: options.events]),
                     "events_per_s": options.events_per_s, "requests_per_event": 1.0,
                     "user_gap_s": options.user_gap_s, "request_lead_s": demo.request_lead_s,
                     "attribution_window_s": demo.attribution_window_s,
                     "publish_every_s": options.publish_every_s,
                     "pretrain_epochs": options.pretrain_epochs, "seed": options.seed},
        "requests": stats.requests, "answered_in_time": stats.answered, "late": stats.late,
        "unstored": stats.unstored,
        "arms": arm_figures(judged, options.seed),
        "ratios": arm_ratios(judged, options.seed),
        "ratios_cuped": arm_ratios_cuped(judged, user_covariates(
            dataset.first["user_id"].astype(str), stats.published), options.seed),
        "live_offline_gap": _gap(state, demo, judged),
        "versions": summary["versions"],
        "alerts": summary["alerts"],
        "ranker_gate": summary["ranker_gate"],
        "run_dir": str(run_dir),
        "wall_s": round(time.perf_counter() - started, 1),
    }
    write_result(json_path, out)
    _print(out)
    return out


def _gap(state: RunState, demo: DemoSettings, judged: list[Judged]) -> dict[str, Any]:
    assert state.traffic is not None and state.observer is not None
    assert state.first_version is not None and state.backfill_end_at is not None
    update = next(u for u in state.observer.snapshot().updates
                  if u.version == state.first_version and u.model_name != RANKER_MODEL_NAME)
    history = (PastEvent(e.user_id, e.item_id, e.timestamp)
               for e in frame_events(state.dataset.first, shift_to_now=state.backfill_end_at))
    # The scorer's catalog as it served: ML-100K's item content, or empty for a CSV.
    catalog = ItemCatalog()
    if state.dataset.items is not None:
        catalog.apply(frame_items(state.dataset.items, state.live_start or time.time()))
    pairs = offline_answers(judged, "frozen", update, state.run.store_dir, ServeSettings(),
                            catalog, history, state.traffic.stats.published,
                            float(demo.popularity_bucket_s))
    return gap(pairs, state.traffic.stats.published, demo.attribution_window_s)


def _print(out: dict[str, Any]) -> None:
    rows = []
    for arm, f in out["arms"].items():
        rows.append((f"{arm}: answers / hit@10 [95%] / window / ndcg@10",
                     f"{f['answers']} / {f['hit@10']:.4f} [{f['hit@10_ci95'][0]:.4f}, "
                     f"{f['hit@10_ci95'][1]:.4f}] / {f['hit@10_window']:.4f} / "
                     f"{f['ndcg@10']:.4f}"))
    for name, r in out["ratios"].items():
        c = out["ratios_cuped"][name]
        rows.append((f"{name} (hit@10); CUPED", f"{r['ratio']:.3f} [{r['ci95'][0]:.3f}, "
                                                f"{r['ci95'][1]:.3f}]; {c['ratio']:.3f} "
                                                f"[{c['ci95'][0]:.3f}, {c['ci95'][1]:.3f}]"))
    g = out["live_offline_gap"]
    rows.append(("frozen live/offline gap (hit@10), same list",
                 f"{g.get('gap')} ({g.get('served_hit@10')} vs {g.get('offline_hit@10')}), "
                 f"{g.get('same_list')}"))
    print_table("bench live (real services, randomized arms)", rows)
