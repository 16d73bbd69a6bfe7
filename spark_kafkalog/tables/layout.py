"""The layout of a topic's table: its columns and its partitioning, from the source's rows.

Owns ``table_frame`` (the ``kafkalog`` source's DataFrame -> the table's rows),
``default_partition_by`` and ``partition_columns``, and the layout names.

Layouts:

- ``flat`` (the default): ``topic`` (string), ``partition`` (int), ``offset`` (bigint),
  ``timestamp`` (timestamp), ``timestampType`` (int), ``key``, ``value`` (binary, or their
  typed form) and ``headers`` (array<struct<key: string, value: binary>>). With a typed
  value (``valueFormat`` avro, protobuf or json) the value's fields become columns of
  their own after the Kafka ones, in the schema's order; a field whose name is a Kafka
  column's becomes ``value_<name>`` (the Kafka column wins); the ``value`` column is then
  left out, and the typed read's ``valueSchemaId`` and, in PERMISSIVE mode,
  ``_corrupt_value`` (the bytes of a record that could not be decoded) are kept, so that
  nothing is lost. A typed key stays one struct column ``key``; its ``keySchemaId`` and
  ``_corrupt_key`` are kept likewise. Several record types in one topic (a value struct of
  one member per record) flatten to one struct column per record type.
- ``key_value``: Redpanda's Iceberg Topics' key_value layout: ``redpanda``
  (struct<partition: int, offset: bigint, timestamp: timestamp, headers:
  array<struct<key: string, value: binary>>, key: binary>) and ``value`` (binary), the
  bytes as they are (no typed value).

Delta tables get one more column, ``timestamp_date`` (the UTC date of ``timestamp``), to
partition by: Delta partitions by columns, not transforms.

Partitioning (``default_partition_by``): Iceberg ``partition`` (identity) and
``day(timestamp)``; Delta ``partition`` and ``timestamp_date``; in the ``key_value`` layout
Iceberg ``day(redpanda.timestamp)`` (a transform may take a nested column) and Delta none.
The user can give any other list (``parse_partition_by``).

Thread-safety: pure functions of DataFrames (driver side).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = [
    "LAYOUTS", "KAFKA_COLUMNS", "DELTA_DATE_COLUMN", "table_frame", "default_partition_by",
    "partition_columns", "parse_partition_by",
]

LAYOUTS = ("flat", "key_value")
KAFKA_COLUMNS = ("topic", "partition", "offset", "timestamp", "timestampType", "key", "value", "headers")
DELTA_DATE_COLUMN = "timestamp_date"
_TRANSFORM = re.compile(r"^(year|month|day|hour)\(\s*([A-Za-z_][\w.]*)\s*\)$")


def table_frame(df, *, fmt: str, layout: str = "flat"):
    """The table's rows (module docstring) from ``df``, the ``kafkalog`` source's rows
    (Spark's Kafka columns with ``headers``, typed or not)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    if layout not in LAYOUTS:
        raise ValueError(f"layout {layout!r}: one of {', '.join(LAYOUTS)}")
    types = {f.name: f.dataType for f in df.schema.fields}
    headers = F.col("headers") if "headers" in types else F.lit(None).cast(
        "array<struct<key:string,value:binary>>")
    if layout == "key_value":
        if not all(types.get(c) is not None and types[c].simpleString() == "binary" for c in ("key", "value")):
            raise ValueError("the key_value layout holds the key and the value as bytes: read them as binary "
                             "(no keyFormat / valueFormat)")
        out = df.select(F.struct(F.col("partition"), F.col("offset"), F.col("timestamp"), headers.alias("headers"),
                                 F.col("key")).alias("redpanda"), F.col("value"))
        return out
    columns = [F.col("topic"), F.col("partition"), F.col("offset"), F.col("timestamp"), F.col("timestampType"),
               F.col("key")]
    value_type = types["value"]
    typed_value = isinstance(value_type, StructType)
    if not typed_value:
        columns.append(F.col("value"))
    columns.append(headers.alias("headers"))
    if typed_value:
        taken = set(KAFKA_COLUMNS) | set(types)
        for f in value_type.fields:
            name = f.name if f.name not in taken else f"value_{f.name}"
            columns.append(F.col("value").getField(f.name).alias(name))
    columns += [F.col(name) for name in df.columns if name not in KAFKA_COLUMNS]
    out = df.select(*columns)
    if fmt == "delta":
        out = out.withColumn(DELTA_DATE_COLUMN, F.to_date(F.convert_timezone(None, F.lit("UTC"), F.col("timestamp"))))
    return out


def default_partition_by(fmt: str, layout: str = "flat") -> tuple[str, ...]:
    """The partitioning a table gets unless the user gives one (module docstring)."""
    if layout == "key_value":
        return ("day(redpanda.timestamp)",) if fmt == "iceberg" else ()
    return ("partition", "day(timestamp)") if fmt == "iceberg" else ("partition", DELTA_DATE_COLUMN)


def parse_partition_by(text: str | Sequence[str] | None, fmt: str, layout: str = "flat") -> tuple[str, ...]:
    """``partition_by`` as the user gives it (comma-separated, or a list; ``none`` for no
    partitioning; None for the default) checked against what ``fmt`` can do."""
    if text is None:
        return default_partition_by(fmt, layout)
    items = [t.strip() for t in (text.split(",") if isinstance(text, str) else text) if t.strip()]
    if items == ["none"]:
        return ()
    for item in items:
        transform = _TRANSFORM.match(item)
        if transform and fmt != "iceberg":
            raise ValueError(f"partition by {item!r}: Delta partitions by columns only (use "
                             f"{DELTA_DATE_COLUMN} for the day of the timestamp)")
        if not transform and not re.match(r"^[A-Za-z_][\w.]*$", item):
            raise ValueError(f"partition by {item!r}: a column name, or year(col) / month(col) / day(col) / "
                             "hour(col) for Iceberg")
    return tuple(items)


def partition_columns(partition_by: Sequence[str]) -> tuple[str, ...]:
    """The source columns ``partition_by`` reads (``day(timestamp)`` -> ``timestamp``)."""
    out = []
    for item in partition_by:
        m = _TRANSFORM.match(item)
        out.append(m.group(2) if m else item)
    return tuple(out)
