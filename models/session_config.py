"""Configuration of the session Transformer and its training (frozen, validated, documented)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class SessionTransformerConfig(BaseModel):
    """Architecture and training hyper-parameters of :class:`SessionTransformer`.

    Defaults are the recipe (:mod:`models.lab.session_recipe`) as it comes out on ML-100K, the
    stream the live loop replays; offline evaluation sets the data-derived fields from the
    training data it fits on. Every value was chosen on validation splits, never on test.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    dim: int = Field(64, ge=8, description="Embedding/hidden width (padded to 16-byte rows).")
    heads: int = Field(2, ge=1, description="Attention heads per layer.")
    layers: int = Field(2, ge=1, description="Transformer encoder layers.")
    ffn_multiplier: int = Field(2, ge=1, description="Feed-forward width as a multiple of dim.")
    max_len: int = Field(200, ge=2, description="Most recent events the encoder reads.")
    dropout: float = Field(0.3, ge=0.0, lt=1.0, description="Dropout on inputs and in layers.")
    item_dropout: float = Field(
        0.0, ge=0.0, lt=1.0, description="Dropout on the item vectors the training loss scores "
        "(targets and negatives alike).",
    )
    loss: Literal["softmax", "sampled"] = Field(
        "sampled", description="Sampled softmax with the logQ correction, or the full softmax "
        "over the catalog (models.softmax_loss).",
    )
    n_negatives: int = Field(
        1024, ge=1, description="Negatives a step shares, uniform without replacement (sampled)."
    )
    mask_seen: bool = Field(
        True, description="Drop each prefix's own items from its softmax (serving filters them)."
    )
    lr: float = Field(2e-3, gt=0.0, description="Peak AdamW learning rate.")
    item_lr_multiplier: float = Field(
        0.1, gt=0.0, description="Learning-rate factor of the item table and bias."
    )
    weight_decay: float = Field(0.0, ge=0.0, description="AdamW decoupled weight decay.")
    warmup_frac: float = Field(0.05, ge=0.0, lt=1.0, description="Linear warm-up share of steps.")
    min_lr_frac: float = Field(0.05, ge=0.0, le=1.0, description="Cosine floor as lr share.")
    grad_clip: float = Field(1.0, gt=0.0, description="Global gradient-norm clip.")
    epochs: int = Field(
        75, ge=1, description="Most passes over the training sequences (the training budget)."
    )
    batch_size: int = Field(32, ge=1, description="Sequences per optimisation step.")
    spectral_init: bool = Field(
        True, description="Start item vectors from training co-occurrence (models.item_init)."
    )
    random_crops: bool = Field(
        True, description="Long sequences: a random max_len window per epoch, not only the last."
    )
    eval_every: int = Field(5, ge=1, description="Epochs between validation checks.")
    patience: int = Field(4, ge=1, description="Checks without improvement before stopping.")
    time_budget_s: float = Field(
        1200.0, gt=0.0, description="Wall-clock safety cap for fit() (a shared CPU runs slow)."
    )
    seed: int = Field(0, description="Seed for initialisation, batching and dropout.")
    threads: int = Field(0, ge=0, description="torch CPU threads; 0 keeps torch's default.")

    def scaled_to_batch(self, batch_size: int) -> SessionTransformerConfig:
        """The large-batch recipe: the learning rate grows with the batch (linear scaling rule)
        and a larger batch gets at least a tenth of its steps as linear warm-up, since its first
        steps at the scaled rate are the ones that diverge."""
        factor = batch_size / self.batch_size
        warmup = max(self.warmup_frac, 0.1) if factor > 1 else self.warmup_frac
        return self.model_copy(
            update={"batch_size": batch_size, "lr": self.lr * factor, "warmup_frac": warmup}
        )
