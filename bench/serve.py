"""`streamrec bench serve`: request -> response latency of one scorer process, under ingest.

Set-up, all on the local broker and Redis, isolated by a fresh topic and key prefix:
- a session Transformer over `catalog_items` items (random weights: latency does not depend on
  what the weights learned) stored in a temporary model store and announced on model.updates;
- every item's metadata on catalog.items (its category as its genre, a release year), so the
  ranking stage computes its content features as in production;
- the real feature worker (a child process) ingests a seed of interactions, then
  `ingest_rate` events/s from a producer child process for the whole run;
- one scorer child process (`streamrec serve`, configured by STREAMREC_* variables), or
  several in one consumer group sharing `rec.requests`'s partitions (`scorers`).
This process only offers requests open-loop at each rate (streams.pacing.Pacer: no coordinated
omission) and timestamps each response as it is consumed: latency = produce -> consume, in one
clock. The first `warmup_s` of each rate are discarded. Per rate it also records the cores each
process used (`cpu_cores`: each scorer, feature worker, event generator, this process, and the
broker and Redis where streamrec started them), which says what a latency figure is short of;
and Redis's time in the feature worker's script calls per ingested event
(`redis_script_us_per_ingested_event`): live traffic arrives in small batches, so an entity's
events fold together far less than in `bench ingest`'s backlog.
"""

from __future__ import annotations

import contextlib
import gc
import math
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from multiprocessing.synchronize import Event as EventType
from pathlib import Path
from typing import Any

import numpy as np
import redis
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from bench.calibration import Calibration, per_reference_time
from bench.load import InteractionDraw
from bench.report import percentile, print_table, write_result
from deploy.local.settings import LocalStackSettings
from deploy.local.worker_process import WorkerProcess, free_port, settled
from schemas.catalog import CatalogItem
from schemas.model_updates import ModelUpdate
from schemas.recommendations import RecommendationRequest, RecommendationResponse
from schemas.topics import (
    CATALOG,
    CATALOG_ITEMS,
    INTERACTIONS,
    MODEL_UPDATES,
    REC_REQUESTS,
    REC_RESPONSES,
)
from schemas.wire import decode
from streams.feature_worker.settings import StreamSettings
from streams.kafka.acls import grant_acls
from streams.kafka.admin import create_topics
from streams.kafka.connection import KafkaConnection
from streams.kafka.principals import ADMIN
from streams.kafka.producer import EventProducer
from streams.metrics import histogram_quantile, scrape
from streams.pacing import Pacer

MODEL = "session_transformer"
USERS = 5000
CATEGORIES = 100
SEED_EVENTS = 20_000
COLD_SHARE = 0.05
"""Requests from users the system has never seen (cold start)."""
WARMUP_S = 2.0
LATENCY_METRIC = "streamrec_serve_latency_seconds"


def _draw(seed: int, catalog: int) -> InteractionDraw:
    return InteractionDraw(np.random.default_rng(seed), catalog, USERS, CATEGORIES)


def _producer(kafka: KafkaConnection) -> EventProducer:
    return EventProducer(kafka, **{"compression.type": "none"})


def _ingest(kafka: KafkaConnection, catalog: int, rate: float, stop: EventType) -> None:
    """Child process: offers `rate` interactions/s until stopped."""
    producer, draw, pacer = _producer(kafka), _draw(7, catalog), Pacer(rate)
    topic = kafka.topic(INTERACTIONS)
    while not stop.is_set():
        # Sent in 5 ms ticks (what the producer's linger would batch anyway): a wake-up per
        # event made this generator take a fifth of a core from the system under test.
        due = pacer.wait_due(0.005)
        for key, value in draw.payloads([time.time()] * due):
            producer.send_raw(topic, key, value)
    producer.flush()


def _seed(kafka: KafkaConnection, catalog: int) -> None:
    producer, draw = _producer(kafka), _draw(3, catalog)
    for n in range(catalog):
        item = CatalogItem(item_id=f"i{n}", genres=[f"c{n % CATEGORIES}"],
                           release_year=1950 + n % 75, updated_at=time.time())
        producer.send(kafka.topic(CATALOG_ITEMS), item.item_id, item)
    start = time.time() - SEED_EVENTS * 0.05
    for key, value in draw.payloads([start + n * 0.05 for n in range(SEED_EVENTS)]):
        producer.send_raw(kafka.topic(INTERACTIONS), key, value)
    producer.flush(120)


