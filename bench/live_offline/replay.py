"""The replay loop: in slot order, batches of requests answered by every arm from the state of
their moment, then their events delivered to the trainer and the labeller.

Per batch of `batch_requests` consecutive requests (the scorer's micro-batch, a fraction of a
second at live rates): the trainer first consumes every micro-batch it had closed by the first
slot, and the batch is answered by the version serving then; the feature store's view is
advanced to each request's own visible prefix for its history, while the popularity list and
item states are those of the batch's first slot (the scorer refreshes them on its own cadence).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from bench.live_offline.arms import ReplayReader, ReplayScorer
from bench.live_offline.feature_view import FeatureView
from bench.live_offline.outcome import ArmRecord
from bench.live_offline.ranker_lane import RankerLane
from bench.live_offline.timeline import Timeline
from bench.live_offline.versions import TrainerLane
from schemas.limits import MAX_LIST_LENGTH
from schemas.recommendations import RecommendationRequest
from serving.stages.ordering import Answer


@dataclass(frozen=True)
class Targets:
    """What each request's answer is judged against."""

    window: list[frozenset[str]]
    tied: list[frozenset[str]]
    k: int = 10


@dataclass
class ReplayResult:
    records: dict[str, ArmRecord]
    history_length: npt.NDArray[np.int64]
    """Events of the user in the feature store when the request was served."""


def replay(
    timeline: Timeline,
    view: FeatureView,
    reader: ReplayReader,
    scorer: ReplayScorer,
    arms: Sequence[str],
    lane: TrainerLane,
    ranker: RankerLane | None,
    targets: Targets,
    learn: bool,
    batch_requests: int,
    logged_arm: Callable[[str], str | None],
    exclude_history: bool = False,
) -> ReplayResult:
    """Every arm answers every request (the scorer's experiment asked for one arm at a time);
    `logged_arm(user)`: the arm whose answers to the user feed the ranker path (the arm the user
    is assigned to, when it logs), as in a live experiment. `exclude_history`: each
    request also excludes the user's items older than the store's sequence (a diagnostic of
    the scorer's seen filter, which knows the newest 50)."""
    for user, item, t in zip(timeline.first_users, timeline.first_items, timeline.first_times,
                             strict=True):
        view.apply(user, item, float(t))
    records = {arm: ArmRecord() for arm in arms}
    lengths = np.zeros(len(timeline), dtype=np.int64)
    template = RecommendationRequest(request_id="q", user_id="u", k=targets.k,
                                     sent_at=float(timeline.slots[0]) if len(timeline) else 1e9)
    applied = 0
    for start in range(0, len(timeline), batch_requests):
        positions = range(start, min(start + batch_requests, len(timeline)))
        now = float(timeline.slots[start])
        lane.learn_until(timeline, now, learn)
        applied = _apply(timeline, view, applied, int(timeline.visible[start]))
        reader.popular = view.popular()
        reader.states = view.item_states()
        requests = []
        for i in positions:
            applied = _apply(timeline, view, applied, int(timeline.visible[i]))
            request_id = f"q{i}"
            reader.contexts[request_id] = context = view.context(timeline.users[i])
            lengths[i] = len(context.user_events)
            older = (view.older_items(timeline.users[i], MAX_LIST_LENGTH) if exclude_history
                     else [])
            requests.append(template.model_copy(update={
                "request_id": request_id, "user_id": timeline.users[i],
                "sent_at": float(timeline.slots[i]), "exclude_items": older,
            }))
        scorer.route(lane.serving_at(now), lane.frozen,
                     ranker.current(now) if ranker is not None else None)
        answered = {}
        for arm in arms:
            answered[arm] = answers = scorer.answer(requests, now, arm)
            for i, answer in zip(positions, answers, strict=True):
                items = [s.item_id for s in answer.response.items]
                assert answer.response.arm == arm
                records[arm].add(items, timeline.items[i], targets.window[i], targets.tied[i],
                                 answer.response.strategy, targets.k)
        if ranker is not None:
            _feed(timeline, ranker, targets, positions, answered, logged_arm)
        reader.contexts.clear()
    return ReplayResult(records, lengths)


def _feed(timeline: Timeline, ranker: RankerLane, targets: Targets, positions: range,
          answered: Mapping[str, list[Answer]], logged_arm: Callable[[str], str | None]) -> None:
    """The logged answers start waiting for labels, then the batch's events arrive, each
    naming its request when the answer the user saw showed the item (as the demo's client)."""
    seen: list[Answer | None] = []
    for k, i in enumerate(positions):
        arm = logged_arm(timeline.users[i])
        seen.append(answered[arm][k] if arm is not None and arm in answered else None)
    logged = [(i, a) for i, a in zip(positions, seen, strict=True) if a is not None]
    ranker.log([a for _, a in logged], [(timeline.items[i], targets.window[i]) for i, _ in logged])
    for i, answer in zip(positions, seen, strict=True):
        item = timeline.items[i]
        shown = answer is not None and any(s.item_id == item for s in answer.response.items)
        ranker.interaction(timeline.users[i], item, float(timeline.times[i]),
                           f"q{i}" if shown else None)
    ranker.micro_batch(float(timeline.slots[positions[-1]]))


def _apply(timeline: Timeline, view: FeatureView, applied: int, upto: int) -> int:
    for j in range(applied, upto):
        view.apply(timeline.users[j], timeline.items[j], float(timeline.times[j]))
    return max(applied, upto)
