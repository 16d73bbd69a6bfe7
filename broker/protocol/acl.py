"""Kafka's ACL vocabulary, shared by the broker's authorizer and the admin client: the
resource types, pattern types, operations and permission types with their wire codes, and
which operations each resource type supports.

Owns (as org.apache.kafka.common.{resource,acl} number them in DescribeAcls, CreateAcls
and DeleteAcls):

* ``ResourceType``: TOPIC 2, GROUP 3, CLUSTER 4, TRANSACTIONAL_ID 5, DELEGATION_TOKEN 6,
  USER 7; ANY 1 only in filters; UNKNOWN 0;
* ``PatternType``: LITERAL 3, PREFIXED 4; ANY 1 and MATCH 2 only in filters; UNKNOWN 0;
* ``AclOperation``: ALL 2, READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8,
  CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12,
  CREATE_TOKENS 13, DESCRIBE_TOKENS 14, TWO_PHASE_COMMIT 15; ANY 1 only in filters;
* ``AclPermissionType``: DENY 2, ALLOW 3; ANY 1 only in filters;
* ``SUPPORTED_OPERATIONS``: the operations each resource type supports (Kafka's
  ``AclEntry.supportedOperations``; ALL is valid on every type besides them);
* ``CLUSTER_NAME`` (``kafka-cluster``, the name of the one CLUSTER resource),
  ``WILDCARD`` (``*``: every resource name, every host) and ``WILDCARD_PRINCIPAL``
  (``User:*``).

The binding model, validation and matching are each side's own: the broker's in
``broker.server.security.acls``, the admin client's in ``broker.client.admin_acls``.

Thread-safety: immutable values.
"""

from __future__ import annotations

from enum import IntEnum

CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# The operations each resource type supports (Kafka's AclEntry.supportedOperations): the
# bits of "authorized operations" in Metadata and DescribeGroups responses.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                         AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                           AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE, AclOperation.TWO_PHASE_COMMIT),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}

__all__ = ["CLUSTER_NAME", "SUPPORTED_OPERATIONS", "WILDCARD", "WILDCARD_PRINCIPAL", "AclOperation",
           "AclPermissionType", "PatternType", "ResourceType"]
