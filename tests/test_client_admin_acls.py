"""The admin client's ACL calls (broker/client/admin_acls.py, AdminClient.create_acls /
describe_acls / delete_acls): Kafka's Java ACL model (texts, constructor refusals, filter
matching), then against the real broker in a subprocess with the StandardAuthorizer on a
SASL_PLAINTEXT listener, as the super user ``admin``: per-binding and per-filter results,
every protocol version, what confluent-kafka's AdminClient reads of what ours wrote and
the other way round, and the refusals (CLUSTER_AUTHORIZATION_FAILED for a user who is not
a super user, INVALID_REQUEST for a bad binding, SECURITY_DISABLED without an authorizer).
"""

from __future__ import annotations

import pytest

from broker.client import admin as admin_module
from broker.client.admin import (
    AdminClient,
    ClusterAuthorizationFailedError,
    InvalidRequestError,
    SecurityDisabledError,
)
from broker.client.admin_acls import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourcePatternType,
    ResourceType,
)
from broker.client.errors import UnsupportedVersionError
from broker.protocol import ApiKey, ErrorCode
from tests.support.acl_admin import ck_conf, our_conf, start_authz_broker, unique

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def topic_acl(name: str, principal: str, op=AclOperation.READ, perm=ALLOW, pattern=PatternType.LITERAL,
              host: str = "*") -> AclBinding:
    return AclBinding(ResourcePattern(ResourceType.TOPIC, name, pattern), AccessControlEntry(principal, host, op, perm))


# --- the model --------------------------------------------------------------------------

def test_texts_are_kafkas_to_string():
    b = topic_acl("t", "User:alice")
    assert str(b.pattern) == "ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)"
    assert str(b.entry) == "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
    assert str(b) == ("(pattern=ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL), "
                      "entry=(principal=User:alice, host=*, operation=READ, permissionType=ALLOW))")
    assert str(AclBindingFilter.ANY) == ("(patternFilter=ResourcePattern(resourceType=ANY, name=<any>, "
                                         "patternType=ANY), entryFilter=(principal=<any>, host=<any>, "
                                         "operation=ANY, permissionType=ANY))")
    assert ResourcePatternType is PatternType
    assert AclBinding.of("topic", "t", "literal", "User:alice", "*", "read", 3) == b


def test_constructors_refuse_what_java_refuses():
    with pytest.raises(ValueError, match="resourceType must not be ANY"):
        ResourcePattern(ResourceType.ANY, "t")
    with pytest.raises(ValueError, match="patternType must not be MATCH"):
        ResourcePattern(ResourceType.TOPIC, "t", PatternType.MATCH)
    with pytest.raises(ValueError, match="operation must not be ANY"):
        AccessControlEntry("User:a", "*", AclOperation.ANY, ALLOW)
    with pytest.raises(ValueError, match="permissionType must not be ANY"):
        AccessControlEntry("User:a", "*", AclOperation.READ, AclPermissionType.ANY)
    with pytest.raises(ValueError, match="unknown AclOperation 'frob'"):
        AccessControlEntry("User:a", "*", "frob", ALLOW)
    # an unknown code is UNKNOWN (a newer broker's), and such a binding cannot be created
    b = AclBinding.of(ResourceType.TOPIC, "t", PatternType.LITERAL, "User:a", "*", 99, ALLOW)
    assert b.entry.operation == AclOperation.UNKNOWN and b.is_unknown()
    assert b.to_filter().find_indefinite_field() == "Operation is UNKNOWN."
    assert AclBindingFilter.ANY.find_indefinite_field() == "Resource type is ANY."


