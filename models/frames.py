"""Dataframe backend for batch feature engineering: cudf when importable, pandas otherwise.

Feature code calls :func:`frame_library` and sticks to the API subset both libraries share, so
the same code path runs on GPU and CPU. :func:`temporal_features` is that code path for the
lagged and cyclic time features the session model and the ranker use.
"""

from __future__ import annotations

import importlib
import logging
import math
from functools import lru_cache
from types import ModuleType
from typing import Any

import numpy as np

log = logging.getLogger(__name__)
SECONDS_PER_DAY = 86_400
SECONDS_PER_WEEK = 7 * SECONDS_PER_DAY


@lru_cache(maxsize=1)
def frame_library() -> ModuleType:
    """``cudf`` if it imports (a CUDA machine with RAPIDS), else ``pandas``."""
    try:
        module = importlib.import_module("cudf")
    except Exception as exc:
        log.debug("cudf unavailable, using pandas reason=%s", exc)
        return importlib.import_module("pandas")
    log.info("frame backend=cudf")
    return module


def to_pandas(frame: Any) -> Any:
    """A pandas frame whichever backend produced ``frame``."""
    return frame.to_pandas() if hasattr(frame, "to_pandas") else frame


def temporal_features(frame: Any) -> Any:
    """Adds ``gap_s`` (seconds since the user's previous event, -1 for the first),
    ``hour_sin``/``hour_cos`` and ``dow_sin``/``dow_cos`` to a ``user_id, timestamp`` frame.

    Works on pandas and cudf frames alike; rows keep their order.
    """
    lib = frame_library()
    if lib.__name__ == "cudf" and not isinstance(frame, lib.DataFrame):
        frame = lib.DataFrame.from_pandas(frame)
    out = frame.copy()
    ts = out["timestamp"].astype("int64")
    # diff() follows row order inside each group: callers pass events in time order per user.
    out["gap_s"] = out.groupby("user_id")["timestamp"].diff().fillna(-1).astype("int64")
    hour = (ts % SECONDS_PER_DAY) / SECONDS_PER_DAY * (2 * math.pi)
    dow = (ts % SECONDS_PER_WEEK) / SECONDS_PER_WEEK * (2 * math.pi)
    out["hour_sin"], out["hour_cos"] = np.sin(hour), np.cos(hour)
    out["dow_sin"], out["dow_cos"] = np.sin(dow), np.cos(dow)
    return out
