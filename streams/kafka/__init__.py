"""Kafka plumbing every service shares: connection settings, producer, consumer, dead letters, topics."""
