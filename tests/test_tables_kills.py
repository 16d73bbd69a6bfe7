"""Exactly once under SIGKILL: Iceberg and Delta exports (``spark_kafkalog.tables.job``)
killed at random points, then run to completion, against the real broker.

For each format, a topic of six partitions holding ``RECORDS`` records is exported by
``tests/support/table_export_job.py`` in a process of its own (a local[2] Spark JVM as its
child), whose whole process group is SIGKILLed at a point drawn with ``random.Random``:
while the data files are written (Parquet files of the run's ``kafkalog-runs/<run>``
directory exist; checked afterwards: the table holds the offsets it held before), or after
a random delay from the start. Then a run completes (in this process, on the suite's
session), and the table, read back with pyiceberg's scan and deltalake's ``QueryBuilder``, holds every
(partition, offset) exactly once; the offsets of its last commit are the topic's end
offsets; it references no file of a killed run, whose files the completed run left in place
(younger than ``orphan_age_ms``). After 2.5% more records (5,000 under the soak), a
bridge read (``kafkalog.table``: the table's rows, then the log after its offsets) returns
every record once; a second completed run (in this process) adds exactly those records,
and with ``orphan_age_ms=0`` deletes the killed runs' files, the rows staying.

``make test``: 20,000 records, one kill once the first file exists. ``KAFKALOG_SOAK=1``
(the soak): 200,000 records and three kills: after the first file, after a random one of
the run's six files, and after a random delay up to about 1.5 times the time the first
file took to appear; each kill's landing (before the run's directory, while writing, after
the commit) is printed in the soak table. ``KAFKALOG_KILL_RANDOM=<n>`` replays the kill
points of a failure (its assertion messages print the number).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from spark_kafkalog.tables.job import export_table, open_target
from tests.support.broker import BrokerProcess
from tests.support.soak import soak_row

REPO = Path(__file__).resolve().parents[1]
SOAK = bool(os.environ.get("KAFKALOG_SOAK"))
RECORDS = 200_000 if SOAK else 20_000
KILLS = 3 if SOAK else 1
PARTITIONS = 6
RANDOM_KEY = int(os.environ.get("KAFKALOG_KILL_RANDOM") or random.SystemRandom().randrange(1 << 32))
# once the awaited Parquet file of the run appears, the kill waits up to this long (seconds)
WRITE_WINDOW = 0.5 if SOAK else 0.05
# Spark tasks of a killed batch export: its tasks write a range in tens of milliseconds, so
# many small tasks keep the run writing long enough (a second or more) for a kill to land
# while the files are written rather than after the commit
KILLED_TASKS = 120 if SOAK else 40

pytestmark = pytest.mark.timeout(3600 if SOAK else 600)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("kills"), {"num.partitions": str(PARTITIONS)}, name="kills")
    b.start()
    yield b
    b.kill()


def _produce(broker, topic: str, start: int, n: int) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "batch.num.messages": 10000})
    for i in range(start, start + n):
        while True:
            try:
                producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(60) == 0


def _ends(broker, topic: str) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "kills-ends"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(PARTITIONS)}
    finally:
        c.close()


def _offsets(fmt: str, table: str, topic: str) -> list[tuple[int, int]]:
    """Every row's (partition, offset), read by the format's own library."""
    if fmt == "iceberg":
        from pyiceberg.catalog import load_catalog
        catalog = load_catalog("kafkalog", type="sql", uri=f"sqlite:///{table}/catalog.db", warehouse=f"file://{table}")
        rows = catalog.load_table(("default", topic)).scan(selected_fields=("partition", "offset")).to_arrow()
    else:
        # deltalake's to_pyarrow_table aborts the interpreter at exit: the QueryBuilder reads
        from deltalake import DeltaTable, QueryBuilder
        rows = (QueryBuilder().register("t", DeltaTable(table))
                .execute('select "partition", "offset" from t').read_all())
    return list(zip(rows.column("partition").to_pylist(), rows.column("offset").to_pylist(), strict=True))


def _check_rows(fmt: str, table: str, topic: str, ends: dict[int, int], context: str) -> None:
    """Every (partition, offset) below the end offsets exactly once, nothing else."""
    seen = Counter(_offsets(fmt, table, topic))
    twice = [k for k, n in seen.items() if n > 1]
    assert not twice, f"{context}: in the table twice: {twice[:5]}"
    expected = {(p, o) for p, end in ends.items() for o in range(end)}
    assert sum(seen.values()) == len(expected), f"{context}: {sum(seen.values())} rows, not {len(expected)}"
    assert set(seen) == expected, f"{context}: missing {sorted(expected - set(seen))[:5]}, " \
                                  f"extra {sorted(set(seen) - expected)[:5]}"


def _local(uri: str) -> str:
    return os.path.normpath(uri[len("file://"):] if uri.startswith("file://") else uri)


def _run_dirs(table: str) -> set[Path]:
    return {p for p in Path(table).glob("**/kafkalog-runs/*") if p.is_dir()}


def _files(run_dir: Path) -> set[str]:
    return {os.path.normpath(str(p)) for p in run_dir.rglob("*.parquet")}


def _job(args: dict, log: Path) -> subprocess.Popen:
    """The export in a process of its own, the leader of a new process group (its Spark
    JVM and Python workers are in it)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
               SPARK_LOCAL_DIRS=str(log.parent / "spark-local"))  # what a killed JVM leaves stays in tmp_path
    with open(log.with_suffix(".out"), "wb") as out, open(log.with_suffix(".err"), "wb") as err:
        return subprocess.Popen([sys.executable, "-m", "tests.support.table_export_job", json.dumps(args)],
                                cwd=REPO, env=env, stdout=out, stderr=err, start_new_session=True)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(30)
    deadline = time.monotonic() + 30
    while True:  # the group's last processes (the JVM's Python workers) die with it
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        assert time.monotonic() < deadline, f"process group {proc.pid} outlived SIGKILL"
        time.sleep(0.05)  # scenario: the kernel reaps the killed group's processes


