"""Benchmark: exporting a topic to an Iceberg and to a Delta table
(``spark_kafkalog.tables.export``) next to the plain Parquet export of the same topic
(``spark_kafkalog.jobs.export.export``, the reference), in one Spark session, against the
same broker.

Owns: measuring rows/s (records / seconds of the call) of

1. ``parquet``: ``jobs.export.export(spark, topics=..., fmt="parquet", output=<fresh dir>,
   bootstrap_servers=...)``: Spark's own Parquet writer in the JVM;
2. ``iceberg``: ``tables.export(spark, topic=..., table=<fresh dir>, format="iceberg",
   bootstrap_servers=...)``: the embedded SQLite catalog, the table partitioned by
   ``partition`` and ``day(timestamp)`` (the default), each task reading its range with the
   source's reader and writing zstd Parquet with pyarrow in the same Python worker
   (``tables/tasks.py``), one pyiceberg commit on the driver;
3. ``delta``: the same with ``format="delta"`` (partitioned by ``partition`` and
   ``timestamp_date``, one deltalake commit).

Each run exports the whole topic to a fresh directory (the table created by the run) and
is checked: the call's record count equals N, and for the first run of each table format
the table itself, read back with pyiceberg (``scan().count()``) and deltalake (a
``count(*)`` through ``QueryBuilder``), holds N rows. The output is deleted after its
check (outside the clock). The table exports also get a breakdown of where the call's
time went on the driver: the target's ``load`` + ``remove_orphans``, ``ensure`` (creating
the table) and ``commit``, timed by a delegating target passed as ``target=``; the rest
is planning and the Spark job.

Goals: iceberg >= 0.8 x parquet and delta >= 0.8 x parquet (median rows/s).

Workload: one topic of 6 partitions with N records (1,000,000; ``--quick``: 100,000) of
12-byte keys (``key-%08d``, so murmur2 spreads them over the partitions) and 100-byte
values (half random bytes, half repeated: about 2:1 under a compressor), no headers,
produced uncompressed with the project's own ``KafkaProducer.send_arrow`` (one columnar
call, acks=all). The broker runs in a child process (``spark_kafkalog.embedded.EmbeddedBroker``)
on the same machine as Spark local[2]; every export plans the same tasks (about four per
core, at least 100,000 offsets each: ``jobs/export.default_min_partitions``). After one
warm-up run of each (not counted), REPEAT interleaved runs of the three; each figure is
the median of its runs with the spread (min..max).

Prints a table, then as its very last line one JSON object: per export the median rows/s
with ``_min`` / ``_max``, ``ratio_iceberg_vs_parquet``, ``ratio_delta_vs_parquet``, the
commit seconds, records, cores, repeat, the load average, and the goals.
Run: ``PYSPARK_PYTHON=.venv/bin/python .venv/bin/python bench/table_export.py``
(a few minutes; ``--quick`` for a tenth of the records).
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

CORES = 2
PARTITIONS = 6
REPEAT = 3
N = 1_000_000
VALUE_BYTES = 100
EXPORTS = ("parquet", "iceberg", "delta")
GOALS = {"iceberg": 0.8, "delta": 0.8}
PHASES = ("load", "ensure", "commit")


# --- data ---

def produce(servers: str, topic: str, n: int) -> None:
    """``n`` keyed records into ``topic`` (created with PARTITIONS partitions), with the
    project's columnar producer; checks the broker acknowledged all of them."""
    import numpy as np
    import pyarrow as pa
    from confluent_kafka.admin import AdminClient, NewTopic

    from broker.client.producer import KafkaProducer

    admin = AdminClient({"bootstrap.servers": servers})
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS)])[topic].result(30)
    rng = np.random.default_rng(7)
    half = VALUE_BYTES // 2
    pool = 4096
    randoms = rng.integers(0, 256, size=(pool, half), dtype=np.uint8)
    values = [bytes(randoms[i]) + bytes([65 + i % 26]) * (VALUE_BYTES - half) for i in range(pool)]
    value_col = pa.array([values[i % pool] for i in range(n)], pa.binary())
    key_col = pa.array([b"key-%08d" % i for i in range(n)], pa.binary())
    producer = KafkaProducer({"bootstrap.servers": servers, "acks": "all", "linger.ms": 5,
                              "batch.size": 1_000_000, "buffer.memory": 64 << 20})
    try:
        result = producer.send_arrow(topic, value_col, keys=key_col).result(600)
    finally:
        producer.close()
    if result.records != n:
        raise RuntimeError(f"{topic}: {result.records} of {n} records acknowledged")


