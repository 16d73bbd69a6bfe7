"""The streaming ``DataSourceStreamReader`` of the ``kafkalog`` source (micro-batches).

Owns: ``KafkaLogStreamReader``: ``spark.readStream.format("kafkalog")`` in direct mode
(a log directory) and network mode (``kafka.bootstrap.servers``), with the offsets,
admission control and data-loss rules of Spark's ``KafkaMicroBatchStream``. Offsets are
resolved on the driver through the mode's ``planning.OffsetReader``; each micro-batch is
split and read exactly as a batch read (``planning.stream_ranges`` ->
``KafkaLogInputPartition`` -> the mode's ``RangeReader`` -> ``schema.SparkBatchBuilder``, or
``formats.decode.TypedBatchBuilder`` for a typed read, whose catalog of writer schemas is
loaded afresh when each micro-batch is planned, so a schema version registered while the
query runs is decoded from the next micro-batch on).

Offsets (what Spark writes to the checkpoint's offset log and hands back on restart):
Spark's ``KafkaSourceOffset`` JSON, ``{"topic": {"0": 42, "1": 7}}``, the next offset to
read of every partition (``planning.offsets_json``). A micro-batch reads [start, end) of
each partition, so a query restarted from its checkpoint goes on at the last batch's end:
no record twice, none skipped (except data loss, which is reported).

The first micro-batch of a new query always runs, even when it reads nothing: Spark
writes only a batch's *end* offsets to the offset log, and pyspark gives a Python source
no place of its own in the checkpoint (Spark's Kafka source keeps its resolved starting
offsets in ``sources/0``), so without that batch a query stopped before any record
arrived would resolve ``startingOffsets=latest`` again when restarted and skip what came
in between (an AvailableNow query with ``latest`` would never read anything).
``initialOffset`` therefore returns the resolved offsets plus the key ``_INITIAL``
(``"kafkalog:initial": true``; ``:`` is not allowed in Kafka topic names), whose JSON
never equals what ``latestOffset`` returns; the key is dropped wherever offsets are read.

How pyspark 4.3 drives it (``pyspark/sql/streaming/python_streaming_source_runner.py``):
one instance lives in a planner process on the driver for the whole query and gets
``initialOffset`` (new queries), ``getDefaultReadLimit``, ``latestOffset(start, limit)``
(``limit`` is the default read limit, or ``ReadAllAvailable`` for Trigger.Once),
``reportLatestOffset`` (the progress' ``latestOffset``), ``partitions(start, end)``,
``commit`` and ``stop``. Since the class is a ``SupportsTriggerAvailableNow``, pyspark
calls ``prepareForTriggerAvailableNow`` for Trigger.AvailableNow (instead of wrapping the
source, which would read everything in one batch): the latest offsets at that moment
become the target that ``latestOffset`` never passes, still in several micro-batches
when maxOffsetsPerTrigger is set, and the query stops once the target is reached. The
executors get other instances (pickled without the driver's connection) and only call
``read``. Stitched mode (``path`` and ``kafka.bootstrap.servers``, ``stitched.py``) keeps
its offset reader like network mode and cuts each micro-batch's ranges at the local log
start offsets of that moment.

Invariants: every offset returned is canonical JSON (sorted), so "no new data" is
recognised by Spark's text comparison; ``latestOffset`` never returns an offset beyond
the AvailableNow target; with a limit other than ``ReadAllAvailable`` a micro-batch holds
about ``maxOffsetsPerTrigger`` records at most (Spark's proportional split, rounding
included); ``minOffsetsPerTrigger`` / ``maxTriggerDelay`` may hold a trigger back, except
under Trigger.AvailableNow (it must reach its target) and Trigger.Once.

Committing to a group (``kafkalog.commitOffsetsToGroup``, network mode, opt-in): the end
offsets of each finished micro-batch are committed to that consumer group as a simple
consumer (OffsetCommit, generation -1), so that ``kafkalog groups --describe`` and any
Kafka lag monitor show the query's progress (SPARK-27549). They are never read back: the
checkpoint stays the source of truth. A failed commit logs a warning and the query goes
on; the next commit catches up. Spark calls ``commit(end)`` for micro-batch N only when it
plans batch N+1 with new data, so the last batch of an AvailableNow run (or of a running
query that went idle) would never be committed; but every ``latestOffset(start, limit)``
gets as ``start`` the end of a micro-batch that Spark has finished (its commit log entry
is written before the next batch is planned; a batch re-run after a restart is planned
without ``latestOffset``) or a new query's starting offsets, so ``start`` is committed
there too. Offsets equal to those committed last are not sent again.

Thread-safety: pyspark calls a reader from one thread. The network-mode offset reader
(one ``ConsumerNetworkClient``) is kept for the query on the driver, dropped after any
error and closed by ``stop``; direct mode lists the log directory afresh on every call.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from ..options import ReadOptions
from . import brief_cluster_errors
from .bridge import TABLE_KEY, TableFileInputPartition, bridge_initial, read_table_partition, stream_table_partitions
from .partitions import KafkaLogInputPartition, batch_builder, input_partitions, read_input_partition

__all__ = ["KafkaLogStreamReader"]

log = logging.getLogger("spark_kafkalog")

_INITIAL = "kafkalog:initial"  # marks initialOffset's result (see the module docstring)


def _offsets(offset: dict) -> dict:
    from ..planning import offsets_from_json

    return offsets_from_json({k: v for k, v in offset.items() if k not in (_INITIAL, TABLE_KEY)})


class KafkaLogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of the ``kafkalog`` source (see the module docstring)."""

    def __init__(self, options: ReadOptions, typed=None) -> None:
        self.options = options
        self.typed = typed  # formats.registry.TypedRead of a typed read, else None
        self._network = None           # network mode: NetworkOffsetReader kept for the query
        self._initial: dict | None = None   # resolved startingOffsets (new queries)
        self._target: dict | None = None    # Trigger.AvailableNow: the offsets not to pass
        self._latest: dict | None = None    # latest offsets seen last (reportLatestOffset)
        self._last_trigger_ms = 0.0         # minOffsetsPerTrigger / maxTriggerDelay
        self._group_committed: dict | None = None  # kafkalog.commitOffsetsToGroup: committed last
        self._table_version: int | None = None      # bridge reads: the commit the first batch reads

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_network"] = None  # a socket never travels to the executors
        return state

    # -- offsets (driver) --

    @contextlib.contextmanager
    def _offset_reader(self):
        from . import open_offset_reader

        if self.options.mode == "direct":
            reader = open_offset_reader(self.options)
            try:
                yield reader
            finally:
                reader.close()
            return
        if self._network is None:
            self._network = open_offset_reader(self.options)
        try:
            yield self._network
        except BaseException:
            self._close_network()  # a fresh connection next time
            raise

    def _close_network(self) -> None:
        network, self._network = self._network, None
        if network is not None:
            try:
                network.close()
            except Exception:  # pragma: no cover - closing a broken client
                log.debug("closing the offset reader failed", exc_info=True)

    def _resolve_initial(self, reader) -> dict:
        from ..planning import initial_offsets

        if self._initial is None:
            if self.options.table is not None:  # a bridge read starts at the table's offsets
                self._initial, self._table_version = bridge_initial(self.options, reader)
            else:
                self._initial = initial_offsets(self.options, reader)
        return self._initial

    @brief_cluster_errors
    def initialOffset(self) -> dict:
        from ..planning import offsets_json

        with self._offset_reader() as reader:
            out: dict[str, Any] = offsets_json(self._resolve_initial(reader))
        out[_INITIAL] = True
        if self._table_version is not None:
            out[TABLE_KEY] = self._table_version
        return out

    @brief_cluster_errors
    def prepareForTriggerAvailableNow(self) -> None:
        from ..planning import latest_partition_offsets

        with self._offset_reader() as reader:
            # A new query's starting offsets are resolved before the target, so that
            # startingOffsets=latest never lies beyond it. A restarted query does not need
            # them (it resumes from its checkpoint): a failure here is left to
            # initialOffset, which Spark calls only for a new query.
            try:
                self._resolve_initial(reader)
            except Exception:
                log.debug("starting offsets not resolved before the AvailableNow target",
                          exc_info=True)
            self._target = latest_partition_offsets(self.options, reader)
        self._latest = dict(self._target)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    @brief_cluster_errors
    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        from ..planning import latest_partition_offsets, offsets_json, pending_records, rate_limit

        begin = _offsets(start)
        self._commit_to_group(begin)  # the previous micro-batch is done (see the module docstring)
        with self._offset_reader() as reader:
            if self._target is not None:
                latest = dict(self._target)
            else:
                latest = latest_partition_offsets(self.options, reader)
            self._latest = latest
            if isinstance(limit, ReadAllAvailable):
                return offsets_json(latest)
            max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) \
                else self.options.max_offsets_per_trigger
            min_rows = limit.min_rows if isinstance(limit, ReadMinRows) \
                else self.options.min_offsets_per_trigger
            if self._target is not None:
                min_rows = None  # AvailableNow must reach its target: never wait for more
            new = [tp for tp in latest if tp not in begin]
            new_earliest = reader.earliest_offsets(new) if new and (max_rows or min_rows) else {}
        if min_rows is not None and self._delay_batch(
                min_rows, pending_records(begin, latest, new_earliest)):
            return offsets_json(begin)
        if max_rows is not None:
            return offsets_json(rate_limit(max_rows, begin, latest, new_earliest))
        return offsets_json(latest)

    def _delay_batch(self, min_rows: int, pending: int) -> bool:
        """Spark's delayBatch: wait for ``minOffsetsPerTrigger`` records, at most
        ``maxTriggerDelay`` after the last micro-batch."""
        now = time.time() * 1000
        if now - self._last_trigger_ms >= self.options.max_trigger_delay_ms or pending >= min_rows:
            self._last_trigger_ms = now
            return False
        return True

    def reportLatestOffset(self) -> dict | None:
        from ..planning import offsets_json

        return None if self._latest is None else offsets_json(self._latest)

    @brief_cluster_errors
    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        from ..planning import stream_ranges

        begin, until = _offsets(start), _offsets(end)
        table: list[InputPartition] = []
        if start.get(TABLE_KEY) is not None:  # a bridge read's first micro-batch: the table's files too
            table.extend(stream_table_partitions(self.options, int(start[TABLE_KEY]), begin, self.typed))
        if begin == until:
            return table
        with self._offset_reader() as reader:
            ranges = stream_ranges(self.options, reader, begin, until)
            return [*table, *input_partitions(self.options, reader, ranges, self.typed)]

    def commit(self, end: dict) -> None:
        """The offsets live in Spark's checkpoint. With ``kafkalog.commitOffsetsToGroup``
        the micro-batch's end offsets are also committed to that group (see the module
        docstring)."""
        self._commit_to_group(_offsets(end))

    def _commit_to_group(self, offsets: dict) -> None:
        """Commit ``offsets`` to ``kafkalog.commitOffsetsToGroup`` (generation -1) unless
        they are what was committed last; for monitoring only: never read back, and a
        failure is a warning, never the query's."""
        group = self.options.commit_offsets_to_group
        if group is None or not offsets or offsets == self._group_committed:
            return
        try:
            with self._offset_reader() as reader:
                reader.commit_offsets(group, offsets)
            self._group_committed = dict(offsets)
        except Exception as exc:  # noqa: BLE001 - monitoring must never fail the query
            log.warning("kafkalog.commitOffsetsToGroup: committing the micro-batch's end offsets to group %r "
                        "failed (the query goes on; its checkpoint holds the offsets): %s", group, exc)

    def stop(self) -> None:
        self._close_network()

    # -- rows (executors) --

    def read(self, partition: InputPartition) -> Iterator:
        if isinstance(partition, TableFileInputPartition):
            yield from read_table_partition(self.options, self.typed, partition)
            return
        if not isinstance(partition, KafkaLogInputPartition):
            return
        builder = batch_builder(self.options, self.typed, partition)
        for decoded in read_input_partition(self.options, partition):
            if decoded.num_rows:
                rows = builder.build(decoded)
                if rows.num_rows:
                    yield rows
