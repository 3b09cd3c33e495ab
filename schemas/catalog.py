"""Item metadata: what the catalog knows about an item, published to `catalog.items`."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from schemas.fields import INTEGRAL, STRICT_RECORD, Id, SchemaVersion1, Text, Timestamp
from schemas.wire import ContractError

MAX_GENRES = 32
"""Most genres (or any other tags) one item may carry."""

Year = Annotated[int, Field(ge=1800, le=2100), INTEGRAL]


class CatalogItem(BaseModel):
    """One item's metadata; key on the wire is `item_id`.

    The topic is compacted: an item's newest record is its metadata. The rankers read the
    genres and the release year as content features (models.point_in_time); an item without
    a record, or without genres or a year, has those features at their neutral value.
    """

    model_config = STRICT_RECORD

    schema_version: SchemaVersion1 = 1
    item_id: Id
    title: Annotated[Text, Field(max_length=256)] = ""
    genres: Annotated[list[Id], Field(max_length=MAX_GENRES)] = Field(default_factory=list)
    release_year: Year | None = None
    updated_at: Timestamp


_ITEM_ID: TypeAdapter[str] = TypeAdapter(Id)


def item_key(key: bytes) -> str:
    """The item id a record key names (a tombstone's only content); ContractError when the key
    is not UTF-8 or not a valid id."""
    try:
        return _ITEM_ID.validate_python(key.decode("utf-8", errors="strict"))
    except (UnicodeDecodeError, ValidationError):
        raise ContractError("InvalidKey", "record key is not a valid item id") from None