# --- checks ---

def iceberg_rows(table_dir: Path, topic: str) -> int:
    from pyiceberg.catalog import load_catalog

    catalog = load_catalog("kafkalog", type="sql", uri=f"sqlite:///{table_dir}/catalog.db",
                           warehouse=f"file://{table_dir}")
    return int(catalog.load_table(f"default.{topic}").scan().count())


def delta_rows(table_dir: Path) -> int:
    from deltalake import DeltaTable, QueryBuilder

    table = DeltaTable(str(table_dir))
    out = QueryBuilder().register("t", table).execute("SELECT count(*) AS n FROM t").read_all()
    return int(out.column("n")[0].as_py())


class TimedTarget:
    """A ``TableTarget`` that forwards every call to ``inner`` and adds the seconds of its
    driver-side steps to ``phases`` (load + remove_orphans under ``load``)."""

    def __init__(self, inner, phases: dict[str, float]) -> None:
        self._inner = inner
        self._phases = phases

    def _timed(self, phase: str, fn, *args, **kwargs):
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            self._phases[phase] = self._phases.get(phase, 0.0) + time.perf_counter() - t

    def load(self, *args, **kwargs):
        return self._timed("load", self._inner.load, *args, **kwargs)

    def remove_orphans(self, *args, **kwargs):
        return self._timed("load", self._inner.remove_orphans, *args, **kwargs)

    def ensure(self, *args, **kwargs):
        return self._timed("ensure", self._inner.ensure, *args, **kwargs)

    def commit(self, *args, **kwargs):
        return self._timed("commit", self._inner.commit, *args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self._inner, name)


# --- measuring ---

