"""The ACL model: Kafka's resource types, pattern types, operations and permission types
(with their wire codes), ACL bindings and binding filters, and how they match.

Owns:

* (from ``broker.protocol.acl``, shared with the admin client, and re-exported here)
  the enums ``ResourceType`` (TOPIC 2, GROUP 3, CLUSTER 4, TRANSACTIONAL_ID 5,
  DELEGATION_TOKEN 6, USER 7; ANY 1 only in filters), ``PatternType`` (LITERAL 3,
  PREFIXED 4; ANY 1 and MATCH 2 only in filters), ``AclOperation`` (ALL 2, READ 3, WRITE 4,
  CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10,
  ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12, CREATE_TOKENS 13, DESCRIBE_TOKENS 14,
  TWO_PHASE_COMMIT 15) and ``AclPermissionType`` (DENY 2, ALLOW 3), as
  org.apache.kafka.common.{resource,acl} number them on the wire;
* ``AclBinding`` (a resource pattern plus an access control entry) and its validation
  (``validate_new``: Kafka's ``AclControlManager.validateNewAcl`` rules and messages);
* ``AclBindingFilter`` and ``matches`` (Kafka's ``ResourcePatternFilter`` and
  ``AccessControlEntryFilter``): a null field or ANY matches everything; MATCH matches
  every pattern that would apply to the named resource (the literal name, the ``*``
  wildcard, and every prefix of the name);
* ``resource_matches(binding, resource_type, name)``: does an ACL apply to a resource?
  LITERAL equal names or ``*``; PREFIXED when the name starts with the pattern;
* the implication rules (``implied_by``): an ALLOW of READ, WRITE, DELETE or ALTER
  allows DESCRIBE, an ALLOW of ALTER_CONFIGS allows DESCRIBE_CONFIGS, ALL allows
  everything; a DENY denies only its own operation, or everything for ALL;
* ``CLUSTER_NAME`` (``kafka-cluster``), the name of the one CLUSTER resource.

Stored form (in the cluster metadata's ``acls`` section, ``authorizer.py``): a binding is
the JSON list ``[resource_type, name, pattern_type, principal, host, operation,
permission_type]`` of codes and strings.

Thread-safety: immutable values and pure functions.
"""

from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple

# The vocabulary (enums, codes, supported operations) is shared with the admin client.
from broker.protocol.acl import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

_IMPLIES_DESCRIBE = frozenset((AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                               AclOperation.DELETE, AclOperation.ALTER))
_IMPLIES_DESCRIBE_CONFIGS = frozenset((AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS))


def implied_by(op: AclOperation) -> frozenset[AclOperation]:
    """The ALLOW operations that grant ``op`` (``op`` itself, ALL, and the implying ones)."""
    if op == AclOperation.DESCRIBE:
        return _IMPLIES_DESCRIBE | {AclOperation.ALL}
    if op == AclOperation.DESCRIBE_CONFIGS:
        return _IMPLIES_DESCRIBE_CONFIGS | {AclOperation.ALL}
    return frozenset((op, AclOperation.ALL))


class InvalidAcl(ValueError):
    """An ACL binding or filter Kafka refuses (INVALID_REQUEST with this message)."""


class AclBinding(NamedTuple):
    resource_type: int
    name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int

    def to_json(self) -> list:
        return list(self)

    @classmethod
    def from_json(cls, data: list) -> AclBinding:
        rt, name, pt, principal, host, op, perm = data
        return cls(int(rt), str(name), int(pt), str(principal), str(host), int(op), int(perm))

    def describe(self) -> str:
        """Kafka's ``ResourcePattern`` / ``AccessControlEntry`` text, for logs."""
        return (f"(pattern=ResourcePattern(resourceType={_name(ResourceType, self.resource_type)}, "
                f"name={self.name}, patternType={_name(PatternType, self.pattern_type)}), "
                f"entry=(principal={self.principal}, host={self.host}, "
                f"operation={_name(AclOperation, self.operation)}, "
                f"permissionType={_name(AclPermissionType, self.permission_type)}))")


def _name(enum: type[IntEnum], code: int) -> str:
    try:
        return enum(code).name
    except ValueError:
        return str(code)


def validate_new(binding: AclBinding) -> None:
    """Raise ``InvalidAcl`` for a binding CreateAcls must refuse (Kafka's messages)."""
    if binding.resource_type not in SUPPORTED_OPERATIONS:
        raise InvalidAcl(f"Invalid resourceType {_name(ResourceType, binding.resource_type)}")
    if binding.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidAcl(f"Invalid patternType {_name(PatternType, binding.pattern_type)}")
    if binding.operation not in AclOperation.__members__.values() or binding.operation in (
            AclOperation.UNKNOWN, AclOperation.ANY):
        raise InvalidAcl(f"Invalid operation {_name(AclOperation, binding.operation)}")
    if binding.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise InvalidAcl(f"Invalid permissionType {_name(AclPermissionType, binding.permission_type)}")
    if not binding.name:
        raise InvalidAcl("Resource name should not be empty")
    if binding.resource_type == ResourceType.CLUSTER and binding.name != CLUSTER_NAME:
        raise InvalidAcl(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if binding.pattern_type == PatternType.PREFIXED and binding.name == WILDCARD:
        raise InvalidAcl("Cannot create a PREFIXED ACL with the wildcard resource name '*'")
    principal_type, sep, principal_name = binding.principal.partition(":")
    if not sep or not principal_type or not principal_name:
        raise InvalidAcl(f"Could not parse principal from `{binding.principal}` (no colon is present "
                         "separating the principal type from the principal name)")
    if binding.host is None or binding.host == "":
        raise InvalidAcl("Invalid host: the host must be '*' or an address")


class AclBindingFilter(NamedTuple):
    resource_type: int
    name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission_type: int

    def validate(self) -> None:
        """Raise ``InvalidAcl`` when the filter has an UNKNOWN component (Kafka refuses it)."""
        for enum, value, what in ((ResourceType, self.resource_type, "resource type"),
                                  (PatternType, self.pattern_type, "pattern type"),
                                  (AclOperation, self.operation, "operation"),
                                  (AclPermissionType, self.permission_type, "permission type")):
            if value not in enum.__members__.values() or value == 0:
                raise InvalidAcl(f"The filter has an unknown {what} ({value})")

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != b.resource_type:
            return False
        if self.pattern_type == PatternType.MATCH:
            if self.name is not None and not resource_matches(b, b.resource_type, self.name):
                return False
        else:
            if self.pattern_type != PatternType.ANY and self.pattern_type != b.pattern_type:
                return False
            if self.name is not None and self.name != b.name:
                return False
        if self.principal is not None and self.principal != b.principal:
            return False
        if self.host is not None and self.host != b.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != b.operation:
            return False
        return self.permission_type == AclPermissionType.ANY or self.permission_type == b.permission_type


def resource_matches(b: AclBinding, resource_type: int, name: str) -> bool:
    """Does ``b``'s resource pattern apply to the resource (``resource_type``, ``name``)?"""
    if b.resource_type != resource_type:
        return False
    if b.pattern_type == PatternType.LITERAL:
        return b.name == name or b.name == WILDCARD
    return b.pattern_type == PatternType.PREFIXED and name.startswith(b.name)


__all__ = [
    "CLUSTER_NAME", "SUPPORTED_OPERATIONS", "WILDCARD", "WILDCARD_PRINCIPAL", "AclBinding", "AclBindingFilter",
    "AclOperation", "AclPermissionType", "InvalidAcl", "PatternType", "ResourceType", "implied_by",
    "resource_matches", "validate_new",
]
