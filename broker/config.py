"""Typed configuration with Kafka's keys: definitions, parsing, validation, and the broker's
own settings (``KafkaConfig``).

Owns: ``ConfigDef`` (a table of keys with type, default, validator and documentation, as
Kafka's ``ConfigDef``), ``ConfigError`` (one clear message that names the key), Java
properties files (``load_properties``), and ``KafkaConfig``: the keys of
``server.properties`` this broker reads. Topic-level keys live in ``broker/log/config.py``
(``LogConfig``); the producer's in ``broker/client/producer/config.py``. Also the JAAS
grammar of ``sasl.jaas.config`` values (``parse_jaas_config`` -> ``JaasEntry``), shared by
the broker's SASL and the client's. Every layer may use
this module; of the project's it imports only ``broker.record.limits`` (``LONG_MAX`` and
``INT_MAX``, Kafka's ``Long.MAX_VALUE`` / ``Integer.MAX_VALUE`` defaults, are its
``INT64_MAX`` and ``INT32_MAX`` under ConfigDef's names).

Values: strings from files and command lines are parsed by type (``int``/``long``,
``double``, ``boolean``, ``string``, ``list``, ``password``); Python values are accepted as
they are when of the right type. Unknown keys are kept (as Kafka does, with a warning from
the caller), never silently dropped.

Thread-safety: definitions are immutable after module import; a parsed config is a
read-only mapping.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.record.limits import INT32_MAX as INT_MAX
from broker.record.limits import INT32_MIN
from broker.record.limits import INT64_MAX as LONG_MAX

INT = "int"
LONG = "long"
DOUBLE = "double"
BOOLEAN = "boolean"
STRING = "string"
LIST = "list"
PASSWORD = "password"


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message names the key."""

    def __init__(self, key: str, value: Any, reason: str):
        self.key = key
        self.value = value
        super().__init__(f"Invalid value {value!r} for configuration {key}: {reason}")


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: str
    default: Any
    doc: str
    validator: Callable[[str, Any], None] | None = None
    aliases: tuple[str, ...] = ()


def _connection_overrides(key: str, value: Any) -> None:
    for item in str(value or "").split(","):
        host, sep, count = item.strip().rpartition(":")
        if item.strip() and (not sep or not host or not count.strip().isdigit()):
            raise ConfigError(key, value, "entries are host:count, comma-separated")


def _known_rebalance_protocols(key: str, value: Any) -> None:
    unknown = [p for p in value or () if p not in ("classic", "consumer")]
    if unknown or "classic" not in (value or ()):
        raise ConfigError(key, value, "the protocols are classic (always) and consumer")


def at_least(minimum: float) -> Callable[[str, Any], None]:
    def check(key: str, value: Any) -> None:
        if value is not None and value < minimum:
            raise ConfigError(key, value, f"Value must be at least {minimum}")
    return check


def between(low: float, high: float) -> Callable[[str, Any], None]:
    def check(key: str, value: Any) -> None:
        if value is not None and not low <= value <= high:
            raise ConfigError(key, value, f"Value must be in [{low}, {high}]")
    return check


def _known_assignors(name: str, value: Any) -> None:
    unknown = [v for v in value or () if v not in ("uniform", "range")]
    if not value or unknown:
        raise ConfigError(name, value, "the assignors are uniform and range")


# authorizer.class.name values that select the built-in authorizer (Kafka's KRaft and ZooKeeper names)
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
AUTHORIZER_CLASS_NAMES = (STANDARD_AUTHORIZER, "kafka.security.authorizer.AclAuthorizer",
                          "kafka.security.auth.SimpleAclAuthorizer")


def one_of(*choices: str) -> Callable[[str, Any], None]:
    def check(key: str, value: Any) -> None:
        values = value if isinstance(value, list) else [value]
        for v in values:
            if v is not None and v not in choices:
                raise ConfigError(key, value, f"String must be one of: {', '.join(choices)}")
    return check


