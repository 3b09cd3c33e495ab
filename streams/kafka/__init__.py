"""Kafka plumbing every service shares: connection, producer, consumer, dead letters, topics."""
