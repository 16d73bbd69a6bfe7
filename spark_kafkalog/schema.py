"""The row schema of the ``kafkalog`` source, and the conversion of decoded records to it.

Owns: the Spark schema (exactly Spark's Kafka source's, ``KafkaRecordToRowConverter``),
the Arrow schema Spark expects batches of it to have (pyspark >= 4.2 compares the first
batch's schema with ``to_arrow_schema(schema, timezone="UTC")`` and refuses any
difference), and ``SparkBatchBuilder``, which turns a RecordBatch of
``broker.record.columnar.arrow_schema()`` (offset, timestamp ms, timestamp_type, key,
value, headers) of one topic-partition into one of that schema::

    key            binary                                  nullable
    value          binary                                  nullable
    topic          string                                  nullable
    partition      int                                     nullable
    offset         bigint                                  nullable
    timestamp      timestamp (Arrow timestamp[us, UTC])    nullable
    timestampType  int                                     nullable
    headers        array<struct<key: string, value: binary>>   only with includeHeaders=true;
                                                           null (not empty) without headers

Every field is nullable, as in Spark's Kafka source (only key, value and headers ever hold
nulls). The timestamp is the record's milliseconds times 1000 (a record without a
timestamp, -1, reads as 1969-12-31 23:59:59.999 UTC, as in Spark).

Invariants: ``SparkBatchBuilder.build`` returns batches whose schema ``equals`` the expected
Arrow schema, field names, nullability and list item name included; no column points into
the decoder's input. Topic and partition columns are zero-copy slices of arrays built once
per builder (grown when a larger batch comes).

Thread-safety: ``SparkBatchBuilder`` caches arrays; one per reading thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # heavy imports stay inside functions (pyspark loads this in every worker)
    import pyarrow as pa
    from pyspark.sql.types import StructType

__all__ = ["kafka_schema", "kafka_ddl", "spark_arrow_schema", "SparkBatchBuilder", "COLUMNS"]

COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType")


def kafka_schema(include_headers: bool = False) -> StructType:
    """Spark's Kafka source schema (``KafkaRecordToRowConverter.kafkaSchema``)."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )
    fields = [
        StructField("key", BinaryType(), True),
        StructField("value", BinaryType(), True),
        StructField("topic", StringType(), True),
        StructField("partition", IntegerType(), True),
        StructField("offset", LongType(), True),
        StructField("timestamp", TimestampType(), True),
        StructField("timestampType", IntegerType(), True),
    ]
    if include_headers:
        fields.append(StructField("headers", ArrayType(StructType([
            StructField("key", StringType(), True),
            StructField("value", BinaryType(), True),
        ]), True), True))
    return StructType(fields)


def kafka_ddl(include_headers: bool = False) -> str:
    ddl = ("key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
           "timestamp TIMESTAMP, timestampType INT")
    if include_headers:
        ddl += ", headers ARRAY<STRUCT<key: STRING, value: BINARY>>"
    return ddl


_ARROW_SCHEMAS: dict[bool, pa.Schema] = {}


def spark_arrow_schema(include_headers: bool = False) -> pa.Schema:
    """The Arrow schema pyspark requires of the batches ``read()`` yields."""
    schema = _ARROW_SCHEMAS.get(include_headers)
    if schema is None:
        import pyarrow as pa
        fields = [
            pa.field("key", pa.binary()), pa.field("value", pa.binary()),
            pa.field("topic", pa.string()), pa.field("partition", pa.int32()),
            pa.field("offset", pa.int64()), pa.field("timestamp", pa.timestamp("us", tz="UTC")),
            pa.field("timestampType", pa.int32()),
        ]
        if include_headers:
            fields.append(pa.field("headers", pa.list_(pa.field("element", pa.struct([
                pa.field("key", pa.string()), pa.field("value", pa.binary())])))))
        schema = _ARROW_SCHEMAS[include_headers] = pa.schema(fields)
    return schema


class SparkBatchBuilder:
    """Decoded records of one topic-partition -> batches of ``spark_arrow_schema``."""

    def __init__(self, topic: str, partition: int, include_headers: bool) -> None:
        import numpy as np
        import pyarrow as pa
        self._np, self._pa = np, pa
        self.topic = topic
        self.partition = partition
        self.include_headers = include_headers
        self.schema = spark_arrow_schema(include_headers)
        self._headers_type = self.schema.field("headers").type if include_headers else None
        self._ts_type = pa.timestamp("us", tz="UTC")
        # the topic and partition columns, built for _capacity rows and sliced per batch
        self._topic_array = pa.array([], pa.string())
        self._partition_array = pa.array([], pa.int32())
        self._capacity = 0

    def _grow(self, n: int) -> None:
        np, pa = self._np, self._pa
        capacity = max(n, 2 * self._capacity, 1024)
        raw = self.topic.encode("utf-8")
        if (capacity + 1) * len(raw) >= 1 << 31:
            capacity = max(n, ((1 << 31) - 1) // max(len(raw), 1) - 1)
            if (capacity + 1) * len(raw) >= 1 << 31:
                raise ValueError(f"{n} rows of topic {self.topic!r} do not fit one Arrow string array")
        offsets = np.arange(capacity + 1, dtype=np.int32) * np.int32(len(raw))
        string_type = pa.string()
        self._topic_array = pa.Array.from_buffers(
            string_type, capacity, [None, pa.py_buffer(offsets), pa.py_buffer(raw * capacity)])
        self._partition_array = pa.array(np.full(capacity, self.partition, np.int32))
        self._capacity = capacity

    def build(self, decoded: pa.RecordBatch) -> pa.RecordBatch:
        pa = self._pa
        n = decoded.num_rows
        if n > self._capacity:
            self._grow(n)
        ms = decoded.column(1)
        micros = self._np.multiply(ms.to_numpy(zero_copy_only=False), 1000)
        timestamp = pa.Array.from_buffers(self._ts_type, n, [None, pa.py_buffer(micros)])
        columns = [
            decoded.column(3), decoded.column(4),
            self._topic_array.slice(0, n), self._partition_array.slice(0, n),
            decoded.column(0), timestamp, decoded.column(2),
        ]
        if self.include_headers:
            columns.append(decoded.column(5).cast(self._headers_type))
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)

    def empty(self) -> pa.RecordBatch:
        return self._pa.RecordBatch.from_pylist([], schema=self.schema)
