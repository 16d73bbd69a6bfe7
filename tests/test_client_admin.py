"""``broker.client.admin.AdminClient`` against the REAL broker subprocess: every operation
(create / list / describe / delete topics, create partitions, describe configs, incremental
and legacy config changes), the typed per-resource errors with the broker's messages,
validate_only, the configuration keys, closing, an unreachable broker, and the API
versions the client negotiated (from the broker's request log).
"""

from __future__ import annotations

import json
import socket
import uuid

import pytest

from broker.client.admin import (
    AdminClient,
    AlterConfigOp,
    AlterConfigOpType,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    InvalidConfigurationError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    NewTopic,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from broker.client.errors import IllegalStateError, KafkaError, KafkaTimeoutError
from broker.config import ConfigError
from broker.log import files
from broker.protocol import ErrorCode
from broker.server.metadata import REGISTRY_FILE

pytestmark = pytest.mark.timeout(120)

TOPIC = ConfigResourceType.TOPIC


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def admin(kafka_broker):
    with AdminClient({"bootstrap.servers": kafka_broker.bootstrap, "client.id": "admin-test"}) as client:
        yield client


def registry_topic_id(broker, topic: str) -> uuid.UUID:
    data = json.loads((broker.log_dir / REGISTRY_FILE).read_text())
    return files.decode_topic_id(data["topics"][topic]["topic_id"])


# --- topics ---

def test_create_list_describe_delete(kafka_broker, admin):
    a, b = unique("adm-a"), unique("adm-b")
    results = admin.create_topics([NewTopic(a, 3, 1, {"retention.ms": "3600000"}), NewTopic(b)])
    assert list(results) == [a, b] and results.all() == {a: None, b: None}
    assert {a, b} <= set(admin.list_topics())
    assert admin.list_topics() == sorted(admin.list_topics())
    assert set(admin.list_topics()) <= set(admin.list_topics(include_internal=True))

    described = admin.describe_topics([a, b])
    da, db = described[a].result(), described[b].result()
    assert (da.name, da.internal, len(da.partitions), len(db.partitions)) == (a, False, 3, 1)  # b: num.partitions
    assert [(p.partition, p.leader, p.replicas, p.isr) for p in da.partitions] == \
        [(i, 1, (1,), (1,)) for i in range(3)]
    assert da.topic_id in (None, registry_topic_id(kafka_broker, a))  # ids need Metadata v10+

    deleted = admin.delete_topics([a, b])
    assert deleted.all() == {a: None, b: None}
    assert not {a, b} & set(admin.list_topics())
    gone = admin.describe_topics([a])[a]
    assert isinstance(gone.exception(), UnknownTopicOrPartitionError)
    with pytest.raises(UnknownTopicOrPartitionError, match="UNKNOWN_TOPIC_OR_PARTITION"):
        admin.delete_topics([a])[a].result()


def test_create_topics_errors_are_typed_per_topic(admin):
    existing, good = unique("adm-exists"), unique("adm-good")
    admin.create_topics([NewTopic(existing, 1)]).all()
    bad_config, bad_rf, zero = unique("adm-cfg"), unique("adm-rf"), unique("adm-zero")
    results = admin.create_topics([
        NewTopic(existing, 1), NewTopic("bad name!", 1), NewTopic(bad_config, 1, configs={"retention.ms": "soon"}),
        NewTopic(bad_rf, 1, 3), NewTopic(zero, 0), NewTopic(good, 2)])
    errors = {name: r.exception() for name, r in results.items()}
    assert isinstance(errors[existing], TopicAlreadyExistsError)
    assert str(errors[existing]) == f"TOPIC_ALREADY_EXISTS: Topic '{existing}' already exists."
    assert errors[existing].code == ErrorCode.TOPIC_ALREADY_EXISTS and not errors[existing].retriable
    assert isinstance(errors["bad name!"], InvalidTopicError)
    assert isinstance(errors[bad_config], InvalidConfigurationError) and "retention.ms" in str(errors[bad_config])
    assert isinstance(errors[bad_rf], InvalidReplicationFactorError)
    assert isinstance(errors[zero], InvalidPartitionsError)
    assert errors[good] is None and results[good].ok
    assert set(results.errors()) == {existing, "bad name!", bad_config, bad_rf, zero}
    with pytest.raises(TopicAlreadyExistsError):  # all(): the first error in order
        results.all()
    names = set(admin.list_topics())
    assert good in names and not {bad_config, bad_rf, zero} & names


def test_validate_only_creates_and_grows_nothing(admin):
    ghost, topic = unique("adm-ghost"), unique("adm-vo")
    assert admin.create_topics([NewTopic(ghost, 2)], validate_only=True).all() == {ghost: None}
    assert ghost not in admin.list_topics()
    with pytest.raises(InvalidConfigurationError):
        admin.create_topics([NewTopic(ghost, 1, configs={"no.such": "1"})], validate_only=True).all()
    admin.create_topics([NewTopic(topic, 1)]).all()
    assert admin.create_partitions({topic: 4}, validate_only=True).all() == {topic: None}
    assert len(admin.describe_topics([topic])[topic].result().partitions) == 1


def test_create_partitions(admin):
    topic, missing = unique("adm-parts"), unique("adm-missing")
    admin.create_topics([NewTopic(topic, 2)]).all()
    assert admin.create_partitions({topic: 5}).all() == {topic: None}
    assert len(admin.describe_topics([topic])[topic].result().partitions) == 5
    results = admin.create_partitions({topic: 3, missing: 2})
    with pytest.raises(InvalidPartitionsError, match="higher than the requested 3"):
        results[topic].result()
    assert isinstance(results[missing].exception(), UnknownTopicOrPartitionError)


# --- configs ---

def test_describe_and_alter_topic_configs(admin):
    topic = unique("adm-cfg")
    admin.create_topics([NewTopic(topic, 1, configs={"retention.ms": "3600000", "flush.messages": "10"})]).all()
    res = ConfigResource(TOPIC, topic)
    config = admin.describe_configs([res], include_synonyms=True)[res].result()
    entry = config["retention.ms"]
    assert (entry.value, entry.source, entry.is_default) == ("3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG, False)
    assert entry.synonyms[0].name == "retention.ms" and entry.synonyms[-1].source == ConfigSource.DEFAULT_CONFIG
    assert config["segment.bytes"].is_default and config["segment.bytes"].value == "1073741824"

    changed = admin.incremental_alter_configs({res: [
        AlterConfigOp("segment.bytes", "2097152"),
        AlterConfigOp("flush.messages", op=AlterConfigOpType.DELETE),
        AlterConfigOp("cleanup.policy", "compact", AlterConfigOpType.APPEND)]})
    assert changed.all() == {res: None}
    config = admin.describe_configs([res])[res].result()
    modified = {k: e.value for k, e in config.items() if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG}
    assert modified == {"retention.ms": "3600000", "segment.bytes": "2097152", "cleanup.policy": "delete,compact"}

    # validate_only, then the legacy API that replaces every override
    assert admin.alter_configs({res: {"max.message.bytes": "2048"}}, validate_only=True).all() == {res: None}
    assert admin.alter_configs({(TOPIC, topic): {"max.message.bytes": "2048"}}).all() == {res: None}
    config = admin.describe_configs([res])[res].result()
    assert {k: e.value for k, e in config.items() if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG} == \
        {"max.message.bytes": "2048"}


def test_config_errors_are_typed_per_resource(admin):
    topic = unique("adm-cfgerr")
    admin.create_topics([NewTopic(topic, 1)]).all()
    res, missing = ConfigResource(TOPIC, topic), ConfigResource(TOPIC, unique("adm-none"))
    broker = ConfigResource(ConfigResourceType.BROKER, "1")
    results = admin.incremental_alter_configs({
        res: [AlterConfigOp("segment.bytes", "ten")], missing: [AlterConfigOp("retention.ms", "1")],
        broker: [AlterConfigOp("log.retention.ms", "1")]})
    with pytest.raises(InvalidConfigurationError, match="INVALID_CONFIG: .*segment.bytes"):
        results[res].result()
    assert isinstance(results[missing].exception(), UnknownTopicOrPartitionError)
    with pytest.raises(InvalidRequestError, match="Cannot update these configs dynamically: log.retention.ms"):
        results[broker].result()
    with pytest.raises(InvalidConfigurationError, match="retention.ms"):
        admin.incremental_alter_configs({res: [AlterConfigOp("retention.ms", "5", AlterConfigOpType.APPEND)]}).all()

    described = admin.describe_configs([missing, broker, ConfigResource(ConfigResourceType.BROKER, "7")])
    assert isinstance(described[missing].exception(), UnknownTopicOrPartitionError)
    broker_config = described[broker].result()
    assert broker_config["num.partitions"].value == "1"
    assert "not in the cluster" in str(described[ConfigResource(ConfigResourceType.BROKER, "7")].exception())
    config = admin.describe_configs([res])[res].result()
    assert all(e.source != ConfigSource.DYNAMIC_TOPIC_CONFIG for e in config.values())  # nothing changed


# --- the client itself ---

def test_configuration_keys_and_closing(kafka_broker):
    with pytest.raises(ConfigError, match="no.such.key"):
        AdminClient({"bootstrap.servers": kafka_broker.bootstrap, "no.such.key": "1"})
    with pytest.raises(ConfigError, match="request.timeout.ms"):
        AdminClient(bootstrap_servers=kafka_broker.bootstrap, request_timeout_ms="soon")
    client = AdminClient(bootstrap_servers=kafka_broker.bootstrap, client_id="adm-kw", retries=3)
    assert client.client_id == "adm-kw" and client.config["request.timeout.ms"] == 30000
    assert isinstance(client.list_topics(), list)
    client.close()
    client.close()  # idempotent
    assert client.closed
    with pytest.raises(IllegalStateError):
        client.list_topics()
    assert AdminClient(bootstrap_servers=kafka_broker.bootstrap).client_id.startswith("adminclient-")


def test_unreachable_broker_names_the_address():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "default.api.timeout.ms": 800}) as client:
        with pytest.raises(KafkaTimeoutError, match=rf"no broker of 127.0.0.1:{port} reachable \(connection "
                           r"refused\); waited 800 ms \(default.api.timeout.ms\)"):
            client.list_topics()
        with pytest.raises(KafkaTimeoutError, match=f"127.0.0.1:{port}"):
            client.create_topics([NewTopic("never", 1)], timeout_ms=300)


