"""Config changes: AlterConfigs (33) v0-v1 and IncrementalAlterConfigs (44) v0.

Wire behaviour (Kafka's ``ConfigAdminManager`` / ``ConfigurationControlManager``), one
result per resource of the request, in order, each with an error_message when it fails:

* TOPIC (2) resources:

  - AlterConfigs replaces the topic's whole set of overrides with the given keys (a key
    left out goes back to its default), as Kafka's legacy API does.
  - IncrementalAlterConfigs applies operations to the current overrides: SET (0) a
    value, DELETE (1) an override (back to the default; deleting an absent key is not an
    error), APPEND (2) / SUBTRACT (3) comma-separated items to / from a LIST key
    (cleanup.policy), starting from the topic's effective value.
  - Validation is CreateTopics': INVALID_CONFIG (40) for an unknown topic key, an invalid
    value (Kafka 4's ranges: segment.bytes at least 1 MiB ...), or APPEND/SUBTRACT on a
    key that is not a list (the message names the key);
    INVALID_REQUEST (42) for a null value where one is needed, an unknown operation, a
    key given twice, or a resource given twice in one request;
    UNKNOWN_TOPIC_OR_PARTITION (3) for a topic that does not exist, INVALID_TOPIC_EXCEPTION
    (17) for an illegal name, INVALID_REQUEST for an empty one (Kafka's "default topic
    resources are not allowed").
  - ``validate_only`` checks everything and changes nothing. Otherwise the new overrides
    are written to the topic registry (``kafkalog-topics.json``, so the change survives a
    restart) and then given to every partition log, which obeys them from its next
    operation on (segment.bytes at the next roll, retention.* at the next retention
    check, message.timestamp.type / max.message.bytes / cleanup.policy at the next
    append).

* BROKER (4) resources: dynamic broker configs (``broker.server.dynamic_config``), for
  this node's id or "" (the cluster default, kafka-configs.sh's ``--entity-default``):
  SET / DELETE of the keys that can change live (the connection limits), stored in the
  cluster metadata and applied at once; any other key is INVALID_REQUEST "Cannot update
  these configs dynamically: ..." (Kafka's answer), an invalid value INVALID_CONFIG; a
  broker id other than this node's is INVALID_REQUEST as in DescribeConfigs.

* CLIENT_METRICS (16) resources (IncrementalAlterConfigs only): the client telemetry
  subscriptions (``broker.server.telemetry.client_metrics``: keys ``metrics``,
  ``interval.ms``, ``match``); SET / DELETE, APPEND / SUBTRACT on the two list keys; an
  invalid result is INVALID_CONFIG with the reason; a subscription without keys is removed.

* GROUP (32) resources: per-group configs (``broker.server.group.group_configs``:
  ``share.auto.offset.reset``, ``share.record.lock.duration.ms``, ``consumer.session.timeout.ms``
  ...), for any group name, existing or not. IncrementalAlterConfigs: SET / DELETE;
  APPEND / SUBTRACT are INVALID_REQUEST ("Config value append is not allowed for config
  key: k": no group key is a list); AlterConfigs replaces all of the group's overrides. An
  unknown key ("Unknown group config name: k"), an invalid value or one outside the
  broker's bounds is INVALID_CONFIG naming the key; an empty group name INVALID_REQUEST.
  Stored in the cluster metadata before the answer; the share groups read them at once.

* Any other resource type (BROKER_LOGGER...): INVALID_REQUEST.

Authorization (Kafka's, ``authz.py``): ALTER_CONFIGS on the topic for TOPIC resources
(TOPIC_AUTHORIZATION_FAILED), on the group for GROUP resources (GROUP_AUTHORIZATION_FAILED),
on the CLUSTER for the others (CLUSTER_AUTHORIZATION_FAILED).

Versions: AlterConfigs v0-v1 (v2 is flexible) and IncrementalAlterConfigs v0 (v1 is
flexible), the non-flexible ones of PROTOCOL.md's phase 1; librdkafka and kafka-python
both use IncrementalAlterConfigs v0 against that range.

Thread-safety: each topic change is a read-modify-write under ``TopicManager``'s lock.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from broker.config import LIST
from broker.log.config import LOG_CONFIG_DEF
from broker.protocol import ErrorCode
from broker.protocol.messages.alter_configs import ALTER_CONFIGS_RESPONSE
from broker.protocol.messages.incremental_alter_configs import INCREMENTAL_ALTER_CONFIGS_RESPONSE
from broker.server.errors import ApiError, error_code_for, is_expected
from broker.server.handlers import RequestContext, ServerState
from broker.server.handlers.authz import AclOperation
from broker.server.handlers.topics import (
    RESOURCE_BROKER,
    RESOURCE_CLIENT_METRICS,
    RESOURCE_GROUP,
    RESOURCE_TOPIC,
    authorize_configs,
    config_text,
)

if TYPE_CHECKING:  # pragma: no cover
    from broker.server.dynamic_config import DynamicBrokerConfig

log = logging.getLogger(__name__)

AlterConfigsResponse = ALTER_CONFIGS_RESPONSE.cls
AlterResult = ALTER_CONFIGS_RESPONSE.structs["AlterConfigsResourceResponse"]
IncrementalAlterConfigsResponse = INCREMENTAL_ALTER_CONFIGS_RESPONSE.cls
IncrementalResult = INCREMENTAL_ALTER_CONFIGS_RESPONSE.structs["AlterConfigsResourceResponse"]

# AlterConfigOp.OpType
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {OP_SET: "SET", OP_DELETE: "DELETE", OP_APPEND: "APPEND", OP_SUBTRACT: "SUBTRACT"}

Overrides = Mapping[str, str]
Update = Callable[[Overrides], dict[str, str | None]]


def _failure(exc: Exception, what: str) -> tuple[int, str]:
    if not is_expected(exc):
        log.exception("%s failed", what)
    return error_code_for(exc), (exc.message if isinstance(exc, ApiError) and exc.message else str(exc))


def _check_duplicate_keys(names: list[str]) -> None:
    dups = sorted(k for k, n in Counter(names).items() if n > 1)
    if dups:
        raise ApiError(ErrorCode.INVALID_REQUEST, f"Error due to duplicate config keys: {', '.join(dups)}")


def _check_topic_name(state: ServerState, name: str) -> None:
    if not name:
        raise ApiError(ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed.")
    state.topics.validate_name(name)


def _check_broker(state: ServerState, name: str, keys: list[str]) -> DynamicBrokerConfig:
    """The broker's dynamic config, when ``name`` is this broker (or every broker) and it has one."""
    if name not in ("", str(state.node_id)):
        raise ApiError(ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {state.node_id} but got {name}")
    if state.dynamic_config is None:
        raise ApiError(ErrorCode.INVALID_REQUEST,
                       f"Cannot update these configs dynamically: {', '.join(sorted(keys)) or '(none)'}")
    return state.dynamic_config


def _apply(state: ServerState, resource_type: int, name: str, keys: list[str], update: Update,
           validate_only: bool) -> None:
    """One resource: validation common to both APIs, then the topic change."""
    if resource_type == RESOURCE_TOPIC:
        _check_topic_name(state, name)
        _check_duplicate_keys(keys)
        state.topics.alter_topic_configs(name, update, validate_only=validate_only)
    elif resource_type == RESOURCE_BROKER:
        dynamic_config = _check_broker(state, name, keys)
        _check_duplicate_keys(keys)
        dynamic_config.alter(name, update, validate_only)
    elif resource_type == RESOURCE_CLIENT_METRICS and state.client_metrics is not None:
        _check_duplicate_keys(keys)
        try:
            state.client_metrics.alter(name, update, validate_only)
        except ValueError as exc:
            raise ApiError(ErrorCode.INVALID_CONFIG, str(exc)) from None
    elif resource_type == RESOURCE_GROUP and state.group_configs is not None:
        if not name:
            raise ApiError(ErrorCode.INVALID_REQUEST, "Group name can't be empty")
        _check_duplicate_keys(keys)
        try:
            state.group_configs.alter(name, update, validate_only)
        except ValueError as exc:
            raise ApiError(ErrorCode.INVALID_CONFIG, str(exc)) from None
    else:
        raise ApiError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type} for "
                       f"altering configs; this broker alters TOPIC (2), BROKER (4), CLIENT_METRICS (16) "
                       f"and GROUP (32) configs")


