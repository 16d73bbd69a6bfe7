"""Client telemetry (KIP-714): GetTelemetrySubscriptions (71) v0, PushTelemetry (72) v0
and ListClientMetricsResources (74) v0, over
``broker.server.telemetry.client_metrics.ClientMetricsManager``.

Wire behaviour (Kafka's ``ClientMetricsManager``): the client is described by its header's
client id, the software name and version it gave in ApiVersions v3, and its address and
port; errors are the manager's (THROTTLING_QUOTA_EXCEEDED with the time left until the
next allowed request as throttle_time_ms, UNKNOWN_SUBSCRIPTION_ID, UNSUPPORTED_COMPRESSION_TYPE,
TELEMETRY_TOO_LARGE, INVALID_REQUEST, INVALID_RECORD); a Get failure answers a zero
instance id and no metrics. Without a manager (``state.telemetry`` None) the APIs are
not advertised.

Thread-safety: the manager is thread-safe.
"""

from __future__ import annotations

import logging
from typing import Any

from broker.protocol import ErrorCode
from broker.protocol.messages.get_telemetry_subscriptions import GET_TELEMETRY_SUBSCRIPTIONS_RESPONSE
from broker.protocol.messages.list_client_metrics_resources import LIST_CLIENT_METRICS_RESOURCES_RESPONSE
from broker.protocol.messages.push_telemetry import PUSH_TELEMETRY_RESPONSE
from broker.server.handlers import RequestContext, ServerState
from broker.server.telemetry.client_metrics import ZERO_UUID, TelemetryError

log = logging.getLogger(__name__)

GetResponse = GET_TELEMETRY_SUBSCRIPTIONS_RESPONSE.cls
PushResponse = PUSH_TELEMETRY_RESPONSE.cls
ListResponse = LIST_CLIENT_METRICS_RESOURCES_RESPONSE.cls
ListedResource = LIST_CLIENT_METRICS_RESOURCES_RESPONSE.structs["ClientMetricsResource"]


def _client(ctx: RequestContext) -> dict[str, str]:
    software = ctx.extra.get("connection_software") or ("", "")
    return {"client_id": ctx.header.client_id or "", "client_software_name": software[0] or "",
            "client_software_version": software[1] or "", "client_source_address": str(ctx.peer_address[0]),
            "client_source_port": str(ctx.peer_address[1])}


def handle_get_telemetry_subscriptions(state: ServerState, ctx: RequestContext, body) -> Any:
    assert state.telemetry is not None, "the broker always runs the client metrics manager"
    try:
        got = state.telemetry.get_subscriptions(body.client_instance_id, _client(ctx))
    except TelemetryError as exc:
        log.debug("GetTelemetrySubscriptions from %s: %s", ctx.connection_id, exc)
        return _get_error(exc.code, exc.throttle_ms, body.client_instance_id)
    return GetResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, **got)


def _get_error(code: int, throttle: int, instance_id: Any) -> Any:
    return GetResponse(throttle_time_ms=throttle, error_code=code, client_instance_id=instance_id or ZERO_UUID,
                       subscription_id=0, accepted_compression_types=[], push_interval_ms=0,
                       telemetry_max_bytes=0, delta_temporality=False, requested_metrics=[])


def get_telemetry_subscriptions_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> Any:
    return _get_error(code, 0, body.client_instance_id)


def handle_push_telemetry(state: ServerState, ctx: RequestContext, body) -> Any:
    assert state.telemetry is not None, "the broker always runs the client metrics manager"
    try:
        state.telemetry.push(body.client_instance_id, body.subscription_id, body.terminating,
                             body.compression_type, bytes(body.metrics or b""), _client(ctx))
    except TelemetryError as exc:
        log.debug("PushTelemetry from %s: %s", ctx.connection_id, exc)
        return PushResponse(throttle_time_ms=exc.throttle_ms, error_code=exc.code)
    return PushResponse(throttle_time_ms=0, error_code=ErrorCode.NONE)


def push_telemetry_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> Any:
    return PushResponse(throttle_time_ms=0, error_code=code)


def handle_list_client_metrics_resources(state: ServerState, ctx: RequestContext, body) -> Any:
    names = state.client_metrics.names() if state.client_metrics is not None else []
    return ListResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                        client_metrics_resources=[ListedResource(name=n) for n in names])


def list_client_metrics_resources_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> Any:
    return ListResponse(throttle_time_ms=0, error_code=code, client_metrics_resources=[])
