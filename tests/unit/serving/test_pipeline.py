from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import numpy as np

from models.item_content import ItemContent
from serving.experiment import Experiment, ExperimentArm
from serving.feature_log import PublishedRanker
from serving.features import ServingConfig
from serving.model_bundle import FloatArray, IntArray
from serving.pipeline import Scorer
from serving.registry import Deployment, Routing
from serving.rules import BusinessRules
from tests.unit.serving.fakes import (
    ExactIndex,
    FakeReader,
    context,
    deployment,
    make_bundle,
    request,
)

POPULAR = [(f"i{n}", float(100 - n)) for n in range(1, 30)]


def scorer(reader: FakeReader, routing: Routing, rules: BusinessRules | None = None) -> Scorer:
    return Scorer(reader, lambda: routing, rules or BusinessRules(), candidates=20)


def test_the_answer_follows_the_users_latest_interaction() -> None:
    routing = Routing(deployment("1.0"))
    a = scorer(FakeReader({"u": context("u", ["i1", "i2"])}, POPULAR), routing)
    b = scorer(FakeReader({"u": context("u", ["i1", "i2", "i7"])}, POPULAR), routing)
    first = a.score_batch([request("u")])[0].response
    second = b.score_batch([request("u")])[0].response
    assert first.status == second.status == "ok"
    assert first.strategy == "model" and first.model_version == "1.0"
    assert [i.item_id for i in first.items] != [i.item_id for i in second.items]


def test_excluded_unavailable_and_seen_items_never_appear() -> None:
    routing = Routing(deployment("1.0"))
    base = scorer(FakeReader({"u": context("u", ["i3"])}, POPULAR), routing)
    top = [i.item_id for i in base.score_batch([request("u", k=6)])[0].response.items]
    reader = FakeReader({"u": context("u", ["i3"])}, POPULAR, unavailable=frozenset(top[:2]))
    answer = scorer(reader, routing).score_batch([request("u", k=6, exclude_items=top[2:4])])
    items = [i.item_id for i in answer[0].response.items]
    assert len(items) == 6
    assert not set(items) & {"i3", *top[:4]}


def test_unknown_users_get_recent_popularity_not_an_error() -> None:
    answer = scorer(FakeReader({}, POPULAR), Routing(deployment("1.0"))).score_batch(
        [request("stranger", k=3)]
    )[0]
    assert answer.response.status == "ok"
    assert answer.response.strategy == "popularity"
    assert [i.item_id for i in answer.response.items] == ["i1", "i2", "i3"]
    assert answer.outcome == "cold_start"


def test_cold_start_prefers_popular_items_of_the_sessions_categories() -> None:
    categories = {"i1": "a", "i2": "a", "i5": "b", "new": "b"}
    reader = FakeReader({"u": context("u", ["new"])}, POPULAR, categories=categories)
    answer = scorer(reader, Routing()).score_batch([request("u", k=2)])[0]
    assert answer.response.items[0].item_id == "i5"


def test_with_no_model_and_no_popularity_the_answer_is_empty_but_ok() -> None:
    answer = scorer(FakeReader(), Routing()).score_batch([request("u")])[0]
    assert answer.response.status == "ok" and answer.response.strategy == "none"
    assert answer.response.items == []


def test_canary_users_are_answered_by_the_candidate_version() -> None:
    routing = Routing(deployment("1.0"), deployment("1.1"), canary_share=1.0)
    answer = scorer(FakeReader({"u": context("u", ["i1"])}, POPULAR), routing).score_batch(
        [request("u")]
    )[0]
    assert answer.response.strategy == "canary" and answer.response.model_version == "1.1"


def test_short_model_answers_are_backfilled_from_popularity_below_model_scores() -> None:
    routing = Routing(deployment("1.0"))
    request_ = request("u", k=8, filters={"include_categories": ["c"]})
    categories = {"i1": "c", "i2": "c", "i9": "c", "i20": "c", "i25": "c"}
    reader = FakeReader({"u": context("u", ["i9"])}, POPULAR, categories=categories)
    response = scorer(reader, routing).score_batch([request_])[0].response
    items = [i.item_id for i in response.items]
    assert set(items) <= {"i1", "i2", "i20", "i25"}
    assert [i.score for i in response.items] == sorted([i.score for i in response.items],
                                                       reverse=True)