def test_filters_match_as_kafkas():
    lit = topic_acl("orders", "User:a")
    wildcard = topic_acl("*", "User:a")
    prefixed = topic_acl("ord", "User:a", pattern=PatternType.PREFIXED)
    other = topic_acl("payments", "User:b", op=AclOperation.WRITE, perm=DENY)
    everything = [lit, wildcard, prefixed, other]
    match = AclBindingFilter(ResourcePatternFilter(ResourceType.TOPIC, "orders", PatternType.MATCH))
    assert [b for b in everything if match.matches(b)] == [lit, wildcard, prefixed]
    literal = AclBindingFilter(ResourcePatternFilter(ResourceType.TOPIC, "orders", PatternType.LITERAL))
    assert [b for b in everything if literal.matches(b)] == [lit]
    any_name = AclBindingFilter(ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY),
                                AccessControlEntryFilter(principal="User:b"))
    assert [b for b in everything if any_name.matches(b)] == [other]
    deny_write = AclBindingFilter.of(operation=AclOperation.WRITE, permission_type=DENY)
    assert [b for b in everything if deny_write.matches(b)] == [other]
    assert all(AclBindingFilter.ANY.matches(b) for b in everything)


# --- against the broker -----------------------------------------------------------------

@pytest.fixture(scope="module")
def authz_broker(tmp_path_factory):
    broker = start_authz_broker(tmp_path_factory.mktemp("acl-admin"))
    yield broker
    code = broker.stop()
    assert code == 0, broker.stderr_text()[-3000:]


@pytest.fixture
def admin(authz_broker):
    with AdminClient(our_conf(authz_broker)) as a:
        yield a


def _mine(admin: AdminClient, name: str) -> set[AclBinding]:
    """The ACLs of the resources whose name starts with ``name`` (this test's)."""
    return {b for b in admin.describe_acls() if b.pattern.name.startswith(name)}


def test_create_describe_delete(admin):
    t = unique("acl")
    read = topic_acl(t, "User:alice")
    deny = topic_acl(t, "User:bob", op=AclOperation.WRITE, perm=DENY, host="10.0.0.1")
    prefixed = topic_acl(t + "-", "User:alice", op=AclOperation.DESCRIBE, pattern=PatternType.PREFIXED)
    group = AclBinding.of(ResourceType.GROUP, t + "-g", PatternType.LITERAL, "User:alice", "*", AclOperation.READ,
                          ALLOW)
    results = admin.create_acls([read, deny, prefixed, group, read])  # a duplicate is one binding
    assert list(results) == [read, deny, prefixed, group]
    assert results.all() == {read: None, deny: None, prefixed: None, group: None}
    assert _mine(admin, t) == {read, deny, prefixed, group}
    # creating an existing ACL again is not an error
    assert admin.create_acls([read]).all() == {read: None}

    # filters: by principal, by pattern type, MATCH (every pattern applying to a name)
    assert set(admin.describe_acls(AclBindingFilter.of(ResourceType.TOPIC, t, PatternType.LITERAL))) == {read, deny}
    assert {b for b in admin.describe_acls(AclBindingFilter.of(principal="User:bob"))
            if b.pattern.name.startswith(t)} == {deny}
    match = admin.describe_acls(AclBindingFilter.of(ResourceType.TOPIC, t + "-x", PatternType.MATCH))
    assert set(match) == {prefixed}
    assert admin.describe_acls(AclBindingFilter.of(ResourceType.TOPIC, unique("none"), PatternType.ANY)) == []

    # delete: each filter answers the ACLs it removed
    by_bob = AclBindingFilter(ResourcePatternFilter(ResourceType.TOPIC, t, PatternType.LITERAL),
                              AccessControlEntryFilter(principal="User:bob"))
    prefixed_filter = prefixed.to_filter()
    nothing = AclBindingFilter.of(ResourceType.TOPIC, unique("none"), PatternType.LITERAL)
    deleted = admin.delete_acls([by_bob, prefixed_filter, nothing])
    assert deleted.all() == {by_bob: [deny], prefixed_filter: [prefixed], nothing: []}
    assert _mine(admin, t) == {read, group}
    assert admin.delete_acls([AclBindingFilter.of(ResourceType.ANY, None, PatternType.ANY,
                                                  principal="User:alice", operation=AclOperation.READ)]
                             ).all() != {}
    assert _mine(admin, t) == set()


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_every_version(admin, monkeypatch, version):
    for key in (ApiKey.CREATE_ACLS, ApiKey.DESCRIBE_ACLS, ApiKey.DELETE_ACLS):
        monkeypatch.setitem(admin_module._VERSIONS, key, (version, version))
    t = unique(f"v{version}")
    b = topic_acl(t, "User:alice")
    assert admin.create_acls([b]).all() == {b: None}
    assert admin.describe_acls(AclBindingFilter.of(ResourceType.TOPIC, t, PatternType.ANY)) == [b]
    prefixed = topic_acl(t, "User:alice", pattern=PatternType.PREFIXED)
    if version == 0:  # v0 has no pattern type
        with pytest.raises(UnsupportedVersionError, match="LITERAL"):
            admin.create_acls([prefixed])
    else:
        assert admin.create_acls([prefixed]).all() == {prefixed: None}
        assert set(admin.describe_acls(AclBindingFilter.of(ResourceType.TOPIC, t, PatternType.ANY))) == {b, prefixed}
        assert admin.delete_acls([prefixed.to_filter()]).all() == {prefixed.to_filter(): [prefixed]}
    flt = AclBindingFilter.of(ResourceType.TOPIC, t, PatternType.LITERAL)
    assert admin.delete_acls([flt]).all() == {flt: [b]}
    assert admin.describe_acls(AclBindingFilter.of(ResourceType.TOPIC, t, PatternType.ANY)) == []


