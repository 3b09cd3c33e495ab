"""Hot swap: which model versions serve, loaded in the background and switched atomically.

`model.updates` records (and the scorer's own canary decisions) change the *desired* state, which
is the log's (schemas/model_log.py): the serving version with its fallbacks, and the candidate.
A single loader thread reconciles the *loaded* state towards it, loading bundles off the request
path, then publishes a new immutable `Routing` with one reference assignment. A micro-batch takes
one `snapshot()` and uses it throughout, so every request is answered by a fully loaded version,
and none waits for, or is lost to, a swap. Replaying the topic from the start only moves the
desired state; intermediate versions that are already superseded are never loaded.

Every load checks the bytes against the digest the version's record carries (the loader raises
otherwise); a version that fails is reported (`on_rejected`), never retried for the same record,
and serving falls back to the newest earlier serving version that loads. A version the log no
longer wants (rolled back, retired) leaves the routing the moment its record is applied, before
anything is loaded in its place: no answer comes from a version the log has rolled back.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from schemas.model_log import ModelLog, ServingState
from schemas.model_updates import ModelUpdate
from serving.experiment import Experiment, ExperimentArm
from serving.model_bundle import ModelBundle

logger = logging.getLogger(__name__)

Loader = Callable[[ModelUpdate], ModelBundle]


def canary_split(candidate: str, share: float) -> Experiment:
    """The canary as an experiment of two arms, `serving` and `candidate` (`share` of the users),
    salted by the candidate so that each candidate is tried on a fresh slice of users: the
    assignment of serving/experiment.py, so a user stays on one side across scorers and a larger
    share only moves users onto the candidate."""
    return Experiment(
        name="canary", salt=candidate, arms=(
            ExperimentArm(name="serving", policy="model", weight=1.0 - share),
            ExperimentArm(name="candidate", policy="model", weight=share),
        ),
    )


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
    split: Experiment | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if self.canary is not None and self.canary_share > 0:
            object.__setattr__(self, "split", canary_split(self.canary.version, self.canary_share))

    def route(self, user_id: str) -> tuple[Deployment | None, bool]:
        """The deployment answering this user and whether it is the canary."""
        if self.split is not None and self.split.assign(user_id).name == "candidate":
            return self.canary, True
        return self.serving, False


def _identity(update: ModelUpdate) -> tuple[str, str]:
    """What a loaded bundle is: a version with the bytes of one digest."""
    return update.version, update.sha256


class ModelRegistry:
    def __init__(
        self,
        model_name: str,
        loader: Loader,
        canary_share: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.model_name = model_name
        self._loader = loader
        self._clock = clock
        self._routing = Routing(canary_share=canary_share)
        self._log = ModelLog()
        self._changed = threading.Condition()
        self._announcing = threading.Lock()
        self._busy = False
        self._stop = False
        self._failed: set[tuple[str, str]] = set()
        self.swaps = 0
        self.on_change: Callable[[Routing], None] = lambda _routing: None
        self.on_rejected: Callable[[ModelUpdate, BaseException], None] = lambda _u, _e: None
        """Called for each version whose load failed (its bytes, its files, the model)."""
        self._thread = threading.Thread(target=self._run, name="model-loader", daemon=True)
        self._thread.start()

    def snapshot(self) -> Routing:
        # One attribute read: atomic, and the object it returns is immutable.
        return self._routing

    @property
    def desired(self) -> ServingState:
        with self._changed:
            return self._log.state(self.model_name)

    def apply(self, update: ModelUpdate) -> None:
        """The version's newest record (see schemas/model_log.py)."""
        with self._changed:
            self._log.apply(update)
            self._failed.discard(_identity(update))  # a new record is worth another try
            changed = self._withdraw()
            self._changed.notify_all()
        logger.info(
            "model update model=%s version=%s stage=%s",
            update.model_name, update.version, update.stage,
        )
        self._announce(changed)

    def retire(self, version: str) -> None:
        """The version's key was deleted from the log (a tombstone)."""
        with self._changed:
            self._log.retire(self.model_name, version)
            changed = self._withdraw()
            self._changed.notify_all()
        logger.info("model version retired model=%s version=%s", self.model_name, version)
        self._announce(changed)

    def wait_until_settled(self, timeout_s: float) -> bool:
        """True once the loaded state matches the desired one (for start-up and tests)."""
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

    # -- under the lock ------------------------------------------------------------------------

    def _withdraw(self) -> Routing | None:
        """Drops from the routing what the log no longer wants (the new routing, if any)."""
        current = self._routing
        routing = self._route(_at_hand(current))
        if routing == current:
            return None
        self._routing = routing
        self.swaps += 1
        return routing

    def _route(self, at_hand: dict[tuple[str, str], Deployment]) -> Routing:
        """The routing the log allows with the bundles at hand: serving is the first version of
        its chain that is at hand (a newer one may still be loading), the canary the candidate
        if it is at hand."""
        state = self._log.state(self.model_name)

        def deployed(update: ModelUpdate) -> Deployment | None:
            found = at_hand.get(_identity(update))
            if found is None or found.update == update:
                return found
            return Deployment(update, found.bundle, found.since)  # promotion: same bytes

        serving = next((d for u in state.serving if (d := deployed(u)) is not None), None)
        canary = deployed(state.candidate) if state.candidate is not None else None
        return Routing(serving, canary, self._routing.canary_share)

    def _wanted(self, state: ServingState) -> tuple[ModelUpdate | None, ModelUpdate | None]:
        """The serving version to load (the first of the chain not known to fail) and the
        candidate (unless it failed)."""
        serving = next((u for u in state.serving if _identity(u) not in self._failed), None)
        candidate = state.candidate
        if candidate is not None and _identity(candidate) in self._failed:
            candidate = None
        return serving, candidate

    def _settled(self) -> bool:
        serving, candidate = self._wanted(self._log.state(self.model_name))
        have = self._routing
        return _same(serving, have.serving) and _same(candidate, have.canary)

    # -- the loader thread ---------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._stop and self._settled():
                    self._changed.wait()
                if self._stop:
                    return
                self._busy = True
                wanted = self._wanted(self._log.state(self.model_name))
            try:
                self._reconcile(wanted)
            finally:
                with self._changed:
                    self._busy = False
                    self._changed.notify_all()

    def _reconcile(self, wanted: tuple[ModelUpdate | None, ModelUpdate | None]) -> None:
        at_hand = _at_hand(self._routing)
        for update in wanted:
            if update is not None and _identity(update) not in at_hand:
                deployment = self._load(update)
                if deployment is not None:
                    at_hand[_identity(update)] = deployment
        with self._changed:
            # Routed against the log as it is now: a record applied while loading wins (a
            # version it rolled back is not routed, whatever was loaded).
            base = self._routing
            routing = self._route({**at_hand, **_at_hand(base)})
            changed = routing != base
            if changed:
                self._routing = routing
                self.swaps += 1
        if changed:
            self._announce(routing)

    def _load(self, update: ModelUpdate) -> Deployment | None:
        try:
            bundle = self._loader(update)
        except Exception as error:  # a broken or forged version must never stop serving
            logger.error(
                "model load failed model=%s version=%s error=%s",
                update.model_name, update.version, type(error).__name__,
            )
            with self._changed:
                self._failed.add(_identity(update))
            self.on_rejected(update, error)
            return None
        return Deployment(update, bundle, self._clock())

    def _announce(self, changed: Routing | None) -> None:
        """Tells `on_change` the routing now (not `changed`: two threads may switch it, and
        whichever tells last must tell the newest)."""
        if changed is None:
            return
        with self._announcing:
            routing = self._routing
            logger.info(
                "routing switched serving=%s canary=%s",
                routing.serving.version if routing.serving else None,
                routing.canary.version if routing.canary else None,
            )
            self.on_change(routing)


def _at_hand(routing: Routing) -> dict[tuple[str, str], Deployment]:
    return {_identity(d.update): d for d in (routing.serving, routing.canary) if d is not None}


def _same(want: ModelUpdate | None, have: Deployment | None) -> bool:
    if want is None:
        return have is None
    return have is not None and _identity(have.update) == _identity(want)
