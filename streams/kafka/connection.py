"""How a service reaches Kafka; embedded in each service's settings as `kafka`.

Secured by default: SASL/SCRAM-SHA-512 as the service's own principal (streams/kafka/principals.py).
Passwords come from the settings or, for the local stack, from the secrets folder that
`streamrec up` fills (never from the repo). A SASL setting without a principal or password fails
when the client is configured instead of connecting with less security than asked for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from schemas.topics import TopicSpec

LOCAL_SECRETS_DIR = Path(".streamrec/secrets")

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]


class KafkaCredentialsError(ValueError):
    """The settings ask for SASL but name no principal, or no password can be found for it."""


class KafkaConnection(BaseModel):
    """Connection and security; `security_protocol` says whether TLS and SASL are used."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bootstrap_servers: str = Field("127.0.0.1:9092", description="host:port[,host:port]")
    topic_prefix: str = Field(
        "",
        pattern=r"^[a-zA-Z0-9._-]{0,64}$",
        description="Prepended to every catalog topic name (isolates tests and tenants).",
    )
    security_protocol: SecurityProtocol = Field(
        "SASL_PLAINTEXT", description="SASL_SSL in production; PLAINTEXT only for a broker "
        "that authenticates nobody.",
    )
    sasl_mechanism: Literal["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"] = "SCRAM-SHA-512"
    sasl_username: str | None = Field(
        None, pattern=r"^[a-zA-Z0-9._-]{1,64}$",
        description="Kafka principal; unset, each service logs in as its own "
        "(streams/kafka/principals.py).",
    )
    sasl_password: SecretStr | None = Field(
        None, description="Falls back to <secrets_dir>/kafka-<sasl_username>."
    )
    secrets_dir: Path = LOCAL_SECRETS_DIR
    ssl_ca_location: str | None = Field(
        None, description="CA bundle that signed the broker's certificate (SSL, SASL_SSL); "
        "unset, the system's CAs."
    )
    client_id: str = Field("streamrec", description="Shown in broker logs and quotas.")
    replication_factor: int = Field(
        1, ge=1, le=32, description="Replicas of each topic `streamrec topics create` makes "
        "(3 in production; 1 for the one-broker local stack)."
    )
    min_insync_replicas: int = Field(
        1, ge=1, le=32, description="min.insync.replicas of those topics: with acks=all, a "
        "write succeeds only once this many replicas have it (2 of 3 in production)."
    )

    @model_validator(mode="after")
    def _insync_within_replicas(self) -> KafkaConnection:
        if self.min_insync_replicas > self.replication_factor:
            raise ValueError("min_insync_replicas cannot exceed replication_factor")
        return self

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    def topic(self, spec: TopicSpec | str) -> str:
        name = spec if isinstance(spec, str) else spec.name
        return f"{self.topic_prefix}{name}"

    def as_principal(self, name: str) -> KafkaConnection:
        """The same connection logged in as `name` (its password from the secrets folder unless
        it is already the principal)."""
        if name == self.sasl_username:
            return self
        return self.model_copy(update={"sasl_username": name, "sasl_password": None})

    def with_default_principal(self, name: str) -> KafkaConnection:
        """Logged in as `name` unless a principal is already set."""
        return self if self.sasl_username is not None else self.as_principal(name)

    def credentials(self) -> tuple[str, str]:
        """(principal, password) for SASL; raises KafkaCredentialsError when either is missing."""
        if self.sasl_username is None:
            raise KafkaCredentialsError(
                f"{self.security_protocol} needs a principal: set STREAMREC_KAFKA__SASL_USERNAME"
            )
        if self.sasl_password is not None:
            return self.sasl_username, self.sasl_password.get_secret_value()
        path = self.secrets_dir / f"kafka-{self.sasl_username}"
        if not path.exists():
            raise KafkaCredentialsError(
                f"no password for kafka principal {self.sasl_username}: set "
                f"STREAMREC_KAFKA__SASL_PASSWORD or run `streamrec up` (writes {path})"
            )
        return self.sasl_username, path.read_text().strip()

    def client_config(self) -> dict[str, Any]:
        """librdkafka settings common to producers, consumers and the admin client."""
        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": self.security_protocol,
            "client.id": self.client_id,
            # TCP_NODELAY, as Kafka's Java clients and the broker set it: librdkafka keeps Nagle
            # on by default, which holds a small request (a response, a fetch) back while an
            # earlier one on the same connection is unacknowledged.
            "socket.nagle.disable": True,
        }
        if self.uses_sasl:
            username, password = self.credentials()
            config["sasl.mechanism"] = self.sasl_mechanism
            config["sasl.username"] = username
            config["sasl.password"] = password
        if self.uses_tls and self.ssl_ca_location:
            config["ssl.ca.location"] = self.ssl_ca_location
        return config
