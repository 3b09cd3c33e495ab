from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
import torch
from prometheus_client import REGISTRY

from models.session_checkpoint import session_manifest
from models.store import ModelStore
from online_trainer.gate import GateDecision
from online_trainer.online_model import Interaction, OnlineModel, Query
from online_trainer.prequential import MISS, in_sample
from online_trainer.publisher import Publisher
from online_trainer.trainer import OnlineTrainer
from schemas import ModelUpdate
from streams.kafka.connection import KafkaConnection
from tests.unit.online_trainer.helpers import TINY, envelopes, settings


class RecordingSink:
    """Collects what would go to model.updates (this is a unit test of pure logic)."""

    def __init__(self) -> None:
        self.records: list[ModelUpdate] = []
        self.keys: list[str] = []
        self.tombstones: list[str] = []

    def send(self, topic: str, key: str, record: ModelUpdate) -> None:
        self.records.append(record)
        self.keys.append(key)

    def send_raw(self, topic: str, key: str, value: bytes | None) -> None:
        assert value is None
        self.tombstones.append(key)

    def flush(self, timeout_s: float = 30.0) -> None:
        return None


def _trainer(tmp: Path, **changes: object) -> tuple[OnlineTrainer, RecordingSink]:
    sink = RecordingSink()
    s = settings(tmp, **changes)
    publisher = Publisher(ModelStore(s.store_dir), sink, KafkaConnection(), s.model_name, 0.5)  # type: ignore[arg-type]
    return OnlineTrainer(s, s.model, publisher), sink


def test_events_are_scored_before_they_are_learned_and_new_items_count_as_misses() -> None:
    model = OnlineModel(TINY)
    batch = [Interaction("u", "a", 1), Interaction("u", "b", 2), Interaction("u", "c", 3)]
    ranks = model.ranks(model.queries(batch))
    assert ranks == [MISS, MISS]  # the first event has no history; b and c were unknown
    model.learn(batch)
    second = [Interaction("u", "a", 4), Interaction("v", "b", 5)]
    queries = model.queries(second)
    assert [q.target for q in queries] == [model.items.get("a")]  # v has no history yet
    assert all(r < MISS for r in model.ranks(queries))


