"""`streamrec helm ...`: the Kubernetes chart's generated inputs."""

from __future__ import annotations

import typer
from rich.console import Console

console = Console()
helm_app = typer.Typer(help="The Helm chart (deploy/helm/streamrec).", no_args_is_help=True)


@helm_app.command("catalog")
def catalog() -> None:
    """Regenerate the chart's files/catalog.json (topics, principals and ACLs, scaled consumers,
    alert rules) from the catalog the local stack uses."""
    from deploy.chart_catalog import write

    console.print(f"wrote {write()}")