def _ck_binding(b: AclBinding):
    from confluent_kafka import admin as ck

    return ck.AclBinding(ck.ResourceType(int(b.pattern.resource_type)), b.pattern.name,
                         ck.ResourcePatternType(int(b.pattern.pattern_type)), b.entry.principal, b.entry.host,
                         ck.AclOperation(int(b.entry.operation)), ck.AclPermissionType(int(b.entry.permission_type)))


def _from_ck(b) -> AclBinding:
    return AclBinding.of(b.restype.value, b.name, b.resource_pattern_type.value, b.principal, b.host,
                         b.operation.value, b.permission_type.value)


def test_confluent_kafka_reads_and_deletes_what_ours_wrote(authz_broker, admin):
    from confluent_kafka import admin as ck

    t = unique("ours")
    ours = [topic_acl(t, "User:alice"), topic_acl(t, "User:bob", op=AclOperation.WRITE, perm=DENY),
            AclBinding.of(ResourceType.GROUP, t, PatternType.PREFIXED, "User:alice", "*", AclOperation.READ, ALLOW),
            AclBinding.of(ResourceType.TRANSACTIONAL_ID, t, PatternType.LITERAL, "User:alice", "*",
                          AclOperation.WRITE, ALLOW)]
    admin.create_acls(ours).all()
    other = ck.AdminClient(ck_conf(authz_broker))
    flt = ck.AclBindingFilter(ck.ResourceType.ANY, t, ck.ResourcePatternType.ANY, None, None, ck.AclOperation.ANY,
                              ck.AclPermissionType.ANY)
    found = other.describe_acls(flt).result(30)
    assert {_from_ck(b) for b in found} == set(ours)
    deleted = other.delete_acls([flt])[flt].result(30)
    assert {_from_ck(b) for b in deleted} == set(ours)
    assert _mine(admin, t) == set()


