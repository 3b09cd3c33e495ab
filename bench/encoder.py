"""The scorer's query encoder, side by side on the devices this machine has.

Same weights, same histories (a 100,000-item session Transformer, histories of 1-60 events,
history length 50), timed through ``SessionRecommender.encode``: what the scorer calls, host
batching and the device round trip included. Paths: the CPU trace and ONNX Runtime (always), and
on CUDA eager execution and the CUDA-graph replays the scorer uses. Ratios are against the CPU
trace.

Each path is timed twice: back to back ("warm"), and after a 4 ms busy pause before every call
("cold"), which is how the scorer calls it: between two micro-batches it reads Redis, searches
faiss and talks to Kafka, so the encoder's weights and code are no longer in the caches.
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
from serving.settings import CpuRuntime

_ITEMS = 100_000
_HISTORY = 50


_PAUSE_S = 0.004


def _recommender(device: str, cpu_runtime: CpuRuntime = "torchscript") -> SessionRecommender:
    torch.manual_seed(0)
    return SessionRecommender(
        SessionTransformer(_ITEMS, SessionTransformerConfig()), _HISTORY, torch.device(device),
        cpu_runtime=cpu_runtime,
    )


def _eager(recommender: SessionRecommender) -> SessionRecommender:
    # The same CUDA module without its graphs: what the graphs save.
    assert isinstance(recommender._encode, BucketedGraphs)
    recommender._encode = recommender._encode.fn
    return recommender


def _busy(seconds: float) -> None:
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


def _time(recommender: SessionRecommender, histories: list[Any], calls: int) -> dict[str, float]:
    for _ in range(10):
        recommender.encode(histories)
    figures = {}
    for mode, pause in (("", 0.0), ("cold_", _PAUSE_S)):
        samples = []
        for _ in range(calls):
            if pause:
                _busy(pause)
            started = time.perf_counter()
            recommender.encode(histories)
            samples.append((time.perf_counter() - started) * 1e3)
        figures[f"{mode}p50_ms"] = round(percentile(samples, 50), 3)
        figures[f"{mode}p99_ms"] = round(percentile(samples, 99), 3)
    return figures


def run(
    json_path: Path, batches: tuple[int, ...] = (1, 8, 32), calls: int = 300, threads: int = 1
) -> dict[str, Any]:
    torch.set_num_threads(threads)  # the scorer's default (`STREAMREC_TORCH_THREADS`)
    paths = {"cpu_trace": _recommender("cpu"),
             "cpu_onnxruntime": _recommender("cpu", "onnxruntime")}
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
            for mode in ("", "cold_"):
                figures[f"{mode}p50_vs_cpu_trace"] = round(
                    figures[f"{mode}p50_ms"] / row["cpu_trace"][f"{mode}p50_ms"], 3
                )
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
        "bench encoder: SessionRecommender.encode p50 / p99 ms, warm | cold",
        [(f"batch {b} {name}", f"{v['p50_ms']:.2f} / {v['p99_ms']:.2f} | "
          f"{v['cold_p50_ms']:.2f} / {v['cold_p99_ms']:.2f} (x{v['cold_p50_vs_cpu_trace']})")
         for b, row in by_batch.items() for name, v in row.items()],
    )
    return result
