"""broker.protocol.versions: the advertised table (PROTOCOL.md section 2) and lookups."""

from __future__ import annotations

import pytest

from broker.protocol.api_keys import ApiKey
from broker.protocol.errors import UnknownApiKeyError, UnsupportedApiVersionError
from broker.protocol.versions import (
    ADVERTISED,
    SASL_ADVERTISED,
    advertised_apis,
    is_advertised,
    request_header_version,
    request_schema,
    response_schema,
)

# PROTOCOL.md section 2, "Advertise" column (phase 1).
EXPECTED = {
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.METADATA: (0, 12),  # v10+ topic ids (KIP-848)
    ApiKey.PRODUCE: (0, 12),
    ApiKey.FETCH: (4, 11),
    ApiKey.LIST_OFFSETS: (1, 10),  # v8 -4 / v9 -5 (tiered storage), v10 timeout_ms
    ApiKey.FIND_COORDINATOR: (0, 2),
    ApiKey.JOIN_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 3),
    ApiKey.HEARTBEAT: (0, 3),
    ApiKey.LEAVE_GROUP: (0, 3),
    ApiKey.OFFSET_COMMIT: (2, 9),  # v9: KIP-848
    ApiKey.OFFSET_FETCH: (1, 9),  # v9: KIP-848
    ApiKey.INIT_PRODUCER_ID: (0, 4),  # transactions (issue 17); v2+ flexible
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 3),
    ApiKey.END_TXN: (0, 5),
    ApiKey.TXN_OFFSET_COMMIT: (0, 5),
    ApiKey.WRITE_TXN_MARKERS: (0, 1),
    ApiKey.CREATE_TOPICS: (2, 4),
    ApiKey.DELETE_TOPICS: (1, 3),
    ApiKey.DESCRIBE_CONFIGS: (1, 3),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 3),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 5),  # v4/v5 state and type filters
    ApiKey.DELETE_GROUPS: (0, 1),
    ApiKey.CREATE_PARTITIONS: (0, 1),
    ApiKey.DELETE_RECORDS: (0, 1),
    ApiKey.ALTER_CONFIGS: (0, 1),  # not in PROTOCOL.md: its non-flexible versions
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 0),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),  # quotas (issue 18); v1 is flexible
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),  # KIP-554, flexible from v0
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),  # KIP-848
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 0),
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: (0, 0),  # telemetry (issue 18)
    ApiKey.PUSH_TELEMETRY: (0, 0),
    ApiKey.LIST_CLIENT_METRICS_RESOURCES: (0, 0),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
    ApiKey.DESCRIBE_ACLS: (0, 3),  # ACLs (issue 16); v2+ flexible
    ApiKey.CREATE_ACLS: (0, 3),
    ApiKey.DELETE_ACLS: (0, 3),
    # share groups (KIP-932, Kafka 4.2's versions; flexible only)
    ApiKey.SHARE_GROUP_HEARTBEAT: (1, 1),
    ApiKey.SHARE_GROUP_DESCRIBE: (1, 1),
    ApiKey.SHARE_FETCH: (1, 2),
    ApiKey.SHARE_ACKNOWLEDGE: (1, 2),
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: (0, 0),
    ApiKey.READ_SHARE_GROUP_STATE: (0, 0),
    ApiKey.WRITE_SHARE_GROUP_STATE: (0, 1),
    ApiKey.DELETE_SHARE_GROUP_STATE: (0, 0),
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: (0, 1),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 1),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: (0, 0),
}


def test_advertised_table_is_protocol_md_section_2() -> None:
    assert {a.api_key: (a.min_version, a.max_version) for a in ADVERTISED} == EXPECTED
    assert {a.api_key: (a.min_version, a.max_version) for a in SASL_ADVERTISED} == {
        ApiKey.SASL_HANDSHAKE: (0, 1),
        ApiKey.SASL_AUTHENTICATE: (0, 2),
    }
    keys = [a.api_key for a in advertised_apis(sasl=True)]
    assert keys == sorted(keys) and len(keys) == len(set(keys))