def _store_model(root: Path, catalog: int) -> None:
    import torch

    from models.session_checkpoint import save_session_model
    from models.session_config import SessionTransformerConfig
    from models.session_transformer import SessionTransformer
    from models.store import ModelStore

    torch.manual_seed(0)
    model = SessionTransformer(catalog, SessionTransformerConfig(dim=64, layers=2, max_len=50))
    save_session_model(ModelStore(root), MODEL, "1.0", model, [f"i{n}" for n in range(catalog)])


@dataclass
class Tracker:
    """Send and receive times by request id (perf_counter seconds)."""

    sent: dict[str, float] = field(default_factory=dict)
    received: dict[str, float] = field(default_factory=dict)
    errors: int = 0
    strategies: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _consume(consumer: Consumer, tracker: Tracker, stop: threading.Event) -> None:
    while not stop.is_set():
        message = consumer.poll(0.05)
        if message is None or message.error() is not None:
            continue
        now = time.perf_counter()
        response = decode(RecommendationResponse, message.value())
        with tracker.lock:
            tracker.received.setdefault(response.request_id, now)
            tracker.errors += response.status == "error"
            tracker.strategies[response.strategy] = tracker.strategies.get(response.strategy, 0) + 1


def _responses_consumer(kafka: KafkaConnection) -> Consumer:
    consumer = Consumer(
        {
            **kafka.client_config(),
            "group.id": f"bench-serve-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    topic = kafka.topic(REC_RESPONSES)
    consumer.assign([TopicPartition(topic, p, -2) for p in range(4)])  # -2: from the start
    return consumer


def _request(rng: np.random.Generator, n: int) -> RecommendationRequest:
    user = f"new{n}" if rng.random() < COLD_SHARE else f"u{int(rng.integers(USERS))}"
    return RecommendationRequest(
        request_id=uuid.uuid4().hex, user_id=user, session_id=f"{user}-s", k=10,
        sent_at=time.time(),
    )


def _offer(
    kafka: KafkaConnection, tracker: Tracker, rate: float, seconds: float
) -> list[str]:
    """Offers `rate` requests/s for `seconds`; returns the ids sent (in order)."""
    producer = EventProducer(kafka, **{"linger.ms": 0})
    rng, pacer, topic = np.random.default_rng(int(rate)), Pacer(rate), kafka.topic(REC_REQUESTS)
    ids = []
    for n in range(int(rate * seconds)):
        pacer.wait()
        request = _request(rng, n)
        with tracker.lock:
            tracker.sent[request.request_id] = time.perf_counter()
        producer.send(topic, request.user_id, request)
        ids.append(request.request_id)
    producer.flush()
    return ids


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc): unlike latency, independent of how
    busy the shared machine is."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_now(processes: dict[str, int]) -> dict[str, float]:
    """CPU seconds so far of each process still running."""
    now = {}
    for name, pid in processes.items():
        with contextlib.suppress(OSError):
            now[name] = _cpu_seconds(pid)
    return now


def _aof_rewrites(admin: redis.Redis) -> int:
    """AOF rewrites Redis has run since it started."""
    return int(admin.info("persistence")["aof_rewrites"])


def _script_usec(admin: redis.Redis) -> float:
    """Redis's time in script calls (the feature worker's merges) since its stats were reset."""
    return float(admin.info("commandstats").get("cmdstat_fcall", {}).get("usec", 0))


def _measure(
    kafka: KafkaConnection,
    tracker: Tracker,
    rate: float,
    seconds: float,
    watched: tuple[dict[str, int], redis.Redis],
) -> dict[str, Any]:
    """Latency at `rate`, the cores each watched process (scorer included) used, and the AOF
    rewrites Redis ran meanwhile: the bench's own writes grow the AOF by a few hundred MB a
    run, and past `auto-aof-rewrite-min-size` Redis forks a rewrite beside the measurement."""
    processes, admin = watched
    rewrites_before = _aof_rewrites(admin)
    cpu_before, wall_before = _cpu_now(processes), time.perf_counter()
    ids = _offer(kafka, tracker, rate, WARMUP_S + seconds)
    measured = ids[int(rate * WARMUP_S) :]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(i not in tracker.received for i in measured[-50:]):
        time.sleep(0.1)
    with tracker.lock:
        pairs = [(tracker.sent[i], tracker.received[i]) for i in measured if i in tracker.received]
    latencies = [(r - s) * 1000 for s, r in pairs]
    answered = sum(1 for i in ids if i in tracker.received)
    cpu_after, wall = _cpu_now(processes), time.perf_counter() - wall_before
    used = {name: cpu_after[name] - cpu_before[name] for name in cpu_after if name in cpu_before}
    scoring_s = sum(cpu_s for name, cpu_s in used.items() if name.startswith("scorer"))
    cpu_ms = scoring_s * 1000 / max(answered, 1)
    span = max(r for _, r in pairs) - min(s for s, _ in pairs) if pairs else 0.0
    return {
        "p50_ms": round(percentile(latencies, 50), 2) if latencies else None,
        "p99_ms": round(percentile(latencies, 99), 2) if latencies else None,
        "achieved_rps": round(len(pairs) / span, 1) if span else 0.0,
        "requests": len(measured),
        "responses": len(pairs),
        "max_ms": round(max(latencies), 2) if latencies else None,
        "scorer_cpu_ms_per_request": round(cpu_ms, 3),
        "cpu_cores": {name: round(cpu_s / wall, 2) for name, cpu_s in used.items()},
        "load_average_1m": round(os.getloadavg()[0], 2),
        "redis_aof_rewrites": _aof_rewrites(admin) - rewrites_before,
    }


def _renice(pids: list[int], nice: int) -> None:
    """Sets the niceness of every thread of each process (Linux niceness is per thread; the
    services' own `cpu_nice` setting applies it at start, before any thread exists)."""
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(ProcessLookupError):
                os.setpriority(os.PRIO_PROCESS, int(task.name), nice)


def _scorer(kafka: KafkaConnection, key_prefix: str, store: Path, log: Path) -> tuple[
    subprocess.Popen[bytes], int
]:
    port = free_port()
    env = {
        **os.environ,
        "STREAMREC_KAFKA__TOPIC_PREFIX": kafka.topic_prefix,
        "STREAMREC_KAFKA__BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
        "STREAMREC_REDIS__USERNAME": "scorer",
        "STREAMREC_REDIS__KEY_PREFIX": key_prefix,
        "STREAMREC_MODEL_STORE": str(store),
        "STREAMREC_MODEL_NAME": MODEL,
        "STREAMREC_GROUP_ID": f"{kafka.topic_prefix}scorer",
        "STREAMREC_REQUESTS_OFFSET_RESET": "earliest",
        "STREAMREC_METRICS_PORT": str(port),
    }
    command = [sys.executable, "-m", "cli", "serve", "--no-bootstrap"]
    with open(log, "ab") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=out)
    return process, port


