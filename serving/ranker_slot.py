"""The published ranker the ranking stage uses: loaded from the model store, swapped whole.

The online trainer publishes a ranker version only when the gate promoted it
(online_trainer.ranker_training); its `ModelUpdate` names the version and its digest, and the
scorer loads from its own store root and checks the digest before it uses a byte, as for the
session model, and serves what the log says serves (a rollback is a `rolled_back` record for
the version it removes). A version that fails to load, or whose feature set is not the one the
scorer computes, is refused, and the newest earlier serving version that loads serves instead
(or retrieval order): the scorer never serves a ranker that would read vectors it was not
trained on. A ranker re-orders only the candidates of the retrieval major
version the gate judged it on (`retriever_major` in its manifest); other groups are served in
retrieval order.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from models.logged_ranker import LoggedRanker
from models.point_in_time import SERVING_FEATURE_SET
from models.store import ModelStore
from schemas.model_log import ModelLog
from schemas.model_updates import ModelUpdate
from serving.feature_log import PublishedRanker

logger = logging.getLogger(__name__)


def load_ranker(store: ModelStore, update: ModelUpdate) -> PublishedRanker:
    """The ranker version `update` announces; IntegrityError / ValueError / OSError when the
    stored version is not that or cannot serve."""
    tensors, manifest = store.load(update.model_name, update.version, update.sha256)
    feature_set = manifest.config.get("feature_set")
    if feature_set != SERVING_FEATURE_SET:
        raise ValueError(f"ranker reads feature set {feature_set}, the scorer computes "
                         f"{SERVING_FEATURE_SET}")
    retriever = manifest.config.get("retriever_major")
    if retriever is not None and not isinstance(retriever, str):
        raise ValueError("retriever_major must be a version's major part")
    ranker = LoggedRanker.from_tensors(tensors, manifest.config)
    ranker.capture()
    return PublishedRanker(update.version, ranker, retriever_major=retriever)


class RankerSlot:
    """Holds the current published ranker; `current` is what the scorer snapshots per batch.

    Which version serves is the log's (schemas/model_log.py): the newest `serving` record of the
    ranker model, or, when its load fails, the newest earlier one that loads."""

    def __init__(
        self,
        store: ModelStore,
        model_name: str,
        on_rejected: Callable[[ModelUpdate, BaseException], None] = lambda _u, _e: None,
    ) -> None:
        self._store = store
        self._model_name = model_name
        self._on_rejected = on_rejected
        self._lock = threading.Lock()
        self._log = ModelLog()
        self._failed: set[tuple[str, str]] = set()
        self._current: PublishedRanker | None = None
        self._current_update: ModelUpdate | None = None
        self.since = 0.0
        """When the current version started serving (wall clock)."""

    def current(self) -> PublishedRanker | None:
        return self._current

    def current_update(self) -> ModelUpdate | None:
        """The record the current version serves under (None: retrieval order)."""
        return self._current_update

    def apply(self, update: ModelUpdate) -> bool:
        """The version's newest record; True when another ranker (or none) serves now."""
        with self._lock:
            self._log.apply(update)
            self._failed.discard((update.version, update.sha256))
            return self._reconcile()

    def retire(self, version: str) -> bool:
        with self._lock:
            self._log.retire(self._model_name, version)
            return self._reconcile()

    def _reconcile(self) -> bool:
        have = self._current_update
        for update in self._log.state(self._model_name).serving:
            identity = (update.version, update.sha256)
            if identity in self._failed:
                continue
            if have is not None and (have.version, have.sha256) == identity:
                return False
            try:
                loaded = load_ranker(self._store, update)
            except (ValueError, OSError) as error:
                logger.error("ranker refused version=%s error=%s", update.version,
                             type(error).__name__)
                self._failed.add(identity)
                self._on_rejected(update, error)
                continue
            self._current, self._current_update = loaded, update
            self.since = time.time()
            logger.info("ranker serving version=%s", update.version)
            return True
        changed = self._current is not None
        self._current = self._current_update = None
        if changed:
            logger.warning("no ranker serves: none of the log's versions loads")
        return changed
