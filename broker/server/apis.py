"""Request dispatch (Kafka's ``KafkaApis``): one frame in, one response frame (or none) out.

Owns the table ``HANDLERS`` (api_key -> handler, error-response builder and the versions
SERVED) and the rules that apply before any handler runs:

* The header is parsed first; an unreadable header closes the connection.
* ApiVersions above the served maximum (kafka-python starts with v4, clients of the
  future with more) is answered, without parsing its body, with a v0 body carrying
  UNSUPPORTED_VERSION and the ApiVersions range (KIP-511; PROTOCOL.md 3.2), response
  header v0.
* Any other unknown API key, or a version outside the served range, closes the
  connection, as Apache Kafka's SocketServer does (the client could not parse an
  answer in a version it did not ask for). Produce v0-v2 are advertised (old librdkafka
  only compresses when the Produce range reaches 0, KAFKA-18659) but never served:
  their message formats are gone (KIP-896/KIP-724), so they close the connection too.
* A body that fails to decode (``ProtocolDecodeError``: truncated, absurd counts, bad
  UTF-8...) closes the connection; nothing reaches a handler, so nothing reaches a log.
* Authorization: with an authorizer (``authorizer.class.name``), the APIs of
  ``CLUSTER_OPERATIONS`` need that operation on the CLUSTER before their handler runs;
  every other handler checks its own resources (``handlers/authz.py``).
* A handler exception becomes the API's error response with UNKNOWN_SERVER_ERROR (or the
  code ``broker.server.errors`` finds); if even that fails, the connection is closed.
  A response that fails to encode is logged and closes the connection.

What is advertised is derived from this table: the ``broker.protocol.versions``
ADVERTISED rows of the APIs implemented here, plus SaslHandshake and SaslAuthenticate when
a SASL listener exists (``advertised_versions(sasl=True)``: served by
``broker.server.security.sasl.SaslGate``, which wraps ``handle`` on SASL brokers and sets
``conn.principal``, copied into ``RequestContext.principal``).

Request log: the first use of each (API, version) on a connection is logged at DEBUG on
the ``kafka.request.logger`` logger (Kafka's name), with the client id and, for
ApiVersions v3+, the client software name and version; ``request_counts`` counts every
request by (api_key, api_version) for tests and debugging.

Thread-safety: ``handle`` runs concurrently on connection threads; the table is
immutable; ``request_counts`` is a debug statistic (a ``Counter`` whose increments may,
rarely, be lost under contention); the per-connection ``seen_apis`` set belongs to that
connection's thread.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, NamedTuple

from broker.protocol import ApiKey, ErrorCode, ProtocolDecodeError, Reader, encode_response, parse_request_header
from broker.protocol.produce_fast import ProduceResult, encode_produce_response, from_struct, parse_produce_request
from broker.protocol.schema import decode
from broker.protocol.versions import advertised_apis, request_schema
from broker.server.errors import error_code_for, is_expected
from broker.server.group.config import GroupConfig
from broker.server.handlers import (
    CLOSE_CONNECTION,
    NO_RESPONSE,
    RequestContext,
    ServerState,
    acls,
    api_versions,
    authz,
    client_quotas,
    configs,
    consumer_group,
    fetch,
    group,
    group_membership,
    leader_epoch,
    list_offsets,
    metadata,
    produce,
    producer_id,
    scram_credentials,
    share,
    share_admin,
    telemetry,
    throttling,
    topics,
    txn,
)
from broker.server.security.acls import AclOperation

log = logging.getLogger(__name__)
ANONYMOUS = "User:ANONYMOUS"
request_log = logging.getLogger("kafka.request.logger")


class ApiHandler(NamedTuple):
    handle: Callable[[ServerState, RequestContext, Any], Any]
    error_response: Callable[[ServerState, RequestContext, Any, int], Any]
    min_version: int  # served range (inclusive)
    max_version: int


HANDLERS: dict[int, ApiHandler] = {
    ApiKey.PRODUCE: ApiHandler(produce.handle, produce.error_response, 3, 12),
    ApiKey.FETCH: ApiHandler(fetch.handle, fetch.error_response, 4, 11),
    ApiKey.LIST_OFFSETS: ApiHandler(list_offsets.handle, list_offsets.error_response, 1, 10),
    ApiKey.METADATA: ApiHandler(metadata.handle, metadata.error_response, 0, 12),
    ApiKey.API_VERSIONS: ApiHandler(api_versions.handle, api_versions.error_response, 0, 3),
    ApiKey.CREATE_TOPICS: ApiHandler(topics.handle_create_topics, topics.create_topics_error_response, 2, 4),
    ApiKey.DELETE_TOPICS: ApiHandler(topics.handle_delete_topics, topics.delete_topics_error_response, 1, 3),
    ApiKey.DELETE_RECORDS: ApiHandler(list_offsets.handle_delete_records,
                                      list_offsets.delete_records_error_response, 0, 1),
    ApiKey.INIT_PRODUCER_ID: ApiHandler(txn.handle_init_producer_id, producer_id.error_response, 0, 4),
    ApiKey.ADD_PARTITIONS_TO_TXN: ApiHandler(txn.handle_add_partitions_to_txn,
                                             txn.add_partitions_to_txn_error_response, 0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: ApiHandler(txn.handle_add_offsets_to_txn, txn.add_offsets_to_txn_error_response,
                                          0, 3),
    ApiKey.END_TXN: ApiHandler(txn.handle_end_txn, txn.end_txn_error_response, 0, 5),
    ApiKey.TXN_OFFSET_COMMIT: ApiHandler(txn.handle_txn_offset_commit, txn.txn_offset_commit_error_response, 0, 5),
    ApiKey.WRITE_TXN_MARKERS: ApiHandler(txn.handle_write_txn_markers, txn.write_txn_markers_error_response, 0, 1),
    ApiKey.DESCRIBE_PRODUCERS: ApiHandler(txn.handle_describe_producers, txn.describe_producers_error_response,
                                          0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: ApiHandler(txn.handle_describe_transactions,
                                             txn.describe_transactions_error_response, 0, 0),
    ApiKey.LIST_TRANSACTIONS: ApiHandler(txn.handle_list_transactions, txn.list_transactions_error_response,
                                         0, 1),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: ApiHandler(leader_epoch.handle, leader_epoch.error_response, 2, 3),
    ApiKey.DESCRIBE_CONFIGS: ApiHandler(topics.handle_describe_configs,
                                        topics.describe_configs_error_response, 1, 3),
    ApiKey.CREATE_PARTITIONS: ApiHandler(topics.handle_create_partitions,
                                         topics.create_partitions_error_response, 0, 1),
    ApiKey.FIND_COORDINATOR: ApiHandler(group.handle_find_coordinator, group.find_coordinator_error_response,
                                        0, 2),
    ApiKey.OFFSET_COMMIT: ApiHandler(group.handle_offset_commit, group.offset_commit_error_response, 2, 9),
    ApiKey.OFFSET_FETCH: ApiHandler(group.handle_offset_fetch, group.offset_fetch_error_response, 1, 9),
    ApiKey.LIST_GROUPS: ApiHandler(group.handle_list_groups, group.list_groups_error_response, 0, 5),
    ApiKey.DESCRIBE_GROUPS: ApiHandler(group.handle_describe_groups, group.describe_groups_error_response, 0, 5),
    ApiKey.DELETE_GROUPS: ApiHandler(group.handle_delete_groups, group.delete_groups_error_response, 0, 1),
    ApiKey.JOIN_GROUP: ApiHandler(group_membership.handle_join_group, group_membership.join_group_error_response,
                                  0, 5),
    ApiKey.SYNC_GROUP: ApiHandler(group_membership.handle_sync_group, group_membership.sync_group_error_response,
                                  0, 3),
    ApiKey.HEARTBEAT: ApiHandler(group_membership.handle_heartbeat, group_membership.heartbeat_error_response, 0, 3),
    ApiKey.LEAVE_GROUP: ApiHandler(group_membership.handle_leave_group,
                                   group_membership.leave_group_error_response, 0, 3),
    ApiKey.OFFSET_DELETE: ApiHandler(group_membership.handle_offset_delete,
                                     group_membership.offset_delete_error_response, 0, 0),
    ApiKey.ALTER_CONFIGS: ApiHandler(configs.handle_alter_configs, configs.alter_configs_error_response, 0, 1),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: ApiHandler(configs.handle_incremental_alter_configs,
                                                 configs.incremental_alter_configs_error_response, 0, 0),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: ApiHandler(client_quotas.handle_describe_client_quotas,
                                              client_quotas.describe_client_quotas_error_response, 0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: ApiHandler(client_quotas.handle_alter_client_quotas,
                                           client_quotas.alter_client_quotas_error_response, 0, 1),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: ApiHandler(scram_credentials.handle_describe,
                                                       scram_credentials.describe_error_response, 0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: ApiHandler(scram_credentials.handle_alter,
                                                    scram_credentials.alter_error_response, 0, 0),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: ApiHandler(consumer_group.handle_heartbeat,
                                                consumer_group.heartbeat_error_response, 0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: ApiHandler(consumer_group.handle_describe,
                                               consumer_group.describe_error_response, 0, 0),
    ApiKey.SHARE_GROUP_HEARTBEAT: ApiHandler(share.handle_heartbeat, share.heartbeat_error_response, 1, 1),
    ApiKey.SHARE_GROUP_DESCRIBE: ApiHandler(share.handle_describe, share.describe_error_response, 1, 1),
    ApiKey.SHARE_FETCH: ApiHandler(share.handle_share_fetch, share.share_fetch_error_response, 1, 2),
    ApiKey.SHARE_ACKNOWLEDGE: ApiHandler(share.handle_share_acknowledge, share.share_acknowledge_error_response,
                                         1, 2),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: ApiHandler(share_admin.handle_describe_offsets,
                                                    share_admin.describe_offsets_error_response, 0, 1),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: ApiHandler(share_admin.handle_alter_offsets,
                                                 share_admin.alter_offsets_error_response, 0, 0),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: ApiHandler(share_admin.handle_delete_offsets,
                                                  share_admin.delete_offsets_error_response, 0, 0),
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: ApiHandler(share_admin.handle_initialize_state,
                                                    share_admin.initialize_state_error_response, 0, 0),
    ApiKey.READ_SHARE_GROUP_STATE: ApiHandler(share_admin.handle_read_state, share_admin.read_state_error_response,
                                              0, 0),
    ApiKey.WRITE_SHARE_GROUP_STATE: ApiHandler(share_admin.handle_write_state,
                                               share_admin.write_state_error_response, 0, 1),
    ApiKey.DELETE_SHARE_GROUP_STATE: ApiHandler(share_admin.handle_delete_state,
                                                share_admin.delete_state_error_response, 0, 0),
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: ApiHandler(share_admin.handle_read_state_summary,
                                                      share_admin.read_state_summary_error_response, 0, 1),
    ApiKey.DESCRIBE_ACLS: ApiHandler(acls.handle_describe_acls, acls.describe_acls_error_response, 0, 3),
    ApiKey.CREATE_ACLS: ApiHandler(acls.handle_create_acls, acls.create_acls_error_response, 0, 3),
    ApiKey.DELETE_ACLS: ApiHandler(acls.handle_delete_acls, acls.delete_acls_error_response, 0, 3),
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: ApiHandler(telemetry.handle_get_telemetry_subscriptions,
                                                   telemetry.get_telemetry_subscriptions_error_response, 0, 0),
    ApiKey.PUSH_TELEMETRY: ApiHandler(telemetry.handle_push_telemetry, telemetry.push_telemetry_error_response,
                                      0, 0),
    ApiKey.LIST_CLIENT_METRICS_RESOURCES: ApiHandler(telemetry.handle_list_client_metrics_resources,
                                                     telemetry.list_client_metrics_resources_error_response, 0, 0),
}

# APIs whose whole request needs one operation on the CLUSTER (Kafka's KafkaApis checks them
# first); denied: the API's error response with CLUSTER_AUTHORIZATION_FAILED. The other
# APIs check their resources themselves (broker.server.handlers.authz).
CLUSTER_OPERATIONS: dict[int, AclOperation] = {
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: AclOperation.DESCRIBE,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: AclOperation.ALTER,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: AclOperation.DESCRIBE_CONFIGS,
    ApiKey.ALTER_CLIENT_QUOTAS: AclOperation.ALTER_CONFIGS,
    ApiKey.LIST_CLIENT_METRICS_RESOURCES: AclOperation.DESCRIBE_CONFIGS,
    # the share coordinator's state RPCs: broker to coordinator only (Kafka's CLUSTER_ACTION)
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: AclOperation.CLUSTER_ACTION,
    ApiKey.READ_SHARE_GROUP_STATE: AclOperation.CLUSTER_ACTION,
    ApiKey.WRITE_SHARE_GROUP_STATE: AclOperation.CLUSTER_ACTION,
    ApiKey.DELETE_SHARE_GROUP_STATE: AclOperation.CLUSTER_ACTION,
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: AclOperation.CLUSTER_ACTION,
}

# Served by broker.server.security.sasl.SaslGate in front of KafkaApis (never reach HANDLERS).
SASL_APIS = frozenset((ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE))


def advertised_versions(sasl: bool = False) -> tuple[tuple[int, int, int], ...]:
    """(api_key, min, max) for ApiVersions: the ADVERTISED rows we have handlers for
    (with ``sasl``, also the SASL APIs the SASL gate serves)."""
    return tuple((int(a.api_key), a.min_version, a.max_version)
                 for a in advertised_apis(sasl) if a.api_key in HANDLERS or (sasl and a.api_key in SASL_APIS))


class KafkaApis:
    """Turns request frames into response buffers (rules in the module docstring)."""

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self.handlers = dict(HANDLERS)
        protocols = GroupConfig.from_config(state.config or {}).rebalance_protocols
        if "consumer" not in protocols:  # KIP-848 switched off: neither advertised nor served
            for key in (ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE):
                self.handlers.pop(key, None)
        state.api_versions = tuple(v for v in (state.api_versions or advertised_versions())
                                   if v[0] in self.handlers or v[0] in SASL_APIS)
        self._api_versions_max = HANDLERS[ApiKey.API_VERSIONS].max_version
        self.request_counts: Counter[tuple[int, int]] = Counter()

    def handle(self, conn: Any, frame: memoryview) -> Any:
        """Serve one request frame from ``conn`` (a ``socket_server.Connection`` or any
        object with ``listener``, ``local_address``, ``peer_address``, ``id`` and a
        ``seen_apis`` set). Returns a list of buffers (a whole response frame, possibly
        holding file slices), ``NO_RESPONSE`` or ``CLOSE_CONNECTION``."""
        # Produce, the hot request, is parsed by its own codec (``produce_fast``); anything
        # that codec declines (tags, malformed bytes) takes the generic path below.
        body: Any  # the request: produce_fast's ProduceRequestData, or a generated struct
        fast = parse_produce_request(frame) if len(frame) > 10 and frame[1] == 0 and frame[0] == 0 else None
        if fast is not None:
            header, body = fast
            reader = None
        else:
            reader = Reader(frame)  # one cursor for the header and then the body
            reader.limit_elements()  # MAX_REQUEST_ELEMENTS: no request grows ~28x in memory (primitives.py)
            try:
                header, _ = parse_request_header(reader)
            except ProtocolDecodeError as exc:
                log.info("closing connection %s: unreadable request header (%s)", conn.id, exc)
                return CLOSE_CONNECTION
        key, version = header.api_key, header.api_version
        self.request_counts[(key, version)] += 1
        if (key, version) not in conn.seen_apis:
            conn.seen_apis.add((key, version))
            if request_log.isEnabledFor(logging.DEBUG):
                request_log.debug("connection %s client_id=%r: api_key=%d (%s) version=%d", conn.id,
                                  header.client_id, key, _api_name(key), version)
        if key == ApiKey.API_VERSIONS and version > self._api_versions_max:
            body = api_versions.unsupported_version_body(self.state)
            return encode_response(header, body, version=0)
        api = self.handlers.get(key)
        if api is None or not api.min_version <= version <= api.max_version:
            log.info("closing connection %s: unsupported api_key %d (%s) version %d from client_id %r",
                     conn.id, key, _api_name(key), version, header.client_id)
            return CLOSE_CONNECTION
        if reader is not None:
            try:
                body = decode(request_schema(key, version), version, reader)
            except ProtocolDecodeError as exc:
                log.info("closing connection %s: malformed %s v%d request: %s", conn.id, _api_name(key), version,
                         exc)
                return CLOSE_CONNECTION
            if key == ApiKey.PRODUCE:  # the produce handler takes produce_fast's form
                body = from_struct(body)
        ctx = RequestContext(header, conn.listener, conn.local_address, conn.peer_address, conn.id,
                             principal=getattr(conn, "principal", ANONYMOUS))
        if conn.client_software is not None:
            ctx.extra["connection_software"] = conn.client_software
        quotas = self.state.quotas
        metered = quotas is not None and quotas.enabled  # any client quota at all (else: no accounting)
        started = time.perf_counter_ns()
        if metered:
            ctx.extra["request_size"] = len(frame)
            ctx.extra["user"] = _principal_name(conn)
            ctx.extra[throttling.START_NS] = started
        try:
            if self.state.authorizer is not None and key in CLUSTER_OPERATIONS and not authz.cluster_allowed(
                    self.state, ctx, CLUSTER_OPERATIONS[key]):
                response = api.error_response(self.state, ctx, body, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            else:
                response = api.handle(self.state, ctx, body)
        except Exception as exc:  # noqa: BLE001 - a handler bug must not end the connection thread
            code = error_code_for(exc)
            if is_expected(exc):
                log.info("%s v%d from %s failed: %s", _api_name(key), version, conn.id, exc)
            else:
                log.exception("%s v%d from %s failed", _api_name(key), version, conn.id)
            try:
                response = api.error_response(self.state, ctx, body, code)
            except Exception:  # noqa: BLE001
                log.exception("building the error response of %s v%d failed", _api_name(key), version)
                return CLOSE_CONNECTION
        if self.state.stats is not None:
            self.state.stats.record_request(_API_NAMES.get(key) or _api_name(key),
                                            (time.perf_counter_ns() - started) / 1e9)
        if metered:
            try:
                throttling.finish(self.state, ctx, conn, None if response is NO_RESPONSE
                                  or response is CLOSE_CONNECTION else response,
                                  exempt=response is NO_RESPONSE and key == ApiKey.PRODUCE)
            except Exception:  # noqa: BLE001 - quota accounting must never fail a request
                log.exception("quota accounting of %s v%d from %s failed", _api_name(key), version, conn.id)
        if response is NO_RESPONSE or response is CLOSE_CONNECTION:
            return response
        if key == ApiKey.API_VERSIONS and "client_software" in ctx.extra:
            conn.client_software = ctx.extra["client_software"]
            if request_log.isEnabledFor(logging.DEBUG):
                request_log.debug("connection %s client software %s %s", conn.id, *ctx.extra["client_software"])
        try:
            if type(response) is ProduceResult:
                return encode_produce_response(header.correlation_id, version, response)
            return encode_response(header, response)
        except Exception:  # noqa: BLE001
            log.exception("encoding the %s v%d response for %s failed; closing the connection",
                          _api_name(key), version, conn.id)
            return CLOSE_CONNECTION


_API_NAMES = {int(k): k.name for k in ApiKey}


def _principal_name(conn: Any) -> str:
    """The quota user of a connection: its principal's name (``User:alice`` -> alice)."""
    principal = getattr(conn, "principal", None)
    if not principal:
        return throttling.ANONYMOUS
    text = str(principal)
    return text.split(":", 1)[1] if text.startswith("User:") else text


def _api_name(key: int) -> str:
    try:
        return ApiKey(key).name
    except ValueError:
        return "UNKNOWN"