def _wait_ready(port: int, process: subprocess.Popen[bytes], timeout_s: float = 120) -> None:
    keys = ('streamrec_model_version_info{role="serving",version="1.0"}', "streamrec_serve_ready")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"scorer exited with {process.returncode}")
        try:
            scraped = scrape(port)
            if all(scraped.get(key) == 1.0 for key in keys):
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise TimeoutError("scorer did not load the model in time")


def _publish_model(kafka: KafkaConnection, store_root: Path) -> ModelUpdate:
    from bench.ranker import train_bench_ranker
    from models.store import ModelStore

    producer = EventProducer(kafka)
    update = ModelUpdate(
        model_name=MODEL, version="1.0", kind="full",
        sha256=ModelStore(store_root).digest(MODEL, "1.0"), published_at=time.time(),
    )
    producer.send(kafka.topic(MODEL_UPDATES), MODEL, update)
    # The ranking stage serves a ranker the gate promoted (bench.ranker), not random weights.
    ranker = train_bench_ranker(ModelStore(store_root), time.time())
    producer.send(kafka.topic(MODEL_UPDATES), ranker.model_name, ranker)
    producer.flush()
    return ranker


def _worker_windows() -> dict[str, float]:
    """The windows the feature worker batches events in (it inherits this process's
    environment, so it runs with these settings)."""
    settings = StreamSettings()
    return {
        "feature_worker_batch_within_s": settings.batch_within_s,
        "feature_worker_busy_batch_within_s": settings.busy_batch_within_s,
        "feature_worker_busy_events_per_s": settings.busy_events_per_s,
    }


