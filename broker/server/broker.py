"""``KafkaBroker``: the broker process's parts, wired and started in order (Kafka's
``KafkaServer`` / ``BrokerServer``).

Owns the lifecycle:

* ``KafkaBroker(props)`` parses the configuration (``broker.server.config.server_config``
  for the broker's keys, each part reading its own through its owner's frozen config
  object; ``LogConfig`` for the topic defaults such as log.segment.bytes) and
  raises ``ConfigError`` naming the server.properties key for anything invalid, before
  touching a file or a socket.
* ``start()``: topic registry (``metadata.TopicRegistry``), producer-id blocks,
  ``LogManager.startup`` (recovery when the clean-shutdown marker is absent), with
  remote.log.storage.system.enable the ``RemoteLogManager`` (tiered storage,
  ``broker.log.remote``: manifests listed, garbage swept, its task on a thread of its own), the SCRAM
  credential store (``broker.server.security.credentials``), the
  registry's reconciliation with the partition directories, the group coordinator's load
  of ``__consumer_offsets`` (``broker.server.group``), the transaction coordinator's load
  of ``__transaction_state`` (``broker.server.txn``), the cluster metadata (quotas,
  client-metrics subscriptions, dynamic broker configs and, with ``authorizer.class.name`` set, the ACLs of the
  built-in authorizer, ``broker.server.security.authorizer``), then the listeners
  (``SocketServer``), whose handler is ``KafkaApis.handle``, wrapped by the SASL gate
  (``broker.server.security.sasl.SaslGate``) when a listener's security protocol is
  SASL_PLAINTEXT or SASL_SSL: the broker accepts connections only once every log is loaded. On
  failure everything started so far is stopped again and the exception propagates.
* ``shutdown()``: stop accepting, wake long-polling fetches, close the connections and
  wait for their threads (no request is mid-append afterwards), then the remote log
  manager's thread is stopped (after a pass under way) and ``LogManager.shutdown``
  (flush, checkpoints, clean-shutdown marker). Idempotent.

Listeners: ``listeners`` with ``listener.security.protocol.map`` (Kafka's default map:
PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL each as its own listener name); SSL and SASL_SSL
listeners get a TLS context from the ``ssl.*`` keys (``listener.name.<l>.ssl.*`` first,
``broker.server.ssl_context``), built in the constructor so a bad key store fails early.
``inter.broker.listener.name`` is accepted (it must name a listener).

Advertised endpoints (Metadata): ``advertised.listeners`` when set, else the listener
itself; a port 0 means the listener's real bound port; an empty or wildcard host means
the address the client connected to (what it can evidently reach).

Thread-safety: ``start``/``shutdown`` are called from one thread (the CLI's main thread
or a test); everything they start is thread-safe as documented in each module.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from broker.config import BrokerConfig, ConfigError, load_properties
from broker.log.config import (
    LOG_CONFIG_DEF,
    SERVER_DEFAULT_KEYS,
    LogConfig,
    topic_defaults_from_server,
    validate_topic_config,
)
from broker.log.manager import LogManager
from broker.log.remote.config import RemoteLogManagerConfig
from broker.log.remote.log_manager import RemoteLogManager
from broker.server.apis import KafkaApis, advertised_versions
from broker.server.cluster_metadata import ClusterMetadataStore
from broker.server.config import server_config
from broker.server.dynamic_config import DynamicBrokerConfig
from broker.server.group import GroupCoordinator
from broker.server.group.group_configs import GroupConfigStore
from broker.server.handlers import ServerState, leader_epoch_of
from broker.server.handlers.fetch import PartitionWatchers
from broker.server.handlers.producer_id import ProducerIdManager
from broker.server.metadata import TopicManager
from broker.server.quota.client_quotas import ClientQuotaStore, QuotaManagers
from broker.server.quota.connection_quotas import ConnectionQuotas
from broker.server.quota.remote_log_quota import RLMQuotaManager
from broker.server.registry import RegistryConfig, SchemaRegistry
from broker.server.security.authorizer import StandardAuthorizer
from broker.server.security.config import AuthorizerConfig
from broker.server.security.credentials import CredentialStore
from broker.server.security.sasl import SaslGate
from broker.server.share.config import ShareConfig
from broker.server.share.coordinator import ShareCoordinator
from broker.server.share.dlq import DeadLetterWriter
from broker.server.share.manager import LOCK_SWEEP_MS, SharePartitionManager
from broker.server.socket_server import Listener, SocketServer, parse_listeners
from broker.server.ssl_context import SSL_PROTOCOLS, PrincipalMapper, listener_ssl_values, server_context
from broker.server.telemetry.client_metrics import ClientMetricsManager, SubscriptionStore
from broker.server.telemetry.config import TelemetryConfig
from broker.server.telemetry.export import TelemetryTopicExporter
from broker.server.telemetry.prometheus import BrokerCollector, BrokerStats, MetricsEndpoint
from broker.server.txn import TransactionCoordinator

log = logging.getLogger(__name__)

_WILDCARD_HOSTS = ("", "0.0.0.0", "::")


def _topic_key_to_server_keys(topic_key: str) -> list[str]:
    return [k for k, v in SERVER_DEFAULT_KEYS.items() if v == topic_key]


def validate_config(props: Mapping[str, Any]) -> dict[str, Any]:
    """The broker's typed config; ConfigError names the server.properties key at fault."""
    config = server_config(props)
    core = BrokerConfig.from_config(config)
    try:
        listeners = parse_listeners(list(core.listeners), core.protocol_map())
    except ValueError as exc:
        raise ConfigError("listeners", ",".join(core.listeners), str(exc)) from None
    names = {listener.name for listener in listeners}
    if core.advertised_listeners:
        any_name = {item.split("://", 1)[0].upper(): "PLAINTEXT" for item in core.advertised_listeners}
        for adv in parse_listeners(list(core.advertised_listeners), any_name):  # names checked here:
            if adv.name not in names:
                raise ConfigError("advertised.listeners", ",".join(core.advertised_listeners),
                                  f"listener {adv.name} is not in listeners")
    inter = core.inter_broker_listener_name
    if inter and inter.upper() not in names:
        raise ConfigError("inter.broker.listener.name", inter, f"listener {inter} is not in listeners")
    try:
        topic_defaults = topic_defaults_from_server(config)
        validate_topic_config(LogConfig.from_props(defaults=topic_defaults), topic_defaults)
    except ConfigError as exc:
        server_keys = [k for k in _topic_key_to_server_keys(exc.key) if k in props]
        if exc.key in ("retention.ms", "segment.ms"):
            server_keys += [k for k in ("log.retention.minutes", "log.retention.hours", "log.roll.hours")
                            if k in props]
        key = server_keys[0] if server_keys else exc.key
        raise ConfigError(key, props.get(key, exc.value), str(exc).split(": ", 1)[-1]) from None
    except (ValueError, TypeError):  # log.retention.hours=abc
        for key in ("log.retention.minutes", "log.retention.hours", "log.roll.hours"):
            if key in props:
                try:
                    int(props[key])
                except (TypeError, ValueError):
                    raise ConfigError(key, props[key], "Expected value to be a long") from None
        raise
    remote = RemoteLogManagerConfig.from_config(config)
    if remote.enabled:
        prefix = remote.storage_manager_prefix
        if not config.get(prefix + "storage.uri") and not config.get(prefix + "dir"):
            raise ConfigError(prefix + "storage.uri", None,
                              "remote.log.storage.system.enable=true needs the remote storage location "
                              f"({prefix}storage.uri, or {prefix}dir as for Kafka's LocalTieredStorage)")
    for key in props:
        if key in LOG_CONFIG_DEF.keys and key not in SERVER_DEFAULT_KEYS and key not in config:
            log.warning("%s is a topic-level key; in server.properties use its log.* form", key)
    return config


