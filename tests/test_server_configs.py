"""AlterConfigs (33) and IncrementalAlterConfigs (44) at the protocol level, against the REAL
broker subprocess with ``RawClient``: every operation (SET, DELETE, APPEND, SUBTRACT, the
legacy whole replacement), each validation error with its code and message, validate_only,
BROKER and other resource types, the change taking effect on the live log (LogAppendTime,
max.message.bytes, cleanup.policy=compact, segment.bytes), and the change surviving a clean
restart and a SIGKILL; confluent-kafka's incremental_alter_configs / alter_configs and
kafka-python's alter_configs (both APIs) unmodified. Plus in-process tests (an embedded ``KafkaBroker``) of
``TopicManager.alter_topic_configs`` and the partition logs taking the new config, with a
retention run obeying a changed retention.ms (the broker's retention task first runs 30 s
after startup, too late for a subprocess test).
"""

from __future__ import annotations

import json
import uuid

import pytest

from broker.config import ConfigError
from broker.log.errors import InvalidRecordError
from broker.protocol import ApiKey, ErrorCode
from broker.record.batch import encode_batch
from broker.server import KafkaBroker
from broker.server.errors import ApiError
from broker.server.metadata import REGISTRY_FILE

pytestmark = pytest.mark.timeout(120)

TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
BASE_TS = 1_700_000_000_000  # 2023: older than any retention.ms below


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(c, name: str, partitions: int = 1, configs: dict | None = None) -> None:
    r = c.request(ApiKey.CREATE_TOPICS, 4, {"topics": [
        {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
         "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
        "timeout_ms": 10000, "validate_only": False})
    assert r.topics[0].error_code == 0, r


def incremental(c, resources: list, validate_only: bool = False) -> list:
    """resources: (type, name, [(key, op, value), ...]); the per-resource results."""
    body = {"resources": [{"resource_type": t, "resource_name": n, "configs": [
        {"name": k, "config_operation": op, "value": v} for k, op, v in ops]} for t, n, ops in resources],
        "validate_only": validate_only}
    r = c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, body)
    assert [(x.resource_type, x.resource_name) for x in r.responses] == [(t, n) for t, n, _ in resources]
    return r.responses


def alter(c, resources: list, validate_only: bool = False, version: int = 1) -> list:
    """resources: (type, name, {key: value}); the per-resource results (legacy AlterConfigs)."""
    body = {"resources": [{"resource_type": t, "resource_name": n, "configs": [
        {"name": k, "value": v} for k, v in cfg.items()]} for t, n, cfg in resources],
        "validate_only": validate_only}
    return c.request(ApiKey.ALTER_CONFIGS, version, body).responses


def overrides(c, topic: str) -> dict[str, str]:
    """The topic's TOPIC_CONFIG (override) entries from DescribeConfigs."""
    r = c.request(ApiKey.DESCRIBE_CONFIGS, 1, {"resources": [
        {"resource_type": TOPIC, "resource_name": topic, "configuration_keys": None}], "include_synonyms": False})
    assert r.results[0].error_code == 0, r
    return {e.name: e.value for e in r.results[0].configs if e.config_source == 1}


def produce(c, topic: str, batch: bytes, partition: int = 0):
    r = c.request(ApiKey.PRODUCE, 8, {"transactional_id": None, "acks": 1, "timeout_ms": 10000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]})
    return r.responses[0].partition_responses[0]


def earliest_offset(c, topic: str) -> int:
    r = c.request(ApiKey.LIST_OFFSETS, 1, {"replica_id": -1, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -2}]}]})
    p = r.topics[0].partitions[0]
    assert p.error_code == 0
    return p.offset


# --- the operations ---

