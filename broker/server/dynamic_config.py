"""Dynamic broker configs (Kafka's ``DynamicBrokerConfig``): the broker keys that
IncrementalAlterConfigs / AlterConfigs may change at run time, per broker or as the
cluster-wide default, kept in the cluster metadata and applied without a restart.

Owns ``DynamicBrokerConfig``:

* ``DYNAMIC_KEYS``: the keys that can change live and what applies them (the
  connection limits of ``broker.server.quota.connection_quotas``: ``max.connections``,
  ``max.connections.per.ip``, ``max.connections.per.ip.overrides``; tiered storage's
  ``remote.log.manager.copy.max.bytes.per.second`` and
  ``remote.log.manager.fetch.max.bytes.per.second``, KIP-956), plus the Kerberos
  keys Kafka reconfigures per listener (``COMPATIBILITY_KEYS``: stored and shown, no
  effect: GSSAPI is not implemented); any other key is
  refused with Kafka's INVALID_REQUEST "Cannot update these configs dynamically: ...";
* storage: section ``broker_configs`` of ``broker.server.cluster_metadata`` (one JSON
  object: ``{"default": {key: value}, "<node id>": {key: value}}``, values as the text
  the client sent), reloaded at startup and applied before the listeners open;
* precedence, Kafka's: the broker's own dynamic value, then the cluster default
  (``--entity-default``), then server.properties, then the key's default (DescribeConfigs
  shows the dynamic ones as DYNAMIC_BROKER_CONFIG / DYNAMIC_DEFAULT_BROKER_CONFIG);
* ``alter(entity, update, validate_only)``: ``entity`` is "" (the default) or this node's
  id; ``update(current overrides) -> new overrides``; every value is validated with the
  key's own rules (``SERVER_CONFIG_DEF``) before anything is stored; then the effective
  values are handed to the appliers.

Invariants: a change is durable before it is applied; what is applied is always the
effective value by the precedence above (deleting a per-broker value falls back to the
default, then to the static one).

Thread-safety: changes are serialised by a lock; reads take a snapshot.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from broker.config import ConfigError
from broker.protocol import ErrorCode
from broker.server.config import SERVER_CONFIG_DEF
from broker.server.errors import ApiError
from broker.server.quota.connection_quotas import UNLIMITED, parse_overrides

log = logging.getLogger(__name__)

SECTION = "broker_configs"
DEFAULT_ENTITY = "default"

# key -> the ConnectionQuotas attribute it sets and how its effective value converts
_CONNECTION_KEYS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "max.connections": ("max_connections", lambda v: int(v) if v is not None else UNLIMITED),
    "max.connections.per.ip": ("max_per_ip", lambda v: int(v) if v is not None else UNLIMITED),
    "max.connections.per.ip.overrides": ("per_ip_overrides", lambda v: parse_overrides(v or "")),
}
# Kafka reconfigures these per listener; GSSAPI is not implemented here, so they are only
# stored and shown (DescribeConfigs), as server.properties accepts them.
COMPATIBILITY_KEYS = frozenset((
    "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd", "sasl.kerberos.ticket.renew.window.factor",
    "sasl.kerberos.ticket.renew.jitter", "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.principal.to.local.rules"))
# tiered storage's quotas (KIP-956): kind -> its key, applied to the RLMQuotaManager
_REMOTE_QUOTA_KEYS = {"copy": "remote.log.manager.copy.max.bytes.per.second",
                      "fetch": "remote.log.manager.fetch.max.bytes.per.second"}
DYNAMIC_KEYS = frozenset(_CONNECTION_KEYS) | frozenset(_REMOTE_QUOTA_KEYS.values()) | COMPATIBILITY_KEYS


class DynamicBrokerConfig:
    """See the module docstring. ``static`` is the parsed server config; ``connection_quotas``
    (set once the acceptor's ``ConnectionQuotas`` exists) receives the connection limits."""

    def __init__(self, store: Any, static: Mapping[str, Any], node_id: int) -> None:
        self.store = store
        self.static = static
        self.node_id = node_id
        self.connection_quotas: Any = None
        self.remote_quotas: dict[str, Any] = {}  # "copy"/"fetch" -> RLMQuotaManager (tiered storage on)
        self._lock = threading.Lock()
        self._overrides: dict[str, dict[str, str]] = {}

    def load(self) -> None:
        raw = self.store.get(SECTION, {}) if self.store is not None else {}
        self._overrides = {str(k): {str(a): str(b) for a, b in v.items()} for k, v in (raw or {}).items()
                           if isinstance(v, dict)}
        if self._overrides:
            log.info("dynamic broker configs: %s", self._overrides)

    def _entity_key(self, entity: str) -> str:
        if entity == "":
            return DEFAULT_ENTITY
        if entity != str(self.node_id):
            raise ApiError(ErrorCode.INVALID_REQUEST,
                           f"Unexpected broker id, expected {self.node_id} but got {entity}")
        return entity

    def overrides(self, entity: str) -> dict[str, str]:
        return dict(self._overrides.get(self._entity_key(entity), {}))

    def value(self, key: str) -> Any:
        """The effective value of a broker key (module docstring's precedence), parsed."""
        for entity in (str(self.node_id), DEFAULT_ENTITY):
            raw = self._overrides.get(entity, {}).get(key)
            if raw is not None:
                return SERVER_CONFIG_DEF.validate_value(key, raw)
        return self.static.get(key)

    def alter(self, entity: str, update: Callable[[Mapping[str, str]], Mapping[str, str | None]],
              validate_only: bool) -> None:
        with self._lock:
            key = self._entity_key(entity)
            current = dict(self._overrides.get(key, {}))
            new = {k: v for k, v in update(current).items() if v is not None}
            refused = sorted(k for k in set(new) | set(current)
                             if k not in DYNAMIC_KEYS and new.get(k) != current.get(k))
            if refused:
                raise ApiError(ErrorCode.INVALID_REQUEST,
                               f"Cannot update these configs dynamically: {', '.join(refused)} (dynamic broker "
                               f"configs: {', '.join(sorted(DYNAMIC_KEYS))})")
            for k, v in new.items():
                try:
                    SERVER_CONFIG_DEF.validate_value(k, v)
                    if k == "max.connections.per.ip.overrides":
                        parse_overrides(v)
                except (ConfigError, ValueError) as exc:
                    raise ApiError(ErrorCode.INVALID_CONFIG, f"Invalid value {v} for configuration {k}: {exc}") \
                        from None
            if validate_only:
                return
            overrides = {e: dict(v) for e, v in self._overrides.items()}
            if new:
                overrides[key] = new
            else:
                overrides.pop(key, None)
            if self.store is not None:
                self.store.update(SECTION, lambda _old: overrides, {})
            self._overrides = overrides
            log.info("dynamic broker configs of %s now %s", "the cluster default" if key == DEFAULT_ENTITY
                     else f"broker {key}", new)
            self.apply()

    def apply(self) -> None:
        """Hand the effective values to the components that use them."""
        cq = self.connection_quotas
        if cq is not None:
            cq.update_limits(**{attr: convert(self.value(k)) for k, (attr, convert) in _CONNECTION_KEYS.items()})
        for kind, quota in self.remote_quotas.items():
            quota.update_quota(self.value(_REMOTE_QUOTA_KEYS[kind]))


__all__ = ["DYNAMIC_KEYS", "DynamicBrokerConfig"]