def test_negotiated_versions(kafka_broker, admin):
    topic = unique("adm-versions")
    admin.create_topics([NewTopic(topic, 1)]).all()
    res = ConfigResource(TOPIC, topic)
    admin.describe_configs([res]).all()
    admin.incremental_alter_configs({res: [AlterConfigOp("retention.ms", "1000")]}).all()
    admin.alter_configs({res: {"retention.ms": "2000"}}).all()
    admin.create_partitions({topic: 2}).all()
    admin.delete_topics([topic]).all()
    used = kafka_broker.api_versions_used("admin-test")
    assert used["METADATA"] == {12} and used["CREATE_TOPICS"] == {4} and used["DELETE_TOPICS"] == {3}
    assert used["CREATE_PARTITIONS"] == {1} and used["DESCRIBE_CONFIGS"] == {3}
    assert used["INCREMENTAL_ALTER_CONFIGS"] == {0} and used["ALTER_CONFIGS"] == {1}


def test_admin_error_mapping():
    from broker.client.admin import admin_error

    err = admin_error(ErrorCode.TOPIC_ALREADY_EXISTS, "Topic 'x' already exists.")
    assert isinstance(err, TopicAlreadyExistsError) and isinstance(err, KafkaError)
    other = admin_error(ErrorCode.GROUP_ID_NOT_FOUND, "no group")
    assert type(other) is KafkaError and other.code == ErrorCode.GROUP_ID_NOT_FOUND
    assert str(other) == "GROUP_ID_NOT_FOUND: no group"


