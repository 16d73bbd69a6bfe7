"""The broker's configuration table, assembled from its owners, and the parsing of a
broker's properties.

Owns ``SERVER_CONFIG_DEF``, every key of ``server.properties`` the broker defines, and
``SERVER_CONFIG_SECTIONS``, the same keys per owner (title, owning module, its table): the
core keys and the TLS keys (``broker.config``), the log manager's
(``broker.log.manager_config``), the log cleaner's (``broker.log.cleaner.config``), tiered
storage's with KIP-956's quotas (``broker.log.remote.config``), the group coordinator's
(``broker.server.group.config``), the share groups' (``broker.server.share.config``), the transaction coordinator's
(``broker.server.txn.config``), the quotas' (``broker.server.quota.config``), SASL's and the
authorizer's (``broker.server.security.config``) and telemetry's with the metrics endpoint
(``broker.server.telemetry.config``). Each owner's ``define_<feature>_keys`` is the only
definition of its keys, and each owner's frozen config object (``GroupConfig``,
``TransactionConfig`` ...) is how its module reads them. ``server_config(props)`` parses a
broker's properties against the whole table. The topic-level keys and their broker-wide
``log.*`` defaults are ``broker/log/config.py``'s, kept as given here.

Invariants: no key is defined by two owners (checked when the table is built: a duplicate
stops the import); ``SERVER_CONFIG_DEF`` is exactly the union of the sections' tables.

Thread-safety: the tables are built once at import and never changed; ``server_config``
is a pure function returning a new dict.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from broker.config import ConfigDef, define_broker_keys, define_ssl_keys
from broker.log.cleaner.config import define_cleaner_keys
from broker.log.manager_config import define_log_manager_keys
from broker.log.remote.config import define_remote_storage_keys
from broker.server.group.config import define_group_keys
from broker.server.quota.config import define_quota_keys
from broker.server.registry.config import define_registry_keys
from broker.server.security.config import define_authorizer_keys, define_sasl_keys
from broker.server.share.config import define_share_keys
from broker.server.telemetry.config import define_telemetry_keys
from broker.server.txn.config import define_transaction_keys


def _define_server_ssl_keys(config_def: ConfigDef) -> ConfigDef:
    return define_ssl_keys(config_def, client=False)


# (title, owning module, its define_*_keys), in the order of the reference page
_OWNERS: tuple[tuple[str, str, Callable[[ConfigDef], ConfigDef]], ...] = (
    ("The broker", "broker.config", define_broker_keys),
    ("TLS", "broker.config", _define_server_ssl_keys),
    ("SASL", "broker.server.security.config", define_sasl_keys),
    ("Authorization", "broker.server.security.config", define_authorizer_keys),
    ("The log manager", "broker.log.manager_config", define_log_manager_keys),
    ("The log cleaner", "broker.log.cleaner.config", define_cleaner_keys),
    ("Tiered storage", "broker.log.remote.config", define_remote_storage_keys),
    ("Consumer groups and offsets", "broker.server.group.config", define_group_keys),
    ("Share groups", "broker.server.share.config", define_share_keys),
    ("Transactions", "broker.server.txn.config", define_transaction_keys),
    ("Quotas", "broker.server.quota.config", define_quota_keys),
    ("Telemetry and metrics", "broker.server.telemetry.config", define_telemetry_keys),
    ("Schema Registry", "broker.server.registry.config", define_registry_keys),
)

SERVER_CONFIG_SECTIONS: tuple[tuple[str, str, ConfigDef], ...] = tuple(
    (title, owner, define(ConfigDef())) for title, owner, define in _OWNERS)


def _union(sections: tuple[tuple[str, str, ConfigDef], ...]) -> ConfigDef:
    table = ConfigDef()
    owner_of: dict[str, str] = {}
    for title, _owner, section in sections:
        for name, key in section.keys.items():
            if name in owner_of:
                raise RuntimeError(f"configuration {name} is defined twice ({owner_of[name]}, {title})")
            owner_of[name] = title
            table.keys[name] = key
    return table


# The broker's own keys (server.properties). The topic-level defaults (log.segment.bytes,
# log.retention.hours, message.max.bytes ...) are defined in broker/log/config.py and
# accepted here as they are. TLS keys are also taken per listener as
# listener.name.<listener lowercase>.ssl.* (which wins: broker/server/ssl_context.py).
SERVER_CONFIG_DEF = _union(SERVER_CONFIG_SECTIONS)


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


__all__ = ["SERVER_CONFIG_DEF", "SERVER_CONFIG_SECTIONS", "server_config"]
