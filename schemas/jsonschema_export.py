"""Generates one JSON Schema file per record so non-Python producers can validate too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from schemas.registry import RECORDS

SCHEMA_DIR = Path(__file__).parent / "jsonschema"
DIALECT = "https://json-schema.org/draft/2020-12/schema"
"""The dialect pydantic generates, named in every file so validators need not guess."""


def schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema of one record, naming its dialect."""
    return {"$schema": DIALECT, **model.model_json_schema(mode="validation")}


def render() -> dict[str, str]:
    """File name -> exact file text for every record (deterministic, newline-terminated)."""
    return {
        f"{name}.json": json.dumps(schema(model), indent=2, sort_keys=True) + "\n"
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