# --- consumer groups ---

def produce(broker, topic: str, partition: int, timestamps: list[int]) -> None:
    from broker.protocol import ApiKey
    from broker.record.batch import encode_batch
    from tests.support.broker import RawClient

    with RawClient(broker.host, broker.port) as c:
        r = c.request(ApiKey.PRODUCE, 8, {"transactional_id": None, "acks": -1, "timeout_ms": 1000, "topic_data": [
            {"name": topic, "partition_data": [{"index": partition, "records": encode_batch(
                [(None, b"v", ts) for ts in timestamps])}]}]})
        assert r.responses[0].partition_responses[0].error_code == 0


def test_consumer_group_offsets_alter_list_and_reset(kafka_broker, admin):
    from broker.client.admin import OffsetResetSpec
    from broker.client.consumer.offsets import EARLIEST, LATEST, TopicPartition

    topic, group = unique("grp-topic"), unique("grp")
    admin.create_topics([NewTopic(topic, 2, 1)]).all()
    base = 1_700_000_000_000
    produce(kafka_broker, topic, 0, [base + i * 1000 for i in range(10)])  # offsets 0-9, one second apart
    produce(kafka_broker, topic, 1, [base] * 4)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    assert admin.list_consumer_group_offsets(group) == {}  # no such group: nothing committed
    admin.alter_consumer_group_offsets(group, {(topic, 0): 7, tp1: 1})
    assert admin.list_consumer_group_offsets(group) == {tp0: 7, tp1: 1}
    assert admin.list_consumer_group_offsets(group, [tp1, (topic, 5)]) == {tp1: 1, TopicPartition(topic, 5): None}
    assert group in {g.group_id for g in admin.list_consumer_groups()}
    assert admin.describe_consumer_groups([group])[group].state == "Empty"
    offsets = admin.list_offsets({tp0: EARLIEST, tp1: LATEST, (topic, 0): base + 4500})
    assert (offsets[tp0].offset, offsets[tp1].offset) == (5, 4)  # one entry per partition: the last spec
    parts = [tp0, tp1]

    def plan(spec):
        return admin.plan_consumer_group_offsets_reset(group, parts, spec)

    assert plan(OffsetResetSpec.to_earliest()).offsets == {tp0: 0, tp1: 0}
    assert plan(OffsetResetSpec.to_latest()).offsets == {tp0: 10, tp1: 4}
    assert plan(OffsetResetSpec.to_current()).offsets == {tp0: 7, tp1: 1}
    at = plan(OffsetResetSpec.to_datetime("2023-11-14T22:13:24.500"))  # base + 4.5 s (UTC)
    assert at.offsets == {tp0: 5, tp1: 4}
    assert at.warnings == (f"Partition 1 from topic {topic} is empty. Falling back to latest known offset.",)
    assert plan(OffsetResetSpec.to_datetime(base + 4500)).offsets == at.offsets
    shifted = plan(OffsetResetSpec.shift_by(2))
    assert shifted.offsets == {tp0: 9, tp1: 3} and shifted.warnings == ()
    clamped = plan(OffsetResetSpec.shift_by(-5))
    assert clamped.offsets == {tp0: 2, tp1: 0}
    assert clamped.warnings == (f"New offset (-4) is lower than earliest offset for topic partition {topic}-1. "
                                "Value will be set to 0.",)
    high = plan(OffsetResetSpec.to_offset(50))
    assert high.offsets == {tp0: 10, tp1: 4} and len(high.warnings) == 2
    assert high.warnings[0] == (f"New offset (50) is higher than latest offset for topic partition {topic}-0. "
                                "Value will be set to 10.")
    assert admin.list_consumer_group_offsets(group) == {tp0: 7, tp1: 1}  # planning commits nothing
    dry = admin.reset_consumer_group_offsets(group, parts, OffsetResetSpec.to_earliest(), dry_run=True)
    assert dry.offsets == {tp0: 0, tp1: 0} and admin.list_consumer_group_offsets(group) == {tp0: 7, tp1: 1}
    admin.reset_consumer_group_offsets(group, [tp0], OffsetResetSpec.shift_by(-3))
    assert admin.list_consumer_group_offsets(group) == {tp0: 4, tp1: 1}
    fresh = unique("grp-new")  # a group that does not exist (Dead) may be reset: it is created
    admin.reset_consumer_group_offsets(fresh, parts, OffsetResetSpec.to_latest())
    assert admin.list_consumer_group_offsets(fresh) == {tp0: 10, tp1: 4}
    # errors
    with pytest.raises(ValueError, match=f"Cannot shift offset for partition {topic}-1 since there is no"):
        admin.plan_consumer_group_offsets_reset(unique("none"), [tp1], OffsetResetSpec.shift_by(1))
    with pytest.raises(KafkaError) as e:
        plan_missing = [TopicPartition(topic, 5)]
        admin.plan_consumer_group_offsets_reset(group, plan_missing, OffsetResetSpec.to_earliest())
    assert e.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and f'"{topic}-5" do not exist' in str(e.value)
    with pytest.raises(ValueError, match="expected the format YYYY-MM-DDTHH:mm:SS.sss"):
        OffsetResetSpec.to_datetime("2023-11-14 22:13:24")
    results = admin.delete_consumer_groups([fresh, unique("ghost")])
    assert results[fresh].ok and results.errors() and \
        next(iter(results.errors().values())).code == ErrorCode.GROUP_ID_NOT_FOUND


