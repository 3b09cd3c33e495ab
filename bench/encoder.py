"""The scorer's query encoder, side by side on the devices this machine has.

Same weights, same histories (a 100,000-item session Transformer, histories of 1-60 events,
history length 50), timed through ``SessionRecommender.encode``: what the scorer calls, host
batching and the device round trip included. Paths: the CPU trace (always), and on CUDA eager
execution and the CUDA-graph replays the scorer uses. Ratios are against the CPU trace.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bench.report import percentile, print_table, write_result
from models.accelerators import BucketedGraphs
from models.session_config import SessionTransformerConfig
from models.session_transformer import SessionTransformer
from serving.session_model import SessionRecommender

_ITEMS = 100_000
_HISTORY = 50


def _recommender(device: str) -> SessionRecommender:
    torch.manual_seed(0)
    return SessionRecommender(
        SessionTransformer(_ITEMS, SessionTransformerConfig()), _HISTORY, torch.device(device)
    )


def _eager(recommender: SessionRecommender) -> SessionRecommender:
    # The same CUDA module without its graphs: what the graphs save.
    assert isinstance(recommender._encode, BucketedGraphs)
    recommender._encode = recommender._encode.fn
    return recommender


def _time(recommender: SessionRecommender, histories: list[Any], calls: int) -> dict[str, float]:
    for _ in range(10):
        recommender.encode(histories)
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        recommender.encode(histories)
        samples.append((time.perf_counter() - started) * 1e3)
    return {"p50_ms": round(percentile(samples, 50), 3),
            "p99_ms": round(percentile(samples, 99), 3)}


def run(json_path: Path, batches: tuple[int, ...] = (1, 8, 32), calls: int = 300) -> dict[str, Any]:
    paths = {"cpu_trace": _recommender("cpu")}
    if torch.cuda.is_available():
        paths["cuda_eager"] = _eager(_recommender("cuda"))
        paths["cuda_graphs"] = _recommender("cuda")
    rng = np.random.default_rng(0)
    by_batch: dict[str, Any] = {}
    for batch in batches:
        histories = [
            [(int(rng.integers(1, _ITEMS + 1)), 1_000.0 + 30 * i)
             for i in range(int(rng.integers(1, 61)))]
            for _ in range(batch)
        ]
        row = {name: _time(rec, histories, calls) for name, rec in paths.items()}
        reference = paths["cpu_trace"].encode(histories)
        for name, rec in paths.items():
            figures = row[name]
            figures["p50_vs_cpu_trace"] = round(figures["p50_ms"] / row["cpu_trace"]["p50_ms"], 3)
            figures["max_abs_diff_vs_cpu"] = float(np.abs(rec.encode(histories) - reference).max())
        by_batch[str(batch)] = row
    result = {
        "catalog_items": _ITEMS,
        "history_length": _HISTORY,
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "cuda_device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "by_batch": by_batch,
    }
    write_result(json_path, result)
    print_table(
        "bench encoder: SessionRecommender.encode p50 / p99 ms",
        [(f"batch {b} {name}", f"{v['p50_ms']:.2f} / {v['p99_ms']:.2f}")
         for b, row in by_batch.items() for name, v in row.items()],
    )
    return result
