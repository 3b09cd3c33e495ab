"""`streamrec serve` and `streamrec bench serve`, as plain typer-compatible functions.

Heavy imports (torch, faiss, the service) happen inside the bodies so `streamrec --help` stays
instant.
"""

from __future__ import annotations

from pathlib import Path

import typer


def serve(
    bootstrap: bool = typer.Option(
        True, help="Serve the model store's newest version until model.updates says otherwise."
    ),
) -> None:
    """Run one scorer: rec.requests -> retrieval, filtering, ranking, ordering -> rec.responses.

    Configured by STREAMREC_* variables (serving/settings.py: STREAMREC_GROUP_ID,
    STREAMREC_MODEL_STORE, STREAMREC_MODEL_NAME, STREAMREC_CANARY__SHARE, STREAMREC_RULES,
    STREAMREC_METRICS_PORT, ...). Start more with the same group id to share the load.
    """
    import logging
    import signal
    import threading

    from serving.service import ScorerService
    from serving.settings import ServeSettings

    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s"
        )
    settings = ServeSettings()
    settings.apply_cpu_nice()
    service = ScorerService(settings)
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    if bootstrap:
        service.bootstrap_from_store()
    service.start()
    while not stopping.wait(1.0):
        if not service.healthy():
            logging.getLogger(__name__).error("a scorer loop stopped; shutting down")
            break
    service.stop()


def bench_serve(
    json_path: Path = typer.Option(Path("bench/results/serve.json"), "--json", help="Output JSON."),
    catalog_items: int = typer.Option(100_000, min=1000, help="Items the model retrieves from."),
    rates: str = typer.Option("100,200,500", help="Offered requests/s, comma-separated."),
    seconds: float = typer.Option(15.0, min=2.0, help="Measured seconds per rate."),
    ingest_rate: float = typer.Option(1000.0, min=0.0, help="Events/s ingested alongside."),
    ingest_nice: int = typer.Option(
        10, min=0, max=19,
        help="Second pass with the feature worker and event generator at this niceness "
        "(0: skip it).",
    ),
) -> None:
    """Request -> response latency (p50/p99) of one scorer process at several offered rates."""
    from bench.serve import run

    run(
        json_path,
        catalog_items=catalog_items,
        rates=[float(r) for r in rates.split(",") if r.strip()],
        seconds=seconds,
        ingest_rate=ingest_rate,
        ingest_nice=ingest_nice,
    )
