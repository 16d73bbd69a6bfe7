"""The Iceberg table target (``spark_kafkalog.tables.iceberg``) against real pyiceberg
catalogs (the embedded SQLite one, and an explicit SQL catalog URI), without Spark: data
files are written with pyarrow into ``data_location(run_id)`` as the export's executors
write them, then committed, and read back with pyiceberg's own scans.

Covers: create + commit + load round trips (rows, offsets, files), offsets advancing (also
with no file), partition values (file pruning), commit conflicts (exactly one of two
writers wins, and a commit never rebases), schema evolution and refused type changes,
compaction, snapshot expiry, orphan removal, maintenance snapshots of other tools without
the offsets, the explicit catalog URI, a nested partition source, an S3 warehouse (moto),
the executors' own file writer (``files.write_task_files``), and bad inputs.
"""

from __future__ import annotations

import datetime as dt
import os
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog import load_catalog

from spark_kafkalog.tables.base import (
    OFFSETS_PROPERTY,
    CommitConflictError,
    TableError,
    TableOffsets,
    TableState,
    WrittenFile,
)
from spark_kafkalog.tables.iceberg import IcebergTarget, _no_rebase_transaction

TOPIC = "events"
TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"
PARTITION_BY = ("partition", "day(timestamp)")
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
SCHEMA = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
                    ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32()),
                    ("key", pa.binary()), ("value", pa.binary()), ("headers", HEADERS)])


def day(d: int, hour: int = 0) -> dt.datetime:
    return dt.datetime(2024, 3, d, hour, tzinfo=dt.UTC)


def rows(partition: int, first: int, count: int, when: dt.datetime, schema: pa.Schema = SCHEMA,
         **extra) -> pa.Table:
    n = count
    data = {"topic": [TOPIC] * n, "partition": [partition] * n, "offset": list(range(first, first + n)),
            "timestamp": [when + dt.timedelta(seconds=i) for i in range(n)], "timestampType": [0] * n,
            "key": [f"k{first + i}".encode() for i in range(n)], "value": [f"v{first + i}".encode() for i in range(n)],
            "headers": [[{"key": "h", "value": str(first + i).encode()}] for i in range(n)]}
    data.update(extra)
    return pa.table(data, schema=schema)


def write(target: IcebergTarget, run_id: str, table: pa.Table, name: str) -> WrittenFile:
    """One data file as an executor writes it (every column of the table's schema)."""
    uri = f"{target.data_location(run_id)}/{name}.parquet"
    path = uri.removeprefix("file://")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(table, path, compression="zstd")
    offsets = table.column("offset").to_pylist()
    return WrittenFile(uri, os.path.getsize(path), table.num_rows, table.column("partition")[0].as_py(),
                       min(offsets), max(offsets))


def offsets(**parts: int) -> TableOffsets:
    return TableOffsets(TOPIC, TOPIC_ID, {int(p[1:]): o for p, o in parts.items()})


def local_table(root):
    """The pyiceberg table of a local target, opened independently of the target."""
    catalog = load_catalog("kafkalog", type="sql", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}")
    return catalog.load_table(("default", TOPIC))


def sorted_rows(table: pa.Table) -> list[dict]:
    return sorted(table.select(SCHEMA.names).to_pylist(), key=lambda r: (r["partition"], r["offset"]))


@pytest.fixture
def root(tmp_path):
    return str(tmp_path / "warehouse")


def committed(root: str, *batches: tuple[str, list[pa.Table]], final: TableOffsets) -> IcebergTarget:
    """A table with one commit per (run id, files) in ``batches``, the last one storing ``final``."""
    target = IcebergTarget(root, topic=TOPIC)
    state = target.ensure(SCHEMA, PARTITION_BY)
    for i, (run, tables) in enumerate(batches):
        files = [write(target, run, t, f"f{j}") for j, t in enumerate(tables)]
        state = target.commit(state, files, final if i == len(batches) - 1 else offsets(p0=i + 1))
    return target


