"""Start, stop and restart the broker process (``broker/__main__.py``, ``broker.py``,
``metadata.py``): the ready line, SIGTERM/SIGINT clean shutdown with its marker, topics,
configs and data surviving clean and unclean (SIGKILL) restarts, producer ids that never
repeat, the registry's reconciliation with the partition directories, and the CLI's
one-line configuration errors with exit code 1.
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from broker.protocol import ApiKey
from broker.record.batch import encode_batch
from tests.support.broker import ROOT, RawClient

pytestmark = pytest.mark.timeout(180)

REGISTRY = "kafkalog-topics.json"
CLEAN_MARKER = ".kafka_cleanshutdown"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create(c: RawClient, name: str, partitions: int = 1, configs: dict | None = None) -> None:
    r = c.request(ApiKey.CREATE_TOPICS, 4, {"topics": [
        {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
         "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}], "timeout_ms": 1000})
    assert r.topics[0].error_code == 0, r


def produce(c: RawClient, topic: str, partition: int, values: list[bytes]) -> int:
    batch = encode_batch([(None, v, 1_700_000_000_000) for v in values])
    r = c.request(ApiKey.PRODUCE, 8, {"transactional_id": None, "acks": -1, "timeout_ms": 1000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]})
    p = r.responses[0].partition_responses[0]
    assert p.error_code == 0
    return p.base_offset


def end_offsets(c: RawClient, topic: str, partitions: int) -> list[int]:
    r = c.request(ApiKey.LIST_OFFSETS, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": p, "current_leader_epoch": -1, "timestamp": -1}
                                       for p in range(partitions)]}]})
    return [p.offset for p in r.topics[0].partitions]


def fetch_values(c: RawClient, topic: str, partition: int) -> list[bytes]:
    from broker.record.batch import iter_batches

    r = c.request(ApiKey.FETCH, 11, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 24,
                                     "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [
                                         {"topic": topic, "partitions": [
                                             {"partition": partition, "current_leader_epoch": -1, "fetch_offset": 0,
                                              "log_start_offset": -1, "partition_max_bytes": 1 << 24}]}],
                                     "forgotten_topics_data": [], "rack_id": ""})
    data = bytes(r.responses[0].partitions[0].records)
    return [rec.value for _, records in iter_batches(data) for rec in records] if data else []


def describe(c: RawClient, topic: str) -> dict[str, tuple[str, int]]:
    r = c.request(ApiKey.DESCRIBE_CONFIGS, 1, {"resources": [
        {"resource_type": 2, "resource_name": topic, "configuration_keys": None}], "include_synonyms": False})
    assert r.results[0].error_code == 0
    return {e.name: (e.value, e.config_source) for e in r.results[0].configs}


def topics(c: RawClient) -> dict[str, int]:
    r = c.request(ApiKey.METADATA, 8, {"topics": None, "allow_auto_topic_creation": False,
                                       "include_topic_authorized_operations": False})
    return {t.name: len(t.partitions) for t in r.topics}


def client(b) -> RawClient:
    return RawClient(b.host, b.port, "restart-test")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_ready_line_and_clean_shutdown(broker_factory, sig):
    b = broker_factory()
    out = b.stdout_text().splitlines()
    assert len(out) == 1
    assert out[0] == (f"[KafkaServer id=1] started (kafkalog) listening on PLAINTEXT://127.0.0.1:{b.port} "
                      f"log.dirs={b.log_dir}")
    b.proc.send_signal(sig)
    assert b.proc.wait(30) == 0
    assert (b.log_dir / CLEAN_MARKER).exists()
    assert "shut down completed" in b.stderr_text()


def test_topics_configs_and_data_survive_clean_restart(broker_factory):
    b = broker_factory({"num.partitions": "2"})
    topic = unique("keep")
    with client(b) as c:
        create(c, topic, 3, {"retention.ms": "7200000", "message.timestamp.type": "LogAppendTime"})
        for p in range(3):
            produce(c, topic, p, [f"{p}-{i}".encode() for i in range(5)])
        auto = unique("auto")
        c.request(ApiKey.METADATA, 8, {"topics": [{"name": auto}], "allow_auto_topic_creation": True,
                                       "include_topic_authorized_operations": False})
        before_topics, before_configs = topics(c), describe(c, topic)
    assert before_topics[auto] == 2
    assert b.restart().port
    with client(b) as c:
        assert topics(c) == before_topics
        assert describe(c, topic) == before_configs
        assert describe(c, topic)["retention.ms"] == ("7200000", 1)
        assert end_offsets(c, topic, 3) == [5, 5, 5]
        assert fetch_values(c, topic, 1) == [f"1-{i}".encode() for i in range(5)]
        assert produce(c, topic, 1, [b"more"]) == 5
    registry = json.loads((b.log_dir / REGISTRY).read_text())
    assert registry["topics"][topic]["configs"] == {"retention.ms": "7200000",
                                                    "message.timestamp.type": "LogAppendTime"}
    assert registry["topics"][topic]["partitions"] == 3


def test_data_survives_sigkill(broker_factory):
    b = broker_factory()
    topic = unique("crash")
    with client(b) as c:
        create(c, topic, 2)
        for i in range(20):
            produce(c, topic, i % 2, [f"v{i}-{j}".encode() for j in range(10)])
        pid_before = c.request(ApiKey.INIT_PRODUCER_ID, 1, {"transactional_id": None,
                                                            "transaction_timeout_ms": -1}).producer_id
    b.kill()
    assert not (b.log_dir / CLEAN_MARKER).exists()
    b.start()
    assert "clean shutdown: False" in b.stderr_text()
    with client(b) as c:
        assert end_offsets(c, topic, 2) == [100, 100]
        assert len(fetch_values(c, topic, 0)) == 100
        pid_after = c.request(ApiKey.INIT_PRODUCER_ID, 1, {"transactional_id": None,
                                                           "transaction_timeout_ms": -1}).producer_id
    assert pid_after > pid_before  # ids never repeat, even after a crash


def test_deleted_topic_stays_deleted_and_strays_are_removed(broker_factory):
    b = broker_factory()
    keep, gone = unique("keep"), unique("gone")
    with client(b) as c:
        create(c, keep)
        create(c, gone, 2)
        produce(c, gone, 0, [b"x"])
        r = c.request(ApiKey.DELETE_TOPICS, 3, {"topic_names": [gone], "timeout_ms": 1000})
        assert r.responses[0].error_code == 0
    b.stop()
    # an interrupted deletion leaves a partition directory the registry no longer lists
    shutil.copytree(b.log_dir / f"{keep}-0", b.log_dir / f"{gone}-0")
    b.start()
    with client(b) as c:
        names = topics(c)
    assert keep in names and gone not in names
    assert not (b.log_dir / f"{gone}-0").exists()


def test_log_dirs_without_registry_are_adopted(broker_factory):
    b = broker_factory()
    topic = unique("adopt")
    with client(b) as c:
        create(c, topic, 3)
        produce(c, topic, 2, [b"a", b"b"])
    b.stop()
    (b.log_dir / REGISTRY).unlink()  # as in a directory written by Apache Kafka
    b.start()
    with client(b) as c:
        assert topics(c)[topic] == 3
        assert fetch_values(c, topic, 2) == [b"a", b"b"]
    assert json.loads((b.log_dir / REGISTRY).read_text())["topics"][topic]["partitions"] == 3


def test_two_log_dirs(broker_factory, tmp_path):
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    b = broker_factory({"log.dirs": ",".join(map(str, dirs))})
    topic = unique("spread")
    with client(b) as c:
        create(c, topic, 4)
        for p in range(4):
            produce(c, topic, p, [b"p%d" % p])
    assert all((d / REGISTRY).exists() for d in dirs)
    assert all(any(d.glob(f"{topic}-*")) for d in dirs)
    b.restart()
    with client(b) as c:
        assert end_offsets(c, topic, 4) == [1, 1, 1, 1]


def test_auto_create_disabled_and_delete_disabled(broker_factory):
    b = broker_factory({"auto.create.topics.enable": "false", "delete.topic.enable": "false"})
    with client(b) as c:
        r = c.request(ApiKey.METADATA, 8, {"topics": [{"name": "nope"}], "allow_auto_topic_creation": True,
                                           "include_topic_authorized_operations": False})
        assert r.topics[0].error_code == 3
        create(c, "kept")
        r = c.request(ApiKey.DELETE_TOPICS, 3, {"topic_names": ["kept"], "timeout_ms": 1000})
        assert r.responses[0].error_code == 73  # TOPIC_DELETION_DISABLED


def run_cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "broker", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


@pytest.mark.parametrize("override, key", [
    ("log.segment.bytes=abc", "log.segment.bytes"),
    ("log.segment.bytes=65536", "log.segment.bytes"),  # Kafka 4: at least 1 MiB
    ("log.cleaner.min.cleanable.ratio=1.5", "log.cleaner.min.cleanable.ratio"),
    ("compression.zstd.level=30", "compression.zstd.level"),
    ("num.partitions=0", "num.partitions"),
    ("log.retention.hours=soon", "log.retention.hours"),
    ("listeners=nowhere", "listeners"),
    ("log.cleanup.policy=shred", "log.cleanup.policy"),
    ("node.id=-3", "node.id"),
    ("default.replication.factor=3", "default.replication.factor"),
])
def test_cli_bad_config_one_line_exit_1(override, key, tmp_path):
    r = run_cli("--override", f"log.dirs={tmp_path}/logs", "--override", override)
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: Invalid value") and key in lines[0], r.stderr
    assert r.stdout == ""
    assert not (tmp_path / "logs").exists()


def test_cli_missing_file_and_port_in_use(tmp_path):
    r = run_cli(str(tmp_path / "missing.properties"))
    assert r.returncode == 1 and r.stderr.startswith("error: cannot read")
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    try:
        port = busy.getsockname()[1]
        r = run_cli("--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                    "--override", f"log.dirs={tmp_path}/logs")
    finally:
        busy.close()
    assert r.returncode == 1
    assert r.stderr.strip().splitlines()[-1] == (
        f"error: cannot listen on PLAINTEXT://127.0.0.1:{port}: address already in use (another broker "
        f"or program holds the port; set listeners= to another port)")


def test_second_broker_on_a_used_port_names_the_address(broker_factory, tmp_path):
    first = broker_factory()
    r = run_cli("--override", f"listeners=PLAINTEXT://127.0.0.1:{first.port}",
                "--override", f"log.dirs={tmp_path}/second-logs")
    assert r.returncode != 0 and r.stdout == ""
    errors = [line for line in r.stderr.splitlines() if "error" in line.lower() or "Traceback" in line]
    assert errors == [f"error: cannot listen on PLAINTEXT://127.0.0.1:{first.port}: address already in use "
                      f"(another broker or program holds the port; set listeners= to another port)"], r.stderr
    assert first.alive()


def test_conf_server_properties_and_console_script(tmp_path):
    """conf/server.properties parses and starts (on a free port here); the console
    script is the same entry point."""
    props = tmp_path / "server.properties"
    text = (ROOT / "conf" / "server.properties").read_text()
    props.write_text(text.replace("listeners=PLAINTEXT://localhost:9092", "listeners=PLAINTEXT://127.0.0.1:0"))
    script = Path(sys.executable).parent / "kafkalog-broker"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "broker"]
    proc = subprocess.Popen([*cmd, str(props)], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        line = proc.stdout.readline()
        assert "started (kafkalog) listening on PLAINTEXT://127.0.0.1:" in line, proc.stderr.read()
        assert f"log.dirs={tmp_path / 'data' / 'kafka-logs'}" in line
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    assert (tmp_path / "data" / "kafka-logs" / CLEAN_MARKER).exists()


def test_idle_connections_are_closed(broker_factory):
    b = broker_factory({"connections.max.idle.ms": "400"})
    with client(b) as busy, client(b) as idle:
        assert topics(idle) == {}
        for _ in range(6):  # activity keeps a connection open
            assert topics(busy) == {}
            __import__("time").sleep(0.15)
        assert idle.is_closed_by_peer(timeout=3)
        assert topics(busy) == {}
