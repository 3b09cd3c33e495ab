"""One run of the closed loop: infrastructure, first model, services, live replay with a drift,
then the summary. Everything it starts is stopped in `finally` blocks, whatever happens."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from deploy.demo import bootstrap
from deploy.demo.arms import EXPERIMENT, FrozenPin, experiment_arms
from deploy.demo.dataset import DemoDataset
from deploy.demo.observer import Observer
from deploy.demo.phases import Marks, first_retrain
from deploy.demo.processes import Services
from deploy.demo.run_state import RunState
from deploy.demo.settings import DemoSettings
from deploy.demo.summary import build_summary
from deploy.demo.traffic import ItemRemap, Traffic
from deploy.demo.user_store import RedisUserStore, UserStore
from deploy.generators.dataset_replay import frame_events
from deploy.generators.replay_schedule import request_times
from deploy.local.settings import LocalStackSettings
from deploy.local.stack import LocalStack
from deploy.local.worker_process import settled
from online_trainer.settings import TrainSettings
from streams.kafka.acls import grant_acls
from streams.kafka.admin import create_topics
from streams.kafka.principals import APP, OPERATOR, TRAINER

logger = logging.getLogger(__name__)

_BACKFILL_AGE_S = 3600.0
"""The backfill's newest event is this old: history, outside the drift retrain's window."""


Refresh = Callable[[RunState], None]


def run(
    settings: DemoSettings, dataset: DemoDataset, refresh: Refresh
) -> tuple[Path, dict[str, object]]:
    """Runs the scenario on `dataset` (deploy.demo.dataset.load of `settings`); returns the run
    folder and its summary (also written there)."""
    started = time.time()
    local = LocalStackSettings()
    stack = LocalStack(local)
    up = stack.up()
    try:
        run_layout = bootstrap.layout(settings, local)
        state = RunState(run_layout, settings, dataset)
        create_topics(run_layout.kafka)
        grant_acls(run_layout.kafka)
        summary = _with_services(state, local, refresh)
    finally:
        stack.down(only=up.started)
    summary["wall_s"] = round(time.time() - started, 1)
    summary["stack_started_by_demo"] = list(up.started)
    return run_layout.root, summary


def _with_services(
    state: RunState, local: LocalStackSettings, refresh: Refresh
) -> dict[str, object]:
    run = state.run
    services = Services(bootstrap.service_env(run, local), run.logs)
    observer = Observer(
        run.kafka.as_principal(OPERATOR), f"{run.run_id}-observer"
    ).start()
    state.observer = observer
    try:
        first, second = state.dataset.first, state.dataset.second
        state.phase = "pre-training"
        refresh(state)
        state.first_version = bootstrap.pretrain_and_publish(_train_settings(state),
                                                             first).version
        state.phase = "backfill"
        refresh(state)
        if state.dataset.items is not None:
            bootstrap.publish_catalog(run.kafka.as_principal(APP), state.dataset.items)
        state.backfill_end_at = time.time() - _BACKFILL_AGE_S
        state.backfill = bootstrap.backfill(run.kafka.as_principal(APP), first,
                                            state.backfill_end_at)
        _start(services, state)
        _wait_ready(services, state, refresh)
        with LocalStack(local).redis.admin_client() as client:
            pin = (FrozenPin(client, run.redis_prefix, state.first_version)
                   if state.settings.experiment and state.first_version else None)
            _live(services, state, second, refresh,
                  RedisUserStore(client, run.redis_prefix), pin)
        return build_summary(state, _marks(state), services.stop_all())
    finally:
        services.stop_all()
        observer.stop()
        _clean_redis(run.redis_prefix, local)


def _train_settings(state: RunState) -> TrainSettings:
    run, s = state.run, state.settings
    base = TrainSettings(
        kafka=run.kafka.as_principal(TRAINER), state_dir=run.state_dir, store_dir=run.store_dir
    )
    epochs = {"epochs": s.pretrain_epochs} if s.pretrain_epochs is not None else {}
    model = base.model.model_copy(update={"time_budget_s": s.pretrain_budget_s, **epochs})
    return base.model_copy(update={"model": model})


def _experiment(state: RunState) -> dict[str, str]:
    """The scorer's experiment settings when the run has one (`frozen` pins 1.0)."""
    if not state.settings.experiment or state.first_version is None:
        return {}
    return {"STREAMREC_EXPERIMENT__NAME": EXPERIMENT,
            "STREAMREC_EXPERIMENT__ARMS": json.dumps(experiment_arms(state.first_version))}


