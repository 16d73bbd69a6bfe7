"""The Delta table target of an export (``spark_kafkalog.tables.delta``), without Spark: the
data files are written here with pyarrow, in the export's layout (no partition columns in
the files, under ``data_location(run_id)``), and read back with deltalake's own reader.

Covered: create, commit and load (rows, partition columns, statistics from the footer,
offsets as application transactions and in the commit info), offsets advancing (an empty
commit too), two writers committing from one version (locally and on an S3-protocol
server, moto: exactly one wins, each file is in the table once, a blind append over
another is refused, not rebased), the safe-commit options for S3 (a conditional PUT of the
log entry, which moto honours), schema evolution (new columns, new struct fields) and the
refusal of a changed type or a transform, compaction keeping rows and offsets, vacuum,
orphan removal, a foreign append (deltalake's own ``write_deltalake``) keeping the
offsets, offsets recovered from the txn actions once log cleanup removed the commit infos,
and corrupt or missing tables as ``TableError``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
import time
import urllib.request
import uuid

import boto3
import botocore.exceptions
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, QueryBuilder, write_deltalake
from deltalake.transaction import CommitProperties

from spark_kafkalog.tables.base import (
    OFFSETS_PROPERTY,
    CommitConflictError,
    TableError,
    TableOffsets,
    WrittenFile,
)
from spark_kafkalog.tables.delta import RUNS_DIR, DeltaTarget
from spark_kafkalog.tables.files import filesystem_for
from tests.support.object_store import ACCESS_KEY, REGION, SECRET_KEY

UTC = dt.UTC
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
SCHEMA = pa.schema([
    ("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
    ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32()), ("key", pa.binary()),
    ("value", pa.binary()), ("headers", HEADERS), ("timestamp_date", pa.date32()),
])
PARTITION_BY = ["partition", "timestamp_date"]
DAY0 = dt.datetime(2024, 3, 1, 23, 0, 0, 250_500, tzinfo=UTC)
TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"


def _offsets(**parts: int) -> TableOffsets:
    return TableOffsets("events", TOPIC_ID, {int(p[1:]): o for p, o in parts.items()})


def _write(target: DeltaTarget, run_id: str, partition: int, offsets: range, *,
           schema: pa.Schema = SCHEMA, stats: bool = False) -> list[WrittenFile]:
    """One file per day of ``offsets`` (one hour apart from DAY0), as the executors write
    them (no partition columns); ``stats``: the writer's statistics, else the footer's."""
    fs, root = filesystem_for(target.data_location(run_id), target.storage_options())
    by_day: dict[dt.date, list[int]] = {}
    for o in offsets:
        by_day.setdefault((DAY0 + dt.timedelta(hours=o)).date(), []).append(o)
    out = []
    for day, offs in sorted(by_day.items()):
        cols = {
            "topic": pa.array(["events"] * len(offs)),
            "offset": pa.array(offs, pa.int64()),
            "timestamp": pa.array([DAY0 + dt.timedelta(hours=o) for o in offs], pa.timestamp("us", tz="UTC")),
            "timestampType": pa.array([0] * len(offs), pa.int32()),
            "key": pa.array([None if o % 3 == 0 else f"k{o}".encode() for o in offs], pa.binary()),
            "value": pa.array([f"v{o}".encode() for o in offs], pa.binary()),
            "headers": pa.array([[{"key": "h", "value": b"x"}]] * len(offs), HEADERS),
        }
        extra = [f for f in schema if f.name not in cols and f.name not in PARTITION_BY]
        for f in extra:
            cols[f.name] = pa.array([f"{f.name}{o}" for o in offs], f.type)
        table = pa.table(cols)
        name = f"partition={partition}/timestamp_date={day}/part-{uuid.uuid4().hex}.parquet"
        path = f"{root}/{name}"
        fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
        with fs.open_output_stream(path) as stream:
            pq.write_table(table, stream)
        file_stats = None
        if stats:
            file_stats = json.dumps({"numRecords": len(offs), "minValues": {"offset": min(offs)},
                                     "maxValues": {"offset": max(offs)}, "nullCount": {"offset": 0}})
        out.append(WrittenFile(f"{target.data_location(run_id)}/{name}", fs.get_file_info(path).size, len(offs),
                               partition, min(offs), max(offs), {"partition": str(partition),
                                                                 "timestamp_date": day.isoformat()}, file_stats))
    return out


def _rows(target: DeltaTarget) -> list[tuple]:
    """(partition, offset, timestamp_date) of every row, read with deltalake's own reader
    (DataFusion; ``to_pyarrow_table`` of deltalake 1.6.6 aborts the interpreter at exit)."""
    table = DeltaTable(target.table, storage_options=target.storage_options())
    result = QueryBuilder().register("t", table).execute(
        'select "partition", "offset", timestamp_date from t order by 1, 2').read_all()
    data = pa.table(result).to_pydict()
    return list(zip(data["partition"], data["offset"], data["timestamp_date"], strict=True))


def _expected(partition: int, offsets: range) -> list[tuple]:
    return [(partition, o, (DAY0 + dt.timedelta(hours=o)).date()) for o in offsets]


def test_create_commit_load_and_offsets(tmp_path):
    target = DeltaTarget(str(tmp_path / "events"), topic="events")
    assert target.load().version is None
    with pytest.raises(TableError, match="transforms"):
        target.ensure(SCHEMA, ["partition", "day(timestamp)"])
    created = target.ensure(SCHEMA, PARTITION_BY)
    assert created.version == 0 and created.offsets is None and created.files == ()
    assert created.schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert target.data_location("r1") == f"{tmp_path / 'events'}/{RUNS_DIR}/r1"

    files = _write(target, "r1", 0, range(0, 5)) + _write(target, "r1", 1, range(0, 3), stats=True)
    state = target.commit(created, files, _offsets(p0=5, p1=3))
    assert state.version == 1 and state.offsets == _offsets(p0=5, p1=3)
    assert sorted(state.files) == sorted("file://" + f.path for f in files) or \
        sorted(state.files) == sorted(f.path for f in files)
    assert _rows(target) == _expected(0, range(0, 5)) + _expected(1, range(0, 3))

    dt_ = DeltaTable(target.table)
    assert dt_.transaction_version(f"kafkalog:{TOPIC_ID}:0") == 5
    assert dt_.transaction_version(f"kafkalog:{TOPIC_ID}:1") == 3
    assert TableOffsets.from_json(dt_.history(1)[0][OFFSETS_PROPERTY]) == _offsets(p0=5, p1=3)
    adds = pa.table(dt_.get_add_actions(flatten=True)).to_pylist()
    by_path = {a["path"].rsplit("/", 1)[-1]: a for a in adds}
    day2 = by_path[files[1].path.rsplit("/", 1)[-1]]     # offsets 1-4, statistics from the footer
    assert day2["num_records"] == 4 and day2["min.offset"] == 1 and day2["max.offset"] == 4
    assert day2["null_count.key"] == 1 and day2["min.topic"] == "events"
    assert day2["min.timestamp"] <= DAY0 + dt.timedelta(hours=1)   # rounded down to the millisecond
    assert day2["max.timestamp"] >= DAY0 + dt.timedelta(hours=4)   # rounded up
    assert all(a["path"].startswith(f"{RUNS_DIR}/r1/") for a in adds)

    loaded = target.load()
    assert loaded.version == 1 and loaded.offsets == _offsets(p0=5, p1=3) and len(loaded.files) == 4

    more = _write(target, "r2", 0, range(5, 7))
    second = target.commit(loaded, more, _offsets(p0=7))   # partition 1 carried over
    assert second.version == 2 and second.offsets == _offsets(p0=7, p1=3)
    empty = target.commit(second, [], _offsets(p0=7, p1=9))  # a range without records
    assert empty.version == 3 and target.load().offsets == _offsets(p0=7, p1=9)
    assert DeltaTable(target.table).transaction_version(f"kafkalog:{TOPIC_ID}:1") == 9
    assert _rows(target) == _expected(0, range(0, 7)) + _expected(1, range(0, 3))
    with pytest.raises(TableError, match="never go back"):
        target.commit(empty, [], _offsets(p0=6))
    with pytest.raises(TableError, match="offsets of topic 'other'"):
        target.commit(empty, [], TableOffsets("other", TOPIC_ID, {0: 8}))
    outside = WrittenFile(str(tmp_path / "elsewhere.parquet"), 10, 1, 0, 7, 7,
                          {"partition": "0", "timestamp_date": "2024-03-02"})
    with pytest.raises(TableError, match="not under the table's root"):
        target.commit(empty, [outside], _offsets(p0=8))
    assert target.load().version == 3


def test_concurrent_commits_local_exactly_one_wins(tmp_path):
    first = DeltaTarget(str(tmp_path / "events"), topic="events")
    second = DeltaTarget(str(tmp_path / "events"), topic="events")
    base = first.ensure(SCHEMA, PARTITION_BY)
    a = _write(first, "a", 0, range(0, 3))
    b = _write(second, "b", 0, range(0, 3))
    assert first.commit(base, a, _offsets(p0=3)).version == 1
    with pytest.raises(CommitConflictError, match="version 1 after version 0"):
        second.commit(base, b, _offsets(p0=3))
    # a blind append of other partitions (other app ids) is refused too, not rebased
    c = _write(second, "c", 1, range(0, 2))
    with pytest.raises(CommitConflictError):
        second.commit(base, c, TableOffsets("events", TOPIC_ID, {1: 2}))
    assert DeltaTable(first.table).version() == 1
    assert _rows(first) == _expected(0, range(0, 3))       # each record once
    reloaded = second.load()
    assert second.commit(reloaded, c, TableOffsets("events", TOPIC_ID, {1: 2})).version == 2
    assert _rows(first) == _expected(0, range(0, 3)) + _expected(1, range(0, 2))
    assert first.load().offsets == _offsets(p0=3, p1=2)


def _s3_options(moto_s3) -> dict[str, str]:
    return {"AWS_ENDPOINT_URL": moto_s3.endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": REGION, "AWS_ALLOW_HTTP": "true"}


def _recorded_puts(moto_s3) -> list[dict]:
    req = urllib.request.Request(f"{moto_s3.endpoint}/moto-api/recorder/download-recording", method="GET")
    entries = [json.loads(line) for line in urllib.request.urlopen(req, timeout=30).read().decode().splitlines()
               if line.strip()]
    return [e for e in entries if e["method"] == "PUT" and "/_delta_log/" in e["url"]]


def test_concurrent_commits_on_s3_exactly_one_wins(moto_s3, monkeypatch):
    bucket = f"delta-{uuid.uuid4().hex[:8]}"
    moto_s3.filesystem().create_dir(bucket)
    monkeypatch.setenv("AWS_S3_ALLOW_UNSAFE_RENAME", "true")   # the environment's word does not count
    uri = f"s3://{bucket}/events"
    targets = [DeltaTarget(uri, topic="events", storage_options=_s3_options(moto_s3)) for _ in range(2)]
    options = targets[0].storage_options()
    assert options["aws_conditional_put"] == "etag" and options["AWS_S3_ALLOW_UNSAFE_RENAME"] == "false"
    with pytest.raises(TableError, match="conditional PUT"):
        DeltaTarget(uri, topic="events", storage_options={**_s3_options(moto_s3), "aws_conditional_put": "disabled"})
    with moto_s3.recording():
        base = targets[0].ensure(SCHEMA, PARTITION_BY)
        first_puts = _recorded_puts(moto_s3)
    explicit = DeltaTarget(f"s3://{bucket}/unsafe", topic="events",
                           storage_options={**_s3_options(moto_s3), "AWS_S3_ALLOW_UNSAFE_RENAME": "true"})
    assert explicit.storage_options()["AWS_S3_ALLOW_UNSAFE_RENAME"] == "true"
    with moto_s3.recording():                   # deltalake 1.6 commits with a conditional PUT even so
        explicit.ensure(SCHEMA, PARTITION_BY)
        unsafe_puts = _recorded_puts(moto_s3)
    for puts in (first_puts, unsafe_puts):
        log_puts = [p for p in puts if p["url"].split("?")[0].endswith("/_delta_log/00000000000000000000.json")]
        assert len(log_puts) == 1, puts
        assert {k.lower(): v for k, v in log_puts[0]["headers"].items()}.get("if-none-match") == "*"
    s3 = boto3.client("s3", endpoint_url=moto_s3.endpoint, aws_access_key_id=ACCESS_KEY,
                      aws_secret_access_key=SECRET_KEY, region_name=REGION)
    with pytest.raises(botocore.exceptions.ClientError, match="PreconditionFailed"):   # and moto honours it
        s3.put_object(Bucket=bucket, Key="events/_delta_log/00000000000000000000.json", Body=b"{}", IfNoneMatch="*")

    expected: list[tuple] = []
    for round_ in range(3):
        files = [_write(t, f"r{round_}-{i}", 0, range(round_ * 10, round_ * 10 + 2)) for i, t in enumerate(targets)]
        barrier = threading.Barrier(2)
        outcomes: list[object] = [None, None]

        def run(i: int, base=base, files=files, barrier=barrier, outcomes=outcomes, round_=round_) -> None:
            barrier.wait()
            try:
                outcomes[i] = targets[i].commit(base, files[i], _offsets(p0=round_ * 10 + 2))
            except CommitConflictError as exc:
                outcomes[i] = exc

        threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        winners = [o for o in outcomes if not isinstance(o, CommitConflictError)]
        assert len(winners) == 1 and sum(isinstance(o, CommitConflictError) for o in outcomes) == 1, outcomes
        assert winners[0].version == base.version + 1
        expected += _expected(0, range(round_ * 10, round_ * 10 + 2))
        base = targets[0].load()
        assert base.version == round_ + 1 and base.offsets == _offsets(p0=round_ * 10 + 2)
    assert _rows(targets[0]) == expected
    # the losers' files are orphans: removed, the winners' stay
    assert targets[1].remove_orphans(int(time.time() * 1000) - 3_600_000) == 0
    assert targets[1].remove_orphans(int(time.time() * 1000) + 60_000) == 4    # 2 + 1 + 1 files (days)
    assert _rows(targets[0]) == expected and len(targets[0].load().files) == 4


def test_schema_evolution_and_incompatible_change(tmp_path):
    target = DeltaTarget(str(tmp_path / "events"), topic="events")
    base = target.ensure(SCHEMA, PARTITION_BY)
    base = target.commit(base, _write(target, "r1", 0, range(0, 2)), _offsets(p0=2))
    wider = SCHEMA.append(pa.field("note", pa.string(), nullable=False))
    evolved = target.ensure(wider, PARTITION_BY)
    assert evolved.version == 2 and evolved.schema.field("note").nullable
    assert target.ensure(wider, PARTITION_BY).version == 2            # nothing to add: no commit
    evolved = target.commit(evolved, _write(target, "r2", 0, range(2, 4), schema=wider), _offsets(p0=4))
    table = DeltaTable(target.table)
    notes = pa.table(QueryBuilder().register("t", table).execute(
        'select "offset", note from t order by 1').read_all()).to_pydict()
    assert notes == {"offset": [0, 1, 2, 3], "note": [None, None, "note2", "note3"]}

    changed = pa.schema([f if f.name != "offset" else pa.field("offset", pa.string()) for f in SCHEMA])
    with pytest.raises(TableError, match="column 'offset' is long in the table, string in the data: an incompat"):
        target.ensure(changed, PARTITION_BY)
    with pytest.raises(TableError, match="partitioned by"):
        target.ensure(SCHEMA, ["partition"])
    assert target.load().version == 3

    def meta(*fields: tuple[str, pa.DataType]) -> pa.Schema:
        return wider.append(pa.field("meta", pa.struct(list(fields))))
    assert target.ensure(meta(("a", pa.string())), PARTITION_BY).version == 4
    grown = target.ensure(meta(("a", pa.string()), ("b", pa.int64())), PARTITION_BY)   # a struct gains a field
    assert grown.version == 5 and [f.name for f in grown.schema.field("meta").type] == ["a", "b"]
    assert target.ensure(meta(("b", pa.int64())), PARTITION_BY).version == 5           # lacking one: no change
    with pytest.raises(TableError, match="column 'meta.a' is string in the table, integer in the data"):
        target.ensure(meta(("a", pa.int32())), PARTITION_BY)


def test_compact_expire_and_remove_orphans(tmp_path):
    target = DeltaTarget(str(tmp_path / "events"), topic="events")
    state = target.ensure(SCHEMA, PARTITION_BY)
    for i in range(4):                                   # 4 small files in one partition, one day
        state = target.commit(state, _write(target, f"r{i}", 0, range(i * 2 + 1, i * 2 + 3)), _offsets(p0=i * 2 + 3))
    assert len(state.files) == 4
    orphan_dir = tmp_path / "events" / RUNS_DIR / "killed" / "partition=0"
    orphan_dir.mkdir(parents=True)
    old, recent = orphan_dir / "old.parquet", orphan_dir / "recent.parquet"
    old.write_bytes(b"PAR1")
    recent.write_bytes(b"PAR1")
    hour_ago = time.time() - 3600
    os.utime(old, (hour_ago, hour_ago))

    compacted = target.compact(64 * 1024 * 1024)
    assert compacted.version == 5 and len(compacted.files) == 1
    assert compacted.offsets == _offsets(p0=9)
    assert DeltaTable(target.table).transaction_version(f"kafkalog:{TOPIC_ID}:0") == 9
    assert _rows(target) == _expected(0, range(1, 9))

    # the compacted-away files are referenced by versions 1-4: not orphans, expire's
    assert target.remove_orphans(int((time.time() - 600) * 1000)) == 1
    assert not old.exists() and recent.exists()
    assert target.expire(int(time.time() * 1000), retain_last=3) == 0   # version 4 still needs them
    assert target.expire(int(time.time() * 1000), retain_last=1) == 4
    assert _rows(target) == _expected(0, range(1, 9))
    assert target.remove_orphans(int(time.time() * 1000) + 1000) == 1   # now the recent one too
    assert not recent.exists() and target.load().offsets == _offsets(p0=9)


def test_foreign_commits_keep_offsets_and_bad_input(tmp_path):
    target = DeltaTarget(str(tmp_path / "events"), topic="events")
    state = target.ensure(SCHEMA, PARTITION_BY)
    state = target.commit(state, _write(target, "r1", 0, range(0, 2)), _offsets(p0=2))
    rows = pa.table({
        "topic": ["other"], "partition": pa.array([5], pa.int32()), "offset": pa.array([0], pa.int64()),
        "timestamp": pa.array([DAY0], pa.timestamp("us", tz="UTC")), "timestampType": pa.array([0], pa.int32()),
        "key": pa.array([None], pa.binary()), "value": pa.array([b"x"], pa.binary()),
        "headers": pa.array([None], HEADERS), "timestamp_date": pa.array([DAY0.date()], pa.date32())})
    write_deltalake(target.table, rows, mode="append")
    loaded = target.load()
    assert loaded.version == 2 and loaded.offsets == _offsets(p0=2) and len(loaded.files) == 3
    assert target.commit(loaded, [], _offsets(p0=3)).version == 3

    corrupt = DeltaTable(target.table)
    corrupt.create_write_transaction([], "append", corrupt.schema(), PARTITION_BY,
                                     commit_properties=CommitProperties(custom_metadata={OFFSETS_PROPERTY: "{not"}))
    with pytest.raises(TableError, match=f"Delta table {tmp_path / 'events'}: version 4: kafkalog.offsets"):
        target.load()

    missing = DeltaTarget(str(tmp_path / "absent"), topic="events")
    assert missing.load().version is None
    with pytest.raises(TableError, match="does not exist"):
        missing.compact(1024)
    (tmp_path / "broken" / "_delta_log").mkdir(parents=True)
    (tmp_path / "broken" / "_delta_log" / "00000000000000000000.json").write_text("{nonsense\n")
    with pytest.raises(TableError, match=f"Delta table {tmp_path / 'broken'}") as info:
        DeltaTarget(str(tmp_path / "broken"), topic="events").load()
    assert "\n" not in str(info.value)


def test_offsets_survive_log_cleanup(tmp_path):
    target = DeltaTarget(str(tmp_path / "events"), topic="events")
    state = target.ensure(SCHEMA, PARTITION_BY)
    state = target.commit(state, [], TableOffsets("events", "OLDINCARNATION00000000", {0: 40, 1: 41}))
    state = target.commit(state, _write(target, "r1", 0, range(1, 3)), _offsets(p0=3, p1=7))
    foreign = pa.table({"partition": pa.array([9], pa.int32()), "offset": pa.array([0], pa.int64()),
                        "timestamp_date": pa.array([DAY0.date()], pa.date32())})
    write_deltalake(target.table, foreign, mode="append", schema_mode="merge")
    DeltaTable(target.table).create_checkpoint()                      # at version 3
    log = tmp_path / "events" / "_delta_log"
    for v in range(3):     # what log cleanup does once they are older than the log retention
        (log / f"{v:020d}.json").unlink()
    write_deltalake(target.table, foreign, mode="append", schema_mode="merge")
    assert all(OFFSETS_PROPERTY not in h for h in DeltaTable(target.table).history())
    loaded = target.load()
    assert loaded.version == 4 and loaded.offsets == _offsets(p0=3, p1=7)
    assert target.commit(loaded, [], _offsets(p0=5)).offsets == _offsets(p0=5, p1=7)
    assert target.load().offsets == _offsets(p0=5, p1=7)
