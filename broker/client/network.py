"""NetworkClient: connections to brokers and the in-flight request pipeline of a client.

Owns, as Kafka's ``NetworkClient`` + ``Selector`` + ``InFlightRequests``:

* One non-blocking TCP connection per node, driven by a ``selectors`` selector on the
  thread that calls ``poll`` (the producer's Sender thread; later a consumer's or admin
  client's). States: DISCONNECTED -> CONNECTING -> [TLS_HANDSHAKING] -> CHECKING_API_VERSIONS
  -> [AUTHENTICATING] -> READY. With an ``ssl_context`` (``broker.client.ssl_context``: security.protocol SSL or
  SASL_SSL) the connected socket is wrapped and ``do_handshake`` is driven non-blocking by
  the selector (WANT_READ / WANT_WRITE); a failed handshake (unknown CA, host name
  mismatch, a peer that is not TLS) is an ``SslAuthenticationError``, not retried as a
  network error: it completes the connection's requests, is kept for
  ``take_authentication_error()`` (consumers and admin raise it from their poll) and handed
  to the metadata updater (the producer's metadata waits raise it).
  Through TLS, writes coalesce a request's buffers into large chunks (an SSL socket has no
  sendmsg). The TLS steps (handshake, failure, writes) are ``TlsConnectionMixin``'s
  (``broker.client.tls_connection``), a part of this class kept in its own module. With
  SASL settings (SASL_PLAINTEXT, SASL_SSL: ``broker.client.sasl``) the AUTHENTICATING
  state runs the SASL exchange after ApiVersions, over TLS for SASL_SSL.
  Connects time out after ``socket.connection.setup.timeout.ms``; failed nodes are retried
  after an exponential ``reconnect.backoff.ms`` .. ``reconnect.backoff.max.ms`` (x2 per
  failure, 20% jitter).
* Connection failures and their causes: each failed attempt is remembered per address
  (``connection_failures``: ``host:port`` -> ``ConnectionFailure``, its cause in words:
  ``connection refused``, ``unknown host``, ``DNS lookup failed (...)``, ``connection
  timed out after N ms (socket.connection.setup.timeout.ms)``, ``TLS handshake failed:
  certificate verify failed: ...``, ``SASL authentication failed: ...``), forgotten when a
  connection to that address becomes READY. ``unreachable_cause()`` says why no broker
  can be used (None while one is READY or nothing failed since): what a wait that times
  out names (``BrokerUnreachableError``). Logging (logger ``broker.client.network``), one
  WARNING per change, never per retry: ``no broker of HOST:PORT reachable yet (CAUSE);
  retrying`` once every known address has failed (record attributes ``kafka_unreachable``,
  the cause, and ``kafka_ever_ready``, whether a broker was reachable before), and
  ``connection to ADDRESS (node N) failed: CAUSE`` for a failure that is not retried (TLS,
  SASL; attribute ``kafka_connection_failure``), which the caller raises too; the console
  tools turn the first into their one line and drop the second.
* ApiVersions negotiation per connection (v3 first; a broker that answers
  UNSUPPORTED_VERSION with a v0 body is asked again with the version it named), then
  ``api_version(node, key, our_max, our_min)`` = min(our max, broker max), or None when
  the ranges do not meet. The finalized features (KIP-584) of the newest epoch any broker
  answered are kept in ``finalized_features`` (name -> max level), as Kafka's
  ``ApiVersions`` does: the transactional producer reads ``transaction.version`` there.
* Requests: ``send`` encodes a request (``broker.protocol.encode_request``) with the next
  correlation id and queues its buffers (zero-copy for record batches); ``poll`` writes
  with ``sendmsg``, reads into a ``FrameDecoder`` and matches responses to the oldest
  in-flight request (Kafka answers in order; a correlation id mismatch closes the
  connection). Requests that expect no response (Produce acks=0) complete once written.
* At most ``max.in.flight.requests.per.connection`` requests in flight per connection,
  and a new one only once the previous one is fully written (``can_send_more``).
* ``request.timeout.ms``: a request without an answer in time closes its connection;
  it completes with ``RequestTimedOutError``, the others in flight there with
  ``NetworkError`` (the caller decides about retries).
* Throttling: a response's ``throttle_time_ms`` mutes sends to that node until it passes
  (``is_ready`` false, ``connection_delay`` says how long).
* ``wakeup()`` (any thread) interrupts a blocking ``poll`` through a socket pair.
* An optional ``MetadataUpdater`` (``broker.client.metadata``) is run inside ``poll``.
* SASL (``sasl=SaslSettings``, ``broker.client.sasl``): after ApiVersions the connection is
  AUTHENTICATING while SaslHandshake / SaslAuthenticate run (a ``SaslClientAuthenticator``);
  then READY. A failure closes the connection, counts as a failed connection (backoff) and
  is kept as ``take_authentication_error()`` (consumers and admin raise it from their
  poll; the producer fails its batches with it) and passed to the metadata updater (the
  producer's metadata waits raise it): a non-retriable ``SaslAuthenticationError``, not an
  endless retry. KIP-368: when the broker gives a session lifetime, the connection
  re-authenticates at 85-95% of it, once nothing is in flight (it is not ready meanwhile).

Every request completes exactly once: with a body, or with ``error`` set (disconnect,
timeout, close). Callbacks run on the polling thread, inside ``poll``.

Thread-safety: everything but ``wakeup`` belongs to the one polling thread.
"""

from __future__ import annotations

import errno
import logging
import os
import random
import selectors
import socket
import ssl
import time
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

