"""The TCP front end: listeners, connections, framing and ordered responses.

Owns the sockets. One acceptor thread per listener (``listeners`` in server.properties,
``NAME://host:port``; port 0 binds a free port, reported by ``bound_address``), and one
thread per accepted connection, which loops: receive into the connection's ``FrameDecoder``
(its ``recv_buffer``: no copy after the kernel's), then take the complete frames out ONE AT
A TIME, hand each to the request handler (``KafkaApis.handle``) and write its response
before taking the next. So:

* responses leave in request order, also when a Fetch long-polls (Kafka "mutes" a
  connection the same way while a request is in progress);
* pipelining works: clients send up to 5 requests ahead (librdkafka, kafka-python); the
  kernel's socket buffer and the decoder's buffer hold them (read-ahead) and one receive
  often yields several frames, served without another system call;
* memory per connection is bounded by one receive chunk plus one partial frame: a size
  prefix above ``socket.request.max.bytes`` or negative closes the connection as soon as
  its 4 bytes arrive, before anything is allocated for the frame (F1) (a listener in
  ``initial_frame_limits``, i.e. SASL before authentication, starts with a lower limit on
  ``Connection.decoder`` that the SASL gate raises once the client is authenticated); a frame is only
  ever as large as the bytes actually received, and while a request is being served
  nothing more is read, so TCP back-pressure reaches a client that sends too fast.
  ``queued.max.requests`` is accepted for compatibility; no queue exists to bound;
* a throttled request (a client quota, ``broker.server.quota``) mutes its connection:
  the response, carrying ``throttle_time_ms``, is sent at once, then the connection's
  thread serves nothing more (pipelined requests wait in the decoder and the kernel) until
  the quota manager's reaper ends the throttle (``throttle_callback``);
* a handler result of ``NO_RESPONSE`` (acks=0) writes nothing; ``CLOSE_CONNECTION`` (bad
  input) closes the connection; every exception is contained to its connection.

Why this model (measured on 2 vCPUs, server CPU per request from /proc, medians of 4
runs, one raw client pipelining Produce v8 requests of one small batch each):

    model                               window 1        window 5        window 50
    thread per connection (chosen)      5.9k/s  97 us   9.0k/s  85 us   10.8k/s  75 us
    reader + worker thread, queue       5.3k/s 110 us   5.9k/s 110 us    6.7k/s 115 us
    asyncio, handler inline             4.0k/s 145 us   7.8k/s 100 us    8.0k/s  85 us

With 100 KB requests (1000 records) all three are within noise (2.1-2.9k req/s,
~250 us). The reader/worker split pays a thread hand-off per request (GIL ping-pong);
asyncio pays its stream machinery; both buy nothing here, because the GIL serialises
request handling anyway and the kernel already reads ahead.

Sending: a response is a list of buffers (``encode_response``) written with
``socket.sendmsg`` (no joining copy); parts that are file slices (``FileSlice`` of a
segment, duck-typed by ``fileno()``: Fetch records of at least 16 KiB) are sent with
``os.sendfile`` straight from the page cache (measured: a 210 MB consume cost the server
200 ms of CPU with sendfile, 280 ms with pread + sendmsg). If a slice turns out shorter
than promised (the file changed under it) the frame cannot be completed and the
connection is closed.

Timeouts: a connection with nothing received for ``connections.max.idle.ms`` is closed
(the blocking receive fails through ``SO_RCVTIMEO``: no poll call before each receive);
a send blocked that long (a client that stopped reading) fails through ``SO_SNDTIMEO``
and resets the connection (``SO_LINGER`` 0: a plain close would leave the unsent bytes,
and the FIN behind them, queued in an orphaned socket that the client never drains).

TLS (SSL and SASL_SSL listeners, ``tls`` contexts from ``broker.server.ssl_context``): the
connection's thread does the handshake (``_handshake``: it blocks no other connection),
bounded by ``SSL_HANDSHAKE_TIMEOUT_MS`` or ``connections.max.idle.ms`` if shorter; a
failure closes the connection, logged at INFO. Then the socket runs with a Python timeout
of ``connections.max.idle.ms`` (blocking SSL sockets retry after SO_RCVTIMEO for ever), and
sends go through ``_send_tls``: no sendmsg or sendfile through TLS, so buffers are staged
into ``TLS_WRITE_CHUNK`` writes and file slices read into the stage with ``os.preadv``. A
large frame is received a whole chunk at a time (TLS yields one 16-KiB record per receive).

Thread-safety: ``SocketServer`` methods are called by the broker's main thread; the set
of connections is guarded by a lock; a connection's socket and decoder belong to its own
thread; ``Connection.close`` may be called from any thread (it only shuts the socket
down; the connection's thread closes it, so the descriptor is never reused under it).
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from broker.config import SECURITY_PROTOCOLS
from broker.protocol import FrameDecoder, ProtocolDecodeError
from broker.server.handlers import CLOSE_CONNECTION, NO_RESPONSE
from broker.server.quota.connection_quotas import ConnectionThrottledError, TooManyConnectionsError
from broker.server.ssl_context import ANONYMOUS, NoMatchingRule, PrincipalMapper, peer_principal

log = logging.getLogger(__name__)

# Receives: straight into the connection's FrameDecoder (``recv_buffer`` / ``advance``):
# one kernel copy per byte, no copy after. The decoder's chunks and a large frame's own
# buffer are anonymous mappings: only pages that received bytes become resident, so a
# client that announces a large frame and sends a few bytes costs a few KiB (measured
# before: 2000 connections sending a 100 MiB prefix and 100 bytes each held 546 MiB).
# Fewer buffers than IOV_MAX (1024 on Linux) per sendmsg call.
MAX_IOV = 512
# Types that are always plain byte buffers (anything else may be a file slice: fileno()).
_PLAIN_BUFFERS = frozenset((bytes, bytearray, memoryview))
ACCEPT_BACKLOG = 512
# A failing accept (EMFILE at the descriptor limit) is retried every 100 ms and warned about
# at most once per this many seconds.
ACCEPT_WARN_INTERVAL_S = 10.0
# TLS sends (no sendmsg / sendfile through an SSL socket): small buffers are copied into a
# staging buffer of TLS_WRITE_CHUNK bytes and written with one SSL_write each (file slices
# are read into it with os.preadv); buffers of TLS_DIRECT_MIN bytes or more are written as
# they are. Measured with bench/broker_tls.py and broker_ingest.py --security-protocol SASL_SSL
# (docs/benchmarks.md): stages of 64 KiB and 1 MiB were no faster than 256 KiB, kernel-autotuned send
# buffers slower; the path costs about the encryption plus the preadv copy.
TLS_WRITE_CHUNK = 256 * 1024
TLS_DIRECT_MIN = 64 * 1024
# A TLS handshake must complete within this many ms (and within connections.max.idle.ms):
# a client that connects and sends nothing does not hold its thread longer.
SSL_HANDSHAKE_TIMEOUT_MS = 10000


class Listener(NamedTuple):
    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"  # PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL


# errno -> what a bind failure means, and what to do about it
_BIND_HINTS = {
    errno.EADDRINUSE: "address already in use (another broker or program holds the port; "
                      "set listeners= to another port)",
    errno.EACCES: "permission denied (ports below 1024 need privileges; set listeners= to "
                  "a port above 1023)",
    errno.EADDRNOTAVAIL: "address not available (the host is not an address of this machine; "
                         "set listeners= to one of its addresses, or 0.0.0.0)",
}


class ListenerBindError(OSError):
    """A listener could not bind or listen; ``str()`` is one line naming the listener,
    its address and the cause: ``cannot listen on PLAINTEXT://127.0.0.1:9092: address
    already in use (...)``. ``errno`` is the cause's."""

    def __init__(self, listener: Listener, cause: OSError) -> None:
        super().__init__(cause.errno, cause.strerror)
        self.listener = listener
        host = f"[{listener.host}]" if ":" in listener.host else listener.host
        if isinstance(cause, socket.gaierror):
            reason = f"cannot resolve host {listener.host!r}: {cause.strerror}"
        else:
            hint = _BIND_HINTS.get(cause.errno) if cause.errno is not None else None
            reason = hint or (cause.strerror or str(cause)).lower()
        self.message = f"cannot listen on {listener.name}://{host}:{listener.port}: {reason}"

    def __str__(self) -> str:
        return self.message


