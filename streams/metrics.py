"""Reading a service's Prometheus endpoint: for tests, benchmarks and operators' scripts."""

from __future__ import annotations


def scrape(port: int, timeout_s: float = 2.0) -> dict[str, float]:
    """A worker's current samples by name with labels (`name{label="v"}`), read over HTTP.

    For tests, benchmarks and operators' scripts; Prometheus itself scrapes the same endpoint.
    """
    from urllib.request import urlopen

    from prometheus_client.parser import text_string_to_metric_families

    with urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout_s) as response:
        text = response.read().decode()
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return samples


def histogram_quantile(samples: dict[str, float], name: str, q: float) -> float:
    """The q-quantile (0..1) of a histogram from scraped samples, interpolated inside its bucket
    as Prometheus' histogram_quantile does; NaN when the histogram is empty."""
    prefix = f'{name}_bucket{{le="'
    buckets = sorted(
        (float(key[len(prefix) : -2]), count)
        for key, count in samples.items()
        if key.startswith(prefix)
    )
    total = buckets[-1][1] if buckets else 0.0
    if total <= 0:
        return float("nan")
    rank = q * total
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if bound == float("inf"):
                return lower_bound
            share = (rank - lower_count) / (count - lower_count) if count > lower_count else 1.0
            return lower_bound + (bound - lower_bound) * share
        lower_bound, lower_count = bound, count
    return lower_bound
