"""ACL administration: DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), v0-3, over
``broker.server.security.authorizer.StandardAuthorizer``.

Wire behaviour (Kafka's ``AclApis``):

* no authorizer configured: every result carries SECURITY_DISABLED ("No Authorizer is
  configured on the broker");
* DescribeAcls needs DESCRIBE on the CLUSTER, CreateAcls and DeleteAcls ALTER on it
  (CLUSTER_AUTHORIZATION_FAILED otherwise);
* CreateAcls answers one result per creation, in order: NONE, or INVALID_REQUEST with
  Kafka's message for a binding it refuses (``acls.validate_new``); the valid ones are
  stored durably in one change;
* DescribeAcls groups the matching bindings by resource pattern; a filter with an
  UNKNOWN component is INVALID_REQUEST;
* DeleteAcls answers one result per filter with the bindings it removed (all filters
  in one durable change).

Versions: v0 has no pattern type (the schema's default, LITERAL, stands for it in the
request; v0 responses drop it); v2+ are flexible.

Thread-safety: the authorizer serialises changes.
"""

from __future__ import annotations

import logging

from broker.protocol import ErrorCode
from broker.protocol.messages.create_acls import CREATE_ACLS_RESPONSE
from broker.protocol.messages.delete_acls import DELETE_ACLS_RESPONSE
from broker.protocol.messages.describe_acls import DESCRIBE_ACLS_RESPONSE
from broker.server.handlers import RequestContext, ServerState
from broker.server.handlers.authz import AclOperation, cluster_allowed
from broker.server.security.acls import AclBinding, AclBindingFilter, InvalidAcl

log = logging.getLogger(__name__)

DescribeResponse = DESCRIBE_ACLS_RESPONSE.cls
DescribeResource = DESCRIBE_ACLS_RESPONSE.structs["DescribeAclsResource"]
AclDescription = DESCRIBE_ACLS_RESPONSE.structs["AclDescription"]
CreateResponse = CREATE_ACLS_RESPONSE.cls
CreationResult = CREATE_ACLS_RESPONSE.structs["AclCreationResult"]
DeleteResponse = DELETE_ACLS_RESPONSE.cls
FilterResult = DELETE_ACLS_RESPONSE.structs["DeleteAclsFilterResult"]
MatchingAcl = DELETE_ACLS_RESPONSE.structs["DeleteAclsMatchingAcl"]

SECURITY_DISABLED_MESSAGE = "No Authorizer is configured on the broker"


def _refusal(state: ServerState, ctx: RequestContext, op: AclOperation) -> tuple[int, str] | None:
    if state.authorizer is None:
        return ErrorCode.SECURITY_DISABLED, SECURITY_DISABLED_MESSAGE
    if not cluster_allowed(state, ctx, op):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
    return None


def handle_describe_acls(state: ServerState, ctx: RequestContext, body) -> object:
    refused = _refusal(state, ctx, AclOperation.DESCRIBE)
    if refused:
        return DescribeResponse(throttle_time_ms=0, error_code=refused[0], error_message=refused[1], resources=[])
    flt = AclBindingFilter(body.resource_type_filter, body.resource_name_filter, body.pattern_type_filter,
                           body.principal_filter, body.host_filter, body.operation, body.permission_type)
    assert state.authorizer is not None  # else _refusal answered SECURITY_DISABLED
    try:
        found = state.authorizer.describe(flt)
    except InvalidAcl as exc:
        return DescribeResponse(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST, error_message=str(exc),
                                resources=[])
    by_pattern: dict[tuple[int, str, int], list[AclBinding]] = {}
    for b in found:
        by_pattern.setdefault((b.resource_type, b.name, b.pattern_type), []).append(b)
    resources = [DescribeResource(resource_type=rt, resource_name=name, pattern_type=pt,
                                  acls=[AclDescription(principal=b.principal, host=b.host, operation=b.operation,
                                                       permission_type=b.permission_type) for b in bindings])
                 for (rt, name, pt), bindings in sorted(by_pattern.items())
                 if ctx.api_version >= 1 or pt == 3]
    return DescribeResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, resources=resources)


def describe_acls_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return DescribeResponse(throttle_time_ms=0, error_code=code, error_message=None, resources=[])


def handle_create_acls(state: ServerState, ctx: RequestContext, body) -> object:
    refused = _refusal(state, ctx, AclOperation.ALTER)
    if refused:
        return CreateResponse(throttle_time_ms=0, results=[
            CreationResult(error_code=refused[0], error_message=refused[1]) for _ in body.creations])
    bindings = [AclBinding(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
                           c.operation, c.permission_type) for c in body.creations]
    assert state.authorizer is not None  # else _refusal answered SECURITY_DISABLED
    results = state.authorizer.create(bindings)
    for b, message in zip(bindings, results, strict=True):
        if message:
            log.info("CreateAcls from %s refused %s: %s", ctx.connection_id, b.describe(), message)
    return CreateResponse(throttle_time_ms=0, results=[
        CreationResult(error_code=ErrorCode.INVALID_REQUEST if m else ErrorCode.NONE, error_message=m)
        for m in results])


def create_acls_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return CreateResponse(throttle_time_ms=0, results=[CreationResult(error_code=code, error_message=None)
                                                       for _ in body.creations])


def handle_delete_acls(state: ServerState, ctx: RequestContext, body) -> object:
    refused = _refusal(state, ctx, AclOperation.ALTER)
    if refused:
        return DeleteResponse(throttle_time_ms=0, filter_results=[
            FilterResult(error_code=refused[0], error_message=refused[1], matching_acls=[]) for _ in body.filters])
    filters = [AclBindingFilter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
                                f.principal_filter, f.host_filter, f.operation, f.permission_type)
               for f in body.filters]
    assert state.authorizer is not None  # else _refusal answered SECURITY_DISABLED
    out = []
    for message, removed in state.authorizer.delete(filters):
        out.append(FilterResult(
            error_code=ErrorCode.INVALID_REQUEST if message else ErrorCode.NONE, error_message=message,
            matching_acls=[MatchingAcl(error_code=ErrorCode.NONE, error_message=None, resource_type=b.resource_type,
                                       resource_name=b.name, pattern_type=b.pattern_type, principal=b.principal,
                                       host=b.host, operation=b.operation, permission_type=b.permission_type)
                           for b in removed]))
    return DeleteResponse(throttle_time_ms=0, filter_results=out)


def delete_acls_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return DeleteResponse(throttle_time_ms=0, filter_results=[
        FilterResult(error_code=code, error_message=None, matching_acls=[]) for _ in body.filters])
