"""Apache Kafka in KRaft combined mode (broker + controller), run from its Maven Central jars.

Secured as a production cluster is: clients authenticate with SASL/SCRAM-SHA-512 (on `kafka_port`,
and over TLS with a local CA on `tls_port`) and the standard
authorizer denies whatever no ACL allows (streams/kafka/principals.py, streams/kafka/acls.py).
The controller listener is internal (the broker's own connections only) and authenticates the
broker with SASL/PLAIN: SCRAM credentials live in the metadata the controller serves, so the
controller cannot use them itself.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import shutil
import subprocess
import time
import uuid
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialUpsertion,
)

from deploy.local.kafka_credentials import ITERATIONS, MECHANISM, ensure_passwords, format_arguments
from deploy.local.kafka_tls import LocalCertificates
from deploy.local.process import (
    ServiceState,
    exited,
    owned_pid,
    port_open,
    start_detached,
    stop_pid,
)
from deploy.local.settings import LocalStackSettings
from streams.kafka.connection import KafkaConnection
from streams.kafka.principals import ADMIN, BROKER, SUPER_USERS

logger = logging.getLogger(__name__)

MAIN_CLASS = "kafka.Kafka"
STORAGE_TOOL = "kafka.tools.StorageTool"
SECURED_STAMP = ".streamrec-scram"
"""Marks a log dir formatted with the SCRAM credentials (an older, unsecured one has none)."""


class LocalKafka:
    def __init__(self, settings: LocalStackSettings) -> None:
        self.s = settings
        self.dir = settings.kafka_dir
        self.libs = self.dir / "libs"
        self.data = self.dir / "data"
        self.pid_file = self.dir / "kafka.pid"
        self.log_file = self.dir / "logs" / "server.out"
        self.certificates = LocalCertificates(settings.kafka_tls_dir, settings.host)

    @property
    def address(self) -> str:
        return f"{self.s.host}:{self.s.kafka_port}"

    def ensure_jars(self) -> None:
        """Resolve the pinned broker and its dependencies with Maven (once; cached in ~/.m2)."""
        stamp = self.libs / ".pom-sha256"
        pom_sha = hashlib.sha256(self.s.pom.read_bytes()).hexdigest()
        if stamp.exists() and stamp.read_text() == pom_sha and any(self.libs.glob("*.jar")):
            return
        if shutil.which("mvn") is None:
            raise RuntimeError("Maven (mvn) is required to fetch the Kafka jars; install maven")
        if self.libs.exists():
            shutil.rmtree(self.libs)
        self.libs.mkdir(parents=True)
        logger.info("resolving kafka jars pom=%s", self.s.pom)
        subprocess.run(
            [
                "mvn",
                "-q",
                "-B",
                "-f",
                str(self.s.pom),
                "dependency:copy-dependencies",
                f"-DoutputDirectory={self.libs.resolve()}",
                "-DincludeScope=runtime",
            ],
            check=True,
        )
        stamp.write_text(pom_sha)

    @property
    def tls_address(self) -> str:
        return f"{self.s.host}:{self.s.tls_port}"

    def admin_connection(self) -> KafkaConnection:
        """The `admin` super user: creates topics, ACLs and credentials."""
        return KafkaConnection(
            bootstrap_servers=self.address,
            secrets_dir=self.s.secrets_dir.resolve(),
            sasl_username=ADMIN,
        )

    def _security_lines(self, passwords: dict[str, str]) -> list[str]:
        broker = passwords[BROKER]
        scram_login = (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{BROKER}" password="{broker}";'
        )
        return [
            f"sasl.enabled.mechanisms={MECHANISM}",
            f"sasl.mechanism.inter.broker.protocol={MECHANISM}",
            f"listener.name.clients.scram-sha-512.sasl.jaas.config={scram_login}",
            f"listener.name.clients_tls.scram-sha-512.sasl.jaas.config={scram_login}",
            *self.certificates.server_properties(),
            "sasl.mechanism.controller.protocol=PLAIN",
            "listener.name.controller.sasl.enabled.mechanisms=PLAIN",
            "listener.name.controller.plain.sasl.jaas.config="
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="{BROKER}" password="{broker}" user_{BROKER}="{broker}";',
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found=false",
            "super.users=" + ";".join(f"User:{name}" for name in SUPER_USERS),
        ]

    def _write_config(self, passwords: dict[str, str]) -> Path:
        s = self.s
        config = self.dir / "server.properties"
        # It holds the broker's password: readable by its owner only, from before it is written.
        config.touch(mode=0o600)
        config.chmod(0o600)
        config.write_text(
            "\n".join(
                [
                    "process.roles=broker,controller",
                    "node.id=1",
                    f"controller.quorum.voters=1@{s.host}:{s.kafka_controller_port}",
                    f"listeners=CLIENTS://{self.address},CLIENTS_TLS://{self.tls_address},"
                    f"CONTROLLER://{s.host}:{s.kafka_controller_port}",
                    f"advertised.listeners=CLIENTS://{self.address},"
                    f"CLIENTS_TLS://{self.tls_address}",
                    "controller.listener.names=CONTROLLER",
                    "listener.security.protocol.map=CLIENTS:SASL_PLAINTEXT,"
                    "CLIENTS_TLS:SASL_SSL,CONTROLLER:SASL_PLAINTEXT",
                    "inter.broker.listener.name=CLIENTS",
                    *self._security_lines(passwords),
                    f"log.dirs={self.data.resolve()}",
                    f"num.partitions={s.kafka_partitions_default}",
                    "offsets.topic.replication.factor=1",
                    "offsets.topic.num.partitions=8",
                    "transaction.state.log.replication.factor=1",
                    "transaction.state.log.min.isr=1",
                    "share.coordinator.state.topic.replication.factor=1",
                    "share.coordinator.state.topic.min.isr=1",
                    # Single node: no reason to delay the first rebalance of a new group.
                    "group.initial.rebalance.delay.ms=0",
                    # Topics come from the catalog (`streamrec topics create`), never by accident.
                    "auto.create.topics.enable=false",
                    f"num.network.threads={s.kafka_network_threads}",
                    f"num.io.threads={s.kafka_io_threads}",
                    "log.retention.check.interval.ms=60000",
                    "",
                ]
            )
        )
        log4j = self.dir / "log4j2.properties"
        log4j.write_text(
            "\n".join(
                [
                    "status = warn",
                    "appender.out.type = Console",
                    "appender.out.name = out",
                    "appender.out.layout.type = PatternLayout",
                    "appender.out.layout.pattern = [%d] %p %m (%c)%n",
                    "rootLogger.level = INFO",
                    "rootLogger.appenderRef.out.ref = out",
                    "logger.kafka.name = kafka",
                    "logger.kafka.level = WARN",
                    "logger.state.name = state.change.logger",
                    "logger.state.level = WARN",
                    "",
                ]
            )
        )
        return config

    def _java(self, *args: str) -> list[str]:
        java = shutil.which("java")
        if java is None:
            raise RuntimeError("a JDK (java 17+) is required to run Kafka")
        return [java, "-cp", f"{self.libs.resolve()}/*", *args]

    def _format_storage(self, config: Path, passwords: dict[str, str]) -> None:
        # Formatted once: meta.properties marks a formatted log dir; reformatting would lose data.
        if (self.data / "meta.properties").exists():
            if not (self.data / SECURED_STAMP).exists():
                raise RuntimeError(
                    f"{self.data} was formatted before Kafka required SASL and holds no "
                    f"credentials: remove it (its topics are lost) and run `streamrec up` again"
                )
            return
        self.data.mkdir(parents=True, exist_ok=True)
        cluster_id = _new_cluster_id()
        subprocess.run(
            self._java(
                STORAGE_TOOL, "format", "-t", cluster_id, "-c", str(config),
                *format_arguments(passwords),
            ),
            check=True,
            stdout=subprocess.DEVNULL,
        )
        (self.data / SECURED_STAMP).write_text(f"{MECHANISM}\n")

    def state(self) -> ServiceState:
        pid = owned_pid(self.pid_file, MAIN_CLASS)
        running = port_open(self.s.host, self.s.kafka_port)
        detail = "" if pid or not running else "answering, but not started by streamrec"
        return ServiceState("kafka", self.address, running, pid, detail)

    def start(self) -> bool:
        """Start unless something already answers; True when this call started it."""
        if self.state().running:
            return False
        self.ensure_jars()
        self.dir.mkdir(parents=True, exist_ok=True)
        passwords = ensure_passwords(self.s.secrets_dir)
        self.certificates.ensure()
        config = self._write_config(passwords)
        self._format_storage(config, passwords)
        heap = f"{self.s.kafka_heap_mb}m"
        argv = self._java(
            # Kafka's own launcher flags (a fixed-size heap, G1, marking started early) with two
            # changes for the broker's young pauses, its largest stall on a shared small host.
            # What survives a young collection here lives on (the request metrics' reservoirs),
            # so copying it between survivor spaces up to 15 times is wasted: tenured at its first
            # survival it is copied once. And an 8 ms pause goal, because G1 sizes eden to spend
            # the whole goal (docs/operations.md, the local stack).
            f"-Xms{heap}",
            f"-Xmx{heap}",
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=8",
            "-XX:MaxTenuringThreshold=1",
            "-XX:InitiatingHeapOccupancyPercent=35",
            "-XX:+ExplicitGCInvokesConcurrent",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={(self.dir / 'log4j2.properties').resolve()}",
            MAIN_CLASS,
            str(config.resolve()),
        )
        start_detached(argv, self.log_file, self.pid_file)
        return True

    def wait_healthy(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        # The port first: librdkafka logs every refused connection, so ask only once it listens.
        while not port_open(self.s.host, self.s.kafka_port):
            if exited(self.pid_file):
                raise RuntimeError(f"kafka exited during start; see {self.log_file}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"kafka not listening after {timeout_s}s; see {self.log_file}")
            time.sleep(0.3)
        admin = AdminClient({**self.admin_connection().client_config(), "socket.timeout.ms": 2000})
        last_error = ""
        while time.monotonic() < deadline:
            try:
                if admin.list_topics(timeout=2).brokers:
                    return
            except KafkaException as exc:
                last_error = str(exc)
            time.sleep(0.5)
        raise TimeoutError(
            f"kafka not healthy after {timeout_s}s ({last_error}); see {self.log_file} (a broker "
            f"started before Kafka required SASL answers no login: `streamrec down`, then `up`)"
        )

    def ensure_credentials(self, timeout_s: float = 30.0) -> None:
        """Sets every principal's SCRAM credential to its password file (files that were missing
        get new passwords): a principal added since the format, or a rotated one, can log in."""
        passwords = ensure_passwords(self.s.secrets_dir)
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, ITERATIONS)
        upserts: list[UserScramCredentialAlteration] = [
            UserScramCredentialUpsertion(name, info, password.encode())
            for name, password in passwords.items()
            if name != ADMIN  # its own login; rotated as docs/operations.md says
        ]
        admin = AdminClient(self.admin_connection().client_config())
        for future in admin.alter_user_scram_credentials(
            upserts, request_timeout=timeout_s
        ).values():
            future.result()

    def stop(self) -> bool:
        pid = owned_pid(self.pid_file, MAIN_CLASS)
        if pid is None:
            return False
        stop_pid(pid, self.pid_file, grace_s=60)
        return True


def _new_cluster_id() -> str:
    """16 random bytes in URL-safe base64 without padding, as Kafka's own ``Uuid.randomUuid``.

    Like Kafka, never one that starts with "-": the storage tool's argument parser would read it
    as an option and refuse to format (one id in 32 did).
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id