def test_incremental_set_delete_append_subtract(raw_client):
    c = raw_client()
    topic = unique("inc")
    create_topic(c, topic, configs={"retention.ms": "3600000", "flush.messages": "5"})
    results = incremental(c, [(TOPIC, topic, [("segment.bytes", SET, "1048576"), ("retention.ms", DELETE, None),
                                              ("cleanup.policy", APPEND, "compact"),
                                              ("max.message.bytes", DELETE, None)])])  # absent: no error
    assert [(r.error_code, r.error_message) for r in results] == [(0, None)]
    assert overrides(c, topic) == {"segment.bytes": "1048576", "cleanup.policy": "delete,compact",
                                   "flush.messages": "5"}
    # APPEND of a value already there changes nothing; SUBTRACT removes items
    assert incremental(c, [(TOPIC, topic, [("cleanup.policy", APPEND, "compact")])])[0].error_code == 0
    assert overrides(c, topic)["cleanup.policy"] == "delete,compact"
    assert incremental(c, [(TOPIC, topic, [("cleanup.policy", SUBTRACT, "delete")])])[0].error_code == 0
    assert overrides(c, topic)["cleanup.policy"] == "compact"


def test_alter_configs_replaces_every_override(raw_client):
    c = raw_client()
    topic = unique("alter")
    create_topic(c, topic, configs={"retention.ms": "3600000", "flush.messages": "5"})
    for version in (0, 1):
        value = str(2_000_000 + version)
        r = alter(c, [(TOPIC, topic, {"segment.bytes": value})], version=version)
        assert [(x.error_code, x.resource_name) for x in r] == [(0, topic)]
        assert overrides(c, topic) == {"segment.bytes": value}  # the others went back to defaults
    assert alter(c, [(TOPIC, topic, {})])[0].error_code == 0
    assert overrides(c, topic) == {}


# --- validation ---

def test_incremental_validation_errors_name_the_key_and_change_nothing(raw_client):
    c = raw_client()
    topic, other = unique("val"), unique("val-ok")
    create_topic(c, topic, configs={"retention.ms": "3600000"})
    create_topic(c, other)
    missing = unique("missing")
    cases = [
        ((TOPIC, topic, [("no.such.config", SET, "1")]), ErrorCode.INVALID_CONFIG, "no.such.config"),
        ((TOPIC, topic, [("retention.ms", SET, "soon")]), ErrorCode.INVALID_CONFIG, "retention.ms"),
        ((TOPIC, topic, [("segment.bytes", SET, "10")]), ErrorCode.INVALID_CONFIG, "segment.bytes"),
        ((TOPIC, topic, [("cleanup.policy", SET, "shred")]), ErrorCode.INVALID_CONFIG, "cleanup.policy"),
        ((TOPIC, topic, [("retention.ms", APPEND, "5")]), ErrorCode.INVALID_CONFIG, "retention.ms"),
        ((TOPIC, topic, [("retention.ms", 9, "5")]), ErrorCode.INVALID_REQUEST, "operation"),
        ((TOPIC, topic, [("retention.ms", SET, None)]), ErrorCode.INVALID_REQUEST, "retention.ms"),
        ((TOPIC, topic, [("retention.ms", SET, "1"), ("retention.ms", DELETE, None)]),
         ErrorCode.INVALID_REQUEST, "duplicate config keys: retention.ms"),
        ((TOPIC, missing, [("retention.ms", SET, "1")]), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, missing),
        ((TOPIC, "bad/name", [("retention.ms", SET, "1")]), ErrorCode.INVALID_TOPIC_EXCEPTION, "bad/name"),
        ((TOPIC, "", [("retention.ms", SET, "1")]), ErrorCode.INVALID_REQUEST, "Default topic"),
        ((BROKER, "1", [("log.retention.ms", SET, "1")]), ErrorCode.INVALID_REQUEST, "log.retention.ms"),
        ((BROKER, "7", [("log.retention.ms", SET, "1")]), ErrorCode.INVALID_REQUEST, "broker id"),
        ((8, "1", [("kafka.server", SET, "DEBUG")]), ErrorCode.INVALID_REQUEST, "resource type 8"),
    ]
    for res, code, text in cases:
        r = incremental(c, [res])[0]
        assert r.error_code == code, (res, r)
        assert text in r.error_message, (res, r.error_message)
    assert overrides(c, topic) == {"retention.ms": "3600000"}
    # in one request a failing resource does not stop the others
    results = incremental(c, [(TOPIC, topic, [("retention.ms", SET, "soon")]),
                              (TOPIC, other, [("retention.ms", SET, "120000")])])
    assert [x.error_code for x in results] == [ErrorCode.INVALID_CONFIG, 0]
    assert overrides(c, topic) == {"retention.ms": "3600000"}
    assert overrides(c, other) == {"retention.ms": "120000"}


