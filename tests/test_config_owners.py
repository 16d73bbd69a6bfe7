"""Each feature owns its broker keys: ``define_<feature>_keys`` beside the module that reads
them, and a typed, frozen config object read once from the server config.

Checked for every owner: the object from a parsed server config and from raw strings
(typed values; the same object either way), its defaults equal to the definitions'
defaults, frozen (assignment raises), an invalid value is a ``ConfigError`` naming the key;
``SERVER_CONFIG_DEF`` is exactly the union of the owners' tables with no key defined twice;
and no module under broker/server or broker/log (but the config modules) reads a server
key with a literal default of its own (``config.get("a.b", <default>)``).
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from broker.config import BROKER_CONFIG_DEF, BrokerConfig, ConfigDef, ConfigError
from broker.log.cleaner.config import CLEANER_CONFIG_DEF, CleanerConfig
from broker.log.manager_config import LOG_MANAGER_CONFIG_DEF, LogManagerConfig
from broker.log.remote.config import REMOTE_STORAGE_CONFIG_DEF, RemoteLogManagerConfig, RemoteLogQuotaConfig
from broker.server.config import SERVER_CONFIG_DEF, SERVER_CONFIG_SECTIONS, _union, server_config
from broker.server.group.config import GROUP_CONFIG_DEF, GroupConfig
from broker.server.quota.config import QUOTA_CONFIG_DEF, QuotaConfig
from broker.server.security.config import (
    AUTHORIZER_CONFIG_DEF,
    SASL_CONFIG_DEF,
    STANDARD_AUTHORIZER,
    AuthorizerConfig,
    SaslConfig,
)
from broker.server.telemetry.config import TELEMETRY_CONFIG_DEF, TelemetryConfig
from broker.server.txn.config import TRANSACTION_CONFIG_DEF, TransactionConfig

ROOT = Path(__file__).resolve().parents[1]


def _same(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


# owner: (config class, its table, {field: key} read as they are, raw strings -> expected fields,
#         an invalid raw value (key, text))
OWNERS: dict[str, tuple[Any, ConfigDef, dict[str, str], dict[str, str], dict[str, Any], tuple[str, str]]] = {
    "broker": (
        BrokerConfig, BROKER_CONFIG_DEF,
        {"node_id": "node.id", "cluster_id": "cluster.id", "listeners": "listeners",
         "security_protocol_map": "listener.security.protocol.map", "num_partitions": "num.partitions",
         "default_replication_factor": "default.replication.factor",
         "auto_create_topics_enable": "auto.create.topics.enable", "delete_topic_enable": "delete.topic.enable",
         "socket_request_max_bytes": "socket.request.max.bytes", "queued_max_requests": "queued.max.requests",
         "socket_send_buffer_bytes": "socket.send.buffer.bytes",
         "socket_receive_buffer_bytes": "socket.receive.buffer.bytes",
         "connections_max_idle_ms": "connections.max.idle.ms",
         "inter_broker_listener_name": "inter.broker.listener.name"},
        {"broker.id": "3", "log.dirs": "/a, /b", "num.partitions": "4", "auto.create.topics.enable": "false",
         "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", "connections.max.idle.ms": "1000"},
        {"node_id": 3, "log_dirs": ("/a", "/b"), "num_partitions": 4, "auto_create_topics_enable": False,
         "listeners": ("PLAINTEXT://127.0.0.1:0", "SSL://127.0.0.1:0"), "connections_max_idle_ms": 1000},
        ("num.partitions", "0")),
    "log manager": (
        LogManagerConfig, LOG_MANAGER_CONFIG_DEF,
        {"retention_check_interval_ms": "log.retention.check.interval.ms",
         "flush_check_ms": "log.flush.scheduler.interval.ms",
         "flush_recovery_offset_checkpoint_ms": "log.flush.offset.checkpoint.interval.ms",
         "flush_start_offset_checkpoint_ms": "log.flush.start.offset.checkpoint.interval.ms",
         "producer_id_expiration_ms": "producer.id.expiration.ms"},
        {"log.retention.check.interval.ms": "1000", "producer.id.expiration.ms": "5000"},
        {"retention_check_interval_ms": 1000, "producer_id_expiration_ms": 5000},
        ("log.retention.check.interval.ms", "soon")),
    "log cleaner": (
        CleanerConfig, CLEANER_CONFIG_DEF,
        {"enable_cleaner": "log.cleaner.enable", "num_threads": "log.cleaner.threads",
         "dedupe_buffer_size": "log.cleaner.dedupe.buffer.size",
         "dedupe_buffer_load_factor": "log.cleaner.io.buffer.load.factor", "backoff_ms": "log.cleaner.backoff.ms",
         "max_io_bytes_per_second": "log.cleaner.io.max.bytes.per.second"},
        {"log.cleaner.enable": "false", "log.cleaner.threads": "2", "log.cleaner.io.buffer.load.factor": "0.5",
         "log.cleaner.io.max.bytes.per.second": "1000"},
        {"enable_cleaner": False, "num_threads": 2, "dedupe_buffer_load_factor": 0.5,
         "max_io_bytes_per_second": 1000.0},
        ("log.cleaner.io.buffer.load.factor", "2")),
    "tiered storage": (
        RemoteLogManagerConfig, REMOTE_STORAGE_CONFIG_DEF,
        {"enabled": "remote.log.storage.system.enable", "task_interval_ms": "remote.log.manager.task.interval.ms",
         "storage_manager_class_name": "remote.log.storage.manager.class.name",
         "storage_manager_prefix": "remote.log.storage.manager.impl.prefix",
         "metadata_manager_class_name": "remote.log.metadata.manager.class.name",
         "metadata_manager_prefix": "remote.log.metadata.manager.impl.prefix"},
        {"remote.log.storage.system.enable": "true", "remote.log.manager.task.interval.ms": "500",
         "remote.log.manager.copy.max.bytes.per.second": "1024", "remote.log.manager.fetch.quota.window.num": "3"},
        {"enabled": True, "task_interval_ms": 500, "copy_quota": RemoteLogQuotaConfig(1024, 11, 1),
         "fetch_quota": RemoteLogQuotaConfig(window_num=3)},
        ("remote.log.manager.copy.max.bytes.per.second", "0")),
    "groups": (
        GroupConfig, GROUP_CONFIG_DEF,
        {"initial_rebalance_delay_ms": "group.initial.rebalance.delay.ms",
         "min_session_timeout_ms": "group.min.session.timeout.ms", "max_group_size": "group.max.size",
         "rebalance_protocols": "group.coordinator.rebalance.protocols",
         "consumer_assignors": "group.consumer.assignors",
         "offset_metadata_max_bytes": "offset.metadata.max.bytes"},
        {"group.min.session.timeout.ms": "100", "group.coordinator.rebalance.protocols": "classic",
         "offsets.retention.minutes": "2"},
        {"min_session_timeout_ms": 100, "rebalance_protocols": ("classic",), "offsets_retention_ms": 120000},
        ("group.consumer.assignors", "bogus")),
    "transactions": (
        TransactionConfig, TRANSACTION_CONFIG_DEF,
        {"max_timeout_ms": "transaction.max.timeout.ms", "id_expiration_ms": "transactional.id.expiration.ms",
         "abort_interval_ms": "transaction.abort.timed.out.transaction.cleanup.interval.ms",
         "expire_interval_ms": "transaction.remove.expired.transaction.cleanup.interval.ms",
         "transaction_version": "kafkalog.feature.transaction.version",
         "marker_retry_interval_ms": "kafkalog.transaction.marker.retry.interval.ms",
         "state_log_num_partitions": "transaction.state.log.num.partitions",
         "state_log_segment_bytes": "transaction.state.log.segment.bytes",
         "state_log_load_buffer_size": "transaction.state.log.load.buffer.size"},
        {"transaction.max.timeout.ms": "1000", "kafkalog.feature.transaction.version": "1"},
        {"max_timeout_ms": 1000, "transaction_version": 1},
        ("kafkalog.feature.transaction.version", "3")),
    "quotas": (
        QuotaConfig, QUOTA_CONFIG_DEF,
        {"quota_window_num": "quota.window.num", "quota_window_size_seconds": "quota.window.size.seconds",
         "controller_quota_window_num": "controller.quota.window.num",
         "controller_quota_window_size_seconds": "controller.quota.window.size.seconds",
         "max_connections": "max.connections", "max_connections_per_ip": "max.connections.per.ip",
         "max_connections_per_ip_overrides": "max.connections.per.ip.overrides",
         "max_connection_creation_rate": "max.connection.creation.rate"},
        {"quota.window.num": "5", "max.connections.per.ip.overrides": "10.0.0.1:5", "max.connections": "7"},
        {"quota_window_num": 5, "max_connections_per_ip_overrides": "10.0.0.1:5", "max_connections": 7},
        ("max.connections.per.ip.overrides", "nohost")),
    "sasl": (
        SaslConfig, SASL_CONFIG_DEF,
        {"enabled_mechanisms": "sasl.enabled.mechanisms", "jaas_config": "sasl.jaas.config",
         "server_max_receive_size": "sasl.server.max.receive.size",
         "connections_max_reauth_ms": "connections.max.reauth.ms",
         "failed_authentication_delay_ms": "connection.failed.authentication.delay.ms"},
        {"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256", "connections.max.reauth.ms": "60000"},
        {"enabled_mechanisms": ("PLAIN", "SCRAM-SHA-256"), "connections_max_reauth_ms": 60000},
        ("sasl.server.max.receive.size", "0")),
    "authorizer": (
        AuthorizerConfig, AUTHORIZER_CONFIG_DEF,
        {"class_name": "authorizer.class.name", "super_users": "super.users",
         "allow_everyone_if_no_acl_found": "allow.everyone.if.no.acl.found"},
        {"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:a;User:b",
         "allow.everyone.if.no.acl.found": "true"},
        {"class_name": STANDARD_AUTHORIZER, "super_users": "User:a;User:b", "allow_everyone_if_no_acl_found": True},
        ("authorizer.class.name", "com.example.MyAuthorizer")),
    "telemetry": (
        TelemetryConfig, TELEMETRY_CONFIG_DEF,
        {"max_bytes": "telemetry.max.bytes", "metrics_port": "kafkalog.metrics.port",
         "metrics_host": "kafkalog.metrics.host"},
        {"telemetry.max.bytes": "2048", "kafkalog.metrics.port": "0"},
        {"max_bytes": 2048, "metrics_port": 0},
        ("telemetry.max.bytes", "lots")),
}


@pytest.mark.parametrize("owner", sorted(OWNERS))
def test_defaults_are_the_definitions_defaults(owner: str) -> None:
    cls, table, fields, _raw, _expected, _bad = OWNERS[owner]
    assert cls.from_config({}) == cls() == cls.from_config(server_config({}))
    obj = cls()
    for field, key in fields.items():
        assert _same(getattr(obj, field)) == _same(table.keys[key].default), (field, key)
        assert key in SERVER_CONFIG_DEF.keys


@pytest.mark.parametrize("owner", sorted(OWNERS))
def test_from_raw_strings_and_from_a_parsed_config_alike(owner: str) -> None:
    cls, _table, _fields, raw, expected, _bad = OWNERS[owner]
    from_raw = cls.from_config(raw)
    for field, value in expected.items():
        got = getattr(from_raw, field)
        assert got == value and type(got) is type(value), (field, got, value)
    parsed = server_config({**raw, "unrelated.key": "kept"})
    assert cls.from_config(parsed) == from_raw
    # a config of Python values (what tests and embedders pass) works as well
    typed = {k: parsed[k] for k, key in SERVER_CONFIG_DEF.keys.items()
             if k in raw or any(alias in raw for alias in key.aliases)}
    assert cls.from_config(typed) == from_raw


@pytest.mark.parametrize("owner", sorted(OWNERS))
def test_config_objects_are_frozen(owner: str) -> None:
    cls = OWNERS[owner][0]
    obj = cls()
    name = dataclasses.fields(obj)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(obj, name, getattr(obj, name))


@pytest.mark.parametrize("owner", sorted(OWNERS))
def test_an_invalid_value_names_its_key(owner: str) -> None:
    cls, _table, _fields, _raw, _expected, (key, text) = OWNERS[owner]
    with pytest.raises(ConfigError) as exc:
        cls.from_config({key: text})
    assert exc.value.key == key and key in str(exc.value)
    with pytest.raises(ConfigError) as exc:
        server_config({key: text})
    assert exc.value.key == key


def test_the_broker_config_resolves_aliases_and_log_dir() -> None:
    assert BrokerConfig.from_config({"broker.id": "7"}).node_id == 7
    assert BrokerConfig.from_config({"broker.id": "7", "node.id": "8"}).node_id == 8
    assert BrokerConfig.from_config({"log.dir": "/x"}).log_dirs == ("/x",)
    assert BrokerConfig.from_config(server_config({"log.dir": "/x"})).log_dirs == ("/x",)
    assert BrokerConfig.from_config({"listener.security.protocol.map": "A:SSL"}).protocol_map() == {"A": "SSL"}


def test_remote_storage_options_and_quotas() -> None:
    props = {"remote.log.storage.manager.impl.prefix": "x.", "x.storage.uri": "/tmp/r", "x.n": 1,
             "rsm.config.dir": "/ignored"}
    settings = RemoteLogManagerConfig.from_config(props)
    assert settings.storage_manager_options(props) == {"storage.uri": "/tmp/r", "n": "1"}
    assert settings.quota("copy") is settings.copy_quota and settings.quota("fetch") is settings.fetch_quota
    with pytest.raises(ValueError):
        settings.quota("delete")


def test_the_sasl_config_hides_its_jaas_text() -> None:
    text = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="secret";'
    assert "secret" not in repr(SaslConfig.from_config({"sasl.jaas.config": text}))


def test_the_server_table_is_the_union_of_its_owners() -> None:
    names = [name for _title, _owner, table in SERVER_CONFIG_SECTIONS for name in table.keys]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})
    assert set(names) == set(SERVER_CONFIG_DEF.keys)
    for _title, _owner, table in SERVER_CONFIG_SECTIONS:
        assert all(SERVER_CONFIG_DEF.keys[name] is key for name, key in table.keys.items())
    owned = {title: table for title, _owner, table in SERVER_CONFIG_SECTIONS}
    # each owner's own table is its section
    for title, own in (("The broker", BROKER_CONFIG_DEF), ("The log manager", LOG_MANAGER_CONFIG_DEF),
                       ("The log cleaner", CLEANER_CONFIG_DEF), ("Tiered storage", REMOTE_STORAGE_CONFIG_DEF),
                       ("Consumer groups and offsets", GROUP_CONFIG_DEF), ("Transactions", TRANSACTION_CONFIG_DEF),
                       ("Quotas", QUOTA_CONFIG_DEF), ("SASL", SASL_CONFIG_DEF),
                       ("Authorization", AUTHORIZER_CONFIG_DEF), ("Telemetry and metrics", TELEMETRY_CONFIG_DEF)):
        assert set(owned[title].keys) == set(own.keys), title
    with pytest.raises(RuntimeError, match="defined twice"):
        _union((("a", "m", BROKER_CONFIG_DEF), ("b", "m", ConfigDef().define("node.id", "int", 1, "again"))))


def _is_config_module(path: Path) -> bool:
    return path.name == "config.py" or path.name.endswith("_config.py") and path.name != "dynamic_config.py"


def test_no_module_reads_a_server_key_with_a_default_of_its_own() -> None:
    """``x.get("a.b", default)`` (or ``get("a.b", default)`` through a bound ``get``) of a
    server key outside the config modules would be a second default beside the key's
    definition: the owner's config object is read instead."""
    keys = set(SERVER_CONFIG_DEF.keys)
    bad = []
    for package in ("broker/server", "broker/log"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if _is_config_module(path):
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if not isinstance(node, ast.Call) or len(node.args) + len(node.keywords) < 2 or not node.args:
                    continue
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
                first = node.args[0]
                if (name in ("get", "setdefault", "pop") and isinstance(first, ast.Constant)
                        and first.value in keys):
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    assert bad == []
