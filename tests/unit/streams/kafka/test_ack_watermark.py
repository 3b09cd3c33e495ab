"""The producer's acknowledgement watermark passes a record only once all before it are in."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streams.kafka.producer import AckWatermark


def test_a_report_above_a_gap_waits_for_the_gap_to_close() -> None:
    watermark = AckWatermark()
    watermark.reported(2)
    watermark.reported(3)
    assert watermark.through == 0
    watermark.reported(1)
    assert watermark.through == 3


@given(st.permutations(list(range(1, 40))), st.integers(0, 39))
def test_the_watermark_is_the_longest_run_of_reports_from_one(
    order: list[int], reported: int
) -> None:
    watermark = AckWatermark()
    for sequence in order[:reported]:
        watermark.reported(sequence)
    seen = set(order[:reported])
    expected = 0
    while expected + 1 in seen:
        expected += 1
    assert watermark.through == expected
