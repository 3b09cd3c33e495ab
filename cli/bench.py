"""`streamrec bench ...`: each benchmark writes JSON (kept in bench/results/) and prints a table."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Literal, cast

import typer

app = typer.Typer(help="Benchmarks; each writes JSON into bench/results/.", no_args_is_help=True)


@app.callback()
def _calibrate() -> None:
    """Every benchmark starts by timing the host's calibration workloads (bench/calibration.py)."""
    from bench.calibration import begin

    begin()


@app.command("kafka")
def kafka(
    json_path: Path = typer.Option(Path("bench/results/kafka.json"), "--json", help="Output JSON."),
    messages: int = typer.Option(200_000, min=1000, help="Messages for the throughput runs."),
    size: int = typer.Option(
        200, min=1, help="Value size in bytes (an interaction event is ~200)."
    ),
    latency_rate: float = typer.Option(2_000.0, min=1.0, help="Offered rate for the latency run."),
    latency_seconds: float = typer.Option(10.0, min=1.0),
) -> None:
    """Raw confluent-kafka produce/consume throughput and produce->consume latency on the broker."""
    from bench.kafka import run

    run(
        json_path,
        messages=messages,
        size=size,
        latency_rate=latency_rate,
        latency_seconds=latency_seconds,
    )


@app.command("aof-reload")
def aof_reload(
    json_path: Path = typer.Option(
        Path("bench/results/aof_reload.json"), "--json", help="Output JSON."
    ),
    aof_mb: int = typer.Option(
        480, min=16, help="Incremental AOF to reach before the restart (the local stack "
        "rewrites past 512 MB)."
    ),
    users: int = typer.Option(200_000, min=1, help="Distinct users of the generated events."),
    items: int = typer.Option(20_000, min=10, help="Items of the generated events."),
) -> None:
    """Redis's reload time from its AOF at the rewrite threshold, and after a rewrite."""
    from bench.aof_reload import run

    run(json_path, aof_mb=aof_mb, users=users, items=items)


@app.command("encoder")
def encoder(
    json_path: Path = typer.Option(
        Path("bench/results/encoder.json"), "--json", help="Output JSON."
    ),
    calls: int = typer.Option(300, min=20, help="Timed calls per path and batch size."),
) -> None:
    """The scorer's query encoder: CPU trace vs ONNX Runtime vs CUDA eager vs CUDA graphs."""
    from bench.encoder import run

    run(json_path, calls=calls)


@app.command("ranker")
def ranker(
    json_path: Path = typer.Option(
        Path("bench/results/ranker.json"), "--json", help="Output JSON."
    ),
    calls: int = typer.Option(200, min=20, help="Timed calls per path and figure."),
) -> None:
    """The logged DLRM ranker's training and scoring: CPU vs CUDA eager vs CUDA graphs."""
    from bench.ranker import run

    run(json_path, calls=calls)


@app.command("script")
def bench_script(
    json_path: Path = typer.Option(
        Path("bench/results/script.json"), "--json", help="Output JSON."
    ),
    events: int = typer.Option(40_000, min=4000, help="Events per traffic shape."),
) -> None:
    """Where Redis's time goes inside the feature script, per event and stage."""
    from bench.script import run

    run(json_path, events=events)


@app.command("ingest")
def bench_ingest(
    json_path: Path = typer.Option(
        Path("bench/results/ingest.json"), "--json", help="Output JSON."
    ),
    events: int = typer.Option(
        200_000, min=1000, help="Backlog drained for the throughput figure."
    ),
    rate: float = typer.Option(5_000.0, min=1.0, help="Offered events/s for the freshness run."),
    seconds: float = typer.Option(20.0, min=1.0, help="Duration of the freshness run."),
    batch: int | None = typer.Option(
        None, min=1, help="Worker batch size (records per consume and Redis pipeline); default: "
        "the worker's (STREAMREC_BATCH_MAX_EVENTS, 10,000)."
    ),
    low_rate: float = typer.Option(
        1_000.0, min=1.0, help="Offered events/s, second freshness run."
    ),
    redis_cluster: str = typer.Option(
        "", "--redis-cluster", help="Also drain the backlog into the local 3-master Redis "
        "Cluster (running: STREAMREC_LOCAL__REDIS_CLUSTER=3 streamrec up) with each of these "
        "numbers of workers, comma-separated (e.g. 1,2,4); empty skips it.",
    ),
    cluster_only: bool = typer.Option(
        False, "--cluster-only", help="Only the Redis Cluster runs, not the single Redis's.",
    ),
) -> None:
    """Sustained events/s of one feature worker, event->feature freshness, raw consume rate."""
    from bench.ingest import run

    try:
        workers = [int(n) for n in redis_cluster.split(",") if n.strip()]
    except ValueError as error:
        raise typer.BadParameter(f"--redis-cluster: {error}") from error
    if any(n < 1 for n in workers) or (cluster_only and not workers):
        raise typer.BadParameter("--redis-cluster takes worker counts of at least 1")
    run(
        json_path, events=events, rate=rate, seconds=seconds, batch=batch, low_rate=low_rate,
        cluster_workers=workers, cluster_only=cluster_only,
    )


