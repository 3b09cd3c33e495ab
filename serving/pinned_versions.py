"""The model versions experiment arms pin (policy `frozen`), loaded beside the live ones.

A pinned version serves its arm for as long as the experiment pins it, whatever the live
versions do; the registry (serving/registry.py) knows nothing of it. Loads run on a thread of
their own, off the request path, the way the registry loads: a batch takes one `snapshot()`
and never waits. Until a pinned version is loaded (or when it cannot be), its arm's users get
the popularity answer and stay counted in their arm.

Which bytes: a version's `model.updates` record carries its digest, and the scorer loads from
its own store and checks it (the updates loop offers every record of the model here). A
version no record named since the scorer started (a compacted log keeps only the newest
records) is loaded with the digest its store holds. When the live routing already holds the
version, its loaded bundle is shared, not loaded twice. A version that failed to load is tried
again after `retry_s`, or at once when a record names it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping

from schemas.model_updates import ModelUpdate
from serving.model_bundle import ModelBundle
from serving.registry import Deployment, Routing

logger = logging.getLogger(__name__)

RECORDS_KEPT = 256
"""Newest versions whose `model.updates` record is remembered (a version pinned later finds
its digest there)."""


class PinnedVersions:
    def __init__(
        self,
        loader: Callable[[ModelUpdate], ModelBundle],
        stored: Callable[[str], ModelUpdate | None],
        live: Callable[[], Routing],
        retry_s: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`loader` loads the version an update names (checking its digest); `stored` makes
        the update of a version from the model store alone (None: not stored); `live` is the
        registry's routing snapshot."""
        self._loader = loader
        self._stored = stored
        self._live = live
        self._retry_s = retry_s
        self._clock = clock
        self._wanted: frozenset[str] = frozenset()
        self._loaded: Mapping[str, Deployment] = {}
        self._records: OrderedDict[str, ModelUpdate] = OrderedDict()
        self._failed: dict[str, float] = {}
        self._changed = threading.Condition()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="pinned-loader", daemon=True)
        self._thread.start()

    def snapshot(self) -> Mapping[str, Deployment]:
        """The loaded pinned versions by version (one attribute read; never mutated)."""
        return self._loaded

    def pin(self, versions: Iterable[str]) -> None:
        """Serve exactly these versions from now on: new ones load in the background, the
        others are dropped."""
        wanted = frozenset(versions)
        with self._changed:
            if wanted == self._wanted:
                return
            self._wanted = wanted
            self._loaded = {v: d for v, d in self._loaded.items() if v in wanted}
            self._changed.notify_all()
        logger.info("pinned versions=%s", sorted(wanted))

    def offer(self, update: ModelUpdate) -> None:
        """A `model.updates` record of the served model: the digest of its version."""
        with self._changed:
            self._records[update.version] = update
            self._records.move_to_end(update.version)
            while len(self._records) > RECORDS_KEPT:
                self._records.popitem(last=False)
            if self._failed.pop(update.version, None) is not None:
                self._changed.notify_all()

    def wait_until_loaded(self, timeout_s: float) -> bool:
        """True once every pinned version is loaded (for tests and start-up)."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not self._wanted <= self._loaded.keys():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(remaining)
        return True

    def close(self) -> None:
        with self._changed:
            self._stop = True
            self._changed.notify_all()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while True:
            with self._changed:
                missing = self._missing()
                while not self._stop and not missing:
                    self._changed.wait(self._retry_s if self._failed else None)
                    missing = self._missing()
                if self._stop:
                    return
                version = missing[0]
                record = self._records.get(version)
            deployment = self._deployment(version, record)
            with self._changed:
                if deployment is None:
                    self._failed[version] = self._clock()
                elif version in self._wanted:
                    self._loaded = {**self._loaded, version: deployment}
                self._changed.notify_all()

    def _missing(self) -> list[str]:
        """Pinned versions to load now: not loaded, and not failed within `retry_s`."""
        now = self._clock()
        return sorted(
            v for v in self._wanted - self._loaded.keys()
            if now - self._failed.get(v, -self._retry_s) >= self._retry_s
        )

    def _deployment(self, version: str, record: ModelUpdate | None) -> Deployment | None:
        live = self._live()
        for deployment in (live.serving, live.canary):
            if deployment is not None and deployment.version == version:
                return deployment
        try:
            update = record or self._stored(version)
            if update is None:
                logger.error("pinned version not in the store version=%s", version)
                return None
            return Deployment(update, self._loader(update), self._clock())
        except Exception as error:  # a broken checkpoint must never stop serving
            logger.error("pinned version not loaded version=%s error=%s", version,
                         type(error).__name__)
            return None
