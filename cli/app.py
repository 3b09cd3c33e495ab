"""The `streamrec` console script: the root command and its subcommands."""

from __future__ import annotations

import logging

import typer

from cli import bench, catalog, demo, evaluate, helm, sample, services, stack

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


app.command("up")(stack.up)
app.command("down")(stack.down)
app.command("status")(stack.status)
app.command("client-config")(stack.client_config)
app.add_typer(catalog.topics_app, name="topics")
app.add_typer(catalog.schemas_app, name="schemas")
app.add_typer(helm.helm_app, name="helm")
app.command("produce-sample")(sample.produce_sample)
app.command("stream")(services.stream)
app.command("train")(services.train)
app.command("retrain")(services.retrain)
app.command("archive")(services.archive)
app.command("serve")(services.serve)
app.command("monitor")(services.monitor)
app.command("eval")(evaluate.eval_command)
app.command("demo")(demo.demo)
app.add_typer(bench.app, name="bench")