def _parse(key: ConfigKey, raw: Any) -> Any:
    t = key.type
    if raw is None:
        return None
    if isinstance(raw, str):
        s = raw.strip()
        try:
            if t in (INT, LONG):
                v = int(s)
                if t == INT and not INT32_MIN <= v <= INT_MAX:
                    raise ValueError
                return v
            if t == DOUBLE:
                return float(s)
            if t == BOOLEAN:
                if s.lower() not in ("true", "false"):
                    raise ValueError
                return s.lower() == "true"
            if t == LIST:
                return [p.strip() for p in s.split(",") if p.strip()]
            return s
        except ValueError:
            raise ConfigError(key.name, "[hidden]" if t == PASSWORD else raw, f"Expected value to be a {t}") from None
    if t in (INT, LONG) and isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    if t == DOUBLE and isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return float(raw)
    if t == BOOLEAN and isinstance(raw, bool):
        return raw
    if t == LIST and isinstance(raw, (list, tuple)):
        return [str(x) for x in raw]
    if t in (STRING, PASSWORD) and isinstance(raw, str):
        return raw
    raise ConfigError(key.name, "[hidden]" if t == PASSWORD else raw, f"Expected value to be a {t}")


@dataclass
class ConfigDef:
    """A table of configuration keys."""

    keys: dict[str, ConfigKey] = field(default_factory=dict)

    def define(self, name: str, type: str, default: Any, doc: str,
               validator: Callable[[str, Any], None] | None = None,
               aliases: Iterable[str] = ()) -> ConfigDef:
        self.keys[name] = ConfigKey(name, type, default, doc, validator, tuple(aliases))
        return self

    def parse(self, props: Mapping[str, Any], *, strict: bool = False) -> dict[str, Any]:
        """Defaults overlaid with ``props``, parsed and validated. With ``strict``, an
        unknown key is an error; otherwise it is kept as given."""
        out: dict[str, Any] = {}
        for key in self.keys.values():
            out[key.name] = key.default
        for name, raw in props.items():
            key = self.keys.get(name)
            if key is None:
                if strict:
                    raise ConfigError(name, raw, "unknown configuration")
                out[name] = raw
                continue
            out[name] = _parse(key, raw)
        for key in self.keys.values():
            if key.validator is not None:
                key.validator(key.name, out[key.name])
        return out

    def validate_value(self, name: str, raw: Any) -> Any:
        key = self.keys.get(name)
        if key is None:
            raise ConfigError(name, raw, "unknown configuration")
        value = _parse(key, raw)
        if key.validator is not None:
            key.validator(name, value)
        return value

    def names(self) -> list[str]:
        return list(self.keys)


