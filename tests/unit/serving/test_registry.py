import threading
from collections.abc import Callable

from schemas.model_updates import ModelUpdate
from serving.model_bundle import ModelBundle
from serving.registry import ModelRegistry, Routing
from tests.unit.serving.fakes import deployment, make_bundle, update

MODEL = "session"


def _registry(
    loader: Callable[[ModelUpdate], ModelBundle] | None = None, canary_share: float = 0.1
) -> ModelRegistry:
    return ModelRegistry(MODEL, loader or (lambda u: make_bundle(u.version)), canary_share)


def _serving(registry: ModelRegistry) -> str | None:
    serving = registry.snapshot().serving
    return serving.version if serving else None


def test_a_version_that_fails_to_load_falls_back_to_the_newest_earlier_one_and_is_reported() -> (
    None
):
    rejected: list[tuple[str, str]] = []
    loads: list[str] = []

    def loader(u: ModelUpdate) -> ModelBundle:
        loads.append(u.version)
        if u.version in ("1.2", "1.1"):
            raise OSError("corrupt checkpoint")
        return make_bundle(u.version)

    registry = _registry(loader)
    registry.on_rejected = lambda u, e: rejected.append((u.version, type(e).__name__))
    try:
        for version in ("1.0", "1.1", "1.2"):
            registry.apply(update(version))
        assert registry.wait_until_settled(5)
        assert _serving(registry) == "1.0"
        assert sorted(rejected) == [("1.1", "OSError"), ("1.2", "OSError")]
        registry.apply(update("1.2", "rolled_back"))  # nothing to retry: 1.1 failed already
        assert registry.wait_until_settled(5)
        assert _serving(registry) == "1.0" and loads.count("1.1") == 1
    finally:
        registry.close()


def test_a_rolled_back_serving_version_stops_answering_before_its_fallback_loads() -> None:
    release = threading.Event()

    def loader(u: ModelUpdate) -> ModelBundle:
        if u.version == "1.0":
            release.wait(5)
        return make_bundle(u.version)

    registry = _registry(loader, canary_share=0.0)
    try:
        registry.apply(update("1.1"))
        assert registry.wait_until_settled(5) and _serving(registry) == "1.1"
        registry.apply(update("1.0"))  # an earlier serving version: a fallback, not loaded
        registry.apply(update("1.1", "rolled_back"))
        # At once: no answer from 1.1, though 1.0 is still loading.
        assert _serving(registry) is None
        release.set()
        assert registry.wait_until_settled(5) and _serving(registry) == "1.0"
    finally:
        release.set()
        registry.close()


def test_a_retired_version_leaves_the_routing() -> None:
    registry = _registry()
    try:
        registry.apply(update("1.0"))
        registry.apply(update("1.1", "candidate"))
        assert registry.wait_until_settled(5)
        registry.retire("1.1")
        assert registry.snapshot().canary is None
        assert registry.wait_until_settled(5) and _serving(registry) == "1.0"
    finally:
        registry.close()


def test_canary_share_is_stable_per_user_and_close_to_the_configured_share() -> None:
    routing = Routing(deployment("1.0"), deployment("1.1"), canary_share=0.2)
    first = [routing.route(f"u{i}")[1] for i in range(5000)]
    again = [routing.route(f"u{i}")[1] for i in range(5000)]
    assert first == again
    assert 0.17 < sum(first) / len(first) < 0.23


def test_a_larger_canary_share_only_moves_users_onto_the_candidate() -> None:
    small = Routing(deployment("1.0"), deployment("1.1"), canary_share=0.1)
    large = Routing(deployment("1.0"), deployment("1.1"), canary_share=0.3)
    users = [f"u{i}" for i in range(3000)]
    on_small = {u for u in users if small.route(u)[1]}
    on_large = {u for u in users if large.route(u)[1]}
    assert on_small < on_large


def test_each_candidate_is_tried_on_its_own_slice_of_users() -> None:
    users = [f"u{i}" for i in range(3000)]
    first = Routing(deployment("1.0"), deployment("1.1"), canary_share=0.2)
    second = Routing(deployment("1.0"), deployment("1.2"), canary_share=0.2)
    overlap = {u for u in users if first.route(u)[1]} & {u for u in users if second.route(u)[1]}
    assert len(overlap) < 0.3 * 0.2 * len(users)


def test_swap_waits_for_the_load_and_then_switches_at_once() -> None:
    release = threading.Event()
    loads: list[str] = []

    def loader(u: ModelUpdate) -> ModelBundle:
        loads.append(u.version)
        if u.version == "1.1":
            release.wait(5)
        return make_bundle(u.version)

    registry = _registry(loader, canary_share=0.0)
    try:
        registry.apply(update("1.0"))
        assert registry.wait_until_settled(5)
        registry.apply(update("1.1"))
        # While 1.1 loads, every snapshot still serves 1.0, fully loaded.
        for _ in range(100):
            serving = registry.snapshot().serving
            assert serving is not None and serving.version == "1.0"
            assert serving.bundle.version == "1.0"
        release.set()
        assert registry.wait_until_settled(5)
        serving = registry.snapshot().serving
        assert serving is not None and serving.bundle.version == "1.1"
        assert loads == ["1.0", "1.1"]
    finally:
        release.set()
        registry.close()


def test_snapshots_taken_during_swaps_are_always_consistent() -> None:
    registry = _registry(lambda u: make_bundle(u.version, n_items=5), canary_share=0.5)
    stop = threading.Event()
    torn: list[str] = []

    def read() -> None:
        while not stop.is_set():
            routing = registry.snapshot()
            for d in (routing.serving, routing.canary):
                if d is not None and d.version != d.bundle.version:
                    torn.append(d.version)

    readers = [threading.Thread(target=read) for _ in range(2)]
    for t in readers:
        t.start()
    try:
        for minor in range(30):
            registry.apply(update(f"1.{minor}"))
            registry.apply(update(f"1.{minor + 1}", "candidate"))
        assert registry.wait_until_settled(10)
    finally:
        stop.set()
        for t in readers:
            t.join()
        registry.close()
    assert torn == []
    routing = registry.snapshot()
    assert routing.serving is not None and routing.serving.version == "1.29"
    assert routing.canary is not None and routing.canary.version == "1.30"


def test_promotion_reuses_the_loaded_canary_bundle() -> None:
    loads: list[str] = []

    def loader(u: ModelUpdate) -> ModelBundle:
        loads.append(u.version)
        return make_bundle(u.version)

    registry = _registry(loader)
    try:
        registry.apply(update("1.0"))
        registry.apply(update("1.1", "candidate"))
        assert registry.wait_until_settled(5)
        canary = registry.snapshot().canary
        registry.apply(update("1.1"))
        assert registry.wait_until_settled(5)
        serving = registry.snapshot().serving
        assert canary is not None and serving is not None
        assert serving.bundle is canary.bundle
        assert loads == ["1.0", "1.1"]
    finally:
        registry.close()
