"""The snapshot read (``kafkalog.snapshot=true``): the latest value of each key, a table
view of a compacted topic, computed on the executors.

Owns: ``LatestByKey``, the reduce of one topic-partition's offset range to the last record
of each key (tombstones, i.e. null values, removing their key), fed with the decoded
batches of a ``readers.RangeReader`` in offset order and giving back the surviving rows in
the same Arrow schema (``broker.record.columnar.arrow_schema``), in offset order.

Why inside the reader: a Python Data Source only hands Spark the rows its readers return,
it cannot add a shuffle of its own. But a key's records all live in one Kafka partition
(the producer's partitioner sends a key to one partition, and the cleaner compacts each
partition on its own), so the latest-by-key of a topic is the union of the latest-by-key
of its partitions: reducing each partition inside the task that reads it IS the
distributed reduce by (topic, key) - Spark runs the partitions' tasks in parallel and
nothing needs to move between them (a key written to several partitions - a custom
partitioner, a topic whose partition count grew - gets one row per partition, as Kafka's
cleaner keeps one latest record per partition). That is why a snapshot read never splits a
partition's range in several tasks (``minPartitions`` / ``maxRecordsPerPartition`` are
refused with it) and why the pushed filters it takes over are the partition-selecting
ones only (a filter on offset or timestamp applies to the snapshot's rows, not to the
records it is computed from).

Semantics, those of Kafka's log cleaner and of a table built from a changelog: over the
records of [start, end) of each partition (``startingOffsets`` .. ``endingOffsets``, so a
snapshot "as of" any offsets or timestamps), the last record of each key wins; a last
record with a null value (tombstone) removes the key; records without a key are left out
(the cleaner drops them too, and they name no row). The rows keep every column of a normal
read (the winning record's offset, timestamp, headers). The result does not depend on
whether the cleaner already ran: cleaning only removes records that are not the latest of
their key (and tombstones, which remove nothing that was not removed already).

Memory, per task: the dict ``key -> offset`` of the keys alive so far (the key bytes plus
about 100 bytes each) and the candidate rows kept so far, compacted whenever they exceed
``max(2 x live keys, COMPACT_ROWS)`` rows, plus the one decoded batch being added (bounded
by ``maxBytesPerBatch`` as in a normal read). So about three times the partition's
compacted size at most - not the size of the range read: a partition whose live keys do
not fit in an executor's memory cannot be snapshotted this way (read it normally and
reduce with ``groupBy`` + ``max_by`` in Spark instead).

Thread-safety: a ``LatestByKey`` belongs to one task.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["LatestByKey", "COMPACT_ROWS"]

COMPACT_ROWS = 65536  # candidate rows kept before the first compaction
_OFFSET, _KEY, _VALUE = 0, 3, 4  # columns of broker.record.columnar.arrow_schema


class LatestByKey:
    """The latest record of each key of one partition's range (see the module docstring).

    ``add`` the decoded batches in offset order, then iterate ``rows()``."""

    def __init__(self, compact_rows: int = COMPACT_ROWS) -> None:
        self.latest: dict[bytes, int] = {}   # live key -> offset of its latest record
        self.compact_rows = compact_rows
        self._kept: list[pa.RecordBatch] = []  # candidate rows, in offset order
        self._kept_rows = 0

    def add(self, batch: pa.RecordBatch) -> None:
        """Fold ``batch`` (rows in offset order, after the previous batches) in."""
        import pyarrow as pa

        keys = batch.column(_KEY).to_pylist()
        offsets = batch.column(_OFFSET).to_pylist()
        dead = batch.column(_VALUE).is_null().to_pylist()
        latest = self.latest
        for key, offset, tombstone in zip(keys, offsets, dead):
            if key is None:
                continue
            if tombstone:
                latest.pop(key, None)
            else:
                latest[key] = offset
        mask = [key is not None and latest.get(key) == offset for key, offset in zip(keys, offsets)]
        if any(mask):
            kept = batch.filter(pa.array(mask, type=pa.bool_()))  # a copy: the input is not held
            self._kept.append(kept)
            self._kept_rows += kept.num_rows
        if self._kept_rows > max(2 * len(latest), self.compact_rows):
            self._compact()

    def _alive(self, batch: pa.RecordBatch):
        import pyarrow as pa

        latest = self.latest
        return pa.array([latest.get(k) == o for k, o in zip(batch.column(_KEY).to_pylist(),
                                                            batch.column(_OFFSET).to_pylist())],
                        type=pa.bool_())

    def _compact(self) -> None:
        """Drop the candidate rows that a later record of their key superseded."""
        import pyarrow as pa

        kept = [b.filter(self._alive(b)) for b in self._kept]
        kept = [b for b in kept if b.num_rows]
        if len(kept) > 1:
            kept = pa.Table.from_batches(kept).combine_chunks().to_batches()
        self._kept = kept
        self._kept_rows = sum(b.num_rows for b in kept)

    def rows(self, max_rows_per_batch: int = COMPACT_ROWS) -> Iterator[pa.RecordBatch]:
        """The latest record of every live key, in offset order, in batches of at most
        ``max_rows_per_batch`` rows."""
        self._compact()
        for batch in self._kept:
            for at in range(0, batch.num_rows, max_rows_per_batch):
                yield batch.slice(at, max_rows_per_batch)
