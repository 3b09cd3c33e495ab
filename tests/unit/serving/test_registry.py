import threading

from schemas.model_updates import ModelUpdate
from serving.model_bundle import ModelBundle
from serving.registry import Desired, ModelRegistry, Routing, canary_bucket, desire
from tests.unit.serving.fakes import deployment, make_bundle, update


def replay(*updates: ModelUpdate) -> Desired:
    state = Desired()
    for u in updates:
        state = desire(state, u)
    return state


def test_candidate_then_promotion_serves_the_candidate_without_a_canary() -> None:
    state = replay(update("1.0"), update("1.1", "candidate"), update("1.1"))
    assert state.serving is not None and state.serving.version == "1.1"
    assert state.canary is None


def test_rolled_back_candidate_leaves_serving_untouched() -> None:
    state = replay(update("1.0"), update("1.1", "candidate"), update("1.1", "rolled_back"))
    assert state.serving is not None and state.serving.version == "1.0"
    assert state.canary is None


def test_rolling_back_the_serving_version_returns_to_the_previous_one() -> None:
    state = replay(update("1.0"), update("1.1"), update("1.1", "rolled_back"))
    assert state.serving is not None and state.serving.version == "1.0"


def test_a_newer_serving_version_retires_an_older_canary() -> None:
    state = replay(update("1.0"), update("1.1", "candidate"), update("2.0"))
    assert state.canary is None


def test_an_older_serving_version_without_a_rollback_is_refused() -> None:
    state = replay(update("1.0"), update("2.0"), update("1.3"))
    assert state.serving is not None and state.serving.version == "2.0"


def test_an_explicit_rollback_of_the_serving_version_moves_back() -> None:
    back = update("1.0").model_copy(update={"rollback_from": "1.1"})
    state = replay(update("1.0"), update("1.1"), back, update("1.2"))
    assert state.serving is not None and state.serving.version == "1.2"
    assert [p.version for p in state.previous] == ["1.0"]


def test_a_rollback_naming_another_version_is_refused() -> None:
    back = update("1.0").model_copy(update={"rollback_from": "1.1"})
    state = replay(update("1.0"), update("1.1"), update("1.2"), back)
    assert state.serving is not None and state.serving.version == "1.2"


def test_a_candidate_older_than_what_serves_is_refused() -> None:
    state = replay(update("2.0"), update("1.5", "candidate"))
    assert state.canary is None


def test_the_registry_counts_refused_updates_and_keeps_serving() -> None:
    loaded: list[str] = []

    def loader(u: ModelUpdate) -> ModelBundle:
        loaded.append(u.version)
        return make_bundle(u.version)

    registry = ModelRegistry(loader, canary_share=0.1)
    try:
        registry.apply(update("2.0"))
        assert registry.wait_until_settled(5)
        registry.apply(update("1.0"))
        assert registry.wait_until_settled(5)
        assert registry.refused == 1 and loaded == ["2.0"]
        assert registry.snapshot().serving is not None
        assert registry.snapshot().serving.version == "2.0"  # type: ignore[union-attr]
    finally:
        registry.close()


def test_canary_share_is_stable_per_user_and_close_to_the_configured_share() -> None:
    routing = Routing(deployment("1.0"), deployment("1.1"), canary_share=0.2)
    first = [routing.route(f"u{i}")[1] for i in range(5000)]
    again = [routing.route(f"u{i}")[1] for i in range(5000)]
    assert first == again
    assert 0.17 < sum(first) / len(first) < 0.23
    assert 0 <= canary_bucket("u1", "1.1") < 1


def test_swap_waits_for_the_load_and_then_switches_at_once() -> None:
    release = threading.Event()
    loads: list[str] = []

    def loader(u: ModelUpdate) -> ModelBundle:
        loads.append(u.version)
        if u.version == "1.1":
            release.wait(5)
        return make_bundle(u.version)

    registry = ModelRegistry(loader, canary_share=0.0)
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
    registry = ModelRegistry(lambda u: make_bundle(u.version, n_items=5), canary_share=0.5)
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

    registry = ModelRegistry(loader, canary_share=0.1)
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


def test_a_version_that_fails_to_load_leaves_the_serving_one_in_place() -> None:
    def loader(u: ModelUpdate) -> ModelBundle:
        if u.version == "1.1":
            raise OSError("corrupt checkpoint")
        return make_bundle(u.version)

    registry = ModelRegistry(loader, canary_share=0.0)
    try:
        registry.apply(update("1.0"))
        registry.apply(update("1.1"))
        assert registry.wait_until_settled(5)
        serving = registry.snapshot().serving
        assert serving is not None and serving.version == "1.0"
    finally:
        registry.close()
