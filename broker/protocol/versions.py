"""Which API versions the broker advertises, and schema / header-version lookups.

Owns:

* ``ADVERTISED``: the (api_key, name, min_version, max_version) table the broker puts
  in its ApiVersions response, per PROTOCOL.md section 2 (phase 1: no flexible version
  beyond what that table lists; the KIP-554 SCRAM credential APIs and SaslAuthenticate v2
  exist only in flexible versions). ``SASL_ADVERTISED`` is added only when a SASL listener
  is configured. The server may narrow the table to the APIs it implements.
* ``request_schema(api_key, version)`` / ``response_schema(api_key, version)``: the
  generated ``Message`` tables, for any version Kafka defines (advertised or not).
* ``request_header_version`` / ``response_header_version``: the header rule. Flexible
  API versions use request header v2 and response header v1; others request header v1
  and response header v0. Two exceptions: ApiVersions responses always use header v0
  (KIP-511: a client must parse the reply before it knows the broker's versions), and
  ControlledShutdown v0 requests use header v0 (no client_id).

Thread-safety: read-only tables; safe to share.
"""

from __future__ import annotations

from typing import NamedTuple

from broker.protocol.api_keys import API_VERSION_RANGES, ApiKey
from broker.protocol.errors import UnknownApiKeyError, UnsupportedApiVersionError
from broker.protocol.messages import REQUEST_SCHEMAS, RESPONSE_SCHEMAS
from broker.protocol.schema import Message


class AdvertisedApi(NamedTuple):
    api_key: ApiKey
    name: str
    min_version: int
    max_version: int


def _api(key: ApiKey, lo: int, hi: int) -> AdvertisedApi:
    return AdvertisedApi(key, key.name, lo, hi)


# PROTOCOL.md section 2: the smallest set that serves confluent-kafka/librdkafka, kcat
# (librdkafka 2.0.2), kafka-python and aiokafka, with the reason for each bound there.
ADVERTISED: tuple[AdvertisedApi, ...] = (
    _api(ApiKey.PRODUCE, 0, 12),  # min 0 for old librdkafka compression; only 3-12 served
    _api(ApiKey.FETCH, 4, 11),
    _api(ApiKey.LIST_OFFSETS, 1, 10),  # v6+ flexible; v7 -3, v8 -4, v9 -5 (tiered), v10 timeout_ms
    _api(ApiKey.METADATA, 0, 12),  # v10+: topic ids (KIP-848 assignments carry ids)
    _api(ApiKey.OFFSET_COMMIT, 2, 9),  # v9: KIP-848 member epochs
    _api(ApiKey.OFFSET_FETCH, 1, 9),  # v8: batched groups, v9: KIP-848 member epochs
    _api(ApiKey.FIND_COORDINATOR, 0, 2),
    _api(ApiKey.JOIN_GROUP, 0, 5),
    _api(ApiKey.HEARTBEAT, 0, 3),
    _api(ApiKey.LEAVE_GROUP, 0, 3),
    _api(ApiKey.SYNC_GROUP, 0, 3),
    _api(ApiKey.DESCRIBE_GROUPS, 0, 5),
    _api(ApiKey.LIST_GROUPS, 0, 5),  # v4: states filter, v5: types filter
    _api(ApiKey.API_VERSIONS, 0, 3),
    _api(ApiKey.CREATE_TOPICS, 2, 4),
    _api(ApiKey.DELETE_TOPICS, 1, 3),
    _api(ApiKey.DELETE_RECORDS, 0, 1),
    _api(ApiKey.INIT_PRODUCER_ID, 0, 4),  # v5 is KIP-890's TRANSACTION_ABORTABLE
    _api(ApiKey.OFFSET_FOR_LEADER_EPOCH, 2, 3),
    _api(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 5),  # v4+: KIP-890 verification (broker to broker)
    _api(ApiKey.ADD_OFFSETS_TO_TXN, 0, 3),
    _api(ApiKey.END_TXN, 0, 5),  # v4: TRANSACTION_ABORTABLE; v5: transaction version 2 (KIP-890)
    _api(ApiKey.WRITE_TXN_MARKERS, 0, 1),  # broker to broker; served for admin tools' abort
    _api(ApiKey.TXN_OFFSET_COMMIT, 0, 5),  # v5: transaction version 2 (KIP-890)
    _api(ApiKey.DESCRIBE_ACLS, 0, 3),  # v1: pattern types (KIP-290), v2: flexible
    _api(ApiKey.CREATE_ACLS, 0, 3),
    _api(ApiKey.DELETE_ACLS, 0, 3),
    _api(ApiKey.DESCRIBE_CONFIGS, 1, 3),
    _api(ApiKey.CREATE_PARTITIONS, 0, 1),
    _api(ApiKey.ALTER_CONFIGS, 0, 1),  # v2 is flexible
    _api(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 0),  # v1 is flexible
    _api(ApiKey.DELETE_GROUPS, 0, 1),
    _api(ApiKey.OFFSET_DELETE, 0, 0),
    _api(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, 1),
    _api(ApiKey.ALTER_CLIENT_QUOTAS, 0, 1),
    _api(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0),  # KIP-554: flexible from v0
    _api(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0),
    _api(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1),  # KIP-848 (librdkafka uses v1)
    _api(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 0),
    _api(ApiKey.SHARE_GROUP_HEARTBEAT, 1, 1),  # KIP-932: Kafka 4.1+ (v0 was 4.0's early access)
    _api(ApiKey.SHARE_GROUP_DESCRIBE, 1, 1),
    _api(ApiKey.SHARE_FETCH, 1, 2),  # v2: ShareAcquireMode, RENEW (KIP-1206, KIP-1222)
    _api(ApiKey.SHARE_ACKNOWLEDGE, 1, 2),
    _api(ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0, 0),  # the share coordinator's state RPCs (CLUSTER_ACTION)
    _api(ApiKey.READ_SHARE_GROUP_STATE, 0, 0),
    _api(ApiKey.WRITE_SHARE_GROUP_STATE, 0, 1),
    _api(ApiKey.DELETE_SHARE_GROUP_STATE, 0, 0),
    _api(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 0, 1),
    _api(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, 1),  # v1: lag (KIP-1226)
    _api(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, 0),
    _api(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, 0),
    _api(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, 0),  # KIP-714 (flexible only)
    _api(ApiKey.PUSH_TELEMETRY, 0, 0),
    _api(ApiKey.DESCRIBE_PRODUCERS, 0, 0),  # KIP-664 (flexible only)
    _api(ApiKey.DESCRIBE_TRANSACTIONS, 0, 0),
    _api(ApiKey.LIST_TRANSACTIONS, 0, 1),
    _api(ApiKey.LIST_CLIENT_METRICS_RESOURCES, 0, 0),
)