def run(
    json_path: Path,
    catalog_items: int,
    rates: list[float],
    seconds: float,
    ingest_rate: float,
    ingest_nice: int = 10,
    scorers: int = 1,
    runs: int = 1,
) -> None:
    """Measures every rate twice in one run: all processes at equal CPU priority (`by_rate`),
    then with the ingest side (feature worker, event generator) at `ingest_nice`
    (`by_rate_ingest_niced`), as STREAMREC_CPU_NICE would deploy it on a shared host."""
    # The bench's own clients log in as admin; the scorer and worker it starts as their own.
    local = LocalStackSettings()  # the local stack's broker and Redis
    kafka = KafkaConnection(
        bootstrap_servers=f"{local.host}:{local.kafka_port}",
        topic_prefix=f"bench.serve.{uuid.uuid4().hex[:8]}.", sasl_username=ADMIN,
    )
    key_prefix = f"sr:bench:{uuid.uuid4().hex[:8]}:"
    create_topics(kafka)
    grant_acls(kafka)
    workdir = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    log = workdir / "children.log"
    stop_ingest = multiprocessing.get_context("spawn").Event()
    children: list[Any] = []
    from deploy.local.stack import LocalStack

    admin = LocalStack(local).redis.admin_client()
    try:
        _store_model(workdir / "models", catalog_items)
        ranker = _publish_model(kafka, workdir / "models")
        _seed(kafka, catalog_items)
        worker = WorkerProcess(
            {
                "STREAMREC_KAFKA__TOPIC_PREFIX": kafka.topic_prefix,
                "STREAMREC_KAFKA__BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
                "STREAMREC_REDIS__KEY_PREFIX": key_prefix,
                "STREAMREC_GROUP_ID": f"{kafka.topic_prefix}features",
                "STREAMREC_LOG_LEVEL": "WARNING",
            },
            log,
        ).start()
        children.append(worker)
        worker.wait_for(SEED_EVENTS, timeout_s=120)
        started = [_scorer(kafka, key_prefix, workdir / "models", log) for _ in range(scorers)]
        for scorer, scorer_port in started:
            children.append(scorer)
            _wait_ready(scorer_port, scorer)
        scorer_pids, port = [scorer.pid for scorer, _ in started], started[0][1]
        if ingest_rate > 0:  # Pacer(0) would mean unpaced
            ingest = multiprocessing.get_context("spawn").Process(
                target=_ingest, args=(kafka, catalog_items, ingest_rate, stop_ingest), daemon=True
            )
            ingest.start()
            children.append(ingest)
        ingest_pids = [worker.pid] + [
            c.pid for c in children if c is not worker and c.pid not in scorer_pids
        ]
        processes = _processes(local, scorer_pids, worker.pid, ingest_pids[1:])
        gc.freeze()  # this process imported torch: its gen-2 collections would delay timestamps
        result = _run_rates(kafka, rates, seconds, worker, (processes, port, admin), runs)
        result["setup"] = _setup(scorers)
        result.update(_worker_windows())
        if ingest_nice > 0 and ingest_rate > 0:
            _renice(ingest_pids, ingest_nice)
            niced = _run_rates(kafka, rates, seconds, worker, (processes, port, admin), runs)
            result["by_rate_ingest_niced"] = niced["by_rate"]
            result["ingest_niced_achieved_per_s"] = niced["ingest_achieved_per_s"]
            result["ingest_nice"] = ingest_nice
    finally:
        gc.unfreeze()  # frozen objects outlive exit, where triton's bindings report them leaked
        stop_ingest.set()
        _stop(children)
        _cleanup(kafka, key_prefix, admin)
        admin.close()
        shutil.rmtree(workdir, ignore_errors=True)
    result = {
        "catalog_items": catalog_items, "ingest_rate": ingest_rate, "scorers": scorers, **result,
        **_stages(result, ranker),
    }
    write_result(json_path, result, lambda c: normalised(result, c))
    _print(result)


