"""Stitched reads (issue 21): ``path`` (the cluster's remote storage) and
``kafka.bootstrap.servers`` given together. A real broker subprocess tiers a topic's
segments to a remote directory and deletes them locally; Spark (local mode) reads every
offset below the local log start from the remote directory and the rest from the broker:

- the plan: each range's pieces are contiguous, cover it exactly, the store's piece is
  [log start, local log start) and the brokers' the rest; a partition that was never
  tiered is read from the brokers alone;
- batch reads give the same rows as network mode (offsets 0..N-1, values, timestamps),
  also split (minPartitions) and from a timestamp (the broker's lookup in its remote
  segments' time indexes);
- the store's pieces read with the broker stopped (the same rows: the object store alone);
- a remote location without the partition, or whose manifests name another topic id (a
  re-created topic), falls back to the brokers (a warning), so no offset is lost or wrong;
- streaming (Trigger.AvailableNow, several micro-batches), restarted from its checkpoint
  after more records were produced and tiered: every offset exactly once;
- ``kafkalog export`` with both a cluster and a path;
- ``stitch`` itself, for any bounds (hypothesis).
The S3 variant (moto in server mode) is in tests/test_tiered_storage_s3.py.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_kafkalog.options import parse_options
from spark_kafkalog.readers.batch import KafkaLogBatchReader
from spark_kafkalog.readers.stitched import BROKERS, STORE, stitch
from tests.support.broker import BrokerProcess
from tests.support.workload import wait_for

confluent_kafka = pytest.importorskip("confluent_kafka")

TOPIC = "stitched"
TS0 = 1_650_000_000_000
N0 = 240  # records in partition 0 (tiered)
N1 = 8    # records in partition 1 (one segment, the active one: never tiered)


def _produce(bootstrap: str, partition: int, first: int, count: int) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                                         "batch.num.messages": 1})
    for i in range(first, first + count):
        producer.produce(TOPIC, key=f"k{i % 13}".encode(), value=f"v{partition}-{i}".encode(),
                         partition=partition, timestamp=TS0 + i)
    assert producer.flush(30) == 0


def _manifests(remote: Path, partition: int) -> list[Path]:
    return sorted((remote / f"{TOPIC}-{partition}").glob("*.remote-segment.json"))


def _local_logs(broker: BrokerProcess, partition: int) -> list[Path]:
    return sorted((broker.log_dir / f"{TOPIC}-{partition}").glob("*.log"))


def _tiered(broker: BrokerProcess, remote: Path, minimum: int) -> bool:
    return len(_manifests(remote, 0)) >= minimum and len(_local_logs(broker, 0)) <= 2


def _tiering_broker(tmp: Path, storage_uri: str, partitions: int, **overrides: str) -> BrokerProcess:
    """A started broker tiering ``storage_uri``, with the topic (1-KiB segments, local
    retention 1 byte: every closed segment goes remote and is deleted locally)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    broker = BrokerProcess(tmp, {
        "remote.log.storage.system.enable": "true", "rsm.config.storage.uri": storage_uri,
        "remote.log.manager.task.interval.ms": "200", "log.retention.check.interval.ms": "200",
        **overrides}).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, partitions, 1, config={
            "remote.storage.enable": "true", "internal.segment.bytes": "1024",
            "local.retention.bytes": "1"})])[TOPIC].result(30)
    except BaseException:
        broker.stop()
        raise
    return broker


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A broker whose topic's partition 0 is tiered (most segments only remote); yields
    (broker, remote directory)."""
    tmp = tmp_path_factory.mktemp("stitched")
    remote = tmp / "remote"
    broker = _tiering_broker(tmp, str(remote), 2)
    try:
        _produce(broker.bootstrap, 0, 0, N0)
        _produce(broker.bootstrap, 1, 0, N1)
        assert wait_for(lambda: _tiered(broker, remote, 5), 120), "segments never tiered"
        yield broker, remote
    finally:
        broker.stop()


def _options(broker: BrokerProcess, remote, **extra) -> dict:
    return {"subscribe": TOPIC, "kafka.bootstrap.servers": broker.bootstrap, "path": str(remote),
            **extra}


def _plan(options: dict):
    return KafkaLogBatchReader(parse_options(options)).partitions()


def _rows(df) -> list[tuple]:
    return sorted((r.partition, r.offset, bytes(r.value), r.timestamp.timestamp())
                  for r in df.select("partition", "offset", "value", "timestamp").collect())


def _local_log_start(broker: BrokerProcess) -> int:
    return int(_local_logs(broker, 0)[0].name[:20])


def test_the_plan_reads_cold_offsets_from_the_store_and_the_rest_from_the_brokers(cluster):
    broker, remote = cluster
    parts = {p.partition: p for p in _plan(_options(broker, remote))}
    local = _local_log_start(broker)
    assert local > 0
    p0 = parts[0]
    assert (p0.start, p0.end) == (0, N0)
    assert p0.pieces[0] == (STORE, 0, p0.pieces[0][2])
    assert p0.pieces[0][2] <= local  # the store only for offsets the broker no longer keeps
    assert p0.pieces[-1][0] == BROKERS and p0.pieces[-1][2] == N0
    assert all(a[2] == b[1] for a, b in zip(p0.pieces, p0.pieces[1:]))  # contiguous
    assert parts[1].pieces == ((BROKERS, 0, N1),)  # never tiered: the brokers alone
    # network and direct modes have no pieces
    network = _options(broker, remote)
    del network["path"]
    assert all(p.pieces is None for p in _plan(network))


def test_batch_read_equals_network_mode(spark, cluster):
    broker, remote = cluster
    stitched = spark.read.format("kafkalog").options(**_options(broker, remote)).load()
    network = (spark.read.format("kafkalog").option("subscribe", TOPIC)
               .option("kafka.bootstrap.servers", broker.bootstrap).load())
    rows = _rows(stitched)
    assert [(p, o) for p, o, _, _ in rows] == [(0, i) for i in range(N0)] + [(1, i) for i in range(N1)]
    assert all(v == f"v{p}-{o}".encode() and ts * 1000 == TS0 + o for p, o, v, ts in rows)
    assert rows == _rows(network)


def test_split_and_timestamp_bounded_reads(spark, cluster):
    broker, remote = cluster
    split = spark.read.format("kafkalog").options(**_options(broker, remote, minPartitions="7")).load()
    assert split.rdd.getNumPartitions() >= 7
    assert [o for p, o, _, _ in _rows(split) if p == 0] == list(range(N0))
    pieces = [p.pieces for p in _plan(_options(broker, remote, minPartitions="7")) if p.partition == 0]
    assert sum(1 for ps in pieces for s, _, _ in ps if s == STORE) >= 2  # several tasks read the store
    start = 17  # a timestamp inside the remote segments: the broker looks it up remotely
    bounded = spark.read.format("kafkalog").options(**_options(
        broker, remote, startingOffsetsByTimestamp=f'{{"{TOPIC}": {{"0": {TS0 + start}, "1": {TS0}}}}}')).load()
    assert [o for p, o, _, _ in _rows(bounded) if p == 0] == list(range(start, N0))
    first = [p for p in _plan(_options(broker, remote, startingOffsetsByTimestamp=(
        f'{{"{TOPIC}": {{"0": {TS0 + start}, "1": {TS0}}}}}'))) if p.partition == 0][0]
    assert first.pieces[0] == (STORE, start, first.pieces[0][2])


def test_the_store_pieces_read_with_the_broker_stopped(tmp_path_factory):
    """The store's part needs no broker: its pieces read from the remote directory alone."""
    from spark_kafkalog.readers import read_range

    tmp = tmp_path_factory.mktemp("stitched-stopped")
    remote = tmp / "remote"
    broker = _tiering_broker(tmp, str(remote), 1)
    try:
        _produce(broker.bootstrap, 0, 0, N0)
        assert wait_for(lambda: _tiered(broker, remote, 5), 120)
        options = parse_options(_options(broker, remote))
        (part,) = KafkaLogBatchReader(options).partitions()
    finally:
        broker.stop()
    store = [p for p in part.pieces if p[0] == STORE]
    assert store and store[0][1] == 0
    got = [o for batch in read_range(options, TOPIC, 0, 0, 0, store) for o in batch.column("offset").to_pylist()]
    assert got == list(range(store[0][1], store[-1][2]))