@app.command("train")
def bench_train(
    json_path: Path = typer.Option(
        Path("bench/results/train_ml100k.json"), "--json", help="Write the bench JSON here."
    ),
    epochs: int | None = typer.Option(
        None, help="Max epochs (default: the config's; early stopping on validation)."
    ),
    time_budget_s: float = typer.Option(1200.0, help="Wall-clock cap of training."),
    threads: int = typer.Option(0, help="torch CPU threads (0 = torch default)."),
    seed: int = typer.Option(0, help="Seed."),
    convergence: bool = typer.Option(
        True, help="One process to early stopping: examples/s and time to final accuracy."
    ),
    sharded: bool = typer.Option(
        True, help="Hybrid-parallel retrain on 1 and 2 processes, batch sizes, capacity."
    ),
    sharded_epochs: int = typer.Option(3, min=1, help="Epochs of each sharded run."),
    batch_sizes: str = typer.Option("32,128,512", help="Batch sizes (sequences) to compare."),
    budget_mib: int = typer.Option(32, min=1, help="Per-process embedding budget (capacity)."),
) -> None:
    """Training throughput (examples/s), time to final accuracy and sharded scaling on ML-100K."""
    from bench.train import print_sharded, print_table, run, run_sharded

    started = time.perf_counter()
    result: dict[str, object] = {}
    if convergence:
        result = run(epochs=epochs, time_budget_s=time_budget_s, threads=threads, seed=seed)
        print_table(result)
    if sharded:
        sizes = tuple(int(b) for b in batch_sizes.split(","))
        scaling = run_sharded(sharded_epochs, sizes, budget_mib << 20, seed)
        print_sharded(scaling)
        result.update(scaling)
    result["wall_s"] = round(time.perf_counter() - started, 1)
    from bench.report import write_result

    write_result(json_path, result)


@app.command("archive")
def bench_archive(
    json_path: Path = typer.Option(
        Path("bench/results/archive.json"), "--json", help="Output JSON."
    ),
    repeats: int = typer.Option(3, min=1, help="Timed loads per path (the median is kept)."),
    workers: int = typer.Option(4, min=1, help="Archive reader threads."),
) -> None:
    """A retrain window (ML-100K) read from the Parquet archive vs replayed from Kafka."""
    from bench.archive import run

    run(json_path, repeats=repeats, workers=workers)


@app.command("monitor")
def bench_monitor(
    json_path: Path = typer.Option(
        Path("bench/results/monitor.json"), "--json", help="Output JSON."
    ),
    responses: int = typer.Option(40_000, min=1_000, help="Responses in the backlog (each with "
                                  "3 interactions; logged features for every fourth)."),
    before_ref: str = typer.Option(
        "", help="Git ref of the monitor to compare with; empty: the last before faust."
    ),
) -> None:
    """Interactions/s and responses/s one monitor worker sustains: faust and the monitor
    before it, side by side on one backlog."""
    from bench.monitor import run

    run(json_path, responses=responses, before_ref=before_ref or None)


@app.command("online")
def bench_online(
    json_path: Path = typer.Option(Path("bench/results/online.json"), "--json"),
    rate: float = typer.Option(1000.0, help="Events/s offered for the streamed second half."),
    pretrain_s: float = typer.Option(120.0, help="Budget for training the first-half model."),
) -> None:
    """ML-100K through Kafka: frozen first-half model vs the online model on the second half."""
    from bench.online import run

    run(json_path, rate=rate, pretrain_s=pretrain_s)


