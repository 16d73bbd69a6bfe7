"""Client quota limits as cluster metadata: what AlterClientQuotas changes and
DescribeClientQuotas reads (Kafka's ``ClientQuotaControlManager`` and
``ClientQuotasImage.describe``), and the quota managers they configure.

Owns ``QuotaManagers`` (one ``ClientQuotaManager`` each for PRODUCE, FETCH and REQUEST,
and the ``ControllerMutationQuotaManager``; windows from ``quota.window.num`` /
``quota.window.size.seconds`` and ``controller.quota.window.num`` /
``controller.quota.window.size.seconds``) and ``ClientQuotaStore``, the limits kept in
the ``client_quotas`` section of the cluster metadata (``ClusterMetadataStore``)::

    [{"entity": {"user": "alice", "client-id": null},   # null: the <default> entity
      "quotas": {"producer_byte_rate": 1048576.0}}, ...]

Entities (Kafka's rules, each violation INVALID_REQUEST with Kafka's message): entity
types ``user``, ``client-id`` and ``ip``, each at most once; ``ip`` only alone, and its
name must be an IP address (or the default); quota keys per type: ``producer_byte_rate``
and ``consumer_byte_rate`` (whole numbers), ``request_percentage`` and
``controller_mutation_rate`` for users and client ids; ``connection_creation_rate`` (a
whole number) for IPs. Values must be positive; ``remove`` deletes a key; an entity with
no key left is removed.

Changes are applied to the managers after they are durable; a restart replays the stored
entries (``load``). A changed limit never resets the usage already recorded (the
managers re-configure their live sensors). IP limits are kept for the connection quotas
(``ip_quotas``).

Thread-safety: ``alter`` runs under the store's lock (one change at a time); ``describe``
reads a snapshot.
"""

from __future__ import annotations

import ipaddress
import math
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .client_quota_manager import (
    DEFAULT,
    QUOTA_CONFIG_KEYS,
    ClientQuotaManager,
    ClientQuotaManagerConfig,
    QuotaEntity,
    QuotaType,
)
from .config import QuotaConfig
from .controller_mutation import ControllerMutationQuotaManager
from .metrics import Metrics, Time

USER, CLIENT_ID, IP = "user", "client-id", "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)
CLIENT_KEYS = {"producer_byte_rate": "long", "consumer_byte_rate": "long", "request_percentage": "double",
               "controller_mutation_rate": "double"}
IP_KEYS = {"connection_creation_rate": "int"}
SECTION = "client_quotas"

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


class QuotaRequestError(ValueError):
    """An entry or filter Kafka refuses with INVALID_REQUEST (the message is Kafka's)."""


@dataclass
class AlterOp:
    key: str
    value: float
    remove: bool = False


@dataclass
class AlterEntry:
    entity: dict[str, str | None]  # entity type -> name (None: the default)
    ops: list[AlterOp] = field(default_factory=list)


def _validate_entity(entity: dict[str, str | None]) -> None:
    if not entity:
        raise QuotaRequestError("Invalid empty client quota entity")
    for t in entity:
        if t not in ENTITY_TYPES:
            raise QuotaRequestError(f"Unhandled client quota entity type: {t}")
    if IP in entity:
        if len(entity) > 1:
            raise QuotaRequestError("Invalid quota entity combination, IP entity should not be combined "
                                    "with User or ClientId")
        name = entity[IP]
        if name is not None:
            try:
                ipaddress.ip_address(name)
            except ValueError:
                raise QuotaRequestError(f"{name} is not a valid IP or resolvable host.") from None
    for t, name in entity.items():
        if name is not None and not isinstance(name, str):
            raise QuotaRequestError(f"Invalid name for entity type {t}")


def _validate_value(key: str, kind: str, value: float) -> float:
    if not isinstance(value, (int, float)) or math.isnan(value) or math.isinf(value):
        raise QuotaRequestError(f"Invalid value {value!r} for configuration {key}")
    if kind in ("long", "int") and value != int(value):
        raise QuotaRequestError(f"Configuration {key} must be a {'Long' if kind == 'long' else 'Integer'} value")
    if kind == "int" and value > 2**31 - 1:
        raise QuotaRequestError(f"Configuration {key} must be an Integer value")
    if value <= 0:
        raise QuotaRequestError(f"Configuration {key} must be a positive value, was {value}")
    return float(value)


