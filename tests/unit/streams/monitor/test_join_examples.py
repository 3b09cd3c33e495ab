"""The windowed join's ranker side: logged features labelled by the acts attributed to them."""

import numpy as np

from schemas.events import EventType
from schemas.ranker_examples import RankerExample
from streams.monitor.join import AnswerJoin

from .records import T0, interaction, served_features

WINDOW = 60.0


def labeller(max_pending: int = 1000) -> AnswerJoin:
    return AnswerJoin(WINDOW, k=10, max_pending=max_pending)


def closed(lab: AnswerJoin) -> list[RankerExample]:
    return [c.example for c in lab.expire(T0 + 10 * WINDOW) if c.example is not None]


def test_logged_candidates_are_graded_by_the_strongest_act_and_the_rest_are_negatives() -> None:
    lab = labeller()
    lab.add_features(served_features("r1", candidates=("a", "b", "c", "d", "e")))
    lab.add_interaction(interaction("a", T0 + 5), watermark=T0)
    lab.add_interaction(interaction("a", T0 + 6, EventType.PURCHASE), watermark=T0)
    lab.add_interaction(interaction("b", T0 + 7, EventType.ADD_TO_CART), watermark=T0)
    lab.add_interaction(interaction("c", T0 + 8, EventType.VIEW), watermark=T0)
    lab.add_interaction(interaction("d", T0 + 9), watermark=T0)  # logged, not shown
    [example] = closed(lab)
    assert example.candidates == ["a", "b", "c", "d", "e"]
    assert example.grades == [3, 2, 0, 1, 0]
    matrix, grades = example.graded()
    assert grades == [3, 2, 0, 1, 0]
    np.testing.assert_array_equal(matrix, [[n, n + 0.5] for n in range(5)])
    assert example.labelled_at == T0 + WINDOW and example.feature_set == "test-set"


def test_an_act_naming_no_request_labels_the_latest_answer_that_logged_it_shown_or_not() -> None:
    lab = labeller()
    lab.add_features(served_features("r1", shown=("a", "b")))
    lab.add_features(served_features("r2", shown=("c",), served_at=T0 + 1))
    lab.add_features(served_features("r3", candidates=("x", "y"), shown=("x",), served_at=T0 + 2))
    lab.add_interaction(interaction("a", T0 + 3), watermark=T0)  # r1 showed it, r2 is newer
    lab.add_interaction(interaction("d", T0 + 3), watermark=T0)  # shown by neither
    first, second, third = closed(lab)
    assert (first.request_id, first.grades) == ("r1", [0, 0, 0, 0])
    assert (second.request_id, second.grades) == ("r2", [1, 0, 0, 1])
    assert (third.request_id, third.grades) == ("r3", [0, 0])  # did not log them


def test_acts_outside_the_window_or_by_others_are_no_labels() -> None:
    lab = labeller()
    lab.add_features(served_features("r1"))
    lab.add_interaction(interaction("a", T0 + WINDOW + 1, event_id="e1"), watermark=T0)
    lab.add_interaction(interaction("b", T0 + 1, user="someone-else", event_id="e2"),
                        watermark=T0)
    lab.add_interaction(interaction("c", T0 - 1, event_id="e3"), watermark=T0 - 10)
    [example] = closed(lab)
    assert example.grades == [0, 0, 0, 0]


def test_an_act_read_before_the_logged_features_still_labels_them() -> None:
    lab = labeller()
    assert lab.add_interaction(interaction("b", T0 + 3), watermark=T0)  # kept for later
    lab.add_features(served_features("r1"))
    [example] = closed(lab)
    assert example.grades == [0, 1, 0, 0]


def test_an_act_naming_its_request_labels_that_answer_only() -> None:
    lab = labeller()
    lab.add_features(served_features("r1"))
    lab.add_features(served_features("r2", served_at=T0 + 1))
    lab.add_interaction(interaction("a", T0 + 5, request_id="r1"), watermark=T0)
    first, second = closed(lab)
    assert (first.request_id, first.grades) == ("r1", [1, 0, 0, 0])
    assert (second.request_id, second.grades) == ("r2", [0, 0, 0, 0])


def test_examples_wait_for_the_window_and_redeliveries_count_once() -> None:
    lab = labeller()
    assert lab.add_features(served_features("r1"))
    assert not lab.add_features(served_features("r1"))
    assert lab.expire(T0 + WINDOW / 2) == []
    assert len(closed(lab)) == 1 and len(lab) == 0


def test_an_answer_that_showed_only_backfill_still_labels_its_logged_candidates() -> None:
    lab = labeller()
    lab.add_features(served_features("r1", shown=("backfill",)))
    lab.add_interaction(interaction("c", T0 + 2), watermark=T0)
    [example] = closed(lab)
    assert example.candidates == ["a", "b", "c", "d"] and example.grades == [0, 0, 1, 0]


def test_memory_is_bounded_by_labelling_the_oldest_early() -> None:
    lab = labeller(max_pending=2)
    for n in range(4):
        lab.add_features(served_features(f"r{n}", served_at=T0 + n))
    early = lab.expire(T0)
    assert [c.answer.request_id for c in early] == ["r0", "r1"] and lab.evicted_early == 2
