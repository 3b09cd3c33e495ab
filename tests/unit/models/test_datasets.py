"""Dataset loading without the network: CSV parsing and the pinned-hash check."""

from __future__ import annotations

import subprocess
import zipfile
from collections.abc import Callable
from pathlib import Path

import pandas as pd
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
    with pytest.raises(datasets.DatasetError, match=r"bad\.csv: missing columns"):
        datasets.load_interactions_csv(path)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (None, "no such file"),
        ("", "empty file"),
        ("user_id,item_id,timestamp\n", "no interactions"),
        ("user_id,item_id,timestamp\n1,2,100\n1,2,yesterday\n", ":3: timestamp 'yesterday'"),
        ("user_id,item_id,timestamp\n1,2,100\n1,2,inf\n", ":3: timestamp 'inf'"),
        ("user_id,item_id,timestamp\n1,2,100\n,2,101\n", ":3: empty user_id"),
        ("user_id,item_id,timestamp\n1,2,100\n\n1,3,102\n", ":3: empty user_id"),
        ("user_id,item_id,timestamp\n1,2,100,extra\n", "not a readable CSV"),
        ("user_id,item_id,timestamp\n1,2,100\n1,2,101,extra\n", "not a readable CSV"),
        ("user_id,item_id,timestamp\n1,2,100\n1,2\n", ":3: empty timestamp"),
    ],
    ids=["missing", "empty", "header-only", "word-timestamp", "infinite-timestamp",
         "empty-field", "blank-line", "long-first-row", "long-row", "short-row"],
)
def test_a_csv_the_loader_cannot_read_whole_is_refused_with_its_name_and_problem(
    tmp_path: Path, body: str | None, problem: str
) -> None:
    path = tmp_path / "mine.csv"
    if body is not None:
        path.write_text(body)
    with pytest.raises(datasets.DatasetError) as refused:
        datasets.load_interactions_csv(path)
    assert str(refused.value).startswith(str(path)) and problem in str(refused.value)


def test_a_csv_yields_the_frame_the_ml100k_path_yields(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = [("196", "242", "881250949"), ("186", "302", "891717742"), ("22", "377", "878887116")]
    inter = tmp_path / "ml-100k.inter"
    inter.write_text("user_id:token\titem_id:token\trating:float\ttimestamp:float\n"
                     + "".join(f"{u}\t{i}\t3\t{t}\n" for u, i, t in rows))
    monkeypatch.setattr(datasets, "fetch_ml100k", lambda cache_dir: inter)
    csv = tmp_path / "same.csv"
    csv.write_text("timestamp,item_id,user_id,rating\n"
                   + "".join(f"{t},{i},{u},3\n" for u, i, t in rows))
    from_csv, from_ml100k = datasets.load_interactions_csv(csv), datasets.load_ml100k(tmp_path)
    pd.testing.assert_frame_equal(from_csv, from_ml100k)
    assert list(from_csv.columns) == list(datasets.COLUMNS)
    assert from_csv["timestamp"].dtype == "int64"


def _fake_pip(member: str, body: str) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Stands in for `pip download`: checks the command and drops a wheel holding `member`."""

    def run(command: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        assert command[1:4] == ["-m", "pip", "download"]
        assert f"recbole=={datasets.RECBOLE_VERSION}" in command and "--no-deps" in command
        assert "install" not in command
        dest = Path(command[command.index("--dest") + 1])
        dest.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(dest / f"recbole-{datasets.RECBOLE_VERSION}-py3-none-any.whl",
                             "w") as wheel:
            wheel.writestr(member, body)
        return subprocess.CompletedProcess(command, 0, "", "")

    return run


def test_tampered_download_fails_the_hash_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(subprocess, "run", _fake_pip(
        datasets.ML100K_MEMBER, "user_id:token\titem_id:token\n1\t2\n"))
    with pytest.raises(datasets.DatasetError, match="sha256"):
        datasets.fetch_ml100k(tmp_path)
    assert not (tmp_path / "ml-100k.inter").exists()


def test_tampered_item_content_fails_the_hash_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(subprocess, "run", _fake_pip(
        datasets.ML100K_ITEMS_MEMBER, "item_id:token\tclass:token_seq\n1\tDrama\n"))
    with pytest.raises(datasets.DatasetError, match="sha256"):
        datasets.fetch_ml100k_items(tmp_path)
    assert not (tmp_path / "ml-100k.item").exists()


def test_a_failed_pip_download_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(command: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(command, 1, "", "ERROR: No matching distribution\n")

    monkeypatch.setattr(subprocess, "run", refuse)
    with pytest.raises(datasets.DatasetError, match="No matching distribution"):
        datasets.fetch_ml100k(tmp_path)


def test_the_wheel_is_fetched_once_for_both_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[list[str]] = []
    fake = _fake_pip(datasets.ML100K_MEMBER, "x")

    def counting(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        calls.append(command)
        return fake(command, **kwargs)

    monkeypatch.setattr(subprocess, "run", counting)
    for fetch in (datasets.fetch_ml100k, datasets.fetch_ml100k_items):
        with pytest.raises(datasets.DatasetError):
            fetch(tmp_path)
    assert len(calls) == 1


def test_sequence_files_become_ordered_interactions(tmp_path: Path) -> None:
    path = tmp_path / "seq.txt"
    path.write_text("u1 5 3 9\n\nu2 3\n")
    frame = datasets.load_sequences(path)
    assert frame["user_id"].tolist() == ["u1", "u1", "u1", "u2"]
    assert frame["item_id"].tolist() == ["5", "3", "9", "3"]
    stamps = frame["timestamp"].tolist()
    assert stamps[0] < stamps[1] < stamps[2] and stamps[3] == stamps[0]


def test_a_sequence_line_without_items_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "seq.txt"
    path.write_text("u1 5 3\nu2\n")
    with pytest.raises(datasets.DatasetError, match=":2:"):
        datasets.load_sequences(path)
