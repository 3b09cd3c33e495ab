"""`streamrec bench monitor`: how many interactions and responses per second one monitor worker
sustains, the faust monitor and the one before it side by side on the same backlog.

One backlog (responses, each followed by interactions of its user, some on its items, some
views, some purchases; logged features for a share of the answers) is produced once under a
topic prefix of its own; each monitor then reads all of it as a fresh consumer group, and its
rate is the records it read over the time from its first batch to its last (start-up and group
join excluded, the same for both).

"Before" is the monitor as it was before it moved to faust (a confluent-kafka loop): the source
of `streams/` and `schemas/` at `--before-ref` (by default the parent of the commit that removed
`streams/monitor/offsets.py`, its last commit) is taken with `git archive` into a temporary
folder and run there by the same interpreter (`python -c _BEFORE`), so both run in one bench
invocation on the same machine and backlog. Without git history (a source tarball) the "before"
row is left out and says why.
"""

from __future__ import annotations

import json
import logging
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
from confluent_kafka.admin import AdminClient

from bench.report import print_table, write_result
from deploy.local.settings import LocalStackSettings
from schemas.events import EventType, InteractionEvent
from schemas.ranker_examples import ServedFeatures, encode_vectors
from schemas.recommendations import RecommendationResponse, ScoredItem
from schemas.topics import CATALOG, INTERACTIONS, REC_FEATURES, REC_RESPONSES
from streams.kafka.acls import grant_acls
from streams.kafka.admin import create_topics
from streams.kafka.connection import KafkaConnection
from streams.kafka.principals import ADMIN, MONITOR
from streams.kafka.producer import EventProducer
from streams.monitor.service import MonitorService
from streams.monitor.settings import MonitorSettings

logger = logging.getLogger(__name__)

_K = 10
_CATALOG_ITEMS = 2_000
_GIVE_UP_S = 600.0
_OLD_MONITOR_MARK = "streams/monitor/offsets.py"

# Runs inside the "before" source tree: that monitor's own poll-fold-publish-commit step.
_BEFORE = """
import json, sys, time
from streams.kafka.connection import KafkaConnection
from streams.monitor.service import MonitorService
from streams.monitor.settings import MonitorSettings
job = json.loads(sys.argv[1])
settings = MonitorSettings(kafka=KafkaConnection(**job["kafka"]), **job["settings"])
service = MonitorService(settings)
read, began, deadline = 0, None, time.monotonic() + job["give_up_s"]
while read < job["total"] and time.monotonic() < deadline:
    started = time.perf_counter()
    n = service.step()
    if n and began is None:
        began = started
    read += n
elapsed = time.perf_counter() - began if began is not None else None
service.close()
print(json.dumps({"read": read, "elapsed_s": elapsed}))
"""