def _kill_while_writing(proc: subprocess.Popen, table: str, before: set[Path], files: int, rng: random.Random,
                        context: str) -> float:
    """SIGKILL once the run's directory holds ``files`` Parquet files, after a random
    delay of up to ``WRITE_WINDOW``. Returns the seconds from the start to the first file."""
    started = time.monotonic()
    first_file = None
    while True:
        assert proc.poll() is None, f"{context}: the export ended (rc {proc.returncode}) before {files} files"
        assert time.monotonic() - started < 300, f"{context}: not {files} data files within 300 s"
        written = sum(len(_files(d)) for d in _run_dirs(table) - before)
        if written and first_file is None:
            first_file = time.monotonic() - started
        if written >= files:
            break
        time.sleep(0.005)  # scenario: watching the run's directory for its data files
    time.sleep(rng.uniform(0.0, WRITE_WINDOW))  # scenario: the kill lands while the files are written
    _kill_group(proc)
    assert first_file is not None
    return first_file


def _kill_after(proc: subprocess.Popen, delay: float, log: Path, context: str) -> None:
    """SIGKILL ``delay`` seconds after the start, unless the export completed before."""
    deadline = time.monotonic() + delay
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)  # scenario: the kill comes at a random moment of the run
    if proc.poll() is not None:
        assert proc.returncode == 0, f"{context}: {log.with_suffix('.err').read_text()[-3000:]}"
    _kill_group(proc)


