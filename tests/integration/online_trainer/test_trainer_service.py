from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
import torch

from models.store import Manifest, ModelStore
from online_trainer.online_model import OnlineModel
from online_trainer.service import TrainerService
from online_trainer.settings import TrainSettings
from online_trainer.vocabulary import IdVocabulary
from schemas import DriftAlert, ModelUpdate, decode, encode
from schemas.topics import ALERTS_DRIFT, MODEL_UPDATES
from streams.kafka.connection import KafkaConnection
from streams.kafka.producer import EventProducer
from tests.integration.kafka_helpers import read_all
from tests.integration.online_trainer.conftest import publish, train_settings


def _wait(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


class Running:
    def __init__(self, settings: TrainSettings) -> None:
        self.service = TrainerService(settings)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.service.run, args=(self.stop,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=60)


def test_a_new_item_is_recommendable_after_the_next_publication_without_restart(
    kafka: KafkaConnection, tmp_path: Path, ml100k: pd.DataFrame
) -> None:
    # This test is about what a publication carries; the gate's decisions are covered by the unit
    # tests, so here every candidate passes (a held candidate would make the test hang on noise).
    settings = train_settings(kafka, tmp_path, gate_margin=1.0, gate_min_events=1)
    first = ml100k.iloc[:3000]
    publish(kafka, first)
    running = Running(settings)
    try:
        trainer = running.service.trainer
        _wait(
            lambda: trainer.state.ledger.trained_count() >= 3000 and bool(trainer.publications),
            120,
            "first publication",
        )
        store = ModelStore(settings.store_dir)
        users = first["user_id"].unique()[:20]
        novel = pd.DataFrame(
            {
                "user_id": list(users) * 2,
                "item_id": ["brand-new-item"] * 40,
                "timestamp": [int(first["timestamp"].max()) + 60 + n for n in range(40)],
            }
        )
        publish(kafka, novel)
        _wait(
            lambda: "brand-new-item" in _stored(store, settings.model_name)[1].id_maps["item"],
            120,
            "a publication with the new item",
        )
    finally:
        running.close()
    tensors, manifest = _stored(store, settings.model_name)
    row = manifest.id_maps["item"]["brand-new-item"]
    loaded = OnlineModel(settings.model, IdVocabulary(manifest.id_maps["item"]))
    loaded.load_tensors(tensors)
    scores = loaded.trainer.model.logits(loaded.trainer.model.item_embedding.weight[1:2]).detach()
    assert scores.shape[1] > row and bool(scores[0, row].isfinite())
    updates = [
        decode(ModelUpdate, m.value()) for m in read_all(kafka, kafka.topic(MODEL_UPDATES), 2)
    ]
    assert updates[-1].version == manifest.version
    assert updates[-1].sha256 == store.digest(settings.model_name, manifest.version)


def _stored(
    store: ModelStore, name: str, version: str | None = None
) -> tuple[dict[str, torch.Tensor], Manifest]:
    """What the trainer stored (the test reads its own store: the bytes vouch for themselves)."""
    version = version or str(store.latest(name))
    return store.load(name, version, store.digest(name, version))


def _send_retrain_alert(
    kafka: KafkaConnection, alert_id: str, detected_at: float,
    change_started_at: float | None = None,
) -> None:
    """A critical KPI alert suggesting a retrain, as the monitor would publish it then."""
    producer = EventProducer(kafka)
    alert = DriftAlert(
        alert_id=alert_id, detector="kpi.hit_rate", metric="hit_rate", baseline=0.3,
        current=0.1, severity="critical", suggested_action="retrain",
        detected_at=detected_at, change_started_at=change_started_at,
    )
    record_time_ms = int(detected_at * 1000)
    topic = kafka.topic(ALERTS_DRIFT)
    producer.send_raw(topic, alert.detector, encode(alert), None, record_time_ms)
    producer.close()


def _poll_until(service: TrainerService, done: Callable[[], bool], polls: int = 50) -> None:
    for _ in range(polls):
        service._poll_alerts()
        if done():
            return
        time.sleep(0.1)


def test_a_drift_alert_leads_to_a_retrain_and_a_new_major_version(
    kafka: KafkaConnection, tmp_path: Path, ml100k: pd.DataFrame
) -> None:
    # The retrain's judgement against the serving version has its own tests
    # (tests/unit/online_trainer/test_retrain_gate.py): here every retrain publishes.
    settings = train_settings(kafka, tmp_path, retrain_gate=False)
    publish(kafka, ml100k.iloc[:2000])
    running = Running(settings)
    try:
        service = running.service
        _wait(lambda: bool(service.trainer.publications), 120, "first publication")
        assert service.trainer.publications[0].version == "1.0"
        _send_retrain_alert(kafka, "a1", time.time())
        _wait(lambda: service.retrains == 1, 180, "the retrain")
        _wait(
            lambda: any(p.version.startswith("2.") for p in service.trainer.publications),
            30,
            "major 2",
        )
    finally:
        running.close()
    versions = [
        decode(ModelUpdate, m.value()).version
        for m in read_all(kafka, kafka.topic(MODEL_UPDATES), 2)
    ]
    assert "2.0" in versions
    _, manifest = _stored(ModelStore(settings.store_dir), settings.model_name, "2.0")
    assert manifest.kind == "full"
    assert manifest.metrics  # validated on the most recent slice before publication


@pytest.mark.parametrize("unused", [None])
def test_stale_alerts_from_before_the_start_are_ignored(
    kafka: KafkaConnection, tmp_path: Path, unused: None
) -> None:
    _send_retrain_alert(kafka, "old", time.time() - 3600)
    service = TrainerService(train_settings(kafka, tmp_path, alert_max_age_s=60.0))
    try:
        _poll_until(service, lambda: service._scheduled is not None, polls=30)
        assert service._scheduled is None and service._retrain is None
    finally:
        service.close()


def test_a_retrain_alert_stays_pending_until_its_retrain_has_published(
    kafka: KafkaConnection, tmp_path: Path
) -> None:
    _send_retrain_alert(kafka, "pending", time.time())
    settings = train_settings(kafka, tmp_path)
    first = TrainerService(settings)
    try:
        _poll_until(first, lambda: first._scheduled is not None)
        assert first._scheduled is not None and first.alerts.pending
    finally:
        first.close()  # the trainer dies before the retrain it planned
    second = TrainerService(settings)
    try:
        _poll_until(second, lambda: second._scheduled is not None)
        assert second._scheduled is not None  # the alert was read again
        second.alerts.release()  # as a finished retrain does
    finally:
        second.close()
    third = TrainerService(settings)
    try:
        _poll_until(third, lambda: third._scheduled is not None, polls=30)
        assert third._scheduled is None
    finally:
        third.close()


def test_a_dated_alert_retrains_on_the_events_since_the_change_once_enough_exist(
    kafka: KafkaConnection, tmp_path: Path, ml100k: pd.DataFrame
) -> None:
    wait_s = 3.0
    settings = train_settings(kafka, tmp_path, retrain_min_after_change_s=wait_s,
                              retrain_gate=False)
    old, new = ml100k.iloc[:2000], ml100k.iloc[2000:3000]
    publish(kafka, old)
    running = Running(settings)
    try:
        service = running.service
        _wait(lambda: bool(service.trainer.publications), 120, "first publication")
        changed_at = time.time()
        time.sleep(0.1)  # Kafka record times, which choose the replay, are milliseconds
        publish(kafka, new)
        _send_retrain_alert(kafka, "dated", time.time(), change_started_at=changed_at)
        _wait(lambda: service.retrains == 1, 180, "the retrain")
    finally:
        running.close()
    major = next(p for p in service.trainer.publications if p.version == "2.0")
    assert major.published_at >= changed_at + wait_s
    histories = service.trainer.model.histories
    only_old = set(old["user_id"].astype(str)) - set(new["user_id"].astype(str))
    assert all(len(histories.get(user)[0]) == 0 for user in only_old)
    assert any(len(histories.get(str(user))[0]) for user in new["user_id"])
