"""Drift detection on the monitor's streams (DESIGN.md §7): KPI change detection (ADWIN), population
stability of feature distributions (PSI) and freshness lag, turned into debounced `DriftAlert`s."""