# Flexible versions advertised: ApiVersions v3, and what KIP-848 consumers need (Metadata
# v9+ for topic ids, the v8+ offset APIs, ListGroups/DescribeGroups' newer versions and the
# consumer group APIs, flexible only).
FIRST_FLEXIBLE_ADVERTISED = {
    ApiKey.API_VERSIONS: 3, ApiKey.METADATA: 9, ApiKey.OFFSET_COMMIT: 8, ApiKey.OFFSET_FETCH: 6,
    ApiKey.LIST_GROUPS: 3, ApiKey.DESCRIBE_GROUPS: 5, ApiKey.CONSUMER_GROUP_HEARTBEAT: 0,
    ApiKey.CONSUMER_GROUP_DESCRIBE: 0,
    # quotas and telemetry (issue 18)
    ApiKey.DESCRIBE_CLIENT_QUOTAS: 1, ApiKey.ALTER_CLIENT_QUOTAS: 1, ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: 0,
    ApiKey.PUSH_TELEMETRY: 0, ApiKey.LIST_CLIENT_METRICS_RESOURCES: 0,
    # SASL (issue 16): SaslAuthenticate v2, the SCRAM credential APIs (flexible only)
    ApiKey.SASL_AUTHENTICATE: 2, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: 0, ApiKey.ALTER_USER_SCRAM_CREDENTIALS: 0,
    # transactions (issue 17); Produce v9+ flexible since v12 is served (transaction version 2)
    ApiKey.PRODUCE: 9,
    ApiKey.INIT_PRODUCER_ID: 2, ApiKey.ADD_PARTITIONS_TO_TXN: 3, ApiKey.ADD_OFFSETS_TO_TXN: 3, ApiKey.END_TXN: 3,
    ApiKey.TXN_OFFSET_COMMIT: 3, ApiKey.DESCRIBE_PRODUCERS: 0,
    ApiKey.WRITE_TXN_MARKERS: 1, ApiKey.DESCRIBE_TRANSACTIONS: 0,
    ApiKey.LIST_TRANSACTIONS: 0,
    # ListOffsets v6+ (tiered storage, issue 21: v8 -4, v9 -5)
    ApiKey.LIST_OFFSETS: 6,
    # ACLs (issue 16)
    ApiKey.DESCRIBE_ACLS: 2, ApiKey.CREATE_ACLS: 2, ApiKey.DELETE_ACLS: 2,
    # share groups: every version is flexible
    ApiKey.SHARE_GROUP_HEARTBEAT: 1, ApiKey.SHARE_GROUP_DESCRIBE: 1, ApiKey.SHARE_FETCH: 1,
    ApiKey.SHARE_ACKNOWLEDGE: 1, ApiKey.INITIALIZE_SHARE_GROUP_STATE: 0, ApiKey.READ_SHARE_GROUP_STATE: 0,
    ApiKey.WRITE_SHARE_GROUP_STATE: 0, ApiKey.DELETE_SHARE_GROUP_STATE: 0, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: 0,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: 0, ApiKey.ALTER_SHARE_GROUP_OFFSETS: 0, ApiKey.DELETE_SHARE_GROUP_OFFSETS: 0,
}


def test_flexible_versions_are_only_those_listed() -> None:
    for api in advertised_apis(sasl=True):
        for version in range(api.min_version, api.max_version + 1):
            flexible = request_header_version(api.api_key, version) == 2
            first = FIRST_FLEXIBLE_ADVERTISED.get(api.api_key)
            assert flexible == (first is not None and version >= first), (api, version)


def test_every_advertised_version_has_schemas() -> None:
    for api in advertised_apis(sasl=True):
        for version in range(api.min_version, api.max_version + 1):
            assert request_schema(api.api_key, version).api_key == api.api_key
            assert response_schema(api.api_key, version).api_key == api.api_key


def test_flexible_versions_are_ready_for_phase_2() -> None:
    for key, version in [(ApiKey.METADATA, 12), (ApiKey.PRODUCE, 11), (ApiKey.FETCH, 12),
                         (ApiKey.LIST_OFFSETS, 8), (ApiKey.INIT_PRODUCER_ID, 5),
                         (ApiKey.CREATE_TOPICS, 7), (ApiKey.SASL_AUTHENTICATE, 2)]:
        assert request_schema(key, version).is_flexible(version)
        assert response_schema(key, version).is_flexible(version)


def test_lookup_errors() -> None:
    with pytest.raises(UnknownApiKeyError):
        request_schema(999, 0)
    with pytest.raises(UnknownApiKeyError):
        request_schema(ApiKey.LEADER_AND_ISR, 0)  # a Kafka API without a table here
    with pytest.raises(UnsupportedApiVersionError):
        response_schema(ApiKey.PRODUCE, 99)
    assert is_advertised(ApiKey.PRODUCE, 12) and not is_advertised(ApiKey.PRODUCE, 13)
    assert not is_advertised(ApiKey.SASL_HANDSHAKE, 1)
    assert is_advertised(ApiKey.SASL_HANDSHAKE, 1, sasl=True)


def test_kafka_python_infers_broker_2_4_or_later() -> None:
    """kafka-python infers the broker's version from the table (2.4: the group and
    idempotence APIs it needs; newer APIs such as the client-quota ones raise it); it
    then picks each request's version from the table itself."""
    data = pytest.importorskip("kafka.protocol.broker_version_data")
    table = {a.api_key: (a.min_version, a.max_version) for a in advertised_apis()}
    assert data.infer_broker_version_from_api_versions(table) >= (2, 4)
