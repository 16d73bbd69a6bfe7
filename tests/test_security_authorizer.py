"""The built-in authorizer's decision rules and ACL model (issue 16, authorization), in
process: Kafka's StandardAuthorizer semantics for super users, the no-ACL default, LITERAL,
wildcard and PREFIXED patterns, DENY over ALLOW, hosts, ``User:*``, the implication rules,
``authorizeByResourceType``, the authorized-operations bit field, CreateAcls validation,
binding filters, and durability through the cluster metadata store (S ids of
RELIABILITY.md where they apply: a denial is audited, an ACL survives a restart).
"""

from __future__ import annotations

import logging

import pytest

from broker.server.cluster_metadata import ClusterMetadataStore
from broker.server.security.acls import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    InvalidAcl,
    PatternType,
    ResourceType,
    validate_new,
)
from broker.server.security.authorizer import StandardAuthorizer

TOPIC, GROUP, CLUSTER, TXN = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, \
    ResourceType.TRANSACTIONAL_ID
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation


def acl(rt, name, principal="User:alice", op=Op.READ, perm=ALLOW, pattern=LITERAL, host="*") -> AclBinding:
    return AclBinding(int(rt), name, int(pattern), principal, host, int(op), int(perm))


def make(*bindings, **config) -> StandardAuthorizer:
    a = StandardAuthorizer({"super.users": config.get("super_users", "User:admin"),
                            "allow.everyone.if.no.acl.found": config.get("allow_everyone", False)})
    assert a.create(list(bindings)) == [None] * len(bindings)
    return a


def can(a: StandardAuthorizer, op, rt, name, principal="User:alice", host="10.0.0.1") -> bool:
    return a.authorize(principal, host, op, rt, name)


def test_super_user_is_allowed_everything_even_against_a_deny():
    a = make(acl(TOPIC, "t", "User:admin", Op.ALL, DENY))
    assert can(a, Op.WRITE, TOPIC, "t", "User:admin")
    assert can(a, Op.ALTER, CLUSTER, "kafka-cluster", "User:admin")


@pytest.mark.parametrize("allow_everyone", [False, True])
def test_a_resource_without_acls_follows_allow_everyone_if_no_acl_found(allow_everyone):
    a = make(acl(TOPIC, "other"), allow_everyone=allow_everyone)
    assert can(a, Op.READ, TOPIC, "t") is allow_everyone
    # once any ACL applies to the resource, the default no longer does
    a.create([acl(TOPIC, "t", "User:bob")])
    assert not can(a, Op.READ, TOPIC, "t")
    assert can(a, Op.READ, TOPIC, "t", "User:bob")


def test_literal_wildcard_and_prefixed_patterns():
    a = make(acl(TOPIC, "orders", op=Op.WRITE), acl(TOPIC, "*", op=Op.DESCRIBE),
             acl(TOPIC, "logs-", op=Op.READ, pattern=PREFIXED))
    assert can(a, Op.WRITE, TOPIC, "orders")
    assert not can(a, Op.WRITE, TOPIC, "orders2")
    assert can(a, Op.DESCRIBE, TOPIC, "anything")
    assert can(a, Op.READ, TOPIC, "logs-app")
    assert not can(a, Op.READ, TOPIC, "logs")  # a prefix must match entirely
    assert not can(a, Op.READ, TOPIC, "orders")
    # a topic ACL never applies to a group of the same name
    assert not can(a, Op.WRITE, GROUP, "orders")


def test_deny_wins_over_allow_and_only_denies_its_operation_or_all():
    a = make(acl(TOPIC, "t", op=Op.ALL), acl(TOPIC, "t", op=Op.WRITE, perm=DENY))
    assert not can(a, Op.WRITE, TOPIC, "t")
    assert can(a, Op.READ, TOPIC, "t")
    a.create([acl(TOPIC, "t-", op=Op.ALL, perm=DENY, pattern=PREFIXED)])
    assert not can(a, Op.READ, TOPIC, "t-1")
    # a DENY of READ does not deny the DESCRIBE that an ALLOW of READ implies
    b = make(acl(TOPIC, "u", op=Op.READ), acl(TOPIC, "u", op=Op.WRITE, perm=DENY))
    assert can(b, Op.DESCRIBE, TOPIC, "u")


@pytest.mark.parametrize("granted", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE, Op.ALL])
def test_operations_implying_describe(granted):
    a = make(acl(TOPIC, "t", op=granted))
    assert can(a, Op.DESCRIBE, TOPIC, "t")


def test_implications_go_one_way_only():
    a = make(acl(TOPIC, "t", op=Op.DESCRIBE), acl(TOPIC, "c", op=Op.ALTER_CONFIGS))
    assert not can(a, Op.READ, TOPIC, "t")
    assert can(a, Op.DESCRIBE_CONFIGS, TOPIC, "c")
    assert not can(a, Op.ALTER_CONFIGS, TOPIC, "t")
    assert not can(a, Op.DESCRIBE, TOPIC, "c")  # ALTER_CONFIGS does not imply DESCRIBE


def test_hosts_and_the_wildcard_principal():
    a = make(acl(TOPIC, "t", host="10.0.0.1"), acl(TOPIC, "w", "User:*"),
             acl(TOPIC, "w", "User:mallory", perm=DENY))
    assert can(a, Op.READ, TOPIC, "t", host="10.0.0.1")
    assert not can(a, Op.READ, TOPIC, "t", host="10.0.0.2")
    assert can(a, Op.READ, TOPIC, "w", "User:anyone")
    assert not can(a, Op.READ, TOPIC, "w", "User:mallory")


