"""Topic administration: CreateTopics (19) v2-v4, DeleteTopics (20) v1-v3,
CreatePartitions (37) v0-v1 and DescribeConfigs (32) v1-v3.

Wire behaviour (Kafka's ``ControllerApis`` / ``ConfigHelper``):

* CreateTopics: per topic, INVALID_TOPIC_EXCEPTION (17) for an illegal name (characters
  outside [a-zA-Z0-9._-], longer than 249, "." or "..") or one colliding with an existing
  topic once '.' and '_' are identified; TOPIC_ALREADY_EXISTS (36); INVALID_PARTITIONS
  (37) for a count < 1 (-1 = num.partitions); INVALID_REPLICATION_FACTOR (38) for < 1 or
  > 1 (one broker; -1 = default.replication.factor); INVALID_CONFIG (40) for an unknown
  topic key or an invalid value, Kafka 4's ranges and valid values included (segment.bytes
  at least 1 MiB, min.cleanable.dirty.ratio in [0, 1]...: ``validate_topic_config``; the
  message names the key and the constraint); INVALID_REQUEST (42) for a
  name given twice in one request, a null config value, or both a count and a manual
  assignment. ``validate_only`` checks everything and creates nothing. Each error comes
  with an error_message.
* DeleteTopics: UNKNOWN_TOPIC_OR_PARTITION (3), TOPIC_DELETION_DISABLED (73) when
  delete.topic.enable=false, INVALID_TOPIC_EXCEPTION (17) for an internal topic
  (``__consumer_offsets``: the group coordinator's). The logs are renamed at once and removed after
  file.delete.delay.ms.
* CreatePartitions: INVALID_PARTITIONS when the count does not grow,
  INVALID_REPLICA_ASSIGNMENT for an assignment that is not this node, validate_only.
* DescribeConfigs: TOPIC (2) resources list every topic-level key (or the requested
  ones) with its value as text, config_source TOPIC_CONFIG (1) for an override,
  STATIC_BROKER_CONFIG (4) when server.properties sets the default, DEFAULT_CONFIG (5)
  otherwise; synonyms (v1+ when include_synonyms) from the most to the least specific
  (the override, then each server.properties key that sets it, then the default under
  the broker key's name); config_type and documentation at v3. Internal keys
  (``internal.segment.bytes``) are listed only for a topic that sets them. BROKER (4) resources
  (name = this node id, or "" for cluster defaults) list the broker's keys the same way.
  GROUP (32) resources (any group name, existing or not; an empty one is INVALID_REQUEST)
  list every key of ``broker.server.group.group_configs.GROUP_CONFIG_KEYS``: the group's
  override with config_source GROUP_CONFIG (8), else the broker key that gives the default
  when server.properties sets it (STATIC_BROKER_CONFIG), else the default (DEFAULT_CONFIG).
  Unknown topic: UNKNOWN_TOPIC_OR_PARTITION; another broker id or another resource type:
  INVALID_REQUEST.

Authorization (Kafka's, ``authz.py``): CreateTopics needs CREATE on the CLUSTER or on the
topic, DeleteTopics DELETE and CreatePartitions ALTER on the topic (else
TOPIC_AUTHORIZATION_FAILED); DescribeConfigs DESCRIBE_CONFIGS on the topic, or on the
CLUSTER for BROKER and client-metrics resources (CLUSTER_AUTHORIZATION_FAILED), on the group
for GROUP resources (GROUP_AUTHORIZATION_FAILED).

Thread-safety: changes are serialised by ``TopicManager``; describe reads snapshots.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from broker.config import BOOLEAN, DOUBLE, INT, LIST, LONG, PASSWORD, STRING
from broker.log.config import INTERNAL_KEYS, LOG_CONFIG_DEF
from broker.protocol import ErrorCode
from broker.protocol.messages.create_partitions import CREATE_PARTITIONS_RESPONSE
from broker.protocol.messages.create_topics import CREATE_TOPICS_RESPONSE
from broker.protocol.messages.delete_topics import DELETE_TOPICS_RESPONSE
from broker.protocol.messages.describe_configs import DESCRIBE_CONFIGS_RESPONSE
from broker.server.config import SERVER_CONFIG_DEF
from broker.server.errors import ApiError, error_code_for, is_expected
from broker.server.group import INTERNAL_TOPICS
from broker.server.handlers import RequestContext, ServerState, throttling
from broker.server.handlers.authz import AclOperation, ResourceType, allowed, cluster_allowed

log = logging.getLogger(__name__)

CreateTopicsResponse = CREATE_TOPICS_RESPONSE.cls
CreatableTopicResult = CREATE_TOPICS_RESPONSE.structs["CreatableTopicResult"]
DeleteTopicsResponse = DELETE_TOPICS_RESPONSE.cls
DeletableTopicResult = DELETE_TOPICS_RESPONSE.structs["DeletableTopicResult"]
CreatePartitionsResponse = CREATE_PARTITIONS_RESPONSE.cls
CreatePartitionsResult = CREATE_PARTITIONS_RESPONSE.structs["CreatePartitionsTopicResult"]
DescribeConfigsResponse = DESCRIBE_CONFIGS_RESPONSE.cls
DescribeConfigsResult = DESCRIBE_CONFIGS_RESPONSE.structs["DescribeConfigsResult"]
ConfigEntry = DESCRIBE_CONFIGS_RESPONSE.structs["DescribeConfigsResourceResult"]
Synonym = DESCRIBE_CONFIGS_RESPONSE.structs["DescribeConfigsSynonym"]

# ConfigResource.Type
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_CLIENT_METRICS = 16
RESOURCE_GROUP = 32
SOURCE_CLIENT_METRICS_CONFIG = 7  # DescribeConfigsResponse.ConfigSource.CLIENT_METRICS_CONFIG
SOURCE_GROUP_CONFIG = 8  # DescribeConfigsResponse.ConfigSource.GROUP_CONFIG
# DescribeConfigsResponse.ConfigSource
SOURCE_TOPIC_CONFIG = 1
SOURCE_DYNAMIC_BROKER_CONFIG = 2
SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG = 3
SOURCE_STATIC_BROKER_CONFIG = 4
SOURCE_DEFAULT_CONFIG = 5
# DescribeConfigsResponse.ConfigType
_CONFIG_TYPE = {BOOLEAN: 1, STRING: 2, INT: 3, LONG: 5, DOUBLE: 6, LIST: 7, PASSWORD: 9}
_SENSITIVE_TYPES = (PASSWORD,)


def _failure(exc: Exception, what: str) -> tuple[int, str]:
    if not is_expected(exc):
        log.exception("%s failed", what)
    return error_code_for(exc), (exc.message if isinstance(exc, ApiError) and exc.message else str(exc))


# --- CreateTopics ---

def handle_create_topics(state: ServerState, ctx: RequestContext, body) -> object:
    counts = Counter(t.name for t in body.topics)
    results = []
    manager = state.topics
    quota = throttling.mutation_quota(state, ctx, "CreateTopics")
    create_any = cluster_allowed(state, ctx, AclOperation.CREATE, audit=False)
    for t in body.topics:
        name = t.name
        try:
            if counts[name] > 1:
                raise ApiError(ErrorCode.INVALID_REQUEST, f"Create topics request from client "
                               f"contains a duplicate topic name: {name}")
            if not create_any and not allowed(state, ctx, AclOperation.CREATE, ResourceType.TOPIC, name):
                raise ApiError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
            manager.validate_name(name)
            if manager.get(name) is not None:
                raise ApiError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
            assignments = [(a.partition_index, list(a.broker_ids)) for a in t.assignments]
            partitions = manager.resolve_partitions(t.num_partitions, t.replication_factor, assignments)
            configs = {c.name: c.value for c in t.configs}
            manager.validate_configs(configs)
            if not body.validate_only:
                quota.record(partitions)
            info = manager.create_topic(name, partitions, configs, validate_only=body.validate_only)
            results.append(CreatableTopicResult(name=name, topic_id=info.topic_id, error_code=ErrorCode.NONE,
                                                error_message=None, num_partitions=partitions,
                                                replication_factor=1))
        except Exception as exc:  # noqa: BLE001 - answered with its code
            code, message = _failure(exc, f"CreateTopics {name}")
            results.append(CreatableTopicResult(name=name, error_code=code, error_message=message,
                                                num_partitions=-1, replication_factor=-1))
    return CreateTopicsResponse(throttle_time_ms=throttling.note_mutation(state, ctx, quota), topics=results)


def create_topics_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return CreateTopicsResponse(throttle_time_ms=0, topics=[
        CreatableTopicResult(name=t.name, error_code=code, error_message=None, num_partitions=-1,
                             replication_factor=-1) for t in body.topics])


# --- DeleteTopics ---

def handle_delete_topics(state: ServerState, ctx: RequestContext, body) -> object:
    results = []
    quota = throttling.mutation_quota(state, ctx, "DeleteTopics")
    for name in dict.fromkeys(body.topic_names):
        try:
            if not allowed(state, ctx, AclOperation.DELETE, ResourceType.TOPIC, name):
                raise ApiError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
            info = state.topics.get(name)
            if name in INTERNAL_TOPICS and info is not None:
                raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot delete internal topic {name}")
            if info is not None:
                quota.record(info.partitions)
            state.topics.delete_topic(name)
            for p in range(info.partitions if info is not None else 0):
                state.watchers.notify((name, p))  # long-polling fetches answer at once
            results.append(DeletableTopicResult(name=name, error_code=ErrorCode.NONE, error_message=None))
        except Exception as exc:  # noqa: BLE001 - answered with its code
            code, message = _failure(exc, f"DeleteTopics {name}")
            results.append(DeletableTopicResult(name=name, error_code=code, error_message=message))
    return DeleteTopicsResponse(throttle_time_ms=throttling.note_mutation(state, ctx, quota), responses=results)


def delete_topics_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return DeleteTopicsResponse(throttle_time_ms=0, responses=[
        DeletableTopicResult(name=n, error_code=code, error_message=None) for n in body.topic_names])


# --- CreatePartitions ---

def handle_create_partitions(state: ServerState, ctx: RequestContext, body) -> object:
    counts = Counter(t.name for t in body.topics)
    results = []
    quota = throttling.mutation_quota(state, ctx, "CreatePartitions")
    for t in body.topics:
        try:
            if counts[t.name] > 1:
                raise ApiError(ErrorCode.INVALID_REQUEST, f"Duplicate topic in request: {t.name}")
            if not allowed(state, ctx, AclOperation.ALTER, ResourceType.TOPIC, t.name):
                raise ApiError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
            existing = state.topics.get(t.name)
            if existing is not None and t.count > existing.partitions and not body.validate_only:
                quota.record(t.count - existing.partitions)
            assignments = None if t.assignments is None else [list(a.broker_ids) for a in t.assignments]
            state.topics.create_partitions(t.name, t.count, assignments, validate_only=body.validate_only)
            results.append(CreatePartitionsResult(name=t.name, error_code=ErrorCode.NONE, error_message=None))
        except Exception as exc:  # noqa: BLE001 - answered with its code
            code, message = _failure(exc, f"CreatePartitions {t.name}")
            results.append(CreatePartitionsResult(name=t.name, error_code=code, error_message=message))
    return CreatePartitionsResponse(throttle_time_ms=throttling.note_mutation(state, ctx, quota), results=results)


def create_partitions_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return CreatePartitionsResponse(throttle_time_ms=0, results=[
        CreatePartitionsResult(name=t.name, error_code=code, error_message=None) for t in body.topics])


# --- DescribeConfigs ---

def config_text(value: Any) -> str | None:
    """A typed config value as Kafka prints it (lists comma-joined, booleans lowercase)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def _entry(name: str, value: Any, source: int, synonyms: list, key_def, version: int,
           include_synonyms: bool, include_docs: bool) -> object:
    sensitive = key_def is not None and key_def.type in _SENSITIVE_TYPES
    return ConfigEntry(
        name=name, value=None if sensitive else config_text(value), read_only=False,
        is_default=source == SOURCE_DEFAULT_CONFIG, config_source=source, is_sensitive=sensitive,
        synonyms=synonyms if include_synonyms else [],
        config_type=_CONFIG_TYPE.get(key_def.type, 0) if key_def is not None else 0,
        documentation=key_def.doc if include_docs and key_def is not None else None)


