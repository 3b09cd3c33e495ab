"""Stream processing: Kafka plumbing shared by every service and the feature workers (DESIGN.md §3)."""
