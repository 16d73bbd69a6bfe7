"""Bridge reads: a topic's Iceberg or Delta table (``spark_kafkalog.tables``) and the live
log after it, as one read of the ``kafkalog`` source (``kafkalog.table``).

Owns the planning of a bridge read on the driver (``plan_bridge`` for batch reads,
``bridge_initial`` / ``table_partitions`` for streaming ones), ``TableFileInputPartition``
(one data file of the table: what a task reads) and the executors' reading of a data file
into the decoded-records schema every other mode yields (``read_table_partition``).

What a bridge read returns: the table's rows as of one commit (an Iceberg snapshot, a Delta
version), whose stored offsets say, per partition, the next offset the table does not hold;
then the log from those offsets on (partitions the table does not hold yet, from their
earliest offset), read in the source's mode (network, direct or stitched) with its options.
The commit is pinned when the read is planned: its data files and its offsets come from
the same commit, so an export committing while the read runs changes neither, and no
offset is read twice or skipped (the table's rows are also cut at the stored offsets). The
rows have the source's schema (typed reads too: the table's bytes are decoded as the log's
are); a table of the ``flat`` layout with raw key and value bytes, or of the ``key_value``
layout (whose rows lack ``timestampType``: 0, CreateTime, is given), can be bridged; a
table whose values were flattened into columns by a typed export holds no value bytes to
return and is refused with a clear error.

Streaming: the first micro-batch of a new query reads the table's files and the log from
its offsets; its start offset carries the commit's version under ``TABLE_KEY`` (``:`` is not
allowed in topic names, so no topic is confused with it), which no later offset has, so the
files are read once, and again only if that first micro-batch is run again after a failure.

Which table: ``kafkalog.table`` (``options.TableRead``) and ``kafkalog.table.format``;
without the format, a local path holding ``_delta_log`` is Delta, one holding the embedded
Iceberg catalog (``catalog.db``) Iceberg, a catalog (``kafkalog.table.catalog.uri``) Iceberg
and an object-store URI Delta.

Invariants: a table of another topic, or of another incarnation of the topic (its stored
topic id is not the topic's id now), is refused; the rows of a data file are yielded per
Kafka partition in file order, only those below that partition's stored offset.

Thread-safety: planning runs on the driver's planning worker, one call at a time; a task
reads its one file.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..options import EARLIEST, OffsetSpec, ReadOptions, TableRead
from .partitions import KafkaLogInputPartition, batch_builder

if TYPE_CHECKING:
    from ..planning import OffsetReader

__all__ = ["TABLE_KEY", "TableFileInputPartition", "plan_bridge", "bridge_initial", "table_partitions",
           "read_table_partition", "table_topic", "source_topic_id"]

log = logging.getLogger("spark_kafkalog")

TABLE_KEY = "kafkalog:table"
ROWS_PER_BATCH = 65_536


@dataclass(frozen=True)
class TableScan:
    """What the tasks of one bridge read need to read the table's files."""

    location: str
    next_offsets: Mapping[int, int]                 # the commit's stored offsets
    storage_options: Mapping[str, str] = field(default_factory=dict, repr=False)


class TableFileInputPartition(KafkaLogInputPartition):
    """One data file of the table (``uri``), with the values of the partition columns it
    does not hold (Delta); ``schemas`` as a ``KafkaLogInputPartition``'s."""

    def __init__(self, topic: str, uri: str, partition_values: Mapping[str, Any], scan: TableScan,
                 schemas=None) -> None:
        super().__init__(topic, -1, 0, 0, None, schemas)
        self.uri = uri
        self.partition_values = dict(partition_values)
        self.scan = scan


def table_topic(options: ReadOptions) -> str:
    """The one topic of a bridge read (``options._table_read`` checked there is one)."""
    strategy = options.strategy
    return (strategy.topics or tuple(t for t, _ in strategy.partitions))[0]


def table_format(table: TableRead) -> str:
    """The table's format: the option, else told from the location (module docstring)."""
    if table.format is not None:
        return table.format
    if table.catalog_uri is not None or table.catalog_properties:
        return "iceberg"
    location = table.location
    if "://" in location and not location.startswith("file:"):
        return "delta"
    path = location[len("file://"):] if location.startswith("file://") else location
    if os.path.isdir(os.path.join(path, "_delta_log")):
        return "delta"
    if os.path.exists(os.path.join(path, "catalog.db")):
        return "iceberg"
    from ..options import KafkaLogOptionError
    raise KafkaLogOptionError(
        f"kafkalog.table {location}: no table there (neither a Delta log, _delta_log, nor the embedded "
        "Iceberg catalog, catalog.db, that kafkalog export creates); set 'kafkalog.table.format' to "
        "iceberg or delta for a table elsewhere")


