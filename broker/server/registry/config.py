"""The Schema Registry's broker keys and ``RegistryConfig``, their typed, frozen view.

Owns the definitions of:

* ``schema.registry.listeners``: the registry's HTTP listeners, comma-separated URLs
  (``http://127.0.0.1:8081``, ``https://0.0.0.0:8443``; port 0 takes any free one).
  Empty (the default): no registry, and ``_schemas`` is an ordinary topic;
* ``schema.registry.kafkastore.topic`` (Confluent's ``kafkastore.topic``): the topic the
  registry keeps its records in, ``_schemas``;
* ``schema.registry.compatibility.level`` (Confluent's ``schema.compatibility.level``):
  the global compatibility level until a ``PUT /config`` sets one;
* ``schema.registry.mode.mutability`` (Confluent's ``mode.mutability``): whether
  ``PUT /mode`` may change the mode;
* ``schema.registry.authentication.method`` (Confluent's ``authentication.method``):
  ``BASIC`` (HTTP Basic against the broker's SASL PLAIN users and SCRAM credentials) or
  ``NONE``; unset, it is ``BASIC`` on a broker with a SASL listener, else ``NONE``;
* ``schema.registry.max.request.bytes``: the largest request body read (a larger one is
  answered 413 unread);
* ``schema.registry.ssl.*`` are not separate keys: an ``https://`` listener serves the
  broker's own ``ssl.keystore.*`` (``broker.config``'s TLS keys).

``define_registry_keys`` adds them to the broker's table
(``broker.server.config.SERVER_CONFIG_DEF``); ``RegistryConfig.from_config`` reads them once.

Invariants: the dataclass defaults equal the definitions' defaults. Imports only
``broker.config``. Thread-safety: the table is immutable after import; a
``RegistryConfig`` is frozen.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from broker.config import BOOLEAN, INT, LIST, STRING, ConfigDef, ConfigError, at_least, one_of

COMPATIBILITY_LEVELS = ("BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
                        "FULL_TRANSITIVE", "NONE")
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")


def _registry_listeners(key: str, value: Any) -> None:
    for url in value or ():
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or parts.port is None and not url.endswith(":0"):
            raise ConfigError(key, url, "a listener is http://HOST:PORT or https://HOST:PORT")


def define_registry_keys(config_def: ConfigDef) -> ConfigDef:
    """Add the Schema Registry's keys to ``config_def``."""
    return (
        config_def
        .define("schema.registry.listeners", LIST, "",
                "The Schema Registry's HTTP listeners (http://HOST:PORT or https://HOST:PORT, comma-separated; "
                "port 0: any free one). Empty: no registry.", _registry_listeners)
        .define("schema.registry.kafkastore.topic", STRING, "_schemas",
                "The topic holding the registry's schemas, configs, modes and deletions (one partition, compacted).")
        .define("schema.registry.compatibility.level", STRING, "BACKWARD",
                "The global compatibility level until one is set with PUT /config.",
                one_of(*COMPATIBILITY_LEVELS))
        .define("schema.registry.mode.mutability", BOOLEAN, True, "Whether PUT /mode may change the mode.")
        .define("schema.registry.authentication.method", STRING, None,
                "BASIC (HTTP Basic against the broker's SASL PLAIN users and SCRAM credentials) or NONE; "
                "unset: BASIC on a broker with a SASL listener, else NONE.", one_of("BASIC", "NONE"))
        .define("schema.registry.max.request.bytes", INT, 16 * 1024 * 1024,
                "The largest request body the registry reads (larger: 413).", at_least(1024))
    )


REGISTRY_CONFIG_DEF = define_registry_keys(ConfigDef())


@dataclass(frozen=True)
class RegistryConfig:
    """The registry's settings (``listeners`` empty: no registry; ``authentication`` None:
    decided by the broker from its listeners)."""

    listeners: tuple[str, ...] = ()
    topic: str = "_schemas"
    compatibility_level: str = "BACKWARD"
    mode_mutability: bool = True
    authentication: str | None = None
    max_request_bytes: int = 16 * 1024 * 1024

    @property
    def enabled(self) -> bool:
        return bool(self.listeners)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> RegistryConfig:
        v = REGISTRY_CONFIG_DEF.parse_from(config)
        return cls(listeners=tuple(u.strip() for u in v["schema.registry.listeners"] or () if u.strip()),
                   topic=v["schema.registry.kafkastore.topic"],
                   compatibility_level=v["schema.registry.compatibility.level"],
                   mode_mutability=v["schema.registry.mode.mutability"],
                   authentication=v["schema.registry.authentication.method"],
                   max_request_bytes=v["schema.registry.max.request.bytes"])


__all__ = ["COMPATIBILITY_LEVELS", "MODES", "REGISTRY_CONFIG_DEF", "RegistryConfig", "define_registry_keys"]
