"""Stream processing: shared Kafka plumbing, feature workers, monitor and drift (DESIGN.md §3, §7)."""
