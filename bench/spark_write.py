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
1000000, as librdkafka's). Goal: kafkalog >= 3 x confluent.

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

Exactly-once (``--exactly-once`` runs only this part; the full run ends with it): the
sink with ``kafkalog.exactlyOnce=true`` (one transaction per task, committed by the
driver) against the same sink without it (idempotent, at-least-once), in the same Spark
session and broker, EOS_ROWS_PER_TASK rows per task (100-byte and 1-KiB values, the
workload above), EOS_REPEAT runs of each, interleaved, after one warm-up run of each; the
clock is around ``save()``, so the exactly-once figure includes the transactions'
InitProducerId, AddPartitionsToTxn and the driver's EndTxn. Each exactly-once run is
checked: every partition's last stable offset equals its high watermark (no transaction
left open) and the records (high watermark minus the commit markers) number N. Figures:
median and spread (min-max) of rows/s per core, the ratio of the medians (goal: at least
0.8), and the median (min-max) of each round's own ratio (its two runs back to back: the
steadier figure on a shared machine).

Task CPU (``--task-cpu``, no Spark): where a task's microseconds go, apart from the JVM.
The sink's task body (``writers.common.write_task``) is fed Arrow batches like Spark's
(10,000 rows, key = the id as text, value = 1 KiB or 100 B of the same incompressible pool)
for TASK_CPU_ROWS rows, against a broker subprocess (2 partitions), at several
``kafka.batch.size`` values (the sink's default first); it prints, per setting, the
task process's CPU per row (encoding, lz4, the Sender), the broker's CPU per row (from
/proc) and rows/s of wall time, median of TASK_CPU_REPEAT runs. This is what chose the
sink's default batch.size (``writers/common.py``). One measurement on the shared 2-core
machine (load average ~9, so for direction only), 1 KiB, lz4:

| batch.size | task CPU us/row | broker CPU us/row |
|---|---|---|
| 16384 | 15-26 | 12-22 |
| 262144 (the earlier default) | 5.3-6.1 | 4.5-4.7 |
| 1000000 (the default now) | 5.4-6.2 | 3.8-4.0 |

(A ``--task-cpu`` run, medians of 3: 15.71 / 13.10 at 16384, 5.44 / 4.10 at 262144,
5.20 / 3.80 at 1000000; 19.5k, 64k and 68k rows/s of wall time.)

Of the task's ~5.5 us per 1-KiB row (cProfile of the task thread, so inflated, before
the encoder framed batches into writable buffers): lz4 ~2.3, Arrow's take (the rows of
each partition, by key) ~0.75, the element-wise join of the records and the other Arrow
kernels ~0.9, the batch framing, copies and CRC ~0.7; the rest is the Sender thread
(requests, responses), the broker's ~3.8 us runs in its own process.

Prints a table, then as its very last line one JSON object of headline figures.
Run: ``PYSPARK_PYTHON=.venv/bin/python .venv/bin/python bench/spark_write.py``
(a few minutes; ``--quick`` for a tenth of the rows; ``--exactly-once`` for that part only;
``--task-cpu`` for the part above only, about a minute).
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
EOS_ROWS_PER_TASK = 100_000
EOS_REPEAT = 5
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


def stable_and_high(servers: str, topic: str) -> tuple[int, int]:
    """(sum of last stable offsets, sum of high watermarks) of the topic's partitions."""
    from broker.client.consumer.offsets import latest_offsets
    tps = [(topic, p) for p in range(PARTITIONS)]
    config = {"bootstrap.servers": servers}
    lso = latest_offsets(config, tps, isolation_level="read_committed")
    hw = latest_offsets(config, tps, isolation_level="read_uncommitted")
    return sum(lso.values()), sum(hw.values())