def _topic_configs(state: ServerState, name: str, keys, version: int, include_synonyms: bool,
                   include_docs: bool) -> list:
    info = state.topics.get(name)
    if info is None:
        raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist.")
    effective = state.topics.log_config(name).values
    server = state.config
    entries = []
    for key, key_def in LOG_CONFIG_DEF.keys.items():
        if keys is not None and key not in keys:
            continue
        if key in INTERNAL_KEYS and key not in info.configs:
            continue  # Kafka's internal configs: listed only when the topic sets them
        synonyms = []
        source = SOURCE_DEFAULT_CONFIG
        if key in info.configs:
            synonyms.append(Synonym(name=key, value=info.configs[key], source=SOURCE_TOPIC_CONFIG))
            source = SOURCE_TOPIC_CONFIG
        server_keys = state.topics.server_synonyms(key)
        for skey in server_keys:
            if skey in state.static_keys and skey in server:
                synonyms.append(Synonym(name=skey, value=config_text(server[skey]),
                                        source=SOURCE_STATIC_BROKER_CONFIG))
                if source == SOURCE_DEFAULT_CONFIG:
                    source = SOURCE_STATIC_BROKER_CONFIG
        synonyms.append(Synonym(name=server_keys[0] if server_keys else key,
                                value=config_text(key_def.default), source=SOURCE_DEFAULT_CONFIG))
        value = info.configs[key] if source == SOURCE_TOPIC_CONFIG else effective[key]
        entries.append(_entry(key, value, source, synonyms, key_def, version, include_synonyms, include_docs))
    return entries


