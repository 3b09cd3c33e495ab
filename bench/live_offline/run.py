"""`streamrec bench live-offline`: the offline replay, its JSON and its table.

Protocol: the dataset in time order; the first `start_share` of its events pre-trains version
1.0 (and is the feature store's history at the start, as the demo's backfill); the events up to
`end_share` are replayed, each preceded by a request. Hyper-parameters are chosen on an earlier
period (e.g. start 0.4, end 0.5) than the one reported (start 0.5, end 1.0).
"""

from __future__ import annotations

import logging
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

from bench.live_offline.arms import ARMS, ReplayReader, experiment, replay_scorer
from bench.live_offline.feature_view import FeatureView
from bench.live_offline.outcome import summarise
from bench.live_offline.ranker_lane import RankerLane
from bench.live_offline.replay import ReplayResult, Targets, replay
from bench.live_offline.timeline import Clock, Timeline, build, ordered, tied_items, window_items
from bench.live_offline.versions import TrainerLane, train_settings
from bench.report import print_table, write_result
from deploy.demo.traffic import ItemRemap
from deploy.generators.dataset_replay import frame_items
from models.datasets import load_interactions_csv, load_ml100k, load_ml100k_items
from serving.item_catalog import ItemCatalog
from serving.settings import ServeSettings

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Options:
    interactions: Path | None = None
    """CSV with user_id,item_id,timestamp; None: ML-100K (with its item catalog)."""
    start_share: float = 0.5
    end_share: float = 1.0
    clock: Clock = field(default_factory=Clock)
    popularity_bucket_s: float | None = None
    """None: 60 s on a replay clock (as the demo), the feature worker's hour otherwise."""
    attribution_window_s: float | None = None
    """None: 4 s on a replay clock (as the demo), the monitor's 30 minutes otherwise."""
    pretrain_budget_s: float = 1200.0
    publish_every_s: float = 5.0
    learn: bool = True
    arms: tuple[str, ...] = ARMS
    salt: str = "bench-live"
    batch_requests: int = 32
    seed: int = 0
    threads: int = 1
    pretrain_cache: Path | None = None
    """A folder keeping pre-trained versions by their events and configuration."""
    exclude_history: bool = False
    """Diagnostic: requests also exclude the user's items older than the store's sequence."""
    serve: dict[str, Any] = field(default_factory=dict)
    """ServeSettings fields replaced (e.g. new_item_slots)."""
    train: dict[str, Any] = field(default_factory=dict)
    """TrainSettings fields replaced; `model.<field>` for the session model's configuration."""
    shift_at: float | None = None
    """The demo's preference shift from this share of the replayed events on: a share
    `shift_items` of the item ids permuted among themselves (deploy.demo.traffic.ItemRemap)."""
    shift_items: float = 1.0
    ranker_labels: Literal["monitor", "next", "window"] = "monitor"
    """Diagnostics: `next` or `window` grade the ranker's lists without the monitor's
    attribution to what was shown (ranker_lane.RankerLane.labels)."""

    def bucket_s(self) -> float:
        if self.popularity_bucket_s is not None:
            return self.popularity_bucket_s
        return 60.0 if self.clock.rate is not None else 3600.0

    def window_s(self) -> float:
        if self.attribution_window_s is not None:
            return self.attribution_window_s
        return 4.0 if self.clock.rate is not None else 1800.0


def run(json_path: Path, options: Options) -> dict[str, Any]:
    started = time.perf_counter()
    frame = ordered(_frame(options))
    first = frame.iloc[: int(len(frame) * options.start_share)]
    replayed = _shifted(frame.iloc[len(first) : int(len(frame) * options.end_share)], options)
    timeline = build(first, replayed, options.clock)
    with tempfile.TemporaryDirectory(prefix="streamrec-live-offline-") as work:
        result, lane, ranker, assignment = _replay(Path(work), timeline, options)
    summary = summarise(timeline.users, result.records, assignment,
                        _segments(timeline, result), options.seed)
    out: dict[str, Any] = {
        "dataset": str(options.interactions) if options.interactions else "ml-100k",
        "protocol": _protocol(options),
        "replayed_events": len(timeline),
        "pretrain": asdict(lane.pretrain) if lane.pretrain else None,
        "versions_published": len(lane.versions),
        "trainer": _trainer_report(lane),
        "arms": summary["assigned"]["arms"],
        "ratios": summary["assigned"]["ratios"],
        "ratios_window": summary["assigned"]["ratios_window"],
        "counterfactual": summary["counterfactual"],
        "segments": summary["segments"],
        "by_strategy": summary["by_strategy"],
        "ranker": _ranker_report(ranker),
        "live_offline_gap": None,
        "wall_s": round(time.perf_counter() - started, 1),
    }
    write_result(json_path, out)
    _print(out)
    return out


def _frame(options: Options) -> pd.DataFrame:
    if options.interactions is not None:
        return load_interactions_csv(options.interactions)
    return load_ml100k()


def _shifted(replayed: pd.DataFrame, options: Options) -> pd.DataFrame:
    if options.shift_at is None:
        return replayed
    remap = ItemRemap(replayed["item_id"].astype(str), options.shift_items, options.seed)
    out = replayed.reset_index(drop=True).copy()
    cut = int(len(out) * options.shift_at)
    out.loc[cut:, "item_id"] = [remap(str(i)) for i in out["item_id"].iloc[cut:]]
    return out


