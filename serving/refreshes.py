"""The scorer's background refreshes, off the request thread.

- The serving configuration (unavailable items, rules, experiment) and the popularity lists,
  every `config_refresh_s`: merging thousands of popularity entries would stall a batch. A
  changed experiment re-pins the versions its frozen arms serve. While Redis is away the last
  ones read keep serving.
- The item state table, following Redis's change notices (serving/item_state_table.py).
"""

from __future__ import annotations

import logging
import threading

from serving.experiment import Experiment
from serving.features import RedisFeatureReader
from serving.item_changes import ItemChanges
from serving.item_state_table import ItemStateTable, ReadStates
from serving.metrics import ServeMetrics
from serving.pinned_versions import PinnedVersions

logger = logging.getLogger(__name__)


class ConfigRefresh:
    def __init__(
        self,
        reader: RedisFeatureReader,
        configured: Experiment,
        pinned: PinnedVersions,
        metrics: ServeMetrics,
        interval_s: float,
    ) -> None:
        self._reader = reader
        self._configured = configured
        self._pinned = pinned
        self._metrics = metrics
        self._interval_s = interval_s

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(self._interval_s):
            self.once()

    def once(self) -> None:
        try:
            self._reader.refresh()
        except Exception as error:
            logger.warning("serving configuration not refreshed error=%s", type(error).__name__)
        experiment = self._reader.config.experiment or self._configured
        self._pinned.pin(experiment.pinned)
        self._metrics.experiment_in_force(experiment)


class ItemStateRefresh:
    def __init__(
        self,
        table: ItemStateTable,
        read: ReadStates,
        changes: ItemChanges,
        interval_s: float,
    ) -> None:
        self._table = table
        self._read = read
        self._changes = changes
        self._interval_s = interval_s

    def run(self, stop: threading.Event) -> None:
        try:
            self._table.follow(self._read, self._changes.changed, stop, self._interval_s)
        except Exception:
            logger.exception("item state refresh crashed")
            raise
        finally:
            self._changes.close()
