"""Infrastructure: local Kafka + Redis without Docker, compose, Prometheus, Grafana, the CLI."""
