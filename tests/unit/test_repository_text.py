"""The project's text speaks to users and maintainers about what the code is, never about how it
was developed: git history holds that story. These checks run over every tracked text file."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GO_MODULE_FILES = {"go.mod", "go.sum"}
THIS_FILE = Path(__file__).resolve().relative_to(ROOT).as_posix()

DIARY = {
    "a numbered work session": re.compile(r"\b[Ss]ession [0-9]+\b(?![-_])"),
    "a record of what was tried": re.compile(r"\b[Tt]ried and not kept\b|\bnot kept\b"),
    "a commit hash": re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,12}\b"),
    "a design document outside the repository": re.compile(r"\.\./shared|\bDESIGN\.md\b"),
}


def _tracked_text_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    files = []
    for name in filter(None, listed):
        path = ROOT / name.decode()
        # Go's module files pin dependencies by checksum and pseudo-version: hashes, not prose.
        if name.decode() == THIS_FILE or not path.is_file() or path.name in GO_MODULE_FILES:
            continue
        head = path.read_bytes()[:4096]
        if b"\0" not in head:
            files.append(path)
    return files


def _findings(pattern: re.Pattern[str]) -> list[str]:
    found = []
    for path in _tracked_text_files():
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if pattern.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}")
    return found


@pytest.mark.parametrize("what", sorted(DIARY))
def test_no_tracked_text_tells_the_development_story(what: str) -> None:
    assert _findings(DIARY[what]) == []


@pytest.mark.parametrize(
    ("line", "what"),
    [
        ("README: session 12's runs", "a numbered work session"),
        ("ZGC tried and not kept", "a record of what was tried"),
        ("the change in c8a4d49 halved it", "a commit hash"),
        ("see ../shared/DESIGN.md", "a design document outside the repository"),
    ],
)
def test_the_patterns_catch_what_they_name(line: str, what: str) -> None:
    assert DIARY[what].search(line)


@pytest.mark.parametrize(
    "line",
    [
        "session_id u42-s7",
        "the session Transformer",
        "sha256 0123456789abcdef0123456789",
        "deadbeef",
    ],
)
def test_the_patterns_leave_ordinary_text_alone(line: str) -> None:
    assert not any(p.search(line) for p in DIARY.values())