def _entity_key(entity: dict[str, str | None]) -> tuple[tuple[str, str | None], ...]:
    return tuple(sorted(entity.items()))


class QuotaManagers:
    """The client quota managers of a broker (see the module docstring)."""

    def __init__(self, config: Any, time: Time | None = None) -> None:
        quotas = config if isinstance(config, QuotaConfig) else QuotaConfig.from_config(config or {})
        self.metrics = Metrics(time=time)
        client_cfg = ClientQuotaManagerConfig(quotas.quota_window_num, quotas.quota_window_size_seconds)
        mutation_cfg = ClientQuotaManagerConfig(quotas.controller_quota_window_num,
                                                quotas.controller_quota_window_size_seconds)
        self.produce = ClientQuotaManager(client_cfg, self.metrics, QuotaType.PRODUCE, time)
        self.fetch = ClientQuotaManager(client_cfg, self.metrics, QuotaType.FETCH, time)
        self.request = ClientQuotaManager(client_cfg, self.metrics, QuotaType.REQUEST, time)
        self.controller_mutation = ControllerMutationQuotaManager(mutation_cfg, self.metrics, time)
        self.by_key: dict[str, ClientQuotaManager] = {
            QUOTA_CONFIG_KEYS[m.quota_type]: m
            for m in (self.produce, self.fetch, self.request, self.controller_mutation)}
        self.ip_quotas: dict[str | None, float] = {}  # ip (None: default) -> connection_creation_rate

    @property
    def enabled(self) -> bool:
        """Whether any client quota is set (the request path's fast path when not)."""
        return bool(self.produce.quota_types_enabled or self.fetch.quota_types_enabled
                    or self.request.quota_types_enabled or self.controller_mutation.quota_types_enabled)

    def ip_connection_rate(self, ip: str) -> float | None:
        """The connection_creation_rate of ``ip``'s entity, else of the default IP entity."""
        rate = self.ip_quotas.get(ip)
        return rate if rate is not None else self.ip_quotas.get(None)

    def all(self) -> tuple[ClientQuotaManager, ...]:
        return (self.produce, self.fetch, self.request, self.controller_mutation)

    def start(self) -> None:
        for m in self.all():
            m.start()

    def shutdown(self) -> None:
        for m in self.all():
            m.shutdown()

    def apply(self, entity: dict[str, str | None], quotas: dict[str, float | None]) -> None:
        """Give the managers ``entity``'s limits (a None value removes that limit)."""
        if IP in entity:
            for key, value in quotas.items():
                if key == "connection_creation_rate":
                    if value is None:
                        self.ip_quotas.pop(entity[IP], None)
                    else:
                        self.ip_quotas[entity[IP]] = value
            return
        qe = QuotaEntity(
            (DEFAULT if entity[USER] is None else entity[USER]) if USER in entity else None,
            (DEFAULT if entity[CLIENT_ID] is None else entity[CLIENT_ID]) if CLIENT_ID in entity else None)
        for key, value in quotas.items():
            manager = self.by_key.get(key)
            if manager is not None:
                manager.update_quota(qe, value)


