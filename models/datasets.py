"""Interaction datasets for offline evaluation.

Two sources, one shape: a pandas frame with columns ``user_id`` (str), ``item_id`` (str) and
``timestamp`` (int64 seconds).

- :func:`load_ml100k` fetches MovieLens-100K without a hand download: the ``recbole`` wheel
  ships ``ml-100k.inter``; ``pip download`` fetches the wheel through pip's configured index
  (so any mirror works), we read the file out of it (never installing recbole), check a pinned
  sha256 and cache the wheel and the file under ``.streamrec/datasets/`` (git-ignored).
- :func:`load_interactions_csv` reads any CSV with header ``user_id,item_id,timestamp``.
- :func:`load_sequences` reads the one-line-per-user format of the public sequential benchmarks
  (``user item_1 item_2 ...``, items in time order, no timestamps, as in the S3Rec
  preprocessing of the Amazon data); each event gets a synthetic increasing timestamp.

Item content comes from the same wheel: :func:`load_ml100k_items` reads ``ml-100k.item`` (title,
release year, genres) the same way, with its own pinned sha256.
"""

from __future__ import annotations

import hashlib
import logging
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path

import numpy as np
import numpy.typing as npt
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
_TIMEOUT_S = 300.0


class DatasetError(RuntimeError):
    """The dataset could not be fetched, verified or parsed."""


def _download_wheel(cache_dir: Path) -> Path:
    """The recbole wheel, fetched once by ``pip download`` through pip's own configuration
    (index, mirror, proxy, certificates); dependencies are not fetched and nothing is installed."""
    wheels = cache_dir / "wheels"
    pattern = f"recbole-{RECBOLE_VERSION}-*.whl"
    cached = sorted(wheels.glob(pattern))
    if cached:
        return cached[0]
    command = [
        sys.executable, "-m", "pip", "download", f"recbole=={RECBOLE_VERSION}", "--no-deps",
        "--only-binary=:all:", "--disable-pip-version-check", "--quiet", "--dest", str(wheels),
    ]
    log.info("downloading package=recbole version=%s dest=%s", RECBOLE_VERSION, wheels)
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DatasetError(f"pip download of recbole {RECBOLE_VERSION} failed: {exc}") from exc
    found = sorted(wheels.glob(pattern))
    if done.returncode != 0 or not found:
        detail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise DatasetError(
            f"pip download of recbole {RECBOLE_VERSION} failed (exit {done.returncode}): "
            + " | ".join(detail)
        )
    return found[0]


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
    wheel_path = _download_wheel(cache_dir)
    try:
        with zipfile.ZipFile(wheel_path) as wheel:
            data = wheel.read(member)
    except (zipfile.BadZipFile, KeyError) as exc:
        wheel_path.unlink(missing_ok=True)  # fetched afresh next time
        raise DatasetError(f"{wheel_path.name}: no readable {member}: {exc}") from exc
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
    """Any CSV with header ``user_id,item_id,timestamp`` (ids kept as strings, timestamps in
    seconds; other columns ignored). A file that cannot be read whole is refused with its name
    and the first problem (a line number where there is one), never partly read: a row with an
    empty field or a non-numeric timestamp is an error, not a row dropped."""
    if not path.is_file():
        raise DatasetError(f"{path}: no such file")
    try:
        with warnings.catch_warnings():
            # A row longer than the header would lose its extra fields: refused, not cut.
            warnings.simplefilter("error", pd.errors.ParserWarning)
            raw = pd.read_csv(path, dtype=str, keep_default_na=False, skip_blank_lines=False,
                              index_col=False)
    except pd.errors.EmptyDataError as exc:
        raise DatasetError(f"{path}: empty file (want header user_id,item_id,timestamp)") from exc
    except (pd.errors.ParserError, pd.errors.ParserWarning, UnicodeDecodeError) as exc:
        raise DatasetError(f"{path}: not a readable CSV: {exc}") from exc
    missing = [c for c in COLUMNS if c not in raw.columns]
    if missing:
        raise DatasetError(f"{path}: missing columns {missing} (has {list(raw.columns)})")
    if raw.empty:
        raise DatasetError(f"{path}: no interactions (a header and no rows)")
    for column in COLUMNS:
        empty = (raw[column].str.strip() == "").to_numpy()
        if empty.any():
            raise DatasetError(f"{path}:{_line(empty)}: empty {column}")
    ts = pd.to_numeric(raw["timestamp"], errors="coerce")
    bad = ~np.isfinite(ts.to_numpy(dtype=float))  # NaN: not a number
    if bad.any():
        value = raw["timestamp"].to_numpy()[bad][0]
        raise DatasetError(f"{path}:{_line(bad)}: timestamp {value!r} is not numeric seconds")
    return _normalise(raw.assign(timestamp=ts))


def _line(rows: npt.NDArray[np.bool_]) -> int:
    """The file line of the first true row (line 1 is the header)."""
    return int(np.flatnonzero(rows)[0]) + 2


SEQUENCE_START_S = 1_500_000_000
SEQUENCE_STEP_S = 3_600
"""Synthetic timestamps of :func:`load_sequences`: the k-th event of every user at
``SEQUENCE_START_S + k * SEQUENCE_STEP_S``; only the order within a user means anything."""


def load_sequences(path: Path) -> pd.DataFrame:
    """A one-line-per-user file (``user item_1 item_2 ...``, items in time order)."""
    users: list[str] = []
    items: list[str] = []
    stamps: list[int] = []
    with path.open() as lines:
        for number, line in enumerate(lines, start=1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) < 2:
                raise DatasetError(f"{path}:{number}: a user line needs at least one item")
            users.extend([fields[0]] * (len(fields) - 1))
            items.extend(fields[1:])
            stamps.extend(SEQUENCE_START_S + k * SEQUENCE_STEP_S for k in range(len(fields) - 1))
    if not users:
        raise DatasetError(f"{path}: no interactions")
    return pd.DataFrame({"user_id": users, "item_id": items,
                         "timestamp": pd.Series(stamps, dtype="int64")})


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file's bytes (the digest an evaluation report records)."""
    digest = hashlib.sha256()
    with path.open("rb") as data:
        for block in iter(lambda: data.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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