@app.command("serve")
def bench_serve(
    json_path: Path = typer.Option(Path("bench/results/serve.json"), "--json", help="Output JSON."),
    catalog_items: int = typer.Option(100_000, min=1000, help="Items the model retrieves from."),
    rates: str = typer.Option("100,200,500", help="Offered requests/s, comma-separated."),
    seconds: float = typer.Option(15.0, min=2.0, help="Measured seconds per rate."),
    ingest_rate: float = typer.Option(5000.0, min=0.0, help="Events/s ingested alongside."),
    ingest_nice: int = typer.Option(
        10, min=0, max=19,
        help="Second pass with the feature worker and event generator at this niceness "
        "(0: skip it).",
    ),
    scorers: int = typer.Option(
        1, min=1, max=4, help="Scorer processes in one consumer group (rec.requests has 4 "
        "partitions).",
    ),
    runs: int = typer.Option(
        1, min=1, max=50, help="Times each rate is measured (the rates in turn, then again): "
        "the JSON keeps every run's p50 and p99 and the median run's figures.",
    ),
) -> None:
    """Request -> response latency (p50/p99) of scorer processes at several offered rates."""
    from bench.serve import run

    run(
        json_path,
        catalog_items=catalog_items,
        rates=[float(r) for r in rates.split(",") if r.strip()],
        seconds=seconds,
        ingest_rate=ingest_rate,
        ingest_nice=ingest_nice,
        scorers=scorers,
        runs=runs,
    )


@app.command("drift")
def bench_drift(
    json_path: Path = typer.Option(Path("bench/results/drift.json"), "--json", help="Output JSON."),
    seeds: int = typer.Option(5, min=1, max=100, help="Synthetic streams per scenario."),
    stationary_events: int = typer.Option(
        200_000, min=10_000, help="Responses in each stationary stream."
    ),
    p_before: float = typer.Option(0.30, min=0.01, max=0.99, help="Hit probability before."),
    p_after: float = typer.Option(0.15, min=0.0, max=0.99, help="Hit probability after the shift."),
) -> None:
    """Detection delay after an abrupt KPI drop, and false alarms on a stationary stream."""
    from bench.drift import bench_drift as run

    run(json_path, seeds=seeds, stationary_events=stationary_events, p_before=p_before,
        p_after=p_after)


@app.command("live")
def bench_live(
    json_path: Path = typer.Option(Path("bench/results/live.json"), "--json", help="Output JSON."),
    interactions: Path | None = typer.Option(
        None, help="CSV with user_id,item_id,timestamp (default: ML-100K)."
    ),
    events: int | None = typer.Option(
        None, min=100, help="Events of the dataset's second half replayed live (default: all)."
    ),
    events_per_s: float = typer.Option(100.0, min=1.0, max=2000.0, help="Live replay rate."),
    request_lead_s: float = typer.Option(
        0.5, min=0.01, max=10.0, help="A request leaves this long before its event (an "
        "answer later than that counts as late)."
    ),
    user_gap_s: float = typer.Option(
        0.25, min=0.0, max=10.0, help="A user's next request leaves at least this long after "
        "their previous event, once the feature store holds it."
    ),
    publish_every_s: float = typer.Option(
        10.0, min=1.0, help="The online trainer's cadence of gated minor versions."
    ),
    pretrain_epochs: int = typer.Option(10, min=1, max=200, help="Pre-training passes."),
    seed: int = typer.Option(7),
) -> None:
    """ML-100K (or --interactions) replayed in time order through the real services on the
    local stack, each event preceded by a request, users randomized into arms: hit@10 (strict
    and window), NDCG@10, ratios with intervals over users, and the frozen arm's live/offline
    gap."""
    from bench.live.run import Options, run, settings
    from cli.demo import demo_dataset

    options = Options(interactions=interactions, events=events, events_per_s=events_per_s,
                      request_lead_s=request_lead_s, user_gap_s=user_gap_s,
                      publish_every_s=publish_every_s, pretrain_epochs=pretrain_epochs, seed=seed)
    run(json_path, options, demo_dataset(settings(options)))