def main() -> None:
    global N
    if "--quick" in sys.argv:
        N //= 10
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *inherited])
    from spark_kafkalog.embedded import EmbeddedBroker

    load_start = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="bench-table-export-"))
    broker = EmbeddedBroker(work / "kafka-logs", overrides={
        "num.partitions": PARTITIONS, "log.retention.ms": -1}, schema_registry=False).start()
    try:
        servers = broker.bootstrap_servers
        topic = f"tables-{uuid.uuid4().hex[:6]}"
        t = time.perf_counter()
        produce(servers, topic, N)
        print(f"produced {N:,} records into {topic} ({PARTITIONS} partitions) in "
              f"{time.perf_counter() - t:.1f} s")

        from pyspark.sql import SparkSession

        import spark_kafkalog.tables
        from spark_kafkalog.jobs.export import export as export_files
        from spark_kafkalog.tables.job import open_target
        spark = (SparkSession.builder.master(f"local[{CORES}]").appName("bench-table-export")
                 .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                 .config("spark.driver.memory", "2g")
                 .config("spark.sql.session.timeZone", "UTC").config("spark.sql.shuffle.partitions", "2")
                 .getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")

        checked: set[str] = set()

        def run(kind: str) -> tuple[float, dict[str, float], int]:
            """One export of the whole topic to a fresh directory: (seconds, phases, files)."""
            out = work / f"{kind}-{uuid.uuid4().hex[:8]}"
            phases: dict[str, float] = {}
            if kind == "parquet":
                t = time.perf_counter()
                result = export_files(spark, topics=topic, fmt="parquet", output=str(out),
                                      bootstrap_servers=servers)
                seconds = time.perf_counter() - t
                files = len(result.files)
            else:
                target = TimedTarget(open_target(kind, str(out), topic=topic), phases)
                t = time.perf_counter()
                result = spark_kafkalog.tables.export(spark, topic=topic, table=str(out), format=kind,
                                                      bootstrap_servers=servers, target=target)
                seconds = time.perf_counter() - t
                files = result.files
            if result.records != N:
                raise AssertionError(f"{kind}: the export says {result.records} records, not {N}")
            if kind != "parquet" and kind not in checked:
                got = iceberg_rows(out, topic) if kind == "iceberg" else delta_rows(out)
                if got != N:
                    raise AssertionError(f"{kind}: the table holds {got} rows, not {N}")
                checked.add(kind)
            shutil.rmtree(out, ignore_errors=True)
            return seconds, phases, files

        for kind in EXPORTS:
            seconds, phases, files = run(kind)
            shown = ", ".join(f"{k} {v:.2f} s" for k, v in phases.items())
            print(f"warm-up {kind:8}: {seconds:.1f} s, {files} files, checked{'; ' + shown if shown else ''}")

        samples: dict[str, list[float]] = {kind: [] for kind in EXPORTS}
        breakdown: dict[str, list[dict[str, float]]] = {kind: [] for kind in EXPORTS}
        file_counts: dict[str, int] = {}
        for rnd in range(REPEAT):
            for kind in EXPORTS:
                seconds, phases, files = run(kind)
                samples[kind].append(seconds)
                breakdown[kind].append(phases)
                file_counts[kind] = files
            print(f"round {rnd + 1} of {REPEAT}: " + ", ".join(
                f"{kind} {samples[kind][-1]:.1f} s" for kind in EXPORTS))
        spark.stop()

        load = os.getloadavg()
        print(f"\n{N:,} records of {VALUE_BYTES} B with 12-B keys, {PARTITIONS} partitions, network mode "
              f"against the broker on the same machine, Spark local[{CORES}]; rows/s, median (min..max) of "
              f"{REPEAT} runs, exports interleaved; python {platform.python_version()}; load average "
              f"{load_start[0]:.1f} {load_start[1]:.1f} {load_start[2]:.1f} at the start, "
              f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f} at the end")
        headline: dict = {}
        rates = {kind: [N / s for s in samples[kind]] for kind in EXPORTS}
        print(f"\n  {'export':8} {'rows/s median (min..max)':>30} {'seconds':>8} {'files':>6}   driver steps "
              "(median s: load, ensure, commit)")
        for kind in EXPORTS:
            med, low, high = statistics.median(rates[kind]), min(rates[kind]), max(rates[kind])
            headline[kind], headline[f"{kind}_min"], headline[f"{kind}_max"] = round(med), round(low), round(high)
            steps = ""
            if kind != "parquet":
                meds = {p: statistics.median(b.get(p, 0.0) for b in breakdown[kind]) for p in PHASES}
                steps = ", ".join(f"{meds[p]:.2f}" for p in PHASES)
                headline[f"{kind}_commit_seconds"] = round(meds["commit"], 2)
            print(f"  {kind:8} {med:>12,.0f} ({low:,.0f}..{high:,.0f}) "
                  f"{statistics.median(samples[kind]):>8.1f} {file_counts[kind]:>6}   {steps}")
        print()
        for kind in GOALS:
            ratio = headline[kind] / headline["parquet"]
            headline[f"ratio_{kind}_vs_parquet"] = round(ratio, 2)
            print(f"  {kind} / parquet: {ratio:.2f} (goal >= {GOALS[kind]})"
                  f"{'' if ratio >= GOALS[kind] else '  NOT MET'}")
        headline["records"] = N
        headline["cores"] = CORES
        headline["repeat"] = REPEAT
        headline["load_average_1m"] = round(load[0], 1)
        headline["load_average_1m_start"] = round(load_start[0], 1)
        headline["goals"] = GOALS
        print(json.dumps(headline))
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
