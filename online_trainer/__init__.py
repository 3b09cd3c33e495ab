"""Prequential micro-batch training from Kafka with gated, versioned publication."""
