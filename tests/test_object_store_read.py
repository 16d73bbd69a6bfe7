"""Direct mode from object storage (issue 21, Spark part): a log directory written by the
real broker, uploaded to a REAL S3-protocol server (moto in server mode, over HTTP:
``tests/support/object_store.py``), read through ``s3://`` exactly as from the local
directory: batch reads, the offset and timestamp options, filter pushdown on timestamp
and offset pruning segments (asserted on the requests the server got: which objects were
read, with which ``Range``), ranged reads that never fetch a whole segment (and ranges cut
at the offset index's checked position reading exactly a full read's offsets, any
range), a streaming read (``Trigger.AvailableNow``), a ``file:`` URI, ``kafkalog export``
from ``s3://`` with its progress reports, Hadoop's ``fs.s3a.*`` keys mapped onto pyarrow,
and clear errors for a missing bucket, a missing prefix and refused credentials."""

from __future__ import annotations

import hashlib
import json

import pytest
from chispa import assert_df_equality
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.log.reader import LogDirReader
from broker.record.batch import LOG_ENTRY_PREFIX
from spark_kafkalog.readers.direct import DirectOffsetReader, DirectRangeReader
from tests.support.broker import BrokerProcess
from tests.support.object_store import MotoServer
from tests.support.spark import pushdown

T0 = 1_700_000_000_000
TOPIC = "events"
PER_PARTITION = 3000
SEGMENT_BYTES = 16 * 1024


