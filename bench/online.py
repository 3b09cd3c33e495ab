"""Online vs frozen on ML-100K replayed through Kafka in time order (`streamrec bench online`).

1. The first half (by time) trains a model offline (full retrain, validated on its last events).
2. That model is checkpointed twice over: as the start of the online trainer, and as a frozen
   copy that never updates its weights (it still sees each user's newest history, so the
   comparison isolates learning, not feature freshness).
3. The second half is produced to Kafka at an open-loop rate, from a process of its own (as
   applications are); the trainer consumes it, scores its prequential sample (`scored_share`
   of the events, picked by a hash of each) before learning, learns, and publishes gated
   versions. Freshness = Kafka ingest time of an event -> a published, loadable version that
   contains it.
4. After the run, the frozen copy scores the same sampled events of the same batches in the
   trainer's order: its answers do not depend on timing, and scoring it live would have
   delayed the trainer it is compared with.
"""

from __future__ import annotations

import math
import multiprocessing
import threading
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from tempfile import mkdtemp

import pandas as pd

from bench.report import percentile, print_table, write_result
from deploy.generators.dataset_replay import frame_events
from models.datasets import load_ml100k
from online_trainer.checkpoint import CheckpointStore, TrainerState
from online_trainer.online_model import Interaction, OnlineModel
from online_trainer.prequential import RunningMetrics
from online_trainer.retrain import full_retrain
from online_trainer.service import TrainerService
from online_trainer.settings import TrainSettings
from online_trainer.trainer import OnlineTrainer
from schemas import InteractionEvent
from schemas.topics import INTERACTIONS
from streams.kafka.acls import grant_acls
from streams.kafka.admin import create_topics
from streams.kafka.connection import KafkaConnection
from streams.kafka.contract_loop import Envelope
from streams.kafka.principals import ADMIN, TRAINER
from streams.kafka.producer import EventProducer
from streams.pacing import Pacer


def _interactions(frame: pd.DataFrame) -> list[Interaction]:
    return [
        Interaction(str(u), str(i), int(t))
        for u, i, t in zip(frame["user_id"], frame["item_id"], frame["timestamp"], strict=True)
    ]


def _pretrain(settings: TrainSettings, first: pd.DataFrame) -> tuple[OnlineModel, float]:
    started = time.perf_counter()
    base = OnlineModel(settings.model, context=settings.context_events)
    result = full_retrain(_interactions(first), base, settings.model)
    CheckpointStore(settings.state_dir).save(
        result.model.tensors(),
        result.model.trainer.optimizer.state_dict(),
        result.model.items,
        result.model.histories,
        TrainerState(),
    )
    return result.model, time.perf_counter() - started


def _record_batches(service: TrainerService) -> tuple[list[list[Interaction]], list[float]]:
    """Wraps the trainer's `train_batch` to keep each batch it takes, in order, and the time it
    spends on it (its own scoring and learning)."""
    trainer = service.trainer
    original = trainer.train_batch
    batches: list[list[Interaction]] = []
    busy: list[float] = []

    def train_batch(batch: list[Envelope[InteractionEvent]]) -> None:
        batches.append([
            Interaction(e.record.user_id, e.record.item_id, int(e.record.timestamp)) for e in batch
        ])
        started = time.perf_counter()
        original(batch)
        busy.append(time.perf_counter() - started)

    trainer.train_batch = train_batch  # type: ignore[method-assign]
    return batches, busy


def _score_frozen(
    frozen: OnlineModel, batches: list[list[Interaction]], share: float
) -> RunningMetrics:
    """The frozen model's prequential metrics over the batches the trainer took, in its order
    and on the events its sample scored: each batch scored before its events join the histories
    (the weights never change), so its answers are those it would have given live, and its
    scoring never delays the trainer."""
    metrics = RunningMetrics()
    for interactions in batches:
        metrics.add(frozen.ranks(frozen.queries(interactions, share)))
        frozen.learn(interactions, steps=0)  # histories only: the weights stay frozen
    return metrics