def parse_listeners(values: list[str], protocol_map: dict[str, str] | None = None) -> list[Listener]:
    """``NAME://host:port`` entries (already validated by ``broker.config``), each with its
    security protocol from ``protocol_map`` (``listener.security.protocol.map``, Kafka's
    default when None: each protocol's name as a listener name)."""
    if protocol_map is None:
        protocol_map = {p: p for p in SECURITY_PROTOCOLS}
    out = []
    for item in values:
        name, rest = item.split("://", 1)
        host, _, port = rest.rpartition(":")
        out.append(Listener(name.upper(), host.strip("[]"), int(port), protocol_map.get(name.upper(), "")))
    names = [listener.name for listener in out]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate listener names in {values}")
    for listener in out:
        if not listener.security_protocol:
            raise ValueError(f"no security protocol defined for listener {listener.name} in "
                             f"listener.security.protocol.map")
    return out


class Connection:
    """One client connection, served by one thread (model in the module docstring)."""

    def __init__(self, server: SocketServer, sock: socket.socket, listener: Listener, number: int) -> None:
        self.server = server
        self.sock = sock
        self.listener = listener.name
        # PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL; the principal is Kafka's default for
        # the listener (User:ANONYMOUS; on TLS with a client certificate User:<subject DN>),
        # for the authorizer; SASL replaces it once authenticated.
        self.security_protocol = listener.security_protocol
        self.principal = ANONYMOUS
        self.local_address = sock.getsockname()[:2]
        self.peer_address = sock.getpeername()[:2]
        self.id = (f"{self.local_address[0]}:{self.local_address[1]}-"
                   f"{self.peer_address[0]}:{self.peer_address[1]}-{number}")
        self.seen_apis: set[tuple[int, int]] = set()
        self.client_software: tuple[str, str] | None = None
        self.decoder: FrameDecoder | None = None  # set by the connection's thread (SASL widens its limit)
        # TLS listeners: the staging buffer of _send_tls (b"" until the first send), None on plain sockets
        self._stage: memoryview | bytes | None = b"" if listener.name in server.tls else None
        self._closing = False
        self._unmuted = threading.Event()  # cleared while a quota throttle mutes the connection
        self._unmuted.set()
        self._mutes = 0
        self._mute_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"kafka-connection-{number}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        """Make the connection's thread stop soon (from any thread): a blocked receive or
        send fails at once; a request being handled completes first. The thread itself
        closes the socket."""
        if self._closing:
            return
        self._closing = True
        self._unmuted.set()  # a muted thread wakes up and sees _closing
        try:  # socket.socket's shutdown: SSLSocket.shutdown would also drop its TLS state
            socket.socket.shutdown(self.sock, socket.SHUT_RDWR)
        except OSError:
            pass

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def _run(self) -> None:
        try:
            tls = self.server.tls.get(self.listener)
            if tls is not None and not self._handshake(*tls):
                return
            self._serve()
        except OSError as exc:
            if not self._closing:
                log.debug("connection %s: %s", self.id, exc)
        except Exception:  # noqa: BLE001 - contain to this connection
            log.exception("connection %s failed", self.id)
        finally:
            self._closing = True
            try:
                self.sock.close()
            except OSError:
                pass
            self.server._forget(self)

    def _handshake(self, context: ssl.SSLContext, mapper: PrincipalMapper) -> bool:
        """The TLS handshake, on this connection's thread (it blocks no other connection),
        bounded by the handshake timeout. A failure (garbage instead of a ClientHello, a
        client certificate from an unknown CA, a client that sends nothing) is logged at
        INFO and closes this connection only."""
        timeout_ms = self.server.ssl_handshake_timeout_ms
        try:
            self.sock.settimeout(timeout_ms / 1000.0)
            self.sock = context.wrap_socket(self.sock, server_side=True, do_handshake_on_connect=False)
            if self._closing:
                return False
            self.sock.do_handshake()
            # An SSL socket in blocking mode retries SSL_read after SO_RCVTIMEO's EAGAIN for
            # ever (CPython's _ssl loop): the idle bound is the socket's own timeout instead
            # (TimeoutError from recv or send after connections.max.idle.ms).
            idle_ms = self.server.connections_max_idle_ms
            self.sock.settimeout(idle_ms / 1000.0 if idle_ms > 0 else None)
            self.principal = peer_principal(self.sock, mapper)
        except TimeoutError:
            log.info("closing connection %s on %s: no TLS handshake within %d ms", self.id, self.listener,
                     timeout_ms)
            return False
        except (ssl.SSLError, NoMatchingRule) as exc:
            log.info("closing connection %s on %s: TLS handshake failed: %s", self.id, self.listener,
                     getattr(exc, "reason", None) or exc)
            return False
        except OSError as exc:
            if not self._closing:
                log.info("closing connection %s on %s: TLS handshake failed: %s", self.id, self.listener, exc)
            return False
        cipher = self.sock.cipher()  # set once the handshake is done
        log.debug("connection %s on %s: %s %s, principal %s", self.id, self.listener, self.sock.version(),
                  cipher[0] if cipher is not None else None, self.principal)
        return True

    # --- throttling (quotas): the channel is muted while a throttle runs ---

    def throttle_callback(self) -> _ConnectionThrottle:
        """A quota manager's ``ThrottleCallback`` for this connection: while a throttle
        runs, the connection's thread reads and serves nothing more (its response, with
        ``throttle_time_ms``, has been sent), as Kafka mutes a throttled channel."""
        return _ConnectionThrottle(self)

    def _wait_unmuted(self) -> None:
        while not self._closing and not self._unmuted.wait(1.0):
            pass

    def _serve(self) -> None:
        server = self.server
        handler = server.handler
        sock = self.sock
        # Frame limit: socket.request.max.bytes, or the listener's initial_frame_limits entry
        # (SASL listeners: sasl.server.max.receive.size until the SASL gate widens it).
        decoder = self.decoder = FrameDecoder(server.initial_frame_limits.get(self.listener, server.max_request_bytes))
        idle_ms = server.connections_max_idle_ms
        tls = self._stage is not None
        while not self._closing:
            try:  # blocks at most connections.max.idle.ms (SO_RCVTIMEO, set by _configure)
                try:
                    space = decoder.recv_buffer()  # in place: the chunk, or a large frame's own buffer
                except ProtocolDecodeError as exc:  # the decoder failed already (F1)
                    log.info("closing connection %s: %s", self.id, exc)
                    return
                want = len(space)
                n = sock.recv_into(space, want)
                if tls and n and decoder.bytes_wanted >= want:  # one TLS record (16 KiB) per receive:
                    while n < want:  # fill a large frame's buffer first (one push per chunk)
                        got = sock.recv_into(space[n:], want - n)
                        if not got:
                            break
                        n += got
                space.release()
            except (BlockingIOError, TimeoutError):  # TimeoutError: the same, through TLS
                log.debug("closing connection %s: idle for %d ms", self.id, idle_ms)
                return
            if not n:
                return
            try:
                decoder.advance(n)
                while not self._closing:
                    frame = decoder.next_frame()  # frames one at a time: no list of copies
                    if frame is None:
                        break
                    result = handler(self, frame)
                    del frame
                    if result is CLOSE_CONNECTION:
                        return
                    if result is not NO_RESPONSE:
                        try:
                            self.send(result)
                        except (BlockingIOError, TimeoutError):  # SO_SNDTIMEO: the client stopped reading
                            log.info("closing connection %s: a response could not be sent for %d ms",
                                     self.id, idle_ms)
                            self._abort()
                            return
                    del result
                    if not self._unmuted.is_set():  # throttled: read nothing more until released
                        self._wait_unmuted()
            except ProtocolDecodeError as exc:  # a size prefix < 0 or above the limit (F1)
                log.info("closing connection %s: %s", self.id, exc)
                return

    def _abort(self) -> None:
        """Make the coming close a reset (SO_LINGER 0): the unsent bytes of a client that
        stopped reading are dropped at once instead of being left queued, with the FIN
        behind them, in an orphaned socket the client never drains."""
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass

    # --- sending ---

    def send(self, buffers: list[Any]) -> None:
        """Write one response: byte buffers with sendmsg, file slices with sendfile (through
        TLS: ``_send_tls``)."""
        if self._stage is not None:
            self._send_tls(buffers)
            return
        plain = _PLAIN_BUFFERS
        for part in buffers:
            if type(part) not in plain:
                break
        else:  # only byte buffers (every response but a large Fetch): one sendmsg, usually whole
            if len(buffers) <= MAX_IOV:
                sent = self.sock.sendmsg(buffers)
                if sent < sum([p.nbytes if type(p) is memoryview else len(p) for p in buffers]):
                    self._sendmsg_all(buffers, sent)
            else:
                self._sendmsg_all(buffers)
            return
        pending: list[Any] = []
        for part in buffers:
            if type(part) not in plain and hasattr(part, "fileno"):
                if pending:
                    self._sendmsg_all(pending)
                    pending = []
                self._sendfile_all(part)
            else:
                pending.append(part)
        if pending:
            self._sendmsg_all(pending)

    def _send_tls(self, buffers: list[Any]) -> None:
        """Write one response through TLS in large SSL writes (see TLS_WRITE_CHUNK)."""
        stage = self._stage
        if not isinstance(stage, memoryview):  # b"" until the first TLS write
            stage = self._stage = memoryview(bytearray(TLS_WRITE_CHUNK))
        sendall = self.sock.sendall
        plain = _PLAIN_BUFFERS
        fill = 0
        for part in buffers:
            if type(part) not in plain and hasattr(part, "fileno"):
                src, offset, count = part.fileno(), part.position, part.size_in_bytes
                while count > 0:
                    if fill == TLS_WRITE_CHUNK:
                        sendall(stage)
                        fill = 0
                    n = os.preadv(src, [stage[fill:fill + min(count, TLS_WRITE_CHUNK - fill)]], offset)
                    if n == 0:
                        raise OSError(errno.EIO, f"file slice of {part} ended {count} bytes early")
                    fill += n
                    offset += n
                    count -= n
                continue
            view = part if type(part) is memoryview else memoryview(part)
            if view.format != "B":
                view = view.cast("B")
            size = view.nbytes
            if size >= TLS_DIRECT_MIN:
                if fill:
                    sendall(stage[:fill])
                    fill = 0
                sendall(view)
                continue
            if fill + size > TLS_WRITE_CHUNK:
                sendall(stage[:fill])
                fill = 0
            stage[fill:fill + size] = view
            fill += size
        if fill:
            sendall(stage[:fill])

    def _sendmsg_all(self, buffers: list[Any], skip: int = 0) -> None:
        """Send ``buffers`` whole, less their first ``skip`` bytes (already sent)."""
        views = [memoryview(b).cast("B") if not isinstance(b, memoryview) or b.format != "B" else b
                 for b in buffers]
        views = [v for v in views if v.nbytes]
        while skip and views:
            if skip >= views[0].nbytes:
                skip -= views.pop(0).nbytes
            else:
                views[0] = views[0][skip:]
                skip = 0
        sock = self.sock
        while views:
            batch = views[:MAX_IOV]
            sent = sock.sendmsg(batch)
            i = 0
            while i < len(batch) and sent >= batch[i].nbytes:
                sent -= batch[i].nbytes
                i += 1
            if i < len(batch) and sent:
                views[i] = views[i][sent:]
            del views[:i]

    def _sendfile_all(self, part: Any) -> None:
        fd = self.sock.fileno()
        offset = part.position
        count = part.size_in_bytes
        src = part.fileno()
        while count > 0:
            sent = os.sendfile(fd, src, offset, count)
            if sent == 0:
                raise OSError(errno.EIO, f"file slice of {part} ended {count} bytes early")
            offset += sent
            count -= sent


class _ConnectionThrottle:
    """Mutes a connection from ``start_throttling`` to ``end_throttling`` (nested throttles
    of several quota types count: the connection is unmuted when the last one ends)."""

    __slots__ = ("conn",)

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def start_throttling(self) -> None:
        c = self.conn
        with c._mute_lock:
            c._mutes += 1
            c._unmuted.clear()

    def end_throttling(self) -> None:
        c = self.conn
        with c._mute_lock:
            c._mutes = max(0, c._mutes - 1)
            if c._mutes == 0:
                c._unmuted.set()


class SocketServer:
    """Listeners and their connections (threading model in the module docstring)."""

    def __init__(self, listeners: list[Listener], handler: Callable[[Connection, memoryview], Any], *,
                 max_request_bytes: int = 104857600, queued_max_requests: int = 500,
                 send_buffer_bytes: int = 102400, receive_buffer_bytes: int = 102400,
                 connections_max_idle_ms: int = 600000,
                 tls: dict[str, tuple[ssl.SSLContext, PrincipalMapper]] | None = None,
                 ssl_handshake_timeout_ms: int = SSL_HANDSHAKE_TIMEOUT_MS,
                 initial_frame_limits: dict[str, int] | None = None,
                 connection_quotas: Any = None) -> None:
        if not listeners:
            raise ValueError("at least one listener is needed")
        self.listeners = listeners
        self.handler = handler
        self.max_request_bytes = max_request_bytes
        self.queued_max_requests = max(1, queued_max_requests)
        self.send_buffer_bytes = send_buffer_bytes
        self.receive_buffer_bytes = receive_buffer_bytes
        self.connections_max_idle_ms = connections_max_idle_ms
        self.initial_frame_limits = dict(initial_frame_limits or {})  # listener -> bytes, before auth
        self.connection_quotas: Any = connection_quotas  # quota.connection_quotas.ConnectionQuotas, or None
        # listener name -> (server context, principal mapper) for SSL and SASL_SSL listeners
        self.tls = dict(tls or {})
        missing = [li.name for li in listeners if li.security_protocol in ("SSL", "SASL_SSL")
                   and li.name not in self.tls]
        if missing:
            raise ValueError(f"no TLS context for listener(s) {', '.join(missing)}")
        if connections_max_idle_ms > 0:
            ssl_handshake_timeout_ms = min(ssl_handshake_timeout_ms, connections_max_idle_ms)
        self.ssl_handshake_timeout_ms = ssl_handshake_timeout_ms
        self._sockets: dict[str, socket.socket] = {}
        self._bound: dict[str, tuple[str, int]] = {}
        self._acceptors: list[threading.Thread] = []
        self._connections: set[Connection] = set()
        self._lock = threading.Lock()
        self._counter = 0
        self._stopping = False

    # --- lifecycle ---

    def startup(self) -> None:
        """Bind and listen on every listener (raises ``ListenerBindError``, an OSError naming
        the listener, e.g. address in use), then start accepting."""
        try:
            for listener in self.listeners:
                try:
                    sock = self._bind(listener)
                except OSError as exc:
                    raise ListenerBindError(listener, exc) from exc
                self._sockets[listener.name] = sock
                host, port = sock.getsockname()[:2]
                self._bound[listener.name] = (host, port)
        except BaseException:
            for sock in self._sockets.values():
                sock.close()
            raise
        for listener in self.listeners:
            t = threading.Thread(target=self._accept_loop, args=(listener,),
                                 name=f"kafka-acceptor-{listener.name}", daemon=True)
            t.start()
            self._acceptors.append(t)

    @staticmethod
    def _bind(listener: Listener) -> socket.socket:
        host = listener.host
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        if host == "":
            family = socket.AF_INET6 if socket.has_dualstack_ipv6() else socket.AF_INET
            sock = socket.create_server(("", listener.port), family=family, backlog=ACCEPT_BACKLOG,
                                        reuse_port=False, dualstack_ipv6=family == socket.AF_INET6)
            return sock
        infos = socket.getaddrinfo(host, listener.port, 0, socket.SOCK_STREAM, 0, socket.AI_PASSIVE)
        family, _, _, _, address = infos[0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.listen(ACCEPT_BACKLOG)
        except BaseException:
            sock.close()
            raise
        return sock

    def bound_address(self, listener_name: str) -> tuple[str, int]:
        """(host, port) a listener is bound to (the real port when 0 was configured)."""
        return self._bound[listener_name]

    @property
    def bound_addresses(self) -> dict[str, tuple[str, int]]:
        return dict(self._bound)

    def stop_accepting(self) -> None:
        self._stopping = True
        for sock in self._sockets.values():
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
            except OSError:
                pass
            sock.close()
        for t in self._acceptors:
            t.join(5)

    def shutdown(self, timeout: float = 30.0) -> None:
        """Stop accepting, close every connection and wait for their threads (so that no
        handler is still appending when the logs are closed)."""
        if not self._stopping:
            self.stop_accepting()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            conn.close()
        deadline = time.monotonic() + timeout
        for conn in connections:
            conn.join(max(deadline - time.monotonic(), 0.1))

    @property
    def connection_count(self) -> int:
        with self._lock:
            return len(self._connections)

    # --- accepting ---

    def _accept_loop(self, listener: Listener) -> None:
        sock = self._sockets[listener.name]
        failures, warned = 0, -ACCEPT_WARN_INTERVAL_S
        while not self._stopping:
            try:
                client, _ = sock.accept()
            except OSError as exc:
                if self._stopping:
                    return
                # EMFILE and friends: let connections close. Retried every 0.1 s; warned once
                # per ACCEPT_WARN_INTERVAL_S (at the descriptor limit it lasts as long as the
                # connections holding it: a warning per retry flooded the log, 10 lines a second)
                failures += 1
                now = time.monotonic()
                if now - warned >= ACCEPT_WARN_INTERVAL_S:
                    log.warning("accept on %s failed: %s (%d failures since the last warning; retrying every "
                                "100 ms)", listener.name, exc, failures)
                    failures, warned = 0, now
                time.sleep(0.1)
                continue
            if not self._admit(listener, client):
                continue
            try:
                self._configure(client)
                with self._lock:
                    if self._stopping:
                        client.close()
                        return
                    self._counter += 1
                    conn = Connection(self, client, listener, self._counter)
                    self._connections.add(conn)
                conn.start()
            except Exception as exc:  # noqa: BLE001 - one bad accept must not stop the listener
                self._uncount(listener.name, client)
                log.info("could not set up a connection on %s: %s", listener.name, exc)
                try:
                    client.close()
                except OSError:
                    pass

    def _configure(self, client: socket.socket) -> None:
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.send_buffer_bytes > 0:
            client.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer_bytes)
        if self.receive_buffer_bytes > 0:
            client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer_bytes)
        if self.connections_max_idle_ms > 0:
            seconds, ms = divmod(self.connections_max_idle_ms, 1000)
            timeout = struct.pack("ll", seconds, ms * 1000)
            client.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeout)
            client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeout)

    def _forget(self, conn: Connection) -> None:
        with self._lock:
            self._connections.discard(conn)
        if self.connection_quotas is not None:
            self.connection_quotas.dec(conn.listener, conn.peer_address[0])

    # --- connection quotas (broker.server.quota.connection_quotas) ---

    def _admit(self, listener: Listener, client: socket.socket) -> bool:
        """Count a new connection (the acceptor may block here for a slot); False: it was
        refused (closed now, or after its IP's throttle)."""
        quotas = self.connection_quotas
        if quotas is None:
            return True
        try:
            ip = client.getpeername()[0]
        except OSError:
            client.close()
            return False
        try:
            quotas.inc(listener.name, ip)
            return True
        except TooManyConnectionsError as exc:
            log.info("closing connection from %s on %s: %s", ip, listener.name, exc)
            quotas.dec(listener.name, ip)
        except ConnectionThrottledError as exc:  # held, then closed, as Kafka's delayed close
            log.debug("throttling connection from %s on %s: %s", ip, listener.name, exc)
            timer = threading.Timer(exc.throttle_ms / 1000.0, client.close)
            timer.daemon = True
            timer.start()
            return False
        client.close()
        return False

    def _uncount(self, listener: str, client: socket.socket) -> None:
        if self.connection_quotas is not None:
            try:
                self.connection_quotas.dec(listener, client.getpeername()[0])
            except OSError:
                pass
