"""Generates one JSON Schema file per record so non-Python producers can validate too."""

from __future__ import annotations

import json
from pathlib import Path

from schemas.registry import RECORDS

SCHEMA_DIR = Path(__file__).parent / "jsonschema"


def render() -> dict[str, str]:
    """File name -> exact file text for every record (deterministic, newline-terminated)."""
    return {
        f"{name}.json": json.dumps(
            model.model_json_schema(mode="validation"), indent=2, sort_keys=True
        )
        + "\n"
        for name, model in RECORDS.items()
    }


def write(directory: Path = SCHEMA_DIR) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in render().items():
        path = directory / name
        path.write_text(text)
        written.append(path)
    return written
