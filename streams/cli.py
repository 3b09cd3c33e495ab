"""`streamrec produce-sample` (and, with the feature workers, `streamrec stream`)."""

from __future__ import annotations

import time

import typer
from rich.console import Console

console = Console()


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
    """Publish realistic synthetic interactions to `interactions`."""
    from schemas.topics import INTERACTIONS
    from streams.kafka.producer import EventProducer
    from streams.pacing import Pacer
    from streams.sample import SampleConfig, SampleGenerator
    from streams.service_settings import ServiceSettings

    settings = ServiceSettings()
    producer = EventProducer(settings.kafka)
    generator = SampleGenerator(SampleConfig(users=users, items=items, seed=seed), live=live)
    topic = settings.kafka.topic(INTERACTIONS)
    pacer = Pacer(rate)
    started = time.perf_counter()
    for event in generator.events(count):
        pacer.wait()
        producer.send(topic, event.user_id, event)
    producer.flush()
    elapsed = time.perf_counter() - started
    console.print(
        f"published {count} events to {topic} in {elapsed:.2f}s ({count / elapsed:,.0f}/s)"
    )
