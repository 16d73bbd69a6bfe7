"""The producer's configuration: Kafka's keys, defaults and the idempotence rules.

Owns ``PRODUCER_CONFIG_DEF`` (the keys of Kafka's ``ProducerConfig`` this producer reads,
with Kafka's defaults) and ``ProducerConfig``: the parsed, post-processed values, read as
``config["linger.ms"]`` or through typed attributes for the hot paths.

Post-processing, as ``ProducerConfig.postProcessAndValidateIdempotenceConfigs`` and the
``KafkaProducer`` constructor (I11 in RELIABILITY.md):

* ``acks`` accepts all, -1, 0, 1 (strings or ints) and is normalised to -1, 0 or 1.
* ``enable.idempotence`` set explicitly to true with acks != all, retries = 0 or
  ``max.in.flight.requests.per.connection`` > 5 raises ``ConfigError`` naming the key;
  left at its default (true), the same conflicts quietly switch idempotence off.
* ``transactional.id`` (non-empty) needs idempotence: with ``enable.idempotence`` set to
  false it raises ``ConfigError``; its conflicts (acks, retries, max.in.flight) then raise
  as if idempotence were explicit.
* ``delivery.timeout.ms`` < ``linger.ms`` + ``request.timeout.ms`` raises when set
  explicitly, else it is raised to that sum.
* ``batch.size`` 0 is coerced to 1 (Kafka does the same: no way to disable batching).

``security.protocol`` and the ``ssl.*`` keys: ``broker.client.ssl_context`` (secrets are
``[hidden]`` in the repr).

Keys may be given with dots (``"linger.ms"``) or as Python keywords with underscores
(``linger_ms=5``). Unknown keys raise ``ConfigError`` (a typo is never silently ignored).

Thread-safety: a ``ProducerConfig`` is read-only after construction.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from broker.client.sasl import define_security_keys as define_sasl_keys
from broker.client.ssl_context import define_security_keys
from broker.config import (
    BOOLEAN,
    INT,
    INT_MAX,
    LIST,
    LONG,
    STRING,
    ConfigDef,
    ConfigError,
    at_least,
    one_of,
    redacted,
)

# ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION_FOR_IDEMPOTENCE: the broker keeps
# the last 5 batches per producer and partition, so at most 5 may be unacknowledged.
MAX_IN_FLIGHT_FOR_IDEMPOTENCE = 5

COMPRESSION_TYPES = ("none", "gzip", "snappy", "lz4", "zstd")

_CALLABLE = "callable"  # partitioner.class, key/value serializers: Python callables


def _acks(key: str, value: Any) -> None:
    if str(value).strip().lower() not in ("all", "-1", "0", "1"):
        raise ConfigError(key, value, "String must be one of: all, -1, 0, 1")


def _callable_or_none(key: str, value: Any) -> None:
    if value is not None and not callable(value):
        raise ConfigError(key, value, "must be a callable or None")


PRODUCER_CONFIG_DEF = (
    define_sasl_keys(ConfigDef())
    .define("bootstrap.servers", LIST, ["localhost:9092"], "host:port pairs to bootstrap from.")
    .define("client.id", STRING, "", "Sent in every request header; names the network thread.")
    .define("acks", STRING, "all", "all (-1), 1 or 0.", _acks)
    .define("enable.idempotence", BOOLEAN, True, "Producer id, epoch and sequences.")
    .define("batch.size", INT, 16384, "Target batch size (bytes); poolable buffer size.",
            at_least(0))
    .define("linger.ms", LONG, 5, "Time a batch may wait to fill.", at_least(0))
    .define("buffer.memory", LONG, 33554432, "Memory for unsent batches.", at_least(0))
    .define("max.block.ms", LONG, 60000, "Cap on the metadata wait + buffer allocation.",
            at_least(0))
    .define("max.in.flight.requests.per.connection", INT, 5, "Pipeline depth per broker.",
            at_least(1))
    .define("retries", INT, INT_MAX, "Retry attempts (delivery.timeout.ms is the real cap).",
            at_least(0))
    .define("retry.backoff.ms", LONG, 100, "Base of the exponential retry backoff.",
            at_least(0))
    .define("retry.backoff.max.ms", LONG, 1000, "Cap of the exponential retry backoff.",
            at_least(0))
    .define("delivery.timeout.ms", INT, 120000, "Hard deadline from send() to the outcome.",
            at_least(0))
    .define("request.timeout.ms", INT, 30000, "Bound of one request round trip.", at_least(0))
    .define("compression.type", STRING, "none", "Batch codec.", one_of(*COMPRESSION_TYPES))
    .define("compression.gzip.level", INT, -1, "gzip level (-1: codec default).")
    .define("compression.lz4.level", INT, -1,
            "lz4 level; -1 (default here, librdkafka's) is lz4's fast mode, 3-16 high "
            "compression (Kafka's Java default is 9, several times slower in Python).")
    .define("compression.zstd.level", INT, 3, "zstd level.")
    .define("max.request.size", INT, 1048576, "Largest record and produce request.",
            at_least(0))
    .define("partitioner.class", _CALLABLE, None,
            "callable(topic, key, value, num_partitions) -> partition, or None.",
            _callable_or_none)
    .define("partitioner.adaptive.partitioning.enable", BOOLEAN, True,
            "Weight keyless partition choice by queue depth (KIP-794).")
    .define("partitioner.ignore.keys", BOOLEAN, False, "Never partition by key.")
    .define("partitioner.availability.timeout.ms", LONG, 0,
            "Skip partitions whose leader has not drained for this long (0: off).",
            at_least(0))
    .define("metadata.max.age.ms", LONG, 300000, "Refresh metadata at least this often.",
            at_least(0))
    .define("metadata.max.idle.ms", LONG, 300000, "Forget topics unused for this long.",
            at_least(5000))
    .define("reconnect.backoff.ms", LONG, 50, "Base of the reconnect backoff.", at_least(0))
    .define("reconnect.backoff.max.ms", LONG, 1000, "Cap of the reconnect backoff.",
            at_least(0))
    .define("socket.connection.setup.timeout.ms", LONG, 10000, "Connect timeout.",
            at_least(0))
    .define("connections.max.idle.ms", LONG, 540000, "Close idle connections.", at_least(-1))
    .define("send.buffer.bytes", INT, 131072, "SO_SNDBUF (-1: OS default).", at_least(-1))
    .define("receive.buffer.bytes", INT, 32768, "SO_RCVBUF (-1: OS default).", at_least(-1))
    .define("transactional.id", STRING, None,
            "Enables transactions (init_transactions() ... commit_transaction()); implies idempotence.")
    .define("transaction.timeout.ms", INT, 60000,
            "How long the coordinator waits before aborting an open transaction.", at_least(1))
    .define("key.serializer", _CALLABLE, None, "callable(topic, key) -> bytes, or None.",
            _callable_or_none)
    .define("value.serializer", _CALLABLE, None, "callable(topic, value) -> bytes, or None.",
            _callable_or_none)
)
define_security_keys(PRODUCER_CONFIG_DEF)  # ssl.*; widens security.protocol to SSL, SASL_SSL (ssl_context.py)

def _normalise_keys(config: Mapping[str, Any] | None, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for source in (config or {}), kwargs:
        for k, v in source.items():
            name = k if "." in k or k in PRODUCER_CONFIG_DEF.keys else k.replace("_", ".")
            if name not in PRODUCER_CONFIG_DEF.keys:
                raise ConfigError(k, v, "unknown producer configuration")
            out[name] = v
    return out


def _parse(props: Mapping[str, Any]) -> dict[str, Any]:
    plain = {k: v for k, v in props.items() if PRODUCER_CONFIG_DEF.keys[k].type != _CALLABLE}
    if isinstance(plain.get("acks"), int) and not isinstance(plain.get("acks"), bool):
        plain["acks"] = str(plain["acks"])
    values = PRODUCER_CONFIG_DEF.parse(plain)
    for k, key in PRODUCER_CONFIG_DEF.keys.items():
        if key.type == _CALLABLE:
            values[k] = props.get(k, key.default)
            _callable_or_none(k, values[k])
    return values


class ProducerConfig:
    """Parsed and post-processed producer settings (see the module docstring)."""

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        props = _normalise_keys(config, kwargs)
        self.explicit = frozenset(props)
        values = _parse(props)
        acks_raw = str(values["acks"]).strip().lower()
        values["acks"] = -1 if acks_raw in ("all", "-1") else int(acks_raw)
        if values["batch.size"] == 0:
            values["batch.size"] = 1
        if values["transactional.id"] is not None:
            if values["transactional.id"] == "":
                raise ConfigError("transactional.id", "", "must not be empty")
            if "enable.idempotence" in self.explicit and not values["enable.idempotence"]:
                raise ConfigError("enable.idempotence", False,
                                  "cannot set a transactional.id without also enabling idempotence")
        self._idempotence(values)
        self._delivery_timeout(values)
        if values["reconnect.backoff.max.ms"] < values["reconnect.backoff.ms"]:
            values["reconnect.backoff.max.ms"] = values["reconnect.backoff.ms"]
        if values["retry.backoff.max.ms"] < values["retry.backoff.ms"]:
            values["retry.backoff.max.ms"] = values["retry.backoff.ms"]
        if not values["bootstrap.servers"]:
            raise ConfigError("bootstrap.servers", values["bootstrap.servers"],
                              "at least one host:port is needed")
        self.values = values
        # Typed attributes for the hot paths.
        self.acks: int = values["acks"]
        self.idempotence: bool = values["enable.idempotence"]
        self.batch_size: int = values["batch.size"]
        self.linger_ms: int = values["linger.ms"]
        self.buffer_memory: int = values["buffer.memory"]
        self.max_block_ms: int = values["max.block.ms"]
        self.max_in_flight: int = values["max.in.flight.requests.per.connection"]
        self.retries: int = values["retries"]
        self.retry_backoff_ms: int = values["retry.backoff.ms"]
        self.retry_backoff_max_ms: int = values["retry.backoff.max.ms"]
        self.delivery_timeout_ms: int = values["delivery.timeout.ms"]
        self.request_timeout_ms: int = values["request.timeout.ms"]
        self.compression_type: str = values["compression.type"]
        self.max_request_size: int = values["max.request.size"]
        self.client_id: str = values["client.id"]

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def __repr__(self) -> str:
        return f"ProducerConfig({redacted(PRODUCER_CONFIG_DEF, {k: self.values[k] for k in sorted(self.explicit)})})"

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    @property
    def compression_level(self) -> int | None:
        t = self.compression_type
        if t == "gzip":
            level = self.values["compression.gzip.level"]
            return None if level < 0 else level
        if t == "lz4":
            level = self.values["compression.lz4.level"]
            return None if level < 0 else level
        if t == "zstd":
            return self.values["compression.zstd.level"]
        return None

    def _idempotence(self, v: dict[str, Any]) -> None:
        explicit = ("enable.idempotence" in self.explicit or v["transactional.id"] is not None) \
            and v["enable.idempotence"]
        conflicts = []
        if v["max.in.flight.requests.per.connection"] > MAX_IN_FLIGHT_FOR_IDEMPOTENCE:
            conflicts.append(("max.in.flight.requests.per.connection",
                              v["max.in.flight.requests.per.connection"],
                              f"must be at most {MAX_IN_FLIGHT_FOR_IDEMPOTENCE} to use the "
                              "idempotent producer"))
        if v["retries"] == 0:
            conflicts.append(("retries", 0, "must be greater than 0 to use the idempotent producer"))
        if v["acks"] != -1:
            conflicts.append(("acks", v["acks"], "must be all (-1) to use the idempotent producer"))
        if not conflicts or not v["enable.idempotence"]:
            return
        if explicit:
            key, value, reason = conflicts[0]
            raise ConfigError(key, value, reason)
        v["enable.idempotence"] = False  # the default quietly gives way (KIP-679)

    def _delivery_timeout(self, v: dict[str, Any]) -> None:
        floor = v["linger.ms"] + v["request.timeout.ms"]
        if v["delivery.timeout.ms"] < floor:
            if "delivery.timeout.ms" in self.explicit:
                raise ConfigError("delivery.timeout.ms", v["delivery.timeout.ms"],
                                  "should be equal to or larger than linger.ms + "
                                  "request.timeout.ms")
            v["delivery.timeout.ms"] = min(floor, INT_MAX)


__all__ = ["COMPRESSION_TYPES", "MAX_IN_FLIGHT_FOR_IDEMPOTENCE", "PRODUCER_CONFIG_DEF",
           "ConfigError", "ProducerConfig"]
