"""The GROUP config resource (resource type 32: Kafka's per-group configs such as
``share.auto.offset.reset``, ``share.isolation.level``, ``share.record.lock.duration.ms``)
against the REAL broker subprocess: IncrementalAlterConfigs (SET / DELETE; APPEND /
SUBTRACT refused), the legacy AlterConfigs, DescribeConfigs (every key, its source, the
config_keys filter, synonyms), validate_only, the errors (unknown key, bad value, a value
outside the broker's bounds, an empty group name), for a group that does not exist yet;
through RawClient, confluent-kafka's AdminClient, the project's AdminClient and
``kafkalog configs --entity-type groups``; the overrides surviving a clean restart and a
SIGKILL; the ACLs (DESCRIBE_CONFIGS / ALTER_CONFIGS on the GROUP). Plus in process:
``GroupConfigStore`` over a real ``ClusterMetadataStore`` (typed values, bounds taken from
the broker's config, reload, capping of stored values outside new bounds).
"""

from __future__ import annotations

import uuid

import pytest

from broker.protocol import ApiKey, ErrorCode
from tests.support.broker import BrokerProcess, RawClient

pytestmark = pytest.mark.timeout(120)

GROUP = 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
SOURCE_GROUP_CONFIG, SOURCE_STATIC_BROKER_CONFIG, SOURCE_DEFAULT_CONFIG = 8, 4, 5
KEYS = ["consumer.heartbeat.interval.ms", "consumer.session.timeout.ms",
        "errors.deadletterqueue.copy.record.enable", "errors.deadletterqueue.topic.name",
        "share.auto.offset.reset", "share.delivery.count.limit", "share.heartbeat.interval.ms",
        "share.isolation.level", "share.record.lock.duration.ms", "share.session.timeout.ms"]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def incremental(c: RawClient, name: str, ops: list, validate_only: bool = False):
    body = {"resources": [{"resource_type": GROUP, "resource_name": name, "configs": [
        {"name": k, "config_operation": op, "value": v} for k, op, v in ops]}], "validate_only": validate_only}
    r = c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, body).responses
    assert [(x.resource_type, x.resource_name) for x in r] == [(GROUP, name)]
    return r[0]


def legacy_alter(c: RawClient, name: str, configs: dict):
    body = {"resources": [{"resource_type": GROUP, "resource_name": name, "configs": [
        {"name": k, "value": v} for k, v in configs.items()]}], "validate_only": False}
    return c.request(ApiKey.ALTER_CONFIGS, 1, body).responses[0]


def describe(c: RawClient, name: str, keys: list[str] | None = None, version: int = 3):
    r = c.request(ApiKey.DESCRIBE_CONFIGS, version, {
        "resources": [{"resource_type": GROUP, "resource_name": name, "configuration_keys": keys}],
        "include_synonyms": True, "include_documentation": True})
    return r.results[0]


def overrides(c: RawClient, name: str) -> dict[str, str]:
    result = describe(c, name)
    assert result.error_code == 0, result
    return {e.name: e.value for e in result.configs if e.config_source == SOURCE_GROUP_CONFIG}


