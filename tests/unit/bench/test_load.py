import numpy as np

from bench.load import InteractionDraw
from schemas.events import EventType, InteractionEvent
from schemas.wire import decode


def _draw(chunk: int = 8192) -> InteractionDraw:
    rng = np.random.default_rng(0)
    return InteractionDraw(rng, catalog=1000, users=50, categories=7, chunk=chunk)


def test_payloads_satisfy_the_interaction_contract_and_keep_the_given_times() -> None:
    times = [1_700_000_000.0 + n * 0.125 for n in range(500)]
    payloads = _draw(chunk=64).payloads(times)  # several refills
    events = [decode(InteractionEvent, value) for _, value in payloads]
    assert [e.timestamp for e in events] == times
    for (key, _), event in zip(payloads, events, strict=True):
        assert key == event.user_id
        assert event.session_id == f"{event.user_id}-s"
        assert 0 <= int(event.user_id[1:]) < 50
        item = int(event.item_id[1:])
        assert 0 <= item < 1000
        assert event.context is not None
        assert event.context.category == f"c{item % 7}"
    assert {e.event_type for e in events} == {EventType.VIEW, EventType.CLICK}
    assert len({e.event_id for e in events}) == len(events)


def test_popular_items_dominate_as_in_a_real_catalog() -> None:
    events = [decode(InteractionEvent, v) for _, v in _draw().payloads([1.7e9] * 5000)]
    counts = np.bincount([int(e.item_id[1:]) for e in events], minlength=1000)
    top_share = np.sort(counts)[::-1][:50].sum() / len(events)
    assert top_share > 0.4  # uniform draws would put ~6 % in the top 5 % of items


def test_draws_continue_across_calls_without_repeating() -> None:
    draw = _draw(chunk=10)
    first = [v for _, v in draw.payloads([1.7e9] * 15)]
    second = [v for _, v in draw.payloads([1.7e9] * 15)]
    assert not set(first) & set(second)
