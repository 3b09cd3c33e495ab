"""`streamrec bench script`: where Redis's time goes inside the feature function (apply.lua).

The same batches and calls the worker would send (batches of 10,000 events, entities packed into
calls of at most `call_entities` updates and `call_events` events) for generated and for
interleaved traffic, and `bench serve`'s live traffic in the batches of its 50 ms window
(`live`), each run against state the first half of the stream left behind:
- `called`: the call itself (Redis builds the keys and arguments, runs nothing of the merge);
- `parsed`: + unpacking the call's updates and reading each update into Lua tables;
- `defined`: + the fields to load;
- `folded`: + one HMGET per entity and the fold in Lua memory;
- `written`: the whole function (+ the writes);
each a variant of the library that returns at its `-- stage:` marker (the variants write
nothing, so all see the same state). `commands` is the Redis commands' own time inside
`written` (INFO commandstats of everything but FCALL); the rest of a stage is Lua. Also the
price of Lua primitives on this host (a table, a concatenated string, a `redis.call`), per
operation.
"""

from __future__ import annotations

import time
import uuid
import zlib
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from bench.ingest import interleaved
from bench.load import InteractionDraw
from bench.report import print_table, write_result
from deploy.generators.sample import SampleConfig, SampleGenerator
from schemas.events import InteractionEvent
from schemas.topics import INTERACTIONS
from schemas.wire import decode
from streams.feature_worker.batch import KeyTtls, PositionedEvent, script_header
from streams.feature_worker.fold import entity_updates
from streams.feature_worker.settings import DEFAULT_BATCH_MAX_EVENTS, StreamSettings
from streams.feature_worker.writer import (
    DEFAULT_CALL_ENTITIES,
    DEFAULT_CALL_EVENTS,
    SOURCE,
    FeatureFunction,
    function_call,
    pack_calls,
)
from streams.features.keys import FeatureKeys
from streams.redis.connection import RedisConnection, SyncClient

STAGES = ("called", "parsed", "defined", "folded", "written")
BATCH = DEFAULT_BATCH_MAX_EVENTS
_PRIMITIVES = {
    "table": "for i = 1, 100000 do local t = {a = i, b = i} end",
    "concat": "for i = 1, 100000 do local s = 'm:' .. i end",
    "redis_call": "for i = 1, 100000 do redis.call('EXISTS', KEYS[1]) end",
}


def variant(stage: str) -> FeatureFunction:
    """The function returning at the marker of `stage` ('written': the function as it is), as
    a library of its own name."""
    if stage == "written":
        return FeatureFunction.of(SOURCE)
    marker = f"-- stage: {stage}"
    assert marker in SOURCE, marker
    return FeatureFunction.of(SOURCE.replace(marker, "if true then return {0, 0} end", 1))


def load(admin: SyncClient, function: FeatureFunction) -> str:
    """Loads `function`'s library; its function's name."""
    admin.function_load(function.code, replace=True)
    return function.name


def positioned(events: Iterable[InteractionEvent]) -> list[PositionedEvent]:
    """Events laid out as Kafka would: partitioned by user, offsets in order."""
    offsets = [0] * INTERACTIONS.partitions
    out = []
    for event in events:
        partition = zlib.crc32(event.user_id.encode()) % INTERACTIONS.partitions
        out.append(PositionedEvent(partition, offsets[partition], event))
        offsets[partition] += 1
    return out


def _script_usec(admin: SyncClient) -> tuple[float, float]:
    """Time in script calls and in the commands they ran (µs, since the last reset)."""
    stats = admin.info("commandstats")
    script = float(stats.get("cmdstat_fcall", {}).get("usec", 0))
    commands = sum(
        float(v.get("usec", 0)) for k, v in stats.items()
        if k not in ("cmdstat_fcall", "cmdstat_config|resetstat")
    )
    return script, commands


