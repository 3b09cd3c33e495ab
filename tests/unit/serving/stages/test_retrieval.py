from collections.abc import Sequence

from serving.batch import Batch
from serving.experiment import Experiment
from serving.features import BatchFeatures, ServingConfig, UserContext
from serving.registry import Routing
from serving.rules import BusinessRules
from serving.stages.retrieval import Retrieval, popular_candidates
from tests.unit.serving.fakes import context, deployment, request

POPULAR = [("p1", 10.0), ("p2", 9.0), ("p3", 8.0)]


def batch(
    contexts: Sequence[UserContext], routing: Routing, experiment: Experiment | None = None
) -> Batch:
    features = BatchFeatures(list(contexts), ServingConfig(frozenset(), None), POPULAR)
    return Batch.of(
        [request(c.user_id) for c in contexts], features, BusinessRules(),
        experiment or Experiment(), routing, {}, None, 1_700_000_000.0,
    )


def retrieval(history_length: int = 50, logged_candidates: int = 0) -> Retrieval:
    return Retrieval(lambda ids: {}, candidates=20, history_length=history_length,
                     logged_candidates=logged_candidates)


def test_requests_are_answered_per_deployment_and_cold_ones_by_popularity() -> None:
    routing = Routing(deployment("1.0"), deployment("1.1"), canary_share=0.5)
    contexts = [context(f"u{i}", ["i1", "i2"]) for i in range(40)]
    contexts.append(context("new-user"))
    contexts.append(context("only-new-items", ["brand-new"]))
    drafts = retrieval().retrieve(batch(contexts, routing))
    assert [d.strategy for d in drafts[40:]] == ["popularity", "popularity"]
    assert all(d.deployment is None and d.candidates == POPULAR for d in drafts[40:])
    served = drafts[:40]
    assert {(d.deployment.version, d.canary, d.strategy) for d in served if d.deployment} == {
        ("1.0", False, "model"), ("1.1", True, "canary")
    }
    for draft in served:
        assert routing.route(draft.request.user_id)[0] is draft.deployment
        assert len(draft.candidates) == 5 + 2 and draft.query is not None  # k + seen
    logging = retrieval(logged_candidates=12).retrieve(batch(contexts[:40], routing))
    assert all(len(d.candidates) == 12 + 2 for d in logging)  # the logged ones + seen


def test_histories_are_what_the_version_trained_on_cut_to_the_newest() -> None:
    """Unknown items and repeats of the previous item are no history; the newest 3 remain."""
    routing = Routing(deployment("1.0"))
    user = context("u", ["i1", "unknown", "i2", "i2", "i3", "i4"])
    (draft,) = retrieval(history_length=3).retrieve(batch([user], routing))
    assert [i for i, _ in draft.history] == [2, 3, 4]


def test_without_any_model_every_request_is_cold() -> None:
    (draft,) = retrieval().retrieve(batch([context("u", ["i1"])], Routing()))
    assert draft.deployment is None and draft.strategy == "popularity"


def test_popular_items_of_the_sessions_recent_categories_come_first() -> None:
    categories = {"p3": "a", "seen": "a"}
    assert [i for i, _ in popular_candidates(POPULAR, ["seen"], categories)] == ["p3", "p1", "p2"]
    assert popular_candidates(POPULAR, ["other"], categories) == POPULAR
