"""`streamrec bench ingest`: one feature worker (a child process, as in production) into Redis.

Three figures from one run, on the same broker and topic:
- sustained events/s: a backlog of `events` records drained by one worker, timed from its
  first applied batch to the last (group join and start-up excluded);
- raw consume/s: the same backlog read by a bare confluent-kafka consumer (the ceiling);
- freshness: live events offered at `rate`/s; record time in Kafka (stamped at send) to features
  applied, from the worker's freshness histogram (interpolated like Prometheus' histogram_quantile);
  measured again at `low_rate`/s, below saturation, to show the pipeline's own latency;
- CPU seconds per event of the worker process and of Redis while draining: unlike rates, these
  do not depend on what else the (shared, 2-core) machine is running.

- the same throughput and Redis time for interleaved traffic (many users active at once);
- Redis's own time per event running the worker's script calls (INFO commandstats).

Records are produced uncompressed: compression is not what this benchmark measures.
"""

from __future__ import annotations

import itertools
import os
import random
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

from bench.calibration import Calibration, per_reference_rate, per_reference_time
from bench.report import print_table, write_result
from deploy.generators.sample import SampleConfig, SampleGenerator
from deploy.local.redis_cluster import LocalRedisCluster
from deploy.local.settings import LocalStackSettings
from deploy.local.worker_process import APPLIED, WorkerProcess, settled
from schemas.events import InteractionEvent
from schemas.topics import CATALOG, INTERACTIONS
from streams.feature_worker.settings import StreamSettings
from streams.kafka.acls import grant_acls
from streams.kafka.admin import create_topics
from streams.kafka.connection import KafkaConnection
from streams.kafka.principals import ADMIN
from streams.kafka.producer import EventProducer
from streams.metrics import histogram_quantile
from streams.pacing import Pacer
from streams.redis.connection import RedisConnection, SyncClient

_FRESHNESS = "streamrec_stream_freshness_seconds"


def _producer(kafka: KafkaConnection) -> EventProducer:
    return EventProducer(kafka, **{"compression.type": "none"})


def _worker(
    kafka: KafkaConnection, key_prefix: str, batch: int, log: Path, **extra: str
) -> WorkerProcess:
    env = {
        "STREAMREC_KAFKA__TOPIC_PREFIX": kafka.topic_prefix,
        "STREAMREC_KAFKA__BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
        "STREAMREC_REDIS__KEY_PREFIX": key_prefix,
        "STREAMREC_GROUP_ID": f"bench-{uuid.uuid4().hex[:8]}",
        "STREAMREC_BATCH_MAX_EVENTS": str(batch),
        "STREAMREC_LOG_LEVEL": "WARNING",
        **extra,
    }
    return WorkerProcess(env, log).start()


@dataclass(frozen=True)
class _Drain:
    events_per_s: float
    worker_cpu_us_per_event: float
    redis_cpu_us_per_event: float
    """Redis is shared with other users of the machine: an upper bound of this worker's cost."""
    redis_us_per_event: float
    """Redis's own time running the worker's script calls (INFO commandstats, FCALL usec):
    what the worker takes from every other client of Redis, without the network I/O."""
    redis_us_per_call: float
    """Mean time of one script call: how long each call holds Redis (and the scorer's reads)."""


def _script_usec(admin: SyncClient) -> tuple[float, float]:
    """Redis's total time in script calls (µs) and their number."""
    stats = admin.info("commandstats")
    names = ("cmdstat_fcall",)
    return (
        sum(float(stats.get(name, {}).get("usec", 0)) for name in names),
        sum(float(stats.get(name, {}).get("calls", 0)) for name in names),
    )


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc), immune to how busy the machine is."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _redis_cpu_seconds(admin: SyncClient) -> float:
    info = admin.info("cpu")
    return float(info["used_cpu_user_main_thread"]) + float(info["used_cpu_sys_main_thread"])


POLL_MIN_S, POLL_MAX_S = 0.05, 1.0


