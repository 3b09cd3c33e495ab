"""Accelerator helpers fall back cleanly on CPU."""

from __future__ import annotations

import pytest
import torch

from models.accelerators import (
    BucketedGraphs,
    GraphedInference,
    autocast_context,
    default_device,
    traced_inference,
)


def test_graphed_inference_runs_eagerly_on_cpu() -> None:
    model = torch.nn.Linear(4, 2).eval()
    graphed = GraphedInference(model)
    x = torch.randn(3, 4)
    with torch.no_grad():
        assert torch.equal(graphed(x), model(x))
    assert graphed.replays == 0


class _ShapeDependent(torch.nn.Module):
    """Python control flow on a value: a trace bakes in the branch it saw."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2 if float(x.sum()) > 0 else x + 1


def test_a_traced_module_answers_like_the_eager_one_for_other_shapes() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 2))
    traced = traced_inference(model, [(torch.randn(3, 4),), (torch.randn(1, 4),)])
    assert traced is not model
    x = torch.randn(7, 4)
    with torch.no_grad():
        assert torch.allclose(traced(x), model(x), atol=1e-6)


def test_a_module_whose_trace_disagrees_runs_eagerly() -> None:
    module = _ShapeDependent()
    assert traced_inference(module, [(torch.ones(2),), (-torch.ones(2),)]) is module


def test_autocast_is_a_no_op_on_cpu() -> None:
    with autocast_context(torch.device("cpu")):
        y = torch.ones(2, 2) @ torch.ones(2, 2)
    assert y.dtype == torch.float32


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_graphed_inference_replays_on_cuda() -> None:
    model = torch.nn.Linear(4, 2).cuda().eval()
    graphed = GraphedInference(model)
    x = torch.randn(3, 4, device="cuda")
    with torch.no_grad():
        graphed(x)
        out = graphed(x + 1)
        assert torch.allclose(out, model(x + 1))
    assert graphed.replays == 2
    assert default_device().type == "cuda"


def test_bucketed_graphs_call_the_function_directly_on_cpu() -> None:
    model = torch.nn.Linear(4, 2).eval()
    graphs = BucketedGraphs(model, pad_values=(0.0,))
    x = torch.randn(3, 4)
    with torch.no_grad():
        assert torch.equal(graphs(x), model(x))
    assert graphs.replays == 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_bucketed_graphs_pad_to_the_next_bucket_and_return_only_the_real_rows() -> None:
    model = torch.nn.Linear(4, 2).cuda().eval()
    graphs = BucketedGraphs(model, pad_values=(0.0,), buckets=(2, 8))
    with torch.no_grad():
        for rows in (1, 2, 5, 8, 9):
            x = torch.randn(rows, 4, device="cuda")
            out = graphs(x)
            assert out.shape == (rows, 2)
            assert torch.allclose(out, model(x), atol=1e-6)
    assert graphs.replays == 4  # 9 rows is past the last bucket: eager

