"""The log cleaner's broker keys (Kafka's names, defaults and documentation) and
``CleanerConfig``, their typed, frozen view.

Owns the definitions of the ``log.cleaner.*`` broker keys (threads, offset-map memory and
load factor, back-off, I/O throttle, on/off). ``define_cleaner_keys`` adds them to the
broker's table (``broker.server.config.SERVER_CONFIG_DEF``); ``CleanerConfig.from_config``
reads them once from a server config for ``LogCleaner`` (``manager.py``, which re-exports
it). The topic-level keys of compaction (min.cleanable.dirty.ratio, min/max.compaction.lag.ms,
delete.retention.ms) are ``LogConfig``'s (``broker/log/config.py``).

Invariants: the dataclass defaults equal the definitions' defaults
(log.cleaner.io.max.bytes.per.second's is Kafka's Double.MAX_VALUE: no throttling).
Imports only ``broker.config``. Thread-safety: the table is immutable after import; a
``CleanerConfig`` is frozen.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from broker.config import BOOLEAN, DOUBLE, INT, LONG, ConfigDef, at_least, between


def define_cleaner_keys(config_def: ConfigDef) -> ConfigDef:
    """Add the log cleaner's keys to ``config_def``."""
    return (
        config_def
        .define("log.cleaner.enable", BOOLEAN, True,
                "Run the log cleaner threads that compact cleanup.policy=compact topics.")
        .define("log.cleaner.threads", INT, 1, "The number of log cleaner threads.", at_least(0))
        .define("log.cleaner.backoff.ms", LONG, 15000,
                "How long a cleaner thread sleeps when no log is cleanable.", at_least(0))
        .define("log.cleaner.dedupe.buffer.size", LONG, 134217728,
                "Memory of the offset maps (key hash -> latest offset), shared by the cleaner "
                "threads.", at_least(0))
        .define("log.cleaner.io.buffer.load.factor", DOUBLE, 0.9,
                "How full a cleaner's offset map may get before a cleaning stops filling it.",
                between(0, 1))
        .define("log.cleaner.io.max.bytes.per.second", DOUBLE, sys.float_info.max,
                "The log cleaner's I/O (bytes read plus written per second) is throttled to this.",
                at_least(0))
    )


CLEANER_CONFIG_DEF = define_cleaner_keys(ConfigDef())


@dataclass(frozen=True)
class CleanerConfig:
    """The broker's log.cleaner.* keys (topic-level ones live in ``LogConfig``)."""

    enable_cleaner: bool = True
    num_threads: int = 1
    dedupe_buffer_size: int = 134217728
    dedupe_buffer_load_factor: float = 0.9
    backoff_ms: int = 15000
    max_io_bytes_per_second: float = sys.float_info.max

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> CleanerConfig:
        """From a server config (raw or parsed: each key parsed and validated by its
        definition; a missing key takes its default)."""
        v = CLEANER_CONFIG_DEF.parse_from(config)
        return cls(enable_cleaner=v["log.cleaner.enable"],
                   num_threads=v["log.cleaner.threads"],
                   dedupe_buffer_size=v["log.cleaner.dedupe.buffer.size"],
                   dedupe_buffer_load_factor=v["log.cleaner.io.buffer.load.factor"],
                   backoff_ms=v["log.cleaner.backoff.ms"],
                   max_io_bytes_per_second=v["log.cleaner.io.max.bytes.per.second"])
