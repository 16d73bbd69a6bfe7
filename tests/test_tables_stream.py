"""Exactly-once streaming exports of a topic to Iceberg and Delta tables
(``spark_kafkalog.tables.stream.export_stream``) with real Spark structured streaming,
against the real broker, read back with pyiceberg's scan and deltalake's ``QueryBuilder``.

Covered: Trigger.AvailableNow started three times (a new query each time, records
produced in between; the first run in several micro-batches with maxOffsetsPerTrigger),
for both formats: every (partition, offset) exactly once, the stored offsets are the
topic's end offsets, the table equals what the batch export makes of the same topic,
each micro-batch is reported once, and every query's checkpoint directory is deleted
once it has stopped; a start with nothing new commits nothing. A processing-time query
picks up records produced while it runs, while a batch export commits to the same table
meanwhile: no record twice. Two queries started from the same offsets at once: no
record twice. ``kafkalog export --streaming``: its lines and its summary.

Spark queries cost seconds each: few queries, several assertions each.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from spark_kafkalog.tables.job import export_table, open_target
from spark_kafkalog.tables.stream import export_stream
from tests.support.tables import check_table, create_topic, end_offsets, produce_numbered, table_rows

PARTITIONS = 3


@pytest.fixture(scope="module")
def broker(table_broker):
    return table_broker


def _topic(broker, prefix: str) -> str:
    topic = f"{prefix}-{uuid.uuid4().hex[:6]}"
    create_topic(broker, topic, PARTITIONS)
    return topic


def _run(spark, batches: list, **kwargs) -> None:
    """One streaming export to completion (Trigger.AvailableNow unless told)."""
    query = export_stream(spark, on_commit=batches.append, **kwargs)
    try:
        assert query.awaitTermination(240), "the AvailableNow query did not stop within 240 s"
    finally:
        query.stop()
    assert query.exception() is None


def _wait_gone(directory: Path) -> None:
    """The checkpoint directories under ``directory`` are deleted once their queries end
    (by a listener: a moment after ``awaitTermination`` returns)."""
    deadline = time.monotonic() + 30
    while any(directory.iterdir()):
        assert time.monotonic() < deadline, f"checkpoints left: {sorted(p.name for p in directory.iterdir())}"
        time.sleep(0.05)  # scenario: the listener bus delivers the query's termination


@pytest.mark.parametrize("fmt", ["iceberg", "delta"])
def test_available_now_restarts_are_exactly_once(spark, broker, tmp_path, fmt):
    topic = _topic(broker, f"stream-{fmt}")
    table = str(tmp_path / "table")
    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    args = {"topic": topic, "table": table, "fmt": fmt, "bootstrap_servers": broker.bootstrap,
            "checkpoint_location": str(checkpoints)}
    produce_numbered(broker, topic, 0, 900)

    first: list = []
    _run(spark, first, max_offsets_per_trigger=400, **args)
    committed = [b for b in first if b.committed]
    # about 400 records per micro-batch: at least three batches for 900 records
    assert len(committed) >= 3 and sum(b.records for b in committed) == 900
    assert all(b.records <= 400 + PARTITIONS for b in committed)
    assert len({b.version for b in committed}) == len(committed)
    assert committed[-1].offsets_after.next_offsets == end_offsets(broker, topic)
    check_table(fmt, table, topic, broker)
    _wait_gone(checkpoints)

    produce_numbered(broker, topic, 900, 150)
    second: list = []
    _run(spark, second, **args)
    assert sum(b.records for b in second) == 150
    produce_numbered(broker, topic, 1050, 60)
    third: list = []
    _run(spark, third, **args)
    assert sum(b.records for b in third) == 60
    rows = check_table(fmt, table, topic, broker)
    assert rows.num_rows == 1110
    _wait_gone(checkpoints)

    # nothing new: a new start commits nothing
    version = open_target(fmt, table, topic=topic).load().version
    fourth: list = []
    _run(spark, fourth, **args)
    assert not any(b.committed for b in fourth) and open_target(fmt, table, topic=topic).load().version == version

    # the batch export of the same topic makes the same table
    batch_table = str(tmp_path / "batch")
    result = export_table(spark, topic=topic, table=batch_table, fmt=fmt, bootstrap_servers=broker.bootstrap)
    assert result.records == rows.num_rows
    assert result.offsets_after == open_target(fmt, table, topic=topic).load().offsets
    batch_rows = table_rows(fmt, batch_table, topic)
    assert sorted(zip(batch_rows.column("partition").to_pylist(), batch_rows.column("offset").to_pylist(),
                      batch_rows.column("value").to_pylist(), strict=True)) == \
        sorted(zip(rows.column("partition").to_pylist(), rows.column("offset").to_pylist(),
                   rows.column("value").to_pylist(), strict=True))
    assert rows.column_names == batch_rows.column_names


def test_a_running_query_and_a_batch_export_hold_every_record_once(spark, broker, tmp_path):
    """A processing-time query picks up records produced while it runs; a batch export
    commits to the same table meanwhile: whichever commits second drops what the other
    committed. The session's time zone is spelled Etc/UTC here (a machine's usual
    default): the tasks relabel the timestamps UTC, with records without headers."""
    topic = _topic(broker, "stream-running")
    table = str(tmp_path / "table")
    produce_numbered(broker, topic, 0, 300)
    batches: list = []
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "Etc/UTC")
    query = export_stream(spark, topic=topic, table=table, fmt="iceberg", bootstrap_servers=broker.bootstrap,
                          trigger="1 second", on_commit=batches.append)
    try:
        produce_numbered(broker, topic, 300, 200)
        batch = export_table(spark, topic=topic, table=table, fmt="iceberg", bootstrap_servers=broker.bootstrap)
        produce_numbered(broker, topic, 500, 100)
        ends = end_offsets(broker, topic)
        target = open_target("iceberg", table, topic=topic)
        deadline = time.monotonic() + 120
        while (target.load().offsets or None) is None or dict(target.load().offsets.next_offsets) != ends:
            assert query.isActive, query.exception()
            assert time.monotonic() < deadline, f"the table holds {target.load().offsets}, not {ends}"
            time.sleep(0.2)  # scenario: the query's next micro-batches reach the end offsets
    finally:
        query.stop()
        spark.conf.set("spark.sql.session.timeZone", zone)
    assert query.exception() is None
    rows = check_table("iceberg", table, topic, broker)
    assert rows.num_rows == 600
    # what the query committed and what the batch export committed: each record once
    assert sum(b.records for b in batches) + batch.records == 600
    assert any(b.committed for b in batches)


def test_two_queries_from_the_same_offsets_hold_every_record_once(spark, broker, tmp_path):
    topic = _topic(broker, "stream-twice")
    table = str(tmp_path / "table")
    produce_numbered(broker, topic, 0, 200)
    args = {"topic": topic, "table": table, "fmt": "delta", "bootstrap_servers": broker.bootstrap}
    _run(spark, [], **args)
    produce_numbered(broker, topic, 200, 400)
    batches: list = []
    queries = [export_stream(spark, on_commit=batches.append, max_offsets_per_trigger=150, **args)
               for _ in range(2)]
    try:
        for q in queries:
            assert q.awaitTermination(240)
    finally:
        for q in queries:
            q.stop()
    assert [q.exception() for q in queries] == [None, None]
    rows = check_table("delta", table, topic, broker)
    assert rows.num_rows == 600
    assert sum(b.records for b in batches) == 400


def test_the_kafkalog_export_command_streaming(spark, broker, tmp_path, capsys):
    """``kafkalog export --format delta --table ... --streaming`` (Trigger.AvailableNow, in
    this process: the command uses the active session): one line per committed
    micro-batch, then the summary."""
    from spark_kafkalog.cli.main import main

    topic = _topic(broker, "stream-cli")
    produce_numbered(broker, topic, 0, 300)
    table = str(tmp_path / "delta")
    args = ["export", "--topic", topic, "--format", "delta", "--table", table, "--bootstrap-servers",
            broker.bootstrap, "--no-progress", "--streaming", "--max-offsets-per-trigger", "200"]
    assert main(args) == 0
    out = capsys.readouterr().out.splitlines()
    lines = [line for line in out if line.startswith("Micro-batch")]
    assert len(lines) >= 2 and all("version" in line for line in lines), out
    assert out[-1].startswith("Streamed 300 records of " + topic), out
    check_table("delta", table, topic, broker)
    assert main([*args, "--trigger", "sometimes"]) != 0
    assert "trigger" in capsys.readouterr().err
