"""The published ranker the ranking stage uses: loaded from the model store, swapped whole.

The online trainer publishes a ranker version only when the gate promoted it
(online_trainer.ranker_training); its `ModelUpdate` names the version and its digest, and the
scorer loads from its own store root and checks the digest before it uses a byte, as for the
session model. Versions only move forward (a rollback names the version it replaces). A version
that fails to load, or whose feature set is not the one the scorer computes, is refused and
the current one (or retrieval order) stays: the scorer never serves a ranker that would read
vectors it was not trained on. A ranker re-orders only the candidates of the retrieval major
version the gate judged it on (`retriever_major` in its manifest); other groups are served in
retrieval order.
"""

from __future__ import annotations

import logging
import threading

from models.logged_ranker import LoggedRanker
from models.point_in_time import SERVING_FEATURE_SET
from models.store import ModelStore
from schemas.model_updates import ModelUpdate, version_key
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
    """Holds the current published ranker; `current` is what the scorer snapshots per batch."""

    def __init__(self, store: ModelStore) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._current: PublishedRanker | None = None

    def current(self) -> PublishedRanker | None:
        return self._current

    def apply(self, update: ModelUpdate) -> bool:
        """Serve `update`'s version; False when refused (older, not for serving, unloadable)."""
        if update.stage != "serving":
            return False
        with self._lock:
            have = self._current
            if have is not None and update.rollback_from != have.version and (
                version_key(update.version) <= version_key(have.version)
            ):
                return False
            try:
                loaded = load_ranker(self._store, update)
            except (ValueError, OSError) as error:
                logger.error("ranker refused version=%s error=%s", update.version,
                             type(error).__name__)
                return False
            self._current = loaded
        logger.info("ranker serving version=%s", update.version)
        return True