def test_duplicate_resources_and_legacy_alter_errors(raw_client):
    c = raw_client()
    topic = unique("dup")
    create_topic(c, topic)
    r = incremental(c, [(TOPIC, topic, [("retention.ms", SET, "1")]), (TOPIC, topic, [("retention.ms", SET, "2")])])
    assert [x.error_code for x in r] == [ErrorCode.INVALID_REQUEST] * 2
    assert "at most once" in r[0].error_message
    r = alter(c, [(TOPIC, topic, {"retention.ms": None}), (TOPIC, unique("nope"), {"retention.ms": "1"}),
                  (BROKER, "", {"num.partitions": "4"})])
    assert [x.error_code for x in r] == [ErrorCode.INVALID_REQUEST, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                         ErrorCode.INVALID_REQUEST]
    assert "retention.ms" in r[0].error_message and "num.partitions" in r[2].error_message
    r = alter(c, [(TOPIC, topic, {"max.message.bytes": "-5"})])
    assert r[0].error_code == ErrorCode.INVALID_CONFIG and "max.message.bytes" in r[0].error_message
    assert overrides(c, topic) == {}


def test_validate_only_changes_nothing(raw_client):
    c = raw_client()
    topic = unique("vo")
    create_topic(c, topic, configs={"retention.ms": "3600000"})
    ok = incremental(c, [(TOPIC, topic, [("retention.ms", DELETE, None), ("segment.bytes", SET, "2000000")])],
                     validate_only=True)
    assert ok[0].error_code == 0
    assert alter(c, [(TOPIC, topic, {"segment.bytes": "2000000"})], validate_only=True)[0].error_code == 0
    bad = incremental(c, [(TOPIC, topic, [("segment.bytes", SET, "x")])], validate_only=True)
    assert bad[0].error_code == ErrorCode.INVALID_CONFIG  # still validated
    assert overrides(c, topic) == {"retention.ms": "3600000"}


# --- the change takes effect on the live log ---

def test_changes_apply_to_the_live_log(kafka_broker, raw_client):
    c = raw_client()
    topic = unique("live")
    create_topic(c, topic)
    keyless = encode_batch([(None, b"v" * 100, BASE_TS)])
    before = produce(c, topic, keyless)
    assert (before.error_code, before.log_append_time_ms) == (0, -1)

    assert incremental(c, [(TOPIC, topic, [("message.timestamp.type", SET, "LogAppendTime")])])[0].error_code == 0
    after = produce(c, topic, keyless)
    assert after.error_code == 0 and after.log_append_time_ms > BASE_TS

    assert incremental(c, [(TOPIC, topic, [("max.message.bytes", SET, "100")])])[0].error_code == 0
    assert produce(c, topic, keyless).error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert incremental(c, [(TOPIC, topic, [("max.message.bytes", DELETE, None)])])[0].error_code == 0

    assert incremental(c, [(TOPIC, topic, [("cleanup.policy", SET, "compact")])])[0].error_code == 0
    assert produce(c, topic, keyless).error_code == ErrorCode.INVALID_RECORD  # compacted: keys required
    assert produce(c, topic, encode_batch([(b"k", b"v", BASE_TS)])).error_code == 0

    # segment.bytes: the next appends roll
    segments = lambda: sorted((kafka_broker.log_dir / f"{topic}-0").glob("*.log"))  # noqa: E731
    before = len(segments())
    assert alter(c, [(TOPIC, topic, {"internal.segment.bytes": "300", "message.timestamp.type": "LogAppendTime"})])[0] \
        .error_code == 0
    for i in range(4):
        assert produce(c, topic, encode_batch([(b"k%d" % i, b"x" * 200, BASE_TS)])).error_code == 0
    assert len(segments()) >= before + 3  # each 200-byte batch but the first rolls a new segment


