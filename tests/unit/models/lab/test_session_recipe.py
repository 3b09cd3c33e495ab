"""The recipe's data-derived hyper-parameters follow the training data's shape."""

from __future__ import annotations

import math

import numpy as np
import pytest

from models.lab.session_recipe import data_shape, fitted_to
from models.sequences import UserSequences
from models.session_config import SessionTransformerConfig


def _data(users: int, items: int, length: int) -> UserSequences:
    rng = np.random.default_rng(0)
    seqs = [rng.integers(1, items + 1, length) for _ in range(users)]
    return UserSequences(seqs, [np.arange(length) * 60 for _ in seqs], items)


def test_sparse_data_with_short_sequences_gets_the_sparse_settings() -> None:
    train = _data(users=5_000, items=20_000, length=7)
    fitted = fitted_to(SessionTransformerConfig(), train)
    assert data_shape(train).density < 0.01
    assert (fitted.max_len, fitted.dropout, fitted.batch_size) == (50, 0.6, 128)
    assert (fitted.item_lr_multiplier, fitted.item_dropout, fitted.weight_decay) == (1.0, 0.4, 0.3)
    assert fitted.lr == pytest.approx(1e-3 * math.sqrt(128 * 6 / 700), rel=1e-3)
    shape = (fitted.dim, fitted.layers, fitted.heads, fitted.n_negatives, fitted.epochs)
    assert shape == (256, 1, 1, 1024, 20)


def test_a_shape_field_the_caller_set_is_kept_on_sparse_data() -> None:
    train = _data(users=5_000, items=20_000, length=7)
    fitted = fitted_to(SessionTransformerConfig(epochs=3, dim=32), train)
    assert (fitted.epochs, fitted.dim, fitted.layers) == (3, 32, 1)


def test_dense_data_with_long_sequences_and_few_users_gets_the_dense_settings() -> None:
    train = _data(users=900, items=1_500, length=240)
    fitted = fitted_to(SessionTransformerConfig(), train)
    assert data_shape(train).density > 0.01
    assert fitted.max_len == 200 and fitted.dropout == 0.3 and fitted.item_lr_multiplier == 0.1
    assert fitted.item_dropout == 0.0 and fitted.weight_decay == 0.0
    assert fitted.batch_size == 32 and 900 / fitted.batch_size >= 25
    defaults = SessionTransformerConfig()
    shape = (fitted.dim, fitted.layers, fitted.heads, fitted.n_negatives, fitted.epochs)
    assert shape == (defaults.dim, defaults.layers, defaults.heads, defaults.n_negatives,
                     defaults.epochs)
    # 32 histories of 200 predicted positions a step (the window): sqrt(6400 / 700) x 1e-3
    assert fitted.lr == pytest.approx(1e-3 * math.sqrt(32 * 200 / 700), rel=1e-3)


def test_only_the_data_derived_fields_change() -> None:
    base = SessionTransformerConfig(epochs=7, seed=3)
    fitted = fitted_to(base, _data(users=100, items=50, length=20))
    changed = {k for k, v in fitted.model_dump().items() if v != base.model_dump()[k]}
    assert changed <= {"max_len", "dropout", "batch_size", "lr", "item_lr_multiplier",
                       "item_dropout", "weight_decay"}
    assert (fitted.epochs, fitted.seed) == (7, 3)
