"""In-process tests of ``broker.server.metadata`` (topic registry and TopicManager),
``handlers.producer_id.ProducerIdManager`` and ``KafkaBroker`` embedding (port 0,
advertised listeners, config validation naming the server.properties key).
"""

from __future__ import annotations

import json
import uuid

import pytest

from broker.config import ConfigError
from broker.log import files
from broker.log.errors import KafkaStorageError
from broker.protocol import ApiKey, ErrorCode
from broker.server import KafkaBroker
from broker.server.errors import ApiError
from broker.server.handlers.producer_id import BLOCK_SIZE, PRODUCER_IDS_FILE, ProducerIdManager
from broker.server.metadata import REGISTRY_FILE, TopicInfo, TopicRegistry
from tests.support.broker import RawClient


def test_registry_highest_epoch_wins_and_bad_copies_are_skipped(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    reg = TopicRegistry(dirs, 1)
    tid = uuid.uuid4()
    reg.save({"t": TopicInfo("t", tid, 2, {"retention.ms": "5"})}, dirs)
    reg.save({"t": TopicInfo("t", tid, 3, {})}, dirs[:1])  # b and c missed this change
    (dirs[2] / REGISTRY_FILE).write_text("{not json")
    loaded = TopicRegistry(dirs, 1)
    loaded.load()
    assert loaded.found and loaded.epoch == 2
    assert loaded.topics == {"t": TopicInfo("t", tid, 3, {})}
    data = json.loads((dirs[0] / REGISTRY_FILE).read_text())
    assert data["topics"]["t"]["topic_id"] == files.encode_topic_id(tid)


def test_registry_save_fails_only_when_no_directory_takes_it(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    reg = TopicRegistry([blocker / "x"], 1)
    with pytest.raises(KafkaStorageError):
        reg.save({}, [blocker / "x"])
    assert reg.epoch == 0


def test_producer_ids_reserve_blocks_before_use(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    for d in dirs:
        d.mkdir()
    m = ProducerIdManager(dirs, lambda: dirs)
    m.load()
    ids = [m.generate() for _ in range(BLOCK_SIZE + 1)]
    assert ids == list(range(BLOCK_SIZE + 1))
    assert json.loads((dirs[1] / PRODUCER_IDS_FILE).read_text())["next_block_start"] == 2 * BLOCK_SIZE
    again = ProducerIdManager(dirs, lambda: dirs)  # a restart (clean or not)
    again.load()
    assert again.generate() == 2 * BLOCK_SIZE
    (dirs[0] / PRODUCER_IDS_FILE).write_text("garbage")
    with pytest.raises(KafkaStorageError):
        ProducerIdManager(dirs, lambda: dirs).load()


@pytest.fixture
def broker(tmp_path):
    b = KafkaBroker({"listeners": "PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.1:0",
                     "advertised.listeners": "PLAINTEXT://kafka.example:0,OTHER://127.0.0.1:9999",
                     "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
                     "log.dirs": str(tmp_path / "logs"), "num.partitions": "3"})
    b.start()
    yield b
    b.shutdown()


def test_embedded_broker_ports_and_advertised_listeners(broker):
    host, port = broker.bound_address()
    other = broker.bound_address("OTHER")
    assert host == "127.0.0.1" and port > 0 and other[1] > 0 and other[1] != port
    assert broker.bootstrap_servers == f"127.0.0.1:{port}"
    with RawClient("127.0.0.1", port) as c:
        r = c.request(ApiKey.METADATA, 8, {"topics": None, "allow_auto_topic_creation": False,
                                           "include_topic_authorized_operations": False})
        assert [(b.host, b.port) for b in r.brokers] == [("kafka.example", port)]
    with RawClient("127.0.0.1", other[1]) as c:
        r = c.request(ApiKey.METADATA, 1, {"topics": None})
        assert [(b.host, b.port) for b in r.brokers] == [("127.0.0.1", 9999)]


def test_topic_manager_rules(broker):
    tm = broker.topics
    assert tm.resolve_partitions(-1, -1, None) == 3
    with pytest.raises(ApiError) as e:
        tm.resolve_partitions(1, 2, None)
    assert e.value.code == ErrorCode.INVALID_REPLICATION_FACTOR
    with pytest.raises(ApiError) as e:
        tm.validate_configs({"segment.bytes": "10"})
    assert e.value.code == ErrorCode.INVALID_CONFIG and "segment.bytes" in e.value.message
    info = tm.create_topic("t.x", 2, {"segment.bytes": "1048576"})
    assert broker.log_manager.get_log("t.x", 1).config.segment_bytes == 1048576
    assert tm.log_config("t.x").segment_bytes == 1048576
    with pytest.raises(ApiError) as e:
        tm.create_topic("t_x", 1, {})
    assert e.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION
    tm.create_partitions("t.x", 4, None)
    assert tm.get("t.x").partitions == 4 and broker.log_manager.get_log("t.x", 3) is not None
    assert broker.log_manager.get_log("t.x", 3).topic_id == info.topic_id
    tm.delete_topic("t.x")
    assert tm.get("t.x") is None and broker.log_manager.get_log("t.x", 0) is None
    assert tm.auto_create("fresh").partitions == 3


@pytest.mark.parametrize("props, key", [
    ({"log.segment.bytes": "1"}, "log.segment.bytes"),
    ({"log.retention.minutes": "x"}, "log.retention.minutes"),
    ({"message.max.bytes": "-5"}, "message.max.bytes"),
    ({"advertised.listeners": "NOPE://h:1"}, "advertised.listeners"),
    ({"listeners": "A://h:1,A://h:2"}, "listeners"),
    ({"socket.request.max.bytes": "0"}, "socket.request.max.bytes"),
])
def test_config_errors_name_the_server_key(tmp_path, props, key):
    with pytest.raises(ConfigError) as e:
        KafkaBroker({"log.dirs": str(tmp_path), **props})
    assert e.value.key == key
    assert not any(tmp_path.iterdir())