def redacted(config_def: ConfigDef, values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` with the password-typed keys' values replaced by ``[hidden]`` (for reprs and logs)."""
    return {k: "[hidden]" if v is not None and k in config_def.keys and config_def.keys[k].type == PASSWORD
            else v for k, v in values.items()}


def load_properties(path: str | Path) -> dict[str, str]:
    """A Java-properties file: ``key=value`` or ``key: value`` or ``key value``; ``#`` and
    ``!`` comments; backslash continuations; ``\\`` escapes."""
    out: dict[str, str] = {}
    logical = ""
    for raw in Path(path).read_text(encoding="utf-8").splitlines():
        line = raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            logical += line[:-1]
            continue
        logical += line
        m = re.match(r"((?:\\.|[^=:\s\\])+)\s*(?:[=:]\s*|\s+|$)(.*)$", logical)
        if m:
            key = re.sub(r"\\(.)", r"\1", m.group(1))
            out[key] = re.sub(r"\\(.)", r"\1", m.group(2).rstrip())
        logical = ""
    return out


def _listeners(key: str, value: Any) -> None:
    for item in value or []:
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*://(\[[0-9a-fA-F:]*\]|[^:\s]*):\d+$", item):
            raise ConfigError(key, ",".join(value),
                              f"listener {item!r} is not of the form NAME://host:port")


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# Kafka's default listener.security.protocol.map: each protocol's name as a listener name.
DEFAULT_SECURITY_PROTOCOL_MAP = tuple(f"{p}:{p}" for p in SECURITY_PROTOCOLS)


def parse_protocol_map(value: Iterable[str]) -> dict[str, str]:
    """``listener.security.protocol.map`` entries as {LISTENER: PROTOCOL} (names upper-case)."""
    out = {}
    for item in value:
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"{item!r} is not LISTENER:PROTOCOL with a protocol of {', '.join(SECURITY_PROTOCOLS)}")
        out[name] = protocol
    return out


def _protocol_map(key: str, value: Any) -> None:
    try:
        parse_protocol_map(value or [])
    except ValueError as exc:
        raise ConfigError(key, ",".join(value), str(exc)) from None


STORE_TYPES = ("JKS", "PKCS12", "PEM")
TLS_PROTOCOLS = ("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3")


def _protocol_names(key: str, value: Any) -> None:
    for v in value or []:
        if v not in TLS_PROTOCOLS:
            raise ConfigError(key, ",".join(value), f"unknown protocol {v!r} (one of {', '.join(TLS_PROTOCOLS)})")


def define_ssl_keys(config_def: ConfigDef, *, client: bool) -> ConfigDef:
    """Add Kafka's SSL keys (Kafka's ``SslConfigs``) to ``config_def``; the broker also
    takes ``ssl.client.auth`` and ``ssl.principal.mapping.rules``."""
    d = config_def
    d.define("ssl.protocol", STRING, "TLSv1.3", "The TLS protocol family (TLSv1.2, TLSv1.3, TLS); "
             "ssl.enabled.protocols decides what is negotiated.", one_of("TLS", "TLSv1.1", "TLSv1.2", "TLSv1.3"))
    d.define("ssl.enabled.protocols", LIST, ["TLSv1.2", "TLSv1.3"], "Protocols enabled for TLS connections.",
             _protocol_names)
    d.define("ssl.cipher.suites", LIST, [], "Cipher suites (Java/IANA or OpenSSL names); empty: OpenSSL's "
             "defaults. TLSv1.3 suites cannot be narrowed from Python.")
    d.define("ssl.keystore.type", STRING, "JKS", "PEM or PKCS12 (JKS is unsupported: convert it to PKCS12).",
             one_of(*STORE_TYPES))
    d.define("ssl.keystore.location", STRING, None, "The key store file (PEM: key and certificate chain).")
    d.define("ssl.keystore.password", PASSWORD, None, "The key store's password (PKCS12).")
    d.define("ssl.key.password", PASSWORD, None, "The private key's password (PEM, PKCS12).")
    d.define("ssl.keystore.certificate.chain", PASSWORD, None, "Inline PEM certificate chain (KIP-651).")
    d.define("ssl.keystore.key", PASSWORD, None, "Inline PEM private key (KIP-651).")
    d.define("ssl.truststore.type", STRING, "JKS", "PEM or PKCS12 (JKS is unsupported: convert it).",
             one_of(*STORE_TYPES))
    d.define("ssl.truststore.location", STRING, None, "The trust store file.")
    d.define("ssl.truststore.password", PASSWORD, None, "The trust store's password (PKCS12).")
    d.define("ssl.truststore.certificates", PASSWORD, None, "Inline PEM trusted certificates (KIP-651).")
    d.define("ssl.endpoint.identification.algorithm", STRING, "https",
             "https: verify the server's host name against its certificate; empty: do not.")
    for name in ("ssl.keymanager.algorithm", "ssl.trustmanager.algorithm", "ssl.provider",
                 "ssl.secure.random.implementation", "ssl.engine.factory.class"):
        d.define(name, STRING, None, "Accepted for compatibility (Java only); no effect.")
    if not client:
        d.define("ssl.client.auth", STRING, "none", "Client certificates: none, requested or required.",
                 one_of("none", "requested", "required"))
        d.define("ssl.principal.mapping.rules", STRING, "DEFAULT",
                 "Rules mapping a client certificate's subject DN to a principal name.")
    return d



# The built-in remote storage manager (broker/log/remote/storage_manager.py), and Kafka's
# own local-directory one (its tiered-storage quick start: rsm.config.dir), taken as the
# same manager so that configuration works unchanged (the layout written is ours).
REMOTE_STORAGE_MANAGER_CLASS = "kafkalog.remote.FileSystemRemoteStorageManager"
LOCAL_TIERED_STORAGE_CLASS = "org.apache.kafka.server.log.remote.storage.LocalTieredStorage"
# Kafka's default metadata manager: its role is played by the manifests (a segment exists
# remotely iff its manifest does), so it is the only value accepted.
REMOTE_LOG_METADATA_MANAGER_CLASS = ("org.apache.kafka.server.log.remote.metadata.storage."
                                     "TopicBasedRemoteLogMetadataManager")

# The broker's own keys (server.properties). The topic-level defaults (log.segment.bytes,
# log.retention.hours, message.max.bytes ...) are defined in broker/log/config.py and
# accepted here as they are.
SERVER_CONFIG_DEF = (
    ConfigDef()
    .define("node.id", INT, 1, "This broker's id (broker.id is accepted as an alias).",
            at_least(0), aliases=("broker.id",))
    .define("log.dirs", LIST, None, "Directories holding the partition logs.")
    .define("log.dir", STRING, "/tmp/kafka-logs", "Used when log.dirs is not set.")
    .define("listeners", LIST, ["PLAINTEXT://localhost:9092"],
            "Addresses to listen on, NAME://host:port (port 0 picks a free one).", _listeners)
    .define("advertised.listeners", LIST, None,
            "Addresses given to clients in Metadata; defaults to listeners.", _listeners)
    .define("listener.security.protocol.map", LIST, list(DEFAULT_SECURITY_PROTOCOL_MAP),
            "Listener name -> security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), "
            "NAME:PROTOCOL pairs.", _protocol_map)
    .define("inter.broker.listener.name", STRING, None,
            "Accepted (a single node talks to no other broker); must name a listener.")
    .define("security.inter.broker.protocol", STRING, "PLAINTEXT", "Accepted; no effect on a single node.",
            one_of(*SECURITY_PROTOCOLS))
    .define("num.partitions", INT, 1, "Partitions of an auto-created topic.", at_least(1))
    .define("default.replication.factor", INT, 1, "Always 1 on a single node.", between(1, 1))
    .define("auto.create.topics.enable", BOOLEAN, True,
            "Create a topic on Metadata or Produce for an unknown name.")
    .define("delete.topic.enable", BOOLEAN, True, "Allow DeleteTopics.")
    .define("socket.request.max.bytes", INT, 104857600,
            "Largest request frame accepted; larger ones close the connection.", at_least(1))
    .define("socket.send.buffer.bytes", INT, 102400, "SO_SNDBUF; -1 for the OS default.")
    .define("socket.receive.buffer.bytes", INT, 102400, "SO_RCVBUF; -1 for the OS default.")
    .define("num.network.threads", INT, 3, "Accepted for compatibility.", at_least(1))
    .define("num.io.threads", INT, 8, "Accepted for compatibility.", at_least(1))
    .define("queued.max.requests", INT, 500,
            "Requests read ahead on one connection before reading pauses.", at_least(1))
    .define("connections.max.idle.ms", LONG, 600000, "Close idle connections after this.",
            at_least(-1))
    # SASL (broker/server/security): Kafka's keys and defaults. Per-listener JAAS configs
    # (listener.name.<listener>.<mechanism>.sasl.jaas.config) are read by prefix.
    .define("sasl.enabled.mechanisms", LIST, ["GSSAPI"],
            "The SASL mechanisms enabled on SASL listeners (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 "
            "and OAUTHBEARER with unsecured JWTs are implemented).")
    .define("sasl.mechanism.inter.broker.protocol", STRING, "GSSAPI",
            "Accepted for compatibility (a single node has no inter-broker traffic).")
    # GSSAPI (Kerberos) is not implemented: its keys are accepted, also as dynamic broker
    # configs (Kafka reconfigures them per listener), and have no effect.
    .define("sasl.kerberos.service.name", STRING, None, "Accepted for compatibility (GSSAPI is not implemented).")
    .define("sasl.kerberos.kinit.cmd", STRING, "/usr/bin/kinit",
            "Accepted for compatibility (GSSAPI is not implemented).")
    .define("sasl.kerberos.ticket.renew.window.factor", DOUBLE, 0.8,
            "Accepted for compatibility (GSSAPI is not implemented).")
    .define("sasl.kerberos.ticket.renew.jitter", DOUBLE, 0.05,
            "Accepted for compatibility (GSSAPI is not implemented).")
    .define("sasl.kerberos.min.time.before.relogin", LONG, 60000,
            "Accepted for compatibility (GSSAPI is not implemented).")
    .define("sasl.kerberos.principal.to.local.rules", LIST, ["DEFAULT"],
            "Accepted for compatibility (GSSAPI is not implemented).")
    .define("sasl.jaas.config", PASSWORD, None,
            "JAAS login context for SASL connections, in the format of a JAAS configuration file.")
    .define("sasl.server.max.receive.size", INT, 524288,
            "The largest request accepted before and during SASL authentication.", at_least(1))
    .define("connections.max.reauth.ms", LONG, 0,
            "When positive, the session lifetime of SASL connections (KIP-368): past it a client "
            "must re-authenticate or is disconnected.", at_least(0))
    .define("connection.failed.authentication.delay.ms", INT, 100,
            "How long the answer to a failed authentication is delayed (slows password guessing).",
            at_least(0))
    # Authorization (broker/server/security/authorizer.py): Kafka's keys and defaults.
    .define("authorizer.class.name", STRING, "",
            "The authorizer: empty for none (every request allowed), or Kafka's "
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer for the built-in ACL authorizer.",
            one_of("", *AUTHORIZER_CLASS_NAMES))
    .define("super.users", STRING, "",
            "Principals allowed every operation, separated by ';' (e.g. User:admin;User:CN=ops).")
    .define("allow.everyone.if.no.acl.found", BOOLEAN, False,
            "When no ACL applies to a resource, allow every principal (true) or only super users.")
    # Tiered storage (KIP-405, broker/log/remote): Kafka's keys and defaults. The storage
    # manager's own keys are read by prefix (remote.log.storage.manager.impl.prefix, e.g.
    # rsm.config.storage.uri and fs.s3a.* keys under it).
    .define("remote.log.storage.system.enable", BOOLEAN, False,
            "Enable tiered storage: copy closed segments of remote.storage.enable topics to "
            "remote storage and serve them from there.")
    .define("remote.log.manager.task.interval.ms", LONG, 30000,
            "How often the remote log manager copies segments and applies retention.", at_least(1))
    .define("remote.log.storage.manager.class.name", STRING, REMOTE_STORAGE_MANAGER_CLASS,
            "The remote storage manager; the built-in one is "
            f"{REMOTE_STORAGE_MANAGER_CLASS} (pyarrow file systems: local paths, file:, s3://, gs://, "
            f"abfs://, hdfs://); {LOCAL_TIERED_STORAGE_CLASS} (Kafka's, with rsm.config.dir) is taken as it.",
            one_of(REMOTE_STORAGE_MANAGER_CLASS, LOCAL_TIERED_STORAGE_CLASS))
    .define("remote.log.storage.manager.impl.prefix", STRING, "rsm.config.",
            "The prefix of the keys passed to the remote storage manager (without it).")
    .define("rsm.config.storage.uri", STRING, None,
            "Where the remote storage manager writes (with the default prefix): a local path, "
            "file:, s3://bucket/prefix, gs://bucket/prefix... (rsm.config.dir, Kafka's "
            "LocalTieredStorage key, is read when this is not set).")
    .define("remote.log.storage.manager.class.path", STRING, None,
            "Kafka's class path of the storage manager's jars: accepted and unused (no JVM).")
    .define("remote.log.metadata.manager.class.name", STRING, REMOTE_LOG_METADATA_MANAGER_CLASS,
            "The remote log metadata manager: Kafka's default is the only value; the manifests "
            "next to the remote segments are the metadata store.", one_of(REMOTE_LOG_METADATA_MANAGER_CLASS))
    .define("remote.log.metadata.manager.class.path", STRING, None,
            "Kafka's class path of the metadata manager's jars: accepted and unused (no JVM).")
    .define("remote.log.metadata.manager.impl.prefix", STRING, "rlmm.config.",
            "The prefix of the metadata manager's keys: accepted; their keys are unused.")
    .define("remote.log.metadata.manager.listener.name", STRING, None,
            "The listener the metadata manager's clients use: accepted and unused (no metadata topic).")
    # KIP-956's quotas on the bytes copied to and fetched from remote storage (broker-wide;
    # the max.bytes.per.second keys are also dynamic: broker/server/quota/remote_log_quota.py)
    .define("remote.log.manager.copy.max.bytes.per.second", LONG, LONG_MAX,
            "The most bytes per second the remote log manager copies to remote storage; a copy "
            "waits while the rate is above it.", at_least(1))
    .define("remote.log.manager.copy.quota.window.num", INT, 11,
            "Samples kept for the copy quota's rate.", at_least(1))
    .define("remote.log.manager.copy.quota.window.size.seconds", INT, 1,
            "The time span of each sample of the copy quota's rate.", at_least(1))
    .define("remote.log.manager.fetch.max.bytes.per.second", LONG, LONG_MAX,
            "The most bytes per second Fetch reads from remote storage; past it, a fetch of "
            "remote offsets returns no records for the partition (no error) until the rate drops.",
            at_least(1))
    .define("remote.log.manager.fetch.quota.window.num", INT, 11,
            "Samples kept for the fetch quota's rate.", at_least(1))
    .define("remote.log.manager.fetch.quota.window.size.seconds", INT, 1,
            "The time span of each sample of the fetch quota's rate.", at_least(1))
    .define("log.retention.check.interval.ms", LONG, 300000,
            "How often retention is enforced.", at_least(1))
    .define("log.flush.scheduler.interval.ms", LONG, LONG_MAX,
            "How often the flush.ms policy is checked.", at_least(1))
    .define("log.flush.offset.checkpoint.interval.ms", INT, 60000,
            "How often recovery points are checkpointed.", at_least(0))
    .define("log.flush.start.offset.checkpoint.interval.ms", INT, 60000,
            "How often log start offsets are checkpointed.", at_least(0))
    .define("producer.id.expiration.ms", INT, 86400000,
            "Forget an idle producer's state after this.", at_least(1))
    # The log cleaner (broker/log/cleaner): Kafka's keys and defaults.
    .define("log.cleaner.enable", BOOLEAN, True,
            "Run the log cleaner threads that compact cleanup.policy=compact topics.")
    .define("log.cleaner.threads", INT, 1, "The number of log cleaner threads.", at_least(0))
    .define("log.cleaner.backoff.ms", LONG, 15000,
            "How long a cleaner thread sleeps when no log is cleanable.", at_least(0))
    .define("log.cleaner.dedupe.buffer.size", LONG, 134217728,
            "Memory of the offset maps (key hash -> latest offset), shared by the cleaner "
            "threads.", at_least(0))
    .define("log.cleaner.io.buffer.load.factor", DOUBLE, 0.9,
            "How full a cleaner's offset map may get before a cleaning stops filling it.",
            between(0, 1))
    .define("log.cleaner.io.max.bytes.per.second", DOUBLE, sys.float_info.max,
            "The log cleaner's I/O (bytes read plus written per second) is throttled to this.",
            at_least(0))
    # Classic consumer groups (broker/server/group/membership.py): Kafka's keys and defaults.
    .define("group.initial.rebalance.delay.ms", INT, 3000,
            "The amount of time the group coordinator will wait for more consumers to join a new "
            "group before performing the first rebalance.", at_least(0))
    .define("group.min.session.timeout.ms", INT, 6000,
            "The minimum allowed session timeout for registered consumers.", at_least(0))
    .define("group.max.session.timeout.ms", INT, 1800000,
            "The maximum allowed session timeout for registered consumers.", at_least(0))
    .define("group.max.size", INT, 2147483647,
            "The maximum number of consumers that a single consumer group can accommodate.", at_least(1))
    # KIP-848 consumer groups (broker/server/group/consumer_membership.py): Kafka's keys and defaults.
    .define("group.consumer.heartbeat.interval.ms", INT, 5000,
            "The heartbeat interval given to the members of a consumer group.", at_least(1))
    .define("group.consumer.session.timeout.ms", INT, 45000,
            "The timeout to detect client failures when using the consumer group protocol.", at_least(1))
    .define("group.consumer.max.size", INT, 2147483647,
            "The maximum number of consumers that a single consumer group can accommodate.", at_least(1))
    .define("group.coordinator.rebalance.protocols", LIST, ["classic", "consumer"],
            "The group protocols served: classic (JoinGroup/SyncGroup) and consumer (KIP-848, "
            "ConsumerGroupHeartbeat); without consumer its APIs are not advertised.",
            _known_rebalance_protocols)
    .define("group.consumer.assignors", LIST, ["uniform", "range"],
            "The server side assignors as a list of names (uniform, range); the first one is used "
            "by default.", _known_assignors)
    .define("offsets.topic.replication.factor", INT, 1, "Always 1 on a single node.")
    # The group coordinator's offsets topic (broker/server/group): Kafka's keys and defaults.
    .define("offsets.topic.num.partitions", INT, 50,
            "The number of partitions for the offset commit topic (should not change after "
            "deployment: an existing __consumer_offsets keeps its own count).", at_least(1))
    .define("offsets.topic.segment.bytes", INT, 104857600,
            "The offsets topic segment bytes should be kept relatively small in order to "
            "facilitate faster log compaction and cache loads.", at_least(14))
    .define("offsets.topic.compression.codec", INT, 0,
            "Compression codec for the offsets topic (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd); "
            "each commit is one batch, hence atomic.", between(0, 4))
    .define("offsets.load.buffer.size", INT, 5242880,
            "Batch size for reading from the offsets segments when loading offsets into the "
            "cache (soft-limit, overridden if records are too large).", at_least(1))
    .define("offsets.retention.minutes", INT, 10080,
            "Offsets of a standalone (assign()) consumer expire this long after their last "
            "commit; those of a group with a protocol this long after it became empty.",
            at_least(1))
    .define("offsets.retention.check.interval.ms", LONG, 600000,
            "Frequency at which to check for stale offsets.", at_least(1))
    .define("offset.metadata.max.bytes", INT, 4096,
            "The maximum size for a metadata entry associated with an offset commit.")
    .define("offsets.commit.timeout.ms", INT, 5000,
            "Accepted for compatibility: with one replica a commit is answered as soon as its "
            "append returns (Kafka waits up to this for the offsets topic's replicas).", at_least(1))
    .define("transaction.state.log.replication.factor", INT, 1, "Always 1 on a single node.")
    .define("transaction.state.log.min.isr", INT, 1, "Always 1 on a single node.")
    # The transaction coordinator (broker/server/txn/): Kafka's keys and defaults.
    .define("transaction.state.log.num.partitions", INT, 50,
            "The number of partitions for the transaction topic (should not change after deployment).",
            at_least(1))
    .define("transaction.state.log.segment.bytes", INT, 104857600,
            "The transaction topic segment bytes.", at_least(1))
    .define("transaction.state.log.load.buffer.size", INT, 5242880,
            "Batch size for reading from the transaction log segments when loading producer ids "
            "and transactions into the cache.", at_least(1))
    .define("transaction.max.timeout.ms", INT, 900000,
            "The maximum allowed timeout for transactions; a larger transaction.timeout.ms in "
            "InitProducerId gets INVALID_TRANSACTION_TIMEOUT.", at_least(1))
    .define("transactional.id.expiration.ms", INT, 604800000,
            "How long a transactional id without any transaction status update is kept.", at_least(1))
    .define("transaction.abort.timed.out.transaction.cleanup.interval.ms", INT, 10000,
            "The interval at which to roll back transactions that have timed out.", at_least(1))
    .define("transaction.remove.expired.transaction.cleanup.interval.ms", INT, 3600000,
            "The interval at which to remove transactions that have expired "
            "(transactional.id.expiration.ms passing).", at_least(1))
    .define("kafkalog.feature.transaction.version", INT, 2,
            "The transaction.version feature level finalized in ApiVersions (Kafka sets it with "
            "kafka-features.sh): 2 lets Kafka 4 clients use transaction version 2 (KIP-890 part 2).",
            between(0, 2))
    .define("kafkalog.transaction.marker.retry.interval.ms", INT, 1000,
            "How often the markers of a decided transaction are retried after writing them failed.",
            at_least(1))
    .define("cluster.id", STRING, None, "Cluster id; generated once and kept in meta.properties.")
    # Quotas (broker/server/quota/): the sampling of client quotas and of the controller
    # mutation token bucket (burst = num x size x rate).
    .define("quota.window.num", INT, 11, "Samples kept for client quotas.", at_least(1))
    .define("quota.window.size.seconds", INT, 1, "Width of one client-quota sample.", at_least(1))
    .define("controller.quota.window.num", INT, 11, "Samples of the controller mutation quota.", at_least(1))
    .define("controller.quota.window.size.seconds", INT, 1, "Width of one controller mutation sample.",
            at_least(1))
    # Connection quotas in the acceptor (broker/server/quota/connection_quotas.py); per
    # listener also listener.name.<l>.max.connections / .max.connection.creation.rate
    .define("max.connections", INT, INT_MAX, "Connections the broker accepts at once (all listeners).",
            at_least(0))
    .define("max.connections.per.ip", INT, INT_MAX, "Connections accepted at once from one address.",
            at_least(0))
    .define("max.connections.per.ip.overrides", STRING, "",
            "Per-address exceptions to max.connections.per.ip: host:count,...", _connection_overrides)
    .define("max.connection.creation.rate", INT, INT_MAX, "New connections per second the broker accepts.",
            at_least(0))
    # Client telemetry (KIP-714, broker/server/telemetry/)
    .define("telemetry.max.bytes", INT, 1048576, "Largest PushTelemetry payload accepted.", at_least(1))
    # The operators' metrics endpoint (broker/server/telemetry/prometheus.py): off unless set
    .define("kafkalog.metrics.port", INT, None, "Port of the Prometheus /metrics endpoint (0: any free one).")
    .define("kafkalog.metrics.host", STRING, "127.0.0.1", "Address of the Prometheus /metrics endpoint.")
)
# TLS (broker/server/ssl_context.py): Kafka's ssl.* keys, each also per listener as
# listener.name.<listener lowercase>.ssl.* (which wins).
define_ssl_keys(SERVER_CONFIG_DEF, client=False)


def server_config(props: Mapping[str, Any]) -> dict[str, Any]:
    """Parse a broker's properties: known server keys typed and validated, aliases
    resolved, every other key (topic defaults such as log.segment.bytes) kept as given
    for ``broker.log.config.topic_defaults_from_server``."""
    props = dict(props)
    for key in SERVER_CONFIG_DEF.keys.values():
        for alias in key.aliases:
            if alias in props and key.name not in props:
                props[key.name] = props.pop(alias)
            else:
                props.pop(alias, None)
    values = SERVER_CONFIG_DEF.parse(props)
    if not values.get("log.dirs"):
        values["log.dirs"] = [values["log.dir"]]
    return values


# --- JAAS (sasl.jaas.config) ----------------------------------------------------------

@dataclass(frozen=True)
class JaasEntry:
    """One login module of a ``sasl.jaas.config`` value (Kafka's ``JaasConfig``):
    ``<LoginModule class> <flag> key=value ... ;``. ``repr`` hides the option values
    (they hold passwords)."""

    login_module: str
    flag: str
    options: dict[str, str]

    def __repr__(self) -> str:
        return f"JaasEntry({self.login_module} {self.flag} {sorted(self.options)})"


_JAAS_FLAGS = ("required", "requisite", "sufficient", "optional")
_JAAS_TOKEN = re.compile(r'\s*(?:(?P<q>"(?:[^"\\]|\\.)*")|(?P<w>[^\s=;"]+)|(?P<p>[=;]))', re.S)


def parse_jaas_config(key: str, text: str) -> list[JaasEntry]:
    """Parse a JAAS configuration value; ConfigError (naming ``key``, never echoing the
    value, which holds passwords) when it does not follow Kafka's grammar."""
    def fail(reason: str) -> ConfigError:
        return ConfigError(key, "[hidden]", reason)

    tokens: list[tuple[str, str]] = []
    pos = 0
    text = text or ""
    while True:
        m = _JAAS_TOKEN.match(text, pos)
        if m is None:
            if text[pos:].strip():
                raise fail("unterminated quoted value in JAAS configuration")
            break
        pos = m.end()
        if m.group("q") is not None:
            tokens.append(("q", re.sub(r"\\(.)", r"\1", m.group("q")[1:-1])))
        elif m.group("w") is not None:
            tokens.append(("w", m.group("w")))
        else:
            tokens.append(("p", m.group("p")))
    entries: list[JaasEntry] = []
    i = 0
    while i < len(tokens):
        if tokens[i][0] != "w":
            raise fail("expected a login module class name in JAAS configuration")
        module = tokens[i][1]
        if i + 1 >= len(tokens) or tokens[i + 1][0] != "w" or tokens[i + 1][1].lower() not in _JAAS_FLAGS:
            raise fail(f"login module control flag not specified for {module}")
        flag = tokens[i + 1][1].lower()
        i += 2
        options: dict[str, str] = {}
        while i < len(tokens) and tokens[i] != ("p", ";"):
            if (tokens[i][0] != "w" or i + 2 >= len(tokens) or tokens[i + 1] != ("p", "=")
                    or tokens[i + 2][0] == "p"):
                raise fail(f"invalid option for {module}: expected key=value")
            options[tokens[i][1]] = tokens[i + 2][1]
            i += 3
        if i >= len(tokens):
            raise fail("JAAS config entry not terminated by semi-colon")
        i += 1
        entries.append(JaasEntry(module, flag, options))
    if not entries:
        raise fail("JAAS config has no login module")
    return entries
