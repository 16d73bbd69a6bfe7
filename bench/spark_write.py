"""Benchmark: ``df.write.format("kafkalog")`` next to a row-by-row confluent-kafka writer,
in one Spark session, on the same rows, to the same broker.

Owns: measuring rows/s per core of writing one DataFrame to a topic with

1. ``kafkalog``: the sink (``spark_kafkalog.writers``): one idempotent producer per task,
   the Arrow batches handed to ``send_arrow`` column-wise;
2. ``confluent``: the usual hand-written sink, ``df.foreachPartition`` with one
   confluent-kafka ``Producer`` (librdkafka) per task and ``produce()`` row by row.

Both use acks=all, enable.idempotence=true, linger.ms=5 and compression.type=lz4 (note:
librdkafka enables lz4 only against brokers that advertise FindCoordinator, so until this
broker has consumer groups its batches travel uncompressed; the kafkalog producer
compresses). Everything else is each client's default (the kafkalog sink's batch.size is
256 KiB; librdkafka's batch.size is 1 MB). Goal: kafkalog >= 3 x confluent.

Workload: ``spark.range(N, numPartitions=2)`` with ``key`` = the id as a string and
``value`` = ``size`` bytes cut from a 1-MiB random binary literal at a position computed
from the id (``make_frame``: deterministic, cheap for the JVM, incompressible), for
100-byte (N100 rows) and 1-KiB (N1K rows) values; Spark local[2] (one task
per partition and core), the broker (``python -m broker``, fresh log directory, 2
partitions per topic, no retention) a subprocess on the same machine. Each run writes a
fresh topic; after it, the topic's high watermarks are checked to sum to N (every row
acknowledged once). Figures are the best of REPEAT runs, the writers interleaved; rows/s
per core = rows / seconds / cores, the clock around the Spark action (data generation in
the JVM included for both).

Memory: the RSS of the Python worker processes is sampled every 50 ms while each writer
runs; the figure is the largest single worker's (one worker runs one task at a time),
printed beside the largest worker's RSS right after the job (pyspark, pyarrow, pandas and
the client imported: the part that is not the writer's working set).
Workers are reused across jobs: the kafkalog figure comes from its first (warm-up) runs,
before the reference has run in the same workers.

Prints a table, then as its very last line one JSON object of headline figures.
Run: ``PYSPARK_PYTHON=.venv/bin/python .venv/bin/python bench/spark_write.py``
(a few minutes; ``--quick`` for a tenth of the rows).
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CORES = 2
PARTITIONS = 2
REPEAT = 2
N100 = 2_000_000
N1K = 500_000
SETTINGS = {"acks": "all", "enable.idempotence": "true", "linger.ms": "5",
            "compression.type": "lz4"}


# --- the reference writer (pickled by value to the workers) ---

def confluent_partition_writer(servers: str, topic: str):
    def write(rows):
        from confluent_kafka import Producer
        producer = Producer({"bootstrap.servers": servers, **SETTINGS})
        produce, poll = producer.produce, producer.poll
        n = 0
        for row in rows:
            while True:
                try:
                    produce(topic, row.value, row.key)
                    break
                except BufferError:
                    poll(0.01)
            n += 1
            if n % 10000 == 0:
                poll(0)
        left = producer.flush(120)
        if left:
            raise RuntimeError(f"{left} records not delivered")
    return write


# --- memory sampling ---

from spark_workers import WorkerMemory  # noqa: E402

# --- the broker ---

def start_broker(log_dir: Path) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, "-m", "broker", "--override", f"log.dirs={log_dir}",
           "--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", "log.retention.ms=-1",
           "--override", f"num.partitions={PARTITIONS}", "--log-level", "WARNING"]
    errors = open(log_dir.parent / "broker.stderr", "w+")  # a file: a full pipe would block it
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=errors, text=True)
    deadline = time.time() + 120
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        m = re.search(r"listening on PLAINTEXT://([\d.]+:\d+)", line)
        if m:
            return proc, m.group(1)
    proc.kill()
    errors.seek(0)
    raise RuntimeError(f"broker did not start: {errors.read()[-1000:]}")


def high_watermarks(servers: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": servers, "group.id": "bench"})
    try:
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                   for p in range(PARTITIONS))
    finally:
        c.close()


def delete_topic(servers: str, topic: str) -> None:
    """Best effort: keeps the page cache for the next run."""
    try:
        from confluent_kafka.admin import AdminClient
        admin = AdminClient({"bootstrap.servers": servers})
        for f in admin.delete_topics([topic], operation_timeout=30).values():
            f.result(30)
    except Exception as exc:  # noqa: BLE001
        print(f"(could not delete {topic}: {exc})")


POOL_BYTES = 1 << 20
STRIDES = {100: 1021, 1024: 7919}  # > value size, and a 64-KiB lz4 window of rows never wraps


def make_frame(spark, n: int, size: int):
    """``key`` = the id as a string; ``value`` = ``size`` bytes of a 1-MiB random literal
    from offset (id * stride) mod (1 MiB - size): deterministic, cheap for the JVM, and
    incompressible for lz4 (no two rows within a 64-KiB window overlap in the pool)."""
    import random

    from pyspark.sql import functions as F
    pool = random.Random(7).randbytes(POOL_BYTES)
    start = (F.col("id") * STRIDES[size]) % (POOL_BYTES - size) + 1
    return spark.range(0, n, 1, CORES).select(
        F.col("id").cast("string").cast("binary").alias("key"),
        F.lit(pool).substr(start.cast("int"), F.lit(size)).alias("value"))


def sink_format(spark) -> str:
    """``kafkalog`` once the data source has its writer; meanwhile the same writer through
    a subclass registered as ``kafkalog_bench``."""
    from pyspark.sql.datasource import DataSource

    from spark_kafkalog.source import KafkaLogDataSource
    if KafkaLogDataSource.writer is not DataSource.writer:
        return "kafkalog"

    class BenchSink(KafkaLogDataSource):
        @classmethod
        def name(cls):
            return "kafkalog_bench"

        def writer(self, schema, overwrite):
            from spark_kafkalog.writers import make_writer
            return make_writer(self.options, schema, overwrite)

    spark.dataSource.register(BenchSink)
    return "kafkalog_bench"


def main() -> None:
    global N100, N1K, REPEAT
    if "--quick" in sys.argv:
        N100, N1K, REPEAT = N100 // 10, N1K // 10, 1
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    work = Path(tempfile.mkdtemp(prefix="bench-spark-write-"))
    broker = None
    try:
        (work / "logs").mkdir()
        broker, servers = start_broker(work / "logs")
        from pyspark.sql import SparkSession
        spark = (SparkSession.builder.master(f"local[{CORES}]").appName("bench-spark-write")
                 .config("spark.ui.enabled", "false").config("spark.driver.memory", "2g")
                 .config("spark.sql.session.timeZone", "UTC").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        fmt = sink_format(spark)
        datasets = {"v100": (N100, 100), "v1k": (N1K, 1024)}
        frames = {name: make_frame(spark, n, size) for name, (n, size) in datasets.items()}

        def run_kafkalog(name: str, topic: str) -> None:
            w = frames[name].write.format(fmt).mode("append").option("topic", topic) \
                .option("kafka.bootstrap.servers", servers)
            for k, v in SETTINGS.items():
                w = w.option(f"kafka.{k}", v)
            w.save()

        def run_confluent(name: str, topic: str) -> None:
            frames[name].foreachPartition(confluent_partition_writer(servers, topic))

        writers = {"kafkalog": run_kafkalog, "confluent": run_confluent}
        best: dict = {}
        memory: dict = {}
        # Warm-up (also measured: the first round, kafkalog's memory from fresh workers).
        for rnd in range(REPEAT + 1):
            for name, (n, _size) in datasets.items():
                for writer, run in writers.items():
                    topic = f"bench-{writer}-{name}-{uuid.uuid4().hex[:6]}"
                    with WorkerMemory() as mem:
                        t = time.perf_counter()
                        run(name, topic)
                        seconds = time.perf_counter() - t
                    if rnd == 0:
                        idle = max((WorkerMemory._rss_kb(p) for p in WorkerMemory._workers()), default=0)
                        memory[(writer, name)] = (mem.peak_kb, idle)
                    got = high_watermarks(servers, topic)
                    if got != n:
                        raise RuntimeError(f"{writer} wrote {got} records of {n} to {topic}")
                    if rnd > 0:
                        key = (writer, name)
                        best[key] = min(best.get(key, float("inf")), seconds)
                    print(f"round {rnd} {writer:9} {name}: {n:,} rows in {seconds:6.2f} s "
                          f"({n / seconds / CORES:,.0f} rows/s per core), worker peak "
                          f"{mem.peak_kb / 1024:.0f} MiB")
                    delete_topic(servers, topic)
        spark.stop()

        print(f"\n{CORES} cores (local[{CORES}]), {PARTITIONS} partitions, acks=all, idempotent, "
              f"linger.ms=5, lz4; best of {REPEAT}; python {platform.python_version()}")
        print(f"{'values':7} {'kafkalog rows/s/core':>21} {'confluent rows/s/core':>22} {'ratio':>7} "
              f"{'kafkalog MB/s/core':>19} {'peak worker MiB (ours/ref)':>27}")
        headline: dict = {}
        for name, (n, size) in datasets.items():
            ours = n / best[("kafkalog", name)] / CORES
            ref = n / best[("confluent", name)] / CORES
            (mem_ours, idle_ours), (mem_ref, idle_ref) = (
                (a / 1024, b / 1024) for a, b in (memory[("kafkalog", name)], memory[("confluent", name)]))
            print(f"{name:7} {ours:21,.0f} {ref:22,.0f} {ours / ref:7.2f} "
                  f"{ours * size / 1e6:19.1f} {mem_ours:13.0f} / {mem_ref:.0f}"
                  f"   (idle after: {idle_ours:.0f} / {idle_ref:.0f})")
            headline[f"{name}_kafkalog_rows_per_s_per_core"] = round(ours)
            headline[f"{name}_confluent_rows_per_s_per_core"] = round(ref)
            headline[f"{name}_ratio_kafkalog_vs_confluent"] = round(ours / ref, 2)
            headline[f"{name}_worker_peak_rss_mib_kafkalog"] = round(mem_ours)
            headline[f"{name}_worker_peak_rss_mib_confluent"] = round(mem_ref)
            headline[f"{name}_worker_idle_rss_mib_kafkalog"] = round(idle_ours)
        headline["rows"] = {name: n for name, (n, _) in datasets.items()}
        headline["cores"] = CORES
        headline["goal_ratio"] = 3
        print(json.dumps(headline))
    finally:
        if broker is not None:
            broker.terminate()
            try:
                broker.wait(30)
            except subprocess.TimeoutExpired:
                broker.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