def test_overrides_survive_a_restart_and_a_crash(broker_factory):
    b = broker_factory()
    topic = unique("persist")
    expected = {"internal.segment.bytes": "400", "retention.ms": "60000", "flush.messages": "1"}
    with _client(b) as c:
        create_topic(c, topic, configs={"internal.segment.bytes": "400", "retention.ms": "-1"})
        r = incremental(c, [(TOPIC, topic, [("retention.ms", SET, "60000"), ("flush.messages", SET, "1")])])
        assert r[0].error_code == 0
        assert overrides(c, topic) == expected
    registry = json.loads((b.log_dir / REGISTRY_FILE).read_text())
    assert registry["topics"][topic]["configs"] == expected
    assert b.stop() == 0
    b.start()
    with _client(b) as c:
        assert overrides(c, topic) == expected
        assert alter(c, [(TOPIC, topic, {"cleanup.policy": "compact"})])[0].error_code == 0
    b.kill()  # no clean shutdown: the registry was written before the answer
    b.start()
    with _client(b) as c:
        assert overrides(c, topic) == {"cleanup.policy": "compact"}
        assert produce(c, topic, encode_batch([(None, b"v", BASE_TS)])).error_code == ErrorCode.INVALID_RECORD
        assert produce(c, topic, encode_batch([(b"k", b"v", BASE_TS)])).error_code == 0


def _client(b):
    from tests.support.broker import RawClient

    return RawClient(b.host, b.port, "configs-test")


# --- real clients ---

