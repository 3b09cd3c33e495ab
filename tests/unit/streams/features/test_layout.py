"""apply.lua spells the feature layout (streams/features/layout.py) and nothing else.

The script cannot import the layout, so its names are checked here: every field it loads, writes
or reads, and its key suffixes, are the layout's, and every fixed field the layout defines is
one the script writes. The readers (serving/features.py) import the layout's names.
"""

from __future__ import annotations

import re

from serving import features
from streams.feature_worker.writer import SOURCE
from streams.features import layout

CODE = "\n".join(line.split("--", 1)[0] for line in SOURCE.splitlines())
"""The script without its comments."""

NOT_FIELDS = {"u", "s", "i", "c", "p", "m", "h", "", ":", "streamrec_apply"}
"""Entity kinds, bucket families and the function's name."""


def _loaded() -> dict[str, set[str]]:
    block = CODE.split("local LOADED = {", 1)[1].split("\n}", 1)[0]
    return {
        kind: set(re.findall(r"'([^']*)'", names))
        for kind, names in re.findall(r"(\w) = \{([^}]*)\}", block)
    }


def test_every_field_the_script_names_is_in_the_layout() -> None:
    every = set().union(*layout.HASH_FIELDS.values())
    literals = set(re.findall(r"'([a-z_:]*)'", CODE)) - NOT_FIELDS
    suffixes = {layout.SEQUENCE_SUFFIX, layout.HOUR_BUCKETS_SUFFIX}
    assert literals - suffixes <= every, literals - suffixes - every
    assert set(re.findall(r"\bv\.(\w+)", CODE)) <= every


def test_what_the_script_loads_per_kind_is_that_kinds_layout() -> None:
    loaded = _loaded()
    assert set(loaded) == set(layout.HASH_FIELDS)
    for kind, names in loaded.items():
        assert names <= layout.HASH_FIELDS[kind], kind


def test_every_fixed_field_of_the_layout_is_one_the_script_writes() -> None:
    named = set(re.findall(r"'([a-z_:]*)'", CODE)) | set(re.findall(r"\bv\.(\w+)", CODE))
    # Counters are named by the fold (fold.py, from the layout) and merged by name.
    by_the_fold = {*layout.COUNTER_FIELDS, layout.SESSION_EVENTS}
    fixed = set().union(*layout.HASH_FIELDS.values()) - by_the_fold
    assert fixed <= named, fixed - named
    assert f"KEY .. '{layout.SEQUENCE_SUFFIX}'" in CODE
    assert f"KEY .. '{layout.HOUR_BUCKETS_SUFFIX}'" in CODE


def test_the_readers_read_the_layouts_fields() -> None:
    assert set(features.USER_FIELDS) <= layout.HASH_FIELDS["u"]
    assert set(features.SESSION_FIELDS) <= layout.HASH_FIELDS["s"]
    assert set(features.ITEM_STATE_FIELDS) <= layout.HASH_FIELDS["i"]


def test_a_field_outside_the_layout_is_recognised() -> None:
    assert layout.is_layout_field("u", "aff:c1")
    assert layout.is_layout_field("i", "_p12")
    assert not layout.is_layout_field("i", "aff:c1")
    assert not layout.is_layout_field("s", "lag_ms")
    assert not layout.is_layout_field("u", "_px")
