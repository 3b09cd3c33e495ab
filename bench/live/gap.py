"""The live/offline gap: a pinned version's served answers against the answers the same
version computes offline (no Kafka, no Redis) for the same requests, from the histories the
feature store held when each request left.

The offline side is the scorer's own code (serving.pipeline.Scorer through the offline replay's
reader, bench/live_offline/arms.py) over the feature store's definitions replayed in memory
(bench/live_offline/feature_view.py): the backfill's events, then every live event published
before the request. What differs between the two lists is skew between serving and its offline
twin: a history read late or differently, a filter, a fallback.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.live.answers import Acts, Judged, arm_of
from bench.live_offline.arms import ReplayReader, experiment, replay_scorer
from bench.live_offline.feature_view import FeatureView
from deploy.demo.traffic import Published
from schemas.hits import judge
from schemas.model_updates import ModelUpdate
from schemas.recommendations import RecommendationRequest
from serving.item_catalog import ItemCatalog
from serving.session_model import load_session_bundle
from serving.settings import ServeSettings


@dataclass(frozen=True)
class PastEvent:
    user_id: str
    item_id: str
    timestamp: float


def _merged(backfill: Iterable[PastEvent], live: Sequence[Published]) -> Iterator[PastEvent]:
    live_events = (PastEvent(p.user_id, p.item_id, p.timestamp) for p in live)
    return heapq.merge(backfill, sorted(live_events, key=lambda e: e.timestamp),
                       key=lambda e: e.timestamp)


def offline_answers(
    judged: Sequence[Judged], arm: str, update: ModelUpdate, store: Path, serve: ServeSettings,
    catalog: ItemCatalog | None, history: Iterable[PastEvent], live: Sequence[Published],
    bucket_s: float,
) -> list[tuple[Judged, tuple[str, ...]]]:
    """Each of `arm`'s answers (its policy pinned to `update`) paired with the offline list."""
    bundle = load_session_bundle(store, update.model_name, update.version, update.sha256,
                                 serve.retrieval, serve.history_length, update.published_at,
                                 serve.encoder_cpu_runtime)
    reader = ReplayReader()
    scorer = replay_scorer(reader, serve, catalog, experiment([arm], "gap", update.version))
    scorer.route(bundle, bundle, None)
    view = FeatureView(bucket_s)
    events = _merged(history, live)
    pending = next(events, None)
    out = []
    for j in sorted((j for j in judged if arm_of(j) == arm), key=lambda j: j.served.sent_at):
        s = j.served
        while pending is not None and pending.timestamp < s.sent_at:
            view.apply(pending.user_id, pending.item_id, pending.timestamp)
            pending = next(events, None)
        reader.contexts[s.request_id] = view.context(s.user_id)
        reader.popular, reader.states = view.popular(), view.item_states()
        request = RecommendationRequest(request_id=s.request_id, user_id=s.user_id, k=10,
                                        sent_at=s.sent_at)
        answer = scorer.answer([request], s.sent_at, arm)[0]
        out.append((j, tuple(i.item_id for i in answer.response.items)))
        reader.contexts.clear()
    return out


def gap(pairs: Sequence[tuple[Judged, tuple[str, ...]]], live: Sequence[Published],
        window_s: float) -> dict[str, Any]:
    """Strict hit@10 served and offline on the same requests, their relative gap, and how
    often the two lists agree (same items in the same order; same top-10 set)."""
    if not pairs:
        return {"answers": 0}
    acts = Acts(live)
    offline_hits = 0
    for j, items in pairs:
        s = j.served
        window = acts.within(s.user_id, s.sent_at, s.sent_at + window_s)
        offline_hits += judge(items, s.sent_at, window_s, window, 10, s.request_id).strict_hit
    served_hits = sum(j.strict for j, _ in pairs)
    n = len(pairs)
    return {
        "answers": n,
        "served_hit@10": round(served_hits / n, 5),
        "offline_hit@10": round(offline_hits / n, 5),
        "gap": round(1.0 - served_hits / offline_hits, 4) if offline_hits else None,
        "same_list": round(sum(j.served.items == items for j, items in pairs) / n, 4),
        "same_top10_set": round(
            sum(set(j.served.items[:10]) == set(items[:10]) for j, items in pairs) / n, 4),
    }
