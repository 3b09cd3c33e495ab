"""`streamrec bench ...`: each benchmark writes JSON (kept in bench/results/) and prints a table."""

from __future__ import annotations

from pathlib import Path

import typer

from models import cli as models_cli
from online_trainer import train_cli
from serving import serve_cli
from streams import monitor_cli, stream_cli

app = typer.Typer(help="Benchmarks; each writes JSON into bench/results/.", no_args_is_help=True)


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


app.command("ingest")(stream_cli.bench_ingest)
app.command("train")(models_cli.bench_train)
app.command("online")(train_cli.bench_online)
app.command("serve")(serve_cli.bench_serve)
app.command("drift")(monitor_cli.bench_drift)
