"""The `streamrec` console script: parses arguments and wires subcommands to the code they run.

Each package keeps its own commands in its `cli.py`; those modules import their heavy
dependencies (torch, faust) inside the command bodies so that `streamrec --help` stays instant.
"""

from __future__ import annotations

import logging

import typer

from bench import cli as bench_cli
from deploy import demo_cli, local_cli
from models import cli as models_cli
from online_trainer import train_cli
from schemas import cli as schemas_cli
from serving import serve_cli
from streams import cli as streams_cli
from streams import monitor_cli, stream_cli

app = typer.Typer(
    name="streamrec",
    help="Streaming, event-driven recommender: Kafka events -> Redis features -> models -> recs.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)


@app.callback()
def _main(
    log_level: str = typer.Option("INFO", envvar="STREAMREC_LOG_LEVEL", help="Logging level."),
) -> None:
    logging.basicConfig(
        level=log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )


app.command("up")(local_cli.up)
app.command("down")(local_cli.down)
app.command("status")(local_cli.status)
app.add_typer(schemas_cli.topics_app, name="topics")
app.add_typer(schemas_cli.schemas_app, name="schemas")
app.command("produce-sample")(streams_cli.produce_sample)
app.command("stream")(stream_cli.stream)
app.command("eval")(models_cli.eval_command)
app.command("train")(train_cli.train)
app.command("retrain")(train_cli.retrain)
app.command("serve")(serve_cli.serve)
app.command("demo")(demo_cli.demo)
app.command("monitor")(monitor_cli.monitor)
app.add_typer(bench_cli.app, name="bench")
