"""A one-shot full retrain (`streamrec retrain`): read the window, train (1 or N processes),
publish."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from models.store import ModelStore
from online_trainer.distributed import assemble, write_dataset
from online_trainer.online_model import Interaction, OnlineModel
from online_trainer.publisher import Publisher
from online_trainer.retrain import RetrainResult, full_retrain
from online_trainer.settings import TrainSettings
from online_trainer.trainer import OnlineTrainer
from online_trainer.vocabulary import IdVocabulary
from online_trainer.window import retrain_window_events
from streams.kafka.producer import EventProducer

logger = logging.getLogger(__name__)


def run_retrain(
    nproc: int, settings: TrainSettings | None = None, batch_size: int | None = None
) -> str:
    settings = settings or TrainSettings()
    producer = EventProducer(settings.kafka)
    publisher = Publisher(
        ModelStore(settings.store_dir),
        producer,
        settings.kafka,
        settings.model_name,
        settings.full_publish_share,
    )
    trainer = OnlineTrainer(settings, settings.model, publisher)
    window = retrain_window_events(
        settings, 0.0 if settings.retrain_window_s <= 0 else _since(settings)
    )
    interactions = window.interactions
    config = settings.model.model_copy(update={"time_budget_s": settings.retrain_budget_s})
    if batch_size is not None:
        config = config.scaled_to_batch(batch_size)
    if nproc == 1:
        result = full_retrain(
            interactions, trainer.model, config, settings.retrain_mode, settings.max_users
        )
    else:
        result = distributed_retrain(interactions, trainer.model, nproc, config.model_dump_json())
    publication = trainer.adopt_retrained(result, window.end_offsets)
    producer.flush()
    assert publication is not None
    return publication.version


def _since(settings: TrainSettings) -> float:
    return time.time() - settings.retrain_window_s


def distributed_retrain(
    interactions: list[Interaction], current: OnlineModel, nproc: int, config_json: str
) -> RetrainResult:
    from models.session_config import SessionTransformerConfig

    workdir = temp_dir()
    data = workdir / "interactions.json"
    write_dataset(data, interactions, current.items)
    result = launch_distributed(data, config_json, workdir / "out", nproc)
    config = SessionTransformerConfig.model_validate_json(config_json)
    items = result["items"]
    assert isinstance(items, dict)
    model = OnlineModel(config, IdVocabulary(items, current.items.limits))
    model.load_tensors(assemble(workdir / "out"))
    for event in sorted(interactions, key=lambda e: e.timestamp):
        row = model.items.get(event.item)
        if row and model.histories.last_item(event.user) != row:
            model.histories.append(event.user, row, event.timestamp)
    validation = result["validation"]
    assert isinstance(validation, dict)
    from models.sequence_training import FitReport

    epochs = result["epochs"]
    assert isinstance(epochs, int)
    report = FitReport(epochs, epochs, float(validation.get("ndcg@10", 0.0)), 0.0, 0, [])
    logger.info("distributed retrain nproc=%d validation=%s", nproc, json.dumps(validation))
    return RetrainResult(model, report, {k: float(v) for k, v in validation.items()})


def launch_distributed(
    data: Path | None, config_json: str, out: Path, nproc: int, *extra: str
) -> dict[str, object]:
    """Runs online_trainer.distributed under torchrun and returns rank 0's result.json.

    STREAMREC_RETRAIN_MASTER_PORT pins the rendezvous port, or a range `LOW-HIGH` to take the
    first free one from (hosts where ports are allotted: a port just released may still be in
    TIME_WAIT); without it torchrun picks a free one."""
    port = master_port(os.environ.get("STREAMREC_RETRAIN_MASTER_PORT", ""))
    rendezvous = (
        ["--master-addr", "127.0.0.1", f"--master-port={port}"] if port else ["--standalone"]
    )
    command = [
        sys.executable, "-m", "torch.distributed.run", *rendezvous,
        f"--nproc_per_node={nproc}", "-m", "online_trainer.distributed",
        *(["--data", str(data)] if data else []), "--config", config_json, "--out", str(out),
        *extra,
    ]
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    subprocess.run(command, check=True, env=env)
    result: dict[str, object] = json.loads((out / "result.json").read_text())
    return result


def master_port(spec: str) -> int | None:
    if not spec:
        return None
    low, _, high = spec.partition("-")
    for port in range(int(low), int(high or low) + 1):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in STREAMREC_RETRAIN_MASTER_PORT={spec}")


def temp_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix=f"streamrec-retrain-{int(time.time())}-"))
