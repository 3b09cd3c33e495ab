"""Feature distributions of interactions as histograms, and the training reference to compare.

Only features with a bounded set of bins are profiled (event type, device, traffic source, price
bucket), so a profile's memory is constant whatever the traffic. The trainer writes the reference
with `FeatureProfile.save` from the events it trained on; the monitor compares each sample of
live interactions with it through `psi_by_feature`.
"""

from __future__ import annotations

import bisect
import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from schemas.events import EventType
from streams.monitor.drift.psi import population_stability_index
from streams.monitor.inputs import Interaction

PRICE_EDGES: tuple[float, ...] = (1.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0)
"""Upper bounds of the price buckets; roughly logarithmic, like prices are."""
NONE_LABEL = "none"
OTHER_LABEL = "other"
FEATURES: tuple[str, ...] = ("event_type", "device", "source", "price")
_FORMAT_VERSION = 1


def price_bucket(price: float | None) -> str:
    if price is None:
        return NONE_LABEL
    index = bisect.bisect_right(PRICE_EDGES, price)
    return f"p{index}"


_TYPE_LABELS = {kind: kind.value for kind in EventType}
_NO_CONTEXT = (NONE_LABEL, NONE_LABEL, NONE_LABEL)


def interaction_labels(event: Interaction) -> tuple[str, str, str, str]:
    """An event's bin of each feature, in `FEATURES` order."""
    context = event.context
    if context is None:
        return (_TYPE_LABELS[event.event_type], *_NO_CONTEXT)
    return (
        _TYPE_LABELS[event.event_type],
        context.device or NONE_LABEL,
        context.source or NONE_LABEL,
        price_bucket(context.price),
    )


class FeatureProfile:
    """Counts per feature and bin over a sample of interactions."""

    def __init__(self) -> None:
        self._counts: dict[str, Counter[str]] = {name: Counter() for name in FEATURES}
        self._combinations: Counter[tuple[str, str, str, str]] = Counter()
        """Events per combination of bins, added since `counts` was last read: one count per
        event (the monitor profiles every interaction), folded per feature when read."""
        self.events = 0

    @property
    def counts(self) -> dict[str, Counter[str]]:
        """Per feature, events per bin."""
        if self._combinations:
            counts = self._counts
            for labels, n in self._combinations.items():
                for name, label in zip(FEATURES, labels, strict=True):
                    counts[name][label] += n
            self._combinations.clear()
        return self._counts

    @classmethod
    def of(cls, events: Iterable[Interaction]) -> FeatureProfile:
        profile = cls()
        for event in events:
            profile.add(event)
        return profile

    def add(self, event: Interaction) -> None:
        self._combinations[interaction_labels(event)] += 1
        self.events += 1

    def save(self, path: Path) -> None:
        body = {
            "format_version": _FORMAT_VERSION,
            "events": self.events,
            "features": {name: dict(sorted(c.items())) for name, c in self.counts.items()},
        }
        path.write_text(json.dumps(body, indent=2) + "\n")

    @classmethod
    def load(cls, path: Path) -> FeatureProfile:
        body = json.loads(path.read_text())
        if body.get("format_version") != _FORMAT_VERSION:
            raise ValueError(f"unsupported reference profile format in {path}")
        profile = cls()
        for name, bins in body["features"].items():
            if name not in profile.counts:
                raise ValueError(f"unknown feature {name!r} in {path}")
            profile.counts[name] = Counter({str(k): int(v) for k, v in bins.items()})
        profile.events = int(body["events"])
        return profile


def psi_by_feature(reference: FeatureProfile, current: FeatureProfile) -> dict[str, float]:
    """PSI per feature; bins the reference never saw are pooled into one `other` bin."""
    result: dict[str, float] = {}
    for name, ref_counts in reference.counts.items():
        if not ref_counts or current.events == 0:
            continue
        labels = sorted(ref_counts)
        cur_counts = current.counts[name]
        unseen = sum(n for label, n in cur_counts.items() if label not in ref_counts)
        ref_hist = [float(ref_counts[label]) for label in labels] + [0.0]
        cur_hist = [float(cur_counts[label]) for label in labels] + [float(unseen)]
        result[name] = population_stability_index(ref_hist, cur_hist)
    return result
