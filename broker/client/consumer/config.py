"""The consumer's configuration: Kafka's consumer keys and defaults, as this client reads them.

Owns ``CONSUMER_CONFIG_DEF`` (the keys of Kafka's ``ConsumerConfig`` that the client core
reads, plus the group keys ``KafkaConsumer`` reads (a Spark job may pass them through
``kafka.*`` options; the range reader ignores them)) and ``ConsumerConfig``: the parsed values, read as
``config["fetch.max.bytes"]``.

Deliberate differences from Kafka's defaults, with their reasons:

* ``receive.buffer.bytes`` is -1 (the OS default, which autotunes), not 65536: the
  fetcher keeps its next Fetch in flight while it decodes the previous response, and the
  overlap is only as large as what the kernel may buffer meanwhile.
* ``allow.auto.create.topics`` is false: reading a range must never create a topic.
* ``security.protocol`` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), the SASL keys
  (``broker.client.sasl``) and the ``ssl.*`` keys (``broker.client.ssl_context``);
  anything else raises ``ConfigError`` rather than failing at connect time; secrets are
  ``[hidden]`` in the repr.

Keys may be given with dots (``"fetch.max.bytes"``) or as Python keywords with
underscores (``fetch_max_bytes=...``). Unknown keys raise ``ConfigError``.

Thread-safety: a ``ConsumerConfig`` is read-only after construction.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from broker.client.sasl import define_security_keys as define_sasl_keys
from broker.client.ssl_context import define_security_keys
from broker.config import BOOLEAN, INT, LIST, LONG, STRING, ConfigDef, ConfigError, at_least, one_of, redacted

READ_UNCOMMITTED = "read_uncommitted"
READ_COMMITTED = "read_committed"
ISOLATION_LEVELS = {READ_UNCOMMITTED: 0, READ_COMMITTED: 1}

CONSUMER_CONFIG_DEF = (
    define_sasl_keys(ConfigDef())
    .define("bootstrap.servers", LIST, ["localhost:9092"], "host:port pairs to bootstrap from.")
    .define("client.id", STRING, "", "Sent in every request header.")
    .define("client.rack", STRING, "", "Sent as the rack id of Fetch v11+.")
    .define("isolation.level", STRING, READ_UNCOMMITTED,
            "read_committed hides aborted transactions and reads up to the LSO.",
            one_of(*ISOLATION_LEVELS))
    .define("fetch.max.bytes", INT, 52428800, "Records per Fetch response (KIP-74).",
            at_least(0))
    .define("max.partition.fetch.bytes", INT, 1048576, "Records per partition per Fetch.",
            at_least(0))
    .define("fetch.max.wait.ms", INT, 500, "Long-poll bound of one Fetch.", at_least(0))
    .define("fetch.min.bytes", INT, 1, "Bytes a Fetch waits for.", at_least(0))
    .define("check.crcs", BOOLEAN, True, "Verify each batch's CRC-32C while decoding.")
    .define("request.timeout.ms", INT, 30000, "Bound of one request round trip.", at_least(0))
    .define("default.api.timeout.ms", INT, 60000,
            "Bound of a blocking call without progress (offset lookups, a fetch that "
            "advances no offset).", at_least(0))
    .define("retry.backoff.ms", LONG, 100, "Wait before retrying a failed request.",
            at_least(0))
    .define("retry.backoff.max.ms", LONG, 1000, "Cap of the retry backoff.", at_least(0))
    .define("reconnect.backoff.ms", LONG, 50, "Base of the reconnect backoff.", at_least(0))
    .define("reconnect.backoff.max.ms", LONG, 1000, "Cap of the reconnect backoff.",
            at_least(0))
    .define("socket.connection.setup.timeout.ms", LONG, 10000, "Connect timeout.",
            at_least(0))
    .define("connections.max.idle.ms", LONG, 540000, "Close idle connections.", at_least(-1))
    .define("send.buffer.bytes", INT, 131072, "SO_SNDBUF (-1: OS default).", at_least(-1))
    .define("receive.buffer.bytes", INT, -1, "SO_RCVBUF (-1: OS default; see above).",
            at_least(-1))
    .define("metadata.max.age.ms", LONG, 300000, "Refresh metadata at least this often.",
            at_least(0))
    .define("allow.auto.create.topics", BOOLEAN, False, "Create unknown topics on Metadata.")
    # Group management and polling, read by KafkaConsumer (consumer.py). The range
    # reader and the poller ignore the group keys.
    .define("group.id", STRING, None, "Group of offset commits and of subscribe().")
    .define("group.instance.id", STRING, None, "Static membership id (KIP-345) of "
            "subscribe().")
    .define("group.protocol", STRING, "classic", "Rebalance protocol: classic (JoinGroup/"
            "SyncGroup) or consumer (KIP-848).", one_of("classic", "consumer"))
    .define("group.remote.assignor", STRING, None, "group.protocol=consumer: the broker's "
            "assignor to use (uniform, range; None: the broker's default).")
    .define("partition.assignment.strategy", LIST, ["range", "cooperative-sticky"],
            "Assignors in order of preference: range, roundrobin, sticky, "
            "cooperative-sticky (Kafka's class names are accepted too).")
    .define("session.timeout.ms", INT, 45000, "Group session timeout (subscribe()).")
    .define("heartbeat.interval.ms", INT, 3000, "Heartbeat period (subscribe()).")
    .define("max.poll.interval.ms", INT, 300000, "Longest time between polls (subscribe()).")
    .define("max.poll.records", INT, 500, "Records one KafkaConsumer.poll() returns at most.",
            at_least(1))
    .define("enable.auto.commit", BOOLEAN, True,
            "KafkaConsumer commits its positions every auto.commit.interval.ms (only with "
            "a group.id).")
    .define("auto.commit.interval.ms", INT, 5000, "Period of the auto commit.", at_least(0))
    .define("auto.offset.reset", STRING, "latest",
            "Where a partition without a committed offset (or out of range) starts.",
            one_of("latest", "earliest", "none"))
)
define_security_keys(CONSUMER_CONFIG_DEF)  # ssl.*; widens security.protocol to SSL, SASL_SSL (ssl_context.py)


def _normalise_keys(config: Mapping[str, Any] | None, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    keys = CONSUMER_CONFIG_DEF.keys
    for source in (config or {}), kwargs:
        for k, v in source.items():
            name = k if "." in k or k in keys else k.replace("_", ".")
            if name not in keys:
                raise ConfigError(k, v, "unknown consumer configuration")
            out[name] = v
    return out


class ConsumerConfig:
    """Parsed consumer settings (see the module docstring)."""

    def __init__(self, config: Mapping[str, Any] | ConsumerConfig | None = None,
                 **kwargs: Any) -> None:
        if isinstance(config, ConsumerConfig):
            config = {k: v for k, v in config.values.items() if k in config.explicit}
        props = _normalise_keys(config, {k: v for k, v in kwargs.items() if v is not None})
        self.explicit = frozenset(props)
        if isinstance(props.get("isolation.level"), str):
            props["isolation.level"] = props["isolation.level"].strip().lower()
        values = CONSUMER_CONFIG_DEF.parse(props)
        if not values["bootstrap.servers"]:
            raise ConfigError("bootstrap.servers", values["bootstrap.servers"],
                              "at least one host:port is needed")
        if values["reconnect.backoff.max.ms"] < values["reconnect.backoff.ms"]:
            values["reconnect.backoff.max.ms"] = values["reconnect.backoff.ms"]
        if values["retry.backoff.max.ms"] < values["retry.backoff.ms"]:
            values["retry.backoff.max.ms"] = values["retry.backoff.ms"]
        self.values = values

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    @property
    def isolation_level(self) -> int:
        """0 (read_uncommitted) or 1 (read_committed), as on the wire."""
        return ISOLATION_LEVELS[self.values["isolation.level"]]

    def __repr__(self) -> str:
        return f"ConsumerConfig({redacted(CONSUMER_CONFIG_DEF, {k: self.values[k] for k in sorted(self.explicit)})})"


__all__ = ["CONSUMER_CONFIG_DEF", "ConfigError", "ConsumerConfig", "ISOLATION_LEVELS",
           "READ_COMMITTED", "READ_UNCOMMITTED"]