def poll_pause_s(remaining: float, done: float, elapsed_s: float) -> float:
    """The wait before the next scrape of a draining worker's metrics: half the time the
    `remaining` records should take at the rate so far (`done` in `elapsed_s`), within 50 ms and
    1 s. A scrape renders the worker's metrics on its own CPU, so steady 50 ms polls would slow
    what they measure; halving the wait still finds the end within 50 ms."""
    if done <= 0 or elapsed_s <= 0:
        return POLL_MIN_S
    return min(POLL_MAX_S, max(POLL_MIN_S, remaining * elapsed_s / done / 2))


def _drain(worker: WorkerProcess, admin: SyncClient, total: int, timeout_s: float) -> _Drain:
    """Rate and CPU per event from the first applied sample to the last event."""
    deadline = time.monotonic() + timeout_s
    first: tuple[float, float, float, float, tuple[float, float]] | None = None
    while time.monotonic() < deadline:
        samples = worker.metrics()
        now = time.perf_counter()
        applied = samples.get(APPLIED, 0.0)
        if first is None and applied > 0:
            first = (
                now, applied, _cpu_seconds(worker.pid), _redis_cpu_seconds(admin),
                _script_usec(admin),
            )
        if settled(samples) >= total and first is not None:
            n = max(applied - first[1], 1.0)
            usec, calls = _script_usec(admin)
            return _Drain(
                n / max(now - first[0], 1e-9),
                (_cpu_seconds(worker.pid) - first[2]) / n * 1e6,
                (_redis_cpu_seconds(admin) - first[3]) / n * 1e6,
                (usec - first[4][0]) / n,
                (usec - first[4][0]) / max(calls - first[4][1], 1.0),
            )
        done = applied - first[1] if first is not None else 0.0
        time.sleep(poll_pause_s(total - settled(samples), done, now - first[0] if first else 0))
    raise TimeoutError(f"worker did not drain {total} events within {timeout_s}s")


