from __future__ import annotations

import pytest

from models.session_config import SessionTransformerConfig


def test_a_larger_batch_scales_the_learning_rate_linearly_and_warms_up_longer() -> None:
    base = SessionTransformerConfig(batch_size=32, lr=2e-3, warmup_frac=0.05)
    large = base.scaled_to_batch(512)
    assert large.batch_size == 512
    assert large.lr == pytest.approx(2e-3 * 16)
    assert large.warmup_frac == 0.1


def test_the_same_or_a_smaller_batch_keeps_the_warm_up() -> None:
    base = SessionTransformerConfig(batch_size=32, lr=2e-3, warmup_frac=0.05)
    assert base.scaled_to_batch(32) == base
    small = base.scaled_to_batch(16)
    assert small.lr == pytest.approx(1e-3) and small.warmup_frac == 0.05
