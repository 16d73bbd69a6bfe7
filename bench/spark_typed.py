"""Benchmark: typed Avro reads and writes of the ``kafkalog`` source (``valueFormat=avro``
with ``schema.registry.url``) next to the usual PySpark workarounds, in one Spark session,
on the same records, against the same broker and Schema Registry.

Owns: measuring rows/s per core of

1. ``typed``: ``spark.read.format("kafkalog")`` in network mode with ``valueFormat=avro``
   and ``schema.registry.url``: ``value`` is the struct of the subject's latest schema;
2. ``udf``: the binary read of the same topic, then a scalar-iterator pandas UDF around
   confluent-kafka's ``AvroDeserializer`` (one per task, the registry's schema cached by
   it) returning the same struct;
3. ``fastavro``: the binary read, then ``mapInArrow`` decoding each value with fastavro's
   ``schemaless_reader`` (the 5-byte frame skipped, the schema id not looked at) into
   ``pyarrow.Table.from_pylist`` of the same Arrow schema;
4. ``binary``: the binary read of the same topic (``value`` as bytes);

for three queries: ``fields``, ``select("value.*")`` written to the ``noop`` sink (every
field of every row decoded and handed to the JVM; for ``binary`` ``select("value")``);
``sum``, ``sum(value.count)`` (``sum(length(value))`` for ``binary``); and ``count()``
for ``typed`` and ``binary`` only (Spark prunes an unused pandas UDF, so a ``count()``
over the references would measure the binary read). The headline ratios are of the
``fields`` query.

And of writing a DataFrame whose ``value`` is that struct (cached in memory once, 2
partitions) to a fresh topic with

5. ``typed_write``: ``df.write.format("kafkalog")`` with ``valueFormat=avro`` and
   ``valueSchema`` = the schema's text (registered under ``<topic>-value``, the column
   encoded column-wise);
6. ``write``: a scalar-iterator pandas UDF around confluent-kafka's ``AvroSerializer``
   (same schema, auto-registered under ``<topic>-value``) feeding the binary
   ``df.write.format("kafkalog")``: the same sink and producer settings, so the difference
   is the encoding.

Every write is checked: the topic's high watermarks sum to the rows written.

Goals: typed read >= 5 x udf, >= 2 x fastavro, >= 0.5 x binary; typed write >= 3 x write.

Workload: records of ``bench/avro_encode.py``'s ``Order`` schema (11 fields: longs,
strings, doubles, a nullable string, a timestamp-millis, an enum), about 100 B (N100
records) and about 1 KiB (N1K records), each in its own topic of 2 partitions, built once
with the project's column-wise encoder (``broker.schema.avro_encode.encode``, with
Confluent's 5-byte prefix of the id the registry gave the schema) and produced with
confluent-kafka's ``Producer``; the first records are checked to be byte for byte what
confluent-kafka's ``AvroSerializer`` writes. The broker and its registry run in a child
process (``spark_kafkalog.embedded.EmbeddedBroker``) on the same machine as Spark
local[2] (one task per partition and core). After one warm-up run per source that checks
the answers (row count, the sum of ``value.count``), REPEAT runs of every figure, the
sources interleaved; each figure is the median of its runs with the spread (min..max);
rows/s per core = rows / seconds / cores, the clock around the Spark action.

Prints a table, then as its very last line one JSON object of headline figures: per
figure ``<source>_<size>_<query>`` (median rows/s per core) with ``_min`` / ``_max``,
and ``ratio_vs_udf_100b``, ``ratio_vs_fastavro_1k``, ``ratio_vs_binary_100b``,
``ratio_vs_write_1k``, ... (the typed figure's median over the reference's).
Run: ``PYSPARK_PYTHON=.venv/bin/python .venv/bin/python bench/spark_typed.py``
(several minutes; ``--quick`` for a tenth of the records).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from avro_encode import SCHEMA, make_rows  # noqa: E402  (bench/avro_encode.py)

CORES = 2
PARTITIONS = 2
REPEAT = 3
N100 = 1_000_000
N1K = 250_000
SCHEMA_TEXT = json.dumps(SCHEMA)
READERS = ("typed", "udf", "fastavro", "binary")
WRITERS = ("typed_write", "write")
QUERIES = ("fields", "sum", "count")
GOALS = {"udf": 5.0, "fastavro": 2.0, "binary": 0.5, "write": 3.0}


# --- the references (pickled by value to the workers) ---

def avro_deserializer_udf(registry_url: str, schema_text: str, topic: str, value_type):
    """A scalar-iterator pandas UDF: framed Avro bytes -> the struct, with confluent-kafka's
    ``AvroDeserializer`` (one per task)."""
    from pyspark.sql.functions import PandasUDFType, pandas_udf

    @pandas_udf(value_type, PandasUDFType.SCALAR_ITER)
    def decode(batches):
        import pandas as pd
        from confluent_kafka.schema_registry import SchemaRegistryClient
        from confluent_kafka.schema_registry.avro import AvroDeserializer
        from confluent_kafka.serialization import MessageField, SerializationContext
        deserialize = AvroDeserializer(SchemaRegistryClient({"url": registry_url}), schema_text)
        ctx = SerializationContext(topic, MessageField.VALUE)
        names = [f.name for f in value_type.fields]
        for values in batches:
            yield pd.DataFrame([deserialize(v, ctx) for v in values], columns=names)

    return decode


def fastavro_map(schema_text: str, value_type):
    """A ``mapInArrow`` function: framed Avro bytes -> the struct, with fastavro's
    ``schemaless_reader`` per record and ``pyarrow.Table.from_pylist``."""
    def decode(batches):
        import io
        import json

        import pyarrow as pa
        from fastavro import parse_schema, schemaless_reader
        from pyspark.sql.pandas.types import to_arrow_schema
        parsed = parse_schema(json.loads(schema_text))
        inner = to_arrow_schema(value_type, timezone="UTC")
        for batch in batches:
            records = [schemaless_reader(io.BytesIO(memoryview(v)[5:]), parsed, None)
                       for v in batch.column(0).to_pylist()]
            table = pa.Table.from_pylist(records, schema=inner)
            struct = pa.StructArray.from_arrays([c.combine_chunks() for c in table.columns], fields=list(inner))
            yield pa.RecordBatch.from_arrays([struct], names=["value"])

    return decode


def avro_serializer_udf(registry_url: str, schema_text: str, topic: str):
    """A scalar-iterator pandas UDF: the struct -> framed Avro bytes, with confluent-kafka's
    ``AvroSerializer`` (one per task; auto-registers under ``<topic>-value``)."""
    from pyspark.sql.functions import PandasUDFType, pandas_udf

    @pandas_udf("binary", PandasUDFType.SCALAR_ITER)
    def encode(batches):
        import pandas as pd
        from confluent_kafka.schema_registry import SchemaRegistryClient
        from confluent_kafka.schema_registry.avro import AvroSerializer
        from confluent_kafka.serialization import MessageField, SerializationContext
        serialize = AvroSerializer(SchemaRegistryClient({"url": registry_url}), schema_text)
        ctx = SerializationContext(topic, MessageField.VALUE)
        for frame in batches:
            yield pd.Series([serialize(r, ctx) for r in frame.to_dict("records")])

    return encode


# --- data ---

def produce(servers: str, registry_url: str, topic: str, n: int, shape: str) -> int:
    """``n`` records of ``shape`` into ``topic`` (created with PARTITIONS partitions),
    round-robin; returns the sum of their ``count`` field."""
    import pyarrow.compute as pc
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from broker.schema.avro import parse
    from broker.schema.avro_encode import encode

    admin = AdminClient({"bootstrap.servers": servers})
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS)])[topic].result(30)
    sr = SchemaRegistryClient({"url": registry_url})
    schema_id = sr.register_schema(f"{topic}-value", Schema(SCHEMA_TEXT, "AVRO"))
    prefix = b"\x00" + schema_id.to_bytes(4, "big")
    rows = make_rows(n, shape)
    payloads = encode(rows, parse(SCHEMA_TEXT), prefix=prefix).payloads
    serialize = AvroSerializer(sr, SCHEMA_TEXT)
    ctx = SerializationContext(topic, MessageField.VALUE)
    sample = rows.slice(0, 500).to_pylist()
    if [serialize(r, ctx) for r in sample] != payloads.slice(0, 500).to_pylist():
        raise AssertionError("the encoder's frames differ from AvroSerializer's")
    producer = Producer({"bootstrap.servers": servers, "linger.ms": 20, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 1_000_000})
    for i, value in enumerate(payloads.to_pylist()):
        while True:
            try:
                producer.produce(topic, value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120):
        raise RuntimeError(f"{topic}: records left unsent")
    return pc.sum(rows.field("count")).as_py()


def high_watermarks(servers: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": servers, "group.id": "bench", "log_level": 3})
    try:
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(PARTITIONS))
    finally:
        c.close()


# --- measuring ---

def run_read(df, source: str, query: str):
    from pyspark.sql import functions as F
    if query == "count":
        return df.count()
    if query == "sum":
        column = F.length("value") if source == "binary" else F.col("value.count")
        return df.select(F.sum(column)).collect()[0][0]
    (df.select("value") if source == "binary" else df.select("value.*")).write.format("noop").mode(
        "overwrite").save()
    return None


def spread(rows: int, seconds: list[float]) -> tuple[float, float, float]:
    """(median, min, max) rows/s per core."""
    rates = [rows / s / CORES for s in seconds]
    return statistics.median(rates), min(rates), max(rates)


def main() -> None:
    global N100, N1K
    if "--quick" in sys.argv:
        N100, N1K = N100 // 10, N1K // 10
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *inherited])
    from spark_kafkalog.embedded import EmbeddedBroker

    work = Path(tempfile.mkdtemp(prefix="bench-spark-typed-"))
    broker = EmbeddedBroker(work / "kafka-logs", overrides={
        "num.partitions": PARTITIONS, "log.retention.ms": -1}).start()
    try:
        servers, url = broker.bootstrap_servers, broker.schema_registry_url
        if not url:
            raise RuntimeError("the broker started without its Schema Registry")
        datasets = {"100b": N100, "1k": N1K}
        topics = {size: f"typed-{size}-{uuid.uuid4().hex[:6]}" for size in datasets}
        sums = {}
        t = time.perf_counter()
        for size, n in datasets.items():
            sums[size] = produce(servers, url, topics[size], n, size)
        print(f"produced {sum(datasets.values()):,} records in {time.perf_counter() - t:.1f} s")

        from pyspark.sql import SparkSession
        from pyspark.sql.types import StructField, StructType
        spark = (SparkSession.builder.master(f"local[{CORES}]").appName("bench-spark-typed")
                 .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                 .config("spark.driver.memory", "2g")
                 .config("spark.sql.session.timeZone", "UTC").config("spark.sql.shuffle.partitions", "2")
                 .getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")

        def binary_read(topic: str):
            return (spark.read.format("kafkalog").option("kafka.bootstrap.servers", servers)
                    .option("subscribe", topic).load())

        frames: dict = {}
        cached: dict = {}
        for size, topic in topics.items():
            typed = (spark.read.format("kafkalog").option("kafka.bootstrap.servers", servers)
                     .option("subscribe", topic).option("valueFormat", "avro")
                     .option("schema.registry.url", url).load())
            # the references' struct: the same fields, nullable (what a pandas / Arrow UDF returns)
            value_type = StructType([StructField(f.name, f.dataType, True)
                                     for f in typed.schema["value"].dataType.fields])
            binary = binary_read(topic)
            frames[size] = {
                "typed": typed,
                "udf": binary.select(
                    avro_deserializer_udf(url, SCHEMA_TEXT, topic, value_type)("value").alias("value")),
                "fastavro": binary.select("value").mapInArrow(
                    fastavro_map(SCHEMA_TEXT, value_type), f"value {value_type.simpleString()}"),
                "binary": binary,
            }
            cached[size] = typed.select("value").repartition(PARTITIONS).persist()
            cached[size].count()

        # warm-up and checks
        for size, n in datasets.items():
            for source, df in frames[size].items():
                t = time.perf_counter()
                if source in ("typed", "binary"):
                    got = run_read(df, source, "count")
                    if got != n:
                        raise AssertionError(f"{source} {size}: count {got} != {n}")
                total = run_read(df, source, "sum")
                if source != "binary" and total != sums[size]:
                    raise AssertionError(f"{source} {size}: sum(value.count) {total} != {sums[size]}")
                run_read(df, source, "fields")
                print(f"warm-up {source:9} {size:4}: checked in {time.perf_counter() - t:.1f} s")

        def write(size: str, writer: str) -> float:
            topic = f"typed-{writer}-{size}-{uuid.uuid4().hex[:6]}"
            df = cached[size]
            if writer == "typed_write":
                out = df.write.format("kafkalog").option("valueFormat", "avro") \
                    .option("valueSchema", SCHEMA_TEXT).option("schema.registry.url", url)
            else:
                out = df.select(avro_serializer_udf(url, SCHEMA_TEXT, topic)("value").alias("value")).write \
                    .format("kafkalog")
            t = time.perf_counter()
            out.mode("append").option("kafka.bootstrap.servers", servers).option("topic", topic).save()
            seconds = time.perf_counter() - t
            got = high_watermarks(servers, topic)
            if got != datasets[size]:
                raise AssertionError(f"{writer} {size}: {got} records written of {datasets[size]}")
            return seconds

        for size in datasets:
            for writer in WRITERS:
                seconds = write(size, writer)
                print(f"warm-up {writer:11} {size:4}: {seconds:.1f} s, checked")

        samples: dict = {}
        for rnd in range(REPEAT):
            for size in datasets:
                for query in QUERIES:
                    for source, df in frames[size].items():
                        if query == "count" and source not in ("typed", "binary"):
                            continue
                        t = time.perf_counter()
                        run_read(df, source, query)
                        samples.setdefault((source, size, query), []).append(time.perf_counter() - t)
                for writer in WRITERS:
                    samples.setdefault((writer, size, "write"), []).append(write(size, writer))
            print(f"round {rnd + 1} of {REPEAT} done")
        spark.stop()

        load = os.getloadavg()
        print(f"\n{CORES} cores (local[{CORES}]), {PARTITIONS} partitions, network mode against the "
              f"broker and its registry on the same machine; rows/s per core, median (min..max) of "
              f"{REPEAT} runs, sources interleaved; python {platform.python_version()}; load average "
              f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
        headline: dict = {}
        fmt = lambda v: f"{v[0]:>9,.0f} ({v[1]:,.0f}..{v[2]:,.0f})"  # noqa: E731
        for size, n in datasets.items():
            print(f"\n{size} records ({n:,})")
            figures = {key[0] + ("" if key[2] == "write" else f" {key[2]}"): spread(n, s)
                       for key, s in samples.items() if key[1] == size}
            for (source, sz, query), s in samples.items():
                if sz != size:
                    continue
                med, low, high = spread(n, s)
                name = f"{source}_{size}" if query == "write" else f"{source}_{size}_{query}"
                headline[name], headline[f"{name}_min"], headline[f"{name}_max"] = \
                    round(med), round(low), round(high)
                print(f"  {source:11} {query:6} {fmt((med, low, high))}")
            typed = figures["typed fields"][0]
            for ref in ("udf", "fastavro", "binary"):
                ratio = typed / figures[f"{ref} fields"][0]
                headline[f"ratio_vs_{ref}_{size}"] = round(ratio, 2)
                sum_ratio = figures["typed sum"][0] / figures[f"{ref} sum"][0]
                headline[f"ratio_vs_{ref}_{size}_sum"] = round(sum_ratio, 2)
                print(f"  typed / {ref:8}: fields {ratio:6.2f}, sum {sum_ratio:6.2f} (goal >= {GOALS[ref]})")
            ratio = figures["typed_write"][0] / figures["write"][0]
            headline[f"ratio_vs_write_{size}"] = round(ratio, 2)
            print(f"  typed_write / write: {ratio:6.2f} (goal >= {GOALS['write']})")
        headline["records"] = datasets
        headline["cores"] = CORES
        headline["repeat"] = REPEAT
        headline["load_average_1m"] = round(load[0], 1)
        headline["goals"] = GOALS
        print(json.dumps(headline))
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
