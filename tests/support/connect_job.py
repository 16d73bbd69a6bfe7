"""A Spark Connect client job of the ``kafkalog`` source, run in a process of its own by
tests/test_spark_connect.py (a Spark Connect session and the suite's classic session cannot
share a process: each wants the process's SparkContext).

``python -m tests.support.connect_job '<json>'`` where the JSON holds ``bootstrap``,
``registry`` (the Schema Registry's URL), ``log_dir``, ``topic`` (Avro values to read),
``typed_out`` and ``binary_out`` (topics to write). The session is
``SparkSession.builder.remote("local[2]")``: pyspark starts a Spark Connect server in a
local JVM and the job talks to it over gRPC only, as a client of a remote Connect server
does (the client holds no SparkContext; the server plans, runs the Python workers and
resolves ``kafkalog``).

The job, each through the Connect client:
- registers the source with ``spark_kafkalog.register`` (a Python data source registered
  from the client);
- reads ``topic`` with ``valueFormat=avro`` in network mode and in direct mode (the log
  directory's ``_schemas``, no registry URL), and as a stream (``availableNow``) into a
  memory table;
- writes a DataFrame built on the server with ``valueFormat=avro`` to ``typed_out`` and a
  binary DataFrame to ``binary_out``.

It prints one JSON line: the rows of each read (offset, value as a dict, valueSchemaId,
_corrupt_value as hex) and the session's class name.

Thread-safety: a script; one thread.
"""

from __future__ import annotations

import json
import sys


def _rows(df) -> list[list]:
    out = []
    for r in df.orderBy("offset").collect():
        value = r.value.asDict(recursive=True) if r.value is not None else None
        corrupt = r._corrupt_value.hex() if r._corrupt_value is not None else None
        out.append([r.offset, value, r.valueSchemaId, corrupt])
    return out


def main(conf: dict) -> dict:
    from pyspark.sql import SparkSession

    import spark_kafkalog

    spark = (SparkSession.builder.remote("local[2]")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    try:
        spark_kafkalog.register(spark)

        def typed(reader):
            return reader.format("kafkalog").option("subscribe", conf["topic"]).option("valueFormat", "avro")

        network = (typed(spark.read).option("kafka.bootstrap.servers", conf["bootstrap"])
                   .option("schema.registry.url", conf["registry"]).load())
        schema = network.schema["value"].dataType.simpleString()
        network_rows = _rows(network)
        direct_rows = _rows(typed(spark.read).load(conf["log_dir"]))

        query = (typed(spark.readStream).option("kafka.bootstrap.servers", conf["bootstrap"])
                 .option("schema.registry.url", conf["registry"]).option("startingOffsets", "earliest").load()
                 .select("offset", "value", "valueSchemaId", "_corrupt_value")
                 .writeStream.format("memory").queryName("typed_stream").trigger(availableNow=True).start())
        query.awaitTermination(300)
        stream_rows = _rows(spark.table("typed_stream"))
        query.stop()

        frame = spark.sql("SELECT CAST(id AS STRING) AS key, "
                          "named_struct('id', id, 'name', concat('n-', CAST(id AS STRING)), "
                          "'score', id / 4) AS value FROM range(20)")
        (frame.write.format("kafkalog").mode("append").option("kafka.bootstrap.servers", conf["bootstrap"])
         .option("topic", conf["typed_out"]).option("valueFormat", "avro")
         .option("schema.registry.url", conf["registry"]).option("recordName", "Reading")
         .option("recordNamespace", "connect").save())
        (spark.sql("SELECT CAST(id AS STRING) AS key, CAST(concat('v-', CAST(id AS STRING)) AS BINARY) AS value "
                   "FROM range(7)")
         .write.format("kafkalog").mode("append").option("kafka.bootstrap.servers", conf["bootstrap"])
         .option("topic", conf["binary_out"]).save())
        return {"session": type(spark).__module__ + "." + type(spark).__name__, "schema": schema,
                "network": network_rows, "direct": direct_rows, "stream": stream_rows}
    finally:
        spark.stop()


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))), flush=True)
