"""Tiered storage's figures for operators: Kafka's remote storage metrics (KIP-405's
BrokerTopicMetrics ``Remote*PerSec`` and KIP-963's lag and size gauges) as plain numbers
the broker's ``/metrics`` endpoint reads when scraped.

Owns ``RemoteStorageStats``: counters per topic, bumped by the ``RemoteLogManager`` as it
works (the names are Kafka's without ``Remote`` and ``PerSec``: Prometheus takes rates of
totals):

* ``copy_bytes`` / ``copy_requests`` / ``copy_errors``: segments copied to remote storage
  (their ``.log`` size), and copies that failed;
* ``fetch_bytes`` / ``fetch_requests`` / ``fetch_errors``: Fetch reads served from remote
  segments (the record bytes returned), and reads that failed;
* ``delete_requests`` / ``delete_errors``: remote segments deleted by remote retention,
  and deletions that failed.

The per-partition gauges (remote log size, segment count, copy lag) are not kept here:
``RemoteLogManager.partition_gauges`` computes them from its segment lists at scrape time.

Invariants: counters only grow (a broker's lifetime; they restart at 0 with it).
Thread-safety: one lock around every update and the snapshot; the snapshot is a copy.
"""

from __future__ import annotations

import threading
from collections import Counter

COUNTERS = ("copy_bytes", "copy_requests", "copy_errors", "fetch_bytes", "fetch_requests", "fetch_errors",
            "delete_requests", "delete_errors")


class RemoteStorageStats:
    """Counters per topic (module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, Counter[str]] = {name: Counter() for name in COUNTERS}

    def record(self, topic: str, **increments: int) -> None:
        """Add ``increments`` (names from ``COUNTERS``) to ``topic``'s counters."""
        with self._lock:
            for name, n in increments.items():
                self._counts[name][topic] += n

    def snapshot(self) -> dict[str, dict[str, int]]:
        """{counter name: {topic: total}}, a copy."""
        with self._lock:
            return {name: dict(counts) for name, counts in self._counts.items()}


__all__ = ["COUNTERS", "RemoteStorageStats"]
