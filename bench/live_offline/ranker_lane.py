"""The published ranker's path, replayed: log, wait and label, train and gate, serve.

The ranker arm's answers log their ranking-stage vectors (the scorer's `ServedFeatures`); the
monitor's windowed join (streams.monitor.join, without its Kafka and faust transport) grades
every logged candidate by the user's interactions within the attribution window, attributing
each interaction as the monitor does;
closed examples reach the online trainer's ranker training (online_trainer.ranker_training:
held-back lists, partial fits, the gate) one micro-batch at a time; a promoted version is loaded
as the scorer's ranker slot loads it and re-orders the arm's answers from `load_s` after.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from models.store import ModelStore
from online_trainer.ranker_training import RankerTraining
from online_trainer.settings import TrainSettings
from schemas import EventContext, EventType, InteractionEvent
from schemas.ranker_examples import RankerExample
from serving.feature_log import PublishedRanker
from serving.ranker_slot import load_ranker
from serving.stages.ordering import Answer
from streams.monitor.join import AnswerJoin

_MAX_PENDING = 1_000_000
"""The replay bounds nothing: every answer waits for its whole window."""
_K = 1
"""The join's KPI cut-off: the lane adds no responses, so no KPI outcome is computed."""


@dataclass
class RankerLane:
    store_dir: Path
    settings: TrainSettings
    window_s: float
    lateness_s: float
    load_s: float
    labels: Literal["monitor", "next", "window"] = "monitor"
    """`monitor`: the monitor's grades (each interaction within the window labels one answer:
    the one it names, else the newest that logged the item); diagnostics: `next`, the
    request's own next item graded 1; `window`, every item the user interacted with within the
    window graded 1."""
    join: AnswerJoin = field(init=False)
    training: RankerTraining = field(init=False)
    queued: list[RankerExample] = field(default_factory=list)
    published: list[tuple[float, PublishedRanker]] = field(default_factory=list)
    labelled: int = 0
    target_positives: int = 0
    """Positive grades that are the request's own next item (the strict hit's target)."""
    positives: int = 0
    _watermark: float = 0.0
    _events: int = 0
    _targets: dict[str, tuple[str, frozenset[str]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        s = self.settings
        self.join = AnswerJoin(self.window_s, _K, _MAX_PENDING)
        self.training = RankerTraining(
            ModelStore(self.store_dir), held_back=s.ranker_held_back,
            held_back_every=s.ranker_held_back_every,
            gate_every=s.ranker_gate_every, min_gain=s.ranker_min_gain,
            min_lists=s.ranker_min_lists,
        )

    def log(self, answers: Sequence[Answer],
            targets: Sequence[tuple[str, frozenset[str]]]) -> None:
        """The answers' logged vectors start waiting; `targets`: each one's next item and the
        items of its window."""
        for answer, target in zip(answers, targets, strict=True):
            if answer.features is not None:
                self.join.add_features(answer.features)
                self._targets[answer.features.request_id] = target

    def interaction(self, user: str, item: str, at: float, credited: str | None) -> None:
        """The user's event; `credited`: the request whose answer showed the item (the client
        names it, as the demo's traffic does)."""
        context = EventContext(source="recommendation", request_id=credited) if credited else None
        event = InteractionEvent(
            event_id=f"e{self._events}", user_id=user, session_id=f"{user}-live", item_id=item,
            event_type=EventType.CLICK, timestamp=at, context=context,
        )
        self._events += 1
        self._watermark = max(self._watermark, at - self.lateness_s)
        self.join.add_interaction(event, self._watermark)

    def micro_batch(self, now: float) -> None:
        """The monitor publishes what closed; the trainer's ranker loop takes one batch."""
        closed = self.join.expire(self._watermark)
        self.join.forgotten.clear()  # the monitor's state table reads it; the lane keeps none
        self.queued.extend(self._graded(c.example) for c in closed if c.example is not None)
        if not self.queued:
            return
        step = self.training.step(self.queued, now)
        self.labelled += len(self.queued)
        self.queued = []
        if step.update is not None:
            ranker = load_ranker(self.training.store, step.update)
            self.published.append((now + self.load_s, ranker))

    def _graded(self, example: RankerExample) -> RankerExample:
        target, window = self._targets.pop(example.request_id)
        self.positives += sum(1 for g in example.grades if g > 0)
        self.target_positives += sum(
            1 for c, g in zip(example.candidates, example.grades, strict=True)
            if g > 0 and c == target
        )
        if self.labels == "monitor":
            return example
        wanted = {target} if self.labels == "next" else window
        grades = [1 if c in wanted else 0 for c in example.candidates]
        return example.model_copy(update={"grades": grades})

    def current(self, now: float) -> PublishedRanker | None:
        serving = None
        for serves_from, ranker in self.published:
            if serves_from <= now:
                serving = ranker
        return serving
