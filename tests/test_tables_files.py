"""The executors' side of a table export (``spark_kafkalog.tables.files``) and the offsets
model (``spark_kafkalog.tables.base``), without Spark: Arrow batches of table rows in,
Parquet files and ``WrittenFile``s out, read back with pyarrow.

Covered: one file per (Kafka partition, partition values, day) of a task, rows in their
order, Delta files without their partition columns (values in ``partition_values``),
Iceberg files with every column, Delta statistics (numRecords, min/max of offset and
timestamp, null counts), the offsets' JSON round trip and its refusal of anything else,
and writes to an S3-protocol server (moto) through deltalake-style storage options.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_kafkalog.tables.base import TableError, TableOffsets, WrittenFile
from spark_kafkalog.tables.files import FileSpec, filesystem_for, write_task_files, written_files

UTC = dt.UTC
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def _rows(partition: int, offsets: range, day0: dt.datetime, *, delta: bool) -> pa.RecordBatch:
    ts = [day0 + dt.timedelta(hours=o) for o in offsets]  # crosses days every 24 offsets
    cols = {
        "topic": pa.array(["t"] * len(offsets)),
        "partition": pa.array([partition] * len(offsets), pa.int32()),
        "offset": pa.array(list(offsets), pa.int64()),
        "timestamp": pa.array(ts, pa.timestamp("us", tz="UTC")),
        "timestampType": pa.array([0] * len(offsets), pa.int32()),
        "key": pa.array([None if o % 5 == 0 else f"k{o}".encode() for o in offsets], pa.binary()),
        "value": pa.array([f"v{o}".encode() for o in offsets], pa.binary()),
        "headers": pa.array([[] for _ in offsets], HEADERS),
    }
    if delta:
        cols["timestamp_date"] = pa.array([t.date() for t in ts], pa.date32())
    return pa.RecordBatch.from_pydict(cols)


def _run(spec: FileSpec, batches) -> list[WrittenFile]:
    out = list(write_task_files(spec)(iter(batches)))
    return written_files([r for batch in out for r in batch.column("file").to_pylist()])


def test_delta_files_split_by_partition_values_without_the_partition_columns(tmp_path):
    day0 = dt.datetime(2026, 12, 5, 20, tzinfo=UTC)
    spec = FileSpec(f"file://{tmp_path}/run", "delta", ("partition", "timestamp_date"))
    files = _run(spec, [_rows(3, range(0, 10), day0, delta=True), _rows(3, range(10, 30), day0, delta=True)])
    # offsets 0..3 on Dec 5 (20h..23h), 4..27 on Dec 6, 28..29 on Dec 7
    assert [(f.partition_values["timestamp_date"], f.first_offset, f.last_offset, f.records) for f in files] == [
        ("2026-12-05", 0, 3, 4), ("2026-12-06", 4, 27, 24), ("2026-12-07", 28, 29, 2)]
    assert {f.partition_values["partition"] for f in files} == {"3"} and {f.partition for f in files} == {3}
    for f in files:
        assert f.path.startswith(f"file://{tmp_path}/run/partition=3/timestamp_date=")
        table = pq.read_table(f.path.removeprefix("file://"))
        assert "partition" not in table.column_names and "timestamp_date" not in table.column_names
        assert table.column("offset").to_pylist() == list(range(f.first_offset, f.last_offset + 1))
        assert f.size == (tmp_path / f.path.removeprefix(f"file://{tmp_path}/")).stat().st_size
        stats = json.loads(f.stats)
        assert stats["numRecords"] == f.records
        assert stats["minValues"]["offset"] == f.first_offset and stats["maxValues"]["offset"] == f.last_offset
        assert stats["nullCount"]["key"] == sum(1 for o in range(f.first_offset, f.last_offset + 1) if o % 5 == 0)
        assert stats["minValues"]["timestamp"].endswith("Z")


def test_iceberg_files_keep_every_column_one_file_per_day(tmp_path):
    day0 = dt.datetime(2026, 12, 6, 22, tzinfo=UTC)
    spec = FileSpec(str(tmp_path / "run"), "iceberg", ("partition",), (("day", "timestamp"),))
    files = _run(spec, [_rows(0, range(0, 4), day0, delta=False), _rows(1, range(0, 3), day0, delta=False)])
    assert sorted((f.partition, f.first_offset, f.last_offset) for f in files) == [
        (0, 0, 1), (0, 2, 3), (1, 0, 1), (1, 2, 2)]
    table = pq.read_table([f.path for f in files][0])
    assert table.column_names == ["topic", "partition", "offset", "timestamp", "timestampType", "key", "value",
                                  "headers"]
    assert all(f.partition_values == {"partition": str(f.partition)} for f in files)


def test_no_rows_no_files(tmp_path):
    spec = FileSpec(str(tmp_path / "run"), "iceberg", ("partition",))
    assert _run(spec, []) == []
    assert not (tmp_path / "run").exists()


def test_files_on_an_s3_protocol_server(moto_s3, tmp_path):
    bucket = f"tables-{uuid.uuid4().hex[:8]}"
    fs = moto_s3.filesystem()
    fs.create_dir(bucket)
    options = {"AWS_ENDPOINT_URL": moto_s3.endpoint, "AWS_ACCESS_KEY_ID": "testing-access-key",
               "AWS_SECRET_ACCESS_KEY": "testing-secret-key", "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}
    spec = FileSpec(f"s3://{bucket}/t/run", "delta", ("partition", "timestamp_date"), storage_options=options)
    files = _run(spec, [_rows(2, range(5), dt.datetime(2026, 1, 1, tzinfo=UTC), delta=True)])
    assert len(files) == 1 and files[0].path.startswith(f"s3://{bucket}/t/run/partition=2/")
    s3, path = filesystem_for(files[0].path, options)
    with s3.open_input_file(path) as f:
        assert pq.read_table(f).column("offset").to_pylist() == [0, 1, 2, 3, 4]


@given(st.text(min_size=1, max_size=20), st.one_of(st.none(), st.text(max_size=24)),
       st.dictionaries(st.integers(0, 10_000), st.integers(0, 2**62), max_size=20))
def test_offsets_json_round_trips(topic, topic_id, offsets):
    stored = TableOffsets(topic, topic_id, offsets)
    assert TableOffsets.from_json(stored.to_json()) == stored


@pytest.mark.parametrize("text", ["", "[]", "{}", '{"version": 2, "topic": "t", "topicId": null, "partitions": {}}',
                                  '{"version": 1, "topic": "", "topicId": null, "partitions": {}}',
                                  '{"version": 1, "topic": "t", "topicId": 5, "partitions": {}}',
                                  '{"version": 1, "topic": "t", "topicId": null, "partitions": {"x": 1}}',
                                  '{"version": 1, "topic": "t", "topicId": null, "partitions": {"0": -1}}',
                                  '{"version": 1, "topic": "t", "topicId": null, "partitions": {"0": true}}',
                                  "\xff{"])
def test_offsets_json_refuses_anything_else(text):
    with pytest.raises(TableError, match="kafkalog.offsets"):
        TableOffsets.from_json(text)


def test_offsets_advance_per_partition_and_name_delta_app_ids():
    stored = TableOffsets("t", "AbC", {0: 10, 1: 5})
    assert stored.advanced({1: 7, 2: 3}).next_offsets == {0: 10, 1: 7, 2: 3}
    assert stored.advanced({0: 4}).next_offsets[0] == 10  # never backwards
    assert stored.app_id(1) == "kafkalog:AbC:1"


def test_null_headers_come_back_from_the_flag_and_row_groups_are_large(tmp_path):
    """The job hands ``headers`` with nulls as empty arrays and a flag column (Spark's
    Arrow conversion of null array<struct> is slow): the files hold the nulls again and no
    flag; the rows of many small batches land in one row group."""
    from spark_kafkalog.tables.files import HEADERS_NULL_FLAG

    day0 = dt.datetime(2026, 12, 6, 0, tzinfo=UTC)
    batches = []
    for start in range(0, 20, 5):
        b = _rows(0, range(start, start + 5), day0 - dt.timedelta(hours=start), delta=False)
        headers = pa.array([[{"key": "h", "value": b"x"}] if o % 2 else [] for o in range(start, start + 5)], HEADERS)
        flag = pa.array([o % 4 == 0 for o in range(start, start + 5)])
        cols = [headers if n == "headers" else b.column(n) for n in b.schema.names]
        batches.append(pa.RecordBatch.from_arrays([*cols, flag], names=[*b.schema.names, HEADERS_NULL_FLAG]))
    spec = FileSpec(str(tmp_path / "run"), "iceberg", ("partition",))
    files = _run(spec, batches)
    assert len(files) == 1 and files[0].records == 20
    f = pq.ParquetFile(files[0].path)
    assert f.metadata.num_row_groups == 1
    table = f.read()
    assert HEADERS_NULL_FLAG not in table.column_names
    assert table.column("headers").to_pylist() == [
        None if o % 4 == 0 else ([{"key": "h", "value": b"x"}] if o % 2 else []) for o in range(20)]
