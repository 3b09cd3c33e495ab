"""The writer's function calls carry the updates as msgpack-python would pack them."""

from __future__ import annotations

import msgpack

from deploy.generators.sample import SampleConfig, SampleGenerator
from streams.feature_worker.batch import PositionedEvent
from streams.feature_worker.fold import entity_updates
from streams.feature_worker.writer import function_call, pack_calls
from streams.features.keys import FeatureKeys


def test_a_call_packs_its_updates_as_msgpack_packb_does() -> None:
    events = SampleGenerator(SampleConfig(seed=3)).events(2000)
    batch = [PositionedEvent(n % 4, n, event, 1_700_000_000_000 + n) for n, event in
             enumerate(events)]
    updates = list(entity_updates(FeatureKeys("t:"), batch, 100))
    calls = pack_calls(updates, lambda _: 0, 100, 8)
    assert {u.kind for u in updates} == set("usicp")
    for call in calls:
        command = function_call("f", ("1", "2"), call)
        assert command[3 : 3 + len(call)] == tuple(u.key for u in call)
        assert command[-1] == msgpack.packb([(u.kind, *u.values) for u in call])
