"""The scorer's four stages for one micro-batch: retrieval -> filtering -> ranking -> ordering.

Pure request/response logic over small boundaries (the feature reader, the routing snapshot,
the pinned versions, the published ranker, the item catalog); Kafka lives in
serving/service.py. A batch costs one feature round trip, which settles each request's
exclusions, experiment arm and route (serving/batch.py); then each stage runs once for the
whole batch, in order:

1. retrieval (serving/stages/retrieval.py): the policy that answers each request (its arm's;
   cold start is the popularity policy) and its candidates;
2. filtering (serving/stages/filtering.py): everything that may be shown passes here, once;
3. ranking (serving/stages/ranking.py): the order of the allowed candidates and the vectors
   logged with the answer;
4. ordering (serving/stages/ordering.py): backfill, new-item places, business rules, the
   response.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from models.item_content import ItemContent
from schemas.recommendations import RecommendationRequest
from serving.batch import Batch
from serving.experiment import Experiment, ExperimentArm
from serving.feature_log import PublishedRanker, no_content
from serving.features import FeatureReader, StateArrays
from serving.model_bundle import IntArray
from serving.registry import Deployment, Routing
from serving.rules import BusinessRules
from serving.stages.filtering import Filtering
from serving.stages.ordering import Answer, Ordering
from serving.stages.ranking import Ranking
from serving.stages.retrieval import Retrieval


class ItemMetadata(Protocol):
    """What the scorer asks of the item catalog (serving.item_catalog.ItemCatalog)."""

    def content(self, known: Mapping[str, int], indices: IntArray) -> ItemContent:
        """Genres and release years of a version's items (`known`: its item index), row j + 1
        for `indices[j]`."""
        ...

    def new_items(self, known: Mapping[str, int], history: Sequence[str], n: int) -> list[str]:
        """Up to n items a version (its item index) does not know, best match with the user's
        item history first."""
        ...


class Scorer:
    def __init__(
        self,
        reader: FeatureReader,
        routing: Callable[[], Routing],
        rules: BusinessRules,
        candidates: int = 300,
        history_length: int = 50,
        clock: Callable[[], float] = time.time,
        logged_candidates: int = 100,
        ranker: Callable[[], PublishedRanker | None] = lambda: None,
        item_states: Callable[[Sequence[str]], StateArrays] | None = None,
        catalog: ItemMetadata | None = None,
        new_item_slots: int = 0,
        experiment: Experiment | None = None,
        pinned: Callable[[], Mapping[str, Deployment]] = dict,
    ) -> None:
        """`rules`: the configured ones (a rules document in Redis replaces them); `ranker`:
        the gate's current ranker, one snapshot per batch; `item_states`: the candidates' item
        states for the ranking stage (the scorer service passes its in-memory table's lookup;
        by default they are read per batch); `catalog`: item metadata, the ranking stage's
        content features and the items a version does not know (without one, no item has
        content and no answer gets new items); `new_item_slots`: last places of a model
        answer given to those; `experiment`: the configured one (an experiment document in
        Redis replaces it); `pinned`: the loaded versions frozen arms pin, by version."""
        self._reader = reader
        self._routing = routing
        self._rules = rules
        self._experiment = experiment or Experiment()
        self._pinned = pinned
        self._clock = clock
        self._ranker = ranker if logged_candidates else lambda: None
        slots = new_item_slots if catalog is not None else 0
        self.retrieval = Retrieval(
            reader.categories, candidates, history_length, logged_candidates,
            catalog.new_items if catalog is not None else None, slots,
        )
        self.filtering = Filtering(reader.categories)
        self.ranking = Ranking(
            item_states or reader.item_states,
            catalog.content if catalog is not None else no_content,
            logged_candidates,
        )
        self.ordering = Ordering(clock, slots)

    def score_batch(self, requests: Sequence[RecommendationRequest]) -> list[Answer]:
        batch = self._batch(requests)
        retrieved = self.retrieval.retrieve(batch)
        allowed = self.filtering.allow(batch, retrieved)
        ranked = self.ranking.rank(batch, allowed)
        return self.ordering.answer(batch, ranked)

    def experiment(self) -> Experiment:
        """The experiment in force now."""
        return self._reader.config.experiment or self._experiment

    def arm(self, user_id: str) -> tuple[Experiment, ExperimentArm]:
        """The experiment in force and the user's arm in it (for answers no batch gave)."""
        experiment = self.experiment()
        return experiment, experiment.assign(user_id)

    def _batch(self, requests: Sequence[RecommendationRequest]) -> Batch:
        features = self._reader.read(requests)
        config = features.config
        return Batch.of(
            requests, features, config.rules or self._rules,
            config.experiment or self._experiment, self._routing(), self._pinned(),
            self._ranker(), self._clock(),
        )