def normalised(result: dict[str, Any], calibration: Calibration) -> dict[str, Any]:
    """Latencies as the reference machine would have measured them: serving is part Python,
    part torch, so each is divided by the geometric mean of the two workloads' slowdowns; the
    feature worker's Redis time by the Python one."""
    slow = calibration.mixed_slowdown

    def times(values: list[float | None]) -> list[float | None]:
        return [None if v is None else round(per_reference_time(v, slow), 2) for v in values]

    return {
        "by_rate": {
            rate: {"p50_ms_runs": times(f["p50_ms_runs"]), "p99_ms_runs": times(f["p99_ms_runs"])}
            for rate, f in result["by_rate"].items()
        },
        "redis_script_us_per_ingested_event": round(per_reference_time(
            result["redis_script_us_per_ingested_event"], calibration.python_slowdown
        ), 1),
        "mixed_slowdown": round(slow, 3),
    }


def _processes(
    local: LocalStackSettings, scorers: list[int], worker: int, generators: list[int]
) -> dict[str, int]:
    """Every process on the machine the bench knows: where the cores go at each rate (the
    scorers as `scorer`, `scorer2`, ...)."""
    from deploy.local.stack import LocalStack

    found = {f"scorer{n + 1 if n else ''}": pid for n, pid in enumerate(scorers)}
    found.update({"feature_worker": worker, "bench": os.getpid()})
    found.update((f"event_generator{'s' * (len(generators) > 1)}", pid) for pid in generators)
    for state in LocalStack(local).status():  # the broker and Redis, where streamrec owns them
        if state.owned_pid is not None:
            found[state.name] = state.owned_pid
    return found


def _stages(result: dict[str, Any], ranker: ModelUpdate) -> dict[str, Any]:
    """Which of the four stages ran (ranking only where answers say strategy=ranker)."""
    from models.logged_ranker import LoggedRanker

    ranked = result.get("response_strategies", {}).get("ranker", 0) > 0
    stages = ["retrieval", "filtering", *(["ranking"] if ranked else []), "ordering"]
    return {"stages": stages, "ranker": f"{LoggedRanker.name} {ranker.version}"}