def test_feature_freshness_is_the_pipelines_lag_and_model_freshness_the_models_age() -> None:
    """The user's newest event is years old in event time, but reached Redis 40 ms after it
    entered Kafka: feature freshness is those 40 ms, not the history's age."""
    routing = Routing(deployment("1.0"))
    reader = FakeReader({"u": context("u", ["i1"], ts=1_700_000_000.0, lag_ms=40.0)}, POPULAR)
    response = scorer(reader, routing).score_batch([request("u")])[0].response
    assert response.feature_freshness_ms == 40.0
    assert response.model_freshness_ms is not None and response.model_freshness_ms >= 60_000


def test_a_user_without_a_stored_lag_has_no_feature_freshness() -> None:
    routing = Routing(deployment("1.0"))
    reader = FakeReader({"u": context("u", ["i1"])}, POPULAR)
    response = scorer(reader, routing).score_batch([request("u")])[0].response
    assert response.feature_freshness_ms is None


def test_rules_from_the_feature_store_replace_the_configured_ones() -> None:
    routing = Routing(deployment("1.0"))
    configured = BusinessRules(pinned={"i28": 0})
    stored = BusinessRules(pinned={"i29": 0})
    reader = FakeReader({"u": context("u", ["i1"])}, POPULAR, rules=stored)
    response = scorer(reader, routing, configured).score_batch([request("u")])[0].response
    assert response.items[0].item_id == "i29"


def test_a_batch_costs_one_feature_read() -> None:
    reader = FakeReader({f"u{i}": context(f"u{i}", ["i1"]) for i in range(10)}, POPULAR)
    answers = scorer(reader, Routing(deployment("1.0"))).score_batch(
        [request(f"u{i}") for i in range(10)]
    )
    assert reader.reads == 1
    assert [a.response.user_id for a in answers] == [f"u{i}" for i in range(10)]


class NarrowingIndex:
    """Records the widths asked for; answers as the wrapped index would."""

    def __init__(self, index: ExactIndex) -> None:
        self.index = index
        self.widths: list[int] = []

    def build(self, ids: IntArray, vectors: FloatArray) -> None:
        self.index.build(ids, vectors)

    def search(self, queries: FloatArray, n: int) -> tuple[FloatArray, IntArray]:
        self.widths.append(n)
        return self.index.search(queries, n)

    def __len__(self) -> int:
        return len(self.index)


def _fixed(routing: Routing) -> Callable[[], Routing]:
    return lambda: routing


def test_retrieval_asks_only_for_what_filtering_and_the_logged_candidates_may_need() -> None:
    """Seen, excluded and unavailable items bound how deep the answer and the logged
    candidates can lie; the answer is the one a full-width search gives."""
    bundle = make_bundle(n_items=200)
    assert isinstance(bundle.index, ExactIndex)
    seen = [f"i{n}" for n in range(1, 40)]
    reader = FakeReader({"u": context("u", seen)}, POPULAR, unavailable=frozenset({"i50"}))
    ask = [request("u", k=5, exclude_items=["i60", "i61"])]
    for logged in (0, 20):
        narrow = NarrowingIndex(bundle.index)
        full = Routing(deployment("1.0", bundle))
        narrowing = Routing(deployment("1.0", replace(bundle, index=narrow)))
        wide = Scorer(reader, _fixed(full), BusinessRules(), 150, logged_candidates=logged)
        narrowed = Scorer(reader, _fixed(narrowing), BusinessRules(), 150,
                          logged_candidates=logged)
        expected = wide.score_batch(ask)[0]
        answer = narrowed.score_batch(ask)[0]
        assert answer.response.items == expected.response.items
        assert narrow.widths == [max(5, logged) + 39 + 1 + 2]
        if logged:
            assert answer.features is not None and expected.features is not None
            assert answer.features.candidates == expected.features.candidates
            assert len(answer.features.candidates) == logged


