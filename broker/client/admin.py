"""AdminClient: topic and config administration, Kafka's ``Admin`` API in Python spelling.

Owns:

* ``AdminClient(config)``: a blocking client over the client core, driven on the calling
  thread by a ``ConsumerNetworkClient`` (the blocking driver of ``NetworkClient`` +
  ``Metadata``; importing it loads no Arrow code). Operations, each bounded by
  ``timeout_ms`` (default ``default.api.timeout.ms``):

      create_topics([NewTopic(name, num_partitions=-1, replication_factor=-1, configs={})],
                    validate_only=False)                          -> AdminResults[str, None]
      delete_topics(names)                                        -> AdminResults[str, None]
      list_topics(include_internal=False)                         -> sorted list of names
      describe_topics(names)                                      -> AdminResults[str, TopicDescription]
      create_partitions({topic: new_total_count}, validate_only=False) -> AdminResults[str, None]
      describe_configs([ConfigResource], include_synonyms=False)  -> AdminResults[ConfigResource, Config]
      incremental_alter_configs({ConfigResource: [AlterConfigOp]}, validate_only=False)
                                                                  -> AdminResults[ConfigResource, None]
      alter_configs({ConfigResource: {key: value}}, validate_only=False)   (legacy: replaces
                    every override of the resource)               -> AdminResults[ConfigResource, None]

  Consumer groups (Kafka's ``Admin`` group calls; the work is
  ``broker.client.consumer.group_offsets`` and ``broker.client.admin_groups``, over the
  group's coordinator)::

      list_consumer_groups()                                      -> [GroupListing]
      describe_consumer_groups(group_ids)                         -> {group: GroupDescription}
      list_consumer_group_offsets(group, partitions=None)         -> {TopicPartition: offset}
                    (None: every committed offset; else those partitions, None when uncommitted)
      alter_consumer_group_offsets(group, {tp: offset})           -> None (an OffsetCommit with
                    generation -1 and member ""; a group with active members refuses it:
                    KafkaError UNKNOWN_MEMBER_ID saying so)
      delete_consumer_group_offsets(group, partitions)            -> AdminResults[TopicPartition, None]
                    (OffsetDelete; a broker without it: GroupsNotSupportedError)
      delete_consumer_groups(group_ids)                           -> AdminResults[str, None]
      list_offsets({tp: EARLIEST | LATEST | MAX_TIMESTAMP | EARLIEST_LOCAL | LATEST_TIERED | timestamp})
                                                                  -> {tp: OffsetAndTimestamp | None}
      plan_consumer_group_offsets_reset(group, partitions, OffsetResetSpec) -> ResetPlan
      reset_consumer_group_offsets(group, partitions, spec, dry_run=False) -> ResetPlan
                    (refused unless the group is Empty or Dead, as kafka-consumer-groups.sh:
                    KafkaError NON_EMPTY_GROUP "Assignments can only be reset if the group 'g'
                    is inactive, but the current state is Stable.")

  Share groups (KIP-932; the work is ``broker.client.admin_share``, over the group's
  coordinator)::

      list_groups(types=(), states=())                            -> [admin_share.GroupListing]
                    (every group, with its group_type: classic, consumer, share)
      describe_share_groups(group_ids)                            -> {group: ShareGroupDescription}
                    (a group that does not exist: state Dead)
      list_share_group_offsets(group, topics=None)                -> {TopicPartition:
                    SharePartitionOffset(start_offset, leader_epoch, lag)}
      alter_share_group_offsets(group, {tp: offset})              -> AdminResults[TopicPartition, None]
      delete_share_group_offsets(group, topics)                   -> AdminResults[str, None]
      delete_share_groups(group_ids)                              -> AdminResults[str, None]
                    (the offsets calls need a group without members: NON_EMPTY_GROUP's
                    KafkaError; group-level errors raise)

  ACLs (Kafka's ``Admin`` ACL calls; the model and the request builders are
  ``broker.client.admin_acls``; each request goes to the least loaded node)::

      create_acls([AclBinding])                                   -> AdminResults[AclBinding, None]
                    (a binding with an ANY/UNKNOWN/None field is refused here:
                    InvalidRequestError "Operation is ANY." ..., as KafkaAdminClient)
      describe_acls(AclBindingFilter)                             -> [AclBinding] (raises the error)
      delete_acls([AclBindingFilter])                             -> AdminResults[AclBindingFilter,
                    [AclBinding]] (the ACLs each filter deleted)

  A broker without an authorizer answers SecurityDisabledError, a principal without
  ALTER (DESCRIBE for describe_acls) on the cluster ClusterAuthorizationFailedError.

  Transactions (KIP-664; values and builders in ``broker.client.admin_txn``)::

      list_transactions(states=(), producer_ids=(), duration_filter_ms=-1) -> [TransactionListing]
                    (every broker is asked; ``list_transactions_by_broker``: {broker id: [...]})
      describe_transactions(ids)       -> AdminResults[str, TransactionDescription] (to each
                    id's coordinator, FindCoordinator key_type 1)
      describe_producers(partitions, broker_id=None) -> AdminResults[TopicPartition, [ProducerState]]
                    (to the leaders, or to that broker)
      abort_transaction(topic, partition, producer_id, producer_epoch, coordinator_epoch) -> None
                    (WriteTxnMarkers ABORT to the leader; CLUSTER_ACTION where an authorizer runs)

  Keys answered a code of ``admin_txn.RETRIABLE`` are routed and sent again until the deadline.

  CreateTopics, DeleteTopics and CreatePartitions go to the controller named by Metadata
  (PROTOCOL.md 1.2), retried while it answers NOT_CONTROLLER; Metadata and TOPIC config
  requests go to the least loaded node; BROKER config resources to that broker.

* Results: ``AdminResults`` maps each resource to an ``AdminResult`` whose ``result()``
  returns the value or raises the resource's typed error (``TopicAlreadyExistsError``,
  ``UnknownTopicOrPartitionError``, ``InvalidConfigurationError`` ...: subclasses of
  ``KafkaError`` whose message is ``"<Kafka error name>: <broker's error_message>"``);
  ``AdminResults.all()`` returns every value or raises the first error. Failures of the
  whole call (no broker reachable before the deadline, an API the broker lacks) raise at
  once: ``BrokerUnreachableError`` (a ``KafkaTimeoutError``: ``no broker of HOST:PORT
  reachable (connection refused); waited 60000 ms (default.api.timeout.ms)``, the cause
  being the last connection failure's), ``UnsupportedVersionError``. A TLS or SASL
  failure raises its ``AuthenticationError`` at once (not retried).

  The typed errors, the argument and result types (``NewTopic``, ``ConfigResource``,
  ``AlterConfigOp``, ``TopicDescription``, ``Config``/``ConfigEntry``, ``AdminResult(s)``
  ...) and the conversions of response structs into them live in
  ``broker.client.admin_types``; this module re-exports every public name of it, so
  ``from broker.client.admin import NewTopic, TopicAlreadyExistsError`` keeps working.

* ``ADMIN_CONFIG_DEF``: the keys of Kafka's ``AdminClientConfig`` this client reads
  (bootstrap.servers, client.id, request.timeout.ms, default.api.timeout.ms, retries,
  backoffs, socket settings...), with Kafka's defaults; keys may be given with dots or as
  keywords with underscores; unknown keys raise ``ConfigError``.

Topic ids come from Metadata v10+ (asked for up to v12); against a broker that stops at
v8, ``TopicDescription.topic_id`` is None.

Thread-safety: every public method holds one lock, so an ``AdminClient`` may be shared by
threads (calls run one at a time). ``close()`` (also on context-manager exit) closes the
connections; later calls raise ``IllegalStateError``.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from broker.client import admin_acls, admin_groups, admin_quotas, admin_scram, admin_share, admin_txn
from broker.client.admin_acls import AclBinding, AclBindingFilter
from broker.client.admin_groups import OffsetResetSpec, ResetPlan
from broker.client.admin_txn import AbortTransactionSpec, ProducerState, TransactionDescription, TransactionListing
from broker.client.admin_types import (
    AdminResult,
    AdminResults,
    AlterConfigOp,
    AlterConfigOpType,
    ClusterAuthorizationFailedError,
    Config,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    ConfigSynonym,
    InvalidConfigurationError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    NewTopic,
    NotControllerError,
    Outcome,
    PolicyViolationError,
    SecurityDisabledError,
    TopicAlreadyExistsError,
    TopicAuthorizationFailedError,
    TopicDeletionDisabledError,
    TopicDescription,
    TopicPartitionInfo,
    UnknownServerError,
    UnknownTopicOrPartitionError,
    _alter_parse,
    _config,
    _description,
    _key_text,
    _op,
    _resource,
    _topic_error_text,
    admin_error,
)
from broker.client.consumer import group_offsets, offsets
from broker.client.consumer.client import ConsumerNetworkClient
from broker.client.consumer.group_offsets import GroupDescription, GroupListing
from broker.client.consumer.offsets import OffsetAndTimestamp, TopicPartition
from broker.client.errors import (
    BrokerUnreachableError,
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    NetworkError,
    RequestTimedOutError,
    UnsupportedVersionError,
)
from broker.client.network import now_ms
from broker.client.sasl import define_security_keys as define_sasl_keys
from broker.client.ssl_context import define_security_keys
from broker.config import BOOLEAN, INT, LIST, LONG, STRING, ConfigDef, ConfigError, at_least, one_of
from broker.protocol import ApiKey, ErrorCode, request_schema

__all__ = [
    "ADMIN_CONFIG_DEF", "AbortTransactionSpec", "AclBinding", "AclBindingFilter", "AdminClient", "AdminResult",
    "AdminResults", "AlterConfigOp", "AlterConfigOpType",
    "Config", "ConfigEntry", "ConfigResource", "ConfigResourceType", "ConfigSource", "ConfigSynonym",
    "NewTopic", "OffsetResetSpec", "ProducerState", "ResetPlan", "TopicDescription", "TopicPartitionInfo",
    "admin_error",
    "ClusterAuthorizationFailedError", "InvalidConfigurationError", "SecurityDisabledError",
    "InvalidPartitionsError", "InvalidReplicaAssignmentError",
    "InvalidReplicationFactorError", "InvalidRequestError", "InvalidTopicError", "NotControllerError",
    "PolicyViolationError", "TopicAlreadyExistsError", "TopicAuthorizationFailedError",
    "TopicDeletionDisabledError", "TransactionDescription", "TransactionListing", "UnknownServerError",
    "UnknownTopicOrPartitionError",
]

ADMIN_CONFIG_DEF = (
    define_sasl_keys(ConfigDef())
    .define("bootstrap.servers", LIST, ["localhost:9092"], "host:port pairs to bootstrap from.")
    .define("client.id", STRING, "", "Sent in every request header (default adminclient-N).")
    .define("request.timeout.ms", INT, 30000, "Bound of one request round trip.", at_least(0))
    .define("default.api.timeout.ms", INT, 60000, "Bound of one admin call, retries included.",
            at_least(0))
    .define("retries", INT, 2147483647, "Attempts after the first (the deadline bounds them too).",
            at_least(0))
    .define("retry.backoff.ms", LONG, 100, "Wait before retrying a failed request.", at_least(0))
    .define("retry.backoff.max.ms", LONG, 1000, "Cap of the retry backoff.", at_least(0))
    .define("reconnect.backoff.ms", LONG, 50, "Base of the reconnect backoff.", at_least(0))
    .define("reconnect.backoff.max.ms", LONG, 1000, "Cap of the reconnect backoff.", at_least(0))
    .define("socket.connection.setup.timeout.ms", LONG, 10000, "Connect timeout.", at_least(0))
    .define("socket.connection.setup.timeout.max.ms", LONG, 30000, "Accepted; the client uses the "
            "base connect timeout.", at_least(0))
    .define("connections.max.idle.ms", LONG, 300000, "Close idle connections.", at_least(-1))
    .define("send.buffer.bytes", INT, 131072, "SO_SNDBUF (-1: OS default).", at_least(-1))
    .define("receive.buffer.bytes", INT, 65536, "SO_RCVBUF (-1: OS default).", at_least(-1))
    .define("metadata.max.age.ms", LONG, 300000, "Refresh metadata at least this often.", at_least(0))
    .define("client.dns.lookup", STRING, "use_all_dns_ips", "Accepted; the first address is used.",
            one_of("use_all_dns_ips", "resolve_canonical_bootstrap_servers_only"))
    .define("auto.include.jmx.reporter", BOOLEAN, True, "Accepted; no effect.")
)
define_security_keys(ADMIN_CONFIG_DEF)  # ssl.*; widens security.protocol to SSL, SASL_SSL (ssl_context.py)
_ids = itertools.count(1)
# The keys the blocking network driver (ConsumerNetworkClient) takes from this config.
_DRIVER_KEYS = ("bootstrap.servers", "client.id", "request.timeout.ms", "default.api.timeout.ms",
                "retry.backoff.ms", "retry.backoff.max.ms", "reconnect.backoff.ms",
                "reconnect.backoff.max.ms", "socket.connection.setup.timeout.ms",
                "connections.max.idle.ms", "send.buffer.bytes", "receive.buffer.bytes",
                "metadata.max.age.ms", *(k for k in ADMIN_CONFIG_DEF.keys
                                          if k == "security.protocol" or k.startswith(("ssl.", "sasl."))))

# Highest versions this client builds; the broker's range decides (non-flexible and flexible
# bodies are encoded alike by broker.protocol).
_VERSIONS = {
    ApiKey.METADATA: (1, 12), ApiKey.CREATE_TOPICS: (0, 7), ApiKey.DELETE_TOPICS: (0, 6),
    ApiKey.CREATE_PARTITIONS: (0, 3), ApiKey.DESCRIBE_CONFIGS: (1, 4), ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0), ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1), ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    ApiKey.DESCRIBE_ACLS: (0, 3), ApiKey.CREATE_ACLS: (0, 3), ApiKey.DELETE_ACLS: (0, 3),
    ApiKey.FIND_COORDINATOR: admin_txn.FIND_COORDINATOR_VERSIONS, ApiKey.LIST_TRANSACTIONS: (0, 1),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0), ApiKey.DESCRIBE_PRODUCERS: (0, 0), ApiKey.WRITE_TXN_MARKERS: (0, 1),
}


class AdminClient:
    """See the module docstring. ``AdminClient({"bootstrap.servers": "host:9092"})`` or
    ``AdminClient(bootstrap_servers="host:9092", client_id="me")``."""

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        props: dict[str, Any] = {}
        keys = ADMIN_CONFIG_DEF.keys
        for source in (config or {}), {k: v for k, v in kwargs.items() if v is not None}:
            for k, v in source.items():
                name = k if "." in k or k in keys else k.replace("_", ".")
                if name not in keys:
                    raise ConfigError(k, v, "unknown admin client configuration")
                props[name] = v
        values = ADMIN_CONFIG_DEF.parse(props)
        if not values["bootstrap.servers"]:
            raise ConfigError("bootstrap.servers", values["bootstrap.servers"], "at least one host:port is needed")
        values["client.id"] = values["client.id"] or f"adminclient-{next(_ids)}"
        self.config = values
        self.client_id: str = values["client.id"]
        self.bootstrap_servers: list[str] = list(values["bootstrap.servers"])
        self.default_timeout_ms: int = values["default.api.timeout.ms"]
        self.request_timeout_ms: int = values["request.timeout.ms"]
        self.retries: int = values["retries"]
        driver = {key: values[key] for key in _DRIVER_KEYS}
        driver["reconnect.backoff.max.ms"] = max(values["reconnect.backoff.max.ms"], values["reconnect.backoff.ms"])
        driver["retry.backoff.max.ms"] = max(values["retry.backoff.max.ms"], values["retry.backoff.ms"])
        self._client = ConsumerNetworkClient(driver, allow_auto_create_topics=False)
        self._lock = threading.RLock()
        self._closed = False
        self._timeout_ms: float = self.default_timeout_ms  # of the call in progress (messages)

    # -- lifecycle -----------------------------------------------------------------------

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._client.close()

    @property
    def closed(self) -> bool:
        return self._closed

    # -- topics --------------------------------------------------------------------------

    def create_topics(self, new_topics: Iterable[NewTopic], *, validate_only: bool = False,
                      timeout_ms: float | None = None) -> AdminResults:
        topics = {t.name: t for t in new_topics}
        schema_cache: dict[int, Any] = {}

        def build(version: int, names: list[str]) -> Any:
            schema = schema_cache.setdefault(version, request_schema(ApiKey.CREATE_TOPICS, version))
            topic_cls, cfg_cls = schema.structs["CreatableTopic"], schema.structs["CreatableTopicConfig"]
            return schema.cls(topics=[
                topic_cls(name=n, num_partitions=topics[n].num_partitions,
                          replication_factor=topics[n].replication_factor, assignments=[],
                          configs=[cfg_cls(name=k, value=None if v is None else str(v))
                                   for k, v in topics[n].configs.items()]) for n in names],
                timeout_ms=int(self.request_timeout_ms), validate_only=validate_only)

        def parse(body: Any) -> dict[str, Outcome]:
            return {t.name: (t.error_code, t.error_message, None) for t in body.topics}

        return self._call(ApiKey.CREATE_TOPICS, list(topics), build, parse, timeout_ms, to_controller=True)

    def delete_topics(self, names: Iterable[str], *, timeout_ms: float | None = None) -> AdminResults:
        def build(version: int, keys: list[str]) -> Any:
            schema = request_schema(ApiKey.DELETE_TOPICS, version)
            if version >= 6:
                state = schema.structs["DeleteTopicState"]
                return schema.cls(topics=[state(name=n) for n in keys], timeout_ms=int(self.request_timeout_ms))
            return schema.cls(topic_names=list(keys), timeout_ms=int(self.request_timeout_ms))

        def parse(body: Any) -> dict[str, Outcome]:
            return {r.name: (r.error_code, getattr(r, "error_message", None), None) for r in body.responses}

        return self._call(ApiKey.DELETE_TOPICS, list(dict.fromkeys(names)), build, parse, timeout_ms,
                          to_controller=True)

    def list_topics(self, *, include_internal: bool = False, timeout_ms: float | None = None) -> list[str]:
        with self._lock:
            self._check_open()
            body = self._metadata(None, self._deadline(timeout_ms))
        return sorted(t.name for t in body.topics
                      if not t.error_code and (include_internal or not getattr(t, "is_internal", False)))

    def describe_topics(self, names: Iterable[str], *, timeout_ms: float | None = None) -> AdminResults:
        names = list(dict.fromkeys(names))
        results = AdminResults()
        with self._lock:
            self._check_open()
            deadline = self._deadline(timeout_ms)
            pending = list(names)
            attempt = 0
            while pending:
                body = self._metadata(pending, deadline)
                by_name = {t.name: t for t in body.topics}
                retry = []
                for n in pending:
                    t = by_name.get(n)
                    if t is None:
                        results[n] = AdminResult(error=UnknownTopicOrPartitionError(f"Topic '{n}' not in the "
                                                                                    f"Metadata response"))
                    elif t.error_code == ErrorCode.LEADER_NOT_AVAILABLE and now_ms() < deadline:
                        retry.append(n)  # being created
                    elif t.error_code:
                        results[n] = AdminResult(error=admin_error(t.error_code, _topic_error_text(t.error_code, n)))
                    else:
                        results[n] = AdminResult(_description(t))
                pending = retry
                if pending:
                    self._client.sleep(self._client.backoff_ms(attempt), deadline)
                    attempt += 1
        return AdminResults((n, results[n]) for n in names)

    def create_partitions(self, new_counts: Mapping[str, int], *, validate_only: bool = False,
                          timeout_ms: float | None = None) -> AdminResults:
        counts = dict(new_counts)

        def build(version: int, names: list[str]) -> Any:
            schema = request_schema(ApiKey.CREATE_PARTITIONS, version)
            topic_cls = schema.structs["CreatePartitionsTopic"]
            return schema.cls(topics=[topic_cls(name=n, count=int(counts[n]), assignments=None) for n in names],
                              timeout_ms=int(self.request_timeout_ms), validate_only=validate_only)

        def parse(body: Any) -> dict[str, Outcome]:
            return {r.name: (r.error_code, r.error_message, None) for r in body.results}

        return self._call(ApiKey.CREATE_PARTITIONS, list(counts), build, parse, timeout_ms, to_controller=True)

    # -- configs -------------------------------------------------------------------------

    def describe_configs(self, resources: Iterable[ConfigResource], *, include_synonyms: bool = False,
                         include_documentation: bool = False, timeout_ms: float | None = None) -> AdminResults:
        resources = [_resource(r) for r in resources]

        def build(version: int, keys: list[ConfigResource]) -> Any:
            schema = request_schema(ApiKey.DESCRIBE_CONFIGS, version)
            res_cls = schema.structs["DescribeConfigsResource"]
            return schema.cls(resources=[res_cls(resource_type=int(r.type), resource_name=r.name,
                                                 configuration_keys=None) for r in keys],
                              include_synonyms=include_synonyms, include_documentation=include_documentation)

        def parse(body: Any) -> dict[ConfigResource, Outcome]:
            return {_resource((r.resource_type, r.resource_name)): (r.error_code, r.error_message, _config(r))
                    for r in body.results}

        return self._by_node(ApiKey.DESCRIBE_CONFIGS, resources, build, parse, timeout_ms)

    def incremental_alter_configs(self, changes: Mapping[ConfigResource, Iterable[AlterConfigOp]], *,
                                  validate_only: bool = False, timeout_ms: float | None = None) -> AdminResults:
        ops = {_resource(r): [_op(o) for o in v] for r, v in changes.items()}

        def build(version: int, keys: list[ConfigResource]) -> Any:
            schema = request_schema(ApiKey.INCREMENTAL_ALTER_CONFIGS, version)
            res_cls, cfg_cls = schema.structs["AlterConfigsResource"], schema.structs["AlterableConfig"]
            return schema.cls(resources=[res_cls(
                resource_type=int(r.type), resource_name=r.name,
                configs=[cfg_cls(name=o.name, config_operation=int(o.op), value=o.value) for o in ops[r]])
                for r in keys], validate_only=validate_only)

        return self._by_node(ApiKey.INCREMENTAL_ALTER_CONFIGS, list(ops), build, _alter_parse, timeout_ms)

    def alter_configs(self, configs: Mapping[ConfigResource, Mapping[str, str]], *, validate_only: bool = False,
                      timeout_ms: float | None = None) -> AdminResults:
        """Kafka's legacy AlterConfigs: the given keys become the resource's only overrides."""
        values = {_resource(r): dict(v) for r, v in configs.items()}

        def build(version: int, keys: list[ConfigResource]) -> Any:
            schema = request_schema(ApiKey.ALTER_CONFIGS, version)
            res_cls, cfg_cls = schema.structs["AlterConfigsResource"], schema.structs["AlterableConfig"]
            return schema.cls(resources=[res_cls(
                resource_type=int(r.type), resource_name=r.name,
                configs=[cfg_cls(name=k, value=None if v is None else str(v)) for k, v in values[r].items()])
                for r in keys], validate_only=validate_only)

        return self._by_node(ApiKey.ALTER_CONFIGS, list(values), build, _alter_parse, timeout_ms)

    # -- SCRAM credentials (KIP-554; builders in broker.client.admin_scram) ------------

    def describe_user_scram_credentials(self, users: Iterable[str] | None = None, *,
                                        timeout_ms: float | None = None) -> AdminResults:
        """user -> AdminResult({mechanism: iterations}); every user with credentials when
        ``users`` is None (one request either way)."""
        names = list(users or [])
        with self._lock:
            self._check_open()
            body = self._request(None, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
                                 lambda v: admin_scram.build_describe(v, names), self._deadline(timeout_ms))
        found = admin_scram.parse_describe(body)
        if "" in found and found[""][0]:
            raise admin_error(found[""][0], found[""][1])
        return AdminResults((u, AdminResult(mechs) if not code else AdminResult(error=admin_error(code, msg)))
                            for u, (code, msg, mechs) in found.items())

    def alter_user_scram_credentials(self, upsertions: Iterable[admin_scram.ScramCredentialUpsertion] = (),
                                     deletions: Iterable[admin_scram.ScramCredentialDeletion] = (), *,
                                     timeout_ms: float | None = None) -> AdminResults:
        """user -> AdminResult(None) or its error; passwords are sent salted, never as is."""
        ups, dels = list(upsertions), list(deletions)
        with self._lock:
            self._check_open()
            body = self._request(None, ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
                                 lambda v: admin_scram.build_alter(v, ups, dels), self._deadline(timeout_ms))
        return AdminResults((u, AdminResult(None) if not code else AdminResult(error=admin_error(code, msg)))
                            for u, (code, msg) in admin_scram.parse_alter(body).items())

    # -- client quotas (KIP-546; builders in broker.client.admin_quotas) -----------------

    def alter_client_quotas(self, changes: Iterable[tuple[Mapping[str, str | None], Mapping[str, float | None]]],
                            *, validate_only: bool = False, timeout_ms: float | None = None) -> list[Any]:
        """Set (a number) or remove (None) quota keys of each entity; returns, per entity,
        (entity, None) or (entity, its error)."""
        items = [(dict(e), dict(ops)) for e, ops in changes]
        with self._lock:
            self._check_open()
            body = self._request(None, ApiKey.ALTER_CLIENT_QUOTAS,
                                 lambda v: admin_quotas.build_alter(v, items, validate_only),
                                 self._deadline(timeout_ms))
        return [(e, admin_error(code, msg) if code else None) for e, code, msg in admin_quotas.parse_alter(body)]

    def describe_client_quotas(self, components: Iterable[tuple[str, int, str | None]] = (), *, strict: bool = False,
                               timeout_ms: float | None = None) -> list[tuple[dict[str, str | None], dict[str, float]]]:
        """The entities matching the filter ((entity type, admin_quotas.MATCH_*, name)), with
        their quota values."""
        comps = list(components)
        with self._lock:
            self._check_open()
            body = self._request(None, ApiKey.DESCRIBE_CLIENT_QUOTAS,
                                 lambda v: admin_quotas.build_describe(v, comps, strict), self._deadline(timeout_ms))
        code, message, entries = admin_quotas.parse_describe(body)
        if code:
            raise admin_error(code, message)
        return entries

    # -- ACLs (KIP-140; model and builders in broker.client.admin_acls) -----------------

    def create_acls(self, bindings: Iterable[AclBinding], *, timeout_ms: float | None = None) -> AdminResults:
        """binding -> AdminResult(None) or its error (INVALID_REQUEST for one the broker or
        this client refuses)."""
        results: dict[AclBinding, AdminResult] = {}
        send = []
        for b in dict.fromkeys(bindings):
            if not isinstance(b, AclBinding):
                raise TypeError(f"create_acls takes AclBinding values, not {type(b).__name__}")
            indefinite = b.to_filter().find_indefinite_field()
            if indefinite:
                results[b] = AdminResult(error=InvalidRequestError(indefinite))
            else:
                send.append(b)
        if send:
            with self._lock:
                self._check_open()
                body = self._request(None, ApiKey.CREATE_ACLS, lambda v: admin_acls.build_create(v, send),
                                     self._deadline(timeout_ms))
            outcomes = admin_acls.parse_create(body)
            for i, b in enumerate(send):
                code, message = outcomes[i] if i < len(outcomes) else (ErrorCode.UNKNOWN_SERVER_ERROR,
                                                                       "no result in the response")
                results[b] = AdminResult(None) if not code else AdminResult(error=admin_error(code, message))
        return AdminResults((b, results[b]) for b in dict.fromkeys(bindings))

    def describe_acls(self, acl_filter: AclBindingFilter = AclBindingFilter.ANY, *,
                      timeout_ms: float | None = None) -> list[AclBinding]:
        """The ACLs matching the filter; raises the broker's error (SecurityDisabledError,
        ClusterAuthorizationFailedError, InvalidRequestError)."""
        if acl_filter.is_unknown():
            raise InvalidRequestError("The AclBindingFilter must not contain UNKNOWN elements.")
        with self._lock:
            self._check_open()
            body = self._request(None, ApiKey.DESCRIBE_ACLS, lambda v: admin_acls.build_describe(v, acl_filter),
                                 self._deadline(timeout_ms))
        code, message, bindings = admin_acls.parse_describe(body)
        if code:
            raise admin_error(code, message)
        return bindings

    def delete_acls(self, filters: Iterable[AclBindingFilter], *, timeout_ms: float | None = None) -> AdminResults:
        """filter -> AdminResult([the ACLs it deleted]) or its error."""
        flts = list(dict.fromkeys(filters))
        results: dict[AclBindingFilter, AdminResult] = {}
        if flts:
            with self._lock:
                self._check_open()
                body = self._request(None, ApiKey.DELETE_ACLS, lambda v: admin_acls.build_delete(v, flts),
                                     self._deadline(timeout_ms))
            outcomes = admin_acls.parse_delete(body)
            for i, f in enumerate(flts):
                if i >= len(outcomes):
                    results[f] = AdminResult(error=admin_error(ErrorCode.UNKNOWN_SERVER_ERROR,
                                                               "no result in the response"))
                    continue
                code, message, matching = outcomes[i]
                failed = next(((c, m) for c, m, _ in matching if c), None)
                if code or failed:
                    results[f] = AdminResult(error=admin_error(*((code, message) if code else failed)))
                else:
                    results[f] = AdminResult([b for _, _, b in matching])
        return AdminResults((f, results[f]) for f in flts)

    # -- transactions (KIP-664; values and builders in broker.client.admin_txn) ---------

    def list_transactions(self, states: Iterable[str] = (), producer_ids: Iterable[int] = (),
                          duration_filter_ms: int = -1, *, timeout_ms: float | None = None) -> list[TransactionListing]:
        by_broker = self.list_transactions_by_broker(states, producer_ids, duration_filter_ms, timeout_ms=timeout_ms)
        return [t for listings in by_broker.values() for t in listings]

    def list_transactions_by_broker(self, states: Iterable[str] = (), producer_ids: Iterable[int] = (),
                                    duration_filter_ms: int = -1, *,
                                    timeout_ms: float | None = None) -> dict[int, list[TransactionListing]]:
        """ListTransactions to every broker: broker id -> the transactions it coordinates
        (filtered by state name, producer id, running longer than ``duration_filter_ms``)."""
        wanted, pids, out = list(states), list(producer_ids), {}
        with self._lock:
            self._check_open()
            deadline = self._deadline(timeout_ms)
            for node in sorted(b.node_id for b in self._metadata([], deadline).brokers):
                code, _, listings = admin_txn.parse_list(self._request(
                    node, ApiKey.LIST_TRANSACTIONS, lambda v: admin_txn.build_list(v, wanted, pids, duration_filter_ms),
                    deadline))
                if code:
                    raise admin_error(code, f"ListTransactions on broker {node}")
                out[node] = listings
        return out

    def describe_transactions(self, transactional_ids: Iterable[str], *,
                              timeout_ms: float | None = None) -> AdminResults:
        """id -> AdminResult(TransactionDescription) or its error (TRANSACTIONAL_ID_NOT_FOUND...)."""
        return self._routed(ApiKey.DESCRIBE_TRANSACTIONS, list(dict.fromkeys(transactional_ids)),
                            self._txn_coordinators, admin_txn.build_describe, admin_txn.parse_describe, timeout_ms)

    def describe_producers(self, partitions: Iterable[tuple[str, int]], *, broker_id: int | None = None,
                           timeout_ms: float | None = None) -> AdminResults:
        """TopicPartition -> AdminResult([ProducerState]) from the partition's leader (or
        from the replica on ``broker_id``)."""
        tps = list(dict.fromkeys(TopicPartition(*tp) for tp in partitions))
        route = self._leaders if broker_id is None else \
            lambda ks, deadline: admin_txn.broker_routes(self._metadata([], deadline), broker_id, ks)
        return self._routed(ApiKey.DESCRIBE_PRODUCERS, tps, route, admin_txn.build_describe_producers,
                            admin_txn.parse_describe_producers, timeout_ms)

    def abort_transaction(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                          coordinator_epoch: int, *, timeout_ms: float | None = None) -> None:
        """Write an ABORT marker for the producer to the partition's log (raises the error)."""
        spec = admin_txn.abort_spec((topic, partition), producer_id, producer_epoch, coordinator_epoch)
        self._routed(ApiKey.WRITE_TXN_MARKERS, [spec.topic_partition], self._leaders,
                     lambda v, tps: admin_txn.build_abort(v, [spec]), admin_txn.parse_abort, timeout_ms).all()

    # -- consumer groups -----------------------------------------------------------------

    def _groups(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            self._check_open()
            return fn(self._client, *args, **kwargs)

    def list_consumer_groups(self, *, timeout_ms: float | None = None) -> list[GroupListing]:
        return self._groups(group_offsets.list_groups, timeout_ms=timeout_ms)

    def describe_consumer_groups(self, group_ids: Iterable[str], *,
                                 timeout_ms: float | None = None) -> dict[str, GroupDescription]:
        return self._groups(group_offsets.describe_groups, list(group_ids), timeout_ms=timeout_ms)

    def list_consumer_group_offsets(self, group_id: str, partitions: Iterable[tuple[str, int]] | None = None, *,
                                    timeout_ms: float | None = None) -> dict[TopicPartition, int | None]:
        if partitions is None:
            return self._groups(group_offsets.list_group_offsets, group_id, timeout_ms=timeout_ms)
        return self._groups(group_offsets.fetch_committed, group_id, list(partitions), timeout_ms=timeout_ms)

    def alter_consumer_group_offsets(self, group_id: str, new_offsets: Mapping[tuple[str, int], int], *,
                                     timeout_ms: float | None = None) -> None:
        self._groups(group_offsets.commit_offsets, group_id, new_offsets, timeout_ms=timeout_ms)

    def delete_consumer_group_offsets(self, group_id: str, partitions: Iterable[tuple[str, int]], *,
                                      timeout_ms: float | None = None) -> AdminResults:
        errors = self._groups(group_offsets.delete_group_offsets, group_id, list(partitions), timeout_ms=timeout_ms)
        return AdminResults((tp, AdminResult(error=e) if e is not None else AdminResult(None))
                            for tp, e in errors.items())

    def delete_consumer_groups(self, group_ids: Iterable[str], *, timeout_ms: float | None = None) -> AdminResults:
        results = AdminResults()
        for gid in dict.fromkeys(group_ids):
            try:
                self._groups(group_offsets.delete_groups, [gid], timeout_ms=timeout_ms)
                results[gid] = AdminResult(None)
            except group_offsets.GroupsNotSupportedError:
                raise
            except KafkaError as exc:
                results[gid] = AdminResult(error=exc)
        return results

    def list_offsets(self, specs: Mapping[tuple[str, int], int], *, isolation_level: str | int | None = None,
                     timeout_ms: float | None = None) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """ListOffsets: ``offsets.EARLIEST`` (-2), ``LATEST`` (-1), ``MAX_TIMESTAMP`` (-3) or a
        timestamp (ms) per partition; None where no offset answers the spec."""
        return self._groups(offsets.list_offsets, specs, isolation_level=isolation_level, timeout_ms=timeout_ms)

    def plan_consumer_group_offsets_reset(self, group_id: str, partitions: Iterable[tuple[str, int]],
                                          spec: OffsetResetSpec, *, timeout_ms: float | None = None) -> ResetPlan:
        return self._groups(admin_groups.plan_offsets_reset, group_id, list(partitions), spec, timeout_ms=timeout_ms)

    def reset_consumer_group_offsets(self, group_id: str, partitions: Iterable[tuple[str, int]],
                                     spec: OffsetResetSpec, *, dry_run: bool = False,
                                     timeout_ms: float | None = None) -> ResetPlan:
        """Plan, and unless ``dry_run`` commit, the reset of an inactive group's offsets."""
        state = self.describe_consumer_groups([group_id], timeout_ms=timeout_ms)[group_id].state
        if state not in ("Empty", "Dead"):
            raise KafkaError(f"Assignments can only be reset if the group '{group_id}' is inactive, but the "
                             f"current state is {state}.", ErrorCode.NON_EMPTY_GROUP)
        plan = self.plan_consumer_group_offsets_reset(group_id, partitions, spec, timeout_ms=timeout_ms)
        if not dry_run and plan.offsets:
            self.alter_consumer_group_offsets(group_id, plan.offsets, timeout_ms=timeout_ms)
        return plan

    # -- share groups (admin_share) ------------------------------------------------------

    def list_groups(self, *, types: Iterable[str] = (), states: Iterable[str] = (),
                    timeout_ms: float | None = None) -> list[admin_share.GroupListing]:
        return self._groups(admin_share.list_groups, types=list(types), states=list(states), timeout_ms=timeout_ms)

    def describe_share_groups(self, group_ids: Iterable[str], *,
                              timeout_ms: float | None = None) -> dict[str, admin_share.ShareGroupDescription]:
        return self._groups(admin_share.describe_share_groups, list(group_ids), timeout_ms=timeout_ms)

    def list_share_group_offsets(self, group_id: str, topics: Iterable[Any] | None = None, *,
                                 timeout_ms: float | None = None) -> dict[TopicPartition, Any]:
        return self._groups(admin_share.list_share_group_offsets, group_id, None if topics is None else list(topics),
                            timeout_ms=timeout_ms)

    def alter_share_group_offsets(self, group_id: str, new_offsets: Mapping[tuple[str, int], int], *,
                                  timeout_ms: float | None = None) -> AdminResults:
        errors = self._groups(admin_share.alter_share_group_offsets, group_id, new_offsets, timeout_ms=timeout_ms)
        return _per_key(errors)

    def delete_share_group_offsets(self, group_id: str, topics: Iterable[str], *,
                                   timeout_ms: float | None = None) -> AdminResults:
        errors = self._groups(admin_share.delete_share_group_offsets, group_id, list(topics), timeout_ms=timeout_ms)
        return _per_key(errors)

    def delete_share_groups(self, group_ids: Iterable[str], *, timeout_ms: float | None = None) -> AdminResults:
        errors = self._groups(admin_share.delete_share_groups, list(group_ids), timeout_ms=timeout_ms)
        return _per_key(errors)

    # -- the request engine --------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("the admin client is closed")

    def _deadline(self, timeout_ms: float | None) -> float:
        self._timeout_ms = self.default_timeout_ms if timeout_ms is None else timeout_ms
        return self._client.deadline(timeout_ms)  # notes the bound for BrokerUnreachableError

    def _least_loaded(self, deadline: float) -> int:
        try:
            return self._client.least_loaded_node(deadline)
        except BrokerUnreachableError:
            raise
        except KafkaTimeoutError:
            raise KafkaTimeoutError(f"no broker of bootstrap.servers {','.join(self.bootstrap_servers)} "
                                    f"reachable within {self._timeout_ms:g} ms") from None

    def _request(self, node_id: int | None, api_key: ApiKey, build: Callable[[int], Any], deadline: float) -> Any:
        """One request (to ``node_id``, or the least loaded node when None) retried on
        connection failures and request timeouts until ``deadline``; the response body."""
        lo, hi = _VERSIONS[api_key]
        attempt = 0
        last: Exception | None = None
        while True:
            node = self._least_loaded(deadline) if node_id is None else node_id
            try:
                if not self._client.await_ready(node, deadline):
                    raise NetworkError(f"cannot connect to node {node}")
                resp = self._client.wait(self._client.send(node, api_key, build, our_min=lo, our_max=hi),
                                         deadline)
                if resp.error is not None:
                    raise resp.error
                return resp.body
            except UnsupportedVersionError as exc:
                raise UnsupportedVersionError(f"the broker does not support {api_key.name} "
                                              f"v{lo}-{hi}: {exc}") from None
            except BrokerUnreachableError:
                raise
            except (NetworkError, RequestTimedOutError, KafkaTimeoutError) as exc:
                last = exc
            if now_ms() >= deadline or attempt >= self.retries:
                unreachable = self._client.deadline_error("") if now_ms() >= deadline else None
                if isinstance(unreachable, BrokerUnreachableError):
                    raise unreachable
                peer = self._client.metadata.node(node)
                where = f"node {node} ({peer.host}:{peer.port})" if peer is not None else f"node {node}"
                raise KafkaTimeoutError(f"{api_key.name} got no answer from {where} within "
                                        f"{self._timeout_ms:g} ms: {last}")
            self._client.sleep(self._client.backoff_ms(attempt), deadline)
            attempt += 1

    def _metadata(self, names: list[str] | None, deadline: float) -> Any:
        """A Metadata response for ``names`` (None: every topic; []: none, for brokers and
        the controller); never creates topics. Updates the client's metadata."""
        def build(version: int) -> Any:
            schema = request_schema(ApiKey.METADATA, version)
            topic_cls = schema.structs["MetadataRequestTopic"]
            return schema.cls(topics=None if names is None else [topic_cls(name=n) for n in names],
                              allow_auto_topic_creation=False)

        body = self._request(None, ApiKey.METADATA, build, deadline)
        requested = list(names) if names is not None else [t.name for t in body.topics]
        self._client.metadata.update(body, now_ms(), requested)
        return body

    def _controller(self, deadline: float) -> int | None:
        controller = self._metadata([], deadline).controller_id
        return controller if controller is not None and controller >= 0 else None

    def _call(self, api_key: ApiKey, keys: list, build: Callable[[int, list], Any],
              parse: Callable[[Any], dict], timeout_ms: float | None, *, to_controller: bool = False,
              node_id: int | None = None) -> AdminResults:
        """Send ``keys`` in one request; per-key outcomes; keys answered NOT_CONTROLLER are
        sent again (to the new controller) until the deadline."""
        results: dict = {}
        with self._lock:
            self._check_open()
            deadline = self._deadline(timeout_ms)
            pending = list(keys)
            attempt = 0
            while pending:
                node = self._controller(deadline) if to_controller else node_id
                outcomes = parse(self._request(node, api_key, lambda v, ks=tuple(pending): build(v, list(ks)),
                                               deadline))
                retry = []
                for k in pending:
                    code, message, value = outcomes.get(k, (ErrorCode.UNKNOWN_SERVER_ERROR,
                                                            f"no result for {k!r} in the response", None))
                    if code == ErrorCode.NONE:
                        results[k] = AdminResult(value)
                    elif code == ErrorCode.NOT_CONTROLLER and now_ms() < deadline and attempt < self.retries:
                        retry.append(k)
                    else:
                        results[k] = AdminResult(error=admin_error(code, message or _key_text(k)))
                pending = retry
                if pending:
                    self._client.sleep(self._client.backoff_ms(attempt), deadline)
                    attempt += 1
        return AdminResults((k, results[k]) for k in keys)

    def _routed(self, api_key: ApiKey, keys: list, route: Callable[[list, float], dict],
                build: Callable[[int, list], Any], parse: Callable[[Any, int], dict],
                timeout_ms: float | None) -> AdminResults:
        """Each key to the node ``route`` names (a node id, or an ``Outcome`` when none),
        batched per node; keys answered ``admin_txn.RETRIABLE`` are routed and sent again."""
        results: dict = {}
        with self._lock:
            self._check_open()
            deadline = self._deadline(timeout_ms)
            pending, attempt = list(keys), 0
            while pending:
                routes = route(pending, deadline)
                outcomes = {k: r for k, r in routes.items() if not isinstance(r, int)}
                nodes = admin_txn.group_by([k for k in pending if isinstance(routes[k], int)], routes)
                for node, ks in nodes.items():
                    outcomes.update(parse(self._request(node, api_key, lambda v, ks=ks: build(v, ks), deadline), node))
                retry = []
                for k in pending:
                    code, message, value = outcomes.get(k, (ErrorCode.UNKNOWN_SERVER_ERROR, "no result in the "
                                                            f"response for {admin_txn.key_text(k)}", None))
                    if code == ErrorCode.NONE:
                        results[k] = AdminResult(value)
                    elif code in admin_txn.RETRIABLE and now_ms() < deadline and attempt < self.retries:
                        retry.append(k)
                    else:
                        results[k] = AdminResult(error=admin_error(code, message or admin_txn.key_text(k)))
                pending = retry
                if pending:
                    self._client.sleep(self._client.backoff_ms(attempt), deadline)
                    attempt += 1
        return AdminResults((k, results[k]) for k in keys)

    def _txn_coordinators(self, ids: list[str], deadline: float) -> dict:
        """Each transactional id's coordinator (FindCoordinator key_type 1)."""
        known = {b.node_id for b in self._metadata([], deadline).brokers}  # their addresses
        routes: dict = {}
        for tid in ids:
            code, message, (node, host, port) = admin_txn.parse_find_coordinator(self._request(
                None, ApiKey.FIND_COORDINATOR, lambda v, t=tid: admin_txn.build_find_coordinator(v, t), deadline))
            if not code and node not in known:
                self._client.client.add_node(node, host, port)
            routes[tid] = (code, message, None) if code else node
        return routes

    def _leaders(self, partitions: list[TopicPartition], deadline: float) -> dict:
        """Each partition's leader, from a Metadata response of their topics."""
        return admin_txn.leader_routes(self._metadata(sorted({tp.topic for tp in partitions}), deadline), partitions)

    def _by_node(self, api_key: ApiKey, resources: list[ConfigResource], build: Callable[[int, list], Any],
                 parse: Callable[[Any], dict], timeout_ms: float | None) -> AdminResults:
        """Config requests: BROKER resources to their broker, the others to any node."""
        groups: dict[int | None, list[ConfigResource]] = {}
        for r in dict.fromkeys(resources):
            node = None
            if r.type in (ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER) and r.name:
                try:
                    node = int(r.name)
                except ValueError:
                    raise ValueError(f"a {r.type.name} resource is named by a broker id, not {r.name!r}") from None
            groups.setdefault(node, []).append(r)
        results: dict = {}
        for node, group in groups.items():
            if node is not None:
                with self._lock:
                    self._check_open()
                    known = self._metadata([], self._deadline(timeout_ms)).brokers  # their addresses
                if all(b.node_id != node for b in known):
                    for r in group:
                        results[r] = AdminResult(error=KafkaError(f"broker {node} is not in the cluster "
                                                                  f"(brokers: {sorted(b.node_id for b in known)})"))
                    continue
            results.update(self._call(api_key, group, build, parse, timeout_ms, node_id=node))
        return AdminResults((r, results[r]) for r in dict.fromkeys(resources))


def _per_key(errors: Mapping[Any, KafkaError | None]) -> AdminResults:
    """``AdminResults`` of per-key errors (None: done)."""
    return AdminResults((k, AdminResult(error=e) if e is not None else AdminResult(None)) for k, e in errors.items())