def _catalog(options: Options, at: float) -> ItemCatalog | None:
    if options.interactions is not None:
        return None
    catalog = ItemCatalog()
    catalog.apply(frame_items(load_ml100k_items(), at))
    return catalog


def _replay(
    work: Path, timeline: Timeline, options: Options
) -> tuple[ReplayResult, TrainerLane, RankerLane | None, dict[str, str]]:
    """The replay, and each user's arm in the scorer's experiment."""
    serve = ServeSettings.model_validate({**ServeSettings().model_dump(), **options.serve})
    settings = train_settings(work, options.pretrain_budget_s, options.publish_every_s,
                              options.threads, options.train)
    lane = TrainerLane(settings, serve, options.clock.load_s)
    start = float(timeline.slots[0])
    lane.bootstrap(timeline, start, options.pretrain_cache)
    view = FeatureView(options.bucket_s())
    reader = ReplayReader()
    catalog = _catalog(options, start)
    configured = experiment(options.arms, options.salt, lane.frozen.version)
    scorer = replay_scorer(reader, serve, catalog, configured)
    assignment = {u: scorer.arm(u) for u in set(timeline.users)}
    ranker = None
    if "ranker" in options.arms:
        ranker = RankerLane(work / "ranker", settings, options.window_s(),
                            lateness_s=1.0, load_s=options.clock.load_s,
                            labels=options.ranker_labels)
    targets = Targets(window_items(timeline, options.window_s()), tied_items(timeline))
    result = replay(timeline, view, reader, scorer, options.arms, lane, ranker, targets,
                    options.learn, options.batch_requests, lambda u: _logged(assignment[u]),
                    options.exclude_history)
    return result, lane, ranker, assignment


_LOGGING_ARMS = ("model", "ranker", "frozen")
"""Arms whose answers feed the ranker path: every model answer's, as the scorer logs them
(serving/stages/ranking.py), the pinned version's included."""


def _logged(arm: str) -> str | None:
    return arm if arm in _LOGGING_ARMS else None


def _segments(timeline: Timeline, result: ReplayResult) -> dict[str, npt.NDArray[np.bool_]]:
    known = set(timeline.first_users)
    returning = np.array([u in known for u in timeline.users])
    n = result.history_length
    return {
        "returning_users": returning,
        "new_users": ~returning,
        "history_0": n == 0,
        "history_1_9": (n >= 1) & (n < 10),
        "history_10_49": (n >= 10) & (n < 50),
        "history_50": n >= 50,
    }


def _protocol(options: Options) -> dict[str, Any]:
    return {
        "start_share": options.start_share, "end_share": options.end_share,
        "clock": asdict(options.clock), "popularity_bucket_s": options.bucket_s(),
        "attribution_window_s": options.window_s(),
        "pretrain_budget_s": options.pretrain_budget_s,
        "publish_every_s": options.publish_every_s, "online_learning": options.learn,
        "arms": list(options.arms), "assignment_salt": options.salt,
        "batch_requests": options.batch_requests, "seed": options.seed,
        "exclude_history": options.exclude_history, "serve": options.serve,
        "train": options.train, "shift_at": options.shift_at,
        "shift_items": options.shift_items, "ranker_labels": options.ranker_labels,
    }


def _trainer_report(lane: TrainerLane) -> dict[str, Any] | None:
    """The trainer's own prequential figures (scored before learning, never served) and its
    gate: what online learning gained before publication cadence and gate decided."""
    trainer = lane.trainer
    if trainer is None:
        return None
    decisions = trainer.decisions
    return {
        "prequential": {k: round(v, 4) for k, v in trainer.running.summary().items()},
        "gate_runs": len(decisions),
        "gate_held": sum(1 for d in decisions if not d.publish),
    }


def _ranker_report(ranker: RankerLane | None) -> dict[str, Any] | None:
    if ranker is None:
        return None
    decisions = ranker.training.decisions
    return {
        "labelled_lists": ranker.labelled,
        "labels": ranker.labels,
        "positive_grades": ranker.positives,
        "positive_grades_on_next_item": ranker.target_positives,
        "gate_runs": len(decisions),
        "promotions": len(ranker.published),
        "last_decision": {"promote": decisions[-1].promote,
                          "ranker_ndcg@10": round(decisions[-1].ranker_ndcg, 4),
                          "retrieval_ndcg@10": round(decisions[-1].retrieval_ndcg, 4),
                          "reason": decisions[-1].reason} if decisions else None,
    }


def _print(out: dict[str, Any]) -> None:
    rows = []
    for view, arms in (("assigned", out["arms"]), ("all users", out["counterfactual"]["arms"])):
        for arm, f in arms.items():
            rows.append((f"{view} {arm}: answers / hit@10 / window / ndcg@10",
                         f"{f['answers']} / {f['hit@10']:.4f} / {f['hit@10_window']:.4f} / "
                         f"{f['ndcg@10']:.4f}"))
    for view, ratios in (("assigned", out["ratios"]),
                         ("all users", out["counterfactual"]["ratios"])):
        for name, r in ratios.items():
            rows.append((f"{view} {name} (hit@10)",
                         f"{r['ratio']:.3f} [{r['ci95'][0]:.3f}, {r['ci95'][1]:.3f}]"))
    print_table("bench live-offline (offline replay in time order)", rows)
