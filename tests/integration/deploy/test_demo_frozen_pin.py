"""The demo re-pins its `frozen` arm to the retrained version through the scorer's run-time
experiment document, against the real redis-server."""

from __future__ import annotations

import redis

from deploy.demo.arms import EXPERIMENT, FrozenPin, experiment_arms
from serving.experiment import Experiment
from serving.features import ServingKeys, parse_document


def _document(client: redis.Redis, prefix: str) -> Experiment | None:
    raw = client.get(ServingKeys(prefix).experiment)
    assert raw is None or isinstance(raw, bytes)
    return parse_document(Experiment, raw)


def test_following_a_retrain_pins_the_frozen_arm_to_it_and_keeps_every_user_in_place(
    redis_admin: redis.Redis, redis_prefix: str
) -> None:
    pin = FrozenPin(redis_admin, redis_prefix, "1.0")
    assert not pin.follow("1.0") and _document(redis_admin, redis_prefix) is None

    assert pin.follow("2.0")
    experiment = _document(redis_admin, redis_prefix)
    assert experiment is not None and experiment.name == EXPERIMENT
    assert experiment.pinned == {"2.0"}
    # The scorer starts with frozen at 1.0 (scenario._experiment); the document keeps the name
    # and the arms, so every user stays in the arm they were in.
    configured = Experiment.model_validate({"name": EXPERIMENT, "arms": experiment_arms("1.0")})
    users = [f"u{n}" for n in range(200)]
    assert [experiment.assign(u).name for u in users] == [configured.assign(u).name for u in users]
    assert not pin.follow("2.0")
