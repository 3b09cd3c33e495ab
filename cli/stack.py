"""`streamrec up | down | status`: the local Kafka + Redis stack."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from deploy.local.process import ServiceState
from deploy.local.settings import LocalStackSettings
from deploy.local.stack import LocalStack

console = Console()


def _table(states: tuple[ServiceState, ...], started: tuple[str, ...] = ()) -> Table:
    table = Table("service", "address", "state", "pid")
    for state in states:
        word = "running" if state.running else "stopped"
        if state.name in started:
            word = "started"
        if state.detail:
            word += f" ({state.detail})"
        table.add_row(state.name, state.address, word, str(state.owned_pid or "-"))
    return table


def up() -> None:
    """Start local Kafka (KRaft) and Redis if needed, wait until they answer, print addresses.
    STREAMREC_LOCAL__REDIS_CLUSTER=3 adds a 3-master Redis Cluster (waits for cluster_state:ok)."""
    settings = LocalStackSettings()
    report = LocalStack(settings).up()
    console.print(_table(report.states, report.started))
    if settings.redis_cluster:
        console.print(
            "services reach the cluster with STREAMREC_REDIS__CLUSTER=true "
            f"STREAMREC_REDIS__PORT={settings.redis_cluster_port}"
        )


def down() -> None:
    """Stop the Kafka and Redis processes that streamrec started (by pid file) and nothing else."""
    stopped = LocalStack(LocalStackSettings()).down()
    console.print(f"stopped: {', '.join(stopped) or 'nothing (none were started by streamrec)'}")


def status() -> None:
    """Report whether local Kafka and Redis answer and whether streamrec owns them."""
    states = LocalStack(LocalStackSettings()).status()
    console.print(_table(states))
    if not all(s.running for s in states):
        raise typer.Exit(code=1)


def client_config(
    principal: str = typer.Option(
        "app", help="Whose credentials: app, operator, or a service's principal."
    ),
) -> None:
    """Print the librdkafka settings (JSON, password included) a client uses to reach this
    deployment's Kafka as PRINCIPAL, from the same STREAMREC_KAFKA__* variables the services
    read and the password file `streamrec up` wrote."""
    import json

    from streams.service_settings import ServiceSettings

    kafka = ServiceSettings().kafka.as_principal(principal)
    typer.echo(json.dumps(kafka.client_config(), indent=2))


credentials_app = typer.Typer(help="The local stack's generated credentials.")


@credentials_app.command("rotate")
def rotate_credentials(
    only: list[str] = typer.Option(
        [], "--only", help="Rotate just this credential (repeatable): a Kafka principal or a "
        "Redis user; `admin` names both. Default: all."
    ),
    broker: bool = typer.Option(
        False, "--broker", help="Also the broker's own credential: restarts the local Kafka."
    ),
) -> None:
    """New random passwords for every Kafka principal (SCRAM, on the broker) and Redis ACL user
    (ACL file reloaded on every local Redis), admin included, written to the secrets folder;
    then restart the services, so that nobody stays connected with an old password."""
    from deploy.local.credentials import rotate_all

    done = rotate_all(LocalStackSettings(), only, broker)
    console.print(f"kafka: {', '.join(done.kafka) or '-'}")
    console.print(f"redis: {', '.join(done.redis) or '-'} (reloaded on "
                  f"{', '.join(done.redis_servers) or 'no running server'})")
    if done.broker_restarted:
        console.print("kafka broker: rotated, broker restarted")
    console.print("restart the services now: they read the new passwords at start")
