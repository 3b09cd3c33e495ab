"""`streamrec bench live --interactions`: a CSV the run cannot replay is a bad parameter named
with its file and problem, refused before the stack, the pre-training or any service starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import bench.calibration
from cli.app import app


@pytest.fixture(autouse=True)
def _no_calibration(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bench group times the host first; a refused parameter needs no timing."""
    monkeypatch.setattr(bench.calibration, "begin", lambda: None)


@pytest.fixture(autouse=True)
def _nothing_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object) -> None:
        raise AssertionError("the run started on a refused CSV")

    monkeypatch.setattr("bench.live.run.run", refuse)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (None, "no such file"),
        ("user_id,item_id\n1,2\n", "missing columns ['timestamp']"),
        ("user_id,item_id,timestamp\n1,2,soon\n", "timestamp 'soon' is not numeric"),
        ("user_id,item_id,timestamp\n" + "1,2,100\n" * 300, "300 events, the run needs at "
                                                            "least 599"),
    ],
    ids=["missing", "columns", "timestamp", "too-few"],
)
def test_a_csv_the_run_cannot_replay_is_a_bad_parameter_naming_file_and_problem(
    tmp_path: Path, body: str | None, problem: str
) -> None:
    path = tmp_path / "mine.csv"
    if body is not None:
        path.write_text(body)
    result = CliRunner().invoke(
        app, ["bench", "live", "--interactions", str(path), "--events", "300",
              "--json", str(tmp_path / "live.json")],
        env={"COLUMNS": "1000"},  # the error box on one line
    )
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '--interactions' (STREAMREC_DEMO__INTERACTIONS): {path}" in (
        result.output), result.output
    assert problem in result.output, result.output
    assert not (tmp_path / "live.json").exists()