def test_datetime_format_of_kafka():
    from broker.client.admin_groups import parse_datetime

    assert parse_datetime("1970-01-01T00:00:01.000") == 1000
    assert parse_datetime("1970-01-01T00:00:01.5") == 1500
    assert parse_datetime("1970-01-01T00:00:01") == 1000
    assert parse_datetime("1970-01-01T01:00:00.000+01:00") == 0
    assert parse_datetime("1970-01-01T01:00:00.000+0100") == 0
    assert parse_datetime("1970-01-01T00:00:00.000-02") == 7_200_000
    assert parse_datetime("1970-01-01T00:00:00.000Z") == 0
    for bad in ("1970-01-01", "1970-13-01T00:00:00.000", "yesterday", "1970-01-01T00:00:00.0000"):
        with pytest.raises(ValueError, match="Error parsing timestamp"):
            parse_datetime(bad)


def test_alter_refused_while_the_group_is_active_and_offset_delete(kafka_broker):
    """A group with a live member (a confluent-kafka consumer that subscribed): reset is
    refused with Kafka's message, alter with UNKNOWN_MEMBER_ID saying so, OffsetDelete of a
    subscribed topic with GROUP_SUBSCRIBED_TO_TOPIC; once the member left, all three work."""
    import time

    import confluent_kafka

    from broker.client.admin import OffsetResetSpec

    topic, group = f"active-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    with AdminClient(bootstrap_servers=kafka_broker.bootstrap, default_api_timeout_ms=20000) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)]).all()
        admin.alter_consumer_group_offsets(group, {(topic, 0): 0})
        member = confluent_kafka.Consumer({"bootstrap.servers": kafka_broker.bootstrap, "group.id": group,
                                           "session.timeout.ms": 10000, "enable.auto.commit": False})
        try:
            member.subscribe([topic])
            deadline = time.monotonic() + 30
            while not member.assignment() and time.monotonic() < deadline:
                member.poll(0.2)
            assert member.assignment(), "the consumer joined the group"
            with pytest.raises(KafkaError, match=f"group {group} refused: the group has active members") as e:
                admin.alter_consumer_group_offsets(group, {(topic, 0): 0})
            assert e.value.code == ErrorCode.UNKNOWN_MEMBER_ID
            with pytest.raises(KafkaError, match=rf"Assignments can only be reset if the group '{group}' is "
                                                 r"inactive, but the current state is Stable\.") as e:
                admin.reset_consumer_group_offsets(group, [(topic, 0)], OffsetResetSpec.to_latest())
            assert e.value.code == ErrorCode.NON_EMPTY_GROUP
            errors = admin.delete_consumer_group_offsets(group, [(topic, 0)]).errors()
            assert [e.code for e in errors.values()] == [ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC], errors
        finally:
            member.close()
        admin.alter_consumer_group_offsets(group, {(topic, 0): 0})
        assert not admin.delete_consumer_group_offsets(group, [(topic, 0)]).errors()