def test_category_filters_keep_the_full_retrieval_width() -> None:
    bundle = make_bundle(n_items=200)
    assert isinstance(bundle.index, ExactIndex)
    narrow = NarrowingIndex(bundle.index)
    routing = Routing(deployment("1.0", replace(bundle, index=narrow)))
    reader = FakeReader({"u": context("u", ["i1"])}, POPULAR, categories={"i2": "a"})
    Scorer(reader, lambda: routing, BusinessRules(), 150).score_batch(
        [request("u", k=5, filters={"include_categories": ["a"]})]
    )
    assert narrow.widths == [150]


class _Offering:
    """A catalog with no content that offers the same new items to everyone."""

    def __init__(self, offered: list[str]) -> None:
        self.offered = offered

    def content(self, known: Mapping[str, int], indices: IntArray) -> ItemContent:
        return ItemContent.empty(len(indices))

    def new_items(self, known: Mapping[str, int], history: Sequence[str], n: int) -> list[str]:
        return self.offered[:n]


def test_a_model_answer_gives_its_last_places_to_new_items_and_keeps_the_rest() -> None:
    routing = Routing(deployment("1.0"))
    reader = FakeReader({"u": context("u", ["i3"])}, POPULAR)
    plain = scorer(reader, routing).score_batch([request("u", k=5)])[0].response
    with_new = Scorer(reader, lambda: routing, BusinessRules(), candidates=20,
                      catalog=_Offering(["new-1", "new-2", "new-3"]), new_item_slots=2)
    served = with_new.score_batch([request("u", k=5, exclude_items=["new-1"])])[0]
    answer = served.response
    assert served.new_items == 2
    before = [i.item_id for i in plain.items]
    assert [i.item_id for i in answer.items] == [*before[:3], "new-2", "new-3"]
    assert answer.strategy == "model"
    scores = [i.score for i in answer.items]
    assert scores == sorted(scores, reverse=True)


def test_cold_start_answers_get_no_new_items() -> None:
    new = Scorer(FakeReader({}, POPULAR), lambda: Routing(deployment("1.0")), BusinessRules(),
                 catalog=_Offering(["new-1"]), new_item_slots=1)
    answer = new.score_batch([request("stranger", k=3)])[0].response
    assert answer.strategy == "popularity"
    assert [i.item_id for i in answer.items] == ["i1", "i2", "i3"]


class _ReverseRanker:
    """Prefers what retrieval likes least."""

    def score(self, vectors: np.ndarray) -> np.ndarray:
        return (-vectors[:, 0]).astype(np.float32)


def arms(*specs: tuple[str, str, float, str | None]) -> Experiment:
    return Experiment(name="exp", arms=tuple(
        ExperimentArm(name=n, policy=p, weight=w, version=v)
        for n, p, w, v in specs
    ))


def one_arm(policy: str, version: str | None = None) -> Experiment:
    return arms((policy, policy, 1.0, version))


def arm_scorer(
    reader: FakeReader, experiment: Experiment, routing: Routing | None = None,
    pinned: dict[str, Deployment] | None = None,
) -> Scorer:
    return Scorer(reader, lambda: routing or Routing(deployment("2.3")), BusinessRules(),
                  candidates=20, logged_candidates=8,
                  ranker=lambda: PublishedRanker("r-1", _ReverseRanker()),
                  experiment=experiment, pinned=lambda: pinned or {})


def test_every_answer_names_the_experiment_and_the_users_arm() -> None:
    experiment = arms(("m", "model", 1.0, None), ("p", "popularity", 1.0, None))
    reader = FakeReader({f"u{n}": context(f"u{n}", ["i1"]) for n in range(40)}, POPULAR)
    answers = arm_scorer(reader, experiment).score_batch([request(f"u{n}") for n in range(40)])
    for answer in answers:
        response = answer.response
        assert response.experiment == "exp"
        assert response.arm == experiment.assign(response.user_id).name
        assert response.strategy == {"m": "model", "p": "popularity"}[response.arm]
    assert {a.response.arm for a in answers} == {"m", "p"}


