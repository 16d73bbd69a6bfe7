"""Tests of ``kafkalog export`` (spark_kafkalog/cli/export_cmd.py) and the export job
(spark_kafkalog/jobs/export.py), with the real broker subprocess and real Spark.

Records produced with the project's producer (null, empty and non-UTF-8 keys and values,
text with quotes, commas, line breaks and edge spaces, headers with null values) to a
two-partition topic are exported in network mode and in direct mode (the broker's own
log directory) to Parquet, JSON and CSV, read back with pyarrow, json and csv, and
compared field by field with what was produced: keys, values, partitions, offsets,
timestamps, headers, under each binary encoding. Also: offset bounds, an empty topic,
output modes, the per-partition counts (task metrics vs reading the files back), the
progress reports, the one-line errors (before Spark: arguments, unknown topics, an
unreachable broker, an existing output; from Spark: a Java and a Python failure), the
console script in a subprocess and the same job through spark-submit.

The Spark jobs run in the shared local[2] test session; only two subprocesses start a
JVM of their own.
"""

from __future__ import annotations

import base64
import csv
import datetime as dt
import io
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from broker.tools.common import OffsetProgress, offset_progress  # noqa: E402
from spark_kafkalog.cli.main import main  # noqa: E402
from spark_kafkalog.jobs.export import ExportError, count_records_in_files, export, plan_export, run_export  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
T0 = 1_700_000_000_000
N = 60
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _key(i: int):
    if i % 7 == 0:
        return None
    if i % 13 == 1:
        return b""
    if i % 10 == 3:
        return b"\xff\xfek\x00" + bytes([i])          # not UTF-8
    return f"key-{i}".encode()


def _value(i: int):
    if i % 11 == 0:
        return None
    if i % 17 == 2:
        return b""
    if i % 9 == 4:
        return b"\x80\x81binary" + bytes([i, 0xC3])   # not UTF-8
    texts = ['plain', 'with "quotes", commas', 'two\nlines\r\nand more', '  edge spaces  ',
             'caf\u00e9 \u2603 \U0001F600', '{"json": [1, 2]}']
    return f"{texts[i % len(texts)]} #{i}".encode()


def _headers(i: int):
    if i % 3:
        return None
    return [("h", f"v{i}".encode()), ("null", None), ("bin", b"\xfe\x00")]


