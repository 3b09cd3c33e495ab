from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from confluent_kafka import Consumer, TopicPartition

from schemas.topics import INTERACTIONS
from streams.kafka.connection import KafkaConnection
from tests.integration.online_trainer.conftest import TINY, publish


def _env(kafka: KafkaConnection, tmp: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "STREAMREC_KAFKA__TOPIC_PREFIX": kafka.topic_prefix,
        "STREAMREC_STATE_DIR": str(tmp / "state"),
        "STREAMREC_STORE_DIR": str(tmp / "store"),
        "STREAMREC_GROUP_ID": f"trainer-{kafka.topic_prefix}",
        "STREAMREC_ALERTS_GROUP_ID": f"alerts-{kafka.topic_prefix}",
        "STREAMREC_BATCH_SIZE": "100",
        "STREAMREC_STEPS_PER_BATCH": "3",
        "STREAMREC_CHECKPOINT_EVERY_BATCHES": "4",
        "STREAMREC_PUBLISH_EVERY_S": "2",
        "STREAMREC_THREADS": "1",
        "OMP_NUM_THREADS": "1",
    }
    for field, value in TINY.model_dump().items():
        env[f"STREAMREC_MODEL__{field.upper()}"] = str(value)
    return env


def _trained(checkpoint: Path) -> int:
    try:
        return sum(json.loads(checkpoint.read_text())["offsets"].values())
    except (FileNotFoundError, json.JSONDecodeError):
        return 0


def _end_offsets(kafka: KafkaConnection) -> dict[int, int]:
    consumer = Consumer({**kafka.client_config(), "group.id": "probe"})
    topic = kafka.topic(INTERACTIONS)
    partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    ends = {
        p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
        for p in partitions
    }
    consumer.close()
    return ends


@pytest.mark.chaos
@pytest.mark.long
def test_trainer_killed_mid_stream_neither_skips_nor_retrains_a_batch(
    kafka: KafkaConnection, tmp_path: Path, ml100k: pd.DataFrame
) -> None:
    total = publish(kafka, ml100k.iloc[:10000])
    env = _env(kafka, tmp_path)
    command = [sys.executable, "-m", "cli", "train", "--idle-exit-s", "4"]
    rng = random.Random(11)
    checkpoint = tmp_path / "state" / "checkpoint" / "state.json"
    mid_stream_kills = 0
    for round_ in range(3):
        proc = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        # Kill at a random point of progress, after a random extra delay: the checkpoint is then
        # behind the work done, which the restart must redo exactly once.
        target = total * (round_ + rng.uniform(0.2, 0.8)) / 4
        deadline = time.monotonic() + 120
        while _trained(checkpoint) < target and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(rng.uniform(0.0, 0.5))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            if 0 < _trained(checkpoint) < total:
                mid_stream_kills += 1
        proc.wait(timeout=30)
    final = subprocess.run(
        command, env=env, timeout=600, capture_output=True, text=True, check=False
    )
    assert final.returncode == 0, final.stderr[-2000:]
    assert mid_stream_kills >= 2, "the kills must land while the stream is half-trained"

    state = json.loads((tmp_path / "state" / "checkpoint" / "state.json").read_text())
    ends = _end_offsets(kafka)
    assert sum(ends.values()) == total
    ledger = state["ledger"]
    assert (ledger["overlaps"], ledger["gaps"]) == (0, 0)
    expected = {str(p): [[0, end - 1]] for p, end in ends.items() if end > 0}
    assert ledger["ranges"] == expected  # every offset trained exactly once, none skipped
    assert {int(p): o for p, o in state["offsets"].items()} == {
        p: e for p, e in ends.items() if e > 0
    }
