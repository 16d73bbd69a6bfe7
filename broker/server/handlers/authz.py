"""Authorization checks for handlers: the calls every API makes into the authorizer.

Owns the handler-side helpers over ``state.authorizer`` (a
``broker.server.security.authorizer.StandardAuthorizer``, or None when
``authorizer.class.name`` is empty: then every check passes and costs one attribute
test):

* ``allowed(state, ctx, op, resource_type, name)``: one decision for the requester
  (``ctx.principal`` from ``ctx.peer_address``), audited as Kafka audits (denials at INFO
  on ``kafka.authorizer.logger``) unless ``audit=False`` (filters, such as Metadata
  listing all topics, Kafka does not log);
* ``allowed_names``: the subset of names allowed (one decision per distinct name);
* ``allowed_any``: ``authorizeByResourceType``;
* ``cluster_allowed``: an operation on the CLUSTER resource;
* ``authorized_operations``: the bit field for Metadata / DescribeGroups, or Kafka's
  "not requested" value when the client did not ask.

Which API checks what follows Kafka's ``KafkaApis`` (each handler module's docstring
says); the error codes are TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED,
CLUSTER_AUTHORIZATION_FAILED and TRANSACTIONAL_ID_AUTHORIZATION_FAILED.

Thread-safety: stateless; the authorizer is thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterable

from broker.protocol import ApiKey
from broker.server.handlers import RequestContext, ServerState
from broker.server.security.acls import CLUSTER_NAME, SUPPORTED_OPERATIONS, AclOperation, ResourceType
from broker.server.security.authorizer import AUTHORIZED_OPERATIONS_OMITTED

__all__ = [
    "CLUSTER_NAME", "AclOperation", "ResourceType", "allowed", "allowed_any", "allowed_names", "authorized_operations",
    "cluster_allowed",
]


def _host(ctx: RequestContext) -> str:
    peer = ctx.peer_address
    return str(peer[0]) if peer else ""


def _request_name(ctx: RequestContext) -> str:
    try:
        return ApiKey(ctx.header.api_key).name
    except ValueError:
        return str(ctx.header.api_key)


def allowed(state: ServerState, ctx: RequestContext, op: AclOperation, resource_type: ResourceType, name: str,
            *, audit: bool = True) -> bool:
    authorizer = state.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize(ctx.principal, _host(ctx), op, resource_type, name, request=_request_name(ctx),
                                log_if_denied=audit, log_if_allowed=audit)


def cluster_allowed(state: ServerState, ctx: RequestContext, op: AclOperation, *, audit: bool = True) -> bool:
    return allowed(state, ctx, op, ResourceType.CLUSTER, CLUSTER_NAME, audit=audit)


def allowed_names(state: ServerState, ctx: RequestContext, op: AclOperation, resource_type: ResourceType,
                  names: Iterable[str], *, audit: bool = True) -> set[str]:
    distinct = set(names)
    if state.authorizer is None:
        return distinct
    return {n for n in distinct if allowed(state, ctx, op, resource_type, n, audit=audit)}


def allowed_any(state: ServerState, ctx: RequestContext, op: AclOperation, resource_type: ResourceType) -> bool:
    authorizer = state.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize_any(ctx.principal, _host(ctx), op, resource_type)


def authorized_operations(state: ServerState, ctx: RequestContext, resource_type: ResourceType, name: str,
                          requested: bool) -> int:
    """The bit field of the operations allowed on the resource, when ``requested``."""
    if not requested:
        return AUTHORIZED_OPERATIONS_OMITTED
    authorizer = state.authorizer
    if authorizer is None:  # Kafka without an authorizer: every supported operation
        bits = 0
        for op in SUPPORTED_OPERATIONS[resource_type]:
            bits |= 1 << int(op)
        return bits
    return authorizer.authorized_operations(ctx.principal, _host(ctx), resource_type, name)
