"""A batch's time texts are the canonical ones (repr), however they are formatted."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.limits import MAX_TIMESTAMP_S, MIN_TIMESTAMP_S
from streams.feature_worker.batch import timestamp_text, timestamp_texts

_TIMES = st.floats(min_value=MIN_TIMESTAMP_S, max_value=MAX_TIMESTAMP_S, exclude_min=True)


@settings(max_examples=300)
@given(st.lists(_TIMES, min_size=1, max_size=50))
def test_the_batch_texts_of_contract_times_are_their_repr(times: list[float]) -> None:
    assert timestamp_texts(times) == list(map(timestamp_text, times))


def test_rounded_whole_and_extreme_contract_times_are_their_repr() -> None:
    base = [MIN_TIMESTAMP_S + 1e-6, 1_795_884_723.653, 1_795_884_723.0, MAX_TIMESTAMP_S]
    times = base + [round(t + n / 7, digits) for t in base[:3] for n in range(50)
                    for digits in (0, 1, 3, 6)]
    times = [t for t in times if MIN_TIMESTAMP_S < t <= MAX_TIMESTAMP_S]
    assert timestamp_texts(times) == list(map(repr, times))


def test_times_outside_the_contract_are_their_repr_too() -> None:
    for times in ([1e-5, 1e16], [1.5e300, 1_795_884_723.0], [math.nan, 1_795_884_723.0],
                  [1_795_884_723.0, math.inf], [MIN_TIMESTAMP_S], []):
        assert timestamp_texts(times) == list(map(repr, times))
