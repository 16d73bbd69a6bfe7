"""Tiered storage (KIP-405) end to end: a real broker subprocess with a local-directory
remote store (``rsm.config.storage.uri`` a path; pyarrow's LocalFileSystem), real clients.

- the broker tiers closed segments and deletes them locally; the remote prefix holds
  Kafka's file names plus one manifest per segment;
- confluent-kafka, kafka-python and aiokafka consumers read every record from offset 0 (the
  broker serves the remote segments), ListOffsets earliest is 0 and a timestamp lookup
  into the remote range finds its record; a restart keeps all of it (manifests listed);
- crash points (``KAFKALOG_TEST_RSM_CRASH``: the broker SIGKILLs itself after a copy's
  data objects and before its manifest, or after a deletion's manifest and before its
  data): after a restart nothing is lost, no manifest names a missing object, the garbage
  is swept and the copy redone;
- remote retention (retention.bytes) deletes remote segments and advances the log start;
  deleting the topic deletes its remote segments;
- ListOffsets v10 from our client (-2, -4 EARLIEST_LOCAL, -5 LATEST_TIERED, -3, by time;
  UnsupportedVersionError naming -4/-5 against a broker that stops at v7), confluent-kafka's
  AdminClient.list_offsets (v7) and kafka-python (v10) on the tiered topic;
- KIP-950 through IncrementalAlterConfigs: remote.log.copy.disable (a read-only tier),
  turning remote storage off with remote.log.delete.on.disable (remote segments deleted,
  log start offset at the local log start, across a restart), Kafka's refusals; and
  remote.storage.enable refused on a broker with remote.log.storage.system.enable=false, and
  such a broker refusing to start over a tiered topic's log directory (Kafka's check);
- Kafka's tiered-storage quick start configuration (LocalTieredStorage, rsm.config.dir,
  the metadata manager's keys) working unchanged.

An S3 round trip (moto's server) is in tests/test_tiered_storage_s3.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from broker.log.remote.storage_manager import CRASH_ENV  # noqa: E402
from tests.support.broker import BrokerProcess  # noqa: E402
from tests.support.workload import wait_for_outcome  # noqa: E402

TS0 = 1_600_000_000_000
N = 240
TOPIC = "tiered"


def _broker(tmp: Path, interval_ms: int = 200, **overrides: str) -> BrokerProcess:
    return BrokerProcess(tmp, {
        "remote.log.storage.system.enable": "true",
        "rsm.config.storage.uri": str(tmp / "remote"),
        "remote.log.manager.task.interval.ms": str(interval_ms),
        "log.retention.check.interval.ms": "200",
        **overrides,
    })


def tiered_topic_broker(tmp: Path, **overrides: str) -> BrokerProcess:
    """A started ``_broker`` (with ``overrides``) whose TOPIC is produced and tiered."""
    broker = _broker(tmp, **overrides).start()
    try:
        _create_and_produce(broker)
        wait_for_outcome(lambda: _tiered(broker), "segments copied to remote storage and deleted locally")
    except BaseException:
        broker.stop()
        raise
    return broker


def test_remote_storage_metrics_on_the_metrics_endpoint(tmp_path) -> None:
    """Kafka's remote storage metrics (KIP-405, KIP-963) on /metrics: the copies counted
    (requests and bytes equal the manifests and their sizes), the remote size and segment
    count per partition, no copy lag once tiering caught up, and a consumer's remote reads
    counted as remote fetches."""
    import re
    import urllib.request

    broker = tiered_topic_broker(tmp_path, **{"kafkalog.metrics.port": "0"})
    try:
        url = re.search(r"metrics served at (http://\S+/metrics)", broker.stderr_text()).group(1)

        def scrape() -> dict[str, float]:
            with urllib.request.urlopen(url, timeout=10) as r:
                text = r.read().decode()
            return {m.group(1): float(m.group(2)) for m in re.finditer(
                rf'^(kafka_\w+)\{{(?:partition="0",)?topic="{TOPIC}"\}} (\S+)$', text, re.M)}

        def caught_up() -> bool:
            figures = scrape()
            return figures.get("kafka_log_remote_copy_lag_segments") == 0 and \
                figures.get("kafka_log_remote_log_metadata_count") == len(_manifests(broker))
        wait_for_outcome(caught_up, "every closed segment copied, as the metrics say")
        manifests = _manifests(broker)
        size = sum(m["segment_size_in_bytes"] for m in manifests)
        figures = scrape()
        assert figures["kafka_server_remote_copy_requests_total"] == len(manifests)
        assert figures["kafka_server_remote_copy_bytes_total"] == size
        assert figures["kafka_server_remote_copy_errors_total"] == 0
        assert figures["kafka_log_remote_log_size_bytes"] == size
        assert figures["kafka_log_remote_copy_lag_bytes"] == 0
        assert figures.get("kafka_server_remote_fetch_requests_total", 0) == 0
        assert _consume_confluent(broker) == _expected()
        figures = scrape()
        assert figures["kafka_server_remote_fetch_requests_total"] >= 1
        remote_values = sum(1 for i in range(N) if i <= manifests[-1]["end_offset"])
        assert figures["kafka_server_remote_fetch_bytes_total"] >= remote_values * len(b"value-0")
        assert figures["kafka_server_remote_fetch_errors_total"] == 0
        # an object gone from under the broker (someone cleaned the bucket): reads of it fail, counted
        (_remote_dir(broker) / f"{0:020d}.log").unlink()
        consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "gone",
                                             "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition(TOPIC, 0, 0)])

            def failed_read_counted() -> bool:
                consumer.poll(0.05)
                return scrape()["kafka_server_remote_fetch_errors_total"] >= 1
            wait_for_outcome(failed_read_counted, "a failed remote read counted", attempts=300)
        finally:
            consumer.close()
        assert broker.alive() and "Traceback" not in broker.stderr_text()
        assert f"ERROR fetch of {TOPIC}-0 at 0 failed: read of " in broker.stderr_text()  # one line, the store's words
    finally:
        broker.stop()


def _create_and_produce(broker: BrokerProcess, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1, config={
        "remote.storage.enable": "true", "internal.segment.bytes": "1024",
        "local.retention.bytes": "1", **config})])[TOPIC].result(30)
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0,
                                         "batch.num.messages": 1})
    errors: list = []
    for i in range(N):
        producer.produce(TOPIC, value=f"value-{i}".encode(), timestamp=TS0 + i,
                         on_delivery=lambda err, msg: err and errors.append(err))
        producer.poll(0)
    assert producer.flush(30) == 0 and errors == []


def _remote_dir(broker: BrokerProcess) -> Path:
    return broker.workdir / "remote" / f"{TOPIC}-0"


def _manifests(broker: BrokerProcess) -> list[dict]:
    """The partition's manifests, oldest first; one the broker deletes (retention, a
    deletion) between the listing and its read is left out."""
    d = _remote_dir(broker)
    out = []
    for p in sorted(d.glob("*.remote-segment.json")) if d.is_dir() else ():
        try:
            out.append(json.loads(p.read_text()))
        except FileNotFoundError:
            continue
    return out


def _local_logs(broker: BrokerProcess) -> list[Path]:
    return sorted((broker.log_dir / f"{TOPIC}-0").glob("*.log"))


def _assert_no_dangling_manifest(broker: BrokerProcess) -> None:
    for manifest in _manifests(broker):
        for name in manifest["objects"]:
            assert (_remote_dir(broker) / name).is_file(), f"manifest names missing {name}"


def _remote_dir_empty(broker: BrokerProcess) -> bool:
    try:
        return not any(_remote_dir(broker).iterdir())
    except FileNotFoundError:  # deleted (or being deleted) whole
        return True


def _tiered(broker: BrokerProcess) -> bool:
    manifests = _manifests(broker)
    return len(manifests) >= 5 and len(_local_logs(broker)) <= 2


def _retention_done(broker: BrokerProcess, retention_bytes: int) -> bool:
    """Remote retention has nothing left to delete (production is over): the whole log
    without its oldest remote segment is within retention.bytes, and tiering is done."""
    manifests = _manifests(broker)
    if not manifests or manifests[0]["base_offset"] == 0 or len(_local_logs(broker)) > 2:
        return False
    try:
        uncopied = sum(p.stat().st_size for p in _local_logs(broker)
                       if int(p.name[:20]) > manifests[-1]["end_offset"])
    except FileNotFoundError:  # copied and deleted locally since the listing: look again
        return False
    total = sum(m["segment_size_in_bytes"] for m in manifests) + uncopied
    return total - manifests[0]["segment_size_in_bytes"] < retention_bytes


def _consume_confluent(broker: BrokerProcess, start: int = 0) -> list[tuple[int, bytes]]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g",
                                         "enable.auto.commit": False, "fetch.max.bytes": 4096,
                                         "message.max.bytes": 4096, "auto.offset.reset": "error",
                                         "max.partition.fetch.bytes": 512})
    try:
        consumer.assign([TopicPartition(TOPIC, 0, start)])
        out: list[tuple[int, bytes]] = []
        for _ in range(400):
            if len(out) >= N - start:
                break
            for msg in consumer.consume(100, timeout=0.5):
                assert msg.error() is None, msg.error()
                out.append((msg.offset(), msg.value()))
        return out
    finally:
        consumer.close()


def _expected(start: int = 0) -> list[tuple[int, bytes]]:
    return [(i, f"value-{i}".encode()) for i in range(start, N)]


@pytest.fixture(scope="module")
def tiered_broker(tmp_path_factory):
    broker = tiered_topic_broker(tmp_path_factory.mktemp("tiered"))
    try:
        yield broker
    finally:
        broker.stop()


def test_segments_are_tiered_with_kafka_file_names_and_manifests(tiered_broker) -> None:
    manifests = _manifests(tiered_broker)
    assert manifests[0]["base_offset"] == 0
    assert all(a["end_offset"] + 1 == b["base_offset"] for a, b in zip(manifests, manifests[1:]))
    assert all(m["state"] == "COPY_SEGMENT_FINISHED" for m in manifests)
    names = {p.name for p in _remote_dir(tiered_broker).iterdir()}
    for m in manifests:
        base = f"{m['base_offset']:020d}"
        assert {base + ".log", base + ".index", base + ".timeindex"} <= names
    local_bases = [int(p.name[:20]) for p in _local_logs(tiered_broker)]
    assert min(local_bases) > 0 and min(local_bases) >= manifests[0]["end_offset"]
    _assert_no_dangling_manifest(tiered_broker)


def test_confluent_kafka_reads_every_record_from_offset_zero(tiered_broker) -> None:
    assert _consume_confluent(tiered_broker) == _expected()
    assert _consume_confluent(tiered_broker, 7)[:3] == _expected(7)[:3]


def test_kafka_python_reads_every_record_from_offset_zero(tiered_broker) -> None:
    kafka = pytest.importorskip("kafka")
    consumer = kafka.KafkaConsumer(bootstrap_servers=tiered_broker.bootstrap, enable_auto_commit=False,
                                   max_partition_fetch_bytes=512, api_version=(2, 5))
    try:
        tp = kafka.TopicPartition(TOPIC, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        out: list[tuple[int, bytes]] = []
        for _ in range(400):
            if len(out) >= N:
                break
            for records in consumer.poll(timeout_ms=500).values():
                out += [(r.offset, r.value) for r in records]
        assert out == _expected()
        assert consumer.beginning_offsets([tp])[tp] == 0
        found = consumer.offsets_for_times({tp: TS0 + 11})[tp]
        assert (found.offset, found.timestamp) == (11, TS0 + 11)
    finally:
        consumer.close()


def test_aiokafka_reads_every_record_from_offset_zero(tiered_broker) -> None:
    aiokafka = pytest.importorskip("aiokafka")
    import asyncio

    async def consume() -> list[tuple[int, bytes]]:
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=tiered_broker.bootstrap, enable_auto_commit=False,
                                             max_partition_fetch_bytes=512)
        await consumer.start()
        try:
            tp = aiokafka.TopicPartition(TOPIC, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            out: list[tuple[int, bytes]] = []
            for _ in range(400):
                if len(out) >= N:
                    break
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    out += [(r.offset, r.value) for r in records]
            return out
        finally:
            await consumer.stop()

    assert asyncio.run(consume()) == _expected()


def test_list_offsets_earliest_and_by_timestamp_in_the_remote_range(tiered_broker) -> None:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": tiered_broker.bootstrap, "group.id": "lo"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10) == (0, N)
        found = consumer.offsets_for_times([TopicPartition(TOPIC, 0, TS0 + 5)], timeout=10)
        assert found[0].offset == 5
    finally:
        consumer.close()


def _all_closed_segments_tiered(broker: BrokerProcess) -> bool:
    """Only the active segment is left locally, and every offset below it is remote."""
    manifests, logs = _manifests(broker), _local_logs(broker)
    return bool(manifests) and len(logs) == 1 and manifests[-1]["end_offset"] + 1 == int(logs[0].name[:20])


def test_our_client_lists_earliest_local_latest_tiered_and_max_timestamp(tiered_broker) -> None:
    """ListOffsets v10 (our client's max): -2 the log start (remote), -4 the local log start,
    -5 the highest remote offset, -3 the newest record, -1 the high watermark."""
    from broker.client.consumer import (
        EARLIEST,
        EARLIEST_LOCAL,
        LATEST,
        LATEST_TIERED,
        MAX_TIMESTAMP,
        ConsumerNetworkClient,
        list_offsets,
    )
    wait_for_outcome(lambda: _all_closed_segments_tiered(tiered_broker), "every closed segment tiered")
    local_start = int(_local_logs(tiered_broker)[0].name[:20])
    highest_remote = _manifests(tiered_broker)[-1]["end_offset"]
    assert 0 < local_start == highest_remote + 1 < N
    tp = (TOPIC, 0)
    with ConsumerNetworkClient({"bootstrap.servers": tiered_broker.bootstrap, "client.id": "lo-ours"}) as client:
        def offset(spec):
            found = list_offsets(client, {tp: spec})[tp]
            return None if found is None else (found.offset, found.timestamp)
        assert offset(EARLIEST) == (0, -1)
        assert offset(EARLIEST_LOCAL) == (local_start, -1)
        assert offset(LATEST_TIERED) == (highest_remote, -1)
        assert offset(MAX_TIMESTAMP) == (N - 1, TS0 + N - 1)
        assert offset(LATEST) == (N, -1)
        assert offset(TS0 + 3) == (3, TS0 + 3)  # in the remote range
        with pytest.raises(ValueError, match="EARLIEST_LOCAL"):
            list_offsets(client, {tp: -6})
        # a broker that serves ListOffsets up to v7 only (Kafka 3.0-3.4): -4 and -5 fail
        # naming the spec instead of being answered as something else; -3 still works
        for conn in client.client._conns.values():
            if conn.api_versions:
                conn.api_versions[2] = (1, 7)
        from broker.client.errors import UnsupportedVersionError
        with pytest.raises(UnsupportedVersionError, match=r"EARLIEST_LOCAL \(-4\) needs v8"):
            list_offsets(client, {tp: EARLIEST_LOCAL})
        with pytest.raises(UnsupportedVersionError, match=r"LATEST_TIERED \(-5\) needs v9"):
            list_offsets(client, {tp: LATEST_TIERED})
        assert offset(MAX_TIMESTAMP) == (N - 1, TS0 + N - 1)
    assert tiered_broker.api_versions_used("lo-ours")["LIST_OFFSETS"] == {7, 10}


def test_confluent_admin_list_offsets_on_a_tiered_topic(tiered_broker) -> None:
    from confluent_kafka.admin import OffsetSpec
    admin = AdminClient({"bootstrap.servers": tiered_broker.bootstrap, "client.id": "lo-ck-admin"})
    tp = TopicPartition(TOPIC, 0)
    for spec, expected in [(OffsetSpec.earliest(), 0), (OffsetSpec.latest(), N),
                           (OffsetSpec.max_timestamp(), N - 1), (OffsetSpec.for_timestamp(TS0 + 9), 9)]:
        result = admin.list_offsets({tp: spec}, request_timeout=30)[tp].result(30)
        assert result.offset == expected, (spec, result)
    assert tiered_broker.api_versions_used("lo-ck-admin")["LIST_OFFSETS"] == {7}  # librdkafka's max


def test_kafka_python_offsets_at_the_version_it_negotiates(tiered_broker) -> None:
    kafka = pytest.importorskip("kafka")
    consumer = kafka.KafkaConsumer(bootstrap_servers=tiered_broker.bootstrap, enable_auto_commit=False,
                                   client_id="lo-kafka-python")
    try:
        tp = kafka.TopicPartition(TOPIC, 0)
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: N}
        found = consumer.offsets_for_times({tp: TS0 + 11})[tp]
        assert (found.offset, found.timestamp) == (11, TS0 + 11)
        found = consumer.offsets_for_times({tp: TS0 + N - 1})[tp]
        assert (found.offset, found.timestamp) == (N - 1, TS0 + N - 1)
        assert consumer.offsets_for_times({tp: TS0 + N})[tp] is None
    finally:
        consumer.close()
    assert tiered_broker.api_versions_used("lo-kafka-python")["LIST_OFFSETS"] == {10}  # flexible, timeout_ms


def test_a_restart_keeps_every_offset_readable(tiered_broker) -> None:
    before = _manifests(tiered_broker)
    tiered_broker.restart()
    assert _manifests(tiered_broker)[:len(before)] == before
    assert _consume_confluent(tiered_broker) == _expected()


def _crash_broker(tmp: Path, monkeypatch, point: str, **config: str) -> BrokerProcess:
    """Produce with tiering idle, then restart with the crash point armed and wait for the
    broker to SIGKILL itself there."""
    broker = _broker(tmp, interval_ms=3_600_000).start()
    _create_and_produce(broker, **config)
    broker.stop()
    broker.overrides["remote.log.manager.task.interval.ms"] = "200"
    monkeypatch.setenv(CRASH_ENV, point)
    try:
        broker.start()
    except RuntimeError:
        pass  # it may die before it is ready
    wait_for_outcome(lambda: broker.proc.poll() is not None, f"the broker killed itself at {point}")
    assert broker.proc.returncode == -9
    monkeypatch.delenv(CRASH_ENV)
    return broker


def test_a_crash_during_a_copy_loses_nothing_and_the_copy_is_redone(tmp_path, monkeypatch) -> None:
    broker = _crash_broker(tmp_path, monkeypatch, "copy")
    assert _manifests(broker) == []
    assert (_remote_dir(broker) / f"{0:020d}.log").is_file()  # data objects without a manifest
    assert len(_local_logs(broker)) > 5  # nothing was deleted locally
    broker.start()
    try:
        wait_for_outcome(lambda: _tiered(broker), "tiering after the crash")
        _assert_no_dangling_manifest(broker)
        assert (_remote_dir(broker) / f"{0:020d}.log").read_bytes()[:8] == bytes(8)  # base offset 0
        assert _consume_confluent(broker) == _expected()
    finally:
        broker.stop()


def test_a_crash_during_a_delete_leaves_only_garbage(tmp_path, monkeypatch) -> None:
    broker = _crash_broker(tmp_path, monkeypatch, "delete", **{"retention.bytes": "4000"})
    manifests = _manifests(broker)
    assert manifests and manifests[0]["base_offset"] > 0  # the first manifest went first ...
    assert (_remote_dir(broker) / f"{0:020d}.log").is_file()  # ... its data not yet
    _assert_no_dangling_manifest(broker)
    # restart with the periodic pass idle: only the startup (sweep, log start offset from the
    # manifests) runs, so further retention cannot move the log start under the reads below
    broker.overrides["remote.log.manager.task.interval.ms"] = "3600000"
    broker.start()
    try:
        assert not (_remote_dir(broker) / f"{0:020d}.log").exists()  # garbage swept at startup
        _assert_no_dangling_manifest(broker)
        consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "d"})
        low, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
        consumer.close()
        assert 0 < low == _manifests(broker)[0]["base_offset"] and high == N
        assert _consume_confluent(broker, low) == _expected(low)
    finally:
        broker.stop()


def test_remote_retention_deletes_remote_segments_and_moves_the_log_start(tmp_path) -> None:
    broker = _broker(tmp_path).start()
    try:
        _create_and_produce(broker, **{"retention.bytes": "4000"})
        wait_for_outcome(lambda: _retention_done(broker, 4000), "remote retention")
        consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "r"})
        low, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
        consumer.close()
        assert low == _manifests(broker)[0]["base_offset"] and high == N
        assert not (_remote_dir(broker) / f"{0:020d}.log").exists()
        assert _consume_confluent(broker, low) == _expected(low)
        # deleting the topic deletes its remote segments
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.delete_topics([TOPIC])[TOPIC].result(30)
        assert _manifests(broker) == []
        assert not _remote_dir(broker).exists() or not any(_remote_dir(broker).iterdir())
    finally:
        broker.stop()


def test_remote_storage_with_compaction_is_refused_and_the_keys_are_described(tiered_broker) -> None:
    from confluent_kafka.admin import ConfigResource
    admin = AdminClient({"bootstrap.servers": tiered_broker.bootstrap})
    future = admin.create_topics([NewTopic("compacted-tier", 1, 1, config={
        "remote.storage.enable": "true", "cleanup.policy": "compact"})])["compacted-tier"]
    with pytest.raises(confluent_kafka.KafkaException) as err:
        future.result(30)
    assert err.value.args[0].code() == confluent_kafka.KafkaError.INVALID_CONFIG
    assert "compacted" in err.value.args[0].str()
    resource = ConfigResource(ConfigResource.Type.TOPIC, TOPIC)
    entries = admin.describe_configs([resource])[resource].result(30)
    assert entries["remote.storage.enable"].value == "true"
    assert entries["local.retention.bytes"].value == "1"
    assert entries["local.retention.ms"].value == "-2"


def test_the_broker_refuses_tiered_storage_without_a_location(tmp_path) -> None:
    from broker.config import ConfigError
    from broker.server.broker import validate_config
    props = {"log.dirs": str(tmp_path / "logs"), "remote.log.storage.system.enable": "true"}
    with pytest.raises(ConfigError, match="rsm.config.storage.uri"):
        validate_config(props)
    with pytest.raises(ConfigError, match="remote.log.storage.manager.class.name"):
        validate_config({**props, "rsm.config.storage.uri": str(tmp_path),
                         "remote.log.storage.manager.class.name": "org.example.Other"})
    config = validate_config({**props, "remote.log.storage.manager.impl.prefix": "tier.",
                              "tier.storage.uri": str(tmp_path / "remote")})
    assert config["remote.log.storage.system.enable"] is True
    with pytest.raises(ConfigError, match="remote.log.metadata.manager.class.name"):  # the manifests are the store
        validate_config({**props, "rsm.config.storage.uri": str(tmp_path),
                         "remote.log.metadata.manager.class.name": "org.example.OtherRlmm"})
    with pytest.raises(ConfigError, match="rsm.config.dir"):  # the message names both location keys
        validate_config({**props, "remote.log.storage.manager.class.name": LOCAL_TIERED_STORAGE})


LOCAL_TIERED_STORAGE = "org.apache.kafka.server.log.remote.storage.LocalTieredStorage"


def test_a_broker_with_tiered_storage_disabled_refuses_to_start_over_tiered_topics(tiered_broker) -> None:
    """Kafka's startup check: the tiered topic's log directory under a broker with
    remote.log.storage.system.enable=false stops the start with Kafka's message naming the
    topic (exit 1, one error line); the same directory with it enabled starts and still
    serves every offset."""
    import subprocess
    import sys
    tiered_broker.stop()
    try:
        disabled = {**tiered_broker.overrides, "remote.log.storage.system.enable": "false"}
        cmd = [sys.executable, "-m", "broker"] + [a for k, v in disabled.items() for a in ("--override", f"{k}={v}")]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=tiered_broker.workdir)
        assert r.returncode == 1, r.stderr[-2000:]
        assert ("You have to delete all topics with the property remote.storage.enable=true before disabling "
                f"tiered storage cluster-wide (topics: {TOPIC})") in r.stderr
        assert "Traceback" not in r.stderr and "started (kafkalog)" not in r.stdout
    finally:
        tiered_broker.start()
    assert _consume_confluent(tiered_broker) == _expected()


def test_kafkas_tiered_storage_quick_start_configuration_works_unchanged(tmp_path) -> None:
    """The server.properties of Kafka's tiered-storage quick start (its LocalTieredStorage
    with rsm.config.dir, the metadata manager's keys, a class path) and its topic
    (segment.bytes=1048576, local.retention.ms=1000): segments are tiered into the
    directory and deleted locally, and a consumer still reads everything from offset 0."""
    remote = tmp_path / "kafka-remote-storage"
    broker = BrokerProcess(tmp_path, {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.path": "/opt/kafka/libs/kafka-storage-test.jar",
        "remote.log.storage.manager.class.name": LOCAL_TIERED_STORAGE,
        "remote.log.storage.manager.impl.prefix": "rsm.config.",
        "remote.log.metadata.manager.impl.prefix": "rlmm.config.",
        "rsm.config.dir": str(remote),
        "rlmm.config.remote.log.metadata.topic.replication.factor": "1",
        "log.retention.check.interval.ms": "1000",
        "remote.log.manager.task.interval.ms": "500",  # Kafka's 30 s default, shortened for the test
    }).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topic = "tieredTopic"
        admin.create_topics([NewTopic(topic, 1, 1, config={
            "remote.storage.enable": "true", "local.retention.ms": "1000",
            "segment.bytes": "1048576"})])[topic].result(30)
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        values = [f"{i:06d}".encode() * 171 for i in range(3500)]  # 1026 bytes each: 3 closed segments
        for v in values:
            producer.produce(topic, v)
            producer.poll(0)
        assert producer.flush(30) == 0
        partition_dir = remote / f"{topic}-0"

        def tiered() -> bool:
            manifests = sorted(partition_dir.glob("*.remote-segment.json")) if partition_dir.is_dir() else []
            local = sorted((broker.log_dir / f"{topic}-0").glob("*.log"))
            return len(manifests) >= 3 and len(local) == 1 and int(local[0].name[:20]) > 0
        wait_for_outcome(tiered, "segments tiered into rsm.config.dir and deleted locally", attempts=600, interval=0.1)
        consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "quick-start",
                                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        try:
            consumer.subscribe([topic])
            got: list[bytes] = []
            for _ in range(120):
                if len(got) >= len(values):
                    break
                for msg in consumer.consume(1000, timeout=0.5):
                    assert msg.error() is None, msg.error()
                    got.append(msg.value())
        finally:
            consumer.close()
        assert got == values
        assert "Traceback" not in broker.stderr_text()
    finally:
        broker.stop()


def test_direct_mode_reads_a_tiered_prefix_and_skips_a_segment_without_its_manifest(tiered_broker, tmp_path) -> None:
    """Issue 21: the remote layout reads like a log directory (broker.log.reader), where a
    segment counts only when its manifest exists (a copy cut short leaves data objects)."""
    import shutil

    from broker.log.reader import LogDirReader
    copy = tmp_path / "prefix"
    shutil.copytree(_remote_dir(tiered_broker), copy / f"{TOPIC}-0")
    manifests = _manifests(tiered_broker)
    assert len(manifests) >= 3
    everything = LogDirReader(copy).partition(TOPIC, 0)
    bases = [s.base_offset for s in everything.segments]
    assert bases == [m["base_offset"] for m in manifests]
    last = manifests[-1]["base_offset"]
    (copy / f"{TOPIC}-0" / f"{last:020d}.remote-segment.json").unlink()  # as after a crash mid-copy
    (copy / f"{TOPIC}-0" / f"{last:020d}.log.tmp-0123").write_bytes(b"partial")
    assert [s.base_offset for s in LogDirReader(copy).partition(TOPIC, 0).segments] == bases[:-1]


def _alter(admin: AdminClient, topic: str, **configs: str) -> None:
    """IncrementalAlterConfigs SET of ``configs`` (dots as underscores) on ``topic``."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
    entries = [ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
               for k, v in configs.items()]
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
    admin.incremental_alter_configs([resource])[resource].result(30)


def _invalid_config(call) -> str:
    with pytest.raises(confluent_kafka.KafkaException) as err:
        call()
    assert err.value.args[0].code() == confluent_kafka.KafkaError.INVALID_CONFIG
    return err.value.args[0].str()


def test_kip_950_copy_disable_then_turning_remote_storage_off(tmp_path) -> None:
    """remote.log.copy.disable / remote.log.delete.on.disable through IncrementalAlterConfigs,
    Kafka's rules and messages; turning remote storage off deletes the remote segments and
    moves the log start offset to the local log start offset, also across a restart."""
    broker = _broker(tmp_path).start()
    try:
        _create_and_produce(broker)
        wait_for_outcome(lambda: _all_closed_segments_tiered(broker), "every closed segment tiered")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        message = _invalid_config(lambda: _alter(admin, TOPIC, remote_storage_enable="false"))
        assert message.startswith("It is invalid to disable remote storage without deleting remote data.")
        message = _invalid_config(lambda: _alter(admin, TOPIC, remote_log_copy_disable="true"))
        assert "the `local.retention.bytes` and `retention.bytes` must be set to the identical value" in message
        # read-only tier: no more copies, every offset still served
        _alter(admin, TOPIC, remote_log_copy_disable="true", local_retention_bytes="-2")
        highest = _manifests(broker)[-1]["end_offset"]
        consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "k"})
        try:
            assert consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10) == (0, N)
        finally:
            consumer.close()
        assert _consume_confluent(broker) == _expected()
        assert _manifests(broker)[-1]["end_offset"] == highest
        # remote storage off, remote data deleted
        _alter(admin, TOPIC, remote_storage_enable="false", remote_log_delete_on_disable="true")
        wait_for_outcome(lambda: _remote_dir_empty(broker), "the remote segments deleted in the background")
        local_start = int(_local_logs(broker)[0].name[:20])
        assert local_start == highest + 1
        for restarted in (False, True):
            if restarted:
                broker.restart()
            consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "k"})
            try:
                assert consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10) == (local_start, N)
            finally:
                consumer.close()
            assert _consume_confluent(broker, local_start) == _expected(local_start)
            assert _remote_dir_empty(broker)
    finally:
        broker.stop()