def _open(options: ReadOptions):
    from ..tables.targets import open_target

    table = options.table
    assert table is not None
    return open_target(table_format(table), table.location, topic=table_topic(options),
                       catalog_uri=table.catalog_uri, catalog_properties=table.catalog_properties,
                       storage_options=table.storage_options)


def source_topic_id(options: ReadOptions, reader: OffsetReader, topic: str) -> str | None:
    """The topic's id as the source sees it (Metadata v10+ in network and stitched mode,
    ``partition.metadata`` in direct mode); None when it cannot tell."""
    from ..tables.targets import topic_id_text

    tps = reader.topic_partitions([topic])
    if options.mode == "direct":
        ids = reader.topic_ids(tps)  # type: ignore[attr-defined]
        found = {topic_id_text(v) for v in ids.values()} - {None}
        return found.pop() if len(found) == 1 else None
    network: Any = getattr(reader, "_network", reader)
    return topic_id_text(network.client.metadata.fetch().topic_id(topic))


def _load(options: ReadOptions, reader: OffsetReader):
    """The table's latest commit (``TableState``), checked against the topic; and its
    target."""
    from ..options import KafkaLogOptionError

    topic = table_topic(options)
    target = _open(options)
    state = target.load()
    if state.version is None or state.offsets is None:
        log.warning("kafkalog.table %s holds no commit of topic %s yet: reading the log only",
                    options.table.location if options.table else "", topic)
        return target, state
    stored = state.offsets
    if stored.topic != topic:
        raise KafkaLogOptionError(f"kafkalog.table {state.location} holds topic {stored.topic!r}, not {topic!r}")
    topic_id = source_topic_id(options, reader, topic)
    if stored.topic_id and topic_id and stored.topic_id != topic_id:
        raise KafkaLogOptionError(
            f"kafkalog.table {state.location} holds topic {topic} of topic id {stored.topic_id}, but the topic "
            f"now has id {topic_id} (deleted and created again): the table's offsets mean nothing for it")
    return target, state


def _start_offsets(options: ReadOptions, reader: OffsetReader, next_offsets: Mapping[int, int]
                   ) -> dict[tuple[str, int], int]:
    """Where the log part starts: each assigned partition at the table's offset, earliest
    for a partition the table does not hold."""
    from ..planning import assigned_partitions

    tps = assigned_partitions(options.strategy, reader, options.kafka_params)
    return {tp: next_offsets.get(tp[1], EARLIEST) for tp in tps}


def table_partitions(options: ReadOptions, target, version: int, next_offsets: Mapping[int, int],
                     typed=None, schemas=None) -> list[TableFileInputPartition]:
    """The input partitions of the table's data files as of ``version`` (one per file)."""
    topic = table_topic(options)
    if typed is not None and schemas is None:
        schemas = typed.partition_schemas([topic]).get(topic)
    scan = TableScan(str(getattr(target, "table", "")), dict(next_offsets), target.storage_options())
    return [TableFileInputPartition(topic, uri, values, scan, schemas)
            for uri, values in sorted(target.scan_files(version))]


def plan_bridge(options: ReadOptions, reader: OffsetReader, typed=None
                ) -> tuple[ReadOptions, list[TableFileInputPartition]]:
    """A batch bridge read: the options the log part is planned with (starting at the
    table's offsets) and the input partitions of the table's files."""
    target, state = _load(options, reader)
    next_offsets = dict(state.offsets.next_offsets) if state.offsets is not None else {}
    start = _start_offsets(options, reader, next_offsets)
    log_options = dataclasses.replace(options, starting=OffsetSpec("offsets", start))
    if state.version is None or state.offsets is None:
        return log_options, []
    return log_options, table_partitions(options, target, state.version, next_offsets, typed)


def bridge_initial(options: ReadOptions, reader: OffsetReader) -> tuple[dict[tuple[str, int], int], int | None]:
    """A streaming bridge read's starting offsets and the table version its first
    micro-batch reads (None: no table yet)."""
    _, state = _load(options, reader)
    next_offsets = dict(state.offsets.next_offsets) if state.offsets is not None else {}
    start = _start_offsets(options, reader, next_offsets)
    if any(o == EARLIEST for o in start.values()):
        earliest = reader.earliest_offsets([tp for tp, o in start.items() if o == EARLIEST])
        start = {tp: earliest[tp] if o == EARLIEST else o for tp, o in start.items()}
    return start, (state.version if state.offsets is not None else None)


