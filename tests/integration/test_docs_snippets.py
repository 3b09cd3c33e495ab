"""Every Python snippet in README.md and docs/ runs as written against the local stack, with a
scorer serving the unprefixed catalog topics (what the user of a fresh deployment has)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from models.session_checkpoint import save_session_model
from models.session_config import SessionTransformerConfig
from models.session_transformer import SessionTransformer
from models.store import ModelStore
from schemas.model_updates import ModelUpdate
from schemas.topics import MODEL_UPDATES
from serving.service import ScorerService
from serving.settings import ServeSettings
from streams.kafka.acls import grant_acls
from streams.kafka.admin import create_topics
from streams.kafka.connection import KafkaConnection
from streams.kafka.principals import SCORER
from streams.kafka.producer import EventProducer
from streams.redis.connection import RedisConnection
from tests.integration.serving.helpers import (
    FeatureFeed,
    events,
    running,
    serving_version,
    wait_for,
)

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def snippets(document: Path) -> str:
    """The document's Python blocks, in order, as one program (later blocks use earlier names)."""
    return "\n".join(BLOCK.findall(document.read_text()))


@pytest.fixture
def scorer(
    kafka: KafkaConnection,
    redis_connection: RedisConnection,
    scorer_redis_connection: RedisConnection,
    tmp_path: Path,
) -> Iterator[ScorerService]:
    """A scorer on the plain topics, whose features know user u42's recent views."""
    FeatureFeed(kafka, redis_connection).ingest(events("u42", [f"i{n}" for n in range(1002, 1012)]))
    plain = kafka.model_copy(update={"topic_prefix": ""})
    create_topics(plain)
    grant_acls(plain)
    model_name = f"docs{uuid.uuid4().hex[:8]}"
    torch.manual_seed(0)
    items = [f"i{n}" for n in range(1000, 1300)]
    model = SessionTransformer(len(items), SessionTransformerConfig(dim=16, max_len=50, layers=1))
    save_session_model(ModelStore(tmp_path), model_name, "1.0", model, items)
    update = ModelUpdate.model_validate(
        {"model_name": model_name, "version": "1.0", "kind": "full", "stage": "serving",
         "sha256": ModelStore(tmp_path).digest(model_name, "1.0"), "published_at": time.time()}
    )
    producer = EventProducer(plain)
    producer.send(plain.topic(MODEL_UPDATES), update.log_key, update)
    producer.close()
    service = ScorerService(
        ServeSettings(
            kafka=plain.as_principal(SCORER), redis=scorer_redis_connection, model_store=tmp_path,
            model_name=model_name, group_id="streamrec-docs-scorer",
            requests_offset_reset="earliest",
        )
    )
    with running(service):
        assert wait_for(lambda: serving_version(service) == "1.0")
        yield service


def run_snippets(document: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        [sys.executable, "-c", snippets(document)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180, check=False,
    )


def test_every_documented_snippet_runs_and_the_readme_prints_its_recommendations(
    scorer: ScorerService,
) -> None:
    documents = [d for d in DOCUMENTS if snippets(d)]
    assert ROOT / "README.md" in documents
    for document in documents:
        done = run_snippets(document)
        assert done.returncode == 0, f"{document.name}: {done.stderr[-2000:]}"
        if document.name == "README.md":
            answer = done.stdout.splitlines()[0]
            assert answer.startswith("model 1.0 [{"), done.stdout[-2000:]
            assert "i1001" not in answer  # the request excludes it