@pytest.fixture(scope="module")
def logs(tmp_path_factory, moto_s3):
    """The broker's log directory (produced with confluent-kafka, broker stopped cleanly)
    and its copy on the S3 server: (local dir, s3 URI)."""
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient, NewTopic

    broker = BrokerProcess(tmp_path_factory.mktemp("objstore-broker"),
                           {"log.index.interval.bytes": "1024"}).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        futures = admin.create_topics([NewTopic(TOPIC, num_partitions=2, config={
            "internal.segment.bytes": str(SEGMENT_BYTES)})])
        futures[TOPIC].result(30)
        producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5,
                                "batch.num.messages": 20, "compression.type": "lz4"})
        for i in range(PER_PARTITION * 2):
            headers = [("h", str(i).encode())] if i % 5 == 0 else None
            producer.produce(TOPIC, key=None if i % 7 == 0 else f"k{i % 100}".encode(),
                             value=f"value-{i}-".encode() + _noise(i), partition=i % 2,
                             timestamp=T0 + 10 * (i // 2), headers=headers)
        assert producer.flush(60) == 0
    finally:
        assert broker.stop() == 0
    uri = moto_s3.upload(broker.log_dir, "logs/backups/kafka-logs")
    return broker.log_dir, uri


def _noise(i: int) -> bytes:
    """Hex digits that compress only about twofold, so that the topic spans segments."""
    return hashlib.sha256(b"%d" % i).hexdigest().encode() * (1 + i % 3)


def s3_read(spark, moto: MotoServer, location, **options):
    reader = spark.read.format("kafkalog").option("subscribe", TOPIC)
    for k, v in {**moto.options, **options}.items():
        reader = reader.option(k, v)
    return reader.load(location)


def local_read(spark, location, **options):
    reader = spark.read.format("kafkalog").option("subscribe", TOPIC)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load(str(location))


def ordered(df):
    return df.orderBy("topic", "partition", "offset")


def log_gets(requests) -> list:
    """The ranged GETs of ``.log`` objects."""
    return [r for r in requests if r.method == "GET" and r.path.endswith(".log")]


def test_the_copy_has_several_segments_per_partition(logs, moto_s3):
    local, uri = logs
    remote = LogDirReader(uri, moto_s3.options)
    assert remote.topic_partitions() == [(TOPIC, 0), (TOPIC, 1)]
    here = LogDirReader(str(local))
    for p in (0, 1):
        r, loc = remote.partition(TOPIC, p), here.partition(TOPIC, p)
        assert len(r.segments) >= 4
        assert [(s.base_offset, s.size) for s in r.segments] == [(s.base_offset, s.size) for s in loc.segments]
        assert (r.log_start_offset, r.log_end_offset) == (0, PER_PARTITION) == \
            (loc.log_start_offset, loc.log_end_offset)
        for ts in (T0, T0 + 10 * 1234 + 3, T0 + 10 * PER_PARTITION):
            assert r.offset_for_timestamp(ts) == loc.offset_for_timestamp(ts)


def test_batch_read_equals_the_local_directory(spark, logs, moto_s3):
    local, uri = logs
    remote = s3_read(spark, moto_s3, uri, includeHeaders="true", maxBytesPerBatch="65536")
    expected = local_read(spark, local, includeHeaders="true")
    assert remote.count() == 2 * PER_PARTITION
    assert_df_equality(ordered(remote), ordered(expected))
    # s3a:// (Hadoop's name for the same store) and a trailing slash read the same
    again = s3_read(spark, moto_s3, uri.replace("s3://", "s3a://") + "/")
    assert again.count() == 2 * PER_PARTITION


def test_offset_and_timestamp_options(spark, logs, moto_s3):
    local, uri = logs
    cases = [
        dict(startingOffsets=json.dumps({TOPIC: {"0": 1234, "1": 10}}),
             endingOffsets=json.dumps({TOPIC: {"0": 2345, "1": -1}})),
        dict(startingTimestamp=str(T0 + 10 * 2500), minPartitions="5"),
        dict(startingOffsetsByTimestamp=json.dumps({TOPIC: {"0": T0 + 10 * 100, "1": T0}}),
             endingOffsetsByTimestamp=json.dumps({TOPIC: {"0": T0 + 10 * 900, "1": T0 + 10 * 50}})),
    ]
    for options in cases:
        remote = s3_read(spark, moto_s3, uri, **options)
        expected = local_read(spark, local, **options)
        assert remote.schema == expected.schema
        rows = ordered(remote).collect()
        assert rows and rows == ordered(expected).collect(), options


def test_timestamp_pushdown_prunes_segments_before_reading(spark, logs, moto_s3):
    local, uri = logs
    cut = T0 + 10 * 2700  # in the last segments of each partition
    segments = {p: LogDirReader(uri, moto_s3.options).partition(TOPIC, p).segments for p in (0, 1)}
    with pushdown(spark, True):
        query = lambda df: df.where(df.timestamp >= _ts(cut))
        with moto_s3.recording() as pruned:
            rows = query(s3_read(spark, moto_s3, uri)).select("partition", "offset").collect()
        expected = query(local_read(spark, local)).select("partition", "offset").collect()
        assert sorted(rows) == sorted(expected)
        assert len(rows) == 2 * (PER_PARTITION - 2700)
        with moto_s3.recording() as full:
            assert s3_read(spark, moto_s3, uri).count() == 2 * PER_PARTITION
    read_pruned = {r.path.rsplit("/", 1)[1] for r in log_gets(pruned)}
    read_full = {r.path.rsplit("/", 1)[1] for r in log_gets(full)}
    # without the filter every segment's data is read; with it only the segments holding
    # offsets at or after the first record >= cut (found through the time index)
    assert read_full == {s.path.name for p in (0, 1) for s in segments[p]}
    for p in (0, 1):
        first = LogDirReader(uri, moto_s3.options).partition(TOPIC, p).offset_for_timestamp(cut)
        wanted = {s.path.name for i, s in enumerate(segments[p])
                  if i + 1 == len(segments[p]) or segments[p][i + 1].base_offset > first}
        assert {n for n in read_pruned if n in {s.path.name for s in segments[p]}} == wanted
    assert len(read_pruned) < len(read_full)
    assert sum(r.range_bytes for r in log_gets(pruned)) < sum(r.range_bytes for r in log_gets(full)) / 2


def _ts(ms: int):
    import datetime as dt
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)


def test_a_ranged_read_never_fetches_a_whole_segment(logs, moto_s3):
    local, uri = logs
    segments = LogDirReader(uri, moto_s3.options).partition(TOPIC, 1).segments
    middle = segments[len(segments) // 2]
    start = middle.base_offset + 40
    end = start + 30
    options = dict(include_headers=True, max_bytes_per_batch=64 * 1024, fail_on_data_loss=True)
    with moto_s3.recording() as requests:
        batches = list(DirectRangeReader(uri, storage_config=moto_s3.options, **options).read(TOPIC, 1, start, end))
    expected = list(DirectRangeReader(str(local), **options).read(TOPIC, 1, start, end))
    assert sum(b.num_rows for b in batches) == 30
    assert [b.to_pylist() for b in batches] == [b.to_pylist() for b in expected]
    gets = log_gets(requests)
    # only that segment's data is read, in ranges, far less than the segment; the last
    # segment's tail is checked (the log end offset: headers after its last index entry)
    last = segments[-1]
    by_name = {}
    for r in gets:
        assert r.range is not None
        by_name[r.path.rsplit("/", 1)[1]] = by_name.get(r.path.rsplit("/", 1)[1], 0) + r.range_bytes
    assert middle.path.name in by_name and set(by_name) <= {middle.path.name, last.path.name}
    assert by_name[middle.path.name] < middle.size / 2
    assert by_name.get(last.path.name, 0) < last.size / 2
    # the memory bound holds remotely too: no request larger than the window
    big = DirectRangeReader(uri, storage_config=moto_s3.options, include_headers=False,
                            max_bytes_per_batch=64 * 1024, fail_on_data_loss=True)
    with moto_s3.recording() as requests:
        rows = sum(b.num_rows for b in big.read(TOPIC, 0, 0, PER_PARTITION))
    assert rows == PER_PARTITION
    assert max(r.range_bytes for r in log_gets(requests)) <= 64 * 1024
    # every GET of an object (not a bucket listing) is ranged
    objects = [r for r in requests if r.method == "GET" and r.path.count("/") > 1]
    assert objects and all(r.range is not None for r in objects)


def test_file_uri_reads_like_a_path(spark, logs):
    local, _ = logs
    remote = local_read(spark, local.as_uri())
    assert_df_equality(ordered(remote), ordered(local_read(spark, local)))


def test_export_from_s3_with_progress(spark, logs, moto_s3, tmp_path):
    from spark_kafkalog.jobs.export import export

    _, uri = logs
    reports = []
    result = export(spark, topics=TOPIC, fmt="parquet", output=str(tmp_path / "out"), path=uri,
                    options={**moto_s3.options, "minPartitions": "4"},
                    progress=lambda d, t: reports.append((d, t)))
    assert result.records == 2 * PER_PARTITION
    assert reports[-1] == (2 * PER_PARTITION, 2 * PER_PARTITION)
    assert [d for d, _ in reports] == sorted(d for d, _ in reports)
    assert spark.read.parquet(str(tmp_path / "out")).count() == 2 * PER_PARTITION


def test_missing_bucket_prefix_and_bad_credentials_are_clear_errors(spark, logs, moto_s3, tmp_path, capsys):
    from spark_kafkalog.cli.main import main

    with pytest.raises(OSError, match=r"log directory s3://no-such-bucket/x cannot be listed: .*NO_SUCH_BUCKET"):
        DirectOffsetReader("s3://no-such-bucket/x", moto_s3.options)
    with pytest.raises(FileNotFoundError, match=r"log directory s3://logs/nothing-here does not exist"):
        DirectOffsetReader("s3://logs/nothing-here", moto_s3.options)
    with pytest.raises(Exception, match=r"s3://no-such-bucket/x cannot be listed"):
        s3_read(spark, moto_s3, "s3://no-such-bucket/x").count()
    code = main(["export", "--topic", TOPIC, "--format", "csv", "--output", str(tmp_path / "o"),
                 "--path", "s3://no-such-bucket/x",
                 *[a for k, v in moto_s3.options.items() for a in ("--option", f"{k}={v}")]])
    err = capsys.readouterr().err
    assert code == 1 and "log directory s3://no-such-bucket/x cannot be listed" in err, err
    assert moto_s3.options["fs.s3a.secret.key"] not in err
    with pytest.raises(ValueError, match="give both fs.s3a.access.key and fs.s3a.secret.key"):
        DirectOffsetReader(logs[1], {"fs.s3a.access.key": "AK", "fs.s3a.endpoint": moto_s3.endpoint})

    secured = MotoServer(tmp_path / "auth", auth=True).start()
    try:
        with pytest.raises(OSError, match=r"cannot be listed: .*INVALID_ACCESS_KEY_ID"):
            DirectOffsetReader("s3://logs/backups/kafka-logs", secured.options)
    finally:
        secured.stop()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_ranges_cut_at_the_index_read_exactly_the_offsets_of_a_full_read(logs, moto_s3, data):
    """segment_ranges ends a range at the offset index's checked position past its end
    offset: for any [start, end), the rows equal those of a read to the log end, cut; and
    the object store's read-ahead windows (64 KiB, batches cut by window ends) give the
    same rows as the local mapped ones."""
    local, uri = logs
    reader = DirectRangeReader(str(local), include_headers=True, max_bytes_per_batch=64 * 1024,
                               fail_on_data_loss=True)
    full = _full_rows(str(local))
    partition = data.draw(st.integers(0, 1))
    start = data.draw(st.integers(0, PER_PARTITION - 1))
    end = data.draw(st.integers(start + 1, PER_PARTITION))
    rows = [r for b in reader.read(TOPIC, partition, start, end) for r in b.to_pylist()]
    assert rows == [r for r in full[partition] if start <= r["offset"] < end]
    remote = DirectRangeReader(uri, include_headers=True, max_bytes_per_batch=64 * 1024,
                               fail_on_data_loss=True, storage_config=moto_s3.options)
    assert [r for b in remote.read(TOPIC, partition, start, end) for r in b.to_pylist()] == rows
    ranges = LogDirReader(str(local)).partition(TOPIC, partition).segment_ranges(start, end)
    last = ranges[-1]
    with open(last.path, "rb") as f:
        f.seek(last.end_position)
        head = f.read(LOG_ENTRY_PREFIX.size)
    if len(head) == LOG_ENTRY_PREFIX.size and last.end_position < last.size:
        assert LOG_ENTRY_PREFIX.unpack(head)[0] >= end  # the cut is past every wanted offset


_FULL: dict = {}


def _full_rows(local: str) -> dict:
    if local not in _FULL:
        reader = DirectRangeReader(local, include_headers=True, max_bytes_per_batch=1 << 24,
                                   fail_on_data_loss=True)
        _FULL[local] = {p: [r for b in reader.read(TOPIC, p, 0, PER_PARTITION) for r in b.to_pylist()]
                        for p in (0, 1)}
    return _FULL[local]


def test_some_ranges_are_cut_before_their_segments_end(logs):
    local, _ = logs
    reader = LogDirReader(str(local)).partition(TOPIC, 0)
    seg = reader.segments[1]
    ranges = reader.segment_ranges(seg.base_offset + 60, seg.base_offset + 70)
    assert len(ranges) == 1 and 0 < ranges[0].start_position < ranges[0].end_position < seg.size


def test_offset_pushdown_prunes_segments_too(spark, logs, moto_s3):
    local, uri = logs
    first = PER_PARTITION - 200
    with pushdown(spark, True):
        query = lambda df: df.where(df["offset"] >= first).select("partition", "offset")
        with moto_s3.recording() as requests:
            rows = query(s3_read(spark, moto_s3, uri)).collect()
        assert sorted(rows) == sorted(query(local_read(spark, local)).collect())
    assert len(rows) == 2 * 200
    for p in (0, 1):
        segments = LogDirReader(uri, moto_s3.options).partition(TOPIC, p).segments
        read = {r.path.rsplit("/", 1)[1] for r in log_gets(requests) if f"/{TOPIC}-{p}/" in r.path}
        assert read == {s.path.name for i, s in enumerate(segments)
                        if i + 1 == len(segments) or segments[i + 1].base_offset > first}


def test_streaming_available_now_from_s3(spark, logs, moto_s3, tmp_path):
    _, uri = logs
    reader = spark.readStream.format("kafkalog").option("subscribe", TOPIC).option(
        "startingOffsets", "earliest").option("maxOffsetsPerTrigger", "2500")
    for k, v in moto_s3.options.items():
        reader = reader.option(k, v)
    q = (reader.load(uri).select("partition", "offset").writeStream.format("parquet")
         .option("path", str(tmp_path / "out")).option("checkpointLocation", str(tmp_path / "chk"))
         .trigger(availableNow=True).start())
    q.awaitTermination(300)
    assert q.exception() is None
    offsets = sorted((r.partition, r.offset) for r in spark.read.parquet(str(tmp_path / "out")).collect())
    assert offsets == [(p, o) for p in (0, 1) for o in range(PER_PARTITION)]
    assert len([p for p in q.recentProgress if p["numInputRows"]]) >= 3  # several micro-batches


def test_hadoop_s3a_keys_map_onto_pyarrow():
    from broker.log.storage import LOCAL, open_location, s3_options

    assert s3_options({"fs.s3a.endpoint": "http://minio:9000/", "fs.s3a.path.style.access": "true",
                       "fs.s3a.endpoint.region": "eu-west-1", "fs.s3a.access.key": "A",
                       "fs.s3a.secret.key": "S", "fs.s3a.session.token": "T"}) == {
        "scheme": "http", "endpoint_override": "minio:9000", "force_virtual_addressing": False,
        "region": "eu-west-1", "access_key": "A", "secret_key": "S", "session_token": "T"}
    assert s3_options({"fs.s3a.endpoint": "minio:9000", "fs.s3a.connection.ssl.enabled": "false",
                       "fs.s3a.region": "r", "fs.s3a.path.style.access": "false"}) == {
        "scheme": "http", "endpoint_override": "minio:9000", "region": "r", "force_virtual_addressing": True}
    assert s3_options({"fs.s3a.aws.credentials.provider":
                       "org.apache.hadoop.fs.s3a.AnonymousAWSCredentialsProvider"}) == {"anonymous": True}
    assert s3_options({}) == {}
    with pytest.raises(ValueError, match="fs.s3a.session.token needs"):
        s3_options({"fs.s3a.session.token": "T"})
    with pytest.raises(ValueError, match="expected 'true' or 'false'"):
        s3_options({"fs.s3a.path.style.access": "yes"})
    assert open_location("file:///var/kafka%20logs") == (LOCAL, __import__("pathlib").Path("/var/kafka logs"))
    with pytest.raises(ValueError, match="a file: URI names a local path"):
        open_location("file://otherhost/x")
