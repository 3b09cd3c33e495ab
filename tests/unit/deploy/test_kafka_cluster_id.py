import base64
import uuid

import pytest

from deploy.local import kafka


def test_cluster_id_never_starts_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    draws = iter([uuid.UUID(bytes=bytes([0xF8] + [0] * 15)), uuid.UUID(int=42)])
    monkeypatch.setattr(uuid, "uuid4", lambda: next(draws))

    cluster_id = kafka._new_cluster_id()

    assert not cluster_id.startswith("-")
    assert base64.urlsafe_b64decode(cluster_id + "==") == uuid.UUID(int=42).bytes
