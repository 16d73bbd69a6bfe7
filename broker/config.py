"""Typed configuration with Kafka's keys: definitions, parsing, validation, and the broker's
core keys.

Owns: ``ConfigDef`` (a table of keys with type, default, validator and documentation, as
Kafka's ``ConfigDef``; ``parse_from`` takes a table's own keys out of a larger raw or
parsed config), ``ConfigError`` (one clear message that names the key), the validators
(``at_least``, ``between``, ``one_of``), Java properties files (``load_properties``), the
TLS keys (``define_ssl_keys``, shared by the broker and the clients), and the broker's core
keys (``define_broker_keys``: node.id, cluster.id, log.dirs, listeners, sockets, topic
creation) with ``BrokerConfig``, their typed, frozen view. Every other server key is
defined beside the module that reads it (each ``define_<feature>_keys`` with its frozen
config object), and ``broker/server/config.py`` assembles them into ``SERVER_CONFIG_DEF``
and parses a broker's properties (``server_config``). Topic-level keys live in
``broker/log/config.py`` (``LogConfig``); the producer's in
``broker/client/producer/config.py``. Also the JAAS grammar of ``sasl.jaas.config`` values
(``parse_jaas_config`` -> ``JaasEntry``), shared by the broker's SASL and the client's,
and ISO-8601 durations as ``java.time.Duration.parse`` reads them (``parse_duration_ms``:
group configs' ``by_duration:`` and the tools' ``--by-duration``).
Every layer may use this module; of the project's it imports only ``broker.record.limits``
(``LONG_MAX`` and ``INT_MAX``, Kafka's ``Long.MAX_VALUE`` / ``Integer.MAX_VALUE``
defaults, are its ``INT64_MAX`` and ``INT32_MAX`` under ConfigDef's names).

Values: strings from files and command lines are parsed by type (``int``/``long``,
``double``, ``boolean``, ``string``, ``list``, ``password``); Python values are accepted as
they are when of the right type. Unknown keys are kept (as Kafka does, with a warning from
the caller), never silently dropped.

Thread-safety: definitions are immutable after module import; a parsed config is a
read-only mapping; a ``BrokerConfig`` is frozen.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.record.limits import INT32_MAX, INT32_MIN, INT64_MAX

# Kafka's Integer.MAX_VALUE and Long.MAX_VALUE, the defaults of many keys (the owners'
# tables take them from here)
INT_MAX = INT32_MAX
LONG_MAX = INT64_MAX

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
            found = self.keys.get(name)
            if found is None:
                if strict:
                    raise ConfigError(name, raw, "unknown configuration")
                out[name] = raw
                continue
            out[name] = _parse(found, raw)
        for key in self.keys.values():
            if key.validator is not None:
                key.validator(key.name, out[key.name])
        return out

    def parse_from(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """This table's keys taken from ``config``, a raw or parsed mapping that may hold
        other keys too (ignored): an alias counts for its key when the key is absent; each
        value parsed and validated by its definition; a missing key takes its default. What a
        feature's config object reads from the broker's config."""
        own: dict[str, Any] = {}
        for key in self.keys.values():
            if key.name in config:
                own[key.name] = config[key.name]
            else:
                for alias in key.aliases:
                    if alias in config:
                        own[key.name] = config[alias]
                        break
        return self.parse(own)

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



# java.time.Duration.parse: [sign]PnDTnHnMn.nS, each part optional (one at least), each
# number signed, '.' or ',' before the fraction of seconds.
_DURATION = re.compile(r"([-+]?)P(?:([-+]?\d+)D)?"
                       r"(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?", re.IGNORECASE)


def parse_duration_ms(text: str) -> int:
    """Milliseconds of an ISO-8601 duration as ``java.time.Duration.parse`` reads it
    (``PT1H``, ``P1DT2H30M``, ``PT0.5S``, ``-PT10M``: negative durations are returned
    negative, the caller refuses them where Kafka does); ValueError otherwise."""
    m = _DURATION.fullmatch(text.strip())
    if m is None or not any(m.group(i) for i in range(2, 6)) or "T" == text.strip().upper()[-1:]:
        raise ValueError(f"Error parsing duration '{text}': expected the format PnDTnHnMnS (e.g. PT1H30M)")
    sign, days, hours, minutes, seconds, fraction = m.groups()
    ms = (int(days or 0) * 86_400_000 + int(hours or 0) * 3_600_000 + int(minutes or 0) * 60_000
          + int(seconds or 0) * 1000)
    if fraction:
        frac_ms = int(fraction.ljust(9, "0")[:3])
        ms += -frac_ms if (seconds or "").startswith("-") else frac_ms
    return -ms if sign == "-" else ms


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



def define_broker_keys(config_def: ConfigDef) -> ConfigDef:
    """Add the broker's core keys to ``config_def``: its identity (node.id, cluster.id), its
    log directories, its listeners and sockets, and the topics it creates. Each feature's
    keys are added by its owner (``broker.server.config`` assembles the table)."""
    return (
        config_def
        .define("node.id", INT, 1, "This broker's id (broker.id is accepted as an alias).",
                at_least(0), aliases=("broker.id",))
        .define("cluster.id", STRING, None, "Cluster id; generated once and kept in meta.properties.")
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
    )


BROKER_CONFIG_DEF = define_broker_keys(ConfigDef())


@dataclass(frozen=True)
class BrokerConfig:
    """The broker's core settings (``define_broker_keys``), read once from a server config.
    ``log_dirs`` is log.dirs, or [log.dir] when log.dirs is not set."""

    node_id: int = 1
    cluster_id: str | None = None
    log_dirs: tuple[str, ...] = ("/tmp/kafka-logs",)
    listeners: tuple[str, ...] = ("PLAINTEXT://localhost:9092",)
    advertised_listeners: tuple[str, ...] = ()
    security_protocol_map: tuple[str, ...] = DEFAULT_SECURITY_PROTOCOL_MAP
    inter_broker_listener_name: str | None = None
    num_partitions: int = 1
    default_replication_factor: int = 1
    auto_create_topics_enable: bool = True
    delete_topic_enable: bool = True
    socket_request_max_bytes: int = 104857600
    socket_send_buffer_bytes: int = 102400
    socket_receive_buffer_bytes: int = 102400
    queued_max_requests: int = 500
    connections_max_idle_ms: int = 600000

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> BrokerConfig:
        """From a server config (raw or parsed: each key is parsed and validated by its
        definition, broker.id taken for node.id; a missing key takes its default)."""
        v = BROKER_CONFIG_DEF.parse_from(config)
        return cls(
            node_id=v["node.id"],
            cluster_id=v["cluster.id"],
            log_dirs=tuple(v["log.dirs"] or [v["log.dir"]]),
            listeners=tuple(v["listeners"]),
            advertised_listeners=tuple(v["advertised.listeners"] or ()),
            security_protocol_map=tuple(v["listener.security.protocol.map"]),
            inter_broker_listener_name=v["inter.broker.listener.name"],
            num_partitions=v["num.partitions"],
            default_replication_factor=v["default.replication.factor"],
            auto_create_topics_enable=v["auto.create.topics.enable"],
            delete_topic_enable=v["delete.topic.enable"],
            socket_request_max_bytes=v["socket.request.max.bytes"],
            socket_send_buffer_bytes=v["socket.send.buffer.bytes"],
            socket_receive_buffer_bytes=v["socket.receive.buffer.bytes"],
            queued_max_requests=v["queued.max.requests"],
            connections_max_idle_ms=v["connections.max.idle.ms"],
        )

    def protocol_map(self) -> dict[str, str]:
        """listener.security.protocol.map as {LISTENER: PROTOCOL}."""
        return parse_protocol_map(self.security_protocol_map)


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