def exactly_once_comparison(spark, servers: str, fmt: str) -> dict:
    """The exactly-once sink against the idempotent one (module docstring); headline dict."""
    import statistics
    n = EOS_ROWS_PER_TASK * CORES
    datasets = {"v100": 100, "v1k": 1024}
    frames = {name: make_frame(spark, n, size) for name, size in datasets.items()}
    modes = {"idempotent": {}, "exactly-once": {"kafkalog.exactlyOnce": "true"}}
    times: dict = {}
    for rnd in range(EOS_REPEAT + 1):
        for name in datasets:
            for mode, extra in modes.items():
                topic = f"bench-eos-{mode}-{name}-{uuid.uuid4().hex[:6]}"
                w = frames[name].write.format(fmt).mode("append").option("topic", topic) \
                    .option("kafka.bootstrap.servers", servers)
                for k, v in {**{f"kafka.{k}": v for k, v in SETTINGS.items()}, **extra}.items():
                    w = w.option(k, v)
                t = time.perf_counter()
                w.save()
                seconds = time.perf_counter() - t
                lso, hw = stable_and_high(servers, topic)
                markers = CORES * PARTITIONS if extra else 0  # one commit marker per task and partition
                if lso != hw or not n <= hw <= n + markers:
                    raise RuntimeError(f"{mode} {name}: last stable offsets {lso}, high watermarks {hw} "
                                       f"for {n} rows")
                if rnd > 0:
                    times.setdefault((mode, name), []).append(seconds)
                print(f"eos round {rnd} {mode:12} {name}: {n:,} rows in {seconds:6.2f} s "
                      f"({n / seconds / CORES:,.0f} rows/s per core)")
                delete_topic(servers, topic)
    print(f"\nexactly-once vs idempotent sink: {EOS_ROWS_PER_TASK:,} rows per task, {CORES} tasks, "
          f"median (min-max) of {EOS_REPEAT} runs, rows/s per core")
    headline: dict = {}
    for name in datasets:
        rates = {mode: sorted(n / t / CORES for t in times[(mode, name)]) for mode in modes}
        med = {mode: statistics.median(r) for mode, r in rates.items()}
        ratio = med["exactly-once"] / med["idempotent"]
        # each round's two runs were back to back: their ratio is steadier on a shared machine
        paired = sorted(a / b for a, b in zip(times[("idempotent", name)], times[("exactly-once", name)]))
        print(f"{name:5} idempotent {med['idempotent']:9,.0f} ({rates['idempotent'][0]:,.0f}-"
              f"{rates['idempotent'][-1]:,.0f})   exactly-once {med['exactly-once']:9,.0f} "
              f"({rates['exactly-once'][0]:,.0f}-{rates['exactly-once'][-1]:,.0f})   ratio {ratio:.2f}; "
              f"per round {statistics.median(paired):.2f} ({paired[0]:.2f}-{paired[-1]:.2f})")
        headline[f"eos_{name}_paired_ratio_median"] = round(statistics.median(paired), 2)
        headline[f"eos_{name}_paired_ratio_spread"] = [round(paired[0], 2), round(paired[-1], 2)]
        headline[f"eos_{name}_idempotent_rows_per_s_per_core_median"] = round(med["idempotent"])
        headline[f"eos_{name}_exactly_once_rows_per_s_per_core_median"] = round(med["exactly-once"])
        headline[f"eos_{name}_idempotent_spread"] = [round(rates["idempotent"][0]), round(rates["idempotent"][-1])]
        headline[f"eos_{name}_exactly_once_spread"] = [round(rates["exactly-once"][0]),
                                                       round(rates["exactly-once"][-1])]
        headline[f"eos_{name}_ratio_exactly_once_vs_idempotent"] = round(ratio, 2)
    headline["eos_rows_per_task"] = EOS_ROWS_PER_TASK
    headline["eos_runs"] = EOS_REPEAT
    headline["eos_goal_ratio"] = 0.8
    return headline


TASK_CPU_ROWS = 100_000
TASK_CPU_REPEAT = 3
TASK_CPU_BATCH_SIZES = (None, "262144", "16384")  # None: the sink's default


