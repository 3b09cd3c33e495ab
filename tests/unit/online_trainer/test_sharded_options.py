from __future__ import annotations

import pytest

from models.session_config import SessionTransformerConfig
from online_trainer.distributed import SUPPORTED_OPTIONS, refuse_unsupported


def test_implemented_options_pass_and_the_sampled_softmax_is_refused() -> None:
    refuse_unsupported(SessionTransformerConfig(dim=16, epochs=2, batch_size=64, dropout=0.0))
    with pytest.raises(ValueError, match="full softmax"):
        refuse_unsupported(SessionTransformerConfig(loss="sampled"))
    assert set(SessionTransformerConfig.model_fields) >= SUPPORTED_OPTIONS