def _start(services: Services, state: RunState) -> None:
    run, s = state.run, state.settings
    services.start("worker", {
        "STREAMREC_GROUP_ID": f"{run.run_id}-features",
        # Everything shares the cores: the scorer (and Redis, the broker) go first.
        "STREAMREC_CPU_NICE": "10",
        "STREAMREC_POPULARITY_BUCKET_S": str(s.popularity_bucket_s),
    })
    services.start("trainer", {
        "STREAMREC_GROUP_ID": f"{run.run_id}-trainer",
        "STREAMREC_ALERTS_GROUP_ID": f"{run.run_id}-trainer-alerts",
        "STREAMREC_STATE_DIR": str(run.state_dir),
        "STREAMREC_STORE_DIR": str(run.store_dir),
        # The backfill is what the first model learned already; the trainer learns live events.
        "STREAMREC_START_FROM": "latest",
        "STREAMREC_PUBLISH_EVERY_S": str(s.online_publish_every_s),
        "STREAMREC_RETRAIN_WINDOW_S": str(s.retrain_window_s),
        "STREAMREC_RETRAIN_BUDGET_S": str(s.retrain_budget_s),
        "STREAMREC_RETRAIN_MIN_AFTER_CHANGE_S": str(s.retrain_after_change_s),
        "STREAMREC_RETRAIN_MODE": s.retrain_mode,
        "STREAMREC_THREADS": "1",
        "STREAMREC_RANKER_HELD_BACK": str(s.ranker_held_back),
        "STREAMREC_RANKER_MIN_LISTS": str(s.ranker_min_lists),
        "STREAMREC_RANKER_GATE_EVERY": str(s.ranker_gate_every),
    })
    services.start("scorer", {
        "STREAMREC_GROUP_ID": f"{run.run_id}-scorer",
        "STREAMREC_MODEL_STORE": str(run.store_dir),
        **_experiment(state),
    })
    services.start("monitor", {
        "STREAMREC_GROUP_ID": f"{run.run_id}-monitor",
        "STREAMREC_WINDOW_S": str(s.kpi_window_s),
        "STREAMREC_ATTRIBUTION_WINDOW_S": str(s.attribution_window_s),
        "STREAMREC_ALLOWED_LATENESS_S": "1",
        "STREAMREC_IDLE_ADVANCE_S": "2",
        "STREAMREC_CPU_NICE": "10",
        # Only a major version that started serving after the drop began could be blamed: the
        # retrain's own 2.0 comes after the alert and must not be rolled back for the drift.
        "STREAMREC_DRIFT__ROLLBACK_WINDOWS": "0",
        # Its reference would be the backfill (another period of the dataset), not a training
        # profile: PSI would flag the dataset's own evolution. The demo is about KPI drift.
        "STREAMREC_DRIFT__PSI_SAMPLE_EVENTS": "10000000",
    })


def _wait_ready(services: Services, state: RunState, refresh: Refresh) -> None:
    """Worker applied the backfill, the trainer and monitor answer /metrics, and the scorer
    answers a probe request."""
    assert state.observer is not None
    state.phase = "waiting for services"
    app = state.run.kafka.as_principal(APP)
    traffic = Traffic(app, state.observer, 0.0, 0.0, state.settings.seed)
    deadline = time.monotonic() + state.settings.ready_timeout_s
    probe: str | None = None
    while time.monotonic() < deadline:
        if dead := services.dead():
            raise RuntimeError(f"services exited before ready: {dead} (logs in {state.run.logs})")
        state.services = services.metrics()
        worker_done = settled(state.services.get("worker", {})) >= state.backfill
        up = all(state.services.get(n) for n in ("trainer", "monitor", "scorer"))
        if worker_done and up and probe and state.observer.take(probe):
            traffic.close()
            return
        if up and (probe is None or int(time.monotonic()) % 5 == 0):
            probe = traffic.request("1", None, time.time())
            traffic.release(time.time())
        refresh(state)
        time.sleep(1.0)
    traffic.close()
    raise TimeoutError(f"services not ready after {state.settings.ready_timeout_s}s: "
                       f"{ {n: bool(m) for n, m in state.services.items()} }")