def test_the_popularity_arm_answers_known_users_from_popularity() -> None:
    reader = FakeReader({"u": context("u", ["i3"])}, POPULAR)
    answer = arm_scorer(reader, one_arm("popularity")).score_batch([request("u", k=3)])[0]
    assert answer.response.strategy == "popularity" and answer.response.model_version is None
    assert [i.item_id for i in answer.response.items] == ["i1", "i2", "i4"]  # i3 seen
    assert answer.features is None


def test_the_model_arm_keeps_retrieval_order_while_the_ranker_arm_reorders() -> None:
    reader = FakeReader({"u": context("u", ["i3", "i9"])}, POPULAR)
    model = arm_scorer(reader, one_arm("model")).score_batch([request("u", k=4)])[0]
    ranker = arm_scorer(reader, one_arm("ranker")).score_batch([request("u", k=4)])[0]
    assert model.response.strategy == "model" and ranker.response.strategy == "ranker"
    assert model.features is not None and ranker.features is not None
    logged = ranker.features.candidates  # the 8 the ranker re-scored, in retrieval order
    assert [i.item_id for i in model.response.items] == logged[:4]
    assert [i.item_id for i in ranker.response.items] == logged[::-1][:4]


def test_every_arm_of_a_model_logs_its_first_logged_candidates_not_only_its_k() -> None:
    reader = FakeReader({"u": context("u", ["i3", "i9"])}, POPULAR)
    pinned = {"1.0": deployment("1.0", make_bundle("1.0", seed=7))}
    for policy, version in (("model", None), ("frozen", "1.0"), ("ranker", None)):
        answer = arm_scorer(reader, one_arm(policy, version), pinned=pinned).score_batch(
            [request("u", k=4)])[0]
        assert answer.features is not None
        assert len(answer.features.candidates) == 8, policy
        assert len(answer.response.items) == 4


def test_the_frozen_arm_serves_its_pinned_version_whatever_serves_live() -> None:
    reader = FakeReader({"u": context("u", ["i3"])}, POPULAR)
    pinned = deployment("1.0", make_bundle("1.0", seed=7))
    frozen = arm_scorer(reader, one_arm("frozen", "1.0"), pinned={"1.0": pinned})
    answer = frozen.score_batch([request("u", k=5)])[0].response
    alone = Scorer(reader, lambda: Routing(pinned), BusinessRules(), candidates=20)
    assert answer.model_version == "1.0" and answer.strategy == "model"
    assert answer.arm == "frozen"
    assert answer.items == alone.score_batch([request("u", k=5)])[0].response.items


def test_a_frozen_arm_whose_version_is_not_loaded_answers_from_popularity_in_its_arm() -> None:
    reader = FakeReader({"u": context("u", ["i3"])}, POPULAR)
    answer = arm_scorer(reader, one_arm("frozen", "1.0")).score_batch([request("u")])[0]
    assert answer.response.strategy == "popularity" and answer.response.arm == "frozen"


def test_an_unknown_user_of_a_learned_arm_gets_popularity_and_stays_in_the_arm() -> None:
    answer = arm_scorer(FakeReader({}, POPULAR), one_arm("ranker")).score_batch(
        [request("stranger", k=3)]
    )[0]
    assert answer.response.strategy == "popularity" and answer.response.arm == "ranker"
    assert answer.outcome == "cold_start"


def test_an_experiment_document_in_redis_replaces_the_configured_one() -> None:
    reader = FakeReader({"u": context("u", ["i3"])}, POPULAR)
    scorer = arm_scorer(reader, one_arm("model"))
    stored = arms(("only", "popularity", 1.0, None))
    reader.config = ServingConfig(frozenset(), None, stored)
    answer = scorer.score_batch([request("u")])[0].response
    assert (answer.arm, answer.strategy) == ("only", "popularity")
    assert scorer.arm("anyone")[1].name == "only"