def _produce(kafka: KafkaConnection, frame: pd.DataFrame, rate: float) -> int:
    producer = EventProducer(kafka)
    topic = kafka.topic(INTERACTIONS)
    pacer = Pacer(rate)
    count = 0
    for event in frame_events(frame):
        pacer.wait()
        producer.send(topic, event.user_id, event)
        count += 1
    producer.flush()
    return count


def _produce_apart(kafka: KafkaConnection, frame: pd.DataFrame, rate: float) -> int:
    """`_produce` in a process of its own, as the applications are in a deployment: in the
    trainer's process its Python work would hold the interpreter lock the trainer needs."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(_produce, kafka, frame, rate).result()


def run(json_path: Path, rate: float, pretrain_s: float) -> None:
    frame = load_ml100k().sort_values("timestamp", kind="stable").reset_index(drop=True)
    half = len(frame) // 2
    # The deployment's Kafka as the services find it (STREAMREC_KAFKA__*), on topics of its own.
    kafka = TrainSettings().kafka.as_principal(ADMIN).model_copy(
        update={"topic_prefix": f"bench{uuid.uuid4().hex[:8]}."}
    )
    create_topics(kafka)
    grant_acls(kafka)
    work = Path(mkdtemp(prefix="streamrec-bench-online-"))
    settings = TrainSettings(
        kafka=kafka.as_principal(TRAINER),
        state_dir=work / "state",
        store_dir=work / "store",
        group_id=f"bench-trainer-{uuid.uuid4().hex[:6]}",
        alerts_group_id=f"bench-alerts-{uuid.uuid4().hex[:6]}",
        batch_size=256,
        batch_timeout_s=0.1,
        checkpoint_every_batches=50,
        model=TrainSettings().model.model_copy(update={"time_budget_s": pretrain_s}),
    )
    model, pretrain_wall = _pretrain(settings, frame.iloc[:half])
    frozen = model.frozen_copy()
    service = TrainerService(settings)
    batches, busy = _record_batches(service)
    stop = threading.Event()
    thread = threading.Thread(target=service.run, args=(stop,), daemon=True)
    thread.start()
    started = time.perf_counter()
    produced = _produce_apart(kafka, frame.iloc[half:], rate)
    ledger = service.trainer.state.ledger
    while ledger.trained_count() < produced and time.perf_counter() - started < 3600:
        time.sleep(0.2)
    time.sleep(settings.publish_every_s + 1)  # the last events reach a publication
    wall = time.perf_counter() - started
    stop.set()
    thread.join(timeout=60)
    loads = _scorer_loads(service.trainer, settings.store_dir)
    frozen_metrics = _score_frozen(frozen, batches, settings.scored_share)
    _report(json_path, service, frozen_metrics, busy, produced, wall, rate, pretrain_wall, loads)


def _stages(trainer: OnlineTrainer) -> dict[str, dict[str, float]]:
    """Each stage's p50 and p99 over all events, and its mean over the slowest 1% of events (what
    their freshness is made of)."""
    fresh = list(trainer.freshness_s)
    if not fresh:
        return {}
    slowest = sorted(range(len(fresh)), key=fresh.__getitem__)[-max(1, len(fresh) // 100):]
    out = {}
    for stage, values in trainer.freshness_stages.items():
        ms = [v * 1000 for v in values]
        out[stage] = {
            "p50": round(percentile(ms, 50), 1),
            "p99": round(percentile(ms, 99), 1),
            "slowest_1pct_mean": round(sum(ms[i] for i in slowest) / len(slowest), 1),
        }
    return out


def _publication_parts(trainer: OnlineTrainer) -> dict[str, dict[str, float]]:
    """Per part of a publication, its p50 and max over the run's publications."""
    parts: dict[str, list[float]] = {}
    for seconds in trainer.publish_seconds:
        for part, value in seconds.items():
            parts.setdefault(part, []).append(value * 1000)
    return {
        part: {"p50": round(percentile(ms, 50), 1), "max": round(max(ms), 1)}
        for part, ms in parts.items()
    }


