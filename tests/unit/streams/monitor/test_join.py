"""The windowed join's KPI side: each response with the acts credited to it in the attribution
window, judged by the monitor's hit (docs/architecture.md, "What a hit is")."""

from schemas.events import EventType
from streams.monitor.join import AnswerJoin, ResponseOutcome

from .records import T0, error_response, interaction, response

WINDOW_S = 600.0


def join(k: int = 10, max_pending: int = 1000) -> AnswerJoin:
    return AnswerJoin(window_s=WINDOW_S, k=k, max_pending=max_pending)


def outcomes_after(j: AnswerJoin) -> list[ResponseOutcome]:
    return [c.outcome for c in j.expire(T0 + 100 * WINDOW_S) if c.outcome is not None]


def test_a_click_on_a_recommended_item_is_a_hit_and_a_click_through() -> None:
    j = join()
    j.add_response(response("r1"))
    assert j.add_interaction(interaction("b", T0 + 30), watermark=T0)
    [outcome] = outcomes_after(j)
    assert (outcome.hit, outcome.clicked, outcome.converted) == (True, True, False)


def test_a_purchase_is_a_hit_and_a_conversion_but_not_a_click() -> None:
    j = join()
    j.add_response(response("r1"))
    j.add_interaction(interaction("a", T0 + 30, EventType.PURCHASE), watermark=T0)
    [outcome] = outcomes_after(j)
    assert (outcome.hit, outcome.clicked, outcome.converted) == (True, False, True)


def test_views_other_items_other_users_and_out_of_window_events_are_not_hits() -> None:
    j = join()
    j.add_response(response("r1", served_at=T0))
    misses = [
        interaction("a", T0 + 30, EventType.VIEW, event_id="e1"),
        interaction("z", T0 + 30, event_id="e2"),
        interaction("a", T0 + 30, user="u2", event_id="e3"),
        interaction("a", T0 - 1, event_id="e4"),
        interaction("a", T0 + WINDOW_S + 1, event_id="e5"),
    ]
    for event in misses:
        j.add_interaction(event, watermark=T0 + WINDOW_S + 10)
    [outcome] = outcomes_after(j)
    assert not outcome.hit


def test_only_the_top_k_items_can_be_hits() -> None:
    j = join(k=2)
    j.add_response(response("r1", items=("a", "b", "c")))
    j.add_interaction(interaction("c", T0 + 5), watermark=T0)
    [outcome] = outcomes_after(j)
    assert not outcome.hit


def test_any_act_on_a_top_k_item_in_the_window_is_a_hit_not_only_the_next() -> None:
    j = join()
    j.add_response(response("r1", items=("a", "b", "c")))
    j.add_interaction(interaction("z", T0 + 5, event_id="e1"), watermark=T0)
    j.add_interaction(interaction("b", T0 + 9, event_id="e2"), watermark=T0)
    [outcome] = outcomes_after(j)
    assert outcome.hit


def test_the_most_recent_matching_response_gets_the_credit() -> None:
    j = join()
    j.add_response(response("r1", served_at=T0))
    j.add_response(response("r2", served_at=T0 + 10))
    j.add_interaction(interaction("a", T0 + 20), watermark=T0)
    hits = {o.served_at: o.hit for o in outcomes_after(j)}
    assert hits == {T0: False, T0 + 10: True}


def test_the_last_touch_is_among_answers_that_showed_the_item_in_the_top_k() -> None:
    j = join(k=2)
    j.add_response(response("r1", served_at=T0, items=("a", "b")))
    j.add_response(response("r2", served_at=T0 + 10, items=("b", "c", "a")))
    j.add_interaction(interaction("a", T0 + 20), watermark=T0)
    hits = {o.served_at: o.hit for o in outcomes_after(j)}
    assert hits == {T0: True, T0 + 10: False}


def test_an_early_click_credits_only_one_late_response() -> None:
    j = join()
    j.add_interaction(interaction("a", T0 + 20), watermark=T0)
    j.add_response(response("r1", served_at=T0))
    j.add_response(response("r2", served_at=T0 + 5))
    assert sum(o.hit for o in outcomes_after(j)) == 1


def test_an_event_naming_its_request_counts_for_that_response_only() -> None:
    j = join()
    j.add_response(response("r1", served_at=T0))
    j.add_response(response("r2", served_at=T0 + 10))
    j.add_interaction(interaction("a", T0 + 20, request_id="r1"), watermark=T0)
    hits = {o.served_at: o.hit for o in outcomes_after(j)}
    assert hits == {T0: True, T0 + 10: False}


def test_a_click_read_before_its_response_is_credited_when_the_response_arrives() -> None:
    j = join()
    assert j.add_interaction(interaction("a", T0 + 20), watermark=T0)
    assert j.acts == 1
    j.add_response(response("r1", served_at=T0))
    [outcome] = outcomes_after(j)
    assert outcome.hit
    assert j.acts == 0


def test_acts_counted_twice_by_a_redelivery_count_once() -> None:
    j = join()
    j.add_response(response("r1"))
    assert j.add_interaction(interaction("a", T0 + 20), watermark=T0)
    assert not j.add_interaction(interaction("a", T0 + 20), watermark=T0)
    assert j.acts == 1


def test_clicks_behind_the_watermark_are_kept_only_for_open_answers() -> None:
    j = join()
    assert not j.add_interaction(interaction("a", T0 + 20), watermark=T0 + 100)
    j.add_response(response("r1", served_at=T0))
    assert j.add_interaction(interaction("a", T0 + 21, event_id="e2"), watermark=T0 + 100)


def test_error_answers_empty_lists_and_redeliveries_are_not_attributed() -> None:
    j = join()
    assert not j.add_response(error_response("r0"))
    assert not j.add_response(response("r1", items=()))
    assert j.add_response(response("r2"))
    assert not j.add_response(response("r2"))
    assert len(j) == 1


def test_responses_leave_the_join_once_their_window_closes() -> None:
    j = join()
    j.add_response(response("r1", served_at=T0))
    j.add_response(response("r2", served_at=T0 + 100))
    assert [c.answer.served_at for c in j.expire(T0 + WINDOW_S + 1)] == [T0]
    assert len(j) == 1
    assert j.oldest_served_at == T0 + 100
    assert [c.answer.served_at for c in j.expire(T0 + WINDOW_S + 101)] == [T0 + 100]
    assert len(j) == 0
    assert j.oldest_served_at is None


def test_memory_is_bounded_by_finalising_the_oldest_early() -> None:
    j = join(max_pending=100)
    for n in range(150):
        j.add_response(response(f"r{n}", user=f"u{n}", served_at=T0 + n))
    early = j.expire(T0)
    assert len(j) == 100
    assert j.evicted_early == 50
    assert [c.answer.served_at for c in early] == [T0 + n for n in range(50)]


def test_unversioned_answers_are_charged_to_their_strategy() -> None:
    j = join()
    j.add_response(response("r1", version=None))
    [outcome] = outcomes_after(j)
    assert outcome.model_version == "unversioned-model"


def test_one_answer_closes_once_with_both_its_kpi_outcome_and_its_example() -> None:
    from .records import served_features

    j = join(k=3)
    j.add_response(response("r1"))
    j.add_features(served_features("r1"))
    j.add_interaction(interaction("b", T0 + 5), watermark=T0)
    [closed] = j.expire(T0 + 100 * WINDOW_S)
    assert closed.outcome is not None and closed.outcome.hit
    assert closed.example is not None and closed.example.grades == [0, 1, 0, 0]