def test_a_location_without_the_partition_falls_back_to_the_brokers(spark, cluster, tmp_path, caplog):
    broker, _ = cluster
    empty = tmp_path / "empty-remote"
    empty.mkdir()
    with caplog.at_level(logging.WARNING, logger="spark_kafkalog"):
        parts = {p.partition: p for p in _plan(_options(broker, empty))}
    assert parts[0].pieces == ((BROKERS, 0, N0),)
    assert "holds no segment of it: they are fetched from the brokers" in caplog.text
    df = spark.read.format("kafkalog").options(**_options(broker, empty)).load()
    assert [o for p, o, _, _ in _rows(df) if p == 0] == list(range(N0))


def test_a_store_of_another_topic_incarnation_is_never_read(cluster, tmp_path, caplog):
    """The manifests name the topic id: a copy whose manifests name another id (a topic
    deleted and re-created under the same name, another cluster) is not read."""
    import json
    import shutil
    import uuid

    from broker.log.files import encode_topic_id

    broker, remote = cluster
    other = tmp_path / "other"
    shutil.copytree(remote, other)
    manifests = sorted((other / f"{TOPIC}-0").glob("*.remote-segment.json"))
    first = json.loads(manifests[0].read_text())
    assert first["topic_id"]  # the broker writes the topic id into each manifest
    same = {p.partition: p for p in _plan(_options(broker, other))}
    assert same[0].pieces[0][0] == STORE  # the same id: read from the copy
    for path in manifests:
        doc = json.loads(path.read_text())
        doc["topic_id"] = encode_topic_id(uuid.uuid4())
        path.write_text(json.dumps(doc))
    with caplog.at_level(logging.WARNING, logger="spark_kafkalog"):
        parts = {p.partition: p for p in _plan(_options(broker, other))}
    assert parts[0].pieces == ((BROKERS, 0, N0),)
    assert "deleted and re-created, or another cluster" in caplog.text


