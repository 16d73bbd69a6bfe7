"""Cluster metadata for clients: bootstrap, Metadata requests, leaders, refresh, waits.

Owns, as Kafka's ``Metadata`` / ``Cluster`` / ``DefaultMetadataUpdater``:

* ``Node`` (id, host, port, rack) and ``PartitionInfo`` (topic, partition, leader,
  leader_epoch, replicas, isr, error).
* ``Cluster``: an immutable snapshot (brokers, partitions per topic, per-node partition
  lists, topic errors, cluster and controller ids, topic ids from Metadata v10+). Before the first response it holds
  the bootstrap nodes, with ids -1, -2, ... as Kafka gives them.
* ``Metadata``: the live view shared by user threads and the network thread. It keeps
  the set of topics the client needs (``add_topic``; topics unused for
  ``metadata.max.idle.ms`` are dropped), the current ``Cluster``, a version bumped by
  each update, and ``request_update()`` / ``await_update(version, timeout)`` for the
  bounded wait of ``send()`` (``max.block.ms``). It refreshes at least every
  ``metadata.max.age.ms`` and on request, never more often than
  ``retry.backoff.ms`` after a failure.
* ``MetadataUpdater``: runs on the network thread inside ``NetworkClient.poll``: sends a
  Metadata request to the least loaded node when an update is due, applies the answer,
  and asks for an update on disconnects.

Topic errors that will not go away by retrying (INVALID_TOPIC_EXCEPTION,
TOPIC_AUTHORIZATION_FAILED) are kept per topic so that a waiting ``send()`` fails at once
instead of timing out; retriable ones (LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION
while auto-creation runs) only trigger another refresh.
An authentication failure of a connection (a failed TLS handshake, a SASL failure,
reported by the NetworkClient through ``MetadataUpdater.handle_authentication_failure``)
ends ``await_update``'s wait at once, and ``fatal_error`` returns it (once).

Thread-safety: ``Cluster`` is immutable; ``Metadata`` guards its state with one
``Condition``. ``MetadataUpdater`` belongs to the network thread.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterable
from typing import Any, NamedTuple

from broker.client.errors import KafkaError, KafkaTimeoutError
from broker.protocol import ApiKey, ErrorCode, request_schema


class Node(NamedTuple):
    id: int
    host: str
    port: int
    rack: str | None = None


class PartitionInfo(NamedTuple):
    topic: str
    partition: int
    leader: int  # node id, -1 when unknown
    leader_epoch: int = -1
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    error: int = 0


_FATAL_TOPIC_ERRORS = frozenset({
    ErrorCode.INVALID_TOPIC_EXCEPTION,
    ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ErrorCode.INVALID_REPLICATION_FACTOR,
})


def parse_bootstrap(servers: Iterable[str]) -> list[Node]:
    """``host:port`` strings (IPv6 as ``[::1]:9092``) to bootstrap nodes -1, -2, ..."""
    nodes = []
    for i, s in enumerate(servers):
        s = s.strip()
        if "://" in s:
            s = s.split("://", 1)[1]
        host, sep, port = s.rpartition(":")
        if not sep or not port.isdigit():
            raise KafkaError(f"invalid bootstrap server {s!r}: expected host:port")
        host = host.strip("[]") or "localhost"
        nodes.append(Node(-(i + 1), host, int(port)))
    return nodes


class Cluster:
    """An immutable metadata snapshot."""

    def __init__(self, nodes: Iterable[Node], partitions: Iterable[PartitionInfo] = (),
                 topic_errors: dict[str, int] | None = None, cluster_id: str | None = None,
                 controller_id: int = -1, bootstrap: bool = False,
                 topic_ids: dict[str, uuid.UUID] | None = None) -> None:
        self.nodes: dict[int, Node] = {n.id: n for n in nodes}
        self.topic_ids: dict[str, uuid.UUID] = dict(topic_ids or {})
        self.cluster_id = cluster_id
        self.controller_id = controller_id
        self.is_bootstrap = bootstrap
        self.topic_errors = dict(topic_errors or {})
        by_topic: dict[str, dict[int, PartitionInfo]] = {}
        by_node: dict[int, list[tuple[str, int]]] = {}
        for p in partitions:
            by_topic.setdefault(p.topic, {})[p.partition] = p
            if p.leader >= 0:
                by_node.setdefault(p.leader, []).append((p.topic, p.partition))
        self._partitions = by_topic
        self.partition_counts: dict[str, int] = {t: len(ps) for t, ps in by_topic.items()}
        self._by_node = by_node
        self._available: dict[str, list[int]] = {
            t: sorted(i for i, p in ps.items() if p.leader >= 0) for t, ps in by_topic.items()}
        self._leaders: dict[tuple[str, int], int] = {
            (p.topic, p.partition): p.leader for ps in by_topic.values() for p in ps.values()}

    @classmethod
    def bootstrap_cluster(cls, nodes: Iterable[Node]) -> Cluster:
        return cls(nodes, bootstrap=True)

    def topic_id(self, topic: str) -> uuid.UUID | None:
        """The topic's id (Metadata v10+), None when unknown."""
        return self.topic_ids.get(topic)

    def topics(self) -> list[str]:
        return list(self._partitions)

    def node(self, node_id: int) -> Node | None:
        return self.nodes.get(node_id)

    def partition_count(self, topic: str) -> int:
        return self.partition_counts.get(topic, 0)

    def partitions_for_topic(self, topic: str) -> list[PartitionInfo]:
        ps = self._partitions.get(topic)
        return [ps[i] for i in sorted(ps)] if ps else []

    def partition(self, topic: str, partition: int) -> PartitionInfo | None:
        ps = self._partitions.get(topic)
        return ps.get(partition) if ps else None

    def available_partitions_for_topic(self, topic: str) -> list[int]:
        return self._available.get(topic, [])

    def leader_for(self, topic: str, partition: int) -> int:
        """The leader's node id, or -1 when unknown."""
        return self._leaders.get((topic, partition), -1)

    def partitions_for_node(self, node_id: int) -> list[tuple[str, int]]:
        return self._by_node.get(node_id, [])

    def __repr__(self) -> str:
        return (f"Cluster(nodes={list(self.nodes.values())}, "
                f"topics={ {t: len(p) for t, p in self._partitions.items()} })")


