"""Client quota enforcement on the request path (Kafka's ``KafkaApis`` /
``RequestHandlerHelper``: "sendResponseMaybeThrottle", the produce and fetch callbacks).

Owns the per-request decisions, made on the request's own thread:

* **Who:** the quota user is the connection's principal name (``ctx.extra["user"]``, set
  by ``KafkaApis`` from the connection; ``ANONYMOUS`` without authentication), the client
  id is the request header's.
* **Produce:** the request's size in bytes is recorded against the PRODUCE quota (also
  for acks=0 and for failed partitions, as Kafka); its throttle goes to the response
  (``bandwidth_throttle``).
* **Fetch:** ``max_bytes`` is first clamped to ``max_value_in_quota_window`` (what the
  quota could ever allow in one window); the response's record bytes are recorded against
  the FETCH quota and the request's thread time against the REQUEST quota; if either
  throttles, the fetch bytes are un-recorded and the response is empty (Kafka's
  "throttled response"), with the larger throttle.
* **Request time:** every other API (except ApiVersions and the SASL handshake, exempt as
  in Kafka, and acks=0 produce) records the time it spent on its handler thread (wall
  time from its decoding to its response, as Kafka's requestThreadTimeNanos; a Fetch's
  long-poll wait included) as a percentage of one second
  (``NANOS_TO_PERCENTAGE_PER_SECOND``) against the REQUEST quota, once: ``record_fetch``
  through ``request_throttle``, every other request in ``finish`` (which ``KafkaApis``
  calls after the handler; the same steps inlined, as it runs for every request).
* **Controller mutations** (KIP-599): CreateTopics, CreatePartitions and DeleteTopics
  record the partitions they create or delete against the entity's token bucket
  (``mutation_quota``): from the strict versions an exhausted bucket refuses a topic with
  THROTTLING_QUOTA_EXCEEDED, below them the response is throttled (``note_mutation``).
* **Mute:** the larger throttle of a request is written into the response's
  ``throttle_time_ms`` and the connection is muted for that long through the manager of
  the quota that throttled (its reaper unmutes it exactly once): the client sees the
  delay and the broker reads nothing more from it meanwhile.

Thread-safety: stateless; the quota managers are thread-safe.
"""

from __future__ import annotations

import time
from typing import Any

from broker.protocol import ApiKey
from broker.server.handlers import RequestContext, ServerState
from broker.server.quota.client_quota_manager import NANOS_TO_PERCENTAGE_PER_SECOND

ANONYMOUS = "ANONYMOUS"
START_NS = "thread_start_ns"
REQUEST_DONE = "request_quota_done"
THROTTLES = "throttles"  # list of (manager, ms) recorded by the handler
EXEMPT_APIS = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


def user_of(ctx: RequestContext) -> str:
    return ctx.extra.get("user") or ANONYMOUS


def client_of(ctx: RequestContext) -> str:
    return ctx.header.client_id or ""


def _note(ctx: RequestContext, manager: Any, ms: int) -> None:
    if ms > 0:
        ctx.extra.setdefault(THROTTLES, []).append((manager, ms))


def record_produce(state: ServerState, ctx: RequestContext, request_bytes: int) -> int:
    quotas = state.quotas
    if quotas is None:
        return 0
    produce = quotas.produce
    if not produce.quota_types_enabled:  # NO_QUOTAS: nothing is recorded
        return 0
    ms = produce.record_and_get_throttle_time_ms(ctx.extra.get("user") or ANONYMOUS, ctx.header.client_id or "",
                                                 request_bytes)
    if ms > 0:
        _note(ctx, produce, ms)
    return ms


def fetch_max_bytes(state: ServerState, ctx: RequestContext, max_bytes: int) -> int:
    quotas = state.quotas
    if quotas is None or not quotas.fetch.quotas_enabled():
        return max_bytes
    limit = quotas.fetch.max_value_in_quota_window(user_of(ctx), client_of(ctx))
    return max_bytes if limit == float("inf") else max(0, min(max_bytes, int(limit)))