def test_a_cluster_without_listoffsets_v8_is_read_over_the_wire(cluster):
    """Kafka before 3.5 has no ListOffsets v8 (and no tiered storage): the local log
    start is then the log start, so every offset is fetched."""
    from spark_kafkalog.planning import plan_ranges
    from spark_kafkalog.readers.stitched import StitchedOffsetReader

    broker, remote = cluster
    options = parse_options(_options(broker, remote))
    reader = StitchedOffsetReader(options)
    try:
        ranges = plan_ranges(options, reader)  # connects: the versions are negotiated
        assert reader.pieces(ranges)[0][0][0] == STORE  # v8+: the cold offsets from the store
        for conn in reader._network.client.client._conns.values():  # as a Kafka 3.0-3.4 broker
            if conn.api_versions:
                conn.api_versions[2] = (1, 7)
        assert reader.pieces(ranges) == [((BROKERS, r.start, r.end),) for r in ranges]
    finally:
        reader.close()


def test_streaming_available_now_restarts_exactly_once(spark, cluster, tmp_path):
    broker, remote = cluster
    out, chk = str(tmp_path / "out"), str(tmp_path / "chk")

    def run() -> None:
        q = (spark.readStream.format("kafkalog").options(**_options(
                broker, remote, startingOffsets="earliest", maxOffsetsPerTrigger="70")).load()
             .select("partition", "offset", "value").writeStream.format("parquet")
             .option("path", out).option("checkpointLocation", chk)
             .trigger(availableNow=True).start())
        q.awaitTermination(300)
        assert q.exception() is None
        return q

    q = run()
    assert len([p for p in q.recentProgress if p["numInputRows"]]) >= 3  # several micro-batches
    more = 120
    manifests = len(_manifests(remote, 0))
    _produce(broker.bootstrap, 0, N0, more)
    assert wait_for(lambda: len(_manifests(remote, 0)) > manifests + 3, 120)
    run()
    rows = sorted((r.partition, r.offset, bytes(r.value)) for r in spark.read.parquet(out).collect())
    expected = [(0, i, f"v0-{i}".encode()) for i in range(N0 + more)] + \
        [(1, i, f"v1-{i}".encode()) for i in range(N1)]
    assert rows == expected


