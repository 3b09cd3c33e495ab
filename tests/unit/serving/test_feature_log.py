"""The feature vectors the scorer logs are the offline path's (models.point_in_time) exactly."""

from __future__ import annotations

import numpy as np

from models.item_content import ItemContent
from models.point_in_time import (
    FEATURE_NAMES,
    NEVER_S,
    SERVING_FEATURE_NAMES,
    SERVING_FEATURE_SET,
    InteractionLog,
    candidate_features,
    serving_candidate_features,
)
from models.sequences import Queries
from schemas.catalog import CatalogItem
from schemas.ranker_examples import ServedFeatures
from schemas.wire import decode, encode
from serving.feature_log import PublishedRanker, candidate_vectors
from serving.features import Interaction, UserContext
from serving.item_catalog import ItemCatalog
from serving.pipeline import Scorer
from serving.registry import Routing
from serving.rules import BusinessRules
from tests.unit.serving.fakes import (
    FakeReader,
    ItemState,
    VectorRecommender,
    deployment,
    request,
    state_reader,
)

NOW = 1_700_000_000
HISTORIES = {
    # Shorter than the recent-items window (padding slots) and longer than it.
    "short": [(3, NOW - 4000), (17, NOW - 900), (8, NOW - 30)],
    "long": [(n, NOW - 100 * (12 - j)) for j, n in enumerate([5, 9, 2, 40, 33, 21, 7, 12])],
}
OTHERS = [(n, NOW - 37 * n * (1 + n % 4)) for n in range(1, 60) if n % 3] + [(4, NOW - 5)]
"""Other users' events, before the requests: the candidates' item state."""
EVENTS = [*OTHERS, *(e for h in HISTORIES.values() for e in h)]
LOG = InteractionLog.from_events(
    np.array([i for i, _ in EVENTS], dtype=np.int64), np.array([t for _, t in EVENTS], np.int64)
)


GENRES = ("Drama", "Comedy", "Action", "Western", "Sci-Fi")
CATALOG = [
    # Most items with one to three genres and a year; some with no genre, no year or neither.
    CatalogItem(item_id=f"i{n}", genres=[GENRES[(n * k) % 5] for k in range(1, 1 + n % 4)],
                release_year=None if n % 7 == 0 else 1950 + n, updated_at=float(NOW))
    for n in range(1, 60) if n % 11
]
"""The item metadata published to `catalog.items`: the candidates' and histories' content."""


def _catalog() -> ItemCatalog:
    catalog = ItemCatalog()
    catalog.apply(CATALOG)
    return catalog


def _offline_content(n_items: int) -> ItemContent:
    return ItemContent.from_records(
        [f"i{n}" for n in range(1, n_items + 1)],
        [(i.item_id, i.release_year, i.genres) for i in CATALOG],
    )


def _item_states() -> dict[str, ItemState]:
    """What the stream's item hashes hold after EVENTS (first and last time, count)."""
    times: dict[str, list[float]] = {}
    for item, ts in EVENTS:
        times.setdefault(f"i{item}", []).append(float(ts))
    return {i: (min(t), max(t), float(len(t))) for i, t in times.items()}


def _context(user: str) -> UserContext:
    events = tuple(Interaction(f"i{i}", float(t), "view") for i, t in HISTORIES[user])
    return UserContext(user_id=user, session_id=None, user_events=events,
                       last_event_ts=events[-1].ts)


def _served() -> tuple[dict[str, ServedFeatures], VectorRecommender]:
    live = deployment("1.0")
    reader = FakeReader({u: _context(u) for u in HISTORIES}, item_states=_item_states())
    scorer = Scorer(reader, lambda: Routing(live), BusinessRules(), candidates=20,
                    clock=lambda: float(NOW), catalog=_catalog(), logged_candidates=8)
    answers = scorer.score_batch([request(u, k=6) for u in HISTORIES])
    logged = {}
    for answer in answers:
        assert answer.features is not None
        # What the monitor reads is what the scorer wrote.
        logged[answer.response.user_id] = decode(ServedFeatures, encode(answer.features))
    recommender = live.bundle.recommender
    assert isinstance(recommender, VectorRecommender)
    return logged, recommender


def _offline_inputs(
    logged: dict[str, ServedFeatures], recommender: VectorRecommender
) -> tuple[Queries, np.ndarray, np.ndarray, np.ndarray]:
    table = recommender.vectors
    users = list(HISTORIES)
    histories = [np.array([i for i, _ in HISTORIES[u]], dtype=np.int64) for u in users]
    queries = Queries(
        histories=histories,
        history_times=[np.array([t for _, t in HISTORIES[u]], dtype=np.int64) for u in users],
        query_times=np.full(len(users), NOW, dtype=np.int64),
        targets=np.zeros(len(users), dtype=np.int64),
    )
    query_vectors = np.stack([table[h[-1]] for h in histories])
    candidates = np.array(
        [[int(c[1:]) for c in logged[u].candidates] for u in users], dtype=np.int64
    )
    all_scores = query_vectors @ table[1:].T  # the retriever's exact scores, as it computes them
    scores = np.take_along_axis(all_scores, candidates - 1, axis=1).astype(np.float32)
    return queries, query_vectors, candidates, scores


