"""Stream processing: shared Kafka plumbing, feature workers, monitor, drift (DESIGN.md §3, §7)."""
