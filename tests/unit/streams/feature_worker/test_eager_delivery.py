import asyncio
import warnings
from typing import Any

import pytest
from mode import Service

from streams.feature_worker.eager_delivery import EagerDeliveryMixin


class Consumer(EagerDeliveryMixin, Service):
    def __init__(self) -> None:
        super().__init__()
        self.suspend_flow = asyncio.Event()
        self.delivered: list[Any] = []

    async def deliver(self, message: Any, gate: asyncio.Future[None] | None = None) -> Any:
        if gate is not None:
            await gate
        self.delivered.append(message)
        return message


async def _started() -> Consumer:
    consumer = Consumer()
    await consumer.start()
    return consumer


def test_a_delivery_that_does_not_wait_completes_without_any_task() -> None:
    async def scenario() -> tuple[Any, int, list[Any]]:
        consumer = await _started()
        tasks_before = len(asyncio.all_tasks())
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # an unawaited flow coroutine would warn
            result = await consumer.wait_first(
                consumer.deliver("m1"), consumer.suspend_flow.wait()
            )
        return result, len(asyncio.all_tasks()) - tasks_before, consumer.delivered

    result, new_tasks, delivered = asyncio.run(scenario())

    assert result.results == ["m1"] and not result.stopped
    assert new_tasks == 0
    assert delivered == ["m1"]


def test_a_delivery_that_waits_is_still_delivered_once_it_can() -> None:
    async def scenario() -> tuple[Any, list[Any]]:
        consumer = await _started()
        gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(0.01, gate.set_result, None)
        result = await consumer.wait_first(
            consumer.deliver("m2", gate), consumer.suspend_flow.wait()
        )
        return result, consumer.delivered

    result, delivered = asyncio.run(scenario())

    assert result.results == ["m2"]
    assert delivered == ["m2"]


def test_a_waiting_delivery_is_abandoned_when_the_flow_is_suspended() -> None:
    async def scenario() -> tuple[Any, list[Any], bool]:
        consumer = await _started()
        gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(0.01, consumer.suspend_flow.set)
        result = await consumer.wait_first(
            consumer.deliver("m3", gate), consumer.suspend_flow.wait()
        )
        await asyncio.sleep(0)  # let the cancellation reach the delivery
        return result, consumer.delivered, gate.cancelled()

    result, delivered, gate_cancelled = asyncio.run(scenario())

    assert result.results == [True]  # the flow event won
    assert delivered == []
    assert gate_cancelled  # the cancellation was relayed into the started coroutine


def test_an_error_in_a_delivery_propagates() -> None:
    async def failing(_: Any) -> None:
        raise ValueError("broken callback")

    async def scenario() -> None:
        consumer = await _started()
        await consumer.wait_first(failing("m4"), consumer.suspend_flow.wait())

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="broken callback"):
            asyncio.run(scenario())


def test_with_the_flow_suspended_the_original_race_decides(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []
    original = Service.wait_first

    async def counted(self: Service, *coros: Any, timeout: Any = None) -> Any:  # noqa: ASYNC109
        calls.append(len(coros))
        return await original(self, *coros, timeout=timeout)

    monkeypatch.setattr(Service, "wait_first", counted)

    async def scenario() -> None:
        consumer = await _started()
        await consumer.wait_first(consumer.deliver("m5"), consumer.suspend_flow.wait())
        consumer.suspend_flow.set()
        await consumer.wait_first(consumer.deliver("m6"), consumer.suspend_flow.wait())

    asyncio.run(asyncio.wait_for(scenario(), timeout=5))

    assert calls == [2]  # only the call made while the flow was suspended
