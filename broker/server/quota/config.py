"""The quotas' broker keys (Kafka's names, defaults and documentation) and
``QuotaConfig``, their typed, frozen view.

Owns the definitions of the sampling of client quotas (``quota.window.num``,
``quota.window.size.seconds``) and of the controller mutation quota
(``controller.quota.window.*``: burst = num x size x rate), and of the acceptor's
connection quotas (``max.connections``, ``max.connections.per.ip``,
``max.connections.per.ip.overrides``, ``max.connection.creation.rate``; per listener also
``listener.name.<l>.max.connections`` / ``.max.connection.creation.rate``, read by prefix in
``connection_quotas.py``). ``define_quota_keys`` adds them to the broker's table
(``broker.server.config.SERVER_CONFIG_DEF``); ``QuotaConfig.from_config`` reads them once
from a server config for ``QuotaManagers`` (``client_quotas.py``) and ``ConnectionQuotas``.
KIP-956's remote-storage quotas are tiered storage's keys (``broker/log/remote/config.py``).

Invariants: the dataclass defaults equal the definitions' defaults. Imports only
``broker.config``. Thread-safety: the table is immutable after import; a ``QuotaConfig``
is frozen.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from broker.config import INT, INT_MAX, STRING, ConfigDef, ConfigError, at_least


def _connection_overrides(key: str, value: Any) -> None:
    for item in str(value or "").split(","):
        host, sep, count = item.strip().rpartition(":")
        if item.strip() and (not sep or not host or not count.strip().isdigit()):
            raise ConfigError(key, value, "entries are host:count, comma-separated")


def define_quota_keys(config_def: ConfigDef) -> ConfigDef:
    """Add the client, controller-mutation and connection quotas' keys to ``config_def``."""
    return (
        config_def
        .define("quota.window.num", INT, 11, "Samples kept for client quotas.", at_least(1))
        .define("quota.window.size.seconds", INT, 1, "Width of one client-quota sample.", at_least(1))
        .define("controller.quota.window.num", INT, 11, "Samples of the controller mutation quota.", at_least(1))
        .define("controller.quota.window.size.seconds", INT, 1, "Width of one controller mutation sample.",
                at_least(1))
        .define("max.connections", INT, INT_MAX, "Connections the broker accepts at once (all listeners).",
                at_least(0))
        .define("max.connections.per.ip", INT, INT_MAX, "Connections accepted at once from one address.",
                at_least(0))
        .define("max.connections.per.ip.overrides", STRING, "",
                "Per-address exceptions to max.connections.per.ip: host:count,...", _connection_overrides)
        .define("max.connection.creation.rate", INT, INT_MAX, "New connections per second the broker accepts.",
                at_least(0))
    )


QUOTA_CONFIG_DEF = define_quota_keys(ConfigDef())


@dataclass(frozen=True)
class QuotaConfig:
    """The quotas' broker-wide settings, read once from a server config."""

    quota_window_num: int = 11
    quota_window_size_seconds: int = 1
    controller_quota_window_num: int = 11
    controller_quota_window_size_seconds: int = 1
    max_connections: int = INT_MAX
    max_connections_per_ip: int = INT_MAX
    max_connections_per_ip_overrides: str = ""
    max_connection_creation_rate: int = INT_MAX

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> QuotaConfig:
        """From a server config (raw or parsed: each key parsed and validated by its
        definition; a missing key takes its default)."""
        v = QUOTA_CONFIG_DEF.parse_from(config)
        return cls(
            quota_window_num=v["quota.window.num"],
            quota_window_size_seconds=v["quota.window.size.seconds"],
            controller_quota_window_num=v["controller.quota.window.num"],
            controller_quota_window_size_seconds=v["controller.quota.window.size.seconds"],
            max_connections=v["max.connections"],
            max_connections_per_ip=v["max.connections.per.ip"],
            max_connections_per_ip_overrides=v["max.connections.per.ip.overrides"] or "",
            max_connection_creation_rate=v["max.connection.creation.rate"],
        )
