from __future__ import annotations

import numpy as np
from prometheus_client import CollectorRegistry, Histogram

from streams.feature_worker.metrics import BatchHistogram

BUCKETS = (0.001, 0.01, 0.1, 1.0, 10.0)


def _samples(registry: CollectorRegistry) -> dict[tuple[str, str], float]:
    return {
        (s.name, s.labels.get("le", "")): s.value
        for family in registry.collect()
        for s in family.samples
        if not s.name.endswith("_created")
    }


def test_a_batch_observed_at_once_exposes_what_observing_each_value_does() -> None:
    # Values on the bounds too: a value equal to a bound counts in that bound's bucket.
    values = [0.0, 0.001, 0.0011, 0.01, 0.05, 0.1, 0.99, 1.0, 9.0, 10.0, 11.0, 500.0]
    one_by_one, batched = CollectorRegistry(), CollectorRegistry()
    histogram = Histogram("lag_seconds", "lag", buckets=BUCKETS, registry=one_by_one)
    for value in values:
        histogram.observe(value)
    batch = BatchHistogram("lag_seconds", "lag", BUCKETS, batched)
    batch.observe_many(np.array(values[:5]))
    batch.observe_many(np.array(values[5:]))
    batch.observe_many(np.array([], dtype=np.float64))
    assert _samples(batched) == _samples(one_by_one)