def task_cpu(size: int = 1024) -> dict:
    """The ``--task-cpu`` measurement (module docstring): {batch.size: figures}."""
    import random
    import statistics

    import numpy as np
    import pyarrow as pa
    from confluent_kafka.admin import AdminClient, NewTopic

    from spark_kafkalog.writers.common import (
        SINK_PRODUCER_DEFAULTS,
        SinkColumns,
        TaskInfo,
        parse_write_options,
        write_task,
    )
    pool = random.Random(7).randbytes(POOL_BYTES)
    stride = STRIDES[size]
    batches = []
    for s in range(0, TASK_CPU_ROWS, 10_000):
        ids = np.arange(s, min(s + 10_000, TASK_CPU_ROWS))
        keys = pa.array([str(i).encode() for i in ids], pa.binary())
        start = (ids * stride) % (POOL_BYTES - size)
        vals = pa.array([pool[o:o + size] for o in start], pa.binary())
        batches.append(pa.RecordBatch.from_arrays([keys, vals], ["key", "value"]))
    work = Path(tempfile.mkdtemp(prefix="bench-task-cpu-"))
    (work / "logs").mkdir()
    broker, servers = start_broker(work / "logs")

    def broker_cpu() -> float:
        f = Path(f"/proc/{broker.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

    out: dict = {}
    try:
        admin = AdminClient({"bootstrap.servers": servers})
        for rnd in range(TASK_CPU_REPEAT):
            for bs in TASK_CPU_BATCH_SIZES:
                topic = f"task-cpu-{rnd}-{bs}-{uuid.uuid4().hex[:6]}"
                admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
                opts = {"topic": topic, "kafka.bootstrap.servers": servers,
                        **{f"kafka.{k}": v for k, v in SETTINGS.items()}}
                if bs is not None:
                    opts["kafka.batch.size"] = bs
                options = parse_write_options(opts)
                columns = SinkColumns(value=1, key=0, names=("key", "value"))
                b0, c0, t0 = broker_cpu(), time.process_time(), time.perf_counter()
                msg = write_task(options, columns, iter(batches), streaming=False, info=TaskInfo())
                wall = time.perf_counter() - t0
                cpu, bcpu = time.process_time() - c0, broker_cpu() - b0
                if msg.records != TASK_CPU_ROWS:
                    raise RuntimeError(f"the task wrote {msg.records} of {TASK_CPU_ROWS} rows")
                name = bs or SINK_PRODUCER_DEFAULTS["batch.size"]
                out.setdefault(name, []).append((cpu / TASK_CPU_ROWS * 1e6,
                                                 bcpu / TASK_CPU_ROWS * 1e6, TASK_CPU_ROWS / wall))
    finally:
        broker.terminate()
        broker.wait(30)
        shutil.rmtree(work, ignore_errors=True)
    print(f"task body without Spark, {TASK_CPU_ROWS:,} rows of {size} B, lz4, acks=all, "
          f"median of {TASK_CPU_REPEAT}")
    print(f"{'batch.size':>11} {'task CPU us/row':>16} {'broker CPU us/row':>18} {'rows/s wall':>12}")
    figures: dict = {}
    for name, runs in out.items():
        task, brk, rate = (statistics.median(r[i] for r in runs) for i in range(3))
        print(f"{name:>11} {task:16.2f} {brk:18.2f} {rate:12,.0f}")
        figures[f"task_cpu_us_per_row_bs{name}"] = round(task, 2)
        figures[f"broker_cpu_us_per_row_bs{name}"] = round(brk, 2)
    return figures


def main() -> None:
    global N100, N1K, REPEAT, EOS_ROWS_PER_TASK
    if "--task-cpu" in sys.argv:
        print(json.dumps(task_cpu()))
        return
    if "--quick" in sys.argv:
        N100, N1K, REPEAT = N100 // 10, N1K // 10, 1
        EOS_ROWS_PER_TASK //= 10
    only_eos = "--exactly-once" in sys.argv
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
        if only_eos:
            headline = exactly_once_comparison(spark, servers, fmt)
            spark.stop()
            print(json.dumps(headline))
            return
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
        eos = exactly_once_comparison(spark, servers, fmt)
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
        headline.update(eos)
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