def test_confluent_kafka_incremental_and_legacy_alter_configs(kafka_broker, raw_client):
    ck = pytest.importorskip("confluent_kafka.admin")
    from confluent_kafka import KafkaException

    c = raw_client()
    topic = unique("ck-cfg")
    create_topic(c, topic, configs={"flush.messages": "10"})
    admin = ck.AdminClient({"bootstrap.servers": kafka_broker.bootstrap, "client.id": "ck-configs"})
    res = ck.ConfigResource(ck.ResourceType.TOPIC, topic, incremental_configs=[
        ck.ConfigEntry("retention.ms", "12345", incremental_operation=ck.AlterConfigOpType.SET),
        ck.ConfigEntry("cleanup.policy", "compact", incremental_operation=ck.AlterConfigOpType.APPEND),
        ck.ConfigEntry("flush.messages", None, incremental_operation=ck.AlterConfigOpType.DELETE)])
    assert admin.incremental_alter_configs([res])[res].result(10) is None
    assert overrides(c, topic) == {"retention.ms": "12345", "cleanup.policy": "delete,compact"}
    bad = ck.ConfigResource(ck.ResourceType.TOPIC, topic, incremental_configs=[
        ck.ConfigEntry("retention.ms", "soon", incremental_operation=ck.AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as info:
        admin.incremental_alter_configs([bad])[bad].result(10)
    assert info.value.args[0].code() == ErrorCode.INVALID_CONFIG and "retention.ms" in info.value.args[0].str()
    legacy = ck.ConfigResource(ck.ResourceType.TOPIC, topic, set_config={"segment.bytes": "2000000"})
    with pytest.warns(DeprecationWarning):
        assert admin.alter_configs([legacy])[legacy].result(10) is None
    assert overrides(c, topic) == {"segment.bytes": "2000000"}
    used = kafka_broker.api_versions_used("ck-configs")
    assert used["INCREMENTAL_ALTER_CONFIGS"] == {0} and used["ALTER_CONFIGS"] == {1}


def test_kafka_python_alter_configs(kafka_broker, raw_client):
    kadmin = pytest.importorskip("kafka.admin")
    c = raw_client()
    topic = unique("kp-cfg")
    create_topic(c, topic, configs={"flush.messages": "10"})
    client = kadmin.KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap, client_id="kp-configs")
    try:
        resource = lambda cfg: kadmin.ConfigResource(kadmin.ConfigResourceType.TOPIC, topic, configs=cfg)  # noqa: E731
        assert client.alter_configs([resource({"retention.ms": "777"})]) == {"topic": {topic: "OK"}}
        assert overrides(c, topic) == {"flush.messages": "10", "retention.ms": "777"}
        failed = client.alter_configs([resource({"retention.ms": "bad"})])["topic"][topic]
        assert "InvalidConfigurationError" in failed and "retention.ms" in failed
        # the legacy API: kafka-python re-sends the other overrides itself
        assert client.alter_configs([resource({"segment.bytes": "3000000"})], incremental=False) == \
            {"topic": {topic: "OK"}}
        assert overrides(c, topic) == {"flush.messages": "10", "retention.ms": "777", "segment.bytes": "3000000"}
    finally:
        client.close()
    used = kafka_broker.api_versions_used("kp-configs")
    assert used["INCREMENTAL_ALTER_CONFIGS"] == {0} and used["ALTER_CONFIGS"] == {1}


# --- in process: TopicManager.alter_topic_configs and the log's update_config ---

def test_topic_manager_alter_updates_registry_and_partition_logs(tmp_path):
    props = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "logs")}
    broker = KafkaBroker(props)
    broker.start()
    try:
        tm = broker.topics
        tm.create_topic("t", 2, {"retention.ms": "1000"})
        logs = [tm.get_log("t", p) for p in range(2)]
        old = tm.log_config("t")
        assert old.retention_ms == 1000 and all(lg.config is old for lg in logs)

        # validate_only and a failing update change nothing
        tm.alter_topic_configs("t", lambda cur: {**cur, "internal.segment.bytes": "500"}, validate_only=True)
        with pytest.raises(ApiError) as bad:
            tm.alter_topic_configs("t", lambda cur: {**cur, "segment.bytes": "ten"})
        assert bad.value.code == ErrorCode.INVALID_CONFIG and "segment.bytes" in bad.value.message
        with pytest.raises(ApiError) as unknown:
            tm.alter_topic_configs("ghost", lambda cur: {})
        assert unknown.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert tm.get("t").configs == {"retention.ms": "1000"} and tm.log_config("t") is old

        info = tm.alter_topic_configs("t", lambda cur: {"internal.segment.bytes": "500", "cleanup.policy": "compact",
                                                        "message.timestamp.type": "LogAppendTime"})
        assert info.configs == tm.get("t").configs == {"internal.segment.bytes": "500", "cleanup.policy": "compact",
                                                         "message.timestamp.type": "LogAppendTime"}
        new = tm.log_config("t")
        assert (new.retention_ms, new.segment_bytes, new.compact) == (604800000, 500, True)  # 1000 dropped
        assert all(lg.config is new for lg in logs)  # the live logs took the new config
        lg = logs[0]
        with pytest.raises(InvalidRecordError):
            lg.append_as_leader(encode_batch([(None, b"v", BASE_TS)]))
        appended = lg.append_as_leader(encode_batch([(b"k", b"v" * 300, BASE_TS)]))
        assert appended.log_append_time > BASE_TS
        lg.append_as_leader(encode_batch([(b"k", b"v" * 300, BASE_TS)]))
        assert lg.num_segments == 2  # internal.segment.bytes=500 rolled

        # retention.ms: the next retention run obeys the new value
        tm.create_topic("r", 1, {"internal.segment.bytes": "400", "retention.ms": "-1"})
        lg = tm.get_log("r", 0)
        for i in range(6):
            lg.append_as_leader(encode_batch([(b"k", b"x" * 200, BASE_TS + i)]))
        lg.update_high_watermark(lg.log_end_offset)  # what the produce path does for one replica
        broker.log_manager.cleanup_logs()
        assert lg.log_start_offset == 0
        tm.alter_topic_configs("r", lambda cur: {**cur, "retention.ms": "60000"})
        broker.log_manager.cleanup_logs()
        assert lg.log_start_offset > 0 and lg.num_segments < 6  # 2023 records are older than 60 s
    finally:
        broker.shutdown()
    again = KafkaBroker(props)
    again.start()
    try:
        assert again.topics.get("t").configs["internal.segment.bytes"] == "500"
        assert again.topics.get_log("t", 1).config.compact
    finally:
        again.shutdown()


# --- Kafka 4's ranges and valid values (issue 15) ---

