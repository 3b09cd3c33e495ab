"""Benchmarks: each writes JSON into bench/results/ and prints a short table."""