@app.command("live-offline")
def bench_live_offline(
    json_path: Path = typer.Option(
        Path("bench/results/live_offline.json"), "--json", help="Output JSON."
    ),
    interactions: Path | None = typer.Option(
        None, help="CSV with user_id,item_id,timestamp (default: ML-100K)."
    ),
    start_share: float = typer.Option(0.5, min=0.01, max=0.99, help="Pre-training share."),
    end_share: float = typer.Option(1.0, min=0.02, max=1.0, help="Replay up to this share."),
    rate: float = typer.Option(
        80.0, min=0.0, help="Replay events/s (the live run's rate); 0 keeps dataset times."
    ),
    lead_s: float = typer.Option(0.5, min=0.0, help="A request leaves this long before its event."),
    pipeline_s: float = typer.Option(0.05, min=0.0, help="Event to features in the store."),
    load_s: float = typer.Option(1.0, min=0.0, help="Publication to serving."),
    user_gap_s: float | None = typer.Option(
        None, min=0.0, help="User-paced: a user's next request waits this long after their "
        "previous event was published (default: every request at its slot).",
    ),
    restamp_history: bool = typer.Option(
        False, help="Pre-training events restamped at the replay rate (the clock served on)."
    ),
    exclude_history: bool = typer.Option(
        False, help="Diagnostic: requests exclude every item of the user's history."
    ),
    serve: list[str] = typer.Option([], help="ServeSettings field=value (JSON values)."),
    train: list[str] = typer.Option(
        [], help="TrainSettings field=value; model.<field>=value for the session model."
    ),
    popularity_bucket_s: float | None = typer.Option(
        None, help="Popularity bucket (default: 60 s on a replay clock, an hour otherwise)."
    ),
    shift_at: float | None = typer.Option(
        None, min=0.0, max=1.0, help="The demo's preference shift from this share of the "
        "replayed events on (item ids permuted).",
    ),
    shift_items: float = typer.Option(1.0, min=0.0, max=1.0, help="Share of ids permuted."),
    ranker_labels: str = typer.Option(
        "monitor", help="monitor: the monitor's grades; next: the next item only; window: "
        "every item of the window (no attribution to what was shown)."
    ),
    attribution_window_s: float | None = typer.Option(
        None, help="Window hits (default: 4 s on a replay clock, 30 minutes otherwise)."
    ),
    pretrain_budget_s: float = typer.Option(1200.0, min=1.0, help="Pre-training cap."),
    publish_every_s: float = typer.Option(5.0, min=0.1, help="The trainer's publication cadence."),
    learn: bool = typer.Option(True, help="Online learning on (off: the model arm is frozen)."),
    arms: str = typer.Option("popularity,frozen,model,ranker", help="Arms, comma-separated."),
    salt: str = typer.Option("bench-live", help="Salt of the users' arm assignment."),
    seed: int = typer.Option(0),
    pretrain_cache: Path | None = typer.Option(
        Path(".streamrec/live_offline"), help="Reuse pre-trained versions kept here."
    ),
) -> None:
    """Offline replay in time order: each event preceded by a request every arm answers from
    the state of that moment; hit@10 (strict and window), NDCG@10 and ratios per arm."""
    from bench.live_offline.run import Options, run
    from bench.live_offline.timeline import Clock

    if ranker_labels not in ("monitor", "next", "window"):
        raise typer.BadParameter("--ranker-labels is monitor, next or window")
    clock = Clock(rate=rate or None, lead_s=lead_s, pipeline_s=pipeline_s, load_s=load_s,
                  user_gap_s=user_gap_s, restamp_history=restamp_history)
    run(json_path, Options(
        interactions=interactions, start_share=start_share, end_share=end_share, clock=clock,
        popularity_bucket_s=popularity_bucket_s, attribution_window_s=attribution_window_s,
        pretrain_budget_s=pretrain_budget_s, publish_every_s=publish_every_s, learn=learn,
        arms=tuple(a.strip() for a in arms.split(",") if a.strip()), salt=salt, seed=seed,
        pretrain_cache=pretrain_cache, exclude_history=exclude_history,
        serve=_assignments(serve), train=_assignments(train), shift_at=shift_at,
        shift_items=shift_items,
        ranker_labels=cast(Literal["monitor", "next", "window"], ranker_labels),
    ))


def _assignments(pairs: list[str]) -> dict[str, object]:
    """`name=value` pairs; a value is read as JSON when it is JSON, as text otherwise."""
    out: dict[str, object] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or not name:
            raise typer.BadParameter(f"expected name=value, got {pair!r}")
        try:
            out[name.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            out[name.strip()] = raw
    return out