def test_create_commit_load_round_trip(root):
    target = IcebergTarget(root, topic=TOPIC)
    absent = target.load()
    assert absent.version is None and absent.offsets is None and absent.schema is None
    assert not os.path.exists(root)                                  # a load creates nothing

    created = target.ensure(SCHEMA, PARTITION_BY)
    assert created.version is None and created.offsets is None and created.files == ()
    assert created.schema.names == SCHEMA.names
    assert created.schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert created.schema.field("headers").type == HEADERS
    location = target.data_location("run-1")
    assert location.startswith("file://") and location.endswith("/data/kafkalog-runs/run-1")
    assert target.storage_options() == {}

    first = [rows(0, 0, 3, day(1)), rows(1, 0, 2, day(2)), rows(0, 3, 2, day(2))]
    files = [write(target, "run-1", t, f"f{i}") for i, t in enumerate(first)]
    state = target.commit(created, files, offsets(p0=5, p1=2))
    assert state.version is not None
    assert state.offsets == offsets(p0=5, p1=2)
    assert set(state.files) == {f.path for f in files}

    again = IcebergTarget(root, topic=TOPIC).load()                  # a fresh target sees the same
    assert (again.version, again.offsets, set(again.files)) == (state.version, state.offsets, set(state.files))
    table = local_table(root)
    assert table.current_snapshot().summary[OFFSETS_PROPERTY] == offsets(p0=5, p1=2).to_json()
    assert sorted_rows(table.scan().to_arrow()) == sorted_rows(pa.concat_tables(first))

    # partition values: identity(partition) and day(timestamp) prune files
    p1 = [t.file.file_path for t in table.scan(row_filter="partition = 1").plan_files()]
    assert p1 == [files[1].path]
    day2 = {t.file.file_path for t in table.scan(
        row_filter="timestamp >= '2024-03-02T00:00:00+00:00'").plan_files()}
    assert day2 == {files[1].path, files[2].path}
    partitions = {t.file.file_path: (t.file.partition[0], t.file.partition[1]) for t in table.scan().plan_files()}
    epoch_day = (dt.date(2024, 3, 1) - dt.date(1970, 1, 1)).days
    assert partitions == {files[0].path: (0, epoch_day), files[1].path: (1, epoch_day + 1),
                          files[2].path: (0, epoch_day + 1)}

    # a second commit advances the offsets; an empty one still does
    more = write(target, "run-2", rows(1, 2, 2, day(2)), "f0")
    second = target.commit(state, [more], offsets(p0=5, p1=4))
    assert second.offsets == offsets(p0=5, p1=4) and len(second.files) == 4
    empty = target.commit(second, [], offsets(p0=9, p1=4))
    assert empty.version not in (None, second.version) and empty.offsets == offsets(p0=9, p1=4)
    assert set(empty.files) == set(second.files)
    table = local_table(root)
    assert table.current_snapshot().parent_snapshot_id == second.version
    assert table.scan().to_arrow().num_rows == 9


def test_one_of_two_writers_wins_and_commits_never_rebase(root):
    writer = IcebergTarget(root, topic=TOPIC)
    base = writer.ensure(SCHEMA, PARTITION_BY)
    other = IcebergTarget(root, topic=TOPIC)
    other_base = other.load()
    assert other_base.version == base.version is None

    mine = write(writer, "run-a", rows(0, 0, 3, day(1)), "f0")
    theirs = write(other, "run-b", rows(0, 0, 3, day(1)), "f0")
    won = writer.commit(base, [mine], offsets(p0=3))
    with pytest.raises(CommitConflictError, match="nothing was committed|was committed after"):
        other.commit(other_base, [theirs], offsets(p0=3))
    state = other.load()
    assert state.version == won.version and state.files == (mine.path,)
    assert local_table(root).scan().to_arrow().num_rows == 3

    # the race inside the catalog commit (both read the same head): pyiceberg would rebase the
    # loser onto the winner; the target's transaction refuses
    stale_a, stale_b = local_table(root), local_table(root)
    with _no_rebase_transaction(stale_a) as tx:
        tx.add_files([], snapshot_properties={OFFSETS_PROPERTY: offsets(p0=4).to_json()})
    from pyiceberg.exceptions import CommitFailedException
    with pytest.raises(CommitFailedException):
        with _no_rebase_transaction(stale_b) as tx:
            tx.add_files([], snapshot_properties={OFFSETS_PROPERTY: offsets(p0=99).to_json()})
    after = writer.load()
    assert after.offsets == offsets(p0=4)
    assert len(local_table(root).metadata.snapshots) == 2
    # and a commit from the state before it conflicts
    with pytest.raises(CommitConflictError):
        writer.commit(won, [], offsets(p0=5))


