"""``CoordinatorRuntime``: the shared parts of one coordinator, wired, and the order they
start in (Kafka's ``CoordinatorRuntime``, on one node: every partition of the topic is
loaded at startup and stays owned by this broker).

A coordinator (group, transaction, share, the Schema Registry's store) holds one runtime
and writes only what is its own: its records' codecs, its ``replay(record)`` (how a
record changes its cache), its requests, and its timers' callbacks. The runtime gives it:

* ``topic``: its ``InternalTopic`` (settings from the broker config, ``ensure()``,
  ``partition_for(key)``);
* ``writer`` / ``append(partition, records, ...)``: the ``RecordWriter`` with its error map;
* ``loader``: the ``CoordinatorLoader``;
* ``timer``: the ``CoordinatorTimer`` (one-shot timers on the coordinator's thread when it
  names one, periodic tasks on the broker's scheduler);
* ``partition_lock(p)``: one lock per partition, held around an append and the cache
  change that follows, so that the cache always ends in log order;
* ``startup(replay)``: the partition count of an existing topic is adopted, the locks are
  made, every partition is loaded in order (``LoadResult`` per partition), then the timer
  thread starts and ``loaded`` turns True (``check_loaded`` raises
  COORDINATOR_LOAD_IN_PROGRESS until then). ``shutdown()`` stops the timers (idempotent).

Invariants: the partition count (and so ``partition_for``) is fixed once ``startup`` has
run; ``partition_lock`` is valid for every partition of that count.

Thread-safety: ``startup`` / ``shutdown`` are called by the broker's lifecycle thread;
everything else from any thread (each part documents its own).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from broker.log.clock import SYSTEM_TIME, Time
from broker.log.scheduler import Scheduler
from broker.protocol import ErrorCode
from broker.server.coordinator.loader import CoordinatorLoader, LoadResult, Replay, TransactionEnd
from broker.server.coordinator.timer import CoordinatorTimer
from broker.server.coordinator.topic import InternalTopic, InternalTopicSpec, TopicSource
from broker.server.coordinator.writer import RecordWriter
from broker.server.errors import ApiError


class CoordinatorRuntime:
    """The runtime of one coordinator over ``spec``'s topic (module docstring).
    ``topics``: the broker's ``TopicManager`` (a ``TopicSource``); ``config``: the server
    config; ``scheduler``: the broker's (the ``LogManager``'s) for periodic tasks;
    ``append_errors``: the writer's error map; ``timer_thread``: the name of the
    coordinator's own timer thread (None: no one-shot timers of its own);
    ``on_append((topic, partition))``: wakes the fetches waiting on a partition."""

    def __init__(self, spec: InternalTopicSpec, topics: TopicSource, config: Mapping[str, Any], *,
                 append_errors: Mapping[int, int], time: Time = SYSTEM_TIME, scheduler: Scheduler | None = None,
                 on_append: Callable[[tuple[str, int]], None] | None = None,
                 timer_thread: str | None = None) -> None:
        self.settings = spec.settings(config)
        self.topic = InternalTopic(topics, self.settings)
        self.writer = RecordWriter(self.topic, errors=append_errors, compression=self.settings.compression_codec,
                                   time=time, on_append=on_append)
        self.loader = CoordinatorLoader(self.topic, self.settings.load_buffer_size)
        self.timer = CoordinatorTimer(time, scheduler, thread_name=timer_thread)
        self._locks: list[threading.Lock] = [threading.Lock() for _ in range(self.topic.num_partitions)]
        self._loaded = False
        # the hot paths' calls, bound once (``RecordWriter.append``: ``timestamp``,
        # ``producer_id``, ``producer_epoch``, ``errors``; ``InternalTopic.partition_for``)
        self.append = self.writer.append
        self.partition_for = self.topic.partition_for

    # --- lifecycle ---

    def startup(self, replay: Replay, *, on_transaction_end: TransactionEnd | None = None) -> list[LoadResult]:
        """Adopt the existing topic's partition count, load every partition, start the
        timers; the ``LoadResult`` of each partition loaded (none when the topic does not
        exist yet)."""
        info = self.topic.resolve()
        self._locks = [threading.Lock() for _ in range(self.topic.num_partitions)]
        results = []
        if info is not None:
            for p in range(info.partitions):
                results.append(self.loader.load(p, replay, on_transaction_end=on_transaction_end))
        self.timer.startup()
        self._loaded = True
        return results

    def shutdown(self) -> None:
        self.timer.shutdown()

    @property
    def loaded(self) -> bool:
        return self._loaded

    def check_loaded(self) -> None:
        if not self._loaded:
            raise ApiError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)

    # --- the topic ---

    @property
    def num_partitions(self) -> int:
        return self.topic.num_partitions

    def partition_lock(self, partition: int) -> threading.Lock:
        return self._locks[partition]


__all__ = ["CoordinatorRuntime"]
