"""The real recommender (session Transformer + faiss + DLRM ranker) behind the protocols."""

import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from models.accelerators import BucketedGraphs
from models.onnx_inference import OnnxInference
from models.ranker import DLRMConfig, DLRMRanker
from models.reference_answer import reference_answer
from models.retrieval import FaissItemIndex, RetrievalConfig
from models.sequence_training import history_batch
from models.session_checkpoint import load_session_model, save_session_model
from models.session_config import SessionTransformerConfig
from models.session_transformer import SessionTransformer
from models.store import ModelStore
from serving.features import Interaction, UserContext
from serving.pipeline import Scorer
from serving.registry import Deployment, Routing
from serving.rules import BusinessRules
from serving.session_model import SessionRecommender, load_session_bundle
from serving.settings import CpuRuntime, ServeSettings
from tests.unit.serving.fakes import FakeReader, context, request, update

ITEMS = [f"i{n}" for n in range(1, 61)]


def stored(root: Path, with_ranker: bool) -> None:
    torch.manual_seed(0)
    model = SessionTransformer(64, SessionTransformerConfig(dim=16, layers=1, max_len=20))
    ranker = DLRMRanker(DLRMConfig(n_dense=8, n_sparse=2, dim=16)) if with_ranker else None
    # 64 rows for 60 ids: the trainer grows its table ahead of its vocabulary.
    save_session_model(ModelStore(root), "m", "1.0", model, ITEMS, ranker)


def test_a_stored_checkpoint_loads_into_a_bundle_that_encodes_and_searches(
    tmp_path: Path,
) -> None:
    stored(tmp_path, with_ranker=False)
    bundle = load_session_bundle(tmp_path, "m", "1.0", RetrievalConfig(kind="flat"), 20)
    assert len(bundle.index) == len(ITEMS)  # rows without an id are not indexed
    queries = bundle.recommender.encode([[(1, 100.0), (2, 160.0)], [(3, 100.0)]])
    _scores, ids = bundle.index.search(queries, 10)
    assert queries.shape[0] == 2 and ids.shape == (2, 10)
    assert set(ids.ravel().tolist()) <= set(range(1, 61))
    assert not np.array_equal(ids[0], ids[1])


def test_a_stored_ranker_reorders_the_filtered_candidates(tmp_path: Path) -> None:
    stored(tmp_path, with_ranker=True)
    bundle = load_session_bundle(tmp_path, "m", "1.0", RetrievalConfig(kind="flat"), 20)
    assert bundle.ranker is not None
    routing = Routing(Deployment(update("1.0"), bundle, since=0.0))
    reader = FakeReader({"u": context("u", ["i1", "i2"])})
    response = Scorer(reader, lambda: routing, BusinessRules(), candidates=30).score_batch(
        [request("u", k=8)]
    )[0].response
    scores = [i.score for i in response.items]
    assert len(scores) == 8 and scores == sorted(scores, reverse=True)
    assert all(0.0 <= s <= 1.0 for s in scores)  # ranker probabilities, not inner products
    assert not {i.item_id for i in response.items} & {"i1", "i2"}


def small_model() -> SessionTransformer:
    torch.manual_seed(0)
    return SessionTransformer(64, SessionTransformerConfig(dim=16, layers=1, max_len=20))


def histories_of(lengths: list[int]) -> list[list[tuple[int, float]]]:
    return [[(1 + (i * 7 + n) % 60, 100.0 + 60 * i) for i in range(n)] for n in lengths]


@pytest.mark.parametrize(
    ("runtime", "kind"), [("onnxruntime", OnnxInference), ("torchscript", torch.jit.ScriptModule)]
)
def test_each_cpu_runtime_gives_the_eager_queries(runtime: CpuRuntime, kind: type) -> None:
    recommender = SessionRecommender(small_model(), 20, torch.device("cpu"), cpu_runtime=runtime)
    assert isinstance(recommender._encode, kind)
    histories = [[(i, 100.0 + 60 * i) for i in range(1, n + 1)] for n in (1, 5, 20)]
    x, gaps = history_batch(
        [np.array([i for i, _ in h]) for h in histories],
        [np.array([int(t) for _, t in h]) for h in histories],
        20,
    )
    with torch.inference_mode():
        assert torch.allclose(recommender._encode(x, gaps), recommender.model.encode(x, gaps),
                              atol=1e-5)


