from __future__ import annotations

from schemas.jsonschema_export import SCHEMA_DIR, render


def test_committed_json_schemas_match_the_models() -> None:
    """Run `streamrec schemas export` after changing a contract."""
    expected = render()
    on_disk = {p.name: p.read_text() for p in SCHEMA_DIR.glob("*.json")}
    assert on_disk == expected


def test_json_schemas_forbid_unknown_fields() -> None:
    import json

    for name, text in render().items():
        assert json.loads(text).get("additionalProperties") is False, name