# (key, invalid value, what the message says): each refused with INVALID_CONFIG by
# CreateTopics, AlterConfigs and IncrementalAlterConfigs, as Kafka 4's LogConfig refuses it.
INVALID_VALUES = [
    ("segment.bytes", "65536", "at least 1048576"),
    ("segment.ms", "0", "at least 1"),
    ("segment.jitter.ms", "-1", "at least 0"),
    ("segment.index.bytes", "3", "at least 4"),
    ("index.interval.bytes", "-1", "at least 0"),
    ("flush.messages", "0", "at least 1"),
    ("flush.ms", "-1", "at least 0"),
    ("retention.ms", "-2", "at least -1"),
    ("max.message.bytes", "-1", "at least 0"),
    ("file.delete.delay.ms", "-1", "at least 0"),
    ("min.insync.replicas", "0", "at least 1"),
    ("min.cleanable.dirty.ratio", "1.5", "[0, 1]"),
    ("min.cleanable.dirty.ratio", "-0.1", "[0, 1]"),
    ("delete.retention.ms", "-1", "at least 0"),
    ("min.compaction.lag.ms", "-1", "at least 0"),
    ("max.compaction.lag.ms", "0", "at least 1"),
    ("message.timestamp.type", "BrokerTime", "CreateTime, LogAppendTime"),
    ("message.timestamp.before.max.ms", "-1", "at least 0"),
    ("message.timestamp.after.max.ms", "-1", "at least 0"),
    ("cleanup.policy", "delete,shred", "delete, compact"),
    ("cleanup.policy", "compact,compact", "must not be duplicated"),
    ("compression.type", "brotli", "uncompressed"),
    ("compression.gzip.level", "10", "[1, 9]"),
    ("compression.lz4.level", "18", "[1, 17]"),
    ("compression.zstd.level", "23", "[-131072, 22]"),
    ("preallocate", "maybe", "boolean"),
    ("internal.segment.bytes", "10", "at least 14"),
]