def test_the_prequential_sample_is_the_same_events_in_any_process_and_about_its_share() -> None:
    events = [(f"u{n % 97}", f"i{n % 31}", n) for n in range(20_000)]
    picked = [e for e in events if in_sample(*e, share=0.3)]
    assert 0.28 < len(picked) / len(events) < 0.32
    # A fresh interpreter (its own string-hash salt) picks the very same events.
    code = (
        "from online_trainer.prequential import in_sample;"
        "print(sum(in_sample(f'u{n % 97}', f'i{n % 31}', n, 0.3) for n in range(20000)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(out.stdout) == len(picked)
    assert all(in_sample(*e, share=1.0) for e in events[:100])


def test_the_candidate_and_the_serving_twin_are_scored_on_the_sampled_events_only(
    tmp_path: Path,
) -> None:
    trainer, _ = _trainer(tmp_path, scored_share=0.5)
    stream = envelopes(1200)
    trainer.train_batch(stream[:600])
    trainer.serving = trainer.model.weights_copy()
    later = [Interaction(e.record.user_id, e.record.item_id, int(e.record.timestamp))
             for e in stream[600:]]
    sampled, every = trainer.model.queries(later, 0.5), trainer.model.queries(later, 1.0)
    scored, candidate, serving = (
        trainer.running.count, trainer.gate.candidate.count, trainer.gate.serving.count
    )
    trainer.train_batch(stream[600:])
    assert 0 < len(sampled) < len(every)
    assert trainer.running.count - scored == len(sampled)
    assert trainer.gate.candidate.count - candidate == len(sampled)
    assert trainer.gate.serving.count - serving == len(sampled)


def test_right_after_a_publication_the_serving_copy_is_not_scored_again(
    tmp_path: Path,
) -> None:
    trainer, _ = _trainer(tmp_path, scored_share=1.0)
    stream = envelopes(900)
    trainer.train_batch(stream[:300])
    assert trainer.maybe_publish().publish
    serving = trainer.serving
    assert serving is not None
    scored: list[int] = []
    original = serving.ranks

    def counted(queries: Sequence[Query]) -> list[float]:
        scored.append(len(queries))
        return original(queries)

    serving.ranks = counted  # type: ignore[method-assign]
    candidate = trainer.gate.candidate.count
    trainer.train_batch(stream[300:600])  # the candidate's weights are still the copy's
    assert scored == [] and trainer.gate.serving.count == trainer.gate.candidate.count > candidate
    assert trainer.gate.serving.hits == trainer.gate.candidate.hits
    trainer.train_batch(stream[600:])  # it learned since: the copy is scored
    assert len(scored) == 1 and scored[0] > 0


def test_repeating_the_previous_item_is_not_a_next_item_example() -> None:
    model = OnlineModel(TINY)
    model.learn([Interaction("u", "a", 1)])
    assert model.queries([Interaction("u", "a", 2)]) == []


def test_a_new_item_is_admitted_live_and_the_table_grows_keeping_rows() -> None:
    model = OnlineModel(TINY)
    model.learn([Interaction("u", f"i{n}", n) for n in range(10)])
    before = model.trainer.model.item_embedding.weight.detach().clone()
    model.learn([Interaction("u", f"new{n}", 100 + n) for n in range(1500)], steps=0)
    after = model.trainer.model.item_embedding.weight.detach()
    assert after.shape[0] > before.shape[0]
    assert torch.equal(after[: before.shape[0]], before)
    assert model.items.get("new1499") > 0


def test_learning_improves_prequential_accuracy_on_a_stationary_stream(tmp_path: Path) -> None:
    trainer, _ = _trainer(tmp_path, scored_share=1.0)
    stream = envelopes(6000)
    for lo in range(0, len(stream), 200):
        trainer.train_batch(stream[lo : lo + 200])
    early = trainer.running.summary()
    late = trainer.running.recent()
    assert late["hr@10"] > early["hr@10"]


def test_first_publication_is_full_and_later_ones_are_gated_deltas_or_full(tmp_path: Path) -> None:
    trainer, sink = _trainer(tmp_path)
    stream = envelopes(2000)
    trainer.train_batch(stream[:1000])
    first = trainer.maybe_publish()
    assert first.publish and sink.records[-1].version == "1.0" and sink.records[-1].kind == "full"
    trainer.train_batch(stream[1000:])
    trainer.maybe_publish()
    versions = [r.version for r in sink.records]
    assert versions[0] == "1.0"
    if len(versions) > 1:
        assert versions[1] == "1.1"
    tensors, manifest = ModelStore(tmp_path / "store").load(
        "session_transformer", versions[-1], sink.records[-1].sha256
    )
    assert manifest.version == versions[-1]
    assert sink.keys == [f"session_transformer/{v}" for v in versions]
    assert set(manifest.id_maps["item"]) == set(trainer.model.items.mapping())
    assert torch.equal(tensors["item_bias"], trainer.serving.tensors()["item_bias"])  # type: ignore[union-attr]


def test_a_few_changed_rows_are_published_as_a_delta_that_reloads_exactly(tmp_path: Path) -> None:
    trainer, sink = _trainer(tmp_path)
    trainer.train_batch(envelopes(600))
    trainer.maybe_publish()
    parent = trainer.model.tensors()
    tensors = {k: v.clone() for k, v in parent.items()}
    tensors["item_embedding.weight"][2] += 1.0
    tensors["item_bias"][3] -= 1.0
    manifest = session_manifest("session_transformer", "1.1", TINY, trainer.model.items.mapping())
    assert trainer.publisher is not None
    publication = trainer.publisher.publish("1.1", tensors, ("1.0", parent), manifest, None)
    assert (publication.kind, publication.changed_rows) == ("delta", 2)
    assert sink.records[-1].kind == "delta" and sink.records[-1].base_version == "1.0"
    loaded, _ = ModelStore(tmp_path / "store").load(
        "session_transformer", "1.1", sink.records[-1].sha256
    )
    assert all(torch.equal(loaded[k], v) for k, v in tensors.items())


def test_restart_from_checkpoint_resumes_at_its_offsets_with_the_same_model(tmp_path: Path) -> None:
    trainer, _ = _trainer(tmp_path)
    stream = envelopes(1200)
    trainer.train_batch(stream[:600])
    trainer.checkpoint()
    trainer.train_batch(stream[600:900])  # lost in the "crash"
    restarted, _ = _trainer(tmp_path)
    assert restarted.state.offsets == {0: 600}
    assert torch.equal(
        restarted.model.tensors()["item_bias"][: len(restarted.model.items) + 1],
        trainer.checkpoints.load(TINY.max_len, 10)[0]["item_bias"][
            : len(restarted.model.items) + 1
        ],
    )
    # The re-delivered records below the checkpoint are skipped; the rest trained once.
    restarted.handle(stream[500:1200])
    assert restarted.state.ledger.ranges == {0: [[0, 1199]]}
    assert (restarted.state.ledger.overlaps, restarted.state.ledger.gaps) == (0, 0)


def test_loss_is_finite_on_every_batch(tmp_path: Path) -> None:
    trainer, _ = _trainer(tmp_path)
    stream = envelopes(600)
    for lo in range(0, 600, 100):
        interactions = [
            Interaction(e.record.user_id, e.record.item_id, int(e.record.timestamp))
            for e in stream[lo : lo + 100]
        ]
        loss = trainer.model.learn(interactions)
        assert math.isfinite(loss), f"batch starting at {lo}: loss={loss}"


def test_a_rollback_serves_the_previous_version_again_and_publishes_forward_from_it(
    tmp_path: Path,
) -> None:
    trainer, sink = _trainer(tmp_path)
    stream = envelopes(1200)
    trainer.train_batch(stream[:600])
    trainer.publish(None, major=True)
    trainer.train_batch(stream[600:900])
    trainer.publish(None, major=False)
    assert trainer.state.serving_version == "1.1"

    assert trainer.roll_back("1.0", "not the serving version") is None
    assert trainer.roll_back("1.1", "kpi.ctr dropped") == "1.0"
    back = sink.records[-1]
    assert (back.version, back.stage) == ("1.1", "rolled_back")
    assert back.sha256 == trainer.store.digest("session_transformer", "1.1")
    assert trainer.state.serving_version == "1.0"
    served, _ = trainer.store.load("session_transformer", "1.0", sink.records[0].sha256)
    assert torch.equal(trainer.model.tensors()["item_bias"][: len(served["item_bias"])],
                       served["item_bias"])

    trainer.train_batch(stream[900:])
    trainer.publish(None, major=False)
    after = sink.records[-1]
    assert after.version == "1.2" and after.base_version in (None, "1.0")


def test_a_rollback_returns_to_what_served_before_never_to_a_rejected_candidate(
    tmp_path: Path,
) -> None:
    trainer, sink = _trainer(tmp_path)
    stream = envelopes(1200)
    trainer.train_batch(stream[:600])
    trainer.publish(None, major=True)  # 1.0 serves
    trainer.train_batch(stream[600:900])
    trainer.publish(None, major=False)  # 1.1, then the canary takes it out
    trainer.log.apply(sink.records[-1].model_copy(update={"stage": "rolled_back"}))
    trainer.train_batch(stream[900:])
    trainer.publish(None, major=False)  # 1.2 serves
    assert trainer.roll_back("1.2", "kpi.ctr dropped") == "1.0"
    assert (sink.records[-1].version, sink.records[-1].stage) == ("1.2", "rolled_back")


def test_a_resume_never_trusts_a_serving_version_whose_bytes_changed(tmp_path: Path) -> None:
    trainer, sink = _trainer(tmp_path)
    trainer.train_batch(envelopes(600))
    trainer.publish(None, major=True)
    weights = tmp_path / "store" / "session_transformer" / "1.0" / "weights.safetensors"
    raw = bytearray(weights.read_bytes())
    raw[-1] ^= 1
    weights.write_bytes(bytes(raw))
    restarted, sink = _trainer(tmp_path)
    assert restarted.state.serving_version == "1.0" and restarted.serving is None
    assert _rejected("serving_version", "IntegrityError") >= 1
    restarted.train_batch(envelopes(900)[600:])
    restarted.publish(None, major=False)
    assert (sink.records[-1].version, sink.records[-1].kind) == ("1.1", "full")


def test_a_checkpoint_whose_bytes_changed_is_set_aside_and_never_resumed(tmp_path: Path) -> None:
    trainer, _ = _trainer(tmp_path)
    trainer.train_batch(envelopes(600))
    trainer.checkpoint()
    optimizer = tmp_path / "state" / "checkpoint" / "optimizer.pt"
    optimizer.write_bytes(optimizer.read_bytes() + b"\0")
    before = _rejected("checkpoint", "IntegrityError")
    restarted, _ = _trainer(tmp_path)
    assert restarted.state.offsets == {} and restarted.state.batches == 0
    assert _rejected("checkpoint", "IntegrityError") == before + 1
    assert (tmp_path / "state" / "checkpoint.rejected" / "optimizer.pt").exists()


def _rejected(what: str, reason: str) -> float:
    value = REGISTRY.get_sample_value(
        "streamrec_trainer_loads_rejected_total", {"what": what, "reason": reason}
    )
    return value or 0.0


def test_a_candidate_publishes_once_the_interval_passed_and_the_gate_has_new_evidence(
    tmp_path: Path,
) -> None:
    now = [0.0]
    sink = RecordingSink()
    # A margin of 1 passes every decision: this test is about when the gate is asked.
    s = settings(tmp_path, publish_every_s=2.0, gate_min_events=50, gate_margin=1.0)
    publisher = Publisher(ModelStore(s.store_dir), sink, KafkaConnection(), s.model_name, 0.5)  # type: ignore[arg-type]
    trainer = OnlineTrainer(s, s.model, publisher, clock=lambda: now[0])
    stream = envelopes(1500)
    trainer.train_batch(stream[:300])
    assert not sink.records  # the interval has not passed since the trainer started
    now[0] = 2.0
    trainer.tick()  # idle: what was learned still publishes
    assert [r.version for r in sink.records] == ["1.0"]
    now[0] = 3.0
    trainer.train_batch(stream[300:600])
    assert len(sink.records) == 1  # 1 s after the last publication finished
    now[0] = 4.0
    trainer.train_batch(stream[600:700])  # the interval passed, the gate has its events
    assert [r.version for r in sink.records] == ["1.0", "1.1"]
    now[0] = 9.0
    trainer.train_batch(stream[700:710])  # too few held-out events since that publication
    assert len(sink.records) == 2
    trainer.train_batch(stream[710:900])  # enough: published on this batch, no timer
    assert [r.version for r in sink.records] == ["1.0", "1.1", "1.2"]
    assert len(trainer.freshness_s) == 900
    trainer.tick()
    assert len(sink.records) == 3  # nothing new learned


def test_a_held_candidate_is_judged_again_on_new_evidence_not_on_a_timer(
    tmp_path: Path,
) -> None:
    now = [0.0]
    sink = RecordingSink()
    # Every event scored: the event counts below are held-out evidence one for one.
    s = settings(tmp_path, publish_every_s=1.0, gate_min_events=50, scored_share=1.0)
    publisher = Publisher(ModelStore(s.store_dir), sink, KafkaConnection(), s.model_name, 0.5)  # type: ignore[arg-type]
    trainer = OnlineTrainer(s, s.model, publisher, clock=lambda: now[0])
    now[0] = 10.0
    stream = envelopes(1500)
    trainer.train_batch(stream[:300])
    assert [r.version for r in sink.records] == ["1.0"]
    decisions: list[bool] = []
    original = trainer.gate.decide

    def held(has_serving: bool) -> GateDecision:
        decision = original(has_serving)
        decisions.append(decision.publish)
        return GateDecision(False, decision.candidate, decision.serving, decision.events, "held")

    trainer.gate.decide = held  # type: ignore[method-assign]
    now[0] = 20.0
    trainer.train_batch(stream[300:400])
    trainer.train_batch(stream[400:420])  # 20 new held-out events: not judged again yet
    trainer.train_batch(stream[420:500])
    assert len(decisions) == 2 and len(sink.records) == 1


def test_the_serving_baseline_keeps_weights_and_ids_only_and_scores_as_a_whole_copy_would(
    tmp_path: Path,
) -> None:
    trainer, _ = _trainer(tmp_path, scored_share=1.0)
    trainer.train_batch(envelopes(400))
    trainer.maybe_publish()
    serving, model = trainer.serving, trainer.model
    assert serving is not None and not serving.trainer.optimizer.state
    assert model.trainer.optimizer.state
    assert len(serving.histories) == 0 < len(model.histories)
    whole = model.frozen_copy(optimizer_state=False)  # weights, ids and histories
    before = serving.tensors()["item_bias"].clone()
    # Later batches bring item ids the model has never seen: both copies admit them alike.
    later = envelopes(600, seed=5, items=200, start_offset=400)
    for lo in range(0, len(later), 200):
        batch = later[lo : lo + 200]
        events = [Interaction(e.record.user_id, e.record.item_id, int(e.record.timestamp))
                  for e in batch]
        queries = model.queries(events)
        assert serving.ranks(queries) == whole.ranks(whole.queries(events))
        trainer.train_batch(batch)
        whole.learn(events, steps=0)
    assert len(model.items) > 60  # ids the publication's copy had no row for were admitted
    assert torch.equal(serving.tensors()["item_bias"][: len(before)], before)


def test_each_published_event_has_its_freshness_split_into_stages(tmp_path: Path) -> None:
    trainer, _ = _trainer(tmp_path)
    trainer.train_batch(envelopes(300))
    trainer.train_batch(envelopes(200, start_offset=300))
    trainer.maybe_publish()
    stages = trainer.freshness_stages
    assert len(trainer.freshness_s) == 500
    assert all(len(values) == 500 for values in stages.values())
    for k, total in enumerate(trainer.freshness_s):
        parts = sum(stages[stage][k] for stage in stages)
        assert parts == pytest.approx(total, abs=1e-6)
        assert stages["learn"][k] >= 0 and stages["publish"][k] > 0
    assert set(trainer.publish_seconds[-1]) >= {"store", "digest", "announce", "checkpoint"}