@pytest.fixture(scope="module")
def topics(kafka_broker):
    """(broker, topic, empty topic, rows): rows are (key, value, partition, offset,
    timestamp ms, headers) of every record produced, in (partition, offset) order."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from broker.client.producer.producer import KafkaProducer

    suffix = uuid.uuid4().hex[:6]
    topic, empty = f"export-{suffix}", f"export-empty-{suffix}"
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    for f in admin.create_topics([NewTopic(topic, num_partitions=2),
                                  NewTopic(empty, num_partitions=1)]).values():
        f.result(30)
    with KafkaProducer({"bootstrap.servers": kafka_broker.bootstrap, "linger.ms": 5}) as producer:
        futures = [(i, producer.send(topic, value=_value(i), key=_key(i), partition=i % 2,
                                     timestamp_ms=T0 + i, headers=_headers(i)))
                   for i in range(N)]
        producer.flush(30)
        rows = []
        for i, future in futures:
            md = future.get(30)
            rows.append((_key(i), _value(i), md.partition, md.offset, T0 + i, _headers(i)))
    rows.sort(key=lambda r: (r[2], r[3]))
    assert [r[3] for r in rows if r[2] == 0] == list(range(N // 2))
    return kafka_broker, topic, empty, rows


def _ms(value) -> int:
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return (value - EPOCH) // dt.timedelta(milliseconds=1)


def _decode(data, encoding: str):
    if data is None:
        return None
    if encoding == "utf8":
        return data.decode("utf-8", "replace")
    if encoding == "base64":
        return base64.b64encode(data).decode()
    return data.hex()


def _expected(rows, encoding: str | None, headers: bool = True, csv_headers: bool = False):
    out = []
    for key, value, partition, offset, ts, hdrs in rows:
        enc = (lambda b: b) if encoding is None else (lambda b: _decode(b, encoding))
        row = (enc(key), enc(value), partition, offset, ts)
        if headers:
            h = None if hdrs is None else [{"key": k, "value": enc(v)} for k, v in hdrs]
            row += (json.dumps(h, separators=(",", ":")) if csv_headers and h is not None else h,)
        out.append(row)
    return out


def _json_rows(files, topic):
    out = []
    for path in files:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            obj = json.loads(line)
            assert obj["topic"] == topic and obj["timestampType"] == 0
            assert set(obj) >= {"key", "value", "topic", "partition", "offset", "timestamp",
                                "timestampType"}   # nulls are written, not left out
            out.append((obj["key"], obj["value"], obj["partition"], obj["offset"],
                        _ms(obj["timestamp"])) + ((obj["headers"],) if "headers" in obj else ()))
    return sorted(out, key=lambda r: (r[2], r[3]))


def _csv_rows(files, topic):
    out = []
    for path in files:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            for rec in reader:
                assert rec["topic"] == topic and rec["timestampType"] == "0"
                row = (rec["key"], rec["value"], int(rec["partition"]), int(rec["offset"]),
                       _ms(rec["timestamp"]))
                if "headers" in rec:
                    row += (rec["headers"] or None,)
                out.append(row)
    return sorted(out, key=lambda r: (r[2], r[3]))


def _check_result(result, rows, topic, spark, fmt):
    counts = {(topic, p): sum(1 for r in rows if r[2] == p) for p in (0, 1)}
    assert result.records == len(rows) and result.partitions == counts
    assert result.counts_from == "task metrics"
    assert result.files and all(Path(f).is_file() for f in result.files)
    assert result.bytes == sum(Path(f).stat().st_size for f in result.files)
    # the fallback count (reading the files back) agrees with the task metrics
    assert count_records_in_files(spark, fmt, result.files) == {k: v for k, v in counts.items() if v}


# --- exports, read back and compared ---

def test_parquet_network_mode_keeps_bytes_and_reports_progress(spark, topics, tmp_path):
    import pyarrow.parquet as pq

    broker, topic, _, rows = topics
    reports = []
    result = export(spark, topics=topic, fmt="parquet", output=str(tmp_path / "out"),
                    bootstrap_servers=broker.bootstrap, include_headers=True,
                    options={"minPartitions": "4"}, progress=lambda d, t: reports.append((d, t)))
    table = pq.read_table(tmp_path / "out")
    assert table.column_names == ["key", "value", "topic", "partition", "offset", "timestamp",
                                  "timestampType", "headers"]
    got = sorted(((r["key"], r["value"], r["partition"], r["offset"], _ms(r["timestamp"]),
                   None if r["headers"] is None else [{"key": h["key"], "value": h["value"]}
                                                      for h in r["headers"]])
                  for r in table.to_pylist()), key=lambda r: (r[2], r[3]))
    assert got == _expected(rows, None)
    assert {r["topic"] for r in table.to_pylist()} == {topic}
    _check_result(result, rows, topic, spark, "parquet")
    assert result.tasks == 4 and result.offsets == N and len(result.files) == 4
    # progress: offsets of finished tasks, never backwards, ending at (total, total)
    assert reports and reports[-1] == (N, N)
    assert all(t == N for _, t in reports)
    assert [d for d, _ in reports] == sorted(d for d, _ in reports)
    assert {d for d, _ in reports} <= {0, 15, 30, 45, 60}  # whole tasks of 15 offsets
    assert [(r.topic, r.partition, r.start, r.end) for r in result.ranges] == [
        (topic, 0, 0, N // 2), (topic, 1, 0, N // 2)]


def test_json_direct_mode_base64_is_exact(spark, topics, tmp_path):
    broker, topic, _, rows = topics
    result = export(spark, topics=[topic], fmt="json", output=str(tmp_path / "out"),
                    path=str(broker.log_dir), include_headers=True, binary_encoding="base64")
    assert _json_rows(result.files, topic) == _expected(rows, "base64")
    _check_result(result, rows, topic, spark, "json")
    assert result.tasks == 2  # small: one task per partition


def test_csv_default_utf8_with_headers(spark, topics, tmp_path):
    broker, topic, _, rows = topics
    result = export(spark, topics=topic, fmt="csv", output=str(tmp_path / "out"),
                    path=str(broker.log_dir), include_headers=True)
    got = _csv_rows(result.files, topic)
    want = _expected(rows, "utf8", csv_headers=True)
    # the csv module reads a null and an empty string alike ("" vs nothing): compare with
    # nulls as "" here, and check the distinction on the raw text below
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g[:5] == tuple("" if x is None else x for x in w[:5])
        assert (json.loads(g[5]) if g[5] else None) == (json.loads(w[5]) if w[5] else None)
    text = "".join(Path(f).read_text(encoding="utf-8") for f in result.files)
    assert text.splitlines()[0] == "key,value,topic,partition,offset,timestamp,timestampType,headers"
    null_key_empty_value = [r for r in rows if r[0] is None and r[1] == b""]
    empty_key_null_value = [r for r in rows if r[0] == b"" and r[1] is None]
    for r in null_key_empty_value:
        assert f'\n,"",{topic},{r[2]},{r[3]},' in text
    for r in empty_key_null_value:
        assert f'\n"",,{topic},{r[2]},{r[3]},' in text
    assert '"with ""quotes"", commas #' in text and "  edge spaces  " in text
    assert "\ufffd" in text  # invalid UTF-8 became U+FFFD, as Python's errors="replace"
    _check_result(result, rows, topic, spark, "csv")


def test_hex_encoding_and_offset_bounds(spark, topics, tmp_path):
    broker, topic, _, rows = topics
    start = {topic: {"0": 2, "1": -2}}
    end = {topic: {"0": 5, "1": 3}}
    result = export(spark, topics=topic, fmt="json", output=str(tmp_path / "out"),
                    bootstrap_servers=broker.bootstrap, starting_offsets=json.dumps(start),
                    ending_offsets=end, binary_encoding="hex")
    wanted = [r for r in rows if (r[2] == 0 and 2 <= r[3] < 5) or (r[2] == 1 and r[3] < 3)]
    assert _json_rows(result.files, topic) == _expected(wanted, "hex", headers=False)
    assert result.records == result.offsets == 6
    assert result.partitions == {(topic, 0): 3, (topic, 1): 3}


def test_empty_topic_writes_an_empty_dataset(spark, topics, tmp_path):
    import pyarrow.parquet as pq

    broker, _, empty, _ = topics
    reports = []
    result = export(spark, topics=empty, fmt="parquet", output=str(tmp_path / "out"),
                    bootstrap_servers=broker.bootstrap, progress=lambda d, t: reports.append((d, t)))
    assert result.records == 0 and result.offsets == 0 and result.tasks == 0
    assert result.partitions == {(empty, 0): 0}
    assert (tmp_path / "out" / "_SUCCESS").exists()
    table = pq.read_table(tmp_path / "out")
    assert table.num_rows == 0
    assert table.column_names == ["key", "value", "topic", "partition", "offset", "timestamp",
                                  "timestampType"]
    assert reports == [(0, 0)]
    assert "Exported 0 records" in result.summary()


def test_output_modes(spark, topics, tmp_path):
    broker, topic, _, rows = topics
    out = str(tmp_path / "out")
    two = {topic: {"0": 1, "1": 1}}
    first = export(spark, topics=topic, fmt="csv", output=out, path=str(broker.log_dir),
                   ending_offsets={topic: {"0": 1, "1": 0}})
    assert first.records == 1
    with pytest.raises(ExportError, match=r"already exists \(use mode overwrite or append\)$"):
        export(spark, topics=topic, fmt="csv", output=out, path=str(broker.log_dir))
    appended = export(spark, topics=topic, fmt="csv", output=out, path=str(broker.log_dir),
                      starting_offsets=two, ending_offsets={topic: {"0": 3, "1": 3}},
                      mode="append")
    assert appended.records == 4 and not set(appended.files) & set(first.files)
    assert len(_csv_rows(first.files + appended.files, topic)) == 5
    assert {r[3] for r in _csv_rows(appended.files, topic)} == {1, 2}
    replaced = export(spark, topics=topic, fmt="csv", output=out, path=str(broker.log_dir),
                      mode="overwrite")
    assert replaced.records == N
    assert sorted(str(p) for p in Path(out).glob("part-*")) == sorted(replaced.files)


# --- errors ---

def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["export", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("kafkalog export: error: ")
    return lines[0]


def test_errors_before_spark_are_one_line(topics, tmp_path, capsys):
    broker, topic, _, _ = topics
    out = str(tmp_path / "out")
    cases = [
        (["--topic", topic, "--format", "csv", "--output", out],
         "give --bootstrap-servers (network mode), --path (direct mode), or both (stitched mode"),
        (["--topic", topic, "--format", "csv", "--output", out, "--path", str(tmp_path / "gone"),
          "--bootstrap-servers", broker.bootstrap],  # stitched: the remote storage must exist
         f"log directory {tmp_path / 'gone'} does not exist or is not a directory"),
        (["--topic", "nope-" + topic, "--format", "csv", "--output", out,
          "--bootstrap-server", broker.bootstrap],
         f"topic nope-{topic} does not exist in the Kafka cluster at {broker.bootstrap}"),
        (["--topic", f"{topic},nope-{topic}", "--format", "json", "--output", out,
          "--path", str(broker.log_dir)],
         f"topic nope-{topic} does not exist in"),
        (["--topic", topic, "--format", "csv", "--output", out, "--path", str(tmp_path / "none")],
         f"log directory {tmp_path / 'none'} does not exist or is not a directory"),
        (["--topic", topic, "--format", "csv", "--output", str(tmp_path), "--path",
          str(broker.log_dir)],
         f"--output {tmp_path} already exists: use --mode overwrite or --mode append"),
        (["--topic", topic, "--format", "csv", "--output", out, "--path", str(broker.log_dir),
          "--ending-offsets", "{bad json"],
         "endingOffsets: '{bad json' is not valid; use latest or a JSON object"),
        (["--topic", topic, "--format", "csv", "--output", out, "--path", str(broker.log_dir),
          "--starting-offsets", "latest"],
         "starting offset can't be latest for batch queries on Kafka"),
        (["--topic", topic, "--format", "csv", "--output", out, "--path", str(broker.log_dir),
          "--option", "subscribe=other"],
         "option 'subscribe' is set by the export's topics argument"),
        (["--topic", topic, "--format", "csv", "--output", out, "--path", str(broker.log_dir),
          "--option", "noSuchOption=1"],
         "Unknown option 'noSuchOption' for the kafkalog source"),
        (["--topic", topic, "--format", "xml", "--output", out, "--path", str(broker.log_dir)],
         "argument --format: invalid choice: 'xml'"),
        (["--topic", topic, "--format", "csv", "--output", out, "--bootstrap-servers",
          "127.0.0.1:1", "--option", "kafka.default.api.timeout.ms=1000"],
         "no broker of 127.0.0.1:1 reachable (connection refused); waited 1000 ms "
         "(kafka.default.api.timeout.ms)"),
    ]
    for args, message in cases:
        code, stdout, err = run_cli(capsys, *args)
        assert code == 1 and stdout == "", args
        assert message in _one_error_line(err), (message, err)
    assert not Path(out).exists()


def test_spark_failures_are_one_line(spark, topics, tmp_path):
    from confluent_kafka import Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    broker, topic, _, _ = topics
    # a Java failure: the output's parent is a file
    (tmp_path / "file").write_text("x")
    with pytest.raises(ExportError) as info:
        export(spark, topics=topic, fmt="parquet", output=str(tmp_path / "file" / "out"),
               path=str(broker.log_dir))
    message = str(info.value)
    assert message.startswith("ParentNotDirectoryException: ") and "\n" not in message
    assert "at org.apache" not in message

    # a Python failure on the Spark side: records deleted between planning and reading
    lossy = f"export-loss-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic(lossy, num_partitions=1)]).values():
        f.result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(10):
        producer.produce(lossy, value=b"v%d" % i, partition=0)
        producer.flush(10)
    plan = plan_export(lossy, bootstrap_servers=broker.bootstrap)
    assert plan.total_offsets == 10
    for f in admin.delete_records([TopicPartition(lossy, 0, 4)]).values():
        f.result(30)
    with pytest.raises(ExportError) as info:
        run_export(spark, plan, fmt="json", output=str(tmp_path / "lossy"))
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    assert message.startswith("KafkaDataLossError: "), message
    assert f"offset [0, 4) for topic partition {lossy}-0" in message


# --- progress bar policy ---

def test_offset_progress_policy_and_updates():
    # not a terminal (pytest captures stderr): no bar, whatever the total
    assert not offset_progress(10**9, "x").enabled
    assert offset_progress(5, "x", enabled=True, file=io.StringIO()).enabled
    assert not offset_progress(0, "x", enabled=False).enabled
    bar = OffsetProgress(100, "x", enabled=True, file=io.StringIO())
    with bar:
        bar.update(40, 100)
        bar.update(30, 100)   # never backwards
        assert bar.done == 40
        bar.update(100, 100)
    assert bar.done == 100


# --- the command end to end ---

def test_command_prints_one_summary_paragraph(spark, topics, tmp_path, capsys):
    """``kafkalog export`` in-process: the active (test) session is used as it is."""
    broker, topic, _, rows = topics
    out = tmp_path / "out"
    code, stdout, err = run_cli(capsys, "--topic", topic, "--format", "json", "--bootstrap-servers",
                                broker.bootstrap, "--output", str(out), "--include-headers",
                                "--partitions", "4")
    assert code == 0 and err == ""
    assert stdout.count("\n") == 1
    assert stdout.startswith(f"Exported {N} records ({N} offsets) from 2 partitions of topic "
                             f"{topic} ({topic}-0: {N // 2}, {topic}-1: {N // 2}) to {out} "
                             "as json: 4 files, ")
    assert "written by 4 Spark tasks in " in stdout
    files = sorted(str(p) for p in out.glob("part-*.json"))
    assert len(files) == 4
    assert _json_rows(files, topic) == _expected(rows, "utf8")
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None  # restored


def _quiet(stderr: str) -> None:
    """Nothing on stderr but the JVM's own notice: no Spark log line, no stack trace."""
    # the JVM's own notices ("WARNING: Using incubator modules", "Picked up ...") may stay
    lines = [line for line in stderr.splitlines()
             if line.strip() and not line.startswith(("WARNING: ", "Picked up "))]
    assert lines == [], stderr[-3000:]


def test_job_file_runs_as_a_script(topics, tmp_path):
    """``python spark_kafkalog/cli/export_cmd.py`` is the entry point spark-submit runs
    (``spark-submit spark_kafkalog/cli/export_cmd.py ...``; same main, same arguments), here
    without spark-submit's extra JVM start-up: it builds its own quiet local session."""
    broker, topic, _, rows = topics
    out = tmp_path / "out"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    proc = subprocess.run(
        [sys.executable, str(REPO / "spark_kafkalog" / "cli" / "export_cmd.py"), "--topic", topic,
         "--format", "csv", "--path", str(broker.log_dir), "--output", str(out),
         "--binary-encoding", "base64", "--master", "local[2]"],
        capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith(f"Exported {N} records ({N} offsets) from 2 partitions")
    assert f"to {out} as csv: 2 files, " in proc.stdout
    _quiet(proc.stderr)
    files = sorted(str(p) for p in out.glob("part-*.csv"))
    assert _csv_rows(files, topic) == [tuple("" if x is None else x for x in r)
                                       for r in _expected(rows, "base64", headers=False)]
