"""How a service reaches Kafka; embedded in each service's settings as `kafka`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from schemas.topics import TopicSpec


class KafkaConnection(BaseModel):
    """Connection and security; SASL/SCRAM + TLS switch on through `security_protocol`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bootstrap_servers: str = Field("127.0.0.1:9092", description="host:port[,host:port]")
    topic_prefix: str = Field(
        "",
        pattern=r"^[a-zA-Z0-9._-]{0,64}$",
        description="Prepended to every catalog topic name (isolates tests and tenants).",
    )
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"] | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_ca_location: str | None = Field(None, description="CA bundle for TLS.")
    client_id: str = Field("streamrec", description="Shown in broker logs and quotas.")

    def topic(self, spec: TopicSpec | str) -> str:
        name = spec if isinstance(spec, str) else spec.name
        return f"{self.topic_prefix}{name}"

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
        if self.sasl_mechanism:
            config["sasl.mechanism"] = self.sasl_mechanism
            config["sasl.username"] = self.sasl_username or ""
            config["sasl.password"] = (
                self.sasl_password.get_secret_value() if self.sasl_password else ""
            )
        if self.ssl_ca_location:
            config["ssl.ca.location"] = self.ssl_ca_location
        return config
