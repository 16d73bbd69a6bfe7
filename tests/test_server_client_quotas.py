"""AlterClientQuotas / DescribeClientQuotas (broker/server/handlers/client_quotas.py) on
the real broker in a subprocess: limits set, described with Kafka's filters, removed,
refused with Kafka's INVALID_REQUEST messages, validate_only, and kept across a restart
(the cluster metadata file)."""

from __future__ import annotations

import pytest

from broker.protocol import ApiKey, ErrorCode
from tests.support.broker import RawClient

EXACT, DEFAULT, SPECIFIED = 0, 1, 2


def alter(c: RawClient, entries: list, validate_only: bool = False, version: int = 1) -> list:
    r = c.request(ApiKey.ALTER_CLIENT_QUOTAS, version, {"validate_only": validate_only, "entries": [
        {"entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
         "ops": [{"key": k, "value": v, "remove": rm} for k, v, rm in ops]} for entity, ops in entries]})
    return [(e.error_code, e.error_message) for e in r.entries]


def describe(c: RawClient, components: list, strict: bool = False, version: int = 1):
    r = c.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, version, {"strict": strict, "components": [
        {"entity_type": t, "match_type": mt, "match": m} for t, mt, m in components]})
    if r.error_code:
        return r.error_code, r.error_message
    return {tuple((e.entity_type, e.entity_name) for e in x.entity): {v.key: v.value for v in x.values}
            for x in r.entries}


@pytest.mark.parametrize("version", [0, 1])
def test_alter_describe_remove_and_restart(broker_factory, version):
    broker = broker_factory()
    with RawClient(broker.host, broker.port) as c:
        assert alter(c, [
            ([("user", "alice")], [("producer_byte_rate", 1048576, False), ("request_percentage", 50.5, False)]),
            ([("user", "alice"), ("client-id", "etl")], [("consumer_byte_rate", 2048, False)]),
            ([("client-id", None)], [("producer_byte_rate", 1000, False)]),
            ([("ip", "10.0.0.1")], [("connection_creation_rate", 10, False)]),
        ], version=version) == [(0, None)] * 4
        everything = describe(c, [], version=version)
        assert everything == {
            (("user", "alice"),): {"producer_byte_rate": 1048576.0, "request_percentage": 50.5},
            (("client-id", "etl"), ("user", "alice")): {"consumer_byte_rate": 2048.0},
            (("client-id", None),): {"producer_byte_rate": 1000.0},
            (("ip", "10.0.0.1"),): {"connection_creation_rate": 10.0}}
        # Kafka's filters: EXACT name, DEFAULT entity, SPECIFIED any of the type; strict
        assert set(describe(c, [("user", EXACT, "alice")], version=version)) == {
            (("user", "alice"),), (("client-id", "etl"), ("user", "alice"))}
        assert set(describe(c, [("user", EXACT, "alice")], strict=True, version=version)) == {(("user", "alice"),)}
        assert set(describe(c, [("client-id", DEFAULT, None)], version=version)) == {(("client-id", None),)}
        assert set(describe(c, [("client-id", SPECIFIED, None)], version=version)) == {
            (("client-id", "etl"), ("user", "alice")), (("client-id", None),)}
        assert describe(c, [("ip", SPECIFIED, None), ("user", SPECIFIED, None)], version=version)[0] == \
            ErrorCode.INVALID_REQUEST
        # removing a key; an entity without keys disappears
        assert alter(c, [([("client-id", None)], [("producer_byte_rate", 0, True)])], version=version) == [(0, None)]
        assert (("client-id", None),) not in describe(c, [], version=version)
    broker.restart()
    with RawClient(broker.host, broker.port) as c:
        after = describe(c, [], version=version)
    del everything[(("client-id", None),)]
    assert after == everything


def test_invalid_entries_get_kafkas_errors_and_change_nothing(broker_factory):
    broker = broker_factory()
    with RawClient(broker.host, broker.port) as c:
        results = alter(c, [
            ([("user", "bob")], [("producer_byte_rate", 1.5, False)]),  # not a whole number
            ([("user", "bob")], [("no_such_quota", 1, False)]),
            ([("ip", "10.0.0.1"), ("user", "bob")], [("connection_creation_rate", 1, False)]),
            ([("ip", "not-an-ip")], [("connection_creation_rate", 1, False)]),
            ([("user", "bob")], [("connection_creation_rate", 1, False)]),  # an IP key on a user
            ([("user", "bob")], [("producer_byte_rate", -5, False)]),
            ([], [("producer_byte_rate", 5, False)]),
            ([("user", "bob")], [("producer_byte_rate", 100, False)]),  # the one valid entry
        ])
        assert [code for code, _ in results] == [ErrorCode.INVALID_REQUEST] * 7 + [ErrorCode.NONE]
        assert "Long" in results[0][1] and "no_such_quota" in results[1][1] and "IP" in results[2][1]
        assert describe(c, []) == {(("user", "bob"),): {"producer_byte_rate": 100.0}}
        # validate_only changes nothing
        assert alter(c, [([("user", "carol")], [("producer_byte_rate", 5, False)])], validate_only=True) == \
            [(0, None)]
        assert (("user", "carol"),) not in describe(c, [])
    assert "Traceback" not in broker.stderr_text()
