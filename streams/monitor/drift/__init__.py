"""Drift detection on the monitor's streams: KPI change detection (ADWIN), population
stability of feature distributions (PSI) and freshness lag, turned into debounced `DriftAlert`s."""