def test_schema_evolution_adds_nullable_columns_and_refuses_type_changes(root):
    target = committed(root, ("run-1", [rows(0, 0, 2, day(1))]), final=offsets(p0=2))
    before = target.load()
    wider = SCHEMA.append(pa.field("extra", pa.string(), nullable=False))   # a required column comes optional
    evolved = target.ensure(wider, PARTITION_BY)
    assert evolved.schema.names == [*SCHEMA.names, "extra"]
    assert evolved.schema.field("extra").nullable
    assert evolved.version == before.version and evolved.offsets == before.offsets
    new = write(target, "run-2", rows(0, 2, 2, day(1), schema=wider, extra=["a", "b"]), "f0")
    target.commit(evolved, [new], offsets(p0=4))
    scanned = local_table(root).scan().to_arrow().sort_by("offset")
    assert scanned.column("extra").to_pylist() == [None, None, "a", "b"]
    metadata_files = len(os.listdir(os.path.join(root, "default", TOPIC, "metadata")))
    assert target.ensure(SCHEMA, PARTITION_BY).schema.names == [*SCHEMA.names, "extra"]   # nothing to do
    assert len(os.listdir(os.path.join(root, "default", TOPIC, "metadata"))) == metadata_files

    changed = pa.schema([f if f.name != "offset" else pa.field("offset", pa.string()) for f in SCHEMA])
    with pytest.raises(TableError, match="offset"):
        target.ensure(changed, PARTITION_BY)
    with pytest.raises(TableError, match=r"day\(timestamp\)"):
        target.ensure(SCHEMA, ("partition",))               # files would span days
    assert target.load().schema.field("offset").type == pa.int64()


def test_compact_keeps_rows_and_offsets(root):
    batches = [(f"run-{i}", [rows(0, 2 * i, 2, day(1)), rows(1, 2 * i, 2, day(1))]) for i in range(3)]
    target = committed(root, *batches, final=offsets(p0=6, p1=6))
    before = target.load()
    rows_before = sorted_rows(local_table(root).scan().to_arrow())
    assert len(before.files) == 6

    state = target.compact(64 << 20)
    assert len(state.files) == 2 and state.version != before.version
    assert state.offsets == before.offsets
    table = local_table(root)
    assert table.current_snapshot().summary[OFFSETS_PROPERTY] == before.offsets.to_json()
    assert table.current_snapshot().summary.operation.value == "overwrite"
    assert sorted_rows(table.scan().to_arrow()) == rows_before
    assert [t.file.file_path for t in table.scan(row_filter="partition = 1").plan_files()] != []
    assert len(list(table.scan(row_filter="partition = 1").plan_files())) == 1
    assert target.compact(64 << 20).version == state.version               # nothing left to do
    assert target.compact(1).version == state.version                     # every file already big enough

    # the compacted-away files stay until the snapshots holding them expire
    assert target.remove_orphans(int(time.time() * 1000) + 60_000) == 0
    assert target.expire(int(time.time() * 1000) + 1, retain_last=1) == 3
    assert target.remove_orphans(int(time.time() * 1000) + 60_000) == 6
    assert all(os.path.exists(f.removeprefix("file://")) for f in state.files)
    assert sorted_rows(local_table(root).scan().to_arrow()) == rows_before
    assert target.load().offsets == before.offsets