@pytest.mark.parametrize("fmt", ["iceberg", "delta"])
def test_exports_killed_at_random_points_hold_every_record_once(spark, broker, tmp_path, fmt):
    rng = random.Random(RANDOM_KEY + (fmt == "delta"))
    topic = f"kills-{fmt}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS)])[topic].result(30)
    _produce(broker, topic, 0, RECORDS)
    table = str(tmp_path / "table")
    args = {"topic": topic, "table": table, "fmt": fmt, "bootstrap_servers": broker.bootstrap,
            "options": {"minPartitions": str(KILLED_TASKS)}}
    target = open_target(fmt, table, topic=topic)

    landed_on = None                           # the table's offsets after the kills
    killed: dict[Path, set[str]] = {}          # a killed run's directory -> its files
    landings: list[str] = []
    first_file = None
    for kill in range(KILLS):
        context = f"{fmt}, kill {kill + 1} of {KILLS}, random.Random({RANDOM_KEY}) (KAFKALOG_KILL_RANDOM)"
        before_dirs, before_offsets = _run_dirs(table), target.load().offsets
        log = tmp_path / f"killed-{kill}"
        proc = _job(args, log)
        if kill < 2:
            # the first kill after the first file, the second after a random one of the
            # six files (one per Kafka partition)
            n = 1 if kill == 0 else rng.randint(2, PARTITIONS)
            took = _kill_while_writing(proc, table, before_dirs, n, rng, context)
            first_file = took if first_file is None else first_file
        else:
            assert first_file is not None
            _kill_after(proc, rng.uniform(0.5, 1.5 * first_file), log, context)
        new_dirs = _run_dirs(table) - before_dirs
        offsets = landed_on = target.load().offsets
        landing = ("after the commit" if offsets != before_offsets else
                   "while writing" if new_dirs else "before the run directory")
        landings.append(landing)
        if kill == 0:
            assert landing == "while writing" and any(_files(d) for d in new_dirs), \
                f"{context}: landed {landing}, run directories {sorted(map(str, new_dirs))}"
        if landing != "after the commit":
            killed.update({d: _files(d) for d in new_dirs})

    context = f"{fmt}, kills landed {landings}, random.Random({RANDOM_KEY}) (KAFKALOG_KILL_RANDOM)"
    completed = export_table(spark, **args)
    ends = _ends(broker, topic)
    assert sum(ends.values()) == RECORDS
    _check_rows(fmt, table, topic, ends, context)
    state = target.load()
    assert dict(state.offsets.next_offsets) == ends, context
    assert completed.offsets_after.next_offsets == ends, context
    if "after the commit" not in landings:
        assert completed.records == RECORDS and completed.offsets_before == landed_on, context
    table_files = {_local(f) for f in state.files}
    killed_files = set().union(*killed.values())
    assert killed_files, f"{context}: the killed runs wrote no file"
    assert not table_files & killed_files, f"{context}: the table references killed runs' files"
    committed_dirs = {d for d in _run_dirs(table) if _files(d) & table_files}
    assert not committed_dirs & set(killed), context
    assert set().union(*(_files(d) for d in committed_dirs)) == table_files, context
    # the completed run left the killed runs' files alone (younger than a day)
    assert all(os.path.exists(f) for f in killed_files), context

    # more records; a second completed run adds exactly those, and with orphan_age_ms=0
    # first deletes the killed runs' files
    more = RECORDS // 40  # 5,000 after 200,000 under the soak
    _produce(broker, topic, RECORDS, more)
    # a bridge read before that export: the table's rows, then the log after its offsets
    bridged = (spark.read.format("kafkalog").option("kafka.bootstrap.servers", broker.bootstrap)
               .option("subscribe", topic).option("kafkalog.table", table).load()
               .groupBy("partition", "offset").count()
               .selectExpr("count(*) AS offsets", "max(count) AS most", "sum(count) AS rows").first())
    assert (bridged["offsets"], bridged["most"], bridged["rows"]) == (RECORDS + more, 1, RECORDS + more), context
    result = export_table(spark, topic=topic, table=table, fmt=fmt, bootstrap_servers=broker.bootstrap,
                          orphan_age_ms=0)
    assert result.records == more, context
    ends = _ends(broker, topic)
    assert sum(ends.values()) == RECORDS + more
    _check_rows(fmt, table, topic, ends, context)
    assert dict(target.load().offsets.next_offsets) == ends, context
    left = sorted(f for f in killed_files if os.path.exists(f))
    assert not left, f"{context}: orphans left: {left[:3]}"
    soak_row(f"tables: {fmt} export SIGKILLed", KILLS, KILLS, RECORDS + more, 0,
             f"kills landed {', '.join(landings)}; random.Random({RANDOM_KEY})")


def _committed_batches(log: Path) -> int:
    """How many micro-batches the streaming job reported committed (its stdout lines)."""
    out = log.with_suffix(".out")
    if not out.exists():
        return 0
    return sum(1 for line in out.read_text().splitlines() if line.startswith('{"batch"'))


def _kill_stream_while_writing(proc: subprocess.Popen, table: str, log: Path, batches: int, rng: random.Random,
                               context: str) -> None:
    """SIGKILL once ``batches`` micro-batches are committed and the next one's first data
    file exists, after a random delay of up to ``WRITE_WINDOW``."""
    started = time.monotonic()
    while _committed_batches(log) < batches:
        assert proc.poll() is None, f"{context}: the export ended (rc {proc.returncode}) before {batches} commits"
        assert time.monotonic() - started < 300, f"{context}: not {batches} commits within 300 s"
        time.sleep(0.01)  # scenario: watching the job's lines for its commits
    before = _run_dirs(table)
    committed = {d for d in before if _files(d)}
    while not any(_files(d) for d in _run_dirs(table) - committed):
        assert proc.poll() is None, f"{context}: the export ended (rc {proc.returncode}) before the next batch"
        assert time.monotonic() - started < 300, f"{context}: no next micro-batch within 300 s"
        time.sleep(0.005)  # scenario: watching for the next micro-batch's data files
    time.sleep(rng.uniform(0.0, WRITE_WINDOW))  # scenario: the kill lands while the batch is written
    _kill_group(proc)