def test_set_describe_delete_on_a_group_that_does_not_exist(kafka_broker):
    group = unique("share-g")
    with RawClient(kafka_broker.host, kafka_broker.port, "group-configs") as c:
        assert overrides(c, group) == {}
        # what librdkafka's share-consumer tests send, before the group exists
        r = incremental(c, group, [("share.auto.offset.reset", SET, "earliest"),
                                   ("share.isolation.level", SET, "read_committed"),
                                   ("share.record.lock.duration.ms", SET, "15000")])
        assert (r.error_code, r.error_message) == (0, None)
        result = describe(c, group)
        assert result.error_code == 0
        entries = {e.name: e for e in result.configs}
        assert sorted(entries) == KEYS
        lock = entries["share.record.lock.duration.ms"]
        assert (lock.value, lock.config_source, lock.config_type) == ("15000", SOURCE_GROUP_CONFIG, 3)
        assert [(s.name, s.value, s.source) for s in lock.synonyms] == [
            ("share.record.lock.duration.ms", "15000", SOURCE_GROUP_CONFIG),
            ("group.share.record.lock.duration.ms", "30000", SOURCE_DEFAULT_CONFIG)]
        assert "lock duration" in lock.documentation
        reset = entries["share.auto.offset.reset"]
        assert (reset.value, reset.config_source, reset.config_type) == ("earliest", 8, 2)
        assert entries["share.isolation.level"].value == "read_committed"
        limit = entries["share.delivery.count.limit"]
        assert (limit.value, limit.config_source) == ("5", SOURCE_DEFAULT_CONFIG)
        dlq = entries["errors.deadletterqueue.copy.record.enable"]
        assert (dlq.value, dlq.config_type) == ("false", 1)
        assert entries["errors.deadletterqueue.topic.name"].value == ""
        # the config_keys filter
        only = describe(c, group, ["share.isolation.level", "consumer.session.timeout.ms"])
        assert [(e.name, e.value) for e in only.configs] == [("consumer.session.timeout.ms", "45000"),
                                                               ("share.isolation.level", "read_committed")]
        # DELETE (an absent key too), the others stay
        r = incremental(c, group, [("share.isolation.level", DELETE, None),
                                   ("share.delivery.count.limit", DELETE, None),
                                   ("share.auto.offset.reset", SET, "by_duration:PT1H30M")])
        assert r.error_code == 0, r
        assert overrides(c, group) == {"share.auto.offset.reset": "by_duration:PT1H30M",
                                       "share.record.lock.duration.ms": "15000"}
        # validate_only checks and changes nothing
        r = incremental(c, group, [("share.record.lock.duration.ms", SET, "45000")], validate_only=True)
        assert r.error_code == 0
        bad = incremental(c, group, [("share.record.lock.duration.ms", SET, "1")], validate_only=True)
        assert bad.error_code == ErrorCode.INVALID_CONFIG
        assert overrides(c, group)["share.record.lock.duration.ms"] == "15000"
        # the legacy AlterConfigs replaces the whole set
        replacement = {"share.delivery.count.limit": "3", "errors.deadletterqueue.copy.record.enable": "true"}
        r = legacy_alter(c, group, replacement)
        assert (r.error_code, r.error_message) == (0, None)
        assert overrides(c, group) == replacement
        assert legacy_alter(c, group, {}).error_code == 0
        assert overrides(c, group) == {}