def stream_table_partitions(options: ReadOptions, version: int, start: Mapping[tuple[str, int], int],
                            typed=None) -> list[TableFileInputPartition]:
    """The first micro-batch's table files: the commit ``version``, cut at ``start`` (the
    offsets the log part starts from, the commit's own)."""
    return table_partitions(options, _open(options), version, {p: o for (_, p), o in start.items()}, typed)


# -- executors --

def _column(table, name: str, values: Mapping[str, Any], n: int, pa_type):
    """Column ``name`` of ``table`` (a dotted name reaches into a struct), or the partition
    value the file does not hold, or nulls; cast to ``pa_type``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    head, *rest = name.split(".")
    if head in table.column_names:
        col = table.column(head)
        for part in rest:
            col = pc.struct_field(col, part)
        return col.cast(pa_type)
    if name in values:
        return pa.array([values[name]] * n).cast(pa_type)
    return pa.nulls(n, pa_type)


def _decoded(table, values: Mapping[str, Any], include_headers: bool):
    """(Kafka partition column, decoded-records table) of one chunk of a data file."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from broker.record.columnar.decode import HEADERS_TYPE, arrow_schema

    n = table.num_rows
    names = set(table.column_names)
    if "redpanda" in names:
        prefix, ts_type = "redpanda.", None
    elif "value" in names or "value" in values:
        prefix, ts_type = "", "timestampType"
    else:
        raise ValueError("kafkalog.table: this table's values were decoded into columns by a typed export and "
                         "it holds no value bytes to return; read it with pyiceberg or deltalake, or export "
                         "the topic without valueFormat to bridge it")
    partition = _column(table, prefix + "partition", values, n, pa.int32())
    ts = _column(table, prefix + "timestamp", values, n, pa.timestamp("us", tz="UTC"))
    millis = pc.divide(ts.cast(pa.int64()), 1000)
    ts_types = (pc.fill_null(_column(table, ts_type, values, n, pa.int32()), 0) if ts_type
                else pa.array([0] * n, pa.int32()))
    columns = [pc.fill_null(_column(table, prefix + "offset", values, n, pa.int64()), -1),
               pc.fill_null(millis, -1), ts_types,
               _column(table, prefix + "key", values, n, pa.binary()),
               _column(table, "value", values, n, pa.binary())]
    if include_headers:
        columns.append(_column(table, prefix + "headers", values, n, HEADERS_TYPE))
    return partition, pa.Table.from_arrays(columns, schema=arrow_schema(include_headers))


def read_table_file(partition: TableFileInputPartition, include_headers: bool) -> Iterator[tuple[int, Any]]:
    """(Kafka partition, decoded-records RecordBatch) of the file's rows below the
    commit's stored offsets, in file order."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from ..tables.files import filesystem_for

    fs, path = filesystem_for(partition.uri, partition.scan.storage_options)
    limits = partition.scan.next_offsets
    with fs.open_input_file(path) as f:
        parquet = pq.ParquetFile(f)
        for chunk in parquet.iter_batches(batch_size=ROWS_PER_BATCH):
            kafka_partitions, decoded = _decoded(pa.Table.from_batches([chunk]), partition.partition_values,
                                                 include_headers)
            for p in pc.unique(kafka_partitions).to_pylist():
                if p is None or p not in limits:
                    continue   # a row of a partition the commit holds no offsets of: not the table's
                mask = pc.and_(pc.equal(kafka_partitions, p), pc.less(decoded.column("offset"), limits[p]))
                rows = decoded.filter(mask)
                for batch in rows.to_batches():
                    if batch.num_rows:
                        yield p, batch


def read_table_partition(options: ReadOptions, typed, partition: TableFileInputPartition) -> Iterator:
    """The rows of one data file, built as the log's are (``batch.batch_builder``)."""
    wanted = options.strategy.partitions
    assigned = {p for _, p in wanted} if wanted else None
    include_headers = options.include_headers
    if typed is not None:
        from ..formats.decode import range_options

        include_headers = range_options(options).include_headers
    builders: dict[int, Any] = {}
    for p, decoded in read_table_file(partition, include_headers):
        if assigned is not None and p not in assigned:
            continue
        builder = builders.get(p)
        if builder is None:
            builder = builders[p] = batch_builder(options, typed, KafkaLogInputPartition(
                partition.topic, p, 0, 0, None, partition.schemas))
        rows = builder.build(decoded)
        if rows.num_rows:
            yield rows