def test_maintenance_snapshots_and_expiry_keep_the_offsets(root):
    target = committed(root, ("run-1", [rows(0, 0, 2, day(1))]),
                       ("run-2", [rows(1, 0, 3, day(2))]), final=offsets(p0=2, p1=3))
    holder = target.load()
    table = local_table(root)
    table.delete("partition = 1")                           # another tool's commit: no offsets in it
    with table.transaction() as tx:
        tx.add_files([])                                    # and an empty append
    table = local_table(root)
    assert table.current_snapshot().summary[OFFSETS_PROPERTY] is None
    assert table.current_snapshot().snapshot_id != holder.version

    state = target.load()
    assert state.offsets == offsets(p0=2, p1=3) and state.version == table.current_snapshot().snapshot_id
    assert len(state.files) == 1

    expired = target.expire(int(time.time() * 1000) + 1, retain_last=1)
    assert expired == 1                 # the first commit; the chain down to the offsets' snapshot stays
    table = local_table(root)
    delete_id = table.current_snapshot().parent_snapshot_id
    assert {s.snapshot_id for s in table.metadata.snapshots} == {holder.version, delete_id, state.version}
    assert target.load().offsets == offsets(p0=2, p1=3)
    assert target.expire(0, retain_last=1) == 0             # nothing older than the epoch

    # another tool expiring the holder: the offsets are lost, and a load says so
    table.maintenance.expire_snapshots().by_id(holder.version).commit()
    with pytest.raises(TableError, match="expired"):
        target.load()


def test_remove_orphans_deletes_only_unreferenced_run_files(root):
    target = committed(root, ("run-1", [rows(0, 0, 2, day(1))]), final=offsets(p0=2))
    kept = target.load().files[0].removeprefix("file://")
    orphan = write(target, "run-killed", rows(0, 2, 2, day(1)), "f0").path.removeprefix("file://")
    young = write(target, "run-young", rows(0, 2, 2, day(1)), "f0").path.removeprefix("file://")
    elsewhere = os.path.join(root, "default", TOPIC, "data", "other.parquet")
    pq.write_table(rows(0, 0, 1, day(1)), elsewhere)
    past = time.time() - 3600
    for path in (kept, orphan, elsewhere):
        os.utime(path, (past, past))
    assert target.remove_orphans(int((time.time() - 600) * 1000)) == 1
    assert not os.path.exists(orphan)
    assert os.path.exists(kept) and os.path.exists(young) and os.path.exists(elsewhere)
    assert local_table(root).scan().to_arrow().num_rows == 2


def test_explicit_catalog_uri(tmp_path):
    uri = f"sqlite:///{tmp_path}/other-catalog.db"
    props = {"warehouse": f"file://{tmp_path}/other-warehouse"}
    target = IcebergTarget("exports.events", topic=TOPIC, catalog_uri=uri, catalog_properties=props)
    assert target.load().version is None
    state = target.ensure(SCHEMA, ("day(timestamp)",))
    assert target.data_location("r1").startswith(f"file://{tmp_path}/other-warehouse/exports")
    state = target.commit(state, [write(target, "r1", rows(3, 0, 4, day(5)), "f0")], offsets(p3=4))
    catalog = load_catalog("kafkalog", uri=uri, **props)
    assert ("exports",) in catalog.list_namespaces()
    table = catalog.load_table("exports.events")
    assert table.scan().to_arrow().num_rows == 4
    assert IcebergTarget("exports.events", topic=TOPIC, catalog_uri=uri,
                         catalog_properties=props).load().offsets == offsets(p3=4)
    assert [str(f.transform) for f in table.spec().fields] == ["day"]

    with pytest.raises(TableError, match="namespace.name"):
        IcebergTarget("events", topic=TOPIC, catalog_uri=uri)
    with pytest.raises(TableError, match="exports.events"):
        IcebergTarget("exports.events", topic=TOPIC, catalog_uri="ftp://nowhere/catalog").load()


