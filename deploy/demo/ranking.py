"""The ranker gate's decisions in a run: promoted versions from `model.updates`, refusals from
the trainer's gate counter. How the ranker does with users is its experiment arm's figure
(deploy/demo/arms.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from schemas import ModelUpdate

GATE_DECISIONS = "streamrec_trainer_ranker_gate_decisions_total"
GATE_GAIN = "streamrec_trainer_ranker_gate_gain"


def gate_decisions(
    updates: Sequence[ModelUpdate], trainer_samples: Mapping[str, float], ranker_name: str,
    origin: float,
) -> dict[str, object]:
    """Promoted ranker versions with their held-back gain over retrieval order, and the gate's
    counts by outcome (None when the trainer's metrics were never read)."""
    promoted = [_promotion(u, origin) for u in updates if u.model_name == ranker_name]

    def count(outcome: str) -> int | None:
        value = trainer_samples.get(f'{GATE_DECISIONS}{{outcome="{outcome}"}}')
        return None if value is None else int(value)

    promotes, refusals = count("promote"), count("refuse")
    return {
        "promoted": promoted,
        "gate_runs": None if promotes is None or refusals is None else promotes + refusals,
        "refused": refusals,
        "last_gain": trainer_samples.get(GATE_GAIN),
    }


def _promotion(update: ModelUpdate, origin: float) -> dict[str, object]:
    ranker = update.metrics.get("ranker_ndcg@10")
    retrieval = update.metrics.get("retrieval_ndcg@10")
    gain = None if ranker is None or retrieval is None else round(ranker - retrieval, 4)
    lists = update.metrics.get("held_back_lists")
    return {"version": update.version, "at_s": round(update.published_at - origin, 2),
            "ranker_ndcg10": ranker, "retrieval_ndcg10": retrieval, "gain": gain,
            "held_back_lists": None if lists is None else int(lists)}
