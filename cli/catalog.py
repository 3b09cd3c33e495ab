"""`streamrec topics ...` and `streamrec schemas ...`."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

console = Console()
topics_app = typer.Typer(help="The topic catalog.", no_args_is_help=True)
schemas_app = typer.Typer(
    help="JSON Schema files generated from the contracts.", no_args_is_help=True
)


@topics_app.command("create")
def create(
    principal: str = typer.Option("admin", help="A super user: creates topics and ACLs."),
) -> None:
    """Create every catalog topic that does not exist yet and grant each principal its ACLs
    (both idempotent)."""
    from streams.kafka.acls import grant_acls
    from streams.kafka.admin import create_topics
    from streams.service_settings import ServiceSettings

    kafka = ServiceSettings().kafka.as_principal(principal)
    table = Table("topic", "partitions", "outcome")
    for outcome in create_topics(kafka):
        table.add_row(
            outcome.name, str(outcome.partitions), "created" if outcome.created else "exists"
        )
    console.print(table)
    console.print(f"acls: {grant_acls(kafka)} bindings granted")


@topics_app.command("list")
def list_catalog() -> None:
    """Print the catalog: name, key, value contract, partitions, retention, cleanup policy."""
    from schemas.topics import CATALOG

    table = Table("topic", "key", "value", "partitions", "retention_ms", "cleanup")
    for spec in CATALOG:
        table.add_row(
            spec.name,
            spec.key,
            spec.value.__name__ if spec.value else "(state rows)",
            str(spec.partitions),
            str(spec.retention_ms),
            spec.cleanup_policy,
        )
    console.print(table)


@schemas_app.command("export")
def export() -> None:
    """Regenerate schemas/jsonschema/*.json from the pydantic models."""
    from schemas.jsonschema_export import write

    for path in write():
        console.print(f"wrote {path}")
