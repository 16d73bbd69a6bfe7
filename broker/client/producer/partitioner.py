"""Partition choice: the adaptive sticky ``BuiltInPartitioner`` (KIP-480 / KIP-794) and the
pluggable ``partitioner.class`` callable.

Owns, as Kafka's ``BuiltInPartitioner``:

* ``StickyPartitionInfo``: the current sticky partition of a topic for keyless records,
  with the bytes produced to it since it was chosen.
* The append protocol used by ``RecordAccumulator.append``: ``peek_current_partition_info``
  (choose one on first use), then under the partition's queue lock
  ``is_partition_changed`` (another thread switched: retry) and, after the append,
  ``update_partition_info``, which switches once ``batch.size`` bytes went to the
  partition and the last batch is full (never stranding a half-full batch), or
  unconditionally at twice ``batch.size``.
* ``next_partition``: uniform among partitions with a leader while no load statistics
  exist (or adaptive partitioning is off); otherwise a draw from the cumulative frequency
  table built by ``update_partition_load_stats`` from the queue depths the Sender sees in
  ``ready()``: weight ``max_depth + 1 - depth``, so shorter queues (faster brokers) get
  more records. Partitions whose leader has not drained for
  ``partitioner.availability.timeout.ms`` are left out by the accumulator.

``partition_for_key`` (keyed records) lives in ``murmur2.py``; ``custom_partition`` calls
a ``partitioner.class`` callable and checks its answer.

Thread-safety: the sticky info is swapped with a single reference assignment (atomic in
CPython), and the protocol above re-validates it under the queue lock, as Kafka does with
an ``AtomicReference``. ``update_partition_load_stats`` runs on the Sender thread and
publishes an immutable ``PartitionLoadStats``.
"""

from __future__ import annotations

import random
from bisect import bisect_right
from collections.abc import Callable, Sequence
from typing import Any

from broker.client.errors import KafkaError


class StickyPartitionInfo:
    __slots__ = ("index", "produced_bytes")

    def __init__(self, index: int) -> None:
        self.index = index
        self.produced_bytes = 0

    def __repr__(self) -> str:
        return f"StickyPartitionInfo({self.index}, produced={self.produced_bytes})"


class PartitionLoadStats:
    """A cumulative frequency table over ``partition_ids[:length]``."""

    __slots__ = ("cumulative_frequency_table", "partition_ids", "length")

    def __init__(self, cft: list[int], partition_ids: list[int], length: int) -> None:
        self.cumulative_frequency_table = cft
        self.partition_ids = partition_ids
        self.length = length


class BuiltInPartitioner:
    """One per topic; see the module docstring."""

    def __init__(self, topic: str, sticky_batch_size: int, rng: random.Random | None = None) -> None:
        if sticky_batch_size < 1:
            raise ValueError("sticky_batch_size must be at least 1")
        self.topic = topic
        self.sticky_batch_size = sticky_batch_size
        self._sticky: StickyPartitionInfo | None = None
        self.load_stats: PartitionLoadStats | None = None
        self._rng = rng or random.Random()

    def _random(self) -> int:
        return self._rng.getrandbits(31)  # Utils.toPositive(ThreadLocalRandom.nextInt())

    def next_partition(self, cluster: Any) -> int:
        """Choose the next sticky partition (see the module docstring)."""
        rnd = self._random()
        stats = self.load_stats
        if stats is None:
            available = cluster.available_partitions_for_topic(self.topic)
            if available:
                return available[rnd % len(available)]
            count = cluster.partition_count(self.topic)
            return rnd % count
        cft = stats.cumulative_frequency_table
        weighted = rnd % cft[stats.length - 1]
        # The first entry strictly greater than the draw.
        index = bisect_right(cft, weighted, 0, stats.length)
        return stats.partition_ids[index]

    def peek_current_partition_info(self, cluster: Any) -> StickyPartitionInfo:
        info = self._sticky
        if info is not None:
            return info
        info = StickyPartitionInfo(self.next_partition(cluster))
        if self._sticky is None:  # racing creators: the first one wins
            self._sticky = info
        return self._sticky  # type: ignore[return-value]

    def is_partition_changed(self, info: StickyPartitionInfo | None) -> bool:
        return info is not None and self._sticky is not info

    def update_partition_info(self, info: StickyPartitionInfo | None, appended_bytes: int,
                              cluster: Any, enable_switch: bool) -> None:
        """Count ``appended_bytes`` and switch partition when enough was produced."""
        if info is None:
            return
        info.produced_bytes += appended_bytes
        produced = info.produced_bytes
        size = self.sticky_batch_size
        if (produced >= size and enable_switch) or produced >= size * 2:
            self._sticky = StickyPartitionInfo(self.next_partition(cluster))

    def update_partition_load_stats(self, queue_sizes: list[int] | None,
                                    partition_ids: list[int] | None, length: int) -> None:
        """Build the cumulative frequency table from queue depths (in place, as Kafka)."""
        if queue_sizes is None or partition_ids is None:
            self.load_stats = None
            return
        # Fewer than 2 partitions: nothing to weigh, unless some were excluded for
        # unavailability (length < len), in which case the remaining ones still matter.
        if length < 1 or len(queue_sizes) < 2:
            self.load_stats = None
            return
        max_plus_1 = queue_sizes[0]
        all_equal = True
        for i in range(1, length):
            if queue_sizes[i] != max_plus_1:
                all_equal = False
            if queue_sizes[i] > max_plus_1:
                max_plus_1 = queue_sizes[i]
        max_plus_1 += 1
        if all_equal and length == len(queue_sizes):
            self.load_stats = None
            return
        queue_sizes[0] = max_plus_1 - queue_sizes[0]
        for i in range(1, length):
            queue_sizes[i] = max_plus_1 - queue_sizes[i] + queue_sizes[i - 1]
        self.load_stats = PartitionLoadStats(queue_sizes, partition_ids, length)


def custom_partition(partitioner: Callable[..., int], topic: str, key: Any, value: Any,
                     num_partitions: int) -> int:
    """Call a ``partitioner.class`` callable ``(topic, key, value, num_partitions)``."""
    p = partitioner(topic, key, value, num_partitions)
    if not isinstance(p, int) or p < 0:
        raise KafkaError(f"partitioner.class returned {p!r}: partitions are ints >= 0")
    if p >= num_partitions:
        raise KafkaError(f"partitioner.class returned partition {p} but {topic} has "
                         f"{num_partitions} partitions")
    return p


def available_ids(partitions: Sequence[Any]) -> list[int]:
    """Partition ids with a leader, from a cluster's partition infos."""
    return [p.partition for p in partitions if p.leader >= 0]