def _raw_consume_rate(kafka: KafkaConnection, total: int) -> float:
    consumer = Consumer(
        {
            **kafka.client_config(),
            "group.id": f"bench-raw-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([kafka.topic(INTERACTIONS)])
    seen, started = 0, 0.0
    deadline = time.monotonic() + 120
    try:
        while seen < total and time.monotonic() < deadline:
            batch = consumer.consume(num_messages=10_000, timeout=1.0)
            if batch and not started:
                started = time.perf_counter()
            seen += sum(1 for m in batch if m.error() is None)
    finally:
        consumer.close()
    return seen / (time.perf_counter() - started)


def _bench_topics(settings: StreamSettings, prefix: str) -> KafkaConnection:
    """The catalog under a prefix of this run's own, with its ACLs; the bench's own clients log
    in as `admin`, the worker it starts as its own principal."""
    kafka = settings.kafka.as_principal(ADMIN).model_copy(update={"topic_prefix": prefix})
    create_topics(kafka)
    grant_acls(kafka)
    return kafka


def interleaved(events: Iterable[InteractionEvent], window: int, seed: int) -> Iterator[
    InteractionEvent
]:
    """Many users active at once, as live traffic is: the generator's sessions (one user's
    burst after another) shuffled within windows of `window` events."""
    rng = random.Random(seed)
    source = iter(events)
    while block := list(itertools.islice(source, window)):
        rng.shuffle(block)
        yield from block


def _throughput(
    settings: StreamSettings, events: int, batch: int, log: Path, mixed: bool = False
) -> tuple[_Drain, float]:
    kafka = _bench_topics(settings, f"bench.ingest.{uuid.uuid4().hex[:8]}.")
    try:
        producer = _producer(kafka)
        topic = kafka.topic(INTERACTIONS)
        generated: Iterable[InteractionEvent] = SampleGenerator(SampleConfig(seed=21)).events(
            events
        )
        if mixed:
            generated = interleaved(
                SampleGenerator(SampleConfig(users=50_000, seed=24)).events(events), 20_000, 24
            )
        for event in generated:
            producer.send(topic, event.user_id, event)
        producer.flush(120)
        worker = _worker(kafka, _key_prefix(), batch, log)
        try:
            drain = _drain(worker, _admin(settings), events, timeout_s=600)
        finally:
            worker.stop()
        return drain, _raw_consume_rate(kafka, events)
    finally:
        _delete_topics(kafka)


def _freshness(
    settings: StreamSettings, rate: float, seconds: float, batch: int, log: Path
) -> tuple[float, float, int]:
    kafka = _bench_topics(settings, f"bench.fresh.{uuid.uuid4().hex[:8]}.")
    try:
        producer = _producer(kafka)
        topic = kafka.topic(INTERACTIONS)
        worker = _worker(kafka, _key_prefix(), batch, log)
        generator = SampleGenerator(SampleConfig(seed=22), live=True)
        events = generator.events(10**9)
        try:
            # Warm-up: the clock starts once the worker owns the partitions and has applied.
            for event in itertools.islice(events, 200):
                producer.send(topic, event.user_id, event)
            producer.flush()
            before = worker.wait_for(200, timeout_s=120)
            total = int(rate * seconds)
            pacer = Pacer(rate)
            for event in itertools.islice(events, total):
                pacer.wait()
                producer.send(topic, event.user_id, event)
            producer.flush()
            after = worker.wait_for(200 + total, timeout_s=120)
        finally:
            worker.stop()
    finally:
        _delete_topics(kafka)
    delta = {k: v - before.get(k, 0.0) for k, v in after.items() if k.startswith(_FRESHNESS)}
    return (
        histogram_quantile(delta, _FRESHNESS, 0.50) * 1000,
        histogram_quantile(delta, _FRESHNESS, 0.99) * 1000,
        total,
    )


def _cluster_throughput(
    settings: StreamSettings, events: int, batch: int, workers: int, log: Path
) -> dict[str, float]:
    """Aggregate events/s of `workers` workers of one group draining a backlog into the local
    Redis Cluster (`streamrec up` with STREAMREC_LOCAL__REDIS_CLUSTER=3), from the first applied
    sample to the last event; Redis CPU summed over the masters."""
    cluster = LocalRedisCluster(LocalStackSettings(redis_cluster=3))
    cluster.wait_healthy(10)
    connection = cluster.connection("streams")
    admin = cluster.connection("admin").client()
    kafka = _bench_topics(settings, f"bench.cluster.{uuid.uuid4().hex[:8]}.")
    group = f"bench-{uuid.uuid4().hex[:8]}"
    try:
        producer = _producer(kafka)
        topic = kafka.topic(INTERACTIONS)
        for event in SampleGenerator(SampleConfig(seed=25)).events(events):
            producer.send(topic, event.user_id, event)
        producer.flush(120)
        procs = [
            _worker(
                kafka, _key_prefix(), batch, log, STREAMREC_GROUP_ID=group,
                STREAMREC_REDIS__CLUSTER="true", STREAMREC_REDIS__PORT=str(connection.port),
                STREAMREC_REDIS__SECRETS_DIR=str(connection.secrets_dir.resolve()),
            )
            for _ in range(workers)
        ]
        try:
            rate, redis_cpu = _drain_all(procs, cluster, events, timeout_s=600)
        finally:
            for worker in procs:
                worker.stop()
    finally:
        _delete_topics(kafka)
        for key in admin.scan_iter(match="sr:bench:*", count=1000):
            admin.delete(key)
    return {"workers": workers, "events_per_s": round(rate), "redis_cpu_us_per_event": redis_cpu}


def _cluster_cpu_seconds(cluster: LocalRedisCluster) -> float:
    admin = cluster.connection("admin")
    nodes = [admin.model_copy(update={"port": port, "cluster": False}) for port in cluster.ports]
    return sum(_redis_cpu_seconds(node.client()) for node in nodes)


def _drain_all(
    workers: list[WorkerProcess], cluster: LocalRedisCluster, total: int, timeout_s: float
) -> tuple[float, float]:
    deadline = time.monotonic() + timeout_s
    first: tuple[float, float, float] | None = None
    while time.monotonic() < deadline:
        samples = [w.metrics() for w in workers]
        now = time.perf_counter()
        applied = sum(s.get(APPLIED, 0.0) for s in samples)
        if first is None and applied > 0:
            first = (now, applied, _cluster_cpu_seconds(cluster))
        if sum(settled(s) for s in samples) >= total and first is not None:
            n = max(applied - first[1], 1.0)
            cpu = (_cluster_cpu_seconds(cluster) - first[2]) / n * 1e6
            return n / max(now - first[0], 1e-9), round(cpu, 1)
        done = applied - first[1] if first is not None else 0.0
        remaining = total - sum(settled(s) for s in samples)
        time.sleep(poll_pause_s(remaining, done, now - first[0] if first else 0))
    raise TimeoutError(f"workers did not drain {total} events within {timeout_s}s")


def _key_prefix() -> str:
    return f"sr:bench:{uuid.uuid4().hex[:8]}:"


def _delete_topics(kafka: KafkaConnection) -> None:
    admin = AdminClient(kafka.client_config())
    for future in admin.delete_topics([kafka.topic(s) for s in CATALOG]).values():
        future.result()


def _admin(settings: StreamSettings) -> SyncClient:
    return RedisConnection(
        host=settings.redis.host,
        port=settings.redis.port,
        username="admin",
        secrets_dir=settings.redis.secrets_dir,
    ).client()


def _delete_keys(settings: StreamSettings) -> None:
    admin = _admin(settings)
    for key in admin.scan_iter(match="sr:bench:*", count=1000):
        admin.delete(key)


def run(
    json_path: Path, events: int, rate: float, seconds: float, batch: int | None = None,
    low_rate: float = 1000.0, cluster_workers: Sequence[int] = (), cluster_only: bool = False,
) -> None:
    """The single-Redis figures (unless `cluster_only`), then the aggregate rate of each
    number of workers in `cluster_workers` on the local Redis Cluster; `batch`: the workers'
    batch size, by default their own."""
    settings = StreamSettings()
    batch = batch or settings.batch_max_events
    log = Path(".streamrec/logs/bench-ingest-worker.log")
    log.parent.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {}
    rows: list[tuple[str, str]] = []
    if not cluster_only:
        result, rows = _single_redis(settings, events, rate, seconds, batch, low_rate, log)
    scaling = [_cluster_throughput(settings, events, batch, n, log) for n in cluster_workers]
    if scaling:
        result["redis_cluster"] = scaling
        rows += [
            (f"events/s ({c['workers']} worker{'s' * (c['workers'] > 1)}, 3-master cluster)",
             f"{c['events_per_s']:,.0f}")
            for c in scaling
        ]
    result.update({
        "events": events,
        "batch_max_events": batch,
        # The worker inherits this process's environment, so it runs with these settings too.
        "call_events": settings.call_events,
        "call_entities": settings.call_entities,
        "batch_within_s": settings.batch_within_s,
        "busy_batch_within_s": settings.busy_batch_within_s,
        "busy_events_per_s": settings.busy_events_per_s,
        "partitions": INTERACTIONS.partitions,
        "compression": "none",
        "worker": "confluent-kafka batches, one pipelined round trip per batch",
    })
    figures = normalised(result, write_result(json_path, result, lambda c: normalised(result, c)))
    if figures:
        rows += [
            ("as on the reference: events/s (generated / interleaved)",
             f"{figures['events_per_s']:,} / {figures['interleaved']['events_per_s']:,}"),
            ("as on the reference: worker CPU us/event (generated / interleaved)",
             f"{figures['worker_cpu_us_per_event']} / "
             f"{figures['interleaved']['worker_cpu_us_per_event']}"),
        ]
    print_table("bench ingest", rows)


def normalised(result: dict[str, Any], calibration: Calibration) -> dict[str, Any]:
    """The single-Redis headline figures as the reference machine would have measured them:
    the worker is Python, so its rate and CPU per event scale with the Python workload's time,
    and so, as an approximation, does Redis's Lua time."""
    if "events_per_s" not in result:
        return {}
    slow = calibration.python_slowdown
    mixed = result["interleaved"]
    return {
        "events_per_s": round(per_reference_rate(result["events_per_s"], slow)),
        "worker_cpu_us_per_event": round(
            per_reference_time(result["cpu_us_per_event"]["worker"], slow), 1
        ),
        "redis_us_per_event": round(per_reference_time(result["redis_us_per_event"], slow), 2),
        "interleaved": {
            "events_per_s": round(per_reference_rate(mixed["events_per_s"], slow)),
            "worker_cpu_us_per_event": round(
                per_reference_time(mixed["worker_cpu_us_per_event"], slow), 1
            ),
            "redis_us_per_event": round(per_reference_time(mixed["redis_us_per_event"], slow), 2),
        },
        "python_slowdown": round(slow, 3),
    }


def _single_redis(
    settings: StreamSettings, events: int, rate: float, seconds: float, batch: int,
    low_rate: float, log: Path,
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """One worker on the single Redis: backlog, interleaved backlog, freshness at two rates."""
    try:
        drain, raw_per_s = _throughput(settings, events, batch, log)
        mixed, _ = _throughput(settings, events, batch, log, mixed=True)
        p50, p99, offered = _freshness(settings, rate, seconds, batch, log)
        low_p50, low_p99, _ = _freshness(settings, low_rate, seconds, batch, log)
    finally:
        _delete_keys(settings)
    result = {
        "events_per_s": round(drain.events_per_s),
        "raw_consume_per_s": round(raw_per_s),
        "offered_rate": rate,
        "freshness_ms": {"p50": round(p50, 1), "p99": round(p99, 1)},
        "freshness_ms_at_low_rate": {
            "offered_rate": low_rate,
            "p50": round(low_p50, 1),
            "p99": round(low_p99, 1),
        },
        "redis_us_per_event": round(drain.redis_us_per_event, 2),
        "redis_us_per_call": round(drain.redis_us_per_call, 1),
        "interleaved": {
            "events_per_s": round(mixed.events_per_s),
            "redis_us_per_event": round(mixed.redis_us_per_event, 2),
            "redis_us_per_call": round(mixed.redis_us_per_call, 1),
            "worker_cpu_us_per_event": round(mixed.worker_cpu_us_per_event, 1),
            "redis_cpu_us_per_event": round(mixed.redis_cpu_us_per_event, 1),
        },
        "cpu_us_per_event": {
            "worker": round(drain.worker_cpu_us_per_event, 1),
            "redis_shared_server": round(drain.redis_cpu_us_per_event, 1),
        },
        "freshness_events": offered,
    }
    rows = [
        ("events/s (1 worker, backlog)", f"{drain.events_per_s:,.0f}"),
        ("worker CPU us/event", f"{drain.worker_cpu_us_per_event:.0f}"),
        ("redis CPU us/event (shared server)", f"{drain.redis_cpu_us_per_event:.0f}"),
        ("redis script us/event (commandstats)", f"{drain.redis_us_per_event:.1f}"),
        ("interleaved events/s", f"{mixed.events_per_s:,.0f}"),
        ("interleaved redis script us/event", f"{mixed.redis_us_per_event:.1f}"),
        ("redis us per script call (generated / interleaved)",
         f"{drain.redis_us_per_call:.0f} / {mixed.redis_us_per_call:.0f}"),
        ("raw confluent consume/s", f"{raw_per_s:,.0f}"),
        (f"freshness p50 ms @{rate:.0f}/s", f"{p50:.1f}"),
        (f"freshness p99 ms @{rate:.0f}/s", f"{p99:.1f}"),
        (f"freshness p50 ms @{low_rate:.0f}/s", f"{low_p50:.1f}"),
        (f"freshness p99 ms @{low_rate:.0f}/s", f"{low_p99:.1f}"),
    ]
    return result, rows
