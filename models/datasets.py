"""Interaction datasets for offline evaluation.

Two sources, one shape: a pandas frame with columns ``user_id`` (str), ``item_id`` (str) and
``timestamp`` (int64 seconds).

- :func:`load_ml100k` fetches MovieLens-100K without a hand download: the ``recbole`` wheel on
  PyPI ships ``ml-100k.inter``; we read it out of the wheel (never installing recbole), check a
  pinned sha256 and cache the file under ``.streamrec/datasets/`` (git-ignored).
- :func:`load_interactions_csv` reads any CSV with header ``user_id,item_id,timestamp``.

Item content comes from the same wheel: :func:`load_ml100k_items` reads ``ml-100k.item`` (title,
release year, genres) the same way, with its own pinned sha256.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

import pandas as pd

log = logging.getLogger(__name__)

RECBOLE_VERSION = "1.2.1"
ML100K_MEMBER = "recbole/dataset_example/ml-100k/ml-100k.inter"
ML100K_SHA256 = "4edb74e2a81178c2ba9ff381495f754f996c4aea351b1272ca36b43da0935eff"
ML100K_ITEMS_MEMBER = "recbole/dataset_example/ml-100k/ml-100k.item"
ML100K_ITEMS_SHA256 = "51d7cdf777ce5c0f5b32c1d947a4a81fe07d75e78abbe761e0cd4d0756064532"
ITEM_COLUMNS = ("item_id", "title", "release_year", "genres")
DEFAULT_CACHE = Path(".streamrec/datasets")
COLUMNS = ("user_id", "item_id", "timestamp")
_TIMEOUT_S = 120.0


class DatasetError(RuntimeError):
    """The dataset could not be fetched, verified or parsed."""


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=_TIMEOUT_S) as resp:
        body: bytes = resp.read()
    return body


def _wheel_url(version: str) -> str:
    """Resolves the recbole wheel URL from PyPI's JSON API.

    The per-version endpoint is tried first; some mirrors only serve the project endpoint.
    """
    candidates = (
        f"https://pypi.org/pypi/recbole/{version}/json",
        "https://pypi.org/pypi/recbole/json",
    )
    for url in candidates:
        try:
            meta: dict[str, Any] = json.loads(_get(url))
        except OSError as exc:
            log.warning("pypi metadata unavailable url=%s error=%s", url, exc)
            continue
        files = meta.get("releases", {}).get(version) or meta.get("urls", [])
        for entry in files:
            if str(entry.get("filename", "")).endswith(".whl"):
                return str(entry["url"])
    raise DatasetError(f"no recbole {version} wheel found on PyPI")


def fetch_ml100k(cache_dir: Path = DEFAULT_CACHE) -> Path:
    """Returns the path of the verified ``ml-100k.inter`` file, downloading it once."""
    return _fetch_member(ML100K_MEMBER, ML100K_SHA256, cache_dir)


def fetch_ml100k_items(cache_dir: Path = DEFAULT_CACHE) -> Path:
    """Returns the path of the verified ``ml-100k.item`` file, downloading it once."""
    return _fetch_member(ML100K_ITEMS_MEMBER, ML100K_ITEMS_SHA256, cache_dir)


def _fetch_member(member: str, sha256: str, cache_dir: Path) -> Path:
    target = cache_dir / member.rsplit("/", 1)[-1]
    if target.exists() and _sha256(target.read_bytes()) == sha256:
        return target
    url = _wheel_url(RECBOLE_VERSION)
    log.info("downloading member=%s url=%s", target.name, url)
    with zipfile.ZipFile(io.BytesIO(_get(url))) as wheel:
        data = wheel.read(member)
    digest = _sha256(data)
    if digest != sha256:
        raise DatasetError(f"{target.name} sha256 mismatch: got {digest}, want {sha256}")
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    tmp.write_bytes(data)
    tmp.replace(target)  # atomic: a crash never leaves a half-written cache entry
    return target


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def load_ml100k(cache_dir: Path = DEFAULT_CACHE) -> pd.DataFrame:
    """MovieLens-100K interactions (all ratings count as interactions)."""
    raw = pd.read_csv(fetch_ml100k(cache_dir), sep="\t", dtype=str)
    raw.columns = [c.split(":")[0] for c in raw.columns]
    return _normalise(raw)


def load_ml100k_items(cache_dir: Path = DEFAULT_CACHE) -> pd.DataFrame:
    """MovieLens-100K item content: ``item_id`` (str), ``title`` (str), ``release_year`` (float,
    NaN when unknown) and ``genres`` (tuple of genre names)."""
    raw = pd.read_csv(fetch_ml100k_items(cache_dir), sep="\t", dtype=str, keep_default_na=False)
    raw.columns = [c.split(":")[0] for c in raw.columns]
    return pd.DataFrame(
        {
            "item_id": raw["item_id"].astype(str).to_numpy(),
            "title": raw["movie_title"].astype(str).to_numpy(),
            "release_year": pd.to_numeric(raw["release_year"], errors="coerce").to_numpy(),
            "genres": [tuple(g.split()) for g in raw["class"].astype(str)],
        }
    )


def load_interactions_csv(path: Path) -> pd.DataFrame:
    """Any CSV with header ``user_id,item_id,timestamp`` (ids kept as strings)."""
    raw = pd.read_csv(path, dtype=str)
    missing = [c for c in COLUMNS if c not in raw.columns]
    if missing:
        raise DatasetError(f"{path}: missing columns {missing}")
    return _normalise(raw)


def _normalise(raw: pd.DataFrame) -> pd.DataFrame:
    frame = raw.loc[:, list(COLUMNS)].dropna()
    ts = pd.to_numeric(frame["timestamp"], errors="coerce")
    if ts.isna().any():
        raise DatasetError("timestamp must be numeric seconds")
    return pd.DataFrame(
        {
            "user_id": frame["user_id"].astype(str).to_numpy(),
            "item_id": frame["item_id"].astype(str).to_numpy(),
            "timestamp": ts.astype("int64").to_numpy(),
        }
    )
