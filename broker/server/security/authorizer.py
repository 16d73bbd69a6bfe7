"""The built-in authorizer (Kafka's ``StandardAuthorizer``): durable ACLs, access decisions,
the audit log.

Owns ``StandardAuthorizer``:

* configuration: ``authorizer.class.name`` selects it (``AUTHORIZER_CLASS_NAMES``: Kafka's
  ``org.apache.kafka.metadata.authorizer.StandardAuthorizer`` and the legacy
  ``kafka.security.authorizer.AclAuthorizer``; empty: no authorizer, every request is
  allowed and the ACL APIs answer SECURITY_DISABLED), ``super.users`` (``;``-separated
  principals allowed everything), ``allow.everyone.if.no.acl.found``;
* the ACLs, kept in the cluster metadata (``broker.server.cluster_metadata``), section
  ``acls``: a JSON list of bindings in ``acls.AclBinding.to_json`` form; reloaded at
  startup; ``create`` and ``delete`` are durable before they return;
* ``authorize(principal, host, op, resource_type, name)``, Kafka's decision order: a super
  user is allowed; otherwise, among the ACLs whose pattern applies to the resource
  (LITERAL equal or ``*``, PREFIXED), whose principal is the requester's or ``User:*`` and
  whose host is the requester's address or ``*``: any DENY of the operation (or ALL)
  denies; else any ALLOW of the operation, ALL or an implying operation
  (``acls.implied_by``) allows; else, when no ACL at all applies to the resource,
  ``allow.everyone.if.no.acl.found`` decides; else denied;
* ``authorize_any(principal, host, op, resource_type)`` (Kafka's
  ``authorizeByResourceType``): could the principal do ``op`` on SOME resource of the
  type (InitProducerId without a transactional id: IDEMPOTENT_WRITE on the cluster or
  WRITE on any topic)?
* ``authorized_operations``: the bit field (bit ``1 << op``) of the operations the
  principal may perform on a resource, for Metadata and DescribeGroups;
* the audit log: every denial is logged at INFO on the ``kafka.authorizer.logger`` logger
  (Kafka's name) with principal, host, operation, resource and request; allowed
  decisions at DEBUG. Callers that filter (Metadata listing all topics) ask for no log.

Thread-safety: the ACLs live in an immutable index replaced as a whole under a lock on
every change (copy on write); ``authorize`` reads the current index without locking.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from broker.record.limits import INT32_MIN
from broker.server.security.acls import (
    SUPPORTED_OPERATIONS,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    InvalidAcl,
    PatternType,
    ResourceType,
    implied_by,
    validate_new,
)
from broker.server.security.config import AUTHORIZER_CLASS_NAMES, STANDARD_AUTHORIZER, AuthorizerConfig

log = logging.getLogger(__name__)
audit_log = logging.getLogger("kafka.authorizer.logger")

SECTION = "acls"
AUTHORIZED_OPERATIONS_OMITTED = INT32_MIN  # Kafka's "not requested" value


def parse_super_users(value: str | None) -> frozenset[str]:
    return frozenset(p.strip() for p in (value or "").split(";") if p.strip())


class _Index:
    """The ACLs by resource type: literal name -> bindings, and the prefixed bindings."""

    __slots__ = ("all", "literal", "prefixed", "types")

    def __init__(self, bindings: Iterable[AclBinding]) -> None:
        self.all: tuple[AclBinding, ...] = tuple(bindings)
        self.literal: dict[tuple[int, str], list[AclBinding]] = {}
        self.prefixed: dict[int, list[AclBinding]] = {}
        self.types: frozenset[int] = frozenset(b.resource_type for b in self.all)
        for b in self.all:
            if b.pattern_type == PatternType.LITERAL:
                self.literal.setdefault((b.resource_type, b.name), []).append(b)
            else:
                self.prefixed.setdefault(b.resource_type, []).append(b)

    def applying(self, resource_type: int, name: str) -> list[AclBinding]:
        found = list(self.literal.get((resource_type, name), ()))
        if name != WILDCARD:
            found.extend(self.literal.get((resource_type, WILDCARD), ()))
        found.extend(b for b in self.prefixed.get(resource_type, ()) if name.startswith(b.name))
        return found


class StandardAuthorizer:
    """See the module docstring. ``store`` is a ``ClusterMetadataStore`` (or None: the ACLs
    live in memory only, for tests of the decision rules)."""

    def __init__(self, config: AuthorizerConfig | Mapping[str, Any], store: Any = None) -> None:
        settings = config if isinstance(config, AuthorizerConfig) else AuthorizerConfig.from_config(config)
        self.super_users = parse_super_users(settings.super_users)
        self.allow_everyone_if_no_acl_found = settings.allow_everyone_if_no_acl_found
        self.store = store
        self._index = _Index(())
        self._lock = threading.Lock()

    def load(self) -> None:
        raw = self.store.get(SECTION, []) if self.store is not None else []
        bindings = []
        for item in raw or []:
            try:
                bindings.append(AclBinding.from_json(item))
            except (TypeError, ValueError) as exc:
                log.error("ignoring an unreadable stored ACL %r: %s", item, exc)
        self._index = _Index(bindings)
        log.info("authorizer: %d ACLs loaded, super.users=%s", len(bindings), sorted(self.super_users))

    @property
    def acls(self) -> tuple[AclBinding, ...]:
        return self._index.all

    # --- decisions ---

    def authorize(self, principal: str, host: str, op: AclOperation, resource_type: ResourceType, name: str,
                  *, request: str = "", log_if_denied: bool = True, log_if_allowed: bool = True) -> bool:
        allowed, rule = self._decide(principal, host, op, resource_type, name)
        if (not allowed and log_if_denied and audit_log.isEnabledFor(logging.INFO)) or (
                allowed and log_if_allowed and audit_log.isEnabledFor(logging.DEBUG)):
            audit_log.log(logging.DEBUG if allowed else logging.INFO,
                          "Principal = %s is %s operation = %s from host = %s on resource = %s:LITERAL:%s "
                          "for request = %s based on rule %s", principal, "Allowed" if allowed else "Denied",
                          op.name, host, _resource_name(resource_type), name, request or "-", rule)
        return allowed

    def _decide(self, principal: str, host: str, op: AclOperation, resource_type: int,
                name: str) -> tuple[bool, str]:
        if principal in self.super_users:
            return True, "SuperUser"
        applying = self._index.applying(resource_type, name)
        if not applying:
            return self.allow_everyone_if_no_acl_found, "DefaultRule(allow.everyone.if.no.acl.found=" \
                f"{str(self.allow_everyone_if_no_acl_found).lower()})"
        allowing = implied_by(op)
        allow: AclBinding | None = None
        for b in applying:
            if not (b.principal == principal or b.principal == WILDCARD_PRINCIPAL):
                continue
            if not (b.host == host or b.host == WILDCARD):
                continue
            if b.permission_type == AclPermissionType.DENY:
                if b.operation == op or b.operation == AclOperation.ALL:
                    return False, f"MatchingAcl{b.describe()}"
            elif allow is None and b.operation in allowing:
                allow = b
        if allow is not None:
            return True, f"MatchingAcl{allow.describe()}"
        return False, "NoMatchingAllowAcl"

    def authorize_any(self, principal: str, host: str, op: AclOperation, resource_type: ResourceType) -> bool:
        """Kafka's ``authorizeByResourceType`` (module docstring)."""
        if principal in self.super_users:
            return True
        index = self._index
        if resource_type not in index.types:
            return self.allow_everyone_if_no_acl_found
        allowing = implied_by(op)

        def mine(b: AclBinding) -> bool:
            return ((b.principal == principal or b.principal == WILDCARD_PRINCIPAL)
                    and (b.host == host or b.host == WILDCARD))

        denies = [b for b in index.all if b.resource_type == resource_type and mine(b)
                  and b.permission_type == AclPermissionType.DENY
                  and b.operation in (op, AclOperation.ALL)]
        if any(b.pattern_type == PatternType.LITERAL and b.name == WILDCARD for b in denies):
            return False
        for b in index.all:
            if (b.resource_type != resource_type or not mine(b) or b.permission_type != AclPermissionType.ALLOW
                    or b.operation not in allowing):
                continue
            if b.pattern_type == PatternType.LITERAL and b.name == WILDCARD:
                return True
            if not any(d.name == b.name if d.pattern_type == PatternType.LITERAL else b.name.startswith(d.name)
                       for d in denies):
                return True
        return False

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType, name: str) -> int:
        bits = 0
        for op in SUPPORTED_OPERATIONS.get(resource_type, ()):
            if self._decide(principal, host, op, resource_type, name)[0]:
                bits |= 1 << int(op)
        return bits

    # --- administration (CreateAcls / DescribeAcls / DeleteAcls) ---

    def create(self, bindings: list[AclBinding]) -> list[str | None]:
        """Add the valid bindings (durably, all at once); one result per binding: None, or
        the message of the INVALID_REQUEST it gets. An existing binding is not duplicated."""
        results: list[str | None] = []
        valid: list[AclBinding] = []
        for b in bindings:
            try:
                validate_new(b)
            except InvalidAcl as exc:
                results.append(str(exc))
                continue
            results.append(None)
            valid.append(b)
        if valid:
            with self._lock:
                current = list(self._index.all)
                known = set(current)
                for b in valid:
                    if b not in known:
                        current.append(b)
                        known.add(b)
                self._commit(current)
            for b in valid:
                log.info("ACL created: %s", b.describe())
        return results

    def describe(self, flt: AclBindingFilter) -> list[AclBinding]:
        flt.validate()
        return [b for b in self._index.all if flt.matches(b)]

    def delete(self, filters: list[AclBindingFilter]) -> list[tuple[str | None, list[AclBinding]]]:
        """Remove the bindings each filter matches (all filters in one durable change); one
        result per filter: (error message or None, the bindings it removed)."""
        with self._lock:
            current = list(self._index.all)
            results: list[tuple[str | None, list[AclBinding]]] = []
            removed: set[AclBinding] = set()
            for flt in filters:
                try:
                    flt.validate()
                except InvalidAcl as exc:
                    results.append((str(exc), []))
                    continue
                matched = [b for b in current if flt.matches(b)]
                removed.update(matched)
                results.append((None, matched))
            if removed:
                self._commit([b for b in current if b not in removed])
        for b in removed:
            log.info("ACL deleted: %s", b.describe())
        return results

    def _commit(self, bindings: list[AclBinding]) -> None:
        if self.store is not None:
            self.store.update(SECTION, lambda _old: [b.to_json() for b in bindings], [])
        self._index = _Index(bindings)


def _resource_name(resource_type: int) -> str:
    names: dict[int, str] = {
        ResourceType.TOPIC: "Topic", ResourceType.GROUP: "Group", ResourceType.CLUSTER: "Cluster",
        ResourceType.TRANSACTIONAL_ID: "TransactionalId", ResourceType.DELEGATION_TOKEN: "DelegationToken",
        ResourceType.USER: "User"}
    return names.get(resource_type, str(resource_type))


__all__ = ["AUTHORIZED_OPERATIONS_OMITTED", "AUTHORIZER_CLASS_NAMES", "STANDARD_AUTHORIZER", "StandardAuthorizer",
           "parse_super_users"]
