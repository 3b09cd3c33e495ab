from __future__ import annotations

import math

from streams.features.feature_set import DENSE_FEATURES, UNKNOWN_DURATION_S, FeatureSet
from streams.features.views import (
    ItemFeatures,
    Rates,
    SequenceEntry,
    SessionFeatures,
    TimeFeatures,
    UserFeatures,
    WindowCounts,
)


def _features() -> FeatureSet:
    user = UserFeatures(
        "u1",
        True,
        Rates(views=3),
        WindowCounts(1, 2, 3),
        10.0,
        None,
        5.0,
        {"c1": 0.75},
        (SequenceEntry("i1", 1.0, "view"),),
        100.0,
    )
    session = SessionFeatures(
        "s1", True, 2, 30.0, 10.0, 30.0, 30.0, 30.0, (SequenceEntry("i1", 1.0, "view"),), 100.0
    )
    items = (
        ItemFeatures("i1", True, "c1", Rates(views=9, ctr=0.2, cvr=0.1), WindowCounts(), 5.0, 99.0),
        ItemFeatures("i2", False, None, Rates(), WindowCounts(), None, None),
    )
    return FeatureSet(0.0, TimeFeatures.at(0.0), user, session, items, 100.0)


def test_every_row_follows_the_documented_layout() -> None:
    rows = _features().dense()
    assert [len(r) for r in rows] == [len(DENSE_FEATURES)] * 2
    first = dict(zip(DENSE_FEATURES, rows[0], strict=True))
    assert first["user_category_affinity"] == 0.75
    assert first["item_in_session"] == first["item_in_user_history"] == 1.0
    assert first["item_ctr"] == 0.2
    assert first["user_log_s_since_purchase"] == math.log1p(UNKNOWN_DURATION_S)
    second = dict(zip(DENSE_FEATURES, rows[1], strict=True))
    assert second["item_in_session"] == 0.0
    assert second["item_log_s_since_event"] == math.log1p(UNKNOWN_DURATION_S)


def test_midnight_thursday_is_the_top_of_the_circle() -> None:
    t = TimeFeatures.at(0.0)  # 1970-01-01 00:00 UTC, a Thursday
    assert (t.hour_sin, t.hour_cos) == (0.0, 1.0)
    assert math.isclose(t.dow_cos, math.cos(2 * math.pi * 3 / 7))
