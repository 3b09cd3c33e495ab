"""Versions pinned by frozen arms: loaded in the background, beside the live ones."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from schemas.model_updates import ModelUpdate
from serving.model_bundle import ModelBundle
from serving.pinned_versions import PinnedVersions
from serving.registry import Routing
from tests.unit.serving.fakes import deployment, make_bundle, update


class Store:
    """Stored versions; records what was loaded with which digest."""

    def __init__(self, versions: set[str]) -> None:
        self.versions = versions
        self.loads: list[tuple[str, str]] = []
        self.broken: set[str] = set()

    def load(self, announced: ModelUpdate) -> ModelBundle:
        self.loads.append((announced.version, announced.sha256))
        if announced.version in self.broken:
            raise OSError("unreadable")
        return make_bundle(announced.version)

    def stored(self, version: str) -> ModelUpdate | None:
        if version not in self.versions:
            return None
        return update(version).model_copy(update={"sha256": "5" * 64})


@contextmanager
def pinned(store: Store, live: Routing | None = None, retry_s: float = 30.0) -> Iterator[
    PinnedVersions
]:
    versions = PinnedVersions(store.load, store.stored, lambda: live or Routing(), retry_s)
    try:
        yield versions
    finally:
        versions.close()


def test_a_pinned_version_loads_in_the_background_with_its_stored_digest() -> None:
    store = Store({"1.0", "1.1"})
    with pinned(store) as versions:
        assert versions.snapshot() == {}
        versions.pin({"1.0"})
        assert versions.wait_until_loaded(10)
        assert set(versions.snapshot()) == {"1.0"}
        assert versions.snapshot()["1.0"].bundle.version == "1.0"
    assert store.loads == [("1.0", "5" * 64)]


def test_the_digest_of_a_record_that_named_the_version_is_the_one_checked() -> None:
    store = Store({"1.0"})
    with pinned(store) as versions:
        versions.offer(update("1.0").model_copy(update={"sha256": "a" * 64}))
        versions.pin({"1.0"})
        assert versions.wait_until_loaded(10)
    assert store.loads == [("1.0", "a" * 64)]


def test_a_version_the_live_routing_holds_is_shared_not_loaded_again() -> None:
    store = Store({"1.0"})
    live = deployment("1.0")
    with pinned(store, Routing(live)) as versions:
        versions.pin({"1.0"})
        assert versions.wait_until_loaded(10)
        assert versions.snapshot()["1.0"] is live
    assert store.loads == []


def test_unpinned_versions_are_dropped_and_a_missing_one_never_blocks_the_others() -> None:
    store = Store({"1.0", "2.0"})
    with pinned(store) as versions:
        versions.pin({"1.0", "9.9"})
        assert not versions.wait_until_loaded(1.0)
        assert set(versions.snapshot()) == {"1.0"}
        versions.pin({"2.0"})
        assert versions.wait_until_loaded(10)
        assert set(versions.snapshot()) == {"2.0"}


def test_a_failed_load_is_tried_again_when_a_record_names_the_version() -> None:
    store = Store({"1.0"})
    store.broken.add("1.0")
    with pinned(store, retry_s=3600) as versions:
        versions.pin({"1.0"})
        assert not versions.wait_until_loaded(1.0)
        store.broken.clear()
        versions.offer(update("1.0"))
        assert versions.wait_until_loaded(10)
    assert [v for v, _ in store.loads] == ["1.0", "1.0"]


def test_closing_stops_the_loader_thread() -> None:
    with pinned(Store(set())) as versions:
        versions.pin({"1.0"})
    assert not any(t.name == "pinned-loader" and t.is_alive() for t in threading.enumerate())