def record_fetch(state: ServerState, ctx: RequestContext, response_bytes: int) -> int:
    """Record the fetch and the request time; > 0: the response must be the throttled
    (empty) one, with this throttle."""
    quotas = state.quotas
    if quotas is None:
        return 0
    user, client = user_of(ctx), client_of(ctx)
    request_ms = request_throttle(state, ctx)
    fetch_ms = quotas.fetch.maybe_record_and_get_throttle_time_ms(user, client, response_bytes)
    if max(request_ms, fetch_ms) > 0 and quotas.fetch.quotas_enabled():
        quotas.fetch.unrecord_quota_sensor(user, client, response_bytes)
    _note(ctx, quotas.fetch, fetch_ms)
    return max(request_ms, fetch_ms)


def request_throttle(state: ServerState, ctx: RequestContext) -> int:
    """Record this request's handler thread time (once) against the REQUEST quota."""
    quotas = state.quotas
    extra = ctx.extra
    if quotas is None or extra.get(REQUEST_DONE) or ctx.header.api_key in EXEMPT_APIS:
        return 0
    extra[REQUEST_DONE] = True
    request = quotas.request
    if not request.quota_types_enabled:
        return 0
    now = time.perf_counter_ns()
    elapsed = now - extra.get(START_NS, now)
    ms = request.record_and_get_throttle_time_ms(extra.get("user") or ANONYMOUS, ctx.header.client_id or "",
                                                 elapsed * NANOS_TO_PERCENTAGE_PER_SECOND)
    if ms > 0:
        _note(ctx, request, ms)
    return ms


def mutation_quota(state: ServerState, ctx: RequestContext, api: str) -> Any:
    """The controller-mutation quota of one CreateTopics / CreatePartitions / DeleteTopics
    request (KIP-599: strict from the version Kafka makes strict, permissive before)."""
    quotas = state.quotas
    if quotas is None or not quotas.controller_mutation.quotas_enabled():
        from broker.server.quota.controller_mutation import UNBOUNDED
        return UNBOUNDED
    return quotas.controller_mutation.new_quota_for(user_of(ctx), client_of(ctx), api, ctx.api_version)


def note_mutation(state: ServerState, ctx: RequestContext, quota: Any) -> int:
    """After the mutations: the quota's throttle goes to the response and the connection."""
    ms = quota.throttle_time()
    if ms > 0 and state.quotas is not None:
        _note(ctx, state.quotas.controller_mutation, ms)
    return ms


def finish(state: ServerState, ctx: RequestContext, conn: Any, response: Any, exempt: bool = False) -> None:
    """After the handler: the request quota, then the largest throttle into the response
    and onto the connection (see the module docstring)."""
    quotas = state.quotas
    if quotas is None:
        return
    extra = ctx.extra
    if not exempt and not extra.get(REQUEST_DONE):  # request_throttle's work, inlined (every request)
        extra[REQUEST_DONE] = True
        request = quotas.request
        if request.quota_types_enabled and ctx.header.api_key not in EXEMPT_APIS:
            now = time.perf_counter_ns()
            ms = request.record_and_get_throttle_time_ms(
                extra.get("user") or ANONYMOUS, ctx.header.client_id or "",
                (now - extra.get(START_NS, now)) * NANOS_TO_PERCENTAGE_PER_SECOND)
            if ms > 0:
                _note(ctx, request, ms)
    throttles = extra.get(THROTTLES)
    if not throttles:
        return
    manager, ms = max(throttles, key=lambda t: t[1])
    if response is not None and hasattr(response, "throttle_time_ms"):
        response.throttle_time_ms = max(int(getattr(response, "throttle_time_ms", 0) or 0), ms)
    callback = getattr(conn, "throttle_callback", None)
    if callback is not None:
        manager.throttle(user_of(ctx), client_of(ctx), callback(), ms)


__all__ = ["ANONYMOUS", "START_NS", "fetch_max_bytes", "finish", "mutation_quota", "note_mutation", "record_fetch",
           "record_produce", "request_throttle", "user_of"]