from broker.client.errors import (
    KafkaError,
    NetworkError,
    RequestTimedOutError,
    UnsupportedVersionError,
)
from broker.client.sasl import SaslAuthenticationError, SaslClientAuthenticator, SaslSettings, reauthentication_delay_ms
from broker.client.tls_connection import TlsConnectionMixin
from broker.protocol import (
    ApiKey,
    ErrorCode,
    FrameDecoder,
    ProtocolDecodeError,
    RequestHeader,
    decode_response,
    encode_request,
    request_schema,
)

log = logging.getLogger(__name__)

DISCONNECTED, CONNECTING, CHECKING_API_VERSIONS, READY, TLS_HANDSHAKING, AUTHENTICATING = range(6)
_STATE_NAMES = ("DISCONNECTED", "CONNECTING", "CHECKING_API_VERSIONS", "READY", "TLS_HANDSHAKING",
                "AUTHENTICATING")
_SETUP_STATES = (CONNECTING, TLS_HANDSHAKING, CHECKING_API_VERSIONS, AUTHENTICATING)
_NEVER = float("inf")

# Buffers handed to one sendmsg (IOV_MAX is 1024 on Linux).
SENDMSG_MAX_BUFFERS = 512
# Largest response frame accepted (a Fetch answer is bounded by fetch.max.bytes; 100 MiB
# is the broker's socket.request.max.bytes default).
MAX_RESPONSE_BYTES = 100 * 1024 * 1024
API_VERSIONS_VERSION = 3
CLIENT_SOFTWARE_NAME = "spark-kafkalog"
CLIENT_SOFTWARE_VERSION = "0.1.0"


def now_ms() -> float:
    """The clock of the client core: monotonic milliseconds."""
    return time.monotonic() * 1000.0


_now = now_ms


