"""The batch ``DataSourceReader`` of the ``kafkalog`` source.

Owns: ``KafkaLogInputPartition`` (one offset range of one topic-partition: what a task
reads), ``KafkaLogBatchReader`` (plans on the driver through ``planning.plan_ranges``,
reads on the executors through the mode's ``RangeReader`` and converts with
``schema.SparkBatchBuilder``, or ``formats.decode.TypedBatchBuilder`` for a typed read:
``valueFormat`` / ``keyFormat``, whose catalog of schemas each input partition carries) and
``KafkaLogPushdownReader``, the same reader with ``pushFilters`` (pyspark >= 4.1).

Why two classes: pyspark refuses a reader that overrides ``pushFilters`` while
``spark.sql.python.filterPushdown.enabled`` is false (DATA_SOURCE_PUSHDOWN_DISABLED), and
a Python data source cannot read that setting. ``KafkaLogDataSource.reader`` therefore
returns the pushdown reader only when it is called by pyspark's filter-pushdown planner
(``data_source_pushdown_filters``), which Spark runs only with the setting on; otherwise
the plain reader, which works with the setting on or off.

Snapshot reads (``kafkalog.snapshot=true``): each task reduces its partition's range to
the latest record of each key (``snapshot.LatestByKey``) before the rows go to Spark; the
planner never splits a partition then (the options that would are refused), and the
pushdown reader takes over only the filters on ``topic`` and ``partition`` (they select
whole partitions; a filter on offset or timestamp is left to Spark, which applies it to
the snapshot's rows, not to the records the snapshot is computed from).

Invariants: ``partitions()`` is deterministic for the same options, filters and log
offsets; ``read()`` yields only batches whose schema equals ``spark_arrow_schema`` (and
no empty batch), the rows of its range in offset order, after the exact row filters of
the accepted pushed filters.

Thread-safety: a reader is planned in one worker and then pickled to the tasks; nothing
is shared between tasks.
"""

from __future__ import annotations

from collections.abc import Iterator

from pyspark.sql.datasource import DataSourceReader, InputPartition

from ..options import ReadOptions
from ..pushdown import PushedFilters
from . import brief_cluster_errors
from .bridge import TableFileInputPartition, plan_bridge, read_table_partition
from .partitions import KafkaLogInputPartition, batch_builder, input_partitions, read_input_partition

__all__ = ["KafkaLogInputPartition", "KafkaLogBatchReader", "KafkaLogPushdownReader",
           "input_partitions", "read_input_partition", "batch_builder"]


class KafkaLogBatchReader(DataSourceReader):
    """Reads the ranges ``plan_ranges`` plans (no filter pushdown)."""

    def __init__(self, options: ReadOptions, typed=None) -> None:
        self.options = options
        self.typed = typed  # formats.registry.TypedRead of a typed read, else None
        self.filters = PushedFilters()

    @brief_cluster_errors
    def partitions(self) -> list[InputPartition]:
        from ..planning import plan_ranges
        from . import open_offset_reader

        reader = open_offset_reader(self.options)
        try:
            options, table = self.options, list[InputPartition]()
            if options.table is not None:  # a bridge read: the table's files, the log after them
                options, files = plan_bridge(options, reader, self.typed)
                table.extend(files)
            ranges = plan_ranges(options, reader, self.filters)
            return [*table, *input_partitions(options, reader, ranges, self.typed)]
        finally:
            close = getattr(reader, "close", None)
            if close is not None:
                close()

    def read(self, partition: InputPartition) -> Iterator:
        if isinstance(partition, TableFileInputPartition):
            yield from read_table_partition(self.options, self.typed, partition)
            return
        if not isinstance(partition, KafkaLogInputPartition):
            return  # no range planned: pyspark sends one InputPartition(None)
        builder = batch_builder(self.options, self.typed, partition)
        filters = self.filters if self.filters.needs_row_filter else None
        batches = read_input_partition(self.options, partition)
        if self.options.snapshot:
            from ..snapshot import LatestByKey

            latest = LatestByKey()
            for decoded in batches:
                latest.add(decoded)
            batches = latest.rows()
        for decoded in batches:
            if filters is not None:
                decoded = decoded.filter(filters.row_mask(decoded))
            if decoded.num_rows:
                rows = builder.build(decoded)
                if rows.num_rows:
                    yield rows


class KafkaLogPushdownReader(KafkaLogBatchReader):
    """``KafkaLogBatchReader`` that takes over the filters on topic, partition, offset and
    timestamp (``pushdown.PushedFilters.accept``) and returns the others to Spark."""

    def pushFilters(self, filters):
        for flt in filters:
            if self.options.snapshot and _column_of(flt) not in _SNAPSHOT_PUSHED_COLUMNS:
                yield flt  # applies to the snapshot's rows: Spark filters them
            elif not self.filters.accept(flt):
                yield flt


# The columns whose filters select whole partitions: safe to take over in a snapshot read.
_SNAPSHOT_PUSHED_COLUMNS = ("topic", "partition")


def _column_of(flt) -> str | None:
    """The column a pushed filter constrains (through a ``Not``), None when not one."""
    inner = getattr(flt, "child", flt)
    attr = getattr(inner, "attribute", None)
    return attr[0] if isinstance(attr, tuple) and len(attr) == 1 else None