class KafkaBroker:
    """A single-node Kafka-compatible broker (lifecycle in the module docstring)."""

    def __init__(self, props: Mapping[str, Any]) -> None:
        self.props = dict(props)
        self.config = validate_config(self.props)
        # each part's settings, read once (ConfigError naming a bad key came from validate_config)
        self.core = BrokerConfig.from_config(self.config)
        self.remote_config = RemoteLogManagerConfig.from_config(self.config)
        self.authorizer_config = AuthorizerConfig.from_config(self.config)
        self.telemetry_config = TelemetryConfig.from_config(self.config)
        self.node_id = self.core.node_id
        protocol_map = self.core.protocol_map()
        self.listeners = parse_listeners(list(self.core.listeners), protocol_map)
        self.advertised = {adv.name: adv for adv in parse_listeners(list(self.core.advertised_listeners),
                                                                    protocol_map)}
        # TLS contexts are built here, so a bad key store or password fails before any file
        # or socket is touched, with a ConfigError naming the key.
        self.tls = {li.name: self._tls_for(li) for li in self.listeners if li.security_protocol in SSL_PROTOCOLS}
        self.log_manager: LogManager | None = None
        self.remote_log_manager: RemoteLogManager | None = None
        self.topics: TopicManager | None = None
        self.socket_server: SocketServer | None = None
        self.apis: KafkaApis | None = None
        self.group_coordinator: GroupCoordinator | None = None
        self.txn_coordinator: TransactionCoordinator | None = None
        self.share_coordinator: ShareCoordinator | None = None
        self.share_manager: SharePartitionManager | None = None
        self.group_configs: GroupConfigStore | None = None
        self.credentials: CredentialStore | None = None
        # SASL listeners (validated here: a bad mechanism or JAAS config fails the constructor)
        gate = SaslGate(self.config, [listener.name for listener in self.listeners])
        self.sasl_gate: SaslGate | None = gate if gate.enabled else None
        self.cluster_metadata: ClusterMetadataStore | None = None
        self.quotas: QuotaManagers | None = None
        self.client_quotas: ClientQuotaStore | None = None
        self.telemetry: ClientMetricsManager | None = None
        self.stats: BrokerStats | None = None
        self.metrics_endpoint: MetricsEndpoint | None = None
        self.registry_config = RegistryConfig.from_config(self.config)
        self.schema_registry: SchemaRegistry | None = None
        self.client_metrics: SubscriptionStore | None = None
        self.authorizer: StandardAuthorizer | None = None
        self.dynamic_config: DynamicBrokerConfig | None = None
        self.watchers = PartitionWatchers()
        self._started = False
        self._logs_started = False
        self._stopped = threading.Event()
        self._shutdown_lock = threading.Lock()

    def _tls_for(self, listener: Listener) -> tuple[Any, PrincipalMapper]:
        values = listener_ssl_values(self.config, self.props, listener.name, listener.security_protocol)
        context = server_context(values, listener.name)
        return context, PrincipalMapper(values.get("ssl.principal.mapping.rules") or "DEFAULT")

    @classmethod
    def from_properties_file(cls, path: str | Path | None, overrides: Mapping[str, str] | None = None) -> KafkaBroker:
        props = load_properties(path) if path is not None else {}
        props.update(overrides or {})
        return cls(props)

    # --- lifecycle ---

    def start(self) -> None:
        if self._started:
            return
        self._started = True
        config = self.config
        core = self.core
        try:
            log_manager = LogManager.from_server_config(config, topic_configs=self._topic_config)
            self.log_manager = log_manager
            topics = TopicManager(log_manager, config)
            self.topics = topics
            topics.load()
            producer_ids = ProducerIdManager(log_manager.log_dirs, lambda: log_manager.live_log_dirs)
            producer_ids.load()
            credentials = CredentialStore(log_manager.log_dirs, lambda: log_manager.live_log_dirs)
            self.credentials = credentials
            credentials.load()
            log_manager.startup()
            self._logs_started = True
            if self.remote_config.enabled:
                # tiered storage: manifests listed and garbage swept before any request
                remote_log_manager = RemoteLogManager.from_server_config(
                    config, log_manager.all_logs, copy_quota=RLMQuotaManager.from_config(self.remote_config, "copy"),
                    fetch_quota=RLMQuotaManager.from_config(self.remote_config, "fetch"))
                self.remote_log_manager = remote_log_manager
                log_manager.remote_log_manager = remote_log_manager
                remote_log_manager.startup(dedicated_thread=True)
            topics.startup()
            group_coordinator = GroupCoordinator(topics, config, scheduler=log_manager.scheduler,
                                                 on_append=self.watchers.notify)
            self.group_coordinator = group_coordinator
            group_coordinator.startup()  # loads __consumer_offsets before any connection
            share_coordinator = ShareCoordinator(topics, config, scheduler=log_manager.scheduler,
                                                 on_append=self.watchers.notify)
            self.share_coordinator = share_coordinator
            share_coordinator.startup()  # loads __share_group_state
            share_manager = SharePartitionManager(topics, share_coordinator, ShareConfig.from_config(config),
                                                  is_member=group_coordinator.is_share_member,
                                                  leader_epoch=leader_epoch_of)
            self.share_manager = share_manager
            share_manager.notify = self.watchers.notify
            share_manager.dead_letters = DeadLetterWriter(topics, leader_epoch_of, self.watchers.notify)
            share_manager.schedule = share_coordinator.runtime.timer.schedule_once
            group_coordinator.share.on_member_removed = share_manager.release_member
            group_coordinator.on_share_group_deleted = share_manager.forget_group
            share_coordinator.runtime.timer.schedule_periodic("share-acquisition-lock-timeout",
                                                              share_manager.expire_locks, LOCK_SWEEP_MS)
            txn_coordinator = TransactionCoordinator(
                topics, config, producer_ids, group_coordinator,
                scheduler=log_manager.scheduler, on_append=self.watchers.notify)
            self.txn_coordinator = txn_coordinator
            txn_coordinator.startup()  # loads __transaction_state, completes Prepare* transactions
            cluster_metadata = ClusterMetadataStore(log_manager.log_dirs, self.node_id,
                                                    lambda: log_manager.live_log_dirs)
            self.cluster_metadata = cluster_metadata
            cluster_metadata.load()
            group_configs = GroupConfigStore(cluster_metadata, config)
            group_configs.load()
            self.group_configs = group_configs
            share_manager.group_config = group_configs.get
            group_coordinator.share.group_config = group_configs.get
            dynamic_config = DynamicBrokerConfig(cluster_metadata, config, self.node_id)
            self.dynamic_config = dynamic_config
            dynamic_config.load()
            if self.remote_log_manager is not None:  # KIP-956's byte rates are dynamic
                dynamic_config.remote_quotas = {"copy": self.remote_log_manager.copy_quota,
                                                "fetch": self.remote_log_manager.fetch_quota}
            quotas = QuotaManagers(config)
            self.quotas = quotas
            client_quotas = ClientQuotaStore(cluster_metadata, quotas)
            self.client_quotas = client_quotas
            client_quotas.load()
            quotas.start()
            telemetry = ClientMetricsManager(telemetry_max_bytes=self.telemetry_config.max_bytes)
            if self.telemetry_config.export_topic:
                telemetry.on_push = TelemetryTopicExporter(topics, self.telemetry_config.export_topic,
                                                           self.watchers.notify).export
            self.telemetry = telemetry
            client_metrics = SubscriptionStore(cluster_metadata, telemetry)
            self.client_metrics = client_metrics
            client_metrics.load()
            if self.authorizer_config.enabled:
                authorizer = StandardAuthorizer(self.authorizer_config, cluster_metadata)
                self.authorizer = authorizer
                authorizer.load()
            if self.registry_config.enabled:
                self.schema_registry = self._schema_registry(topics, credentials, log_manager)
                self.schema_registry.startup()  # loads _schemas, then opens its HTTP listeners
            stats = BrokerStats()
            self.stats = stats
            state = ServerState(
                node_id=self.node_id, config=config, topics=topics, log_manager=log_manager,
                producer_ids=producer_ids, watchers=self.watchers,
                advertised_endpoint=self.advertised_endpoint, cluster_id=log_manager.cluster_id,
                static_keys=frozenset(self.props), group_coordinator=group_coordinator,
                credentials=credentials, quotas=quotas, client_quotas=client_quotas,
                telemetry=telemetry, client_metrics=client_metrics, stats=stats,
                txn_coordinator=txn_coordinator, authorizer=self.authorizer,
                dynamic_config=dynamic_config, share_manager=share_manager, group_configs=group_configs,
                protected_topics=frozenset({self.schema_registry.protected_topic}) if self.schema_registry else
                frozenset())
            if self.sasl_gate is not None:
                state.api_versions = advertised_versions(sasl=True)
            apis = KafkaApis(state)
            self.apis = apis
            # The SASL hook: on a broker with a SASL listener every frame passes the gate.
            handler: Callable[[Any, memoryview], Any] = apis.handle
            if self.sasl_gate is not None:
                handler = self.sasl_gate.wrap(apis.handle, credentials)
            connection_quotas = ConnectionQuotas(
                config, quotas.metrics, [listener.name for listener in self.listeners],
                protected_listener=(core.inter_broker_listener_name or "").upper() or None,
                ip_rate=quotas.ip_connection_rate)
            socket_server = SocketServer(
                self.listeners, handler,
                max_request_bytes=core.socket_request_max_bytes,
                queued_max_requests=core.queued_max_requests,
                send_buffer_bytes=core.socket_send_buffer_bytes,
                receive_buffer_bytes=core.socket_receive_buffer_bytes,
                connections_max_idle_ms=core.connections_max_idle_ms, tls=self.tls,
                initial_frame_limits=self.sasl_gate.initial_frame_limits() if self.sasl_gate is not None else None,
                connection_quotas=connection_quotas)
            self.socket_server = socket_server
            dynamic_config.connection_quotas = connection_quotas
            dynamic_config.apply()  # dynamic limits stored earlier hold from the first connection
            socket_server.startup()
            metrics_port = self.telemetry_config.metrics_port
            if metrics_port is not None:
                collector = BrokerCollector(stats, connections=lambda: socket_server.connection_count,
                                            logs=log_manager.all_logs, quotas=quotas,
                                            telemetry=telemetry, remote=lambda: self.remote_log_manager)
                self.metrics_endpoint = MetricsEndpoint(collector, self.telemetry_config.metrics_host, metrics_port)
        except BaseException:
            self.shutdown()
            raise
        log.info("[KafkaServer id=%d] started, listening on %s", self.node_id, self.listener_urls())

    def _schema_registry(self, topics: TopicManager, credentials: CredentialStore,
                         log_manager: LogManager) -> SchemaRegistry:
        """The Schema Registry: HTTP Basic against the SASL listeners' PLAIN users and the
        SCRAM credentials when ``schema.registry.authentication.method`` is BASIC (its
        default on a broker with a SASL listener); HTTPS from the broker's key store."""
        method = self.registry_config.authentication
        gate = self.sasl_gate
        if method is None:
            method = "BASIC" if gate is not None else "NONE"
        plain: dict[str, str] = {}
        for listener in (gate.listeners.values() if gate is not None else ()):
            plain.update(listener.plain_users)

        def tls() -> Any:
            values = listener_ssl_values(self.config, self.props, "SCHEMA_REGISTRY", "SSL")
            if not values.get("ssl.keystore.location") and not values.get("ssl.keystore.key"):
                return None
            return server_context(values, "SCHEMA_REGISTRY")

        return SchemaRegistry(self.registry_config, topics, self.config, authenticate=method == "BASIC",
                              plain_users=plain, scram=credentials, authorizer=self.authorizer, tls=tls,
                              scheduler=log_manager.scheduler, on_append=self.watchers.notify)

    @property
    def schema_registry_url(self) -> str | None:
        """The registry's first listener URL (None: no registry)."""
        if self.schema_registry is None or not self.schema_registry.listeners:
            return None
        return self.schema_registry.listeners[0].url

    def _topic_config(self, topic: str) -> LogConfig | None:
        return self.topics.log_config(topic) if self.topics is not None else None

    def shutdown(self) -> None:
        with self._shutdown_lock:
            if self._stopped.is_set():
                return
            log.info("[KafkaServer id=%d] shutting down", self.node_id)
            if self.socket_server is not None:
                self.socket_server.stop_accepting()
            self.watchers.close()
            if self.group_coordinator is not None:
                self.group_coordinator.shutdown()  # answers the JoinGroup / SyncGroup requests waiting
            if self.socket_server is not None:
                self.socket_server.shutdown()
            if self.group_coordinator is not None:
                self.group_coordinator.shutdown()
            if self.txn_coordinator is not None:
                self.txn_coordinator.shutdown()
            if self.share_coordinator is not None:
                self.share_coordinator.shutdown()
            if self.metrics_endpoint is not None:
                self.metrics_endpoint.close()
            if self.schema_registry is not None:
                self.schema_registry.shutdown()
            if self.quotas is not None:
                self.quotas.shutdown()  # releases every throttled channel
            if self.remote_log_manager is not None:
                self.remote_log_manager.close()
            if self._logs_started and self.log_manager is not None:  # no clean-shutdown markers after a failed start
                self.log_manager.shutdown()
            self._stopped.set()
            log.info("[KafkaServer id=%d] shut down completed", self.node_id)

    def wait_for_shutdown(self, timeout: float | None = None) -> bool:
        return self._stopped.wait(timeout)

    def __enter__(self) -> KafkaBroker:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # --- addresses ---

    def _socket_server(self) -> SocketServer:
        if self.socket_server is None:
            raise RuntimeError("the broker is not started")
        return self.socket_server

    def bound_address(self, listener: str | None = None) -> tuple[str, int]:
        """(host, port) the listener (default: the first) is bound to."""
        name = listener or self.listeners[0].name
        return self._socket_server().bound_address(name)

    @property
    def bootstrap_servers(self) -> str:
        """host:port of the first listener, for clients (a wildcard host becomes localhost)."""
        host, port = self.bound_address()
        if host in _WILDCARD_HOSTS:
            host = "localhost"
        if ":" in host:
            host = f"[{host}]"
        return f"{host}:{port}"

    def listener_urls(self) -> str:
        out = []
        for listener in self.listeners:
            host, port = self._socket_server().bound_address(listener.name)
            shown = listener.host or host
            if ":" in shown:
                shown = f"[{shown}]"
            out.append(f"{listener.name}://{shown}:{port}")
        return ",".join(out)

    def advertised_endpoint(self, listener: str, local_address: tuple) -> tuple[str, int]:
        """The (host, port) Metadata gives clients that came in on ``listener``."""
        bound_host, bound_port = self._socket_server().bound_address(listener)
        adv = self.advertised.get(listener)
        if adv is not None:
            host = adv.host
            port = adv.port or bound_port
        else:
            own = next(li for li in self.listeners if li.name == listener)
            host, port = own.host, bound_port
        if host in _WILDCARD_HOSTS:
            host = local_address[0] if local_address else bound_host
        return host, port