def test_authorize_any_is_kafkas_authorize_by_resource_type():
    a = make(acl(TOPIC, "t", op=Op.WRITE))
    assert a.authorize_any("User:alice", "h", Op.WRITE, TOPIC)
    assert not a.authorize_any("User:bob", "h", Op.WRITE, TOPIC)
    assert a.authorize_any("User:admin", "h", Op.WRITE, TOPIC)
    # an ALLOW whose pattern a DENY covers gives nothing
    b = make(acl(TOPIC, "t-1", op=Op.WRITE), acl(TOPIC, "t-", op=Op.WRITE, perm=DENY, pattern=PREFIXED))
    assert not b.authorize_any("User:alice", "h", Op.WRITE, TOPIC)
    c = make(acl(TOPIC, "x", op=Op.WRITE), acl(TOPIC, "*", op=Op.ALL, perm=DENY))
    assert not c.authorize_any("User:alice", "h", Op.WRITE, TOPIC)
    # no ACL of the type at all: the default decides
    assert make(allow_everyone=True).authorize_any("User:bob", "h", Op.WRITE, TOPIC)


def test_authorized_operations_bit_field():
    a = make(acl(TOPIC, "t", op=Op.READ), acl(GROUP, "g", op=Op.ALL))
    bits = a.authorized_operations("User:alice", "h", TOPIC, "t")
    assert {op for op in Op if bits & (1 << op)} == {Op.READ, Op.DESCRIBE}
    bits = a.authorized_operations("User:alice", "h", GROUP, "g")
    assert {op for op in Op if bits & (1 << op)} == {Op.READ, Op.DESCRIBE, Op.DELETE}


@pytest.mark.parametrize("binding, message", [
    (acl(ResourceType.ANY, "t"), "Invalid resourceType ANY"),
    (acl(TOPIC, "t", pattern=PatternType.MATCH), "Invalid patternType MATCH"),
    (acl(TOPIC, "t", op=Op.ANY), "Invalid operation ANY"),
    (acl(TOPIC, "t", perm=AclPermissionType.ANY), "Invalid permissionType ANY"),
    (acl(TOPIC, ""), "Resource name should not be empty"),
    (acl(TOPIC, "t", "alice"), "Could not parse principal"),
    (acl(CLUSTER, "my-cluster"), "kafka-cluster"),
    (acl(TOPIC, "*", pattern=PREFIXED), "wildcard"),
])
def test_create_refuses_invalid_bindings_with_kafkas_messages(binding, message):
    with pytest.raises(InvalidAcl, match=message):
        validate_new(binding)
    a = make()
    results = a.create([acl(TOPIC, "ok"), binding])
    assert results[0] is None and message in results[1]
    assert a.acls == (acl(TOPIC, "ok"),)


def test_filters_any_match_and_exact():
    bindings = [acl(TOPIC, "orders"), acl(TOPIC, "*", op=Op.WRITE), acl(TOPIC, "ord", pattern=PREFIXED),
                acl(GROUP, "orders", "User:bob")]
    a = make(*bindings)

    def f(rt=ResourceType.ANY, name=None, pattern=PatternType.ANY, principal=None, op=Op.ANY,
          perm=AclPermissionType.ANY):
        return AclBindingFilter(int(rt), name, int(pattern), principal, None, int(op), int(perm))

    assert set(a.describe(f())) == set(bindings)
    assert a.describe(f(TOPIC, "orders", LITERAL)) == [bindings[0]]
    assert set(a.describe(f(TOPIC, "orders", PatternType.MATCH))) == set(bindings[:3])
    assert a.describe(f(principal="User:bob")) == [bindings[3]]
    assert a.describe(f(op=Op.WRITE)) == [bindings[1]]
    with pytest.raises(InvalidAcl):
        a.describe(f(rt=ResourceType.UNKNOWN))
    (error, removed), = a.delete([f(TOPIC, None, PREFIXED)])
    assert error is None and removed == [bindings[2]]
    assert bindings[2] not in a.acls and len(a.acls) == 3


def test_denials_are_audited_on_kafkas_logger(caplog):
    a = make(acl(TOPIC, "t", "User:bob"))
    with caplog.at_level(logging.INFO, logger="kafka.authorizer.logger"):
        assert not a.authorize("User:alice", "10.1.2.3", Op.WRITE, TOPIC, "t", request="PRODUCE")
        assert not a.authorize("User:alice", "10.1.2.3", Op.READ, TOPIC, "t", log_if_denied=False)
    lines = [r.getMessage() for r in caplog.records if r.name == "kafka.authorizer.logger"]
    assert len(lines) == 1
    assert "Principal = User:alice is Denied operation = WRITE from host = 10.1.2.3" in lines[0]
    assert "Topic:LITERAL:t" in lines[0] and "PRODUCE" in lines[0]


def test_acls_are_durable_in_the_cluster_metadata(tmp_path):
    store = ClusterMetadataStore([tmp_path / "d1", tmp_path / "d2"], node_id=1)
    a = StandardAuthorizer({"super.users": ""}, store)
    a.load()
    bindings = [acl(TOPIC, "t"), acl(TXN, "tx-", op=Op.WRITE, pattern=PREFIXED)]
    assert a.create(bindings + [bindings[0]]) == [None, None, None]  # a duplicate is stored once
    a.delete([AclBindingFilter(int(TOPIC), "t", int(LITERAL), None, None, int(Op.ANY), int(ALLOW))])
    reopened_store = ClusterMetadataStore([tmp_path / "d1", tmp_path / "d2"], node_id=1)
    reopened_store.load()
    b = StandardAuthorizer({"super.users": ""}, reopened_store)
    b.load()
    assert b.acls == (bindings[1],)
    assert b.authorize("User:alice", "h", Op.WRITE, TXN, "tx-42")
    assert not b.authorize("User:alice", "h", Op.READ, TOPIC, "t")