STREAM_FORMATS = ["iceberg", "delta"] if SOAK else ["delta"]


@pytest.mark.parametrize("fmt", STREAM_FORMATS)
def test_streaming_exports_killed_mid_run_hold_every_record_once(spark, broker, tmp_path, fmt):
    """The streaming export (Trigger.AvailableNow, about five micro-batches) SIGKILLed
    while a micro-batch is written, after one or more micro-batches committed (the soak:
    three kills, the last after a random delay); then a streaming export in this process
    runs to the end: every (partition, offset) once, the offsets the end offsets."""
    from spark_kafkalog.tables.stream import export_stream

    rng = random.Random(RANDOM_KEY + 2 + (fmt == "delta"))
    topic = f"kills-stream-{fmt}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS)])[topic].result(30)
    _produce(broker, topic, 0, RECORDS)
    table = str(tmp_path / "table")
    checkpoints = tmp_path / "checkpoints"
    args = {"topic": topic, "table": table, "fmt": fmt, "bootstrap_servers": broker.bootstrap,
            "streaming": True, "max_offsets_per_trigger": RECORDS // 5 + PARTITIONS,
            "checkpoint_location": str(checkpoints)}
    target = open_target(fmt, table, topic=topic)

    landings: list[str] = []
    uncommitted: set[str] = set()
    for kill in range(KILLS):
        context = f"stream {fmt}, kill {kill + 1} of {KILLS}, random.Random({RANDOM_KEY}) (KAFKALOG_KILL_RANDOM)"
        before = target.load().offsets
        before_dirs = _run_dirs(table)
        log = tmp_path / f"killed-stream-{kill}"
        proc = _job(args, log)
        if kill < 2:
            _kill_stream_while_writing(proc, table, log, 1 if kill == 0 else rng.randint(1, 2), rng, context)
        else:
            _kill_after(proc, rng.uniform(5.0, 30.0), log, context)
        held = target.load().offsets
        committed_records = sum(held.next_offsets.values()) if held is not None else 0
        landings.append(f"{committed_records} of {RECORDS} committed")
        if kill == 0:
            # killed mid-run: some micro-batches committed, not all
            assert held is not None and held != before and 0 < committed_records < RECORDS, context
        table_files = {_local(f) for f in target.load().files}
        for d in _run_dirs(table) - before_dirs:
            written = _files(d)
            if written and not written & table_files:
                uncommitted |= written

    context = f"stream {fmt}, kills landed {landings}, random.Random({RANDOM_KEY}) (KAFKALOG_KILL_RANDOM)"
    left_by_kills = set(checkpoints.iterdir())
    assert left_by_kills, f"{context}: the killed queries left no checkpoint"
    held = target.load().offsets
    batches: list = []
    query = export_stream(spark, topic=topic, table=table, fmt=fmt, bootstrap_servers=broker.bootstrap,
                          checkpoint_location=str(checkpoints), on_commit=batches.append)
    try:
        assert query.awaitTermination(300), context
    finally:
        query.stop()
    assert query.exception() is None, context
    ends = _ends(broker, topic)
    assert sum(ends.values()) == RECORDS
    _check_rows(fmt, table, topic, ends, context)
    state = target.load()
    assert dict(state.offsets.next_offsets) == ends, context
    assert sum(b.records for b in batches) == RECORDS - sum(held.next_offsets.values()), context
    table_files = {_local(f) for f in state.files}
    assert uncommitted, f"{context}: no kill landed while a micro-batch was written"
    assert not table_files & uncommitted, f"{context}: the table references killed micro-batches' files"
    deadline = time.monotonic() + 30
    while set(checkpoints.iterdir()) != left_by_kills:  # the completed query's checkpoint goes
        assert time.monotonic() < deadline, f"{context}: {sorted(checkpoints.iterdir())}"
        time.sleep(0.05)  # scenario: the listener deletes the stopped query's checkpoint
    soak_row(f"tables: {fmt} streaming export SIGKILLed", KILLS, KILLS, RECORDS, 0,
             f"kills landed {', '.join(landings)}; random.Random({RANDOM_KEY})")
