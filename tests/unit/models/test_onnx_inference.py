"""ONNX Runtime inference of a module: same outputs as the module, or None (never wrong)."""

import sys

import pytest
import torch

from models.onnx_inference import OnnxInference, onnx_inference
from models.session_config import SessionTransformerConfig
from models.session_transformer import QueryEncoder, SessionTransformer

AXES = {"items": {0: "batch", 1: "length"}, "gaps": {0: "batch", 1: "length"}}


def inputs(batch: int, length: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    items = torch.randint(1, 65, (batch, length), generator=generator)
    items[0, length // 2 + 1 :] = 0  # a padded row
    gaps = torch.randint(0, 10_000, (batch, length), generator=generator)
    gaps[items == 0] = -1
    return items, gaps


def encoder() -> QueryEncoder:
    torch.manual_seed(0)
    config = SessionTransformerConfig(dim=16, layers=2, max_len=20)
    return QueryEncoder(SessionTransformer(64, config))


def test_the_session_encoder_runs_in_onnx_runtime_with_the_module_outputs_at_unseen_shapes() -> (
    None
):
    module = encoder().eval()
    runner = onnx_inference(module, [inputs(2, 8, 0), inputs(1, 20, 1)], ("items", "gaps"), AXES)
    assert isinstance(runner, OnnxInference)
    for batch, length in ((1, 1), (5, 13), (3, 20)):  # shapes the export never saw
        example = inputs(batch, length, batch * 100 + length)
        with torch.no_grad():
            expected = module(*example)
        out = runner(*example)
        assert out.shape == expected.shape
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-4)


def test_without_onnx_runtime_the_caller_gets_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import fails
    assert onnx_inference(encoder(), [inputs(2, 8, 0)], ("items", "gaps"), AXES) is None


def test_a_graph_that_disagrees_with_the_module_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = encoder().eval()
    example = inputs(2, 8, 0)
    with torch.no_grad():
        wrong = module(*example) + 1e-3  # the right shape, slightly off
    monkeypatch.setattr(OnnxInference, "__call__", lambda self, *t: wrong)
    assert onnx_inference(module, [example], ("items", "gaps"), AXES) is None