class Metadata:
    """The live metadata view (see the module docstring)."""

    def __init__(self, bootstrap_servers: Iterable[str], *, metadata_max_age_ms: int = 300000,
                 retry_backoff_ms: int = 100, metadata_max_idle_ms: int = 300000,
                 allow_auto_topic_creation: bool = True) -> None:
        self.bootstrap_nodes = parse_bootstrap(bootstrap_servers)
        self.metadata_max_age_ms = metadata_max_age_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.metadata_max_idle_ms = metadata_max_idle_ms
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self._cond = threading.Condition()
        self._cluster = Cluster.bootstrap_cluster(self.bootstrap_nodes)
        self._topics: dict[str, float] = {}  # topic -> last use (monotonic s)
        self._need_update = True
        self._need_full = False
        self.version = 0
        self._last_refresh_ms = 0.0
        self._last_success_ms = 0.0
        self._closed = False
        self._fatal: dict[str, KafkaError] = {}
        self._auth_error: KafkaError | None = None  # a SASL failure, raised once by fatal_error

    # -- reads ---------------------------------------------------------------------------

    @property
    def cluster(self) -> Cluster:
        return self._cluster

    def fetch(self) -> Cluster:
        return self._cluster

    def topics(self) -> list[str]:
        with self._cond:
            return list(self._topics)

    def node(self, node_id: int) -> Node | None:
        n = self._cluster.node(node_id)
        if n is None:
            for b in self.bootstrap_nodes:
                if b.id == node_id:
                    return b
        return n

    # -- requests for updates -----------------------------------------------------------

    def add_topic(self, topic: str) -> None:
        with self._cond:
            if topic not in self._topics:
                self._need_update = True
            self._topics[topic] = time.monotonic()

    def touch_topic(self, topic: str) -> None:
        self._topics[topic] = time.monotonic()  # single assignment; no lock needed

    def request_update(self) -> int:
        """Ask for a refresh; returns the version to wait past."""
        with self._cond:
            self._need_update = True
            return self.version

    def update_requested(self) -> bool:
        return self._need_update

    def time_to_next_update(self, now_ms: float) -> float:
        """ms until a refresh is due (0: now), honouring the failure backoff."""
        if self._need_update:
            due = 0.0
        else:
            due = max(self._last_success_ms + self.metadata_max_age_ms - now_ms, 0.0)
        backoff = max(self._last_refresh_ms + self.retry_backoff_ms - now_ms, 0.0)
        return max(due, backoff)

    def await_update(self, last_version: int, timeout_ms: float) -> None:
        """Block until the version passes ``last_version``; KafkaTimeoutError after
        ``timeout_ms``."""
        deadline = time.monotonic() + timeout_ms / 1000.0
        with self._cond:
            while self.version <= last_version and self._auth_error is None:
                if self._closed:
                    raise KafkaError("metadata closed")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise KafkaTimeoutError(f"metadata not updated within {timeout_ms:g} ms")
                self._cond.wait(remaining)

    def fatal_error(self, topic: str) -> KafkaError | None:
        """The error waiting for ``topic`` must raise: an authentication failure (once),
        else the topic's own fatal error."""
        if self._auth_error is not None:
            with self._cond:
                error, self._auth_error = self._auth_error, None
            if error is not None:
                return error
        return self._fatal.get(topic)

    def set_authentication_error(self, error: KafkaError) -> None:
        """A connection failed SASL authentication: wake the waiters, who raise it."""
        with self._cond:
            self._auth_error = error
            self._cond.notify_all()

    # -- updates (network thread) -------------------------------------------------------

    def request_topics(self) -> list[str]:
        """Topics to ask for; expired ones are forgotten here."""
        now = time.monotonic()
        with self._cond:
            idle = self.metadata_max_idle_ms / 1000.0
            for t, used in list(self._topics.items()):
                if now - used > idle:
                    del self._topics[t]
            return list(self._topics)

    def refresh_started(self, now_ms: float) -> None:
        with self._cond:
            self._last_refresh_ms = now_ms
            self._need_update = False

    def failed_update(self, now_ms: float) -> None:
        with self._cond:
            self._last_refresh_ms = now_ms
            self._need_update = True

    def update(self, response: Any, now_ms: float, requested: list[str]) -> None:
        """Apply a MetadataResponse body."""
        nodes = [Node(b.node_id, b.host, b.port, getattr(b, "rack", None))
                 for b in response.brokers]
        partitions = []
        topic_errors: dict[str, int] = {}
        retry = False
        fatal: dict[str, KafkaError] = {}
        topic_ids: dict[str, uuid.UUID] = {}
        for t in response.topics:
            name = t.name
            topic_id = getattr(t, "topic_id", None)
            if topic_id is not None and topic_id.int:
                topic_ids[name] = topic_id
            if t.error_code:
                topic_errors[name] = t.error_code
                code = ErrorCode.lookup(t.error_code)
                if code in _FATAL_TOPIC_ERRORS:
                    fatal[name] = KafkaError.from_code(t.error_code, f"topic {name}")
                else:
                    retry = True
                continue
            for p in t.partitions:
                if p.error_code and p.leader_id < 0:
                    retry = True
                partitions.append(PartitionInfo(
                    name, p.partition_index, p.leader_id, getattr(p, "leader_epoch", -1),
                    tuple(p.replica_nodes), tuple(p.isr_nodes), p.error_code))
                if p.leader_id < 0:
                    retry = True
        cluster = Cluster(nodes, partitions, topic_errors, getattr(response, "cluster_id", None),
                          getattr(response, "controller_id", -1), topic_ids=topic_ids)
        with self._cond:
            # Keep partitions of topics not asked for this time (a refresh for a new topic
            # must not make the others unknown).
            old = self._cluster
            if not old.is_bootstrap:
                asked = set(requested)
                keep = [p for t in old.topics() if t not in asked and t not in cluster.topics()
                        for p in old.partitions_for_topic(t)]
                if keep:
                    kept_ids = {t: i for t, i in old.topic_ids.items() if t not in asked}
                    cluster = Cluster(nodes, partitions + keep, topic_errors,
                                      cluster.cluster_id, cluster.controller_id,
                                      topic_ids={**kept_ids, **topic_ids})
            self._cluster = cluster
            self._fatal.update(fatal)
            for t in requested:
                if t not in fatal:
                    self._fatal.pop(t, None)
            self.version += 1
            self._last_success_ms = now_ms
            self._last_refresh_ms = now_ms
            self._need_update = retry
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


