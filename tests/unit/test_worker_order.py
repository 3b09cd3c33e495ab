"""The order `make test` hands xdist: `alone` tests open the first worker's share, `long` ones
the others' shares behind a few quick tests, and nothing is lost or repeated."""

from __future__ import annotations

from tests.worker_sharing import QUICK_OPENERS, worker_order

TESTS = [f"tests/integration/i{i}" for i in range(40)] + [f"tests/unit/u{i}" for i in range(60)]
ALONE = {"tests/integration/i5", "tests/integration/i30"}
LONG = {f"tests/integration/i{i}" for i in (1, 2, 3, 30)}


def _order(workers: int) -> list[str]:
    return worker_order(
        TESTS, workers, ALONE.__contains__, LONG.__contains__,
        lambda t: t.startswith("tests/unit/"),
    )


def test_every_test_is_scheduled_once_for_any_number_of_workers() -> None:
    for workers in (1, 2, 3, 4):
        assert sorted(_order(workers)) == sorted(TESTS)


def test_alone_tests_open_the_first_share_and_long_ones_the_others_behind_quick_tests() -> None:
    order = _order(3)
    first = len(order) // 3
    second = (len(order) - first) // 2
    assert set(order[:2]) == ALONE
    shares = [order[first:first + second], order[first + second:]]
    for share, long_tests in zip(shares, (["i1", "i3"], ["i2"]), strict=True):
        assert all(t.startswith("tests/unit/") for t in share[:QUICK_OPENERS])
        assert share[QUICK_OPENERS:QUICK_OPENERS + len(long_tests)] == [
            f"tests/integration/{name}" for name in long_tests
        ]
