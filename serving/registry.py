"""Hot swap: which model versions serve, loaded in the background and switched atomically.

`model.updates` records (and the scorer's own canary decisions) change the *desired* state: the
serving update and the candidate (canary) update. A single loader thread reconciles the *loaded*
state towards it, loading bundles off the request path, then publishes a new immutable `Routing`
with one reference assignment. A micro-batch takes one `snapshot()` and uses it throughout, so
every request is answered by a fully loaded version, and none waits for, or is lost to, a swap.
Replaying the topic from the start only moves the desired state; intermediate versions that are
already superseded are never loaded.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from schemas.model_updates import ModelUpdate, version_key
from serving.model_bundle import ModelBundle

logger = logging.getLogger(__name__)

Loader = Callable[[ModelUpdate], ModelBundle]
_HASH_SPACE = float(2**64)


def canary_bucket(user_id: str, salt: str) -> float:
    """A stable position in [0, 1) per user; salted by the candidate so that each candidate
    is tried on a fresh slice of users rather than always the same ones."""
    digest = hashlib.blake2b(f"{salt}:{user_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / _HASH_SPACE


@dataclass(frozen=True)
class Deployment:
    update: ModelUpdate
    bundle: ModelBundle
    since: float

    @property
    def version(self) -> str:
        return self.update.version


@dataclass(frozen=True)
class Routing:
    serving: Deployment | None = None
    canary: Deployment | None = None
    canary_share: float = 0.0

    def route(self, user_id: str) -> tuple[Deployment | None, bool]:
        """The deployment answering this user and whether it is the canary."""
        if self.canary is not None and canary_bucket(user_id, self.canary.version) < (
            self.canary_share
        ):
            return self.canary, True
        return self.serving, False


@dataclass(frozen=True)
class Desired:
    serving: ModelUpdate | None = None
    canary: ModelUpdate | None = None
    previous: tuple[ModelUpdate, ...] = ()
    """Earlier serving updates, newest last: where a rollback of the serving version returns."""


def forward(state: Desired, update: ModelUpdate) -> bool:
    """Whether the update may move the desired state: serving versions only move forward unless
    the record is an explicit rollback of the version serving now; a candidate must be newer
    than what serves and than the candidate it replaces. Marking a version rolled back is
    always allowed (it only ever returns to versions that served before)."""
    key = version_key(update.version)
    serving, canary = state.serving, state.canary
    if update.stage == "serving":
        if serving is None or key >= version_key(serving.version):
            return True
        return update.rollback_from == serving.version
    if update.stage == "candidate":
        newer_than_serving = serving is None or key > version_key(serving.version)
        return newer_than_serving and (canary is None or key >= version_key(canary.version))
    return True


def desire(state: Desired, update: ModelUpdate) -> Desired:
    """The desired state after one update (pure; replay-safe)."""
    if not forward(state, update):
        return state
    version = update.version
    if update.stage == "serving":
        if state.serving is not None and state.serving.version == version:
            return state
        previous = state.previous if state.serving is None else (*state.previous, state.serving)
        if update.rollback_from is not None:
            previous = tuple(p for p in previous if version_key(p.version) < version_key(version))
        canary = state.canary
        if canary is not None and version_key(canary.version) <= version_key(version):
            canary = None
        return Desired(update, canary, previous[-8:])
    if update.stage == "candidate":
        if state.serving is not None and state.serving.version == version:
            return state
        return replace(state, canary=update)
    # rolled_back
    canary = None if state.canary and state.canary.version == version else state.canary
    serving, previous = state.serving, state.previous
    if serving is not None and serving.version == version:
        previous = tuple(p for p in previous if p.version != version)
        serving, previous = (previous[-1], previous[:-1]) if previous else (None, ())
    return Desired(serving, canary, previous)


class ModelRegistry:
    def __init__(self, loader: Loader, canary_share: float, clock: Callable[[], float] = time.time):
        self._loader = loader
        self._clock = clock
        self._routing = Routing(canary_share=canary_share)
        self._desired = Desired()
        self._changed = threading.Condition()
        self._busy = False
        self._stop = False
        self._failed: set[str] = set()
        self.swaps = 0
        self.refused = 0
        """Updates that would have moved a version backward without naming a rollback."""
        self.on_change: Callable[[Routing], None] = lambda _routing: None
        self._thread = threading.Thread(target=self._run, name="model-loader", daemon=True)
        self._thread.start()

    def snapshot(self) -> Routing:
        # One attribute read: atomic, and the object it returns is immutable.
        return self._routing

    @property
    def desired(self) -> Desired:
        return self._desired

    def apply(self, update: ModelUpdate) -> bool:
        """Moves the desired state; False when the update was refused (see `forward`)."""
        with self._changed:
            if not forward(self._desired, update):
                self.refused += 1
                logger.warning(
                    "model update refused model=%s version=%s stage=%s reason=backward",
                    update.model_name, update.version, update.stage,
                )
                return False
            self._desired = desire(self._desired, update)
            self._failed.discard(update.version)
            self._changed.notify_all()
        logger.info(
            "model update model=%s version=%s stage=%s",
            update.model_name, update.version, update.stage,
        )
        return True

    def wait_until_settled(self, timeout_s: float) -> bool:
        """True once the loaded state matches the desired one (for tests and start-up)."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while self._busy or not self._settled():
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

    def _settled(self) -> bool:
        want, have = self._desired, self._routing
        return _same(want.serving, have.serving, self._failed) and _same(
            want.canary, have.canary, self._failed
        )

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._stop and self._settled():
                    self._changed.wait()
                if self._stop:
                    return
                self._busy = True
                desired = self._desired
            try:
                self._reconcile(desired)
            finally:
                with self._changed:
                    self._busy = False
                    self._changed.notify_all()

    def _reconcile(self, desired: Desired) -> None:
        current = self._routing
        serving = None
        # A serving version that fails to load falls back to the newest earlier one that loads.
        for want in (desired.serving, *reversed(desired.previous)):
            serving = self._deployment(want, current)
            if serving is not None or want is None:
                break
        canary = self._deployment(desired.canary, current)
        routing = Routing(serving, canary, current.canary_share)
        if routing != current:
            self._routing = routing
            self.swaps += 1
            logger.info(
                "routing switched serving=%s canary=%s",
                serving.version if serving else None, canary.version if canary else None,
            )
            self.on_change(routing)

    def _deployment(self, update: ModelUpdate | None, current: Routing) -> Deployment | None:
        if update is None:
            return None
        for loaded in (current.serving, current.canary):
            if loaded is not None and loaded.version == update.version:
                # Promotion reuses the canary's bundle: no reload, no pause.
                return loaded if loaded.update == update else replace(loaded, update=update)
        if update.version in self._failed:
            return None
        try:
            bundle = self._loader(update)
        except Exception as error:  # a broken checkpoint must never stop serving
            logger.error(
                "model load failed version=%s error=%s", update.version, type(error).__name__
            )
            with self._changed:
                self._failed.add(update.version)
            return None
        return Deployment(update, bundle, self._clock())


def _same(want: ModelUpdate | None, have: Deployment | None, failed: set[str]) -> bool:
    if want is None:
        return have is None
    if want.version in failed:
        return True
    return have is not None and have.version == want.version
