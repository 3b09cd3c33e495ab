"""Prequential micro-batch training from Kafka with gated, versioned publication (DESIGN.md §5)."""
