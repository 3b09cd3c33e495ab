"""The streaming platform (Kafka plumbing, Redis connections, service settings, metrics, feature
definitions and key layout) and the two stream applications: the feature worker and the monitor."""