def address_text(host: str, port: int) -> str:
    """``host:port`` (``[v6]:port``), as ``bootstrap.servers`` spells an address."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class ConnectionFailure(NamedTuple):
    """The last failed connection attempt to one address (see the module docstring)."""

    address: str  # host:port
    node_id: int
    cause: str  # in words: "connection refused", "unknown host", ...
    retriable: bool  # False for TLS and SASL failures (Kafka's AuthenticationException)
    at_ms: float


_ERRNO_CAUSES = {
    errno.ECONNREFUSED: "connection refused",
    errno.ETIMEDOUT: "connection timed out",
    errno.EHOSTUNREACH: "host unreachable",
    errno.ENETUNREACH: "network unreachable",
    errno.ECONNRESET: "connection reset",
    errno.EADDRNOTAVAIL: "address not available",
}


def _errno_cause(err: int) -> str:
    return _ERRNO_CAUSES.get(err) or os.strerror(err)


def _resolve_cause(exc: OSError) -> str:
    """The cause of a failed ``getaddrinfo`` (or socket creation)."""
    if isinstance(exc, socket.gaierror):
        unknown = {socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)}
        if exc.errno in unknown:
            return "unknown host"
        return f"DNS lookup failed ({exc.strerror or exc})"
    if exc.errno is not None and exc.strerror:
        return _errno_cause(exc.errno)
    return str(exc) or type(exc).__name__


class ClientRequest:
    __slots__ = ("node_id", "api_key", "api_version", "correlation_id", "callback",
                 "expect_response", "created_ms", "sent_ms", "timeout_ms", "buffers",
                 "written", "done", "context")

    def __init__(self, node_id: int, api_key: int, api_version: int, correlation_id: int,
                 callback: Callable[[ClientResponse], None] | None, expect_response: bool,
                 created_ms: float, timeout_ms: float, buffers: list[Any],
                 context: Any = None) -> None:
        self.node_id = node_id
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.callback = callback
        self.expect_response = expect_response
        self.created_ms = created_ms
        self.sent_ms = created_ms
        self.timeout_ms = timeout_ms
        self.buffers = buffers
        self.written = False
        self.done = False
        self.context = context

    def __repr__(self) -> str:
        return (f"ClientRequest(node={self.node_id}, api={self.api_key}v{self.api_version}, "
                f"corr={self.correlation_id})")


class ClientResponse:
    """The outcome of one request: ``body`` (None for acks=0) or ``error``."""

    __slots__ = ("request", "body", "error", "received_ms", "timed_out")

    def __init__(self, request: ClientRequest, body: Any, error: KafkaError | None,
                 received_ms: float, timed_out: bool = False) -> None:
        self.request = request
        self.body = body
        self.error = error
        self.received_ms = received_ms
        self.timed_out = timed_out

    @property
    def disconnected(self) -> bool:
        return self.error is not None

    @property
    def latency_ms(self) -> float:
        return self.received_ms - self.request.created_ms


class _Connection:
    __slots__ = ("node_id", "host", "port", "sock", "state", "decoder", "in_flight",
                 "send_queue", "last_request", "api_versions", "throttle_until_ms",
                 "connect_deadline_ms", "mask", "last_activity_ms", "authenticator", "reauth_at_ms",
                 "tls", "tls_out", "tls_out_views")

    def __init__(self, node_id: int, host: str, port: int) -> None:
        self.node_id = node_id
        self.host = host
        self.port = port
        self.sock: socket.socket | None = None
        self.state = DISCONNECTED
        self.decoder = FrameDecoder(MAX_RESPONSE_BYTES)
        self.in_flight: deque[ClientRequest] = deque()  # awaiting a response, oldest first
        self.send_queue: deque[tuple[ClientRequest, deque[memoryview]]] = deque()
        self.last_request: ClientRequest | None = None
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.throttle_until_ms = 0.0
        self.connect_deadline_ms = 0.0
        self.mask = 0
        self.last_activity_ms = 0.0
        self.authenticator: SaslClientAuthenticator | None = None
        self.reauth_at_ms = _NEVER  # KIP-368: when to re-authenticate (inf: never)
        self.tls = False
        self.tls_out: memoryview | None = None  # a TLS chunk being written (retried as is)
        self.tls_out_views = 0  # how many of the head request's views that chunk holds


class _NodeState:
    __slots__ = ("failures", "backoff_until_ms")

    def __init__(self) -> None:
        self.failures = 0
        self.backoff_until_ms = 0.0


class NetworkClient(TlsConnectionMixin):
    """See the module docstring (TLS steps: ``broker.client.tls_connection``)."""

    def __init__(self, *, metadata: Any = None, client_id: str = "",
                 request_timeout_ms: float = 30000, reconnect_backoff_ms: float = 50,
                 reconnect_backoff_max_ms: float = 1000, max_in_flight: int = 5,
                 connection_setup_timeout_ms: float = 10000, send_buffer_bytes: int = 131072,
                 receive_buffer_bytes: int = 65536, connections_max_idle_ms: float = 540000,
                 metadata_updater: Any = None, sasl: SaslSettings | None = None,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.metadata = metadata
        self.ssl_context = ssl_context
        self._auth_error: KafkaError | None = None
        self.client_id = client_id or None
        self.request_timeout_ms = request_timeout_ms
        self.reconnect_backoff_ms = reconnect_backoff_ms
        self.reconnect_backoff_max_ms = reconnect_backoff_max_ms
        self.max_in_flight = max_in_flight
        self.connection_setup_timeout_ms = connection_setup_timeout_ms
        self.send_buffer_bytes = send_buffer_bytes
        self.receive_buffer_bytes = receive_buffer_bytes
        self.connections_max_idle_ms = connections_max_idle_ms
        self.metadata_updater = metadata_updater
        self.sasl = sasl
        self._selector = selectors.DefaultSelector()
        self._conns: dict[int, _Connection] = {}
        # KIP-584 finalized features (ApiVersions v3+) of the newest epoch seen on any connection
        self.finalized_features: dict[str, int] = {}
        self.finalized_features_epoch = -1
        self._nodes: dict[int, _NodeState] = {}
        self._correlation = 0
        self._completed: list[ClientResponse] = []
        self._closed = False
        self._rng = random.Random()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._wakeup_pending = False
        self.bytes_sent = 0
        self.bytes_received = 0
        self.requests_sent = 0
        self._failures: dict[str, ConnectionFailure] = {}  # address -> the last failure
        self._last_ready_ms = float("-inf")  # when a connection last became READY
        self._reported: str | None = None  # the unreachable cause last logged
        self.ever_ready = False  # a connection became READY at least once
        self._closing = False

    # -- node addresses ------------------------------------------------------------------

    def _address(self, node_id: int) -> tuple[str, int] | None:
        if self.metadata is None:
            return None
        node = self.metadata.node(node_id)
        return (node.host, node.port) if node is not None else None

    def add_node(self, node_id: int, host: str, port: int) -> None:
        """Use a node without Metadata (tests, or a client built on fixed addresses)."""
        conn = self._conns.get(node_id)
        if conn is None or conn.state == DISCONNECTED:
            self._conns[node_id] = _Connection(node_id, host, port)

    # -- readiness -----------------------------------------------------------------------

    def is_ready(self, node_id: int, now: float) -> bool:
        conn = self._conns.get(node_id)
        return (conn is not None and conn.state == READY and now >= conn.throttle_until_ms
                and now < conn.reauth_at_ms and self._can_send_more(conn))

    def _can_send_more(self, conn: _Connection) -> bool:
        last = conn.last_request
        return (last is None or last.written) and len(conn.in_flight) < self.max_in_flight

    def can_send_more(self, node_id: int) -> bool:
        conn = self._conns.get(node_id)
        return conn is not None and self._can_send_more(conn)

    def ready(self, node: Any, now: float) -> bool:
        """True when a request can be sent to ``node`` (a Node or an id) now; otherwise
        start connecting if allowed."""
        node_id = node if isinstance(node, int) else node.id
        if self.is_ready(node_id, now):
            return True
        conn = self._conns.get(node_id)
        if conn is None or conn.state == DISCONNECTED:
            if self._can_connect(node_id, now):
                self._connect(node_id, now, node if not isinstance(node, int) else None)
        return False

    def is_connected(self, node_id: int) -> bool:
        conn = self._conns.get(node_id)
        return conn is not None and conn.state == READY

    def connection_failed(self, node_id: int) -> bool:
        st = self._nodes.get(node_id)
        conn = self._conns.get(node_id)
        return st is not None and st.failures > 0 and (conn is None or conn.state == DISCONNECTED)

    def _can_connect(self, node_id: int, now: float) -> bool:
        st = self._nodes.get(node_id)
        return st is None or now >= st.backoff_until_ms

    def connection_delay(self, node_id: int, now: float) -> float:
        """ms before a request may go to ``node_id`` (backoff, throttle); 0 when ready or
        connecting."""
        conn = self._conns.get(node_id)
        if conn is not None and conn.state != DISCONNECTED:
            return max(conn.throttle_until_ms - now, 0.0)
        st = self._nodes.get(node_id)
        return max(st.backoff_until_ms - now, 0.0) if st is not None else 0.0

    def poll_delay_ms(self, node_id: int, now: float) -> float:
        """How long a poll may block for ``node_id`` not being ready: the backoff or
        throttle left; infinite while connecting or with the pipeline full (I/O events
        wake the poll then)."""
        conn = self._conns.get(node_id)
        if conn is None or conn.state == DISCONNECTED:
            st = self._nodes.get(node_id)
            return max(st.backoff_until_ms - now, 0.0) if st is not None else 0.0
        if conn.throttle_until_ms > now:
            return conn.throttle_until_ms - now
        return float("inf")

    def throttle_delay(self, node_id: int, now: float) -> float:
        conn = self._conns.get(node_id)
        return max(conn.throttle_until_ms - now, 0.0) if conn is not None else 0.0

    def in_flight_request_count(self, node_id: int | None = None) -> int:
        if node_id is not None:
            conn = self._conns.get(node_id)
            return 0 if conn is None else len(conn.in_flight) + sum(
                1 for r, _ in conn.send_queue if not r.expect_response)
        return sum(len(c.in_flight) + sum(1 for r, _ in c.send_queue if not r.expect_response)
                   for c in self._conns.values())

    def has_in_flight_requests(self) -> bool:
        return any(c.in_flight or c.send_queue for c in self._conns.values())

    def least_loaded_node(self, now: float, metadata: Any = None) -> Any:
        """The node with the fewest requests in flight: a ready one, else one that is
        connecting, else one that may be connected to (not backing off)."""
        md = metadata or self.metadata
        nodes = list(md.fetch().nodes.values()) if md is not None else []
        if not nodes and md is not None:
            nodes = list(md.bootstrap_nodes)
        self._rng.shuffle(nodes)
        best, best_load = None, None
        connecting = None
        can_connect = None
        for n in nodes:
            conn = self._conns.get(n.id)
            if conn is not None and conn.state == READY and self._can_send_more(conn):
                load = len(conn.in_flight)
                if best_load is None or load < best_load:
                    best, best_load = n, load
            elif conn is not None and conn.state in _SETUP_STATES:
                connecting = n
            elif (conn is None or conn.state == DISCONNECTED) and self._can_connect(n.id, now):
                can_connect = can_connect or n
        return best or connecting or can_connect

    def api_version(self, node_id: int, api_key: int, our_max: int, our_min: int = 0) -> int | None:
        conn = self._conns.get(node_id)
        if conn is None or not conn.api_versions:
            return None
        rng = conn.api_versions.get(int(api_key))
        if rng is None:
            return None
        version = min(our_max, rng[1])
        return version if version >= max(our_min, rng[0]) else None

    # -- connecting ----------------------------------------------------------------------

    def _connect(self, node_id: int, now: float, node: Any = None) -> None:
        if node is not None and not isinstance(node, int):
            addr: tuple[str, int] | None = (node.host, node.port)
        else:
            addr = self._address(node_id)
            if addr is None:
                conn = self._conns.get(node_id)
                addr = (conn.host, conn.port) if conn is not None else None
        if addr is None:
            return
        conn = _Connection(node_id, addr[0], addr[1])
        self._conns[node_id] = conn
        try:
            infos = socket.getaddrinfo(addr[0], addr[1], 0, socket.SOCK_STREAM)
            family, _, _, _, sockaddr = infos[0]
            sock = socket.socket(family, socket.SOCK_STREAM)
        except OSError as e:
            log.debug("cannot resolve %s: %s", addr, e)
            self._connection_failed(conn, now, _resolve_cause(e))
            return
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.send_buffer_bytes > 0:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer_bytes)
        if self.receive_buffer_bytes > 0:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer_bytes)
        conn.sock = sock
        conn.state = CONNECTING
        conn.connect_deadline_ms = now + self.connection_setup_timeout_ms
        conn.last_activity_ms = now
        rc = sock.connect_ex(sockaddr)
        if rc not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EAGAIN):
            self._connection_failed(conn, now, _errno_cause(rc))
            return
        self._set_mask(conn, selectors.EVENT_WRITE)
        if rc == 0:
            self._connected(conn, now)

    def _connected(self, conn: _Connection, now: float) -> None:
        if self.ssl_context is not None and not conn.tls:
            self._selector.unregister(conn.sock)
            conn.mask = 0
            try:
                conn.sock = self.ssl_context.wrap_socket(conn.sock, server_hostname=conn.host,
                                                         do_handshake_on_connect=False)
            except (ssl.SSLError, OSError) as e:
                self._tls_failed(conn, now, e)
                return
            conn.tls = True
            conn.state = TLS_HANDSHAKING
            self._handshake(conn, now)
            return
        conn.state = CHECKING_API_VERSIONS
        conn.connect_deadline_ms = now + self.connection_setup_timeout_ms
        self._set_mask(conn, selectors.EVENT_READ)
        self._send_api_versions(conn, API_VERSIONS_VERSION, now)

    def take_authentication_error(self) -> KafkaError | None:
        """The last authentication failure, once (None when none happened since)."""
        error, self._auth_error = self._auth_error, None
        return error

    def _send_api_versions(self, conn: _Connection, version: int, now: float) -> None:
        schema = request_schema(ApiKey.API_VERSIONS, version)
        body = schema.cls(client_software_name=CLIENT_SOFTWARE_NAME,
                          client_software_version=CLIENT_SOFTWARE_VERSION)
        self._enqueue(conn, ApiKey.API_VERSIONS, version, body, self._on_api_versions, True,
                      now, self.request_timeout_ms, None)

    def _on_api_versions(self, resp: ClientResponse) -> None:
        conn = self._conns.get(resp.request.node_id)
        if conn is None or resp.error is not None:
            return
        body = resp.body
        if body.error_code == ErrorCode.UNSUPPORTED_VERSION:
            ours = [a for a in body.api_keys if a.api_key == ApiKey.API_VERSIONS]
            version = min(ours[0].max_version, API_VERSIONS_VERSION) if ours else 0
            if version >= resp.request.api_version:
                version = 0
            self._send_api_versions(conn, version, resp.received_ms)
            return
        if body.error_code:
            self._close_conn(conn, resp.received_ms,
                             KafkaError.from_code(body.error_code, "ApiVersions"), failed=True)
            return
        conn.api_versions = {a.api_key: (a.min_version, a.max_version) for a in body.api_keys}
        epoch = getattr(body, "finalized_features_epoch", -1)
        if epoch is not None and epoch > self.finalized_features_epoch:
            self.finalized_features_epoch = epoch
            self.finalized_features = {f.name: f.max_version_level for f in body.finalized_features or ()}
        if self.sasl is not None:
            self._start_authentication(conn, resp.received_ms)
            return
        self._ready(conn)

    def _ready(self, conn: _Connection) -> None:
        conn.state = READY
        st = self._nodes.setdefault(conn.node_id, _NodeState())
        st.failures = 0
        st.backoff_until_ms = 0.0
        self._failures.pop(address_text(conn.host, conn.port), None)
        self._last_ready_ms = now_ms()
        self._reported = None
        self.ever_ready = True

    # -- connection failures and their causes ---------------------------------------------

    @property
    def connection_failures(self) -> dict[str, ConnectionFailure]:
        """The last failure per address (``host:port``) not followed by a connection."""
        return dict(self._failures)

    def _any_ready(self) -> bool:
        return any(c.state == READY for c in list(self._conns.values()))

    def _bootstrap_addresses(self) -> list[str]:
        md = self.metadata
        nodes = getattr(md, "bootstrap_nodes", None) or ()
        return [address_text(n.host, n.port) for n in nodes]

    def _describe_failures(self, failures: list[ConnectionFailure]) -> str:
        """The causes in words: one cause when every failed address is a bootstrap one
        and they agree; else each address with its own."""
        boot = self._bootstrap_addresses()
        order = {a: i for i, a in enumerate(boot)}
        failures = sorted(failures, key=lambda f: (order.get(f.address, len(order)), f.address))
        causes = list(dict.fromkeys(f.cause for f in failures))
        if len(causes) == 1 and all(f.address in order for f in failures):
            return causes[0]
        return "; ".join(f"{f.address}: {f.cause}" if f.address in order or f.node_id < 0
                         else f"broker {f.node_id} at {f.address}: {f.cause}" for f in failures)

    def unreachable_cause(self) -> str | None:
        """Why no broker can be used now: the causes of the connection failures since a
        connection was last READY; None while one is READY or none failed since. Any
        thread may ask (a producer's metadata wait does)."""
        if self._any_ready():
            return None
        since = self._last_ready_ms
        failures = [f for f in list(self._failures.values()) if f.at_ms >= since]
        return self._describe_failures(failures) if failures else None

    def _all_known_failed(self) -> str | None:
        """``unreachable_cause`` once every address the client knows (the cluster's
        brokers, else the bootstrap servers) has failed since the last READY."""
        md = self.metadata
        if md is None or self._any_ready():
            return None
        nodes = list(md.fetch().nodes.values()) or list(getattr(md, "bootstrap_nodes", ()))
        since = self._last_ready_ms
        for n in nodes:
            f = self._failures.get(address_text(n.host, n.port))
            if f is None or f.at_ms < since:
                return None
        return self.unreachable_cause() if nodes else None

    def _record_failure(self, conn: _Connection, now: float, cause: str, retriable: bool) -> None:
        if self._closing:
            return
        address = address_text(conn.host, conn.port)
        failure = ConnectionFailure(address, conn.node_id, cause, retriable, now)
        self._failures[address] = failure
        if not retriable:  # raised to the caller too: one line here, at the failure
            log.warning("connection to %s (node %s) failed: %s", address, conn.node_id, cause,
                        extra={"kafka_connection_failure": failure})
            return
        unreachable = self._all_known_failed()
        if unreachable is not None and unreachable != self._reported:
            self._reported = unreachable
            servers = ",".join(self._bootstrap_addresses()) or address
            log.warning("no broker of %s reachable yet (%s); retrying", servers, unreachable,
                        extra={"kafka_unreachable": unreachable, "kafka_ever_ready": self.ever_ready})
        else:
            log.debug("connection to %s (node %s) failed: %s", address, conn.node_id, cause)

    # -- SASL ----------------------------------------------------------------------------

    def _start_authentication(self, conn: _Connection, now: float) -> None:
        """AUTHENTICATING: SaslHandshake then SaslAuthenticate (also for KIP-368
        re-authentication of a READY connection with nothing in flight)."""
        assert self.sasl is not None
        if ApiKey.SASL_HANDSHAKE not in conn.api_versions or ApiKey.SASL_AUTHENTICATE not in conn.api_versions:
            self._authentication_failed(conn, now, SaslAuthenticationError(
                f"node {conn.node_id} does not support SASL (no SaslHandshake / SaslAuthenticate in ApiVersions)",
                ErrorCode.ILLEGAL_SASL_STATE))
            return
        version = conn.api_versions[ApiKey.SASL_AUTHENTICATE][1]
        conn.authenticator = SaslClientAuthenticator(self.sasl, version)
        conn.state = AUTHENTICATING
        conn.reauth_at_ms = _NEVER
        conn.connect_deadline_ms = now + self.connection_setup_timeout_ms
        self._send_sasl(conn, now)

    def _send_sasl(self, conn: _Connection, now: float) -> None:
        step = conn.authenticator.next_request() if conn.authenticator is not None else None
        if step is None:
            return
        api_key, version, body = step
        self._enqueue(conn, api_key, version, body, self._on_sasl_response, True, now,
                      self.request_timeout_ms, None)

    def _on_sasl_response(self, resp: ClientResponse) -> None:
        conn = self._conns.get(resp.request.node_id)
        if conn is None or resp.error is not None or conn.authenticator is None or conn.state != AUTHENTICATING:
            return
        auth = conn.authenticator
        try:
            auth.on_response(resp.request.api_key, resp.body)
        except SaslAuthenticationError as e:
            self._authentication_failed(conn, resp.received_ms, e)
            return
        if not auth.complete:
            self._send_sasl(conn, resp.received_ms)
            return
        conn.authenticator = None
        if auth.session_lifetime_ms > 0:
            conn.reauth_at_ms = resp.received_ms + reauthentication_delay_ms(auth.session_lifetime_ms, self._rng)
        self._auth_error = None
        self._ready(conn)

    def _authentication_failed(self, conn: _Connection, now: float, error: SaslAuthenticationError) -> None:
        conn.authenticator = None
        self._auth_error = error
        updater = self.metadata_updater
        if updater is not None and hasattr(updater, "handle_authentication_failure"):
            updater.handle_authentication_failure(error)
        self._close_conn(conn, now, error, failed=True, cause=f"SASL authentication failed: {error}",
                         retriable=False)

    def _maybe_reauthenticate(self, now: float) -> None:
        for conn in self._conns.values():
            if (conn.state == READY and now >= conn.reauth_at_ms and not conn.in_flight
                    and not conn.send_queue and conn.sock is not None):
                log.debug("re-authenticating with node %s (KIP-368)", conn.node_id)
                self._start_authentication(conn, now)

    def _connection_failed(self, conn: _Connection, now: float, cause: str = "connection failed",
                           retriable: bool = True) -> None:
        self._record_failure(conn, now, cause, retriable)
        st = self._nodes.setdefault(conn.node_id, _NodeState())
        st.failures += 1
        backoff = min(self.reconnect_backoff_ms * (2 ** (st.failures - 1)),
                      self.reconnect_backoff_max_ms)
        backoff *= self._rng.uniform(0.8, 1.2)
        st.backoff_until_ms = now + backoff
        conn.state = DISCONNECTED
        if conn.sock is not None:
            try:
                self._selector.unregister(conn.sock)
            except (KeyError, ValueError):
                pass
            conn.sock.close()
            conn.sock = None
        conn.mask = 0

    def _set_mask(self, conn: _Connection, mask: int) -> None:
        if conn.mask == mask or conn.sock is None:
            return
        if conn.mask == 0:
            self._selector.register(conn.sock, mask, conn)
        else:
            self._selector.modify(conn.sock, mask, conn)
        conn.mask = mask

    # -- sending -------------------------------------------------------------------------

    def send(self, node_id: int, api_key: int, body: Any, *, version: int | None = None,
             callback: Callable[[ClientResponse], None] | None = None,
             expect_response: bool = True, now_ms: float | None = None,
             timeout_ms: float | None = None, our_max: int = 0x7FFF, our_min: int = 0,
             context: Any = None) -> ClientRequest:
        """Queue a request to a ready node. ``body`` is a Struct or ``f(version) -> Struct``;
        ``version`` defaults to the negotiated one."""
        now = now_ms if now_ms is not None else _now()
        conn = self._conns.get(node_id)
        if conn is None or conn.state != READY:
            raise KafkaError(f"node {node_id} is not ready")
        if version is None:
            version = self.api_version(node_id, api_key, our_max, our_min)
            if version is None:
                raise UnsupportedVersionError(f"node {node_id} supports no usable version of "
                                              f"api {api_key}")
        if callable(body):
            body = body(version)
        timeout = self.request_timeout_ms if timeout_ms is None else timeout_ms
        return self._enqueue(conn, api_key, version, body, callback, expect_response, now,
                             timeout, context)

    def _enqueue(self, conn: _Connection, api_key: int, version: int, body: Any,
                 callback: Any, expect_response: bool, now: float, timeout: float,
                 context: Any) -> ClientRequest:
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        header = RequestHeader(api_key, version, self._correlation, self.client_id)
        buffers = encode_request(header, body)
        req = ClientRequest(conn.node_id, api_key, version, self._correlation, callback,
                            expect_response, now, timeout, buffers, context)
        views = deque(memoryview(b).cast("B") if not isinstance(b, memoryview) else b.cast("B")
                      for b in buffers)
        conn.send_queue.append((req, views))
        conn.last_request = req
        if expect_response:
            conn.in_flight.append(req)
        self.requests_sent += 1
        self._write(conn, now)
        return req

    def _write(self, conn: _Connection, now: float) -> None:
        if conn.tls:
            self._write_tls(conn, now)
            return
        sock = conn.sock
        q = conn.send_queue
        while q and sock is not None:
            req, views = q[0]
            bufs = list(views)[:SENDMSG_MAX_BUFFERS] if len(views) > 1 else [views[0]]
            try:
                n = sock.sendmsg(bufs) if len(bufs) > 1 else sock.send(bufs[0])
            except (BlockingIOError, InterruptedError):
                break
            except OSError as e:
                self._close_conn(conn, now, NetworkError(f"send to node {conn.node_id}: {e}"))
                return
            self.bytes_sent += n
            while n > 0 and views:
                v = views[0]
                if n >= v.nbytes:
                    n -= v.nbytes
                    views.popleft()
                else:
                    views[0] = v[n:]
                    n = 0
            if views:
                break
            q.popleft()
            req.written = True
            req.sent_ms = now
            req.buffers = None  # the socket no longer needs the request's bytes
            if not req.expect_response:
                self._complete(req, None, None, now)
        conn.last_activity_ms = now
        if conn.sock is not None:
            self._set_mask(conn, selectors.EVENT_READ | selectors.EVENT_WRITE if q
                           else selectors.EVENT_READ)

    # -- polling -------------------------------------------------------------------------

    def wakeup(self) -> None:
        """Interrupt a blocking poll (any thread)."""
        if self._wakeup_pending:
            return
        self._wakeup_pending = True
        try:
            self._wake_w.send(b"\x00")
        except OSError:
            pass

    def poll(self, timeout_ms: float, now: float | None = None) -> list[ClientResponse]:
        """Do network I/O for up to ``timeout_ms`` and return the completed responses
        (their callbacks have run)."""
        if now is None:
            now = now_ms()
        if self.metadata_updater is not None:
            timeout_ms = min(timeout_ms, self.metadata_updater.maybe_update(self, now))
        if self._completed:
            timeout_ms = 0
        timeout_ms = min(timeout_ms, self._next_timeout(now))
        events = self._selector.select(max(timeout_ms, 0) / 1000.0)
        now = now_ms()
        for key, mask in events:
            conn = key.data
            if conn is None:
                self._drain_wakeup()
                continue
            if conn.sock is None:
                continue
            if conn.state == CONNECTING:
                err = conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    log.debug("connect to node %s failed: %s", conn.node_id, errno.errorcode.get(err))
                    self._close_conn(conn, now, NetworkError(f"connect to node {conn.node_id} "
                                                             f"failed: {os.strerror(err)}"),
                                     failed=True, cause=_errno_cause(err))
                    continue
                self._connected(conn, now)
                continue
            if conn.state == TLS_HANDSHAKING:
                self._handshake(conn, now)
                continue
            if mask & selectors.EVENT_READ:
                self._read(conn, now)
            if mask & selectors.EVENT_WRITE and conn.sock is not None:
                self._write(conn, now)
        self._check_timeouts(now)
        if self.sasl is not None:
            self._maybe_reauthenticate(now)
        done, self._completed = self._completed, []
        for resp in done:
            cb = resp.request.callback
            if cb is not None:
                # once: the request lets go of its callback, which often holds the future
                # that holds this response (a cycle that would keep a large response's
                # buffer alive until the cyclic collector runs)
                resp.request.callback = None
                try:
                    cb(resp)
                except Exception:  # a callback bug must not kill the network thread
                    log.exception("error in a response callback for %r", resp.request)
        return done

    def _drain_wakeup(self) -> None:
        # Drain first, then clear the flag: a wakeup() racing with this either left a
        # byte behind (seen by the next select) or was skipped while this thread is awake
        # and about to look at the new state anyway.
        try:
            while self._wake_r.recv(4096):
                pass
        except OSError:
            pass
        self._wakeup_pending = False

    def _next_timeout(self, now: float) -> float:
        t = 1e9
        for conn in self._conns.values():
            if conn.state in _SETUP_STATES:
                t = min(t, conn.connect_deadline_ms - now)
            elif conn.state == READY and conn.reauth_at_ms > now:
                t = min(t, conn.reauth_at_ms - now)
            if conn.in_flight:
                r = conn.in_flight[0]
                t = min(t, r.sent_ms + r.timeout_ms - now)
        return max(t, 0.0)

    def _read(self, conn: _Connection, now: float) -> None:
        sock = conn.sock
        decoder = conn.decoder
        while sock is not None:
            try:  # in place: into the decoder's chunk, or a large response's own buffer
                space = decoder.recv_buffer()
            except ProtocolDecodeError as e:
                self._close_conn(conn, now, NetworkError(f"bad frame from node {conn.node_id}: {e}"))
                return
            want = len(space)
            try:
                n = sock.recv_into(space, want)
            except (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                return
            except OSError as e:
                if conn.tls and conn.state == CHECKING_API_VERSIONS and not conn.api_versions \
                        and isinstance(e, ssl.SSLError) and not isinstance(e, ssl.SSLEOFError):
                    # TLSv1.3: the broker checks the client certificate after the client's
                    # handshake has completed; its refusal arrives as the first read's alert
                    self._tls_failed(conn, now, e)
                    return
                self._close_conn(conn, now, NetworkError(f"recv from node {conn.node_id}: {e}"))
                return
            finally:
                space.release()
            if not n:
                self._close_conn(conn, now, NetworkError(
                    f"connection to node {conn.node_id} closed by the broker"),
                    cause=None if conn.state == READY else
                    "the broker closed the connection during setup (is the listener's "
                    "security.protocol the client's?)")
                return
            self.bytes_received += n
            conn.last_activity_ms = now
            decoder.advance(n)
            while True:
                try:
                    frame = decoder.next_frame()
                except ProtocolDecodeError as e:
                    self._close_conn(conn, now, NetworkError(f"bad frame from node {conn.node_id}: {e}"))
                    return
                if frame is None:
                    break
                if not self._handle_frame(conn, frame, now):
                    return
                del frame
                if conn.sock is None:
                    return
            if n < want and not conn.tls:  # TLS: one record per recv, read to WANT_READ
                return

    def _handle_frame(self, conn: _Connection, frame: memoryview, now: float) -> bool:
        if not conn.in_flight:
            self._close_conn(conn, now, NetworkError("response without a request"))
            return False
        req = conn.in_flight.popleft()
        try:
            api_version = req.api_version
            if req.api_key == ApiKey.API_VERSIONS and len(frame) >= 6 and \
                    int.from_bytes(frame[4:6], "big", signed=True) == ErrorCode.UNSUPPORTED_VERSION:
                api_version = 0  # the broker answered with a v0 body (KIP-511)
            header, body = decode_response(frame, req.api_key, api_version)
        except ProtocolDecodeError as e:
            conn.in_flight.appendleft(req)
            self._close_conn(conn, now, NetworkError(f"undecodable response: {e}"))
            return False
        if header.correlation_id != req.correlation_id:
            conn.in_flight.appendleft(req)
            self._close_conn(conn, now, NetworkError(
                f"correlation id {header.correlation_id} != expected {req.correlation_id}"))
            return False
        throttle = getattr(body, "throttle_time_ms", 0) or 0
        if throttle > 0:
            conn.throttle_until_ms = max(conn.throttle_until_ms, now + throttle)
        self._complete(req, body, None, now)
        return True

    def _complete(self, req: ClientRequest, body: Any, error: KafkaError | None, now: float,
                  timed_out: bool = False) -> None:
        if req.done:
            return
        req.done = True
        req.buffers = None
        self._completed.append(ClientResponse(req, body, error, now, timed_out))

    def _check_timeouts(self, now: float) -> None:
        for conn in list(self._conns.values()):
            if conn.state in _SETUP_STATES and now >= conn.connect_deadline_ms:
                self._close_conn(conn, now, NetworkError(
                    f"connection setup to node {conn.node_id} timed out"), failed=True,
                    cause=self._setup_timeout_cause(conn.state))
                continue
            if conn.in_flight:
                r = conn.in_flight[0]
                if now - r.sent_ms >= r.timeout_ms:
                    self._complete(r, None, RequestTimedOutError(
                        f"no response from node {conn.node_id} within {r.timeout_ms:g} ms"),
                        now, timed_out=True)
                    self._close_conn(conn, now, NetworkError(
                        f"connection to node {conn.node_id} closed after a request timeout"))
            elif (conn.state == READY and self.connections_max_idle_ms >= 0
                  and not conn.send_queue and now - conn.last_activity_ms > self.connections_max_idle_ms):
                self._close_conn(conn, now, NetworkError("idle connection closed"))

    def _setup_timeout_cause(self, state: int) -> str:
        bound = f"{self.connection_setup_timeout_ms:g} ms (socket.connection.setup.timeout.ms)"
        if state == CONNECTING:
            return f"connection timed out after {bound}"
        if state == TLS_HANDSHAKING:
            return f"TLS handshake timed out after {bound}"
        if state == AUTHENTICATING:
            return f"SASL authentication timed out after {bound}"
        return f"no ApiVersions answer within {bound}: is this a Kafka listener?"

    # -- closing -------------------------------------------------------------------------

    def _close_conn(self, conn: _Connection, now: float, error: KafkaError,
                    failed: bool = False, cause: str | None = None, retriable: bool = True) -> None:
        """Close a connection; every request on it completes with ``error``. A connection
        not READY yet (or ``failed``) counts as a failed attempt, of ``cause`` (default:
        the error's message)."""
        was_ready = conn.state == READY
        if conn.sock is not None:
            try:
                self._selector.unregister(conn.sock)
            except (KeyError, ValueError):
                pass
            try:
                conn.sock.close()
            except OSError:
                pass
            conn.sock = None
        conn.mask = 0
        conn.tls_out = None
        pending = list(conn.in_flight) + [r for r, _ in conn.send_queue if not r.expect_response]
        conn.in_flight.clear()
        conn.send_queue.clear()
        conn.last_request = None
        conn.state = DISCONNECTED
        conn.authenticator = None
        conn.reauth_at_ms = _NEVER
        for r in pending:
            self._complete(r, None, error, now)
        if failed or not was_ready:
            if cause is None:
                text = str(error)
                prefix = f"{error.code.name}: " if error.code is not None else ""
                cause = text[len(prefix):] if prefix and text.startswith(prefix) else text
            self._connection_failed(conn, now, cause, retriable)
        else:
            st = self._nodes.setdefault(conn.node_id, _NodeState())
            st.backoff_until_ms = now + self.reconnect_backoff_ms
        if self.metadata_updater is not None:
            self.metadata_updater.handle_disconnect(conn.node_id)

    def disconnect(self, node_id: int, now: float | None = None) -> None:
        conn = self._conns.get(node_id)
        if conn is not None and conn.state != DISCONNECTED:
            self._close_conn(conn, now if now is not None else now_ms(),
                             NetworkError(f"disconnected from node {node_id}"))

    def close(self) -> None:
        """Close every connection; pending requests complete with an error (their
        callbacks run here)."""
        if self._closed:
            return
        now = now_ms()
        self._closing = True  # connections cut here are no failures to record or report
        for conn in list(self._conns.values()):
            if conn.state != DISCONNECTED:
                self._close_conn(conn, now, NetworkError("client closed"))
        done, self._completed = self._completed, []
        for resp in done:
            cb = resp.request.callback
            if cb is not None:
                resp.request.callback = None
                try:
                    cb(resp)
                except Exception:
                    log.exception("error in a response callback")
        self._closed = True
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()

    def state(self, node_id: int) -> str:
        conn = self._conns.get(node_id)
        return _STATE_NAMES[conn.state if conn is not None else DISCONNECTED]
