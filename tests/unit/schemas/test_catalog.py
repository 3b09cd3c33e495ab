import pytest

from schemas.catalog import item_key


def test_a_record_key_names_an_item_id() -> None:
    assert item_key(b"i42") == "i42"


@pytest.mark.parametrize("key", [b"", b"bad\xff", b"a" * 1_000, b"with space"])
def test_a_key_that_names_no_valid_item_id_is_refused(key: bytes) -> None:
    with pytest.raises(ValueError):
        item_key(key)