def test_the_logged_vector_equals_the_offline_point_in_time_vector() -> None:
    logged, recommender = _served()
    queries, query_vectors, candidates, scores = _offline_inputs(logged, recommender)
    n_items = recommender.vectors.shape[0] - 1
    offline = serving_candidate_features(
        LOG, _offline_content(n_items), recommender.vectors, queries, query_vectors, candidates,
        scores,
    )
    since_last = offline[:, :, SERVING_FEATURE_NAMES.index("item_log_since_last")]
    # Some candidates have an item state and some none: both paths are compared.
    assert (since_last < np.log1p(NEVER_S) - 1).any() and (since_last > 20).any()
    # Likewise some have content (a genre, a year gap) and some none.
    genre = offline[:, :, SERVING_FEATURE_NAMES.index("genre_match_recent")]
    year_gap = offline[:, :, SERVING_FEATURE_NAMES.index("year_gap_recent")]
    assert (genre > 0).any() and (genre == 0).any() and (year_gap > 0).any()
    for row, user in enumerate(HISTORIES):
        record = logged[user]
        assert record.feature_set == SERVING_FEATURE_SET
        assert record.features_at == NOW
        assert record.n_features == len(SERVING_FEATURE_NAMES)
        np.testing.assert_array_equal(record.matrix(), offline[row])


def test_the_serving_set_is_the_evaluations_own_columns() -> None:
    logged, recommender = _served()
    queries, query_vectors, candidates, scores = _offline_inputs(logged, recommender)
    n_items = recommender.vectors.shape[0] - 1
    full = candidate_features(LOG, _offline_content(n_items), recommender.vectors, queries,
                              query_vectors, candidates, scores)
    columns = [FEATURE_NAMES.index(name) for name in SERVING_FEATURE_NAMES]
    for row, user in enumerate(HISTORIES):
        np.testing.assert_array_equal(logged[user].matrix(), full[row][:, columns])


def test_only_model_served_answers_log_features() -> None:
    reader = FakeReader({}, popular=[("i1", 3.0), ("i2", 2.0)])
    scorer = Scorer(reader, lambda: Routing(deployment("1.0")), BusinessRules())
    answer = scorer.score_batch([request("stranger", k=2)])[0]
    assert answer.response.strategy == "popularity"
    assert answer.features is None


def test_the_log_names_the_shown_items_and_retrieval_order() -> None:
    logged, _ = _served()
    for user, record in logged.items():
        assert record.strategy == "retrieval_order" and record.ranker_version is None
        assert record.shown and set(record.shown) <= set(record.candidates)
        seen = {f"i{i}" for i, _ in HISTORIES[user]}
        assert not seen & set(record.candidates)


class _ReverseRanker:
    """Prefers what retrieval likes least: an order no retrieval can produce by accident."""

    def score(self, vectors: np.ndarray) -> np.ndarray:
        return (-vectors[:, 0]).astype(np.float32)


def test_a_published_ranker_orders_the_answer_and_the_response_says_so() -> None:
    live = deployment("1.0")
    reader = FakeReader({"long": _context("long")})
    plain = Scorer(reader, lambda: Routing(live), BusinessRules(), candidates=20,
                   clock=lambda: float(NOW), logged_candidates=8)
    ranked = Scorer(reader, lambda: Routing(live), BusinessRules(), candidates=20,
                    clock=lambda: float(NOW), logged_candidates=8,
                    ranker=lambda: PublishedRanker("r-3", _ReverseRanker()))
    before = plain.score_batch([request("long", k=4)])[0]
    after = ranked.score_batch([request("long", k=4)])[0]
    assert before.response.strategy == "model" and after.response.strategy == "ranker"
    assert after.features is not None and after.features.ranker_version == "r-3"
    assert after.features.strategy == "ranker"
    # The ranker saw the 8 logged candidates (retrieval order) and put the last 4 first.
    logged = after.features.candidates
    assert [i.item_id for i in after.response.items] == logged[::-1][:4]
    assert before.features is not None
    assert [i.item_id for i in before.response.items] == before.features.candidates[:4]


def test_a_ranker_judged_on_another_retrieval_major_leaves_retrieval_order() -> None:
    live = deployment("2.0")
    reader = FakeReader({"long": _context("long")})
    scorer = Scorer(reader, lambda: Routing(live), BusinessRules(), candidates=20,
                    clock=lambda: float(NOW), logged_candidates=8,
                    ranker=lambda: PublishedRanker("r-3", _ReverseRanker(), retriever_major="1"))
    answer = scorer.score_batch([request("long", k=4)])[0]
    assert answer.response.strategy == "model"
    assert answer.features is not None and answer.features.ranker_version is None
    assert [i.item_id for i in answer.response.items] == answer.features.candidates[:4]


def test_requests_of_any_candidate_count_get_the_vectors_each_would_get_alone() -> None:
    bundle = deployment("1.0").bundle
    ids = list(bundle.item_index)[:6]
    histories = [HISTORIES["short"], HISTORIES["long"], [], HISTORIES["long"]]
    candidates = [
        [(ids[j], 1.0 - j / 10) for j in range(5)],
        [(ids[j], 0.5 - j / 10) for j in range(3)] + [("not-in-the-model", 0.1)],
        [(ids[j], 0.9 - j / 10) for j in range(5)],
        [("not-in-the-model", 0.3)],
    ]
    queries = bundle.recommender.item_vectors(np.arange(1, 5))  # any query vectors will do
    states = state_reader(_item_states())
    content = _catalog().content
    together = candidate_vectors(bundle, queries, histories, candidates, float(NOW), states,
                                 content)
    assert together[3] is None
    for row in range(3):
        alone = candidate_vectors(
            bundle, queries[[row]], [histories[row]], [candidates[row]], float(NOW), states,
            content,
        )[0]
        mine = together[row]
        assert alone is not None and mine is not None
        assert mine.item_ids == alone.item_ids == [i for i, _ in candidates[row]
                                                   if i != "not-in-the-model"]
        np.testing.assert_allclose(mine.vectors, alone.vectors, rtol=1e-6, atol=1e-6)