def _spread(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One rate's runs: the figures of its median run by p99, with every run's p50 and p99."""
    ranked = sorted(runs, key=lambda r: math.inf if r["p99_ms"] is None else r["p99_ms"])
    return {
        **ranked[(len(ranked) - 1) // 2],
        "runs": len(runs),
        "p50_ms_runs": [r["p50_ms"] for r in runs],
        "p99_ms_runs": [r["p99_ms"] for r in runs],
    }


def _run_rates(
    kafka: KafkaConnection,
    rates: list[float],
    seconds: float,
    worker: WorkerProcess,
    watched: tuple[dict[str, int], int, redis.Redis],
    runs: int = 1,
) -> dict[str, Any]:
    """Every rate `runs` times (the rates in turn, then again), so that a passing disturbance
    shows as one slow run, not as one slow rate. `watched`: the processes whose CPU is measured
    (the scorers among them), the first scorer's metrics port (its own batch latency:
    `scorer_internal_latency_ms`) and an admin client of Redis."""
    processes, port, admin = watched
    tracker, stop = Tracker(), threading.Event()
    consumer = _responses_consumer(kafka)
    thread = threading.Thread(target=_consume, args=(consumer, tracker, stop), daemon=True)
    thread.start()
    try:
        # The group joins, caches fill: not measured.
        _measure(kafka, tracker, 20.0, 1.0, (processes, admin))
        applied_before, started = settled(worker.metrics()), time.perf_counter()
        script_before = _script_usec(admin)
        measured: dict[str, list[dict[str, Any]]] = {f"{r:g}": [] for r in rates}
        for _ in range(runs):
            for r in rates:
                measured[f"{r:g}"].append(_measure(kafka, tracker, r, seconds, (processes, admin)))
        by_rate = {rate: _spread(figures) for rate, figures in measured.items()}
        applied = settled(worker.metrics()) - applied_before
        ingested = applied / (time.perf_counter() - started)
        script_us = (_script_usec(admin) - script_before) / max(applied, 1)
        samples = scrape(port)
    finally:
        stop.set()
        thread.join(timeout=10)
        consumer.close()
    return {
        "by_rate": by_rate,
        "ingest_achieved_per_s": round(ingested, 1),
        "ingest_events_per_s": round(ingested, 1),
        "redis_script_us_per_ingested_event": round(script_us, 1),
        "scorer_internal_latency_ms": {
            "p50": round(histogram_quantile(samples, LATENCY_METRIC, 0.5) * 1000, 2),
            "p99": round(histogram_quantile(samples, LATENCY_METRIC, 0.99) * 1000, 2),
        },
        "response_strategies": tracker.strategies,
        "error_responses": tracker.errors,
        "seconds_per_rate": seconds,
    }


def _setup(scorers: int) -> str:
    return (
        f"{scorers} scorer process{'es in one consumer group' if scorers > 1 else ''} (torch 1 "
        "thread, faiss IVF nprobe 12, batch: the requests queued when it polls, <= 64), 1 "
        "feature worker process, k=10, 5% cold-start users, random-weight session Transformer "
        "dim 64 x 2 layers"
    )


def _stop(children: list[Any]) -> None:
    for child in reversed(children):
        if isinstance(child, WorkerProcess):
            child.stop()
        elif isinstance(child, subprocess.Popen):
            child.terminate()
            try:
                child.wait(30)
            except subprocess.TimeoutExpired:
                child.kill()
        else:
            child.join(timeout=10)


def _cleanup(kafka: KafkaConnection, key_prefix: str, store: redis.Redis) -> None:
    admin = AdminClient(kafka.client_config())
    topics = [kafka.topic(spec) for spec in CATALOG]
    for future in admin.delete_topics(topics).values():
        with contextlib.suppress(Exception):  # best effort: a leftover bench topic is harmless
            future.result()
    for key in store.scan_iter(match=f"{key_prefix}*", count=1000):
        store.delete(key)


def _print(result: dict[str, Any]) -> None:
    rows = [("catalog items", f"{result['catalog_items']:,}"),
            ("ingest offered / achieved", f"{result['ingest_rate']:g} / "
             f"{result['ingest_achieved_per_s']:g} events/s"),
            ("redis script us per ingested event",
             f"{result['redis_script_us_per_ingested_event']:g}")]
    for rate, figures in result["by_rate"].items():
        rows.append(_row(f"@{rate} req/s p50 / p99 ms", figures))
        if figures["runs"] > 1:
            p99s = sorted(p for p in figures["p99_ms_runs"] if p is not None)
            rows.append((f"@{rate} req/s p99 ms over {figures['runs']} runs (min / median / max)",
                         f"{p99s[0]} / {p99s[len(p99s) // 2]} / {p99s[-1]}" if p99s else "-"))
        cores = ", ".join(f"{name} {n:.2f}" for name, n in figures["cpu_cores"].items())
        rows.append((f"@{rate} req/s cores used", cores))
    for rate, figures in result.get("by_rate_ingest_niced", {}).items():
        rows.append(_row(f"@{rate} req/s, ingest at nice {result['ingest_nice']}", figures))
    print_table("bench serve (request -> response)", rows)


def _row(label: str, figures: dict[str, Any]) -> tuple[str, str]:
    return (
        label,
        f"{figures['p50_ms']} / {figures['p99_ms']} (achieved {figures['achieved_rps']}/s, "
        f"{figures['responses']}/{figures['requests']} answered, scorer CPU "
        f"{figures['scorer_cpu_ms_per_request']} ms/request"
        + (f", {n} Redis AOF rewrite(s) meanwhile)" if (n := figures["redis_aof_rewrites"])
           else ")"),
    )
