"""ACLs through the admin client (KIP-140, KIP-290 prefixed patterns): Kafka's Java admin
ACL model and the request builders and response parsers of CreateAcls (30), DescribeAcls
(29) and DeleteAcls (31), for ``AdminClient.create_acls`` / ``describe_acls`` /
``delete_acls`` and ``kafkalog acls``.

Owns the values of ``org.apache.kafka.common.{resource,acl}`` in Python spelling:

* ``ResourcePattern(resource_type, name, pattern_type=LITERAL)``: no ANY resource type, no
  ANY or MATCH pattern type (``ValueError``, as Java's constructor);
* ``AccessControlEntry(principal, host, operation, permission_type)``: no ANY operation or
  permission type;
* ``AclBinding(pattern, entry)``, also ``AclBinding.of(resource_type, name, pattern_type,
  principal, host, operation, permission_type)``;
* the filters ``ResourcePatternFilter`` (name None: any name; pattern type ANY: any
  pattern, MATCH: every pattern that applies to the named resource),
  ``AccessControlEntryFilter`` (principal / host None: any) and
  ``AclBindingFilter(pattern_filter, entry_filter)`` (``AclBindingFilter.ANY`` matches
  every ACL; ``AclBindingFilter.of(...)`` takes the seven fields);
* ``str()`` of each is Java's ``toString`` (``ResourcePattern(resourceType=TOPIC, name=t,
  patternType=LITERAL)``, ``(principal=User:alice, host=*, operation=READ,
  permissionType=ALLOW)``), which kafka-acls.sh prints;
* ``find_indefinite_field()``: Java's ``findIndefiniteField`` ("Resource type is ANY."...),
  why a binding cannot be created (the client refuses it with INVALID_REQUEST without
  sending it, as ``KafkaAdminClient.createAcls``).

The enums (``ResourceType``, ``PatternType`` alias ``ResourcePatternType`` as
confluent-kafka names it, ``AclOperation``, ``AclPermissionType``) and
``SUPPORTED_OPERATIONS`` are ``broker.protocol.acl``'s, shared with the broker; codes a
newer broker sends that this client does not know become UNKNOWN.

Versions: v1+ carry the pattern type; v0 only LITERAL (a filter of pattern type ANY is
sent as LITERAL, as Kafka's request builders do; anything else is
``UnsupportedVersionError``). v2+ are flexible.

Thread-safety: immutable values and pure functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any, ClassVar

from broker.client.errors import UnsupportedVersionError
from broker.protocol import ApiKey, request_schema
from broker.protocol.acl import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    WILDCARD,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

ResourcePatternType = PatternType  # confluent-kafka's name for Kafka's PatternType


def _enum(cls: type[IntEnum], value: Any) -> Any:
    """``value`` (a member, its code or its name) as a member of ``cls``; unknown codes
    are UNKNOWN (as Java's ``fromCode``)."""
    if isinstance(value, cls):
        return value
    if isinstance(value, str):
        try:
            return cls[value.upper()]
        except KeyError:
            raise ValueError(f"unknown {cls.__name__} {value!r} (one of {', '.join(cls.__members__)})") from None
    if isinstance(value, IntEnum) and type(value).__name__ != cls.__name__:
        raise TypeError(f"a {type(value).__name__} where a {cls.__name__} is expected")
    try:
        return cls(int(value))
    except ValueError:
        return cls(0)


def _text(value: str | None) -> str:
    return "<any>" if value is None else value


@dataclass(frozen=True)
class ResourcePatternFilter:
    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY

    ANY: ClassVar[ResourcePatternFilter]

    def __post_init__(self) -> None:
        object.__setattr__(self, "resource_type", _enum(ResourceType, self.resource_type))
        object.__setattr__(self, "pattern_type", _enum(PatternType, self.pattern_type))

    def is_unknown(self) -> bool:
        return self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN

    def find_indefinite_field(self) -> str | None:
        if self.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            return f"Resource type is {self.resource_type.name}."
        if self.name is None:
            return "Resource name is NULL."
        if self.pattern_type in (PatternType.MATCH, PatternType.ANY, PatternType.UNKNOWN):
            return f"Resource pattern type is {self.pattern_type.name}."
        return None

    def matches(self, pattern: ResourcePattern) -> bool:
        """Kafka's ``ResourcePatternFilter.matches``."""
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        if pattern.pattern_type == PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD
        return pattern.pattern_type == PatternType.PREFIXED and self.name.startswith(pattern.name)

    def __str__(self) -> str:
        return (f"ResourcePattern(resourceType={self.resource_type.name}, name={_text(self.name)}, "
                f"patternType={self.pattern_type.name})")


@dataclass(frozen=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __post_init__(self) -> None:
        object.__setattr__(self, "resource_type", _enum(ResourceType, self.resource_type))
        object.__setattr__(self, "pattern_type", _enum(PatternType, self.pattern_type))
        if self.resource_type == ResourceType.ANY:
            raise ValueError("resourceType must not be ANY")
        if self.pattern_type in (PatternType.ANY, PatternType.MATCH):
            raise ValueError(f"patternType must not be {self.pattern_type.name}")
        if self.name is None:
            raise ValueError("name must not be None")

    def to_filter(self) -> ResourcePatternFilter:
        return ResourcePatternFilter(self.resource_type, self.name, self.pattern_type)

    def __str__(self) -> str:
        return (f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
                f"patternType={self.pattern_type.name})")


@dataclass(frozen=True)
class AccessControlEntryFilter:
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    ANY: ClassVar[AccessControlEntryFilter]

    def __post_init__(self) -> None:
        object.__setattr__(self, "operation", _enum(AclOperation, self.operation))
        object.__setattr__(self, "permission_type", _enum(AclPermissionType, self.permission_type))

    def is_unknown(self) -> bool:
        return self.operation == AclOperation.UNKNOWN or self.permission_type == AclPermissionType.UNKNOWN

    def find_indefinite_field(self) -> str | None:
        if self.principal is None:
            return "Principal is NULL."
        if self.host is None:
            return "Host is NULL."
        if self.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            return f"Operation is {self.operation.name}."
        if self.permission_type in (AclPermissionType.ANY, AclPermissionType.UNKNOWN):
            return f"Permission type is {self.permission_type.name}."
        return None

    def matches(self, entry: AccessControlEntry) -> bool:
        return ((self.principal is None or self.principal == entry.principal)
                and (self.host is None or self.host == entry.host)
                and self.operation in (AclOperation.ANY, entry.operation)
                and self.permission_type in (AclPermissionType.ANY, entry.permission_type))

    def __str__(self) -> str:
        return (f"(principal={_text(self.principal)}, host={_text(self.host)}, operation={self.operation.name}, "
                f"permissionType={self.permission_type.name})")


@dataclass(frozen=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __post_init__(self) -> None:
        object.__setattr__(self, "operation", _enum(AclOperation, self.operation))
        object.__setattr__(self, "permission_type", _enum(AclPermissionType, self.permission_type))
        if self.principal is None or self.host is None:
            raise ValueError("principal and host must not be None")
        if self.operation == AclOperation.ANY:
            raise ValueError("operation must not be ANY")
        if self.permission_type == AclPermissionType.ANY:
            raise ValueError("permissionType must not be ANY")

    def to_filter(self) -> AccessControlEntryFilter:
        return AccessControlEntryFilter(self.principal, self.host, self.operation, self.permission_type)

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
                f"permissionType={self.permission_type.name})")


@dataclass(frozen=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    @classmethod
    def of(cls, resource_type: Any, name: str, pattern_type: Any, principal: str, host: str, operation: Any,
           permission_type: Any) -> AclBinding:
        return cls(ResourcePattern(resource_type, name, pattern_type),
                   AccessControlEntry(principal, host, operation, permission_type))

    def to_filter(self) -> AclBindingFilter:
        return AclBindingFilter(self.pattern.to_filter(), self.entry.to_filter())

    def is_unknown(self) -> bool:
        return self.to_filter().is_unknown()

    def __str__(self) -> str:
        return f"(pattern={self.pattern}, entry={self.entry})"


@dataclass(frozen=True)
class AclBindingFilter:
    pattern_filter: ResourcePatternFilter = ResourcePatternFilter()
    entry_filter: AccessControlEntryFilter = AccessControlEntryFilter()

    ANY: ClassVar[AclBindingFilter]

    @classmethod
    def of(cls, resource_type: Any = ResourceType.ANY, name: str | None = None, pattern_type: Any = PatternType.ANY,
           principal: str | None = None, host: str | None = None, operation: Any = AclOperation.ANY,
           permission_type: Any = AclPermissionType.ANY) -> AclBindingFilter:
        return cls(ResourcePatternFilter(resource_type, name, pattern_type),
                   AccessControlEntryFilter(principal, host, operation, permission_type))

    def is_unknown(self) -> bool:
        return self.pattern_filter.is_unknown() or self.entry_filter.is_unknown()

    def find_indefinite_field(self) -> str | None:
        return self.pattern_filter.find_indefinite_field() or self.entry_filter.find_indefinite_field()

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern_filter.matches(binding.pattern) and self.entry_filter.matches(binding.entry)

    def __str__(self) -> str:
        return f"(patternFilter={self.pattern_filter}, entryFilter={self.entry_filter})"


ResourcePatternFilter.ANY = ResourcePatternFilter()
AccessControlEntryFilter.ANY = AccessControlEntryFilter()
AclBindingFilter.ANY = AclBindingFilter()


# --- requests and responses ---

def _wire_pattern(version: int, pattern_type: PatternType, api: str) -> int:
    if version >= 1:
        return int(pattern_type)
    if pattern_type in (PatternType.LITERAL, PatternType.ANY):
        return int(PatternType.LITERAL)
    raise UnsupportedVersionError(f"{api} v0 only supports LITERAL resource patterns, not {pattern_type.name}")


def build_create(version: int, bindings: list[AclBinding]) -> Any:
    schema = request_schema(ApiKey.CREATE_ACLS, version)
    creation = schema.structs["AclCreation"]
    return schema.cls(creations=[creation(
        resource_type=int(b.pattern.resource_type), resource_name=b.pattern.name,
        resource_pattern_type=_wire_pattern(version, b.pattern.pattern_type, "CreateAcls"),
        principal=b.entry.principal, host=b.entry.host, operation=int(b.entry.operation),
        permission_type=int(b.entry.permission_type)) for b in bindings])


def parse_create(body: Any) -> list[tuple[int, str | None]]:
    """(error code, message) per creation, in the request's order."""
    return [(r.error_code, r.error_message) for r in body.results]


def _filter_fields(version: int, f: AclBindingFilter, api: str) -> dict[str, Any]:
    p, e = f.pattern_filter, f.entry_filter
    return dict(resource_type_filter=int(p.resource_type), resource_name_filter=p.name,
                pattern_type_filter=_wire_pattern(version, p.pattern_type, api), principal_filter=e.principal,
                host_filter=e.host, operation=int(e.operation), permission_type=int(e.permission_type))


def build_describe(version: int, flt: AclBindingFilter) -> Any:
    schema = request_schema(ApiKey.DESCRIBE_ACLS, version)
    return schema.cls(**_filter_fields(version, flt, "DescribeAcls"))


def _binding(resource_type: int, name: str, pattern_type: int, principal: str, host: str, operation: int,
             permission_type: int) -> AclBinding:
    """A binding as the broker described it; unknown codes become UNKNOWN rather than fail."""
    pattern = ResourcePattern.__new__(ResourcePattern)
    object.__setattr__(pattern, "resource_type", _enum(ResourceType, resource_type))
    object.__setattr__(pattern, "name", name)
    object.__setattr__(pattern, "pattern_type", _enum(PatternType, pattern_type))
    entry = AccessControlEntry.__new__(AccessControlEntry)
    object.__setattr__(entry, "principal", principal)
    object.__setattr__(entry, "host", host)
    object.__setattr__(entry, "operation", _enum(AclOperation, operation))
    object.__setattr__(entry, "permission_type", _enum(AclPermissionType, permission_type))
    return AclBinding(pattern, entry)


def parse_describe(body: Any) -> tuple[int, str | None, list[AclBinding]]:
    bindings = [_binding(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation,
                         a.permission_type)
                for r in body.resources or () for a in r.acls]
    return body.error_code, body.error_message, bindings


def build_delete(version: int, filters: list[AclBindingFilter]) -> Any:
    schema = request_schema(ApiKey.DELETE_ACLS, version)
    flt = schema.structs["DeleteAclsFilter"]
    return schema.cls(filters=[flt(**_filter_fields(version, f, "DeleteAcls")) for f in filters])


def parse_delete(body: Any) -> list[tuple[int, str | None, list[tuple[int, str | None, AclBinding]]]]:
    """Per filter, in the request's order: (error code, message, [(code, message, binding)]
    for each ACL it matched)."""
    return [(r.error_code, r.error_message,
             [(m.error_code, m.error_message,
               _binding(m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host, m.operation,
                        m.permission_type)) for m in r.matching_acls or ()])
            for r in body.filter_results]


__all__ = [
    "CLUSTER_NAME", "SUPPORTED_OPERATIONS", "WILDCARD", "AccessControlEntry", "AccessControlEntryFilter",
    "AclBinding", "AclBindingFilter", "AclOperation", "AclPermissionType", "PatternType", "ResourcePattern",
    "ResourcePatternFilter", "ResourcePatternType", "ResourceType", "build_create", "build_delete",
    "build_describe", "parse_create", "parse_delete", "parse_describe",
]
