"""Infrastructure: local Kafka and Redis without Docker, compose, Prometheus, Grafana, and the CLI root."""