def apply_batches(
    admin: SyncClient, name: str, keys: FeatureKeys, stream: list[PositionedEvent],
    call_events: int = DEFAULT_CALL_EVENTS, batch: int = BATCH,
) -> None:
    """The stream in the worker's batches of `batch` and its calls (one Redis), through the
    function `name`."""
    header = (*script_header(KeyTtls()), str(round(time.time() * 1000)))
    for start in range(0, len(stream), batch):
        pipe = admin.pipeline(transaction=False)
        updates = list(entity_updates(keys, stream[start : start + batch], call_events))
        for call in pack_calls(updates, lambda _key: 0, call_events):
            pipe.execute_command(*function_call(name, header, call))
        pipe.execute()


def _stages(
    admin: SyncClient, stream: list[PositionedEvent], batch: int = BATCH
) -> dict[str, float]:
    """µs of Redis time per event up to each stage, and the commands' own share."""
    keys = FeatureKeys(f"sr:bench:script:{uuid.uuid4().hex[:8]}:")
    half = len(stream) // 2
    try:
        apply_batches(admin, load(admin, variant("written")), keys, stream[:half], batch=batch)
        measured = stream[half:]
        result: dict[str, float] = {}
        for stage in STAGES:
            name = load(admin, variant(stage))
            admin.config_resetstat()
            apply_batches(admin, name, keys, measured, batch=batch)
            script, commands = _script_usec(admin)
            result[stage] = round(script / len(measured), 2)
        result["commands"] = round(commands / len(measured), 2)
        return result
    finally:
        for key in admin.scan_iter(match=f"{keys.prefix}*", count=1000):
            admin.delete(key)


def _primitive_us(admin: SyncClient) -> dict[str, float]:
    """µs per operation of a Lua loop of 100,000 (minus an empty loop's)."""
    def timed(body: str) -> float:
        start = time.perf_counter()
        admin.eval(f"{body} return 1", 1, "sr:bench:script:nothing")
        return time.perf_counter() - start

    empty = timed("for i = 1, 100000 do end")
    return {name: round((timed(body) - empty) / 100_000 * 1e6, 3)
            for name, body in _PRIMITIVES.items()}


LIVE_RATE = 5_000.0
LIVE_BATCH = 250
"""`bench serve`'s ingest: 5,000 events/s, in the worker's busy-stream window (50 ms)."""


def live_stream(events: int) -> list[PositionedEvent]:
    """`bench serve`'s live traffic (bench/load.py: 5,000 users, a 100,000-item catalog, 100
    categories) at LIVE_RATE, ending now: most users, sessions and items have one event in a
    batch, so an event costs Redis about four entity updates."""
    draw = InteractionDraw(np.random.default_rng(7), 100_000, 5_000, 100)
    start = time.time() - events / LIVE_RATE
    payloads = draw.payloads([start + n / LIVE_RATE for n in range(events)])
    return positioned(decode(InteractionEvent, value) for _, value in payloads)


def run(json_path: Path, events: int) -> None:
    settings = StreamSettings()
    admin = RedisConnection(
        host=settings.redis.host, port=settings.redis.port, username="admin",
        secrets_dir=settings.redis.secrets_dir,
    ).client()
    try:
        generated = positioned(SampleGenerator(SampleConfig(seed=21)).events(events))
        mixed = positioned(interleaved(
            SampleGenerator(SampleConfig(users=50_000, seed=24)).events(events), 20_000, 24
        ))
        shapes = {
            "generated": _stages(admin, generated),
            "interleaved": _stages(admin, mixed),
            "live": _stages(admin, live_stream(events), batch=LIVE_BATCH),
        }
        ops = _primitive_us(admin)
    finally:
        admin.close()
    write_result(json_path, {
        "redis_us_per_event": shapes,
        "lua_us_per_op": ops,
        "events": events,
        "batch_max_events": BATCH,
        "live_batch_events": LIVE_BATCH,
        "call_events": DEFAULT_CALL_EVENTS,
        "call_entities": DEFAULT_CALL_ENTITIES,
    })
    columns = (*STAGES, "commands")
    rows = [
        (f"{shape} redis us/event: {' / '.join(columns)}",
         " / ".join(f"{stages[c]:.1f}" for c in columns))
        for shape, stages in shapes.items()
    ]
    rows.append((f"lua us/op: {' / '.join(ops)}", " / ".join(f"{v:.2f}" for v in ops.values())))
    print_table("bench script", rows)