class MetadataUpdater:
    """Sends Metadata requests from the network thread (see the module docstring)."""

    MAX_VERSION = 12  # v10+: topic ids (stitched reads check the remote storage's against them)

    def __init__(self, metadata: Metadata) -> None:
        self.metadata = metadata
        self.in_flight = False

    def maybe_update(self, client: Any, now_ms: float) -> float:
        """Send a Metadata request if one is due; returns ms until the next check."""
        md = self.metadata
        wait = md.time_to_next_update(now_ms)
        if self.in_flight:
            return client.request_timeout_ms
        if wait > 0:
            return wait
        node = client.least_loaded_node(now_ms, md)
        if node is None:
            return client.reconnect_backoff_ms
        if not client.ready(node, now_ms):
            # Connecting: wake up when the connection can be used.
            return client.connection_delay(node.id, now_ms) or client.reconnect_backoff_ms
        topics = md.request_topics()
        version = client.api_version(node.id, ApiKey.METADATA, self.MAX_VERSION)
        if version is None:
            md.failed_update(now_ms)
            return md.retry_backoff_ms
        body = _metadata_request(version, topics, md.allow_auto_topic_creation)
        md.refresh_started(now_ms)
        self.in_flight = True

        def on_response(resp: Any) -> None:
            self.in_flight = False
            if resp.error is not None or resp.body is None:
                md.failed_update(resp.received_ms)
                return
            md.update(resp.body, resp.received_ms, topics)

        client.send(node.id, ApiKey.METADATA, body, version=version, callback=on_response,
                    now_ms=now_ms)
        return client.request_timeout_ms

    def handle_disconnect(self, node_id: int) -> None:
        self.metadata.request_update()

    def handle_authentication_failure(self, error: KafkaError) -> None:
        self.in_flight = False
        self.metadata.set_authentication_error(error)


def _metadata_request(version: int, topics: list[str], auto_create: bool) -> Any:
    schema = request_schema(ApiKey.METADATA, version)
    cls = schema.cls
    topic_cls = schema.structs["MetadataRequestTopic"]
    if not topics and version == 0:
        # v0: an empty list means all topics; ask for nothing useful instead of all.
        topic_list: list[Any] | None = []
    else:
        topic_list = [topic_cls(name=t) for t in topics]
    return cls(topics=topic_list, allow_auto_topic_creation=auto_create)