@pytest.mark.parametrize("ops, code, message", [
    ([("share.unknown.key", SET, "1")], ErrorCode.INVALID_CONFIG, "Unknown group config name: share.unknown.key"),
    ([("share.auto.offset.reset", SET, "newest")], ErrorCode.INVALID_CONFIG, "share.auto.offset.reset"),
    ([("share.auto.offset.reset", SET, "by_duration:one hour")], ErrorCode.INVALID_CONFIG, "ISO-8601"),
    ([("share.auto.offset.reset", SET, "by_duration:-PT1H")], ErrorCode.INVALID_CONFIG, "negative"),
    ([("share.isolation.level", SET, "READ_COMMITTED")], ErrorCode.INVALID_CONFIG, "share.isolation.level"),
    ([("share.record.lock.duration.ms", SET, "3000")], ErrorCode.INVALID_CONFIG,
     "share.record.lock.duration.ms must be in the range 15000 to 60000 inclusive."),
    ([("share.record.lock.duration.ms", SET, "70000")], ErrorCode.INVALID_CONFIG, "15000 to 60000"),
    ([("share.record.lock.duration.ms", SET, "soon")], ErrorCode.INVALID_CONFIG, "share.record.lock.duration.ms"),
    ([("share.delivery.count.limit", SET, "11")], ErrorCode.INVALID_CONFIG, "share.delivery.count.limit must be"),
    ([("consumer.session.timeout.ms", SET, "5000")], ErrorCode.INVALID_CONFIG, "consumer.session.timeout.ms"),
    ([("share.heartbeat.interval.ms", SET, "16000")], ErrorCode.INVALID_CONFIG,
     "share.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive."),
    ([("errors.deadletterqueue.copy.record.enable", SET, "yes")], ErrorCode.INVALID_CONFIG,
     "errors.deadletterqueue.copy.record.enable"),
    ([("errors.deadletterqueue.topic.name", SET, "__dlq")], ErrorCode.INVALID_CONFIG, "must not start with '__'"),
    ([("share.delivery.count.limit", APPEND, "2")], ErrorCode.INVALID_REQUEST,
     "Config value append is not allowed for config key: share.delivery.count.limit"),
    ([("share.isolation.level", SUBTRACT, "read_committed")], ErrorCode.INVALID_REQUEST, "subtract"),
    ([("share.isolation.level", SET, None)], ErrorCode.INVALID_REQUEST, "Null value"),
    ([("share.isolation.level", SET, "read_committed"), ("share.isolation.level", DELETE, None)],
     ErrorCode.INVALID_REQUEST, "duplicate config keys: share.isolation.level"),
])
def test_invalid_changes_are_refused_and_change_nothing(kafka_broker, ops, code, message):
    group = unique("bad-g")
    with RawClient(kafka_broker.host, kafka_broker.port, "group-configs-bad") as c:
        assert incremental(c, group, [("share.auto.offset.reset", SET, "earliest")]).error_code == 0
        r = incremental(c, group, ops)
        assert r.error_code == code and message in r.error_message, r
        assert overrides(c, group) == {"share.auto.offset.reset": "earliest"}


def test_empty_group_name_is_invalid_request(kafka_broker):
    with RawClient(kafka_broker.host, kafka_broker.port, "group-configs-empty") as c:
        r = incremental(c, "", [("share.auto.offset.reset", SET, "earliest")])
        assert r.error_code == ErrorCode.INVALID_REQUEST and "empty" in r.error_message
        assert legacy_alter(c, "", {"share.auto.offset.reset": "earliest"}).error_code == ErrorCode.INVALID_REQUEST
        assert describe(c, "").error_code == ErrorCode.INVALID_REQUEST