def test_without_onnx_runtime_the_encoder_falls_back_to_the_trace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    histories = histories_of([3, 11])
    with_onnx = SessionRecommender(small_model(), 20, torch.device("cpu")).encode(histories)
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    recommender = SessionRecommender(small_model(), 20, torch.device("cpu"))
    assert isinstance(recommender._encode, torch.jit.ScriptModule)
    np.testing.assert_allclose(recommender.encode(histories), with_onnx, atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_the_cuda_graph_encoder_gives_the_cpu_queries_for_any_batch_size() -> None:
    cpu = SessionRecommender(small_model(), 20, torch.device("cpu"))
    cuda = SessionRecommender(small_model(), 20, torch.device("cuda"))
    assert isinstance(cuda._encode, BucketedGraphs)
    captured = cuda._encode.replays  # every bucket, at construction
    for lengths in ([3], [1, 20, 7], [5] * 9, [2, 30] * 35):  # 70 rows: past the last bucket
        histories = histories_of(lengths)
        np.testing.assert_allclose(cuda.encode(histories), cpu.encode(histories), atol=1e-4)
    assert cuda._encode.replays == captured + 3


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_a_version_captured_in_a_loader_thread_serves_beside_the_old_one() -> None:
    old = SessionRecommender(small_model(), 20, torch.device("cuda"))
    histories = histories_of([4, 9])
    expected = old.encode(histories)
    loaded: list[SessionRecommender] = []
    loader = threading.Thread(
        target=lambda: loaded.append(SessionRecommender(small_model(), 20, torch.device("cuda")))
    )
    loader.start()
    while loader.is_alive():  # the serving thread keeps replaying during the capture
        np.testing.assert_allclose(old.encode(histories), expected, atol=1e-6)
    loader.join()
    np.testing.assert_allclose(loaded[0].encode(histories), expected, atol=1e-4)


def test_a_served_list_is_the_offline_reference_of_the_same_version(tmp_path: Path) -> None:
    """Repeats, an item the version does not know and events stored out of time order: the
    scorer reads the history the version trained on and searches exactly, as the reference
    ranks (the scorer's default retrieval settings; 60 items are below its exact threshold)."""
    stored(tmp_path, with_ranker=False)
    retrieval = ServeSettings().retrieval
    bundle = load_session_bundle(tmp_path, "m", "1.0", retrieval, 20)
    assert retrieval.kind == "ivf"
    assert isinstance(bundle.index, FaissItemIndex) and bundle.index.kind == "flat"
    events = [("i5", 1_000.0), ("i9", 1_030.0), ("i9", 1_031.0), ("brand-new", 1_040.0),
              ("i2", 1_100.0), ("i7", 1_060.0), ("i5", 1_300.0)]
    user = UserContext(
        "u", "u-s", tuple(Interaction(i, t, "view") for i, t in events),
        tuple(Interaction(i, t, "view") for i, t in events[-2:]),
    )
    routing = Routing(Deployment(update("1.0"), bundle, since=0.0))
    served = Scorer(FakeReader({"u": user}), lambda: routing, BusinessRules(),
                    history_length=20).score_batch([request("u", k=10)])[0].response
    version = load_session_model(ModelStore(tmp_path), "m", "1.0")
    expected = reference_answer(version, events, 10, 20, excluded={i for i, _ in events})
    assert served.strategy == "model" and len(expected) == 10
    assert [i.item_id for i in served.items] == [i for i, _ in expected]
    np.testing.assert_allclose([i.score for i in served.items], [s for _, s in expected],
                               rtol=1e-4, atol=1e-4)


def test_a_version_trained_with_the_masked_objective_is_refused(tmp_path: Path) -> None:
    torch.manual_seed(0)
    config = SessionTransformerConfig(dim=16, layers=1, max_len=20, objective="masked")
    save_session_model(ModelStore(tmp_path), "m", "1.0", SessionTransformer(64, config), ITEMS)
    with pytest.raises(ValueError, match="masked"):
        load_session_bundle(tmp_path, "m", "1.0", RetrievalConfig(kind="flat"), 20)