def _create(c, name: str, configs: dict) -> object:
    r = c.request(ApiKey.CREATE_TOPICS, 4, {"topics": [
        {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [],
         "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
        "timeout_ms": 10000, "validate_only": False})
    return r.topics[0]


def test_invalid_values_get_invalid_config_naming_key_and_constraint(raw_client):
    c = raw_client()
    topic = unique("ranges")
    create_topic(c, topic, configs={"retention.ms": "1000"})
    for key, value, constraint in INVALID_VALUES:
        created = _create(c, unique("bad"), {key: value})
        legacy = alter(c, [(TOPIC, topic, {key: value})])[0]
        inc = incremental(c, [(TOPIC, topic, [(key, SET, value)])])[0]
        for r in (created, legacy, inc):
            assert r.error_code == ErrorCode.INVALID_CONFIG, (key, value, r)
            assert key in r.error_message and constraint in r.error_message, (key, r.error_message)
    assert overrides(c, topic) == {"retention.ms": "1000"}  # nothing changed
    # Kafka's cross-key check (LogConfig.validateValues)
    created = _create(c, unique("lag"), {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})
    assert created.error_code == ErrorCode.INVALID_CONFIG and "max.compaction.lag.ms (5)" in created.error_message
    # the edges are accepted
    ok = {"segment.bytes": "1048576", "min.cleanable.dirty.ratio": "1", "retention.ms": "-1",
          "cleanup.policy": "compact,delete", "compression.type": "zstd", "compression.zstd.level": "-5",
          "segment.index.bytes": "4096", "max.message.bytes": "0"}
    assert _create(c, unique("edges"), ok).error_code == 0


def test_batch_larger_than_the_segment_is_record_list_too_large(raw_client):
    c = raw_client()
    topic = unique("seg")
    create_topic(c, topic, configs={"internal.segment.bytes": "1000"})
    r = produce(c, topic, encode_batch([(b"k", b"v" * 2000, BASE_TS)]))
    assert r.error_code == ErrorCode.RECORD_LIST_TOO_LARGE
    assert produce(c, topic, encode_batch([(b"k", b"v" * 100, BASE_TS)])).error_code == 0
    # max.message.bytes stays MESSAGE_TOO_LARGE
    assert incremental(c, [(TOPIC, topic, [("max.message.bytes", SET, "50")])])[0].error_code == 0
    assert produce(c, topic, encode_batch([(b"k", b"v" * 100, BASE_TS)])).error_code == ErrorCode.MESSAGE_TOO_LARGE


def test_internal_segment_bytes_is_listed_only_when_set(raw_client):
    c = raw_client()
    plain, small = unique("plain"), unique("small")
    create_topic(c, plain)
    create_topic(c, small, configs={"internal.segment.bytes": "4096"})

    def names(topic):
        r = c.request(ApiKey.DESCRIBE_CONFIGS, 1, {"resources": [
            {"resource_type": TOPIC, "resource_name": topic, "configuration_keys": None}],
            "include_synonyms": False})
        return {e.name: e.value for e in r.results[0].configs}
    assert "internal.segment.bytes" not in names(plain) and "segment.bytes" in names(plain)
    assert names(small)["internal.segment.bytes"] == "4096"


def test_our_admin_client_gets_invalid_config(kafka_broker):
    from broker.client.admin import AdminClient, AlterConfigOp, ConfigResource, InvalidConfigurationError, NewTopic
    with AdminClient({"bootstrap.servers": kafka_broker.bootstrap, "client.id": "cfg-ranges"}) as admin:
        topic = unique("adm-range")
        with pytest.raises(InvalidConfigurationError, match="segment.bytes.*at least 1048576"):
            admin.create_topics([NewTopic(topic, 1, configs={"segment.bytes": "65536"})]).all()
        admin.create_topics([NewTopic(topic, 1)]).all()
        res = ConfigResource(TOPIC, topic)
        with pytest.raises(InvalidConfigurationError, match=r"min.cleanable.dirty.ratio.*\[0, 1\]"):
            admin.incremental_alter_configs({res: [AlterConfigOp("min.cleanable.dirty.ratio", "2")]}).all()
        with pytest.raises(InvalidConfigurationError, match="cleanup.policy.*delete, compact"):
            admin.alter_configs({res: {"cleanup.policy": "archive"}}).all()


def test_confluent_kafka_admin_gets_invalid_config(kafka_broker):
    ck = pytest.importorskip("confluent_kafka.admin")
    from confluent_kafka import KafkaException
    admin = ck.AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    topic = unique("ck-range")
    futures = admin.create_topics([ck.NewTopic(topic, 1, 1, config={"segment.bytes": "65536"})])
    with pytest.raises(KafkaException) as info:
        futures[topic].result(10)
    err = info.value.args[0]
    assert err.code() == ErrorCode.INVALID_CONFIG and "segment.bytes" in err.str() and "1048576" in err.str()
    admin.create_topics([ck.NewTopic(topic, 1, 1)])[topic].result(10)
    res = ck.ConfigResource(ck.ResourceType.TOPIC, topic, incremental_configs=[
        ck.ConfigEntry("min.cleanable.dirty.ratio", "1.5", incremental_operation=ck.AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as info:
        admin.incremental_alter_configs([res])[res].result(10)
    err = info.value.args[0]
    assert err.code() == ErrorCode.INVALID_CONFIG and "min.cleanable.dirty.ratio" in err.str()
    legacy = ck.ConfigResource(ck.ResourceType.TOPIC, topic, set_config={"message.timestamp.type": "Now"})
    with pytest.warns(DeprecationWarning), pytest.raises(KafkaException) as info:
        admin.alter_configs([legacy])[legacy].result(10)
    err = info.value.args[0]
    assert err.code() == ErrorCode.INVALID_CONFIG and "message.timestamp.type" in err.str()


def test_broker_refuses_a_segment_bytes_below_1_mib(tmp_path):
    props = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "logs"),
             "log.segment.bytes": "65536"}
    with pytest.raises(ConfigError, match="log.segment.bytes.*at least 1048576"):
        KafkaBroker(props)
    props["log.segment.bytes"] = "1048576"
    KafkaBroker(props)  # the minimum is accepted
