"""Tiered storage on an S3-protocol server: moto in server mode (a subprocess speaking S3
over HTTP, so pyarrow's AWS SDK client sends the requests it sends to a cloud bucket).

- the ``FileSystemRemoteStorageManager`` on ``s3://bucket/prefix`` with Hadoop's
  ``fs.s3a.*`` keys: copy (data objects, then the manifest), listing, ranged reads,
  garbage sweep, deletion (manifest first) and partition deletion;
- a real broker with ``rsm.config.storage.uri=s3://...``: segments tiered to the bucket and
  deleted locally, confluent-kafka reads every record from offset 0, also after a restart.

The server is the session's ``moto_s3`` (``tests/support/object_store.py``).
"""

from __future__ import annotations

import pytest

pytest.importorskip("moto")
confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from broker.log.remote.metadata import RemoteLogSegmentMetadata  # noqa: E402
from broker.log.remote.storage_manager import (  # noqa: E402
    FileSystemRemoteStorageManager,
    IndexType,
    LogSegmentData,
)
from tests.support.broker import BrokerProcess  # noqa: E402
from tests.support.workload import wait_for_outcome  # noqa: E402

BUCKET = "tiered-bucket"
N = 150


@pytest.fixture(scope="module")
def s3(moto_s3):
    """(endpoint, fs.s3a options, pyarrow S3FileSystem) of the session's moto server
    (``tests/support/object_store.py``) with the bucket."""
    fs = moto_s3.filesystem()
    fs.create_dir(BUCKET)
    return moto_s3.endpoint, moto_s3.options, fs


def _names(fs, prefix: str) -> list[str]:
    import pyarrow.fs as pafs
    infos = fs.get_file_info(pafs.FileSelector(prefix, allow_not_found=True, recursive=True))
    return sorted(i.base_name for i in infos if i.type == pafs.FileType.File)


def test_storage_manager_round_trip_on_s3(s3, tmp_path) -> None:
    _, options, fs = s3
    rsm = FileSystemRemoteStorageManager(f"s3://{BUCKET}/unit", options)
    log_bytes = bytes(range(256)) * 40
    (tmp_path / "00000000000000000100.log").write_bytes(log_bytes)
    (tmp_path / "00000000000000000100.index").write_bytes(b"\0" * 8)
    (tmp_path / "00000000000000000100.timeindex").write_bytes(b"\1" * 12)
    meta = RemoteLogSegmentMetadata(
        "t", 0, "id1", 100, 199, 5, len(log_bytes), {0: 100},
        ("00000000000000000100.log", "00000000000000000100.index", "00000000000000000100.timeindex",
         "00000000000000000100.leader-epoch-checkpoint"))
    data = LogSegmentData(tmp_path / "00000000000000000100.log", tmp_path / "00000000000000000100.index",
                          tmp_path / "00000000000000000100.timeindex", None, None, b"0\n1\n0 100\n")
    rsm.copy_log_segment_data(meta, data)
    rsm.copy_log_segment_data(meta, data)  # idempotent
    assert rsm.list_segments("t", 0) == [meta]
    assert rsm.fetch_log_segment(meta, 1000, 1099) == log_bytes[1000:1100]
    assert rsm.fetch_index(meta, IndexType.TIMESTAMP) == b"\1" * 12
    assert rsm.fetch_index(meta, IndexType.LEADER_EPOCH) == b"0\n1\n0 100\n"
    fs.open_output_stream(f"{BUCKET}/unit/t-0/00000000000000000200.log").close()  # a crashed copy
    assert rsm.sweep_garbage("t", 0) == ["00000000000000000200.log"]
    rsm.delete_log_segment_data(meta)
    assert rsm.list_segments("t", 0) == [] and _names(fs, f"{BUCKET}/unit/t-0") == []
    rsm.copy_log_segment_data(meta, data)
    rsm.delete_partition("t", 0)
    assert _names(fs, f"{BUCKET}/unit") == []


