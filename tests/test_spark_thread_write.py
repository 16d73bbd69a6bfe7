"""Writes to the ``kafkalog`` sink from a thread other than the one that created the
SparkSession (spark_kafkalog/jobs/session.py's ``activate_session``; docs/spark/writing.md,
"Writing from another thread"), with real Spark (the suite's local session) and the real
broker subprocess.

Covers: pyspark's own behaviour, a ``df.write.format("kafkalog").save()`` from a plain
thread failing with DATA_SOURCE_NOT_FOUND although the source is registered (a pyspark that
fixes it fails this test, which then says which notes to drop); the same write, and a
streaming query's start, succeeding in a thread once ``activate_session`` ran, the records
read back; and the project's own jobs run from a non-main thread: ``job_session`` reuses the
running session (never stops it) and activates it, ``kafkalog export`` and the main
pipeline (``pipeline.run``) complete, and the caller's session is still up afterwards.
"""

from __future__ import annotations

import io
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import spark_kafkalog
from spark_kafkalog.jobs.session import activate_session

ROWS = [(f"k{i}", f"v{i}") for i in range(20)]


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def in_thread(fn: Callable[[], Any], timeout: float = 240.0) -> tuple[Any, BaseException | None]:
    """Run ``fn`` on a new plain thread; its result or the exception it raised."""
    out: dict[str, Any] = {}

    def body() -> None:
        try:
            out["result"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out["error"] = exc

    thread = threading.Thread(target=body, name="kafkalog-test-writer")
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), "the thread did not finish"
    return out.get("result"), out.get("error")


def _frame(spark):
    """Built on the calling thread: ``createDataFrame`` makes its thread's session active as
    a side effect, which would hide the behaviour under test if the writing thread ran it."""
    return spark.createDataFrame(ROWS, "key STRING, value STRING")


def _write(df, bootstrap: str, topic: str) -> None:
    (df.write.format("kafkalog").mode("append")
       .option("kafka.bootstrap.servers", bootstrap).option("topic", topic).save())


def _read_back(spark, bootstrap: str, topic: str) -> list[tuple[str, str]]:
    rows = (spark.read.format("kafkalog").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).load()
            .selectExpr("CAST(key AS STRING) AS k", "CAST(value AS STRING) AS v").collect())
    return sorted((r.k, r.v) for r in rows)


@pytest.fixture
def session(spark):
    """The suite's session with ``kafkalog`` registered as the project does."""
    spark_kafkalog.register(spark)
    return spark


def test_pyspark_fails_a_write_from_a_thread_without_an_active_session(session, kafka_broker):
    """pyspark's behaviour, which the workaround exists for. If this test fails because the
    write succeeded, pyspark fixed it: drop the workaround notes (see the message)."""
    topic = _topic("thread-plain")
    df = _frame(session)

    def write() -> bool:
        from pyspark.sql import SparkSession
        had_active = SparkSession.getActiveSession() is not None
        _write(df, kafka_broker.bootstrap, topic)
        return had_active

    had_active, error = in_thread(write)
    if error is None:
        import pyspark
        pytest.fail(
            f"pyspark {pyspark.__version__} now writes to a Python data source from a thread "
            f"without an active session (the thread had one: {had_active}). The workaround is "
            "no longer needed: drop the 'Writing from another thread' section of "
            "docs/spark/writing.md, its line in docs/spark/index.md and in the sink's manual "
            "(spark_kafkalog/writers/__init__.py), and this test; activate_session may stay.")
    assert "DATA_SOURCE_NOT_FOUND" in str(error), str(error)[:2000]
    # reads are not affected, and the main thread still writes
    assert in_thread(lambda: _read_back(session, kafka_broker.bootstrap, topic))[1] is None
    _write(df, kafka_broker.bootstrap, topic)
    assert _read_back(session, kafka_broker.bootstrap, topic) == sorted(ROWS)