def _serve(state: ServerState, ctx: RequestContext, body, make_update: Callable[[object], Update], result_cls,
           api: str) -> list:
    counts = Counter((r.resource_type, r.resource_name) for r in body.resources)
    results = []
    for r in body.resources:
        try:
            if counts[(r.resource_type, r.resource_name)] > 1:
                raise ApiError(ErrorCode.INVALID_REQUEST, "Each resource may appear at most once in a request; "
                               f"got {r.resource_name!r} (type {r.resource_type}) more than once.")
            authorize_configs(state, ctx, r.resource_type, r.resource_name, AclOperation.ALTER_CONFIGS)
            keys = [c.name for c in r.configs]
            _apply(state, r.resource_type, r.resource_name, keys, make_update(r), body.validate_only)
            results.append(result_cls(error_code=ErrorCode.NONE, error_message=None,
                                      resource_type=r.resource_type, resource_name=r.resource_name))
        except Exception as exc:  # noqa: BLE001 - answered with its code
            code, message = _failure(exc, f"{api} {r.resource_name}")
            results.append(result_cls(error_code=code, error_message=message,
                                      resource_type=r.resource_type, resource_name=r.resource_name))
    return results


# --- AlterConfigs (legacy: the given keys replace every override) ---

def _replace_all(resource) -> Update:
    def update(current: Overrides) -> dict[str, str | None]:
        new = {}
        for c in resource.configs:
            if c.value is None:
                raise ApiError(ErrorCode.INVALID_REQUEST, f"Null value not supported for topic configs: {c.name}")
            new[c.name] = c.value
        return new
    return update