def test_export_stitched(spark, cluster, tmp_path):
    from spark_kafkalog.jobs.export import export

    broker, remote = cluster
    result = export(spark, topics=TOPIC, fmt="parquet", output=str(tmp_path / "out"),
                    bootstrap_servers=broker.bootstrap, path=str(remote))
    assert result.records >= N0 + N1
    offsets = sorted((r.partition, r.offset) for r in spark.read.parquet(str(tmp_path / "out")).collect())
    assert offsets[:N0] == [(0, i) for i in range(N0)]
    assert len(offsets) == len(set(offsets))


bound = st.integers(0, 60)


@given(start=bound, size=bound, store=st.none() | st.tuples(bound, bound), local=bound)
def test_stitch_pieces_cover_the_range_exactly(start, size, store, local):
    end = start + size
    if store is not None:
        store = (min(store), max(store))
    pieces = stitch(start, end, store, local)
    assert all(s < e for _, s, e in pieces)
    covered = [o for _, s, e in pieces for o in range(s, e)]
    assert covered == list(range(start, end))  # no offset twice, none skipped, in order
    for source, s, e in pieces:
        if source == STORE:
            assert store[0] <= s and e <= min(store[1], local)
    if store is None or local <= start:
        assert all(source == BROKERS for source, _, _ in pieces)


def test_stitched_from_s3_reads_cold_segments_from_the_store_not_the_broker(spark, moto_s3, tmp_path):
    """On an S3-protocol server (moto, over HTTP): the broker tiers to s3://B/cluster;
    Spark's stitched read of a copy (s3://B/copy) gets every row while the server sees
    segment reads under copy/ only (the broker was never asked for the cold offsets),
    where a network-mode read makes the broker read them under cluster/; with the broker
    stopped, direct mode reads the tiered prefix itself."""
    import pyarrow.fs as pafs

    fs = moto_s3.filesystem()
    fs.create_dir("stitch-bucket")
    broker = _tiering_broker(tmp_path, "s3://stitch-bucket/cluster", 1,
                             **{f"rsm.config.{k}": v for k, v in moto_s3.options.items()})
    try:
        _produce(broker.bootstrap, 0, 0, N0)
        # settled: every closed segment copied and deleted locally (only the active one left)
        assert wait_for(lambda: len(_local_logs(broker, 0)) == 1, 120), "segments never tiered"
        pafs.copy_files("stitch-bucket/cluster", "stitch-bucket/copy", source_filesystem=fs,
                        destination_filesystem=fs)
        expected = [(0, i, f"v0-{i}".encode(), (TS0 + i) / 1000) for i in range(N0)]

        def read(**options):
            return _rows(spark.read.format("kafkalog").options(subscribe=TOPIC, **options).load())

        with moto_s3.recording() as stitched_requests:
            assert read(**{"kafka.bootstrap.servers": broker.bootstrap, "path": "s3://stitch-bucket/copy",
                           **moto_s3.options}) == expected
        with moto_s3.recording() as network_requests:
            assert read(**{"kafka.bootstrap.servers": broker.bootstrap}) == expected

        def segment_reads(requests, prefix):
            return [r for r in requests if r.method == "GET" and r.path.endswith(".log")
                    and r.path.startswith(f"/stitch-bucket/{prefix}/")]
        assert segment_reads(stitched_requests, "copy")
        assert not segment_reads(stitched_requests, "cluster")
        assert segment_reads(network_requests, "cluster")  # the broker serves them from S3
    finally:
        broker.stop()
    tiered = read(path="s3://stitch-bucket/cluster", **moto_s3.options)  # the broker stopped
    assert tiered and tiered == expected[:len(tiered)]
    assert len(tiered) > N0 // 2