def test_remote_storage_is_refused_when_the_broker_has_it_disabled(kafka_broker) -> None:
    """remote.log.storage.system.enable=false (the default): remote.storage.enable=true is
    refused at CreateTopics and at (Incremental)AlterConfigs, with Kafka's message."""
    from confluent_kafka.admin import ConfigResource
    disabled = ("Tiered Storage functionality is disabled in the broker. "
                "Topic cannot be configured with remote log storage.")
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    topic = "tier-off-broker"
    assert _invalid_config(lambda: admin.create_topics([NewTopic(topic, 1, 1, config={
        "remote.storage.enable": "true"})])[topic].result(30)) == disabled
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    try:
        assert _invalid_config(lambda: _alter(admin, topic, remote_storage_enable="true")) == disabled
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={"remote.storage.enable": "true"})
        with pytest.deprecated_call():  # confluent-kafka deprecates AlterConfigs, the broker still serves it
            assert _invalid_config(lambda: admin.alter_configs([resource])[resource].result(30)) == disabled
        _alter(admin, topic, remote_storage_enable="false", retention_ms="60000")  # the rest is accepted
        entries = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
        described = next(iter(entries.values())).result(30)
        assert described["remote.storage.enable"].value == "false"
        assert described["retention.ms"].value == "60000"
        assert described["remote.log.copy.disable"].value == "false"
        assert described["remote.log.delete.on.disable"].value == "false"
    finally:
        admin.delete_topics([topic])[topic].result(30)
