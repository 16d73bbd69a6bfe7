"""Shared fixtures and helpers of the sink tests (``test_spark_write.py``,
``test_spark_stream_sink.py``).

Owns:

* ``get_write_spark()`` / the ``wspark`` fixture: one SparkSession for the test process
  with master ``local[2,4]`` (two cores, a failed task is retried up to 4 attempts: the
  sink's failure scenarios need Spark's task retries, which plain ``local[2]`` disables),
  otherwise configured as ``tests/support/spark.py``'s session (``SESSION_CONF``). If
  that module's ``local[2]`` session already runs, it is stopped and replaced, and that
  module is pointed at the new session, so both test families share one.
* ``sink_broker``: one broker subprocess (``tests.support.broker.BrokerProcess``) for the sink tests,
  with ``num.partitions=3`` (topics are auto-created by the producer's metadata request)
  and no time retention (the tests write timestamps from 2023).
* ``WriteTestSource`` (format ``kafkalog_wtest``): ``KafkaLogDataSource`` plus
  ``writer()`` / ``streamWriter()`` calling ``spark_kafkalog.writers``, as ``source.py``
  will; with the test-only option ``test.recordTo`` (removed before the product sees the
  options) the writer's ``commit`` / ``abort`` also pickle what they receive into that
  directory (``recorded()`` reads them back), and so does a task's ``write`` that fails
  (kind ``task-error``: the error text and its notes), which is how the tests check what
  Spark hands the driver side and what a failed attempt reports. With the test-only
  option ``test.dieAtCommitOfBatch=N`` as well, the streaming writer's ``commit`` and
  ``abort`` of micro-batch N record, then raise without calling the sink: the driver
  "dies" between the tasks' writes and the commit (exactly-once sink tests). With
  ``test.failTaskAfterRows=N`` every attempt of a task hands the sink N rows or more, waits
  (bounded) until the producer got them into the topic, then fails (a task failing for
  good mid-write);
  ``test.killTaskAfterRows=N`` the same, but the Python worker exits at once
  (``os._exit``: no cleanup, as when an executor is lost).
* ``read_topic`` (the ``kafkalog`` source, direct mode on the broker's log directory) and
  ``consume`` (confluent-kafka's Consumer) to read what was written; ``wait_written``, a
  failing task's bounded wait until the rows it handed on are in the topic.

Invariants: this module is pickled by value (pyspark's ``cloudpickle.register_pickle_by_value``), so
the Python workers need not import it; the test source's name never collides with
``kafkalog``.

Thread-safety: test-process only.
"""

from __future__ import annotations

import os
import pickle
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.support.spark import SESSION_CONF

REPO = Path(__file__).resolve().parents[2]

MASTER = "local[2,4]"
SOURCE_NAME = "kafkalog_wtest"
RECORD_OPTION = "test.recordto"
# Test-only: the streaming writer's commit and abort of this micro-batch fail without
# reaching the sink, as if the driver died between the tasks' writes and the commit.
DIE_OPTION = "test.dieatcommitofbatch"
# Test-only: every task attempt fails after handing the sink this many rows (or more).
FAIL_OPTION = "test.failtaskafterrows"
KILL_OPTION = "test.killtaskafterrows"

_session = None


