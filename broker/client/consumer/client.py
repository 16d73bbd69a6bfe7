"""ConsumerNetworkClient: the consumer side's blocking use of NetworkClient and Metadata.

Owns, as Kafka's ``ConsumerNetworkClient``: one ``NetworkClient`` (with its
``MetadataUpdater``) and one ``Metadata``, built from a ``ConsumerConfig``, driven by the
calling thread itself (there is no background thread: every method below polls the
network until its answer is in or its deadline passes). On top of the NetworkClient it
adds what request/response flows need:

* ``send(node, api_key, body) -> RequestFuture`` and ``wait(future, deadline)``: a request
  is sent at once and its future completes inside a later poll; several may be in flight
  (the fetcher keeps one Fetch ahead of its decoder this way).
* ``await_ready(node, deadline)``: connect (ApiVersions included) or report that the
  attempt failed, so that callers can refresh the metadata and pick another leader.
* ``await_metadata_update(deadline)``: one Metadata refresh of the topics registered with
  ``metadata.add_topic`` (the ``MetadataUpdater`` sends it from inside ``poll``).
* ``describe_topics(topics | None, deadline)``: a Metadata request of its own for the
  named topics, or all of them (topic listing for subscribe / subscribePattern), whose
  answer also updates ``metadata``.
* ``sleep(ms)``: a retry backoff that keeps polling (connections and metadata progress).

Deadlines are absolute ``now_ms()`` values (``deadline(timeout_ms, config)`` also notes
the bound and the setting it comes from); a passed deadline raises ``KafkaTimeoutError``,
or, when no broker could be connected to (``NetworkClient.unreachable_cause``), its
subclass ``BrokerUnreachableError``: ``no broker of HOST:PORT reachable (connection
refused); waited 60000 ms (default.api.timeout.ms)`` (``deadline_error``). With
``security.protocol=SSL`` the NetworkClient speaks TLS (``broker.client.ssl_context``); a
failed handshake makes the next ``poll`` raise its ``SslAuthenticationError`` (not
retried). A
connection lost with a request in flight completes that request with ``NetworkError``
(retriable): retry policy belongs to the callers (offsets.py, fetcher.py), which know what
a retry means for them.

Thread-safety: none. A ConsumerNetworkClient belongs to the one thread that calls it
(a Spark task, the driver's planning thread), like Kafka's KafkaConsumer.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import Any

from broker.client.errors import BrokerUnreachableError, KafkaError, KafkaTimeoutError, NetworkError
from broker.client.metadata import Cluster, Metadata, MetadataUpdater
from broker.client.network import ClientResponse, NetworkClient, now_ms
from broker.client.sasl import SaslSettings
from broker.client.ssl_context import client_context
from broker.protocol import ApiKey, request_schema

from .config import ConsumerConfig

_ids = itertools.count(1)

# Requests in flight per connection: Kafka's consumer allows 100 (its fetches, offset
# lookups and metadata share connections); the fetcher itself keeps at most two.
MAX_IN_FLIGHT = 100
METADATA_MAX_VERSION = MetadataUpdater.MAX_VERSION
# Longest single poll while waiting: bounds how stale "now" gets between deadline checks.
MAX_POLL_MS = 1000.0


class RequestFuture:
    """The pending answer of one request: ``response`` is set once it completes."""

    __slots__ = ("node_id", "api_key", "response", "context")

    def __init__(self, node_id: int, api_key: int, context: Any = None) -> None:
        self.node_id = node_id
        self.api_key = api_key
        self.response: ClientResponse | None = None
        self.context = context

    def _complete(self, response: ClientResponse) -> None:
        self.response = response

    @property
    def done(self) -> bool:
        return self.response is not None


class ConsumerNetworkClient:
    """See the module docstring. ``ConsumerNetworkClient(config_dict_or_ConsumerConfig,
    **overrides)``; a context manager that closes its connections."""

    def __init__(self, config: Mapping[str, Any] | ConsumerConfig | None = None,
                 **kwargs: Any) -> None:
        cfg = config if isinstance(config, ConsumerConfig) and not kwargs \
            else ConsumerConfig(config, **kwargs)
        self.config = cfg
        self.client_id = cfg["client.id"] or f"consumer-{next(_ids)}"
        self.metadata = Metadata(cfg["bootstrap.servers"],
                                 metadata_max_age_ms=cfg["metadata.max.age.ms"],
                                 retry_backoff_ms=cfg["retry.backoff.ms"],
                                 allow_auto_topic_creation=cfg["allow.auto.create.topics"])
        self.client = NetworkClient(
            metadata=self.metadata, client_id=self.client_id,
            request_timeout_ms=cfg["request.timeout.ms"],
            reconnect_backoff_ms=cfg["reconnect.backoff.ms"],
            reconnect_backoff_max_ms=cfg["reconnect.backoff.max.ms"],
            max_in_flight=MAX_IN_FLIGHT,
            connection_setup_timeout_ms=cfg["socket.connection.setup.timeout.ms"],
            send_buffer_bytes=cfg["send.buffer.bytes"],
            receive_buffer_bytes=cfg["receive.buffer.bytes"],
            connections_max_idle_ms=cfg["connections.max.idle.ms"],
            metadata_updater=MetadataUpdater(self.metadata),
            sasl=SaslSettings.from_config(cfg), ssl_context=client_context(cfg.values))
        self.retry_backoff_ms: float = cfg["retry.backoff.ms"]
        self.retry_backoff_max_ms: float = cfg["retry.backoff.max.ms"]
        self.default_timeout_ms: float = cfg["default.api.timeout.ms"]
        # the bound of the wait in progress and the setting it comes from (messages)
        self.wait_timeout_ms: float = self.default_timeout_ms
        self.wait_config = "default.api.timeout.ms"
        self._closed = False

    # -- lifecycle -----------------------------------------------------------------------

    def __enter__(self) -> ConsumerNetworkClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close every connection (pending requests complete with an error)."""
        if self._closed:
            return
        self._closed = True
        self.client.close()
        self.metadata.close()

    @property
    def closed(self) -> bool:
        return self._closed

    # -- time ----------------------------------------------------------------------------

    def deadline(self, timeout_ms: float | None = None, config: str | None = None) -> float:
        """An absolute deadline ``timeout_ms`` from now (default.api.timeout.ms if None);
        ``config`` names the setting the bound comes from (default: default.api.timeout.ms,
        or ``timeout_ms`` for an explicit one), for ``deadline_error``'s message."""
        if timeout_ms is None:
            timeout_ms, config = self.default_timeout_ms, config or "default.api.timeout.ms"
        self.wait_timeout_ms = timeout_ms
        self.wait_config = config or "timeout_ms"
        return now_ms() + timeout_ms

    def deadline_error(self, message: str) -> KafkaTimeoutError:
        """The error of a passed deadline: ``BrokerUnreachableError`` (the bootstrap
        servers, the connection failures' cause, the wait and its setting) when no broker
        can be connected to, else ``KafkaTimeoutError(message)``."""
        cause = self.client.unreachable_cause()
        if cause is None:
            return KafkaTimeoutError(message)
        return BrokerUnreachableError(",".join(self.config["bootstrap.servers"]), cause,
                                      self.wait_timeout_ms, self.wait_config)

    def backoff_ms(self, attempt: int) -> float:
        """retry.backoff.ms doubled per attempt (from 0), capped by retry.backoff.max.ms."""
        return min(self.retry_backoff_ms * (2 ** min(attempt, 20)), self.retry_backoff_max_ms)

    def poll(self, timeout_ms: float) -> None:
        if self._closed:
            raise KafkaError("the consumer client is closed")
        self.client.poll(max(0.0, min(timeout_ms, MAX_POLL_MS)))
        error = self.client.take_authentication_error()
        if error is not None:  # not retriable: the caller (consumer poll, admin call) raises it
            raise error

    def sleep(self, ms: float, deadline: float | None = None) -> None:
        """Wait ``ms`` (not past ``deadline``) while polling the network."""
        end = now_ms() + ms
        if deadline is not None:
            end = min(end, deadline)
        while True:
            left = end - now_ms()
            if left <= 0:
                return
            self.poll(left)

    # -- connections and requests --------------------------------------------------------

    def await_ready(self, node_id: int, deadline: float) -> bool:
        """Poll until a request can go to ``node_id``: True; False once a connection
        attempt to it failed (the caller refreshes metadata and retries);
        ``KafkaTimeoutError`` at ``deadline``."""
        client = self.client
        attempting = False
        while True:
            now = now_ms()
            if client.ready(node_id, now):
                return True
            state = client.state(node_id)
            if state != "DISCONNECTED":
                attempting = True
            elif attempting:
                return False
            if now >= deadline:
                raise self.deadline_error(f"node {node_id} not ready before the deadline "
                                          f"(state {state})")
            self.poll(min(client.poll_delay_ms(node_id, now), deadline - now))

    def send(self, node_id: int, api_key: int, body: Any, *, our_min: int = 0,
             our_max: int = 0x7FFF, context: Any = None,
             timeout_ms: float | None = None) -> RequestFuture:
        """Send to a ready node (see ``await_ready``); ``body`` is a Struct or
        ``f(version) -> Struct``. Raises ``UnsupportedVersionError`` when the node has no
        version in ``[our_min, our_max]``."""
        future = RequestFuture(node_id, api_key, context)
        self.client.send(node_id, api_key, body, callback=future._complete, our_max=our_max,
                         our_min=our_min, timeout_ms=timeout_ms)
        return future

    def wait(self, future: RequestFuture, deadline: float) -> ClientResponse:
        """Poll until ``future`` completes (its response may carry an ``error``)."""
        while future.response is None:
            now = now_ms()
            if now >= deadline:
                raise KafkaTimeoutError(f"no answer from node {future.node_id} to api "
                                        f"{future.api_key} before the deadline")
            self.poll(deadline - now)
        return future.response

    def request(self, node_id: int, api_key: int, body: Any, deadline: float, *,
                our_min: int = 0, our_max: int = 0x7FFF) -> ClientResponse:
        """``await_ready`` + ``send`` + ``wait``; a failed connection attempt raises
        ``NetworkError`` (retriable)."""
        if not self.await_ready(node_id, deadline):
            raise NetworkError(f"cannot connect to node {node_id}")
        return self.wait(self.send(node_id, api_key, body, our_min=our_min, our_max=our_max),
                         deadline)

    def least_loaded_node(self, deadline: float) -> int:
        """The id of a ready node with the fewest requests in flight (connecting to one
        if none is ready)."""
        client = self.client
        while True:
            now = now_ms()
            node = client.least_loaded_node(now)
            if node is not None and client.ready(node, now):
                return node.id
            if now >= deadline:
                raise self.deadline_error("no broker of "
                                          f"{','.join(self.config['bootstrap.servers'])} "
                                          "reachable before the deadline")
            self.poll(min(client.reconnect_backoff_ms or 50.0, deadline - now))

    # -- metadata ------------------------------------------------------------------------

    def await_metadata_update(self, deadline: float) -> Cluster:
        """One refresh of the registered topics' metadata; returns the new Cluster."""
        md = self.metadata
        version = md.request_update()
        while md.version <= version:
            now = now_ms()
            if now >= deadline:
                raise self.deadline_error(
                    f"metadata of {', '.join(md.topics()) or 'the cluster'} not received from "
                    f"{','.join(self.config['bootstrap.servers'])} before the deadline")
            self.poll(deadline - now)
        return md.fetch()

    def describe_topics(self, topics: Iterable[str] | None, deadline: float) -> Any:
        """A MetadataResponse body for ``topics`` (None: every topic), retried on network
        errors until ``deadline``; ``metadata`` is updated with it. Never creates topics."""
        names = None if topics is None else sorted(set(topics))
        attempt = 0
        while True:
            node = self.least_loaded_node(deadline)

            def build(version: int) -> Any:
                schema = request_schema(ApiKey.METADATA, version)
                topic_cls = schema.structs["MetadataRequestTopic"]
                return schema.cls(
                    topics=None if names is None else [topic_cls(name=t) for t in names],
                    allow_auto_topic_creation=False)

            try:
                resp = self.wait(self.send(node, ApiKey.METADATA, build,
                                           our_min=1, our_max=METADATA_MAX_VERSION), deadline)
            except NetworkError:
                resp = None
            if resp is not None and resp.error is None:
                body = resp.body
                requested = names if names is not None else [t.name for t in body.topics]
                self.metadata.update(body, resp.received_ms, requested)
                return body
            self.sleep(self.backoff_ms(attempt), deadline)
            attempt += 1
            if now_ms() >= deadline:
                raise self.deadline_error("Metadata request not answered before the deadline")


__all__ = ["ConsumerNetworkClient", "RequestFuture"]
