"""A module's forward run by ONNX Runtime on the CPU, checked against the module itself.

Why: the scorer encodes one or two histories per micro-batch, so a call's fixed cost is the
whole cost, and it runs with cold caches (the serving thread did a Redis read, a faiss search
and Kafka I/O since the last call). For the session Transformer at 100,000 items, one history,
one thread (`streamrec bench encoder`): 0.36 ms against the frozen TorchScript trace's 0.80 ms
back to back, 0.66 against 1.10 ms after a 4 ms pause; at 8 rows 0.88-0.90x, at 32 rows it can
be slower (1.1-1.2x), which the scorer's batches of 1-3 requests do not reach at 200 req/s.

The export uses torch's TorchScript-based exporter (``dynamo=False``): it needs no compiler and
handles the data-dependent shapes of the query-position-only last block with dynamic axes. Every
example is run by both and compared; any failure (the packages missing, an unsupported op, a
disagreement) returns ``None`` and the caller keeps its other path.
"""

from __future__ import annotations

import logging
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

log = logging.getLogger(__name__)


class OnnxInference:
    """Calls an ONNX Runtime session with torch tensors in and a torch tensor out (CPU)."""

    def __init__(self, session: object, input_names: Sequence[str]) -> None:
        self._session = session
        self._inputs = tuple(input_names)

    def __call__(self, *inputs: torch.Tensor) -> torch.Tensor:
        feeds = {name: t.numpy() for name, t in zip(self._inputs, inputs, strict=True)}
        (out,) = self._session.run(None, feeds)  # type: ignore[attr-defined]
        return torch.from_numpy(np.asarray(out))


def onnx_inference(
    module: torch.nn.Module,
    examples: Sequence[tuple[torch.Tensor, ...]],
    input_names: Sequence[str],
    dynamic_axes: dict[str, dict[int, str]],
    threads: int = 1,
) -> OnnxInference | None:
    """``module``'s forward as an ONNX Runtime session, or ``None`` when that is not possible.

    ``dynamic_axes`` names the input dimensions that vary between calls (batch, length); the
    output's batch dimension is always dynamic. ``threads`` is the session's intra-op pool: the
    scorer shares two cores with the broker and Redis, so it runs single-threaded like torch.
    """
    module = module.eval()
    try:
        import onnxruntime as ort

        with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings(), \
                torch.no_grad():
            warnings.simplefilter("ignore")  # tracer hints and exporter deprecation notices
            path = Path(folder) / "model.onnx"
            torch.onnx.export(
                module, examples[0], path, dynamo=False, opset_version=17,
                input_names=list(input_names), output_names=["output"],
                dynamic_axes={**dynamic_axes, "output": {0: "batch"}},
            )
            graph = path.read_bytes()
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3  # warnings about unused initialisers are expected
        session = ort.InferenceSession(
            graph, options, providers=["CPUExecutionProvider"]
        )
        runner = OnnxInference(session, input_names)
        with torch.no_grad():
            for example in examples:
                if not torch.allclose(runner(*example), module(*example), atol=1e-5, rtol=1e-4):
                    raise ValueError(f"ONNX Runtime disagrees for {[t.shape for t in example]}")
    except Exception as error:  # any failure means: the caller's other path
        log.warning("ONNX Runtime unavailable for inference error=%s", error)
        return None
    return runner