def test_activate_session_makes_writes_from_a_thread_work(session, kafka_broker, tmp_path: Path):
    topic = _topic("thread-batch")
    stream_topic = _topic("thread-stream")
    df = _frame(session)

    def write() -> None:
        activate_session(session)
        activate_session(session)   # idempotent
        _write(df, kafka_broker.bootstrap, topic)
        # a streaming query's start() looks its sink up the same way
        query = (session.readStream.format("kafkalog")
                 .option("kafka.bootstrap.servers", kafka_broker.bootstrap)
                 .option("subscribe", topic).option("startingOffsets", "earliest").load()
                 .selectExpr("key", "upper(CAST(value AS STRING)) AS value")
                 .writeStream.format("kafkalog")
                 .option("kafka.bootstrap.servers", kafka_broker.bootstrap)
                 .option("topic", stream_topic)
                 .option("checkpointLocation", str(tmp_path / "checkpoint"))
                 .trigger(availableNow=True).start())
        query.awaitTermination(120)

    error = in_thread(write)[1]
    assert error is None, str(error)[:2000]
    assert _read_back(session, kafka_broker.bootstrap, topic) == sorted(ROWS)
    assert _read_back(session, kafka_broker.bootstrap, stream_topic) == sorted(
        (k, v.upper()) for k, v in ROWS)


def test_job_session_in_a_thread_reuses_and_activates_the_running_session(session, kafka_broker):
    from spark_kafkalog.jobs.session import job_session
    topic = _topic("thread-job")
    df = _frame(session)

    def job() -> tuple[Any, bool]:
        js = job_session("kafkalog-thread-test")
        try:
            _write(df, kafka_broker.bootstrap, topic)
        finally:
            js.stop()
        return js.spark, js.owned

    result, error = in_thread(job)
    assert error is None, str(error)[:2000]
    spark, owned = result
    assert spark is session and not owned
    assert session.sparkContext._jsc is not None   # not stopped by the job
    assert _read_back(session, kafka_broker.bootstrap, topic) == sorted(ROWS)


def test_export_command_from_a_thread(session, kafka_broker, tmp_path: Path, capsys):
    from spark_kafkalog.cli.main import main

    topic = _topic("thread-export")
    _write(_frame(session), kafka_broker.bootstrap, topic)
    out = tmp_path / "out"
    code, error = in_thread(lambda: main(["export", "--topic", topic, "--format", "json",
                                          "--bootstrap-servers", kafka_broker.bootstrap,
                                          "--output", str(out), "--no-progress"]))
    assert error is None and code == 0, (error, capsys.readouterr().err[-2000:])
    assert capsys.readouterr().out.startswith(f"Exported {len(ROWS)} records")
    assert session.sparkContext._jsc is not None
    lines = [line for f in out.glob("part-*.json") for line in f.read_text().splitlines()]
    assert len(lines) == len(ROWS)


def test_pipeline_from_a_thread(session, kafka_broker, tmp_path: Path):
    """The main job writes with df.write and df.writeStream: from a thread it still works."""
    from spark_kafkalog.jobs import pipeline

    suffix = uuid.uuid4().hex[:8]
    args = pipeline.parse_args([
        "--bootstrap-servers", kafka_broker.bootstrap, "--data-dir", str(tmp_path / "data"),
        "--events", "400", "--partitions", "2", "--seed", "5",
        "--input-topic", f"clicks-{suffix}", "--stats-topic", f"stats-{suffix}",
        "--purchases-topic", f"purchases-{suffix}"])
    summary, error = in_thread(lambda: pipeline.run(args, out=io.StringIO()))
    assert error is None, str(error)[:2000]
    assert summary.produced.records == 400 and summary.batch_read.records == 400
    assert summary.stats_written > 0 and summary.stream_rows == 400
    assert summary.output_ends[f"stats-{suffix}"] == summary.stats_written
    assert summary.output_ends[f"purchases-{suffix}"] == summary.stream_written
    assert session.sparkContext._jsc is not None   # the caller's session is left running
