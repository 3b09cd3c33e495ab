"""`streamrec produce-sample`: synthetic interactions into `interactions`, with the items'
metadata into `catalog.items`."""

from __future__ import annotations

import time

import typer


def produce_sample(
    count: int = typer.Option(10_000, "--count", "-n", min=1, help="Events to publish."),
    rate: float = typer.Option(
        0.0, "--rate", "-r", min=0.0, help="Events/s; 0 = as fast as possible."
    ),
    users: int = typer.Option(2_000, min=1),
    items: int = typer.Option(5_000, min=10),
    seed: int = typer.Option(7),
    live: bool = typer.Option(
        False, help="Stamp events with the wall clock instead of simulated time."
    ),
) -> None:
    """Publish realistic synthetic interactions to `interactions` (and the metadata of every
    item to `catalog.items`)."""
    from deploy.generators.sample import SampleConfig, publish_sample
    from streams.kafka.principals import APP
    from streams.service_settings import ServiceSettings

    started = time.perf_counter()
    config = SampleConfig(users=users, items=items, seed=seed)
    kafka = ServiceSettings().kafka.with_default_principal(APP)
    topic = publish_sample(kafka, config, count, rate, live)
    elapsed = time.perf_counter() - started
    typer.echo(
        f"published {items} items' metadata and {count} events to {topic} in {elapsed:.2f}s "
        f"({count / elapsed:,.0f} events/s)"
    )