def test_a_broker_tiers_to_s3_and_serves_offset_zero(s3, tmp_path) -> None:
    _, options, fs = s3
    overrides = {"remote.log.storage.system.enable": "true",
                 "rsm.config.storage.uri": f"s3://{BUCKET}/cluster1",
                 "remote.log.manager.task.interval.ms": "200",
                 **{f"rsm.config.{k}": v for k, v in options.items()}}
    broker = BrokerProcess(tmp_path, overrides).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("s3t", 1, 1, config={
            "remote.storage.enable": "true", "internal.segment.bytes": "1024",
            "local.retention.bytes": "1"})])["s3t"].result(30)
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0,
                                             "batch.num.messages": 1})
        for i in range(N):
            producer.produce("s3t", value=f"s3-{i}".encode())
        assert producer.flush(30) == 0
        local = broker.log_dir / "s3t-0"

        def tiered() -> bool:
            manifests = [n for n in _names(fs, f"{BUCKET}/cluster1/s3t-0") if n.endswith(".remote-segment.json")]
            return len(manifests) >= 4 and len(list(local.glob("*.log"))) <= 2
        wait_for_outcome(tiered, "segments tiered to S3 and deleted locally")
        assert "00000000000000000000.log" in _names(fs, f"{BUCKET}/cluster1/s3t-0")
        for attempt in range(2):
            consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "s3"})
            consumer.assign([TopicPartition("s3t", 0, 0)])
            out: list = []
            for _ in range(400):
                if len(out) >= N:
                    break
                out += [(m.offset(), m.value()) for m in consumer.consume(100, timeout=0.5) if m.error() is None]
            consumer.close()
            assert out == [(i, f"s3-{i}".encode()) for i in range(N)]
            if attempt == 0:
                broker.restart()
    finally:
        broker.stop()


def test_partition_deletion_takes_the_manifests_first_then_the_rest_in_bulk(s3, moto_s3, tmp_path) -> None:
    """delete_partition (topic deletion, remote storage turned off) on S3: a DELETE per
    manifest first (no manifest outlives an object it names), then the data objects in
    DeleteObjects requests (POST ?delete) rather than a request per object."""
    _, options, fs = s3
    rsm = FileSystemRemoteStorageManager(f"s3://{BUCKET}/bulk", options)
    for base in range(0, 500, 100):
        name = f"{base:020d}"
        (tmp_path / f"{name}.log").write_bytes(b"x" * 100)
        (tmp_path / f"{name}.index").write_bytes(b"\0" * 8)
        (tmp_path / f"{name}.timeindex").write_bytes(b"\1" * 12)
        meta = RemoteLogSegmentMetadata("t", 0, f"id{base}", base, base + 99, 5, 100, {0: base},
                                        (f"{name}.log", f"{name}.index", f"{name}.timeindex",
                                         f"{name}.leader-epoch-checkpoint"))
        rsm.copy_log_segment_data(meta, LogSegmentData(tmp_path / f"{name}.log", tmp_path / f"{name}.index",
                                                       tmp_path / f"{name}.timeindex", None, None, b"0\n0\n"))
    assert len(_names(fs, f"{BUCKET}/bulk/t-0")) == 25
    with moto_s3.recording() as requests:
        rsm.delete_partition("t", 0)
    assert _names(fs, f"{BUCKET}/bulk") == []
    deletes = [r.path for r in requests if r.method == "DELETE"]
    manifest_deletes = [p for p in deletes if p.endswith(".remote-segment.json")]
    assert len(manifest_deletes) == 5
    assert not [p for p in deletes if p.endswith(".log")]  # the data went in bulk
    first_bulk = next(i for i, r in enumerate(requests) if r.method == "POST")
    last_manifest = max(i for i, r in enumerate(requests) if r.method == "DELETE" and r.path in manifest_deletes)
    assert last_manifest < first_bulk