def test_nested_partition_source(root):
    """The key_value layout partitions by day(redpanda.timestamp), a nested column."""
    kv = pa.schema([("redpanda", pa.struct([("partition", pa.int32()), ("offset", pa.int64()),
                                            ("timestamp", pa.timestamp("us", tz="UTC")), ("headers", HEADERS),
                                            ("key", pa.binary())])), ("value", pa.binary())])
    target = IcebergTarget(root, topic=TOPIC)
    state = target.ensure(kv, ("day(redpanda.timestamp)",))
    paths = []
    for d in (1, 2):
        t = pa.table({"redpanda": [{"partition": 0, "offset": d, "timestamp": day(d), "headers": [], "key": b"k"}],
                      "value": [b"v"]}, schema=kv)
        path = f"{target.data_location('r')}/d{d}.parquet"
        os.makedirs(os.path.dirname(path.removeprefix("file://")), exist_ok=True)
        pq.write_table(t, path.removeprefix("file://"))
        paths.append(WrittenFile(path, 1, 1, 0, d, d))
    target.commit(state, paths, offsets(p0=3))
    pruned = [t.file.file_path for t in local_table(root).scan(
        row_filter="redpanda.timestamp >= '2024-03-02T00:00:00+00:00'").plan_files()]
    assert pruned == [paths[1].path]


def test_bad_inputs(root, tmp_path):
    target = IcebergTarget(root, topic=TOPIC)
    with pytest.raises(TableError, match="does not exist"):
        target.commit(TableState("iceberg", root, None, None), [], offsets(p0=1))
    with pytest.raises(TableError, match="does not exist"):
        target.data_location("r1")
    state = target.ensure(SCHEMA, PARTITION_BY)
    with pytest.raises(TableError, match="run id"):
        target.data_location("../escape")
    with pytest.raises(TableError, match="topic other"):
        target.commit(state, [], TableOffsets("other", None, {0: 1}))
    missing = WrittenFile(f"{target.data_location('r1')}/missing.parquet", 1, 1, 0, 0, 0)
    with pytest.raises(TableError, match=f"iceberg table {root}: data file .*missing.parquet.*No such file"):
        target.commit(state, [missing], offsets(p0=1))
    two_days = write(target, "r1", pa.concat_tables([rows(0, 0, 1, day(1)), rows(0, 1, 1, day(2))]), "f1")
    with pytest.raises(TableError, match="more than one partition value|several values"):
        target.commit(state, [two_days], offsets(p0=2))    # a file must lie in one partition
    assert target.load().version is None                   # nothing committed
    # a timestamp in another time zone: the table holds UTC instants (timestamptz); a file
    # labelled with another zone is refused (pyiceberg could not read it back)
    zone = pa.timestamp("us", tz="America/New_York")
    new_york = pa.schema([f if f.name != "timestamp" else pa.field("timestamp", zone) for f in SCHEMA])
    other = IcebergTarget(str(tmp_path / "zoned"), topic=TOPIC)
    zoned = other.ensure(new_york, PARTITION_BY)
    assert zoned.schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    labelled = write(other, "r1", rows(0, 0, 1, day(1)).cast(new_york), "f0")
    with pytest.raises(TableError, match="data file .*f0.parquet.*write them as UTC"):
        other.commit(zoned, [labelled], offsets(p0=1))
    with pytest.raises(TableError, match="local path"):
        IcebergTarget("s3://bucket/table", topic=TOPIC)

    # a corrupt offsets property
    with local_table(root).transaction() as tx:
        tx.add_files([], snapshot_properties={OFFSETS_PROPERTY: "{not json"})
    with pytest.raises(TableError, match=f"iceberg table {root}: snapshot .*not JSON"):
        target.load()

    # corrupt metadata
    table = local_table(root)
    with open(table.metadata_location.removeprefix("file://"), "w") as out:
        out.write("{garbage")
    with pytest.raises(TableError, match=f"iceberg table {root}: load"):
        IcebergTarget(root, topic=TOPIC).load()