# Advertised only when SASL is enabled (kcat needs Handshake 0 and 1 in range).
SASL_ADVERTISED: tuple[AdvertisedApi, ...] = (
    _api(ApiKey.SASL_HANDSHAKE, 0, 1),
    _api(ApiKey.SASL_AUTHENTICATE, 0, 2),
)

# Kafka 4 closes the connection on Produce v0-2 although it advertises them (KAFKA-18659).
PRODUCE_MIN_SERVED_VERSION = 3


def advertised_apis(sasl: bool = False) -> tuple[AdvertisedApi, ...]:
    """The ApiVersions table, sorted by key."""
    apis = ADVERTISED + (SASL_ADVERTISED if sasl else ())
    return tuple(sorted(apis, key=lambda a: a.api_key))


def is_advertised(api_key: int, version: int, sasl: bool = False) -> bool:
    return any(
        a.api_key == api_key and a.min_version <= version <= a.max_version
        for a in advertised_apis(sasl)
    )


def _schema(table: dict[int, Message], api_key: int, version: int) -> Message:
    message = table.get(api_key)
    if message is None:
        raise UnknownApiKeyError(api_key)
    lo, hi = message.valid_versions
    if not lo <= version <= hi:
        raise UnsupportedApiVersionError(api_key, version, f"{message.name} defines v{lo}-{hi}")
    return message


def request_schema(api_key: int, version: int) -> Message:
    """The request table of ``api_key``; raises UnknownApiKeyError / UnsupportedApiVersionError."""
    return _schema(REQUEST_SCHEMAS, api_key, version)


def response_schema(api_key: int, version: int) -> Message:
    """The response table of ``api_key``; raises UnknownApiKeyError / UnsupportedApiVersionError."""
    return _schema(RESPONSE_SCHEMAS, api_key, version)


_API_VERSIONS = int(ApiKey.API_VERSIONS)
_CONTROLLED_SHUTDOWN = int(ApiKey.CONTROLLED_SHUTDOWN)
# api_key -> first flexible version (None: never flexible); plain ints for the hot path.
_FIRST_FLEXIBLE = {key: info[2] for key, info in API_VERSION_RANGES.items()}
_UNKNOWN = object()


def is_flexible(api_key: int, version: int) -> bool | None:
    """Whether ``version`` of ``api_key`` uses flexible encoding; None for an unknown key.

    Like Kafka's generated ``ApiMessageType``, a version above the highest known one
    counts as flexible when the flexible range is open-ended (it always is): that is how
    Kafka reads the header of an ApiVersions request newer than itself.
    """
    first_flexible = _FIRST_FLEXIBLE.get(api_key, _UNKNOWN)
    if first_flexible is _UNKNOWN:
        return None
    return first_flexible is not None and version >= first_flexible  # type: ignore[operator]


def request_header_version(api_key: int, version: int) -> int | None:
    """2 for flexible versions, 1 otherwise, 0 for ControlledShutdown v0; None if the
    key is unknown (callers then read a v1 header)."""
    first_flexible = _FIRST_FLEXIBLE.get(api_key, _UNKNOWN)
    if first_flexible is _UNKNOWN:
        return None
    if first_flexible is not None and version >= first_flexible:  # type: ignore[operator]
        return 2
    if api_key == _CONTROLLED_SHUTDOWN and version == 0:
        return 0
    return 1


def response_header_version(api_key: int, version: int) -> int:
    """1 for flexible versions except ApiVersions (always 0), 0 otherwise."""
    if api_key == _API_VERSIONS:
        return 0
    return 1 if is_flexible(api_key, version) else 0