def test_ours_reads_and_deletes_what_confluent_kafka_wrote(authz_broker, admin):
    from confluent_kafka import admin as ck

    t = unique("theirs")
    theirs = [topic_acl(t, "User:alice", op=AclOperation.DESCRIBE_CONFIGS),
              topic_acl(t, "User:bob", op=AclOperation.ALL, perm=DENY, pattern=PatternType.PREFIXED),
              AclBinding.of(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, f"User:{t}", "*",
                            AclOperation.IDEMPOTENT_WRITE, ALLOW)]
    other = ck.AdminClient(ck_conf(authz_broker))
    for future in other.create_acls([_ck_binding(b) for b in theirs]).values():
        assert future.result(30) is None
    assert _mine(admin, t) == set(theirs[:2])
    assert admin.describe_acls(AclBindingFilter.of(ResourceType.CLUSTER, None, PatternType.ANY,
                                                   principal=f"User:{t}")) == [theirs[2]]
    flts = [AclBindingFilter.of(ResourceType.ANY, t, PatternType.ANY), theirs[2].to_filter()]
    deleted = admin.delete_acls(flts).all()
    assert set(deleted[flts[0]]) == set(theirs[:2]) and deleted[flts[1]] == [theirs[2]]
    ck_filter = ck.AclBindingFilter(ck.ResourceType.ANY, None, ck.ResourcePatternType.ANY, f"User:{t}", None,
                                    ck.AclOperation.ANY, ck.AclPermissionType.ANY)
    assert other.describe_acls(ck_filter).result(30) == []


def test_a_user_who_is_not_a_super_user_is_refused(authz_broker):
    b = topic_acl(unique("nope"), "User:alice")
    with AdminClient(our_conf(authz_broker, "alice")) as alice:
        error = alice.create_acls([b])[b].exception()
        assert isinstance(error, ClusterAuthorizationFailedError)
        assert error.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        with pytest.raises(ClusterAuthorizationFailedError):
            alice.describe_acls()
        flt = b.to_filter()
        assert isinstance(alice.delete_acls([flt])[flt].exception(), ClusterAuthorizationFailedError)


def test_an_invalid_binding_is_refused_alone(admin):
    t = unique("bad")
    good = topic_acl(t, "User:alice")
    empty_principal = topic_acl(t, "")
    no_colon = topic_acl(t, "alice", op=AclOperation.WRITE)
    bad_cluster = AclBinding.of(ResourceType.CLUSTER, "not-the-cluster", PatternType.LITERAL, "User:a", "*",
                                AclOperation.ALTER, ALLOW)
    unknown_op = AclBinding.of(ResourceType.TOPIC, t, PatternType.LITERAL, "User:a", "*", AclOperation.UNKNOWN, ALLOW)
    results = admin.create_acls([empty_principal, good, no_colon, bad_cluster, unknown_op])
    assert results[good].exception() is None
    for bad in (empty_principal, no_colon, bad_cluster, unknown_op):
        error = results[bad].exception()
        assert isinstance(error, InvalidRequestError) and error.code == ErrorCode.INVALID_REQUEST, (bad, error)
    assert "Could not parse principal" in str(results[empty_principal].exception())
    assert "kafka-cluster" in str(results[bad_cluster].exception())
    assert str(results[unknown_op].exception()) == "INVALID_REQUEST: Operation is UNKNOWN."  # refused by the client
    with pytest.raises(InvalidRequestError):
        results.all()
    assert _mine(admin, t) == {good}
    with pytest.raises(InvalidRequestError, match="UNKNOWN"):
        admin.describe_acls(AclBindingFilter.of(operation=AclOperation.UNKNOWN))
    admin.delete_acls([good.to_filter()]).all()


def test_a_broker_without_an_authorizer_answers_security_disabled(kafka_broker):
    b = topic_acl(unique("off"), "User:alice")
    with AdminClient({"bootstrap.servers": kafka_broker.bootstrap}) as a:
        error = a.create_acls([b])[b].exception()
        assert isinstance(error, SecurityDisabledError) and "No Authorizer is configured" in str(error)
        with pytest.raises(SecurityDisabledError):
            a.describe_acls()
        assert isinstance(a.delete_acls([b.to_filter()])[b.to_filter()].exception(), SecurityDisabledError)
