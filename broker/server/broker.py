"""``KafkaBroker``: the broker process's parts, wired and started in order (Kafka's
``KafkaServer`` / ``BrokerServer``).

Owns the lifecycle:

* ``KafkaBroker(props)`` parses the configuration (``broker.config.server_config`` for
  the broker's keys, ``LogConfig`` for the topic defaults such as log.segment.bytes) and
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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from broker.config import ConfigError, parse_protocol_map, server_config
from broker.log.config import (
    LOG_CONFIG_DEF,
    SERVER_DEFAULT_KEYS,
    LogConfig,
    topic_defaults_from_server,
    validate_topic_config,
)
from broker.log.manager import LogManager
from broker.log.remote.log_manager import RemoteLogManager
from broker.server.apis import KafkaApis, advertised_versions
from broker.server.cluster_metadata import ClusterMetadataStore
from broker.server.dynamic_config import DynamicBrokerConfig
from broker.server.group import GroupCoordinator
from broker.server.handlers import ServerState
from broker.server.handlers.fetch import PartitionWatchers
from broker.server.handlers.producer_id import ProducerIdManager
from broker.server.metadata import TopicManager
from broker.server.quota.client_quotas import ClientQuotaStore, QuotaManagers
from broker.server.quota.connection_quotas import ConnectionQuotas
from broker.server.quota.remote_log_quota import RLMQuotaManager
from broker.server.security.authorizer import StandardAuthorizer
from broker.server.security.credentials import CredentialStore
from broker.server.security.sasl import SaslGate
from broker.server.socket_server import Listener, SocketServer, parse_listeners
from broker.server.ssl_context import SSL_PROTOCOLS, PrincipalMapper, listener_ssl_values, server_context
from broker.server.telemetry.client_metrics import ClientMetricsManager, SubscriptionStore
from broker.server.telemetry.prometheus import BrokerCollector, BrokerStats, MetricsEndpoint
from broker.server.txn import TransactionCoordinator

log = logging.getLogger(__name__)

_WILDCARD_HOSTS = ("", "0.0.0.0", "::")


def _topic_key_to_server_keys(topic_key: str) -> list[str]:
    return [k for k, v in SERVER_DEFAULT_KEYS.items() if v == topic_key]


def validate_config(props: Mapping[str, Any]) -> dict[str, Any]:
    """The broker's typed config; ConfigError names the server.properties key at fault."""
    config = server_config(props)
    protocol_map = parse_protocol_map(config["listener.security.protocol.map"])
    try:
        listeners = parse_listeners(config["listeners"], protocol_map)
    except ValueError as exc:
        raise ConfigError("listeners", ",".join(config["listeners"]), str(exc)) from None
    names = {listener.name for listener in listeners}
    if config.get("advertised.listeners"):
        any_name = {item.split("://", 1)[0].upper(): "PLAINTEXT" for item in config["advertised.listeners"]}
        for adv in parse_listeners(config["advertised.listeners"], any_name):  # names checked here:
            if adv.name not in names:
                raise ConfigError("advertised.listeners", ",".join(config["advertised.listeners"]),
                                  f"listener {adv.name} is not in listeners")
    inter = config.get("inter.broker.listener.name")
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
    if config.get("remote.log.storage.system.enable"):
        prefix = config.get("remote.log.storage.manager.impl.prefix") or "rsm.config."
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
        self.node_id = int(self.config["node.id"])
        protocol_map = parse_protocol_map(self.config["listener.security.protocol.map"])
        self.listeners = parse_listeners(self.config["listeners"], protocol_map)
        self.advertised = {adv.name: adv for adv in parse_listeners(self.config.get("advertised.listeners") or [],
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
        from broker.config import load_properties

        props = load_properties(path) if path is not None else {}
        props.update(overrides or {})
        return cls(props)

    # --- lifecycle ---

    def start(self) -> None:
        if self._started:
            return
        self._started = True
        config = self.config
        try:
            self.log_manager = LogManager.from_server_config(config, topic_configs=self._topic_config)
            self.topics = TopicManager(self.log_manager, config)
            self.topics.load()
            producer_ids = ProducerIdManager(self.log_manager.log_dirs, lambda: self.log_manager.live_log_dirs)
            producer_ids.load()
            self.credentials = CredentialStore(self.log_manager.log_dirs, lambda: self.log_manager.live_log_dirs)
            self.credentials.load()
            self.log_manager.startup()
            self._logs_started = True
            if config.get("remote.log.storage.system.enable"):
                # tiered storage: manifests listed and garbage swept before any request
                self.remote_log_manager = RemoteLogManager.from_server_config(
                    config, self.log_manager.all_logs, copy_quota=RLMQuotaManager.from_config(config, "copy"),
                    fetch_quota=RLMQuotaManager.from_config(config, "fetch"))
                self.log_manager.remote_log_manager = self.remote_log_manager
                self.remote_log_manager.startup(dedicated_thread=True)
            self.topics.startup()
            self.group_coordinator = GroupCoordinator(self.topics, config, scheduler=self.log_manager.scheduler,
                                                      on_append=self.watchers.notify)
            self.group_coordinator.startup()  # loads __consumer_offsets before any connection
            self.txn_coordinator = TransactionCoordinator(
                self.topics, config, producer_ids, self.group_coordinator,
                scheduler=self.log_manager.scheduler, on_append=self.watchers.notify)
            self.txn_coordinator.startup()  # loads __transaction_state, completes Prepare* transactions
            self.cluster_metadata = ClusterMetadataStore(self.log_manager.log_dirs, self.node_id,
                                                         lambda: self.log_manager.live_log_dirs)
            self.cluster_metadata.load()
            self.dynamic_config = DynamicBrokerConfig(self.cluster_metadata, config, self.node_id)
            self.dynamic_config.load()
            if self.remote_log_manager is not None:  # KIP-956's byte rates are dynamic
                self.dynamic_config.remote_quotas = {"copy": self.remote_log_manager.copy_quota,
                                                     "fetch": self.remote_log_manager.fetch_quota}
            self.quotas = QuotaManagers(config)
            self.client_quotas = ClientQuotaStore(self.cluster_metadata, self.quotas)
            self.client_quotas.load()
            self.quotas.start()
            self.telemetry = ClientMetricsManager(telemetry_max_bytes=config["telemetry.max.bytes"])
            self.client_metrics = SubscriptionStore(self.cluster_metadata, self.telemetry)
            self.client_metrics.load()
            if config.get("authorizer.class.name"):
                self.authorizer = StandardAuthorizer(config, self.cluster_metadata)
                self.authorizer.load()
            self.stats = BrokerStats()
            state = ServerState(
                node_id=self.node_id, config=config, topics=self.topics, log_manager=self.log_manager,
                producer_ids=producer_ids, watchers=self.watchers,
                advertised_endpoint=self.advertised_endpoint, cluster_id=self.log_manager.cluster_id,
                static_keys=frozenset(self.props), group_coordinator=self.group_coordinator,
                credentials=self.credentials, quotas=self.quotas, client_quotas=self.client_quotas,
                telemetry=self.telemetry, client_metrics=self.client_metrics, stats=self.stats,
                txn_coordinator=self.txn_coordinator, authorizer=self.authorizer,
                dynamic_config=self.dynamic_config)
            if self.sasl_gate is not None:
                state.api_versions = advertised_versions(sasl=True)
            self.apis = KafkaApis(state)
            # The SASL hook: on a broker with a SASL listener every frame passes the gate.
            handler = self.apis.handle
            if self.sasl_gate is not None:
                handler = self.sasl_gate.wrap(self.apis.handle, self.credentials)
            connection_quotas = ConnectionQuotas(
                config, self.quotas.metrics, [listener.name for listener in self.listeners],
                protected_listener=(config.get("inter.broker.listener.name") or "").upper() or None,
                ip_rate=self.quotas.ip_connection_rate)
            self.socket_server = SocketServer(
                self.listeners, handler,
                max_request_bytes=config["socket.request.max.bytes"],
                queued_max_requests=config["queued.max.requests"],
                send_buffer_bytes=config["socket.send.buffer.bytes"],
                receive_buffer_bytes=config["socket.receive.buffer.bytes"],
                connections_max_idle_ms=config["connections.max.idle.ms"], tls=self.tls,
                initial_frame_limits=self.sasl_gate.initial_frame_limits() if self.sasl_gate is not None else None,
                connection_quotas=connection_quotas)
            self.dynamic_config.connection_quotas = connection_quotas
            self.dynamic_config.apply()  # dynamic limits stored earlier hold from the first connection
            self.socket_server.startup()
            if config.get("kafkalog.metrics.port") is not None:
                collector = BrokerCollector(self.stats, connections=lambda: self.socket_server.connection_count,
                                            logs=self.log_manager.all_logs, quotas=self.quotas,
                                            telemetry=self.telemetry, remote=lambda: self.remote_log_manager)
                self.metrics_endpoint = MetricsEndpoint(collector, config["kafkalog.metrics.host"],
                                                        int(config["kafkalog.metrics.port"]))
        except BaseException:
            self.shutdown()
            raise
        log.info("[KafkaServer id=%d] started, listening on %s", self.node_id, self.listener_urls())

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
            if self.metrics_endpoint is not None:
                self.metrics_endpoint.close()
            if self.quotas is not None:
                self.quotas.shutdown()  # releases every throttled channel
            if self.remote_log_manager is not None:
                self.remote_log_manager.close()
            if self._logs_started:  # a failed startup must not write clean-shutdown markers
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

    def bound_address(self, listener: str | None = None) -> tuple[str, int]:
        """(host, port) the listener (default: the first) is bound to."""
        name = listener or self.listeners[0].name
        return self.socket_server.bound_address(name)

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
            host, port = self.socket_server.bound_address(listener.name)
            shown = listener.host or host
            if ":" in shown:
                shown = f"[{shown}]"
            out.append(f"{listener.name}://{shown}:{port}")
        return ",".join(out)

    def advertised_endpoint(self, listener: str, local_address: tuple) -> tuple[str, int]:
        """The (host, port) Metadata gives clients that came in on ``listener``."""
        bound_host, bound_port = self.socket_server.bound_address(listener)
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