def _live(
    services: Services, state: RunState, second: pd.DataFrame, refresh: Refresh, store: UserStore,
    pin: FrozenPin | None,
) -> None:
    assert state.observer is not None
    s = state.settings
    app = state.run.kafka.as_principal(APP)
    traffic = Traffic(app, state.observer, s.request_share, s.request_lead_s, s.seed)
    state.traffic = traffic
    remap = ItemRemap(second["item_id"].astype(str), s.drift_item_share, s.seed)
    state.phase = "live"
    events = list(frame_events(second.iloc[: s.live_events]))
    due = request_times([e.user_id for e in events], 0.0, s.events_per_s, s.request_lead_s,
                        s.user_gap_s)
    start = state.live_start = time.time()
    next_refresh = start
    try:
        for j in np.argsort(due, kind="stable").tolist():
            time.sleep(max(0.0, start + float(due[j]) - time.time()))
            if s.user_gap_s is not None:
                traffic.await_stored(events[j].user_id, store, s.user_store_wait_s)
            now = time.time()
            if (s.drift_after_s is not None and state.drift_at is None
                    and now - start >= s.drift_after_s):
                traffic.remap, state.drift_at, state.phase = remap, now, "live, drifted"
            traffic.offer(events[j], now)
            if now >= next_refresh:
                next_refresh = now + s.refresh_s
                over = _tick(services, state, refresh)
                if pin is not None and state.retrained_version is not None:
                    _follow(pin, state, state.retrained_version)
                if over or now - start >= s.max_live_s:
                    break
    finally:
        traffic.drain()  # queued interactions go out and the producer is flushed either way
    _settle(services, state, refresh)


def _tick(services: Services, state: RunState, refresh: Refresh) -> bool:
    """One refresh: sample, render; True when the scenario is over."""
    assert state.observer is not None and state.traffic is not None and state.live_start
    if dead := services.dead():
        raise RuntimeError(f"services died: {dead} (logs in {state.run.logs})")
    observed = state.observer.snapshot()
    state.services = services.metrics()
    now = time.time()
    state.timeline.add(now - state.live_start, state.traffic.stats, state.services,
                       len(observed.alerts), len(observed.updates))
    if state.retrained_at is None and (update := first_retrain(observed.updates, state.drift_at)):
        state.retrained_at, state.retrained_version = update.published_at, update.version
        state.phase = f"live, retrained ({update.version})"
    refresh(state)
    s = state.settings
    hold = _settle_s(s) + s.recovery_hold_s
    return state.retrained_at is not None and now >= state.retrained_at + hold


def _follow(pin: FrozenPin, state: RunState, version: str) -> None:
    if pin.follow(version):
        assert state.live_start is not None
        state.frozen_pins.append((round(time.time() - state.live_start, 2), version))
        logger.info("frozen arm pinned version=%s", version)


def _settle(services: Services, state: RunState, refresh: Refresh) -> None:
    """Waits for the last KPI windows to close (attribution window + window + slack)."""
    state.phase = "closing KPI windows"
    s = state.settings
    until = time.time() + s.attribution_window_s + s.kpi_window_s + 6.0
    while time.time() < until:
        _tick(services, state, refresh)
        time.sleep(s.refresh_s)


def _settle_s(s: DemoSettings) -> float:
    """After a new major version is published, the scorer loads it and windows fill."""
    return s.recovery_settle_s + s.kpi_window_s


def _marks(state: RunState) -> Marks:
    assert state.live_start is not None
    s = state.settings
    return Marks(state.live_start, state.live_start + s.warmup_s, state.drift_at,
                 state.retrained_at, _settle_s(s))


def _clean_redis(prefix: str, local: LocalStackSettings) -> None:
    """The run's feature keys go with the run (the prefix is the run's own)."""
    try:
        client = LocalStack(local).redis.admin_client()
        for key in client.scan_iter(match=f"{prefix}*", count=1000):
            client.delete(key)
    except Exception:
        logger.warning("could not remove redis keys prefix=%s", prefix)