def _broker_configs(state: ServerState, name: str, keys, version: int, include_synonyms: bool,
                    include_docs: bool) -> list:
    if name not in ("", str(state.node_id)):
        raise ApiError(ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {state.node_id} but got {name}")
    static = state.static_keys
    entries = []
    for key, key_def in SERVER_CONFIG_DEF.keys.items():
        if keys is not None and key not in keys:
            continue
        value = state.config.get(key, key_def.default)
        source = SOURCE_STATIC_BROKER_CONFIG if key in static else SOURCE_DEFAULT_CONFIG
        shown = (lambda v: None) if key_def.type in _SENSITIVE_TYPES else config_text  # never a secret
        synonyms = [Synonym(name=key, value=shown(value), source=source)]
        if source != SOURCE_DEFAULT_CONFIG:
            synonyms.append(Synonym(name=key, value=shown(key_def.default), source=SOURCE_DEFAULT_CONFIG))
        dynamic = state.dynamic_config
        if dynamic is not None:  # dynamic values first: this broker's, then the cluster default's
            own = dynamic.overrides(str(state.node_id)).get(key) if name else None
            default = dynamic.overrides("").get(key)
            if default is not None:
                synonyms.insert(0, Synonym(name=key, value=default, source=SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG))
            if own is not None:
                synonyms.insert(0, Synonym(name=key, value=own, source=SOURCE_DYNAMIC_BROKER_CONFIG))
            if own is not None or default is not None:
                source = synonyms[0].source
                value = own if own is not None else default
        entries.append(_entry(key, value, source, synonyms, key_def, version, include_synonyms, include_docs))
    return entries


def _group_configs(state: ServerState, name: str, keys, version: int, include_synonyms: bool,
                   include_docs: bool) -> list:
    """A GROUP resource: every key of ``GROUP_CONFIG_KEYS`` (the group need not exist)."""
    from broker.server.group.group_configs import GROUP_CONFIG_KEYS

    store = state.group_configs
    if store is None:
        raise ApiError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {RESOURCE_GROUP}")
    if not name:
        raise ApiError(ErrorCode.INVALID_REQUEST, "Group name can't be empty")
    overrides = store.overrides(name)
    defaults = store.defaults()
    entries = []
    for key, key_def in sorted(GROUP_CONFIG_KEYS.items()):
        if keys is not None and key not in keys:
            continue
        synonyms = []
        source, value = SOURCE_DEFAULT_CONFIG, defaults[key]
        if key in overrides:
            synonyms.append(Synonym(name=key, value=overrides[key], source=SOURCE_GROUP_CONFIG))
            source, value = SOURCE_GROUP_CONFIG, overrides[key]
        broker_key = key_def.broker_key
        if broker_key is not None and broker_key in state.static_keys and broker_key in state.config:
            synonyms.append(Synonym(name=broker_key, value=config_text(state.config[broker_key]),
                                    source=SOURCE_STATIC_BROKER_CONFIG))
            if source == SOURCE_DEFAULT_CONFIG:
                source, value = SOURCE_STATIC_BROKER_CONFIG, state.config[broker_key]
        synonyms.append(Synonym(name=broker_key or key, value=config_text(key_def.default),
                                source=SOURCE_DEFAULT_CONFIG))
        entries.append(_entry(key, value, source, synonyms, key_def, version, include_synonyms, include_docs))
    return entries


def authorize_configs(state: ServerState, ctx: RequestContext, resource_type: int, name: str,
                       op: AclOperation) -> None:
    """Kafka's config authorization: ``op`` (DESCRIBE_CONFIGS / ALTER_CONFIGS) on the topic
    for a topic, on the group for a group (GROUP_AUTHORIZATION_FAILED), on the CLUSTER for
    brokers and client-metrics resources."""
    if resource_type == RESOURCE_TOPIC:
        if not allowed(state, ctx, op, ResourceType.TOPIC, name):
            raise ApiError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
    elif resource_type == RESOURCE_GROUP:
        if not allowed(state, ctx, op, ResourceType.GROUP, name):
            raise ApiError(ErrorCode.GROUP_AUTHORIZATION_FAILED, "Authorization failed.")
    elif not cluster_allowed(state, ctx, op):
        raise ApiError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Authorization failed.")


def handle_describe_configs(state: ServerState, ctx: RequestContext, body) -> object:
    version = ctx.api_version
    include_synonyms = version >= 1 and body.include_synonyms
    include_docs = version >= 3 and body.include_documentation
    results = []
    for r in body.resources:
        keys = None if r.configuration_keys is None else set(r.configuration_keys)
        try:
            authorize_configs(state, ctx, r.resource_type, r.resource_name, AclOperation.DESCRIBE_CONFIGS)
            if r.resource_type == RESOURCE_TOPIC:
                configs = _topic_configs(state, r.resource_name, keys, version, include_synonyms, include_docs)
            elif r.resource_type == RESOURCE_BROKER:
                configs = _broker_configs(state, r.resource_name, keys, version, include_synonyms, include_docs)
            elif r.resource_type == RESOURCE_CLIENT_METRICS and state.client_metrics is not None:
                configs = [ConfigEntry(name=k, value=v, read_only=False, is_default=False,
                                       config_source=SOURCE_CLIENT_METRICS_CONFIG, is_sensitive=False,
                                       synonyms=[], config_type=7 if k != "interval.ms" else 3, documentation=None)
                           for k, v in sorted(state.client_metrics.get(r.resource_name).items())
                           if keys is None or k in keys]
            elif r.resource_type == RESOURCE_GROUP:
                configs = _group_configs(state, r.resource_name, keys, version, include_synonyms, include_docs)
            else:
                raise ApiError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {r.resource_type}")
            results.append(DescribeConfigsResult(error_code=ErrorCode.NONE, error_message=None,
                                                 resource_type=r.resource_type,
                                                 resource_name=r.resource_name, configs=configs))
        except Exception as exc:  # noqa: BLE001 - answered with its code
            code, message = _failure(exc, f"DescribeConfigs {r.resource_name}")
            results.append(DescribeConfigsResult(error_code=code, error_message=message,
                                                 resource_type=r.resource_type,
                                                 resource_name=r.resource_name, configs=[]))
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


def describe_configs_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return DescribeConfigsResponse(throttle_time_ms=0, results=[
        DescribeConfigsResult(error_code=code, error_message=None, resource_type=r.resource_type,
                              resource_name=r.resource_name, configs=[]) for r in body.resources])