def test_confluent_kafka_admin_client(kafka_broker):
    ck = pytest.importorskip("confluent_kafka.admin")
    from confluent_kafka import KafkaException

    group = unique("ck-g")
    admin = ck.AdminClient({"bootstrap.servers": kafka_broker.bootstrap, "client.id": "ck-group-configs"})
    res = ck.ConfigResource(ck.ResourceType.GROUP, group, incremental_configs=[
        ck.ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=ck.AlterConfigOpType.SET),
        ck.ConfigEntry("share.isolation.level", "read_committed", incremental_operation=ck.AlterConfigOpType.SET),
        ck.ConfigEntry("share.record.lock.duration.ms", "20000", incremental_operation=ck.AlterConfigOpType.SET)])
    assert admin.incremental_alter_configs([res])[res].result(10) is None
    target = ck.ConfigResource(ck.ResourceType.GROUP, group)
    described = admin.describe_configs([target])[target].result(10)
    assert sorted(described) == KEYS
    assert {k: (e.value, e.source) for k, e in described.items() if not e.is_default} == {
        "share.auto.offset.reset": ("earliest", ck.ConfigSource.GROUP_CONFIG.value),
        "share.isolation.level": ("read_committed", ck.ConfigSource.GROUP_CONFIG.value),
        "share.record.lock.duration.ms": ("20000", ck.ConfigSource.GROUP_CONFIG.value)}
    assert described["share.session.timeout.ms"].value == "45000"
    delete = ck.ConfigResource(ck.ResourceType.GROUP, group, incremental_configs=[
        ck.ConfigEntry("share.isolation.level", None, incremental_operation=ck.AlterConfigOpType.DELETE)])
    assert admin.incremental_alter_configs([delete])[delete].result(10) is None
    described = admin.describe_configs([target])[target].result(10)
    assert described["share.isolation.level"].value == "read_uncommitted"
    assert described["share.isolation.level"].is_default
    bad = ck.ConfigResource(ck.ResourceType.GROUP, group, incremental_configs=[
        ck.ConfigEntry("share.record.lock.duration.ms", "3000", incremental_operation=ck.AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as info:
        admin.incremental_alter_configs([bad])[bad].result(10)
    err = info.value.args[0]
    assert err.code() == ErrorCode.INVALID_CONFIG and "share.record.lock.duration.ms" in err.str()
    unknown = ck.ConfigResource(ck.ResourceType.GROUP, group, incremental_configs=[
        ck.ConfigEntry("streams.num.standby.replicas", "1", incremental_operation=ck.AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as info:
        admin.incremental_alter_configs([unknown])[unknown].result(10)
    assert "Unknown group config name: streams.num.standby.replicas" in info.value.args[0].str()
    used = kafka_broker.api_versions_used("ck-group-configs")
    assert used["INCREMENTAL_ALTER_CONFIGS"] == {0} and used["DESCRIBE_CONFIGS"] == {1}


def test_project_admin_client(kafka_broker):
    from broker.client.admin import (
        AdminClient,
        AlterConfigOp,
        AlterConfigOpType,
        ConfigResource,
        ConfigResourceType,
        ConfigSource,
        InvalidConfigurationError,
    )

    group = unique("adm-g")
    res = ConfigResource(ConfigResourceType.GROUP, group)
    assert int(ConfigResourceType.GROUP) == 32
    with AdminClient({"bootstrap.servers": kafka_broker.bootstrap, "client.id": "adm-group-configs"}) as admin:
        admin.incremental_alter_configs({res: [
            AlterConfigOp("share.delivery.count.limit", "7", AlterConfigOpType.SET),
            AlterConfigOp("errors.deadletterqueue.topic.name", "dlq.orders", AlterConfigOpType.SET)]}).all()
        config = admin.describe_configs([("group", group)], include_synonyms=True)[res].result()
        limit = config["share.delivery.count.limit"]
        assert (limit.value, limit.source) == ("7", ConfigSource.GROUP_CONFIG)
        assert [(s.name, s.source) for s in limit.synonyms] == [
            ("share.delivery.count.limit", ConfigSource.GROUP_CONFIG),
            ("group.share.delivery.count.limit", ConfigSource.DEFAULT_CONFIG)]
        assert config["errors.deadletterqueue.topic.name"].value == "dlq.orders"
        assert config["share.auto.offset.reset"].source == ConfigSource.DEFAULT_CONFIG
        with pytest.raises(InvalidConfigurationError, match="share.delivery.count.limit must be in the range 2 to 10"):
            admin.incremental_alter_configs({res: [AlterConfigOp("share.delivery.count.limit", "11")]}).all()
        admin.alter_configs({res: {"share.heartbeat.interval.ms": "6000"}}).all()
        config = admin.describe_configs([res])[res].result()
        assert {k: e.value for k, e in config.items() if e.source == ConfigSource.GROUP_CONFIG} == {
            "share.heartbeat.interval.ms": "6000"}


def test_kafkalog_configs_entity_type_groups(kafka_broker, capsys):
    from spark_kafkalog.cli.main import main

    def configs(*argv: str) -> tuple[int, str, str]:
        code = main(["configs", "--bootstrap-server", kafka_broker.bootstrap, *argv])
        out = capsys.readouterr()
        return code, out.out, out.err

    group = unique("cli-g")
    assert configs("--alter", "--entity-type", "groups", "--entity-name", group, "--add-config",
                   "share.auto.offset.reset=earliest,share.record.lock.duration.ms=20000")[:2] == \
        (0, f"Completed updating config for group {group}.\n")
    assert configs("--describe", "--entity-type", "groups", "--entity-name", group)[:2] == (0, (
        f"Dynamic configs for group {group} are:\n"
        "  share.auto.offset.reset=earliest\n"
        "  share.record.lock.duration.ms=20000\n"))
    assert configs("--alter", "--entity-type", "group", "--entity-name", group, "--delete-config",
                   "share.auto.offset.reset")[0] == 0
    assert configs("--describe", "--entity-type", "groups", "--entity-name", group)[1] == (
        f"Dynamic configs for group {group} are:\n  share.record.lock.duration.ms=20000\n")
    code, out, err = configs("--alter", "--entity-type", "groups", "--entity-name", group, "--add-config",
                             "share.isolation.level=serializable")
    assert code == 1 and out == ""
    assert err.startswith("kafkalog configs: error: INVALID_CONFIG") and "share.isolation.level" in err
    code, _, err = configs("--describe", "--entity-type", "groups")
    assert code == 1 and "needs --entity-name" in err


def test_overrides_survive_a_restart_and_a_crash(broker_factory):
    b = broker_factory(name="group-configs")
    group = unique("persist-g")
    expected = {"share.auto.offset.reset": "by_duration:P1D", "share.session.timeout.ms": "50000"}
    with RawClient(b.host, b.port, "group-configs-restart") as c:
        assert incremental(c, group, [(k, SET, v) for k, v in expected.items()]).error_code == 0
    assert b.stop() == 0
    b.start()
    with RawClient(b.host, b.port, "group-configs-restart") as c:
        assert overrides(c, group) == expected
        assert incremental(c, group, [("share.session.timeout.ms", DELETE, None),
                                      ("share.isolation.level", SET, "read_committed")]).error_code == 0
    b.kill()  # no clean shutdown: the cluster metadata was written before the answer
    b.start()
    with RawClient(b.host, b.port, "group-configs-restart") as c:
        assert overrides(c, group) == {"share.auto.offset.reset": "by_duration:P1D",
                                       "share.isolation.level": "read_committed"}


def test_acls_describe_configs_and_alter_configs_on_the_group(tmp_path):
    ck = pytest.importorskip("confluent_kafka.admin")
    from confluent_kafka import KafkaError, KafkaException

    from tests.test_security_acls import OVERRIDES, conf

    b = BrokerProcess(tmp_path / "acl", OVERRIDES, name="group-configs-acl").start()
    try:
        admin = ck.AdminClient(conf(b, "admin"))
        alice = ck.AdminClient(conf(b, "alice"))
        group = unique("acl-g")
        target = ck.ConfigResource(ck.ResourceType.GROUP, group)

        def change(client) -> None:
            res = ck.ConfigResource(ck.ResourceType.GROUP, group, incremental_configs=[
                ck.ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=ck.AlterConfigOpType.SET)])
            client.incremental_alter_configs([res])[res].result(30)

        for attempt in (lambda: alice.describe_configs([target])[target].result(30), lambda: change(alice)):
            with pytest.raises(KafkaException) as info:
                attempt()
            assert info.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
        change(admin)  # a super user

        def allow(op) -> None:
            binding = ck.AclBinding(ck.ResourceType.GROUP, group, ck.ResourcePatternType.LITERAL, "User:alice", "*",
                                    op, ck.AclPermissionType.ALLOW)
            for f in admin.create_acls([binding]).values():
                assert f.result(30) is None

        allow(ck.AclOperation.DESCRIBE_CONFIGS)
        assert alice.describe_configs([target])[target].result(30)["share.auto.offset.reset"].value == "earliest"
        with pytest.raises(KafkaException) as info:
            change(alice)
        assert info.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
        allow(ck.AclOperation.ALTER_CONFIGS)
        change(alice)
        assert "Principal = User:alice is Denied operation = ALTER_CONFIGS" in b.stdout_text() + b.stderr_text()
    finally:
        b.kill()


# --- in process: the store over a real ClusterMetadataStore ---

def test_store_typed_values_bounds_from_the_broker_config_and_reload(tmp_path):
    from broker.server.cluster_metadata import ClusterMetadataStore
    from broker.server.config import SERVER_CONFIG_DEF
    from broker.server.group.group_configs import SECTION, GroupConfigStore

    config = SERVER_CONFIG_DEF.parse({"log.dirs": str(tmp_path), "group.share.min.record.lock.duration.ms": "1000",
                                      "group.share.record.lock.duration.ms": "20000",
                                      "group.share.min.session.timeout.ms": "1000"})
    metadata = ClusterMetadataStore([tmp_path], 1)
    store = GroupConfigStore(metadata, config)
    store.load()
    assert store.get("g", "share.record.lock.duration.ms") is None
    assert store.defaults()["share.record.lock.duration.ms"] == 20000
    # the broker's group.share.min.record.lock.duration.ms=1000 lets 3000 through
    store.alter("g", lambda cur: {**cur, "share.record.lock.duration.ms": "3000",
                                  "share.auto.offset.reset": "EARLIEST",
                                  "errors.deadletterqueue.copy.record.enable": "TRUE"})
    assert store.get("g", "share.record.lock.duration.ms") == 3000
    assert store.get("g", "share.auto.offset.reset") == "EARLIEST"
    assert store.get("g", "errors.deadletterqueue.copy.record.enable") is True
    assert store.get("other", "share.auto.offset.reset") is None
    with pytest.raises(ValueError, match="share.record.lock.duration.ms must be in the range 1000 to 60000"):
        store.alter("g", lambda cur: {**cur, "share.record.lock.duration.ms": "60001"})
    with pytest.raises(ValueError, match="Value must be at least 1000"):  # Kafka's floor, whatever the broker says
        store.alter("g", lambda cur: {**cur, "share.record.lock.duration.ms": "999"})
    # the session timeout must exceed the heartbeat interval (the broker's 5000 when the group sets none)
    with pytest.raises(ValueError, match="share.session.timeout.ms must be greater than share.heartbeat.interval.ms"):
        store.alter("g", lambda cur: {**cur, "share.session.timeout.ms": "5000"})
    store.alter("g", lambda cur: {**cur, "share.session.timeout.ms": "6000"}, validate_only=True)
    assert store.get("g", "share.session.timeout.ms") is None
    with pytest.raises(ValueError, match="empty"):
        store.alter("", lambda cur: {"share.auto.offset.reset": "earliest"})
    store.alter("g", lambda cur: {**cur, "share.auto.offset.reset": None}, validate_only=False)
    assert store.get("g", "share.auto.offset.reset") is None
    assert metadata.get(SECTION) == {"g": {"share.record.lock.duration.ms": "3000",
                                           "errors.deadletterqueue.copy.record.enable": "TRUE"}}
    # a new broker reads them back; with Kafka's default bounds the 3000 ms is capped to 15000
    reloaded_metadata = ClusterMetadataStore([tmp_path], 1)
    reloaded_metadata.load()
    reloaded = GroupConfigStore(reloaded_metadata)
    reloaded.load()
    assert reloaded.get("g", "share.record.lock.duration.ms") == 15000
    assert reloaded.get("g", "errors.deadletterqueue.copy.record.enable") is True
    assert reloaded.overrides("g") == {"share.record.lock.duration.ms": "3000",
                                       "errors.deadletterqueue.copy.record.enable": "TRUE"}
    store.alter("g", lambda cur: {})
    assert metadata.get(SECTION) == {} and store.groups() == []
