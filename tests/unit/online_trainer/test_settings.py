from __future__ import annotations

import pytest
from pydantic import ValidationError

from models.session_config import SessionTransformerConfig
from online_trainer.settings import TrainSettings


@pytest.mark.parametrize("change", [{"objective": "masked"}, {"virtual_items": 3}])
def test_the_online_trainer_refuses_the_offline_only_training_variants(
    change: dict[str, object],
) -> None:
    with pytest.raises(ValidationError, match="causal models without virtual items"):
        TrainSettings(model=SessionTransformerConfig.model_validate(change))


def test_reverse_pretraining_is_allowed_online_since_the_model_stays_causal() -> None:
    settings = TrainSettings(model=SessionTransformerConfig(reverse_pretrain_epochs=2))
    assert settings.model.reverse_pretrain_epochs == 2