def get_write_spark():
    """The shared SparkSession with task retries (see the module docstring)."""
    global _session
    if _session is not None:
        return _session
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    paths = [str(REPO)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    from pyspark import SparkContext
    from pyspark.sql import SparkSession
    sc = SparkContext._active_spark_context
    if sc is not None and sc.master != MASTER:
        SparkSession.builder.getOrCreate().stop()
    builder = SparkSession.builder.master(MASTER).appName("spark-kafkalog-tests")
    for key, value in {**SESSION_CONF, "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true"}.items():
        builder = builder.config(key, value)
    _session = builder.getOrCreate()
    _session.sparkContext.setLogLevel("ERROR")
    shared = sys.modules.get("tests.support.spark")
    if shared is not None:
        shared._session = _session
    from pyspark import cloudpickle
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    _session.dataSource.register(WriteTestSource)
    return _session


@pytest.fixture(scope="session")
def wspark():
    return get_write_spark()


@pytest.fixture(scope="session")
def sink_broker(tmp_path_factory):
    from tests.support.broker import BrokerProcess
    broker = BrokerProcess(tmp_path_factory.mktemp("sink-broker"),
                           {"num.partitions": "3", "log.retention.ms": "-1"}, name="sink")
    broker.start()
    yield broker
    broker.stop()


def unique_topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# -- the test data source ------------------------------------------------------------------

def _record(directory: str, kind: str, batch_id: Any, messages: list) -> None:
    path = Path(directory) / f"{time.time_ns()}-{kind}-{uuid.uuid4().hex[:6]}.pkl"
    path.write_bytes(pickle.dumps((kind, batch_id, list(messages))))


def recorded(directory: Path) -> list[tuple[str, Any, list]]:
    """(kind, batchId, messages) of every commit/abort, in call order."""
    return [pickle.loads(p.read_bytes()) for p in sorted(Path(directory).glob("*.pkl"))]


def _make_source_class():
    try:
        from spark_kafkalog.source import KafkaLogDataSource as Base
    except ImportError:  # the read side missing: a minimal data source
        from pyspark.sql.datasource import DataSource as Base
    from spark_kafkalog.writers import make_stream_writer, make_writer
    from spark_kafkalog.writers.batch import KafkaLogArrowWriter
    from spark_kafkalog.writers.stream import KafkaLogStreamArrowWriter

    def failing(iterator, after: int, kill: bool, options, since_ms: int):
        handed = 0
        for batch in iterator:
            if handed >= after:  # once the task's producer sent what it was handed
                wait_written(options.bootstrap_servers, options.topic, since_ms, count=handed)
                if kill:
                    os._exit(17)
                raise RuntimeError(f"test.failTaskAfterRows: failing after {handed} rows")
            handed += batch.num_rows
            yield batch

    def recorded_write(self, iterator):
        after = getattr(self, "fail_after", None)
        if after is not None:
            iterator = failing(iterator, after[0], after[1], self.options, int(time.time() * 1000))
        try:
            return super(type(self), self).write(iterator)
        except BaseException as e:
            _record(self.record_to, "task-error", None, [str(e), list(getattr(e, "__notes__", []))])
            raise

    class RecordingArrowWriter(KafkaLogArrowWriter):
        write = recorded_write

        def commit(self, messages):
            _record(self.record_to, "commit", None, messages)
            super().commit(messages)

        def abort(self, messages):
            _record(self.record_to, "abort", None, messages)
            super().abort(messages)

    class RecordingStreamWriter(KafkaLogStreamArrowWriter):
        write = recorded_write

        def _die(self, batchId):
            if getattr(self, "die_at", None) == batchId:
                raise RuntimeError(f"test.dieAtCommitOfBatch: the driver dies at micro-batch {batchId}")

        def commit(self, messages, batchId):
            _record(self.record_to, "commit", batchId, messages)
            self._die(batchId)
            super().commit(messages, batchId)

        def abort(self, messages, batchId):
            _record(self.record_to, "abort", batchId, messages)
            self._die(batchId)
            super().abort(messages, batchId)

    def split(options):
        opts = {k.lower(): v for k, v in dict(options).items()}
        die = opts.pop(DIE_OPTION, None)
        fail, kill = opts.pop(FAIL_OPTION, None), opts.pop(KILL_OPTION, None)
        fail_after = (int(fail), False) if fail is not None else (int(kill), True) if kill is not None else None
        return opts, opts.pop(RECORD_OPTION, None), None if die is None else int(die), fail_after

    class WriteTestSource(Base):
        @classmethod
        def name(cls):
            return SOURCE_NAME

        def writer(self, schema, overwrite):
            opts, record_to, _, fail_after = split(self.options)
            w = make_writer(opts, schema, overwrite)
            if record_to:
                w.__class__ = RecordingArrowWriter
                w.record_to = record_to
                w.fail_after = fail_after
            return w

        def streamWriter(self, schema, overwrite):
            opts, record_to, die_at, fail_after = split(self.options)
            w = make_stream_writer(opts, schema, overwrite)
            if record_to:
                w.__class__ = RecordingStreamWriter
                w.record_to = record_to
                w.die_at = die_at
                w.fail_after = fail_after
            return w

    return WriteTestSource


WriteTestSource = _make_source_class()


def wait_written(bootstrap: str, topic: str, since_ms: int, count: int = 1, below: int | None = None,
                 partitions: int = 3, timeout: float = 60.0) -> None:
    """In a task about to fail after handing rows on (the failure scenarios): wait (bounded)
    until the writer got ``count`` of them into ``topic``: records produced at ``since_ms``
    (epoch ms, the attempt's start) or later, read_uncommitted (a transactional writer's
    too), with ``below``: only those whose key is an id below it. RuntimeError when they
    do not arrive."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "sink-tests-wait",
                  "enable.auto.commit": False, "enable.partition.eof": False,
                  "isolation.level": "read_uncommitted", "topic.metadata.refresh.interval.ms": 500})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen = 0
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            for m in c.consume(1000, 0.2):
                if m.error() is None and m.timestamp()[1] >= since_ms \
                        and (below is None or m.key() is not None and int(m.key()) < below):
                    seen += 1
            if seen >= count:
                return
    finally:
        c.close()
    raise RuntimeError(f"{seen} of {count} rows reached {topic} within {timeout} s")


# -- reading back --------------------------------------------------------------------------

def read_topic(spark, broker, topic: str, include_headers: bool = True):
    """The topic's records through the kafkalog source (direct mode on the broker's log
    directory)."""
    return (spark.read.format("kafkalog").option("subscribe", topic)
            .option("includeHeaders", "true" if include_headers else "false")
            .load(str(broker.log_dir)))


def consume(broker, topic: str, partitions: int = 3, expect: int | None = None,
            timeout: float = 20.0, isolation: str = "read_committed") -> list[dict]:
    """Every record of ``topic`` read with confluent-kafka's Consumer (assign from offset
    0; stops once ``expect`` records arrived, or after 2 s without one); ``isolation``:
    its ``isolation.level`` (librdkafka's default, read_committed, unless told)."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "sink-tests",
                  "enable.auto.commit": False, "enable.partition.eof": False,
                  "isolation.level": isolation})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[dict] = []
    deadline = time.monotonic() + timeout
    idle_since = time.monotonic()
    try:
        while time.monotonic() < deadline:
            if expect is not None and len(out) >= expect:
                break
            msgs = c.consume(1000, 0.5)
            if not msgs:
                if expect is None and time.monotonic() - idle_since > 2.0:
                    break
                continue
            idle_since = time.monotonic()
            for m in msgs:
                if m.error():
                    raise RuntimeError(str(m.error()))
                ts_type, ts = m.timestamp()
                out.append(dict(topic=m.topic(), partition=m.partition(), offset=m.offset(),
                                key=m.key(), value=m.value(), timestamp=ts, headers=m.headers()))
    finally:
        c.close()
    return out
