"""Quota limits as cluster metadata: DescribeClientQuotas (48) v0-1 and AlterClientQuotas
(49) v0-1 (KIP-546), over ``broker.server.quota.client_quotas.ClientQuotaStore``.

Wire behaviour (Kafka's): DescribeClientQuotas answers every stored entity matching the
filter with its quota values, or a top-level INVALID_REQUEST with Kafka's message for a
bad filter; AlterClientQuotas answers one result per entry, in order: NONE, or
INVALID_REQUEST with Kafka's message (bad entity, unknown key, a value that is not a
positive number of the key's type); ``validate_only`` changes nothing. Entity names
are null for the default entity. Without a quota store (``state.client_quotas`` None)
both answer UNSUPPORTED_VERSION.

Thread-safety: the store serialises changes; descriptions read a snapshot.
"""

from __future__ import annotations

import logging

from broker.protocol import ErrorCode
from broker.protocol.messages.alter_client_quotas import ALTER_CLIENT_QUOTAS_RESPONSE
from broker.protocol.messages.describe_client_quotas import DESCRIBE_CLIENT_QUOTAS_RESPONSE
from broker.server.handlers import RequestContext, ServerState
from broker.server.quota.client_quotas import AlterEntry, AlterOp, QuotaRequestError

log = logging.getLogger(__name__)

DescribeResponse = DESCRIBE_CLIENT_QUOTAS_RESPONSE.cls
EntryData = DESCRIBE_CLIENT_QUOTAS_RESPONSE.structs["EntryData"]
EntityData = DESCRIBE_CLIENT_QUOTAS_RESPONSE.structs["EntityData"]
ValueData = DESCRIBE_CLIENT_QUOTAS_RESPONSE.structs["ValueData"]
AlterResponse = ALTER_CLIENT_QUOTAS_RESPONSE.cls
AlterEntryData = ALTER_CLIENT_QUOTAS_RESPONSE.structs["EntryData"]
AlterEntityData = ALTER_CLIENT_QUOTAS_RESPONSE.structs["EntityData"]


def handle_describe_client_quotas(state: ServerState, ctx: RequestContext, body) -> object:
    store = state.client_quotas
    if store is None:
        return describe_client_quotas_error_response(state, ctx, body, ErrorCode.UNSUPPORTED_VERSION)
    try:
        found = store.describe([(c.entity_type, c.match_type, c.match) for c in body.components], body.strict)
    except QuotaRequestError as exc:
        return DescribeResponse(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST, error_message=str(exc),
                                entries=None)
    entries = [EntryData(entity=[EntityData(entity_type=t, entity_name=n) for t, n in sorted(entity.items())],
                         values=[ValueData(key=k, value=v) for k, v in sorted(quotas.items())])
               for entity, quotas in found]
    return DescribeResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, entries=entries)


def describe_client_quotas_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return DescribeResponse(throttle_time_ms=0, error_code=code, error_message=None, entries=None)


def handle_alter_client_quotas(state: ServerState, ctx: RequestContext, body) -> object:
    store = state.client_quotas
    if store is None:
        return alter_client_quotas_error_response(state, ctx, body, ErrorCode.UNSUPPORTED_VERSION)
    entries: list[AlterEntry | None] = []
    early: list[str | None] = []
    for e in body.entries:
        entity: dict[str, str | None] = {}
        message = None
        for ent in e.entity:
            if ent.entity_type in entity:
                message = f"Duplicate {ent.entity_type} entity in {[x.entity_type for x in e.entity]}"
            entity[ent.entity_type] = ent.entity_name
        entries.append(None if message else AlterEntry(entity, [AlterOp(o.key, o.value, o.remove) for o in e.ops]))
        early.append(message)
    results = store.alter([x for x in entries if x is not None], body.validate_only)
    out, it = [], iter(results)
    for e, entry, message in zip(body.entries, entries, early, strict=True):
        if entry is not None:
            message = next(it)
        if message is not None:
            log.info("AlterClientQuotas from %s: %s", ctx.connection_id, message)
        out.append(AlterEntryData(
            error_code=ErrorCode.INVALID_REQUEST if message else ErrorCode.NONE, error_message=message,
            entity=[AlterEntityData(entity_type=x.entity_type, entity_name=x.entity_name) for x in e.entity]))
    return AlterResponse(throttle_time_ms=0, entries=out)


def alter_client_quotas_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return AlterResponse(throttle_time_ms=0, entries=[
        AlterEntryData(error_code=code, error_message=None,
                       entity=[AlterEntityData(entity_type=x.entity_type, entity_name=x.entity_name)
                               for x in e.entity]) for e in body.entries])
