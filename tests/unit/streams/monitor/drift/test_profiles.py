from pathlib import Path

import pytest

from schemas.events import EventContext, EventType, InteractionEvent
from streams.monitor.drift.profiles import FeatureProfile, price_bucket, psi_by_feature

NOW = 1_750_000_000.0


def event(n: int, kind: EventType, device: str | None = "web", price: float | None = 10.0) -> (
    InteractionEvent
):
    return InteractionEvent(
        event_id=f"e{n}", user_id="u1", session_id="s1", item_id="i1", event_type=kind,
        timestamp=NOW + n,
        context=EventContext(device=device, price=price),
    )


def mix(views: int, clicks: int, device: str | None = "web") -> FeatureProfile:
    events = [event(i, EventType.VIEW, device) for i in range(views)]
    events += [event(views + i, EventType.CLICK, device) for i in range(clicks)]
    return FeatureProfile.of(events)


def test_a_sample_like_the_reference_is_stable() -> None:
    result = psi_by_feature(mix(800, 200), mix(400, 100))
    assert set(result) == {"event_type", "device", "source", "price"}
    assert max(result.values()) < 1e-9


def test_a_changed_event_mix_shows_in_event_type_only() -> None:
    result = psi_by_feature(mix(800, 200), mix(300, 700))
    assert result["event_type"] > 0.25
    assert result["device"] < 1e-9


def test_bins_the_reference_never_saw_are_pooled_and_count_as_shift() -> None:
    result = psi_by_feature(mix(800, 200, device="web"), mix(800, 200, device="tv"))
    assert result["device"] > 0.25


def test_price_buckets_are_ordered_and_missing_prices_have_their_own_bin() -> None:
    assert price_bucket(None) == "none"
    assert price_bucket(0.5) == "p0"
    assert price_bucket(7.0) == "p2"
    assert price_bucket(1e6) == "p9"


def test_a_saved_reference_loads_back_identically(tmp_path: Path) -> None:
    profile = mix(30, 10)
    path = tmp_path / "reference.json"
    profile.save(path)
    loaded = FeatureProfile.load(path)
    assert loaded.events == 40
    assert loaded.counts == profile.counts


def test_a_reference_of_another_format_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "reference.json"
    path.write_text('{"format_version": 99, "events": 0, "features": {}}')
    with pytest.raises(ValueError, match="unsupported"):
        FeatureProfile.load(path)
