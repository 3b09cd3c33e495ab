import asyncio
from pathlib import Path
from typing import Any

from streams.feature_worker.fetch_batching import FetchBatching
from streams.feature_worker.settings import StreamSettings
from streams.feature_worker.worker import create_app


def test_the_worker_consumer_lets_the_broker_batch_fetches(tmp_path: Path) -> None:
    settings = StreamSettings(datadir=tmp_path, fetch_min_bytes=4096, fetch_max_wait_ms=25)
    app = create_app(settings)

    async def build() -> Any:  # aiokafka objects belong to a running loop
        thread: Any = app.consumer._thread  # type: ignore[attr-defined]
        return thread._create_worker_consumer(app.transport)

    consumer = asyncio.run(build())

    assert app.fetch_batching == FetchBatching(min_bytes=4096, max_wait_ms=25)
    # aiokafka hands these to its fetcher when the consumer starts.
    assert (consumer._fetch_min_bytes, consumer._fetch_max_wait_ms) == (4096, 25)
