"""An export's Spark job without a DataFrame: each task reads its offset range with the
``kafkalog`` source's own reader and writes the table's Parquet files in the same Python
worker, so the records never cross into the JVM and back.

Owns ``arrow_layout`` (the source's rows as Arrow -> the table's rows, the same columns
``layout.table_frame`` gives in Spark) and ``write_ranges`` (the job: one Spark task per
planned input partition, an RDD of the source's ``KafkaLogInputPartition`` objects; each
task returns the ``WrittenFile`` JSON of the files it wrote, and only that reaches the
driver).

Why: the DataFrame route hands every record from the source's Python worker to the JVM
(Arrow -> Spark rows) and back to a Python worker (``mapInArrow``) to be written; here the
record bytes stay in one process, as they do when Spark writes a Parquet export natively.

Invariants: ``arrow_layout`` yields exactly the table's Arrow schema (the one ``ensure``
created the table with), field by field, cast where Spark's and the reader's Arrow types
differ only in spelling; a task's files are written with ``files.write_task_files``, as
the DataFrame route writes them.

Thread-safety: the driver side runs on the export's thread; each task in its own worker.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from .base import WrittenFile
from .files import FileSpec, write_task_files, written_files
from .layout import KAFKA_COLUMNS

__all__ = ["arrow_layout", "write_ranges"]


def arrow_layout(batch, schema, layout: str = "flat"):
    """``batch`` (the ``kafkalog`` source's rows: Spark's Kafka columns with ``headers``,
    typed or not) as a RecordBatch of ``schema``, the table's Arrow schema, laid out as
    ``layout.table_frame`` lays out the DataFrame."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = batch.schema.names

    def col(name: str):
        return batch.column(names.index(name))

    n = batch.num_rows
    if layout == "key_value":
        source: dict[str, Any] = {
            "redpanda": pa.StructArray.from_arrays(
                [col("partition"), col("offset"), col("timestamp"),
                 col("headers") if "headers" in names else pa.nulls(n, schema.field("redpanda").type
                                                                    .field("headers").type),
                 col("key")],
                names=["partition", "offset", "timestamp", "headers", "key"]),
            "value": col("value")}
    else:
        source = {name: col(name) for name in names}
        value = col("value")
        if pa.types.is_struct(value.type):
            del source["value"]
            taken = set(KAFKA_COLUMNS) | set(names)
            for i, f in enumerate(value.type):
                source[f.name if f.name not in taken else f"value_{f.name}"] = pc.struct_field(value, [i])
        if "timestamp_date" in schema.names:
            source["timestamp_date"] = pc.cast(col("timestamp"), pa.timestamp("us", tz="UTC")).cast(pa.date32())
    columns = []
    for field in schema:
        array = source.get(field.name)
        if array is None:
            array = pa.nulls(n, field.type)
        elif array.type != field.type:
            array = array.cast(field.type)
        columns.append(array)
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def write_ranges(spark, reader, partitions: Sequence, schema, layout: str, spec: FileSpec) -> list[WrittenFile]:
    """Run the export's job: one task per input partition of ``reader`` (the source's
    ``KafkaLogBatchReader``, planned), each writing its rows laid out to ``schema`` as
    ``spec`` says. Returns the files the tasks wrote. The caller sets the job group."""
    if not partitions:
        return []
    write = write_task_files(spec)

    def task(items: Iterator) -> Iterator[str]:
        for partition in items:
            laid = (arrow_layout(b, schema, layout) for b in reader.read(partition))
            for out in write(laid):
                yield from out.column("file").to_pylist()

    rdd = spark.sparkContext.parallelize(list(partitions), len(partitions))
    return written_files(rdd.mapPartitions(task).collect())