def handle_alter_configs(state: ServerState, ctx: RequestContext, body) -> object:
    return AlterConfigsResponse(throttle_time_ms=0,
                                responses=_serve(state, ctx, body, _replace_all, AlterResult, "AlterConfigs"))


def alter_configs_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return AlterConfigsResponse(throttle_time_ms=0, responses=[
        AlterResult(error_code=code, error_message=None, resource_type=r.resource_type,
                    resource_name=r.resource_name) for r in body.resources])


# --- IncrementalAlterConfigs ---

def _items(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


def _list_value(state: ServerState, topic: str, key: str, current: Overrides) -> list[str]:
    """The key's current items: the override, else the topic's effective value."""
    if key in current:
        return _items(current[key])
    value = state.topics.log_config(topic).values.get(key)
    return _items(config_text(value) or "")


def _incremental_client_metrics(resource) -> Update:
    """IncrementalAlterConfigs of a client-metrics subscription (metrics and match are
    lists; interval.ms is not); the result is validated by the subscription store."""
    def update(current: Overrides) -> dict[str, str | None]:
        new: dict[str, str | None] = dict(current)
        for c in resource.configs:
            op, key = c.config_operation, c.name
            if op not in _OP_NAMES:
                raise ApiError(ErrorCode.INVALID_REQUEST, f"Unknown operation type {op} for config {key}")
            if op == OP_DELETE:
                new.pop(key, None)
            elif c.value is None:
                raise ApiError(ErrorCode.INVALID_REQUEST, f"Null value not supported for {_OP_NAMES[op]} of {key}")
            elif op == OP_SET:
                new[key] = c.value
            elif key not in ("metrics", "match"):
                raise ApiError(ErrorCode.INVALID_CONFIG, f"Can't {_OP_NAMES[op]} to key {key} because its "
                               f"type is not LIST.")
            else:
                items = _items(new.get(key) or "")
                given = _items(c.value)
                items = items + [v for v in given if v not in items] if op == OP_APPEND \
                    else [v for v in items if v not in given]
                new[key] = ",".join(items)
        return new
    return update


def _incremental_broker(resource) -> Update:
    """IncrementalAlterConfigs of dynamic broker configs: SET and DELETE (none of the
    dynamic keys is a list); the store validates keys and values."""
    def update(current: Overrides) -> dict[str, str | None]:
        new: dict[str, str | None] = dict(current)
        for c in resource.configs:
            op, key = c.config_operation, c.name
            if op == OP_DELETE:
                new.pop(key, None)
            elif op != OP_SET:
                raise ApiError(ErrorCode.INVALID_REQUEST, f"{_OP_NAMES.get(op, op)} is not supported for broker "
                               f"config {key}: it is not a list")
            elif c.value is None:
                raise ApiError(ErrorCode.INVALID_REQUEST, f"Null value not supported for SET of {key}")
            else:
                new[key] = c.value
        return new
    return update


def _incremental_group(resource) -> Update:
    """IncrementalAlterConfigs of a group's configs: SET and DELETE (no group key is a
    list: APPEND / SUBTRACT are INVALID_REQUEST, as Kafka); the store validates the result."""
    from broker.server.group.group_configs import GROUP_CONFIG_KEYS

    def update(current: Overrides) -> dict[str, str | None]:
        new: dict[str, str | None] = dict(current)
        for c in resource.configs:
            op, key = c.config_operation, c.name
            if op not in _OP_NAMES:
                raise ApiError(ErrorCode.INVALID_REQUEST, f"Unknown operation type {op} for config {key}")
            if key not in GROUP_CONFIG_KEYS:
                raise ApiError(ErrorCode.INVALID_CONFIG, f"Unknown group config name: {key}")
            if op == OP_DELETE:
                new.pop(key, None)
            elif op != OP_SET:
                raise ApiError(ErrorCode.INVALID_REQUEST, f"Config value {_OP_NAMES[op].lower()} is not allowed "
                               f"for config key: {key}")
            elif c.value is None:
                raise ApiError(ErrorCode.INVALID_REQUEST, f"Null value not supported for SET of {key}")
            else:
                new[key] = c.value
        return new
    return update


def _incremental(state: ServerState, resource) -> Update:
    if resource.resource_type == RESOURCE_GROUP:
        return _incremental_group(resource)
    if resource.resource_type == RESOURCE_CLIENT_METRICS:
        return _incremental_client_metrics(resource)
    if resource.resource_type == RESOURCE_BROKER:
        return _incremental_broker(resource)

    def update(current: Overrides) -> dict[str, str | None]:
        new: dict[str, str | None] = dict(current)
        for c in resource.configs:
            op, key = c.config_operation, c.name
            if op not in _OP_NAMES:
                raise ApiError(ErrorCode.INVALID_REQUEST, f"Unknown operation type {op} for config {key}")
            key_def = LOG_CONFIG_DEF.keys.get(key)
            if key_def is None:
                raise ApiError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {key}")
            if op == OP_DELETE:
                new.pop(key, None)
                continue
            if c.value is None:
                raise ApiError(ErrorCode.INVALID_REQUEST,
                               f"Null value not supported for {_OP_NAMES[op]} of topic config {key}")
            if op == OP_SET:
                new[key] = c.value
                continue
            if key_def.type != LIST:
                raise ApiError(ErrorCode.INVALID_CONFIG, f"Can't {_OP_NAMES[op]} to key {key} because its "
                               f"type is not LIST.")
            items = _list_value(state, resource.resource_name, key, new)  # type: ignore[arg-type]
            given = _items(c.value)
            if op == OP_APPEND:
                items += [v for v in given if v not in items]
            else:
                items = [v for v in items if v not in given]
            new[key] = ",".join(items)
        return new
    return update


def handle_incremental_alter_configs(state: ServerState, ctx: RequestContext, body) -> object:
    results = _serve(state, ctx, body, lambda r: _incremental(state, r), IncrementalResult, "IncrementalAlterConfigs")
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=results)


def incremental_alter_configs_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=[
        IncrementalResult(error_code=code, error_message=None, resource_type=r.resource_type,
                          resource_name=r.resource_name) for r in body.resources])
