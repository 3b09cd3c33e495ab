from __future__ import annotations

import pytest
from pydantic import ValidationError

from deploy.local.settings import LocalStackSettings


def test_no_cluster_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STREAMREC_LOCAL__REDIS_CLUSTER", raising=False)
    assert LocalStackSettings().redis_cluster_ports == ()


def test_a_cluster_takes_consecutive_ports_from_its_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMREC_LOCAL__REDIS_CLUSTER", "3")
    monkeypatch.setenv("STREAMREC_LOCAL__REDIS_CLUSTER_PORT", "27001")
    assert LocalStackSettings().redis_cluster_ports == (27001, 27002, 27003)


@pytest.mark.parametrize("masters", [1, 2])
def test_fewer_than_three_masters_is_refused(masters: int) -> None:
    with pytest.raises(ValidationError, match="at least 3 masters"):
        LocalStackSettings(redis_cluster=masters)