def test_s3_warehouse_storage_options_commit_and_orphans(tmp_path, moto_s3):
    """A catalog whose warehouse is an S3 bucket (moto over HTTP): the executors' storage
    options come from the catalog's ``s3.*`` properties, and every step works on S3."""
    from spark_kafkalog.tables.files import filesystem_for
    from tests.support.object_store import ACCESS_KEY, REGION, SECRET_KEY

    moto_s3.filesystem().create_dir("iceberg-tables")
    props = {"warehouse": "s3://iceberg-tables/wh", "s3.endpoint": moto_s3.endpoint,
             "s3.access-key-id": ACCESS_KEY, "s3.secret-access-key": SECRET_KEY, "s3.region": REGION}
    target = IcebergTarget("exports.events", topic=TOPIC, catalog_uri=f"sqlite:///{tmp_path}/s3-catalog.db",
                           catalog_properties=props)
    state = target.ensure(SCHEMA, PARTITION_BY)
    options = target.storage_options()
    assert options == {"AWS_ENDPOINT_URL": moto_s3.endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                       "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": REGION, "AWS_ALLOW_HTTP": "true"}
    assert SECRET_KEY not in repr(target)
    location = target.data_location("r1")
    assert location.startswith("s3://iceberg-tables/wh/exports")
    written = []
    for name, data in (("kept", rows(0, 0, 3, day(1))), ("orphan", rows(0, 3, 3, day(1)))):
        fs, path = filesystem_for(f"{location}/{name}.parquet", options)
        with fs.open_output_stream(path) as out:
            pq.write_table(data, out)
        written.append(WrittenFile(f"{location}/{name}.parquet", fs.get_file_info(path).size, 3, 0, 0, 2))
    state = target.commit(state, written[:1], offsets(p0=3))
    assert state.files == (written[0].path,) and target.load().offsets == offsets(p0=3)
    table = load_catalog("kafkalog", uri=f"sqlite:///{tmp_path}/s3-catalog.db", **props).load_table("exports.events")
    assert sorted_rows(table.scan().to_arrow()) == sorted_rows(rows(0, 0, 3, day(1)))
    assert target.remove_orphans(int(time.time() * 1000) + 60_000) == 1
    fs, path = filesystem_for(location, options)
    assert [i.base_name for i in fs.get_file_info(_selector(path))] == ["kept.parquet"]


def _selector(path: str):
    from pyarrow import fs as pafs

    return pafs.FileSelector(path, recursive=True)


def test_files_the_executors_write_commit_as_they_are(root):
    """The executors' writer (``files.write_task_files``, run here on Arrow batches as
    ``mapInArrow`` runs it) produces files the target commits: one per Kafka partition and
    day, each in its own partition."""
    from spark_kafkalog.tables.files import FileSpec, write_task_files, written_files

    target = IcebergTarget(root, topic=TOPIC)
    state = target.ensure(SCHEMA, PARTITION_BY)
    spec = FileSpec(target.data_location("run-x"), "iceberg", ("partition",), (("day", "timestamp"),),
                    target.storage_options())
    data = pa.concat_tables([rows(0, 0, 3, day(1, 23)), rows(1, 0, 2, day(1)), rows(0, 3, 2, day(2))])
    out = list(write_task_files(spec)(iter(data.to_batches(max_chunksize=4))))
    files = written_files(out[0].to_pylist())
    assert len(files) == 3
    state = target.commit(state, files, offsets(p0=5, p1=2))
    table = local_table(root)
    assert sorted_rows(table.scan().to_arrow()) == sorted_rows(data)
    assert len(list(table.scan(row_filter="partition = 0").plan_files())) == 2
    assert {t.file.partition[0] for t in table.scan().plan_files()} == {0, 1}


def test_two_writers_creating_the_catalog_and_the_table_at_once(tmp_path):
    """Two exporters' first runs on one new local table: both ``ensure`` at the same time
    (the catalog's SQLite tables, the namespace and the table created concurrently); both
    end with the one table."""
    import threading

    for round_ in range(5):
        root = str(tmp_path / f"t{round_}")
        states, errors = [], []
        barrier = threading.Barrier(2)

        def ensure(root=root, states=states, errors=errors, barrier=barrier):
            target = IcebergTarget(root, topic=TOPIC)
            barrier.wait()
            try:
                states.append(target.ensure(SCHEMA, PARTITION_BY))
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=ensure) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == [], (round_, errors)
        assert len(states) == 2 and states[0].location == states[1].location
