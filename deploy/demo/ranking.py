"""The ranker's part of a run: the KPI of answers per serving strategy (ranker, model,
popularity...) as the traffic generator credits them, and the ranker gate's decisions (promoted
versions from `model.updates`, refusals from the trainer's gate counter)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from schemas import ModelUpdate

GATE_DECISIONS = "streamrec_trainer_ranker_gate_decisions_total"
GATE_GAIN = "streamrec_trainer_ranker_gate_gain"


@dataclass(frozen=True)
class Credit:
    """One answer read in time: when its request left, which strategy ordered it, and whether
    the user then picked one of its items."""

    at: float
    strategy: str
    hit: bool


def strategy_kpi(
    credits: Sequence[Credit], spans: Mapping[str, tuple[float, float]]
) -> dict[str, dict[str, dict[str, object]]]:
    """Hit rate@10 per strategy over the whole run ("all") and within each phase's span: a
    strategy that serves only in one phase (the ranker once promoted) is compared with the
    others in the same phase, not with their figures from before the drift."""
    windows = {"all": (float("-inf"), float("inf")), **spans}
    return {
        name: _per_strategy([c for c in credits if start <= c.at < end])
        for name, (start, end) in windows.items()
    }


def _per_strategy(credits: Sequence[Credit]) -> dict[str, dict[str, object]]:
    counts: dict[str, list[int]] = {}
    for credit in credits:
        acc = counts.setdefault(credit.strategy, [0, 0])
        acc[0] += 1
        acc[1] += credit.hit
    return {
        name: {"responses": n, "hits": hits, "hit_rate": round(hits / n, 4)}
        for name, (n, hits) in sorted(counts.items())
    }


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
