"""Benchmark: ``spark.read.format("kafkalog")`` next to the ceiling of the Python Data
Source API and a confluent-kafka reader, in one Spark session, on the same rows.

Owns: measuring rows/s per core of two queries, ``count()`` and
``sum(length(value))``, over the same topics read by

1. ``direct``: the kafkalog source in direct mode (the executors decode the segment files);
2. ``network``: the kafkalog source in network mode, fetching from a broker that serves a copy
   of the same log directory (null when the broker could not start);
3. ``prebuilt``: a reference Python data source whose tasks yield the very same rows
   already built as Arrow record batches of the exact Spark schema (memory-mapped Arrow
   IPC files written when the data was generated): the most any Python data source can
   deliver, the cost being pyspark's Arrow transfer and the JVM side of the query;
4. ``confluent``: a reference Python data source whose tasks read their offset range with
   confluent-kafka's ``Consumer`` (librdkafka) from the project's broker serving a copy of
   the same log directory, building each Arrow batch from the consumed messages (null when
   the broker cannot be started; the reason is printed).

Goals: direct >= 0.8 x prebuilt and >= 4 x confluent; network >= 2 x confluent, per query.

Workload: two topics of 2 partitions each (Spark local[2]: one task per partition and
core), written once with the broker's ``UnifiedLog`` from batches encoded by
``broker.record.columnar.encode_from_arrow`` (16-KiB batches, Kafka's batch.size,
uncompressed, 16-byte keys, increasing timestamps, no headers): ``r100`` has N100 records
of 100-byte random values, ``r1k`` N1K records of 1-KiB values. Each figure is the best of
REPEAT runs of the query (after one warm-up run per source that also checks the row
count). Rows/s per core = rows / seconds / cores.

Memory: the Python workers' resident set is sampled every 50 ms while each source runs;
the figure is the largest single worker's (one worker runs one task at a time), with
the byte budget (maxBytesPerBatch) stated beside it. Workers are reused across queries,
so a source's figure is an upper bound (direct mode runs first).

Prints a table, then as its very last line one JSON object of headline figures.
Run: ``PYSPARK_PYTHON=.venv/bin/python .venv/bin/python bench/spark_read.py``
(a few minutes; ``--quick`` for a smaller data set, ``--no-object-store`` without the
object-store rows).

Where the time goes at 1 KiB (measured for direction only). Outside Spark, one
network-mode task's fetch + decode loop against the broker (``RangeFetcher`` over 200k
records, 8-MiB fetches) takes ~1.0-1.4 us of client CPU per record and ~0.2 us of broker
CPU (the broker sends the segment bytes as they are). It took 2.2-2.8 us while each Fetch
response stayed alive until the cyclic garbage collector ran (a completed request held
its future, which held the response, which held the request): every response then got a
fresh 8-MiB receive mapping and paid its page faults; a completed request now drops its
callback and the one mapping is reused. The direct-mode reader costs ~1 us per record
in-process (decode plus the page faults of the mapped segments). Spark's side of the
Python Data Source (the JVM reading the Arrow stream and running the query) costs ~7-9 us
of JVM CPU per 1-KiB row even for the pre-built source: with two tasks, the JVM and the
broker on two cores, every microsecond of Python CPU per row competes with it.

Object store: after the table, direct mode reads the same log directory from
an S3-protocol server (moto in server mode, ``object_store_rows``) beside direct mode from
local disk; printed as its own rows, in the JSON line as ``<topic>_<query>_direct_s3`` and
``<topic>_<query>_ratio_s3_vs_local``.

``--security-protocol SASL_SSL``: the broker gets a SASL_SSL listener beside
PLAINTEXT (``sasl_ssl.py``: SCRAM-SHA-256 over TLSv1.3, PEM trust store) and a fifth
source, ``network_sasl_ssl``, reads the same topics in network mode through it (the
``kafka.security.protocol`` / ``kafka.ssl.truststore.*`` / ``kafka.sasl.*`` options),
interleaved with the others; printed beside PLAINTEXT network mode with the ratio, and
in the JSON line as ``<topic>_<query>_network_sasl_ssl`` and
``<topic>_<query>_ratio_sasl_ssl_vs_plaintext``.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition  # noqa: E402

CORES = 2
PARTITIONS = 2
REPEAT = 3
N100 = 4_000_000
N1K = 1_000_000
KEY_SIZE = 16
ROWS_PER_PREBUILT_BATCH = 1 << 16
SCHEMA_DDL = ("key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
              "timestamp TIMESTAMP, timestampType INT")


# --- reference sources (pickled by value to the workers) ---

class PrebuiltPartition(InputPartition):
    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


class PrebuiltReader(DataSourceReader):
    def __init__(self, paths: list[str]) -> None:
        self.paths = paths

    def partitions(self):
        return [PrebuiltPartition(p) for p in self.paths]

    def read(self, partition):
        import pyarrow as pa
        import pyarrow.ipc
        with pa.memory_map(partition.path) as source:
            reader = pa.ipc.open_file(source)
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i)


class PrebuiltArrowSource(DataSource):
    """Yields pre-built Arrow batches of the Spark schema from IPC files (option paths)."""

    @classmethod
    def name(cls):
        return "bench_prebuilt"

    def schema(self):
        return SCHEMA_DDL

    def reader(self, schema):
        return PrebuiltReader(json.loads(self.options["paths"]))


class ConfluentPartition(InputPartition):
    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic, self.partition, self.start, self.end = topic, partition, start, end


class ConfluentReader(DataSourceReader):
    def __init__(self, servers: str, ranges: list) -> None:
        self.servers = servers
        self.ranges = ranges

    def partitions(self):
        return [ConfluentPartition(*r) for r in self.ranges]

    def read(self, part):
        import numpy as np
        import pyarrow as pa
        from confluent_kafka import Consumer, TopicPartition
        schema = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
                            ("partition", pa.int32()), ("offset", pa.int64()),
                            ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32())])
        consumer = Consumer({"bootstrap.servers": self.servers, "group.id": "bench-spark-read",
                             "enable.auto.commit": False, "enable.partition.eof": True,
                             "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 16777216,
                             "queued.max.messages.kbytes": 262144, "check.crcs": True})
        try:
            consumer.assign([TopicPartition(part.topic, part.partition, part.start)])
            next_offset = part.start
            while next_offset < part.end:
                msgs = consumer.consume(num_messages=10000, timeout=5.0)
                keys, values, offsets, stamps, types = [], [], [], [], []
                for m in msgs:
                    if m.error():
                        continue
                    o = m.offset()
                    if o >= part.end:
                        next_offset = part.end
                        break
                    keys.append(m.key())
                    values.append(m.value())
                    offsets.append(o)
                    ts_type, ts = m.timestamp()
                    stamps.append(ts)
                    types.append(ts_type - 1 if ts_type > 0 else -1)
                    next_offset = o + 1
                n = len(offsets)
                if not n:
                    if not msgs:
                        raise RuntimeError(f"no message from {part.topic}-{part.partition} at {next_offset}")
                    continue
                yield pa.RecordBatch.from_arrays([
                    pa.array(keys, pa.binary()), pa.array(values, pa.binary()),
                    pa.array([part.topic] * n, pa.string()),
                    pa.array(np.full(n, part.partition, np.int32)),
                    pa.array(offsets, pa.int64()),
                    pa.array(np.asarray(stamps, np.int64) * 1000).cast(pa.timestamp("us", tz="UTC")),
                    pa.array(types, pa.int32())], schema=schema)
        finally:
            consumer.close()


class ConfluentSource(DataSource):
    """Reads offset ranges (option ranges, JSON) with confluent-kafka from option servers."""

    @classmethod
    def name(cls):
        return "bench_confluent"

    def schema(self):
        return SCHEMA_DDL

    def reader(self, schema):
        return ConfluentReader(self.options["servers"], json.loads(self.options["ranges"]))


# --- data ---

def generate(root: Path, prebuilt: Path, topic: str, n: int, value_size: int) -> None:
    """``n`` records over PARTITIONS partitions of ``topic`` under ``root``, and the same
    rows as Arrow IPC files (Spark schema) under ``prebuilt``."""
    from broker.log.config import LogConfig
    from broker.log.unified_log import UnifiedLog
    from broker.record.batch import write_base_offset
    from broker.record.columnar import encode_from_arrow

    rng = np.random.default_rng(7)
    config = LogConfig.from_props({"segment.bytes": 256 << 20, "message.timestamp.after.max.ms": 2**62})
    ts_type = pa.timestamp("us", tz="UTC")
    spark_schema = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
                              ("partition", pa.int32()), ("offset", pa.int64()),
                              ("timestamp", ts_type), ("timestampType", pa.int32())])
    per_partition = n // PARTITIONS
    chunk = 200_000
    base_ms = int(time.time() * 1000) - 3_600_000  # recent: the broker's retention keeps it
    for p in range(PARTITIONS):
        ulog = UnifiedLog.create(root / f"{topic}-{p}", config)
        path = prebuilt / f"{topic}-{p}.arrow"
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, spark_schema) as writer:
            done = 0
            while done < per_partition:
                m = min(chunk, per_partition - done)
                vbuf = rng.bytes(m * value_size)
                kbuf = rng.bytes(m * KEY_SIZE)
                values = pa.Array.from_buffers(pa.binary(), m, [None, pa.py_buffer(
                    (np.arange(m + 1, dtype=np.int32) * value_size).tobytes()), pa.py_buffer(vbuf)])
                keys = pa.Array.from_buffers(pa.binary(), m, [None, pa.py_buffer(
                    (np.arange(m + 1, dtype=np.int32) * KEY_SIZE).tobytes()), pa.py_buffer(kbuf)])
                stamps = base_ms + (done + np.arange(m, dtype=np.int64)) // 100
                for batch in encode_from_arrow(values, keys, pa.array(stamps)):
                    data = bytearray(batch.data)
                    write_base_offset(data, 0, 0)  # as a producer sends it
                    ulog.append_as_leader(data)
                for s in range(0, m, ROWS_PER_PREBUILT_BATCH):
                    e = min(m, s + ROWS_PER_PREBUILT_BATCH)
                    k = e - s
                    writer.write_batch(pa.RecordBatch.from_arrays([
                        keys.slice(s, k), values.slice(s, k), pa.array([topic] * k, pa.string()),
                        pa.array(np.full(k, p, np.int32)),
                        pa.array(done + np.arange(s, e, dtype=np.int64)),
                        pa.array(stamps[s:e] * 1000).cast(ts_type),
                        pa.array(np.zeros(k, np.int32))], schema=spark_schema))
                done += m
        ulog.close()


# --- memory sampling ---

from spark_workers import WorkerMemory  # noqa: E402

# --- broker for the confluent reference ---

def start_broker(log_dir: Path, overrides: list[str] | None = None
                 ) -> tuple[subprocess.Popen | None, str | None, str | None]:
    """(process, bootstrap servers of its PLAINTEXT listener, error) of ``python -m broker``
    serving ``log_dir``; ``overrides`` (``key=value``) are added (``--security-protocol
    SASL_SSL``: a second listener, ``sasl_ssl.broker_overrides``)."""
    cmd = [sys.executable, "-m", "broker", "--override", f"log.dirs={log_dir}",
           "--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", "log.retention.ms=-1",
           "--log-level", "WARNING"]
    for value in overrides or ():
        cmd += ["--override", value]
    errors = open(log_dir.parent / "broker.stderr", "w+")  # a file: a full pipe would block it
    try:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=errors, text=True)
    except OSError as exc:
        return None, None, str(exc)
    deadline = time.time() + 120
    line = ""
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        m = re.search(r"listening on PLAINTEXT://([\d.]+:\d+)", line)
        if m:
            global LISTENING
            LISTENING = line
            return proc, m.group(1), None
    proc.kill()
    proc.wait()
    errors.seek(0)
    return None, None, f"broker did not start: {line.strip()} {errors.read()[-500:].strip()}"


# --- measuring ---

def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


QUERIES = ("count", "sum")


def run_query(df, query: str):
    from pyspark.sql import functions as F
    if query == "count":
        return df.count()
    return df.select(F.sum(F.length("value"))).collect()[0][0]


def check(df, rows: int, expected_sum: int) -> None:
    """Warm-up run of both queries, checking their answers."""
    got = run_query(df, "count")
    if got != rows:
        raise AssertionError(f"count {got} != {rows}")
    total = run_query(df, "sum")
    if total != expected_sum:
        raise AssertionError(f"sum of value lengths {total} != {expected_sum}")


def reader_memory(log_dir: Path, topic: str, rows: int, budget: int) -> dict:
    """Peak memory of one executor task's reading, alone in a fresh process: the Arrow
    pool's peak and the peak RSS growth while a whole partition is read (decoded, converted
    to the Spark schema and serialized as pyspark does), which must not grow with the
    partition's size."""
    code = f"""
import json, sys
sys.path.insert(0, {str(ROOT)!r})
import pyarrow as pa
import pyarrow.compute
import broker.record.columnar
from spark_kafkalog.readers.direct import DirectRangeReader
from spark_kafkalog.schema import SparkBatchBuilder
def status(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))
base = status("VmRSS")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset the peak RSS (VmHWM) to the current RSS
reader = DirectRangeReader({str(log_dir)!r}, include_headers=False, max_bytes_per_batch={budget},
                           fail_on_data_loss=True)
builder = SparkBatchBuilder({topic!r}, 0, False)
n = 0
sink = pa.ipc.new_stream(pa.output_stream("/dev/null"), builder.schema)
for rb in reader.read({topic!r}, 0, 0, {rows}):
    out = builder.build(rb)
    sink.write_batch(out)
    n += out.num_rows
print(json.dumps({{"rows": n, "arrow_peak_mib": pa.default_memory_pool().max_memory() / 2**20,
                  "rss_growth_mib": (status("VmHWM") - base) / 1024, "base_rss_mib": base / 1024}}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


LISTENING = ""  # the broker's "listening on" line


def object_store_rows(spark, logs: Path, work: Path, datasets: dict, servers: str | None = None) -> dict:
    """The object-store row: direct mode reading the same log directory from an
    S3-protocol server (moto in server mode on 127.0.0.1, over HTTP: ranged GETs, as
    against a cloud bucket, without the network's latency) against direct mode from local
    disk and network mode from the broker (``servers``, serving a copy of the same
    directory), in the same run, the three interleaved, best of REPEAT, and how many of the
    cores the S3 server itself kept busy during the s3 runs (it shares them with Spark).
    Prints the rows; returns the headline keys ``<topic>_<query>_direct_s3``,
    ``..._ratio_s3_vs_local``, ``..._ratio_s3_vs_network`` and ``s3_server_cores_busy``."""
    from broker_ingest import cpu_seconds

    from tests.support.object_store import MotoServer

    server = MotoServer(work / "moto").start()
    headline: dict = {}
    s3_server = [0.0, 0.0]  # the S3 server's CPU seconds and the wall seconds of the s3 runs
    try:
        t = time.perf_counter()
        uri = server.upload(logs, "bench/kafka-logs")
        print(f"\nuploaded the log directory to {uri} (moto server) in {time.perf_counter() - t:.1f} s")
        print(f"direct mode from the object store vs from local disk and network mode, rows/s per core "
              f"(best of {REPEAT}, interleaved)")
        for topic, (n, size) in datasets.items():
            rows = (n // PARTITIONS) * PARTITIONS
            frames = {
                "local": spark.read.format("kafkalog").option("subscribe", topic).load(str(logs)),
                "s3": spark.read.format("kafkalog").options(**server.options).option("subscribe", topic).load(uri),
            }
            if servers:
                frames["network"] = spark.read.format("kafkalog").option(
                    "kafka.bootstrap.servers", servers).option("subscribe", topic).load()
            for df in frames.values():
                check(df, rows, rows * size)
            best: dict = {}
            for _ in range(REPEAT):
                for query in QUERIES:
                    for mode, df in frames.items():
                        cpu = cpu_seconds(server.proc.pid)
                        seconds = timed(lambda: run_query(df, query))
                        best[(mode, query)] = min(best.get((mode, query), float("inf")), seconds)
                        if mode == "s3":
                            s3_server[0] += cpu_seconds(server.proc.pid) - cpu
                            s3_server[1] += seconds
            for query in QUERIES:
                local, s3 = (rows / best[(m, query)] / CORES for m in ("local", "s3"))
                net = rows / best[("network", query)] / CORES if ("network", query) in best else None
                print(f"{topic:6} {query:6} local {local:12,.0f}  s3 {s3:12,.0f}  network "
                      f"{(net or 0):12,.0f}  s3/local {s3 / local:5.2f}  s3/network "
                      f"{(s3 / net if net else 0):5.2f}")
                headline[f"{topic}_{query}_direct_s3"] = round(s3)
                headline[f"{topic}_{query}_ratio_s3_vs_local"] = round(s3 / local, 3)
                headline[f"{topic}_{query}_ratio_s3_vs_network"] = round(s3 / net, 3) if net else None
        if s3_server[1]:
            cores = s3_server[0] / s3_server[1]
            print(f"the S3 server (moto, Python) used {cores:.2f} of the {CORES} cores during the s3 runs")
            headline["s3_server_cores_busy"] = round(cores, 2)
    finally:
        server.stop()
    return headline


def security_protocol() -> str:
    """``--security-protocol PLAINTEXT`` (the default) or ``SASL_SSL``."""
    if "--security-protocol" not in sys.argv:
        return "PLAINTEXT"
    value = (sys.argv[sys.argv.index("--security-protocol") + 1:] or [""])[0]
    if value not in ("PLAINTEXT", "SASL_SSL"):
        raise SystemExit("--security-protocol: PLAINTEXT or SASL_SSL")
    return value


def main() -> None:
    global N100, N1K, REPEAT
    if "--quick" in sys.argv:
        N100, N1K, REPEAT = 400_000, 100_000, 2
    secure = security_protocol() == "SASL_SSL"
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *inherited])
    work = Path(tempfile.mkdtemp(prefix="bench-spark-read-"))
    broker = None
    try:
        logs, prebuilt = work / "logs", work / "prebuilt"
        logs.mkdir()
        prebuilt.mkdir()
        datasets = {"r100": (N100, 100), "r1k": (N1K, 1024)}
        t = time.perf_counter()
        for topic, (n, size) in datasets.items():
            generate(logs, prebuilt, topic, n, size)
        print(f"generated {sum(n for n, _ in datasets.values()):,} records in "
              f"{time.perf_counter() - t:.1f} s under {work}")
        log_bytes = {t: sum(f.stat().st_size for f in logs.glob(f"{t}-*/*.log")) for t in datasets}

        served = work / "served"
        shutil.copytree(logs, served)
        secure_options: dict[str, str] = {}
        if secure:  # a SASL_SSL listener beside PLAINTEXT on the same broker
            import sasl_ssl
            pki = sasl_ssl.make_pki(work / "pki")
            broker, servers, broker_error = start_broker(served, sasl_ssl.broker_overrides(pki))
            if servers:
                sasl_ssl.create_user(*servers.split(":"))
                port = sasl_ssl.parse_listeners(LISTENING)["SASL_SSL"]
                secure_options = {f"kafka.{k}": v for k, v in sasl_ssl.client_config(
                    f"localhost:{port}", pki.path("ca.pem")).items()}
        else:
            broker, servers, broker_error = start_broker(served)

        from pyspark.sql import SparkSession
        spark = (SparkSession.builder.master(f"local[{CORES}]").appName("bench-spark-read")
                 .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
                 .config("spark.driver.memory", "2g").config("spark.sql.session.timeZone", "UTC")
                 .getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        spark.dataSource.register(PrebuiltArrowSource)
        spark.dataSource.register(ConfluentSource)
        from spark_kafkalog.options import DEFAULT_MAX_BYTES_PER_BATCH

        results: dict = {}
        samples: dict = {}  # every timed run's seconds, for the median and spread of --security-protocol
        memory: dict = {}
        runs: dict = {}
        for topic, (n, size) in datasets.items():
            rows = (n // PARTITIONS) * PARTITIONS
            runs[topic] = (rows, rows * size, {
                "direct": spark.read.format("kafkalog").option("subscribe", topic).load(str(logs)),
                "prebuilt": spark.read.format("bench_prebuilt").option(
                    "paths", json.dumps([str(prebuilt / f"{topic}-{p}.arrow") for p in range(PARTITIONS)])).load(),
            })
            if servers:
                runs[topic][2]["network"] = spark.read.format("kafkalog").option(
                    "kafka.bootstrap.servers", servers).option("subscribe", topic).load()
                if secure_options:
                    runs[topic][2]["network_sasl_ssl"] = spark.read.format("kafkalog").options(
                        **secure_options).option("subscribe", topic).load()
                ranges = [(topic, p, 0, n // PARTITIONS) for p in range(PARTITIONS)]
                runs[topic][2]["confluent"] = spark.read.format("bench_confluent").option(
                    "servers", servers).option("ranges", json.dumps(ranges)).load()
        # warm-up and checks, one source at a time (direct first: its workers are fresh)
        for mode in ("direct", "network", "network_sasl_ssl", "prebuilt", "confluent"):
            for topic, (rows, expected_sum, frames) in runs.items():
                if mode not in frames:
                    continue
                with WorkerMemory() as mem:
                    try:
                        check(frames[mode], rows, expected_sum)
                    except Exception as exc:  # a reference failing must not hide the others
                        print(f"{mode} on {topic} failed: {type(exc).__name__}: {str(exc)[:300]}")
                        del frames[mode]
                memory[mode] = max(memory.get(mode, 0), mem.peak_kb)
        # timed runs, the sources interleaved so that they share the machine's moods
        for _ in range(REPEAT):
            for topic, (_rows, _, frames) in runs.items():
                for query in QUERIES:
                    for mode, df in frames.items():
                        seconds = timed(lambda: run_query(df, query))
                        key = (topic, mode, query)
                        results[key] = min(results.get(key, float("inf")), seconds)
                        samples.setdefault(key, []).append(seconds)
        rates = {key: runs[key[0]][0] / seconds / CORES for key, seconds in results.items()}
        budget = DEFAULT_MAX_BYTES_PER_BATCH
        alone = {t: reader_memory(logs, t, runs[t][0] // PARTITIONS, budget) for t in datasets}

        print(f"\n{CORES} cores (local[{CORES}]), {PARTITIONS} partitions per topic; rows/s per core "
              f"(best of {REPEAT}, sources interleaved); python {platform.python_version()}")
        print(f"{'topic':6} {'query':6} {'direct':>12} {'network':>10} {'prebuilt':>12} {'confluent':>12}"
              f" {'dir/pre':>8} {'dir/conf':>9} {'net/conf':>9}")
        headline: dict = {}
        for topic in datasets:
            for query in QUERIES:
                d, nw, p, c = (rates.get((topic, m, query)) for m in ("direct", "network", "prebuilt", "confluent"))
                r_pre = d / p if d and p else None
                r_conf = d / c if d and c else None
                r_net = nw / c if nw and c else None
                fmt = lambda v: f"{v:12,.0f}" if v else f"{'-':>12}"  # noqa: E731
                print(f"{topic:6} {query:6} {fmt(d)} {fmt(nw)[2:]} {fmt(p)} {fmt(c)} "
                      f"{(f'{r_pre:8.2f}' if r_pre else '       -')} {(f'{r_conf:9.1f}' if r_conf else '        -')} "
                      f"{(f'{r_net:9.1f}' if r_net else '        -')}")
                headline[f"{topic}_{query}_direct"] = round(d) if d else None
                headline[f"{topic}_{query}_network"] = round(nw) if nw else None
                headline[f"{topic}_{query}_prebuilt"] = round(p) if p else None
                headline[f"{topic}_{query}_confluent"] = round(c) if c else None
                headline[f"{topic}_{query}_ratio_direct_vs_prebuilt"] = round(r_pre, 3) if r_pre else None
                headline[f"{topic}_{query}_ratio_direct_vs_confluent"] = round(r_conf, 2) if r_conf else None
                headline[f"{topic}_{query}_ratio_network_vs_confluent"] = round(r_net, 2) if r_net else None
        if secure:  # SASL_SSL beside PLAINTEXT network mode: best of the runs, and their median (min..max)
            import statistics
            print("\nnetwork mode, SASL_SSL (SCRAM-SHA-256, TLSv1.3) vs PLAINTEXT, rows/s per core: "
                  f"best of {REPEAT}, then median (min..max) of the {REPEAT} runs")
            for topic in datasets:
                for query in QUERIES:
                    nw, ns = (rates.get((topic, m, query)) for m in ("network", "network_sasl_ssl"))
                    ratio = ns / nw if nw and ns else None
                    spread = {}
                    for m in ("network", "network_sasl_ssl"):
                        per_core = [runs[topic][0] / t / CORES for t in samples.get((topic, m, query), [])]
                        spread[m] = (statistics.median(per_core), min(per_core), max(per_core)) if per_core else None
                    median_ratio = (spread["network_sasl_ssl"][0] / spread["network"][0]
                                    if spread["network"] and spread["network_sasl_ssl"] else None)
                    fmt = lambda v: f"{v[0]:,.0f} ({v[1]:,.0f}..{v[2]:,.0f})" if v else "-"  # noqa: E731
                    print(f"{topic:6} {query:6} PLAINTEXT {nw or 0:10,.0f}  SASL_SSL {ns or 0:10,.0f}  "
                          f"ratio {ratio or 0:.2f} | median PLAINTEXT {fmt(spread['network'])}  "
                          f"SASL_SSL {fmt(spread['network_sasl_ssl'])}  ratio {median_ratio or 0:.2f} (goal >= 0.70)")
                    headline[f"{topic}_{query}_network_sasl_ssl"] = round(ns) if ns else None
                    headline[f"{topic}_{query}_ratio_sasl_ssl_vs_plaintext"] = round(ratio, 3) if ratio else None
                    for m in ("network", "network_sasl_ssl"):
                        if spread[m]:
                            headline[f"{topic}_{query}_{m}_median"] = round(spread[m][0])
                            headline[f"{topic}_{query}_{m}_min"] = round(spread[m][1])
                            headline[f"{topic}_{query}_{m}_max"] = round(spread[m][2])
                    headline[f"{topic}_{query}_ratio_sasl_ssl_vs_plaintext_median"] = \
                        round(median_ratio, 3) if median_ratio else None
            headline["security_protocol"] = "SASL_SSL"
        for topic in datasets:
            mb = log_bytes[topic] / 1e6
            seconds = results.get((topic, "direct", "count"))
            if seconds:
                print(f"direct {topic}: {mb:,.0f} MB of segments, count() at {mb / seconds / CORES:,.0f} MB/s per core")
        print("python worker peak RSS during the warm-up runs (MiB): "
              + ", ".join(f"{m} {kb / 1024:.0f}" for m, kb in memory.items()))
        for topic, m in alone.items():
            print(f"one direct-mode task alone, {topic} ({log_bytes[topic] / PARTITIONS / 1e6:,.0f} MB "
                  f"partition), maxBytesPerBatch {budget >> 20} MiB: Arrow pool peak "
                  f"{m['arrow_peak_mib']:.0f} MiB, peak RSS growth {m['rss_growth_mib']:.0f} MiB over "
                  f"{m['base_rss_mib']:.0f} MiB after imports")
        if broker_error:
            print(f"confluent reference skipped: {broker_error}")
        headline["worker_peak_rss_mib_direct"] = round(memory.get("direct", 0) / 1024)
        headline["worker_peak_rss_mib_prebuilt"] = round(memory.get("prebuilt", 0) / 1024)
        headline["worker_peak_rss_mib_confluent"] = round(memory["confluent"] / 1024) if "confluent" in memory else None
        headline["direct_task_arrow_peak_mib"] = {t: round(m["arrow_peak_mib"]) for t, m in alone.items()}
        headline["direct_task_rss_growth_mib"] = {t: round(m["rss_growth_mib"]) for t, m in alone.items()}
        headline["max_bytes_per_batch_mib"] = budget >> 20
        headline["records"] = {t: n for t, (n, _) in datasets.items()}
        headline["cores"] = CORES
        if "--no-object-store" not in sys.argv:
            headline.update(object_store_rows(spark, logs, work, datasets, servers))
        spark.stop()
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
