"""Shared fixtures and helpers of the Spark tests (``test_spark_*.py``).

Owns: one local SparkSession for the whole test session (local[2], 2 shuffle partitions,
Arrow on, UI off, code generation off: ``SESSION_CONF``; Python workers = this
interpreter, the repository on the workers' PYTHONPATH so that pyspark discovers
``pyspark_kafkalog`` as an installed package would be), a context manager to set
``spark.sql.python.filterPushdown.enabled`` for one test, and ``LogWriter``, which
writes realistic Kafka log directories with the broker's own ``UnifiedLog`` (every codec,
keys, nulls, headers, LogAppendTime, transactions with markers, several segments).

The ``spark`` fixture reaches every test through ``tests/conftest.py``; helpers are
imported: ``from tests.support.spark import LogWriter, get_spark, pushdown``.

Invariants: the session is created once (``getOrCreate``) however many modules import
the fixture; the pushdown setting is restored after each use.

Thread-safety: test-process only.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"

# The settings of the suite's sessions (this one, and the sink tests' session with task
# retries). Code generation is off: Spark would generate and compile (Janino) the code of
# each query's stages and projections, the largest CPU cost of the many small queries the
# tests run (12-18 percent of a Spark test file's CPU); its interpreted path computes the
# same rows. The scripts, notebooks and Spark Connect jobs the suite runs keep Spark's
# defaults, code generation included.
SESSION_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "1g",
    PUSHDOWN_CONF: "false",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}

_session = None


def get_spark():
    """The test session's SparkSession (created on first use)."""
    global _session
    if _session is None:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        paths = [str(REPO)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
        from pyspark.sql import SparkSession
        builder = SparkSession.builder.master("local[2]").appName("spark-kafkalog-tests")
        for key, value in SESSION_CONF.items():
            builder = builder.config(key, value)
        _session = builder.getOrCreate()
        _session.sparkContext.setLogLevel("ERROR")
    return _session


@pytest.fixture
def spark():
    """The current test session (function scope on purpose: the sink tests may replace the
    local[2] session by one with task retries, and a cached value would be a stopped one)."""
    return get_spark()


@contextlib.contextmanager
def pushdown(spark, enabled: bool):
    """Run a block with filter pushdown on or off."""
    before = spark.conf.get(PUSHDOWN_CONF, "false")
    spark.conf.set(PUSHDOWN_CONF, "true" if enabled else "false")
    try:
        yield
    finally:
        spark.conf.set(PUSHDOWN_CONF, before)


class LogWriter:
    """Writes partition logs under ``root`` with the broker's ``UnifiedLog`` and remembers
    what it wrote, as the rows the source must return: (key, value, topic, partition,
    offset, timestamp ms, timestampType, headers or None)."""

    def __init__(self, root: Path, **config) -> None:
        from broker.log.config import LogConfig
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.props = {"segment.bytes": 4096, "index.interval.bytes": 256,
                      "message.timestamp.after.max.ms": 2**62}
        self.props.update({k.replace("_", "."): v for k, v in config.items()})
        self.config = LogConfig.from_props(self.props)
        self.logs = {}
        self.rows: list[tuple] = []
        self._sequences: dict[int, int] = {}

    def log(self, topic: str, partition: int, **config):
        key = (topic, partition)
        if key not in self.logs:
            from broker.log.config import LogConfig
            from broker.log.unified_log import UnifiedLog
            props = dict(self.props, **{k.replace("_", "."): v for k, v in config.items()})
            cfg = LogConfig.from_props(props)
            self.logs[key] = UnifiedLog.create(self.root / f"{topic}-{partition}", cfg)
        return self.logs[key]

    def append(self, topic: str, partition: int, records: Sequence[tuple], *, compression: int = 0,
               producer_id: int = -1, transactional: bool = False, keep: bool = True) -> tuple[int, int]:
        """Append one batch of (key, value, timestamp[, headers]) records; returns (first,
        last) offset. ``keep=False``: the rows are not expected (an aborted transaction).
        A topic created with message_timestamp_type="LogAppendTime" gets the broker's time."""
        from broker.record.batch import encode_batch
        ulog = self.log(topic, partition)
        kwargs = {}
        if producer_id >= 0:
            seq = self._sequences.get(producer_id, 0)
            kwargs = dict(producer_id=producer_id, producer_epoch=0, base_sequence=seq,
                          is_transactional=transactional)
            self._sequences[producer_id] = seq + len(records)
        info = ulog.append_as_leader(encode_batch(records, compression=compression, **kwargs))
        if keep:
            lat = info.log_append_time >= 0
            for i, rec in enumerate(records):
                headers = rec[3] if len(rec) > 3 and rec[3] else None
                self.rows.append((rec[0], rec[1], topic, partition, info.first_offset + i,
                                  info.log_append_time if lat else rec[2], 1 if lat else 0,
                                  [tuple(h) for h in headers] if headers else None))
        return info.first_offset, info.last_offset

    def end_txn(self, topic: str, partition: int, producer_id: int, commit: bool, timestamp: int = 0) -> int:
        from broker.log.validator import AppendOrigin
        from broker.record.control import ControlRecordType, encode_end_txn_marker_batch
        kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
        batch = encode_end_txn_marker_batch(kind, producer_id=producer_id, producer_epoch=0,
                                            coordinator_epoch=0, timestamp=timestamp)
        info = self.log(topic, partition).append_as_leader(batch, origin=AppendOrigin.COORDINATOR)
        return info.first_offset

    def close(self) -> None:
        for ulog in self.logs.values():
            ulog.close()
        self.logs.clear()

    def expected(self, topics: Iterable[str] | None = None, include_headers: bool = False,
                 start: int = 0) -> list[tuple]:
        """Expected rows (Spark's row order: by topic, partition, offset), timestamps as
        UTC datetimes."""
        import datetime as dt
        epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
        out = []
        for row in sorted(self.rows, key=lambda r: (r[2], r[3], r[4])):
            if topics is not None and row[2] not in topics or row[4] < start:
                continue
            ts = epoch + dt.timedelta(milliseconds=row[5])
            base = (row[0], row[1], row[2], row[3], row[4], ts, row[6])
            out.append(base + (row[7],) if include_headers else base)
        return out