class ClientQuotaStore:
    """The stored limits and their application (see the module docstring)."""

    def __init__(self, store: Any, managers: QuotaManagers) -> None:
        self.store = store
        self.managers = managers
        self._lock = threading.Lock()

    def load(self) -> None:
        for item in self.store.get(SECTION, []) or []:
            entity = dict(item["entity"])
            self.managers.apply(entity, {k: float(v) for k, v in item["quotas"].items()})

    def entries(self) -> list[tuple[dict[str, str | None], dict[str, float]]]:
        return [(dict(i["entity"]), dict(i["quotas"])) for i in self.store.get(SECTION, []) or []]

    def validate(self, entry: AlterEntry) -> None:
        _validate_entity(entry.entity)
        keys = IP_KEYS if IP in entry.entity else CLIENT_KEYS
        seen = set()
        for op in entry.ops:
            if op.key in seen:
                raise QuotaRequestError(f"Duplicate quota key {op.key} not updating quota for entity "
                                        f"{entry.entity}")
            seen.add(op.key)
            kind = keys.get(op.key)
            if kind is None:
                raise QuotaRequestError(f"Invalid configuration key {op.key}")
            if not op.remove:
                _validate_value(op.key, kind, op.value)

    def alter(self, entries: Iterable[AlterEntry], validate_only: bool = False) -> list[str | None]:
        """Apply the valid entries (durably, then to the managers); returns, per entry,
        None or the INVALID_REQUEST message."""
        entries = list(entries)
        results: list[str | None] = []
        valid: list[AlterEntry] = []
        for e in entries:
            try:
                self.validate(e)
            except QuotaRequestError as exc:
                results.append(str(exc))
                continue
            results.append(None)
            valid.append(e)
        if validate_only or not valid:
            return results
        with self._lock:
            changes: list[tuple[dict[str, str | None], dict[str, float | None]]] = []

            def change(current: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
                table = {_entity_key(i["entity"]): dict(i["quotas"]) for i in current or []}
                for e in valid:
                    k = _entity_key(e.entity)
                    quotas = table.setdefault(k, {})
                    applied: dict[str, float | None] = {}
                    for op in e.ops:
                        if op.remove:
                            quotas.pop(op.key, None)
                            applied[op.key] = None
                        else:
                            quotas[op.key] = float(op.value)
                            applied[op.key] = float(op.value)
                    if not quotas:
                        del table[k]
                    changes.append((dict(e.entity), applied))
                return [{"entity": dict(k), "quotas": q} for k, q in sorted(table.items(), key=_sort_key)]

            self.store.update(SECTION, change, [])
            for entity, applied in changes:
                self.managers.apply(entity, applied)
        return results

    def describe(self, components: list[tuple[str, int, str | None]], strict: bool
                 ) -> list[tuple[dict[str, str | None], dict[str, float]]]:
        """The stored entities matching the filter (Kafka's rules: EXACT name, DEFAULT
        entity, SPECIFIED any entity of the type; ``strict``: no other entity types)."""
        exact: dict[str, str | None] = {}
        typed: set[str] = set()
        for entity_type, match_type, match in components:
            if entity_type in exact or entity_type in typed:
                raise QuotaRequestError(f"Entity type {entity_type} cannot appear more than once in the filter.")
            if entity_type not in ENTITY_TYPES:
                raise QuotaRequestError(f"Custom entity type '{entity_type}' not supported")
            if match_type == MATCH_EXACT:
                if match is None:
                    raise QuotaRequestError(f"Request specified MATCH_TYPE_MATCH for entity type {entity_type}, "
                                            "but match was null.")
                exact[entity_type] = match
            elif match_type == MATCH_DEFAULT:
                exact[entity_type] = None
            elif match_type == MATCH_SPECIFIED:
                typed.add(entity_type)
            else:
                raise QuotaRequestError(f"Unknown match type {match_type}")
        types = set(exact) | typed
        if IP in types and (USER in types or CLIENT_ID in types):
            raise QuotaRequestError("Invalid entity filter component combination, IP filter component should "
                                    "not be used with User or clientId filter component.")
        out = []
        for entity, quotas in self.entries():
            if strict and len(entity) != len(exact) + len(typed):
                continue
            if any(t not in entity or entity[t] != name for t, name in exact.items()):
                continue
            if any(t not in entity for t in typed):
                continue
            out.append((entity, quotas))
        return out


def _sort_key(item: tuple[tuple[tuple[str, str | None], ...], dict]) -> list[tuple[str, str]]:
    return [(t, "" if n is None else "\x01" + n) for t, n in item[0]]


__all__ = ["AlterEntry", "AlterOp", "ClientQuotaStore", "QuotaManagers", "QuotaRequestError", "SECTION"]