def _backlog(kafka: KafkaConnection, responses: int, seed: int) -> dict[str, int]:
    """Produces the backlog; returns how many records of each kind."""
    rng = random.Random(seed)
    producer = EventProducer(kafka)
    users = max(100, responses // 20)
    at = time.time() - 3 * 3600.0
    counts = {"responses": 0, "interactions": 0, "features": 0}
    vectors = encode_vectors(np.zeros((_K, 4), dtype=np.float32))
    for n in range(responses):
        user = f"u{rng.randrange(users)}"
        items = [f"i{rng.randrange(_CATALOG_ITEMS)}" for _ in range(_K)]
        response = RecommendationResponse(
            request_id=f"r{n}", user_id=user, status="ok", model_version="v1", served_at=at,
            items=[ScoredItem(item_id=i, score=1.0) for i in items],
            experiment="bench", arm=("model", "popularity")[n % 2],
        )
        producer.send(kafka.topic(REC_RESPONSES), user, response)
        counts["responses"] += 1
        if n % 4 == 0:
            producer.send(kafka.topic(REC_FEATURES), user, ServedFeatures(
                request_id=f"r{n}", user_id=user, served_at=at, features_at=at,
                model_version="v1", feature_set="bench", n_features=4, candidates=items,
                vectors=vectors, strategy="retrieval_order", shown=items,
            ))
            counts["features"] += 1
        for j in range(3):
            kind = rng.choice((EventType.VIEW, EventType.CLICK, EventType.CLICK,
                               EventType.PURCHASE))
            item = rng.choice(items) if rng.random() < 0.3 else f"i{rng.randrange(_CATALOG_ITEMS)}"
            producer.send(kafka.topic(INTERACTIONS), user, InteractionEvent(
                event_id=f"e{n}-{j}", user_id=user, session_id=f"s-{user}", item_id=item,
                event_type=kind, timestamp=at + 1.0 + j,
            ))
            counts["interactions"] += 1
        at += 0.05
    producer.flush()
    producer.close()
    return counts


def _settings(group: str) -> dict[str, Any]:
    return {"group_id": group, "metrics_port": 0, "k": _K, "window_s": 60.0,
            "attribution_window_s": 120.0, "batch_size": 2_000, "poll_timeout_s": 0.2}


def _faust(kafka: KafkaConnection, total: int) -> dict[str, Any]:
    monitor = kafka.as_principal(MONITOR)
    settings = MonitorSettings(kafka=monitor, **_settings(f"bench-faust-{uuid.uuid4().hex[:6]}"))
    service = MonitorService(settings)
    stop = threading.Event()
    thread = threading.Thread(target=service.run, args=(stop,), daemon=True)
    thread.start()
    began = None
    deadline = time.monotonic() + _GIVE_UP_S
    while service.counters.consumed < total and time.monotonic() < deadline:
        if began is None and service.counters.consumed:
            began = time.perf_counter()
        time.sleep(0.005)
    ended = time.perf_counter()
    stop.set()
    thread.join(timeout=60)
    return {"read": service.counters.consumed,
            "elapsed_s": None if began is None else ended - began}


def _before_ref(ref: str | None) -> str:
    if ref is not None:
        return ref
    removed = subprocess.run(
        ["git", "rev-list", "-1", "HEAD", "--", _OLD_MONITOR_MARK],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    if not removed:
        raise RuntimeError(f"no commit touches {_OLD_MONITOR_MARK}")
    return f"{removed}^"


def _before(kafka: KafkaConnection, total: int, ref: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="streamrec-bench-monitor-") as folder:
        archive = subprocess.run(
            ["git", "archive", "--format=tar", ref, "streams", "schemas"],
            check=True, capture_output=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
        monitor = kafka.as_principal(MONITOR)
        job = {
            "kafka": monitor.model_dump(mode="json"),
            "settings": _settings(f"bench-before-{uuid.uuid4().hex[:6]}"),
            "total": total, "give_up_s": _GIVE_UP_S,
        }
        env = {**os.environ, "PYTHONPATH": folder}
        done = subprocess.run(
            [sys.executable, "-c", _BEFORE, json.dumps(job)], cwd=folder, env=env,
            check=True, capture_output=True, text=True,
        )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _rates(run: dict[str, Any], counts: dict[str, int]) -> dict[str, Any]:
    elapsed = run["elapsed_s"]
    complete = run["read"] >= sum(counts.values()) and elapsed
    return {
        **run,
        "interactions_per_s": round(counts["interactions"] / elapsed) if complete else None,
        "responses_per_s": round(counts["responses"] / elapsed) if complete else None,
        "records_per_s": round(run["read"] / elapsed) if elapsed else None,
    }


def run(
    json_path: Path, responses: int = 40_000, seed: int = 7, before_ref: str | None = None
) -> dict[str, Any]:
    local = LocalStackSettings()  # the local stack's broker; the bench's clients log in as admin
    kafka = KafkaConnection(
        bootstrap_servers=f"{local.host}:{local.kafka_port}", sasl_username=ADMIN,
        secrets_dir=local.secrets_dir.resolve(),
        topic_prefix=f"bench.monitor.{uuid.uuid4().hex[:8]}.",
    )
    create_topics(kafka)
    grant_acls(kafka)
    try:
        counts = _backlog(kafka, responses, seed)
        total = sum(counts.values())
        result: dict[str, Any] = {"engine": "faust", "backlog": counts}
        try:
            ref = _before_ref(before_ref)
            result["before"] = {"ref": ref, **_rates(_before(kafka, total, ref), counts)}
        except (subprocess.CalledProcessError, RuntimeError, FileNotFoundError) as exc:
            result["before"] = {"skipped": f"{type(exc).__name__}: {exc}"}
        after = _rates(_faust(kafka, total), counts)
        result["after"] = after
        result["interactions_per_s"] = after["interactions_per_s"]
        result["responses_per_s"] = after["responses_per_s"]
        before_rate = result["before"].get("interactions_per_s")
        if before_rate and after["interactions_per_s"]:
            result["after_vs_before"] = round(after["interactions_per_s"] / before_rate, 3)
    finally:
        admin = AdminClient(kafka.client_config())
        for future in admin.delete_topics([kafka.topic(s) for s in CATALOG]).values():
            future.result()
    write_result(json_path, result)
    _print(result)
    return result


def _print(result: dict[str, Any]) -> None:
    before, after = result["before"], result["after"]
    print_table("monitor: one worker on one backlog", [
        ("backlog", ", ".join(f"{k} {v:,}" for k, v in result["backlog"].items())),
        ("before interactions/s", str(before.get("interactions_per_s", before.get("skipped")))),
        ("before responses/s", str(before.get("responses_per_s"))),
        ("faust interactions/s", str(after["interactions_per_s"])),
        ("faust responses/s", str(after["responses_per_s"])),
        ("faust / before", str(result.get("after_vs_before"))),
    ])