def _scorer_loads(trainer: OnlineTrainer, store_dir: Path, versions: int = 5) -> dict[str, float]:
    """After the run, with nothing else in the process: how long a scorer takes to load each of
    the last versions (serving's own loader: digest check, delta chain, encoder runtime, index),
    once a first load has warmed the process up as a running scorer is."""
    from serving.session_model import load_session_bundle
    from serving.settings import ServeSettings

    serve = ServeSettings(model_store=store_dir)
    updates = [p.update for p in trainer.publications[-versions - 1 :]]
    seconds = []
    for update in updates:
        started = time.perf_counter()
        load_session_bundle(
            store_dir, update.model_name, update.version, update.sha256, serve.retrieval,
            serve.history_length, published_at=update.published_at,
            cpu_runtime=serve.encoder_cpu_runtime,
        )
        seconds.append((time.perf_counter() - started) * 1000)
    warm = seconds[1:] or seconds
    return {"p50": round(percentile(warm, 50), 1), "max": round(max(warm), 1),
            "versions": len(warm)} if warm else {}


def _report(
    json_path: Path,
    service: TrainerService,
    frozen: RunningMetrics,
    busy: list[float],
    produced: int,
    wall: float,
    rate: float,
    pretrain_wall: float,
    scorer_loads: dict[str, float],
) -> None:
    online = service.trainer.running.summary()
    frozen_summary = frozen.summary()
    fresh = [s * 1000 for s in service.trainer.freshness_s] or [float("nan")]
    stages = _stages(service.trainer)
    result = {
        "online": {"hr@10": round(online["hr@10"], 4), "ndcg@10": round(online["ndcg@10"], 4)},
        "frozen": {
            "hr@10": round(frozen_summary["hr@10"], 4),
            "ndcg@10": round(frozen_summary["ndcg@10"], 4),
        },
        "freshness_ms": {"p50": round(percentile(fresh, 50)), "p99": round(percentile(fresh, 99))},
        "freshness_stages_ms": stages,
        "publication_ms": _publication_parts(service.trainer),
        "scorer_load_ms": scorer_loads,
        "publications_by_kind": {
            kind: sum(p.kind == kind for p in service.trainer.publications)
            for kind in ("full", "delta")
        },
        "publish_every_s": service.settings.publish_every_s,
        "events_per_s": round(produced / max(sum(busy), 1e-9)),
        "events_scored": int(online["events"]),
        "scored_share": service.settings.scored_share,
        "events_streamed": produced,
        "offered_rate": rate,
        "wall_s": round(wall, 1),
        "pretrain_s": round(pretrain_wall, 1),
        "publications": len(service.trainer.publications),
        "note": "events_per_s = streamed events / the trainer's time scoring (prequential) and "
                "learning; the frozen model is scored after the run on the same sampled events",
    }
    write_result(json_path, result)
    ratio = online["hr@10"] / max(frozen_summary["hr@10"], 1e-9)
    rows = [
        ("online HR@10 / NDCG@10", f"{online['hr@10']:.4f} / {online['ndcg@10']:.4f}"),
        (
            "frozen HR@10 / NDCG@10",
            f"{frozen_summary['hr@10']:.4f} / {frozen_summary['ndcg@10']:.4f}",
        ),
        ("online / frozen HR@10", f"{ratio:.3f}"),
        ("freshness p50 / p99 ms", f"{percentile(fresh, 50):.0f} / {percentile(fresh, 99):.0f}"),
        *(
            (f"  {stage} p50 / p99 / slowest 1% ms",
             f"{v['p50']:.0f} / {v['p99']:.0f} / {v['slowest_1pct_mean']:.0f}")
            for stage, v in stages.items()
        ),
        ("events/s trained", f"{produced / max(sum(busy), 1e-9):,.0f}"),
        ("publications", str(len(service.trainer.publications))),
        ("scorer load p50 / max ms (after the run)",
         f"{scorer_loads.get('p50', math.nan):.0f} / {scorer_loads.get('max', math.nan):.0f}"),
    ]
    print_table("bench online (ML-100K, second half streamed)", rows)
