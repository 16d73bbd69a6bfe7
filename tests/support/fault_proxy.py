"""A fault-injecting TCP proxy for client tests, on 127.0.0.1 only.

``FaultProxy(target_host, target_port)`` listens on an ephemeral loopback port and
forwards every accepted connection to the target. It understands Kafka framing (int32
size + payload; the request's api key is the payload's first int16; responses come back
in request order), so faults can be aimed at one kind of request:

* ``pass_through()``: forward everything (the default).
* ``drop_response(api_key, count=1)``: the next ``count`` responses to requests of
  ``api_key`` are swallowed and both sides of that connection are closed, so the request
  reached (and was handled by) the broker but the client never hears back (I8).
* ``delay(ms)``: hold every chunk for ``ms`` before forwarding it.
* ``bandwidth(kbit_per_s)``: cap the link: each direction, over all connections
  together, forwards at most ``kbit_per_s`` kilobits (1000 bits) a second (a chunk
  leaves once the link has "transmitted" it, then waits out the ``delay``), like netem's
  rate on an interface; ``None`` lifts the cap. With ``delay`` it makes a degraded
  network (E5).
* ``black_hole()``: accept and read, forward nothing either way (request timeouts).
* ``reset()``: close every connection with RST now, and new ones on arrival.

When one side closes, the chunks already queued for the other (held by a delay or the
cap) are forwarded before both sides are closed, as TCP would deliver them.

Safety: only loopback addresses; a single selector thread with bounded loops; every
connection and the listener close on ``stop()``, and the proxy stops by itself after
``max_lifetime_s`` (default 300 s). Counters: ``connections``, ``requests`` (per api key),
``dropped``.

Thread-safety: the mode setters may be called from any thread; the forwarding runs on
the proxy's own thread.
"""

from __future__ import annotations

import collections
import selectors
import socket
import struct
import threading
import time

_SIZE = struct.Struct(">i")
_LINGER_RST = struct.pack("ii", 1, 0)


class _Pair:
    __slots__ = ("client", "server", "c_buf", "s_buf", "pending_keys", "to_client",
                 "to_server", "closed", "eof")

    def __init__(self, client: socket.socket, server: socket.socket) -> None:
        self.client = client
        self.server = server
        self.c_buf = bytearray()  # client -> server bytes not yet framed
        self.s_buf = bytearray()  # server -> client bytes not yet framed
        self.pending_keys: collections.deque[int] = collections.deque()
        self.to_client: collections.deque[tuple[float, bytes]] = collections.deque()
        self.to_server: collections.deque[tuple[float, bytes]] = collections.deque()
        self.closed = False
        self.eof = False  # one side closed: close both once the queued chunks are forwarded


class FaultProxy:
    def __init__(self, target_host: str, target_port: int, *, max_lifetime_s: float = 300.0) -> None:
        if target_host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError("the fault proxy only forwards to loopback addresses")
        self.target = ("127.0.0.1" if target_host == "localhost" else target_host, target_port)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self._listener.setblocking(False)
        self.port = self._listener.getsockname()[1]
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._listener, selectors.EVENT_READ, None)
        self._pairs: list[_Pair] = []
        self._lock = threading.Lock()
        self._mode = "pass"
        self._drop_key: int | None = None
        self._drop_left = 0
        self._delay_s = 0.0
        self._rate_bps: float | None = None  # bytes a second, None: no cap
        self._link_free = {"c": 0.0, "s": 0.0}  # per direction: when the link is idle again
        self._stop = threading.Event()
        self._deadline = time.monotonic() + max_lifetime_s
        self.connections = 0
        self.requests: collections.Counter[int] = collections.Counter()
        self.dropped = 0
        self._thread = threading.Thread(target=self._run, name="fault-proxy", daemon=True)

    # -- control -------------------------------------------------------------------------

    def start(self) -> FaultProxy:
        self._thread.start()
        return self

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def pass_through(self) -> None:
        with self._lock:
            self._mode = "pass"
            self._delay_s = 0.0
            self._rate_bps = None
            self._drop_left = 0

    def drop_response(self, api_key: int, count: int = 1) -> None:
        with self._lock:
            self._mode = "pass"
            self._drop_key = api_key
            self._drop_left = count

    def delay(self, ms: float) -> None:
        with self._lock:
            self._delay_s = ms / 1000.0

    def bandwidth(self, kbit_per_s: float | None) -> None:
        if kbit_per_s is not None and kbit_per_s <= 0:
            raise ValueError("the bandwidth cap must be positive (or None for no cap)")
        with self._lock:
            self._rate_bps = None if kbit_per_s is None else kbit_per_s * 1000 / 8

    def black_hole(self) -> None:
        with self._lock:
            self._mode = "black_hole"

    def reset(self) -> None:
        with self._lock:
            self._mode = "reset"
            for p in self._pairs:
                self._close(p, rst=True)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)

    # -- the loop ------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stop.is_set() and time.monotonic() < self._deadline:
                for key, _mask in self._sel.select(0.01):
                    if key.data is None:
                        self._accept()
                    else:
                        pair, side = key.data
                        self._read(pair, side)
                self._flush_due()
        finally:
            with self._lock:
                for p in list(self._pairs):
                    self._close(p)
            self._sel.close()
            self._listener.close()

    def _accept(self) -> None:
        for _ in range(64):  # bounded
            try:
                c, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            with self._lock:
                mode = self._mode
            if mode == "reset":
                c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RST)
                c.close()
                continue
            try:
                s = socket.create_connection(self.target, timeout=2)
            except OSError:
                c.close()
                continue
            for sock in (c, s):
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pair = _Pair(c, s)
            with self._lock:
                self._pairs.append(pair)
            self._sel.register(c, selectors.EVENT_READ, (pair, "c"))
            self._sel.register(s, selectors.EVENT_READ, (pair, "s"))
            self.connections += 1

    def _read(self, pair: _Pair, side: str) -> None:
        sock = pair.client if side == "c" else pair.server
        try:
            # under a bandwidth cap, small chunks, so that the link is shared in turns
            data = sock.recv(1 << 20 if self._rate_bps is None else 16384)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        with self._lock:
            if not data:
                if pair.to_client or pair.to_server:
                    pair.eof = True  # forward what is queued (delayed or paced) first
                    try:
                        self._sel.unregister(sock)
                    except (KeyError, ValueError):
                        pass
                else:
                    self._close(pair)
                return
            if self._mode == "black_hole":
                return  # read and forget
            now = time.monotonic()
            if self._rate_bps is not None:
                sent = max(now, self._link_free[side]) + len(data) / self._rate_bps
                self._link_free[side] = sent
                due = sent + self._delay_s
            else:
                due = now + self._delay_s
            if side == "c":
                pair.c_buf += data
                self._frames_from_client(pair)
                pair.to_server.append((due, bytes(data)))
            else:
                pair.s_buf += data
                out = self._frames_from_server(pair)
                if out is None:
                    return  # connection dropped
                if out:
                    pair.to_client.append((due, out))

    def _frames_from_client(self, pair: _Pair) -> None:
        buf = pair.c_buf
        while len(buf) >= 6:
            size = _SIZE.unpack_from(buf, 0)[0]
            if len(buf) < 4 + size:
                break
            api_key = struct.unpack_from(">h", buf, 4)[0]
            acks_zero = api_key == 0 and _produce_acks_zero(buf[4:4 + size])
            if not acks_zero:
                pair.pending_keys.append(api_key)
            self.requests[api_key] += 1
            del buf[:4 + size]

    def _frames_from_server(self, pair: _Pair) -> bytes | None:
        buf = pair.s_buf
        out = bytearray()
        while len(buf) >= 4:
            size = _SIZE.unpack_from(buf, 0)[0]
            if len(buf) < 4 + size:
                break
            frame = bytes(buf[:4 + size])
            del buf[:4 + size]
            key = pair.pending_keys.popleft() if pair.pending_keys else -1
            if self._drop_left > 0 and key == self._drop_key:
                self._drop_left -= 1
                self.dropped += 1
                self._close(pair)
                return None
            out += frame
        return bytes(out)

    def _flush_due(self) -> None:
        now = time.monotonic()
        with self._lock:
            for pair in list(self._pairs):
                for q, sock in ((pair.to_server, pair.server), (pair.to_client, pair.client)):
                    while q and q[0][0] <= now and not pair.closed:
                        data = q.popleft()[1]
                        try:
                            sock.setblocking(True)
                            sock.settimeout(2)
                            sock.sendall(data)
                            sock.setblocking(False)
                        except OSError:
                            self._close(pair)
                if pair.eof and not pair.to_client and not pair.to_server:
                    self._close(pair)

    def _close(self, pair: _Pair, rst: bool = False) -> None:
        if pair.closed:
            return
        pair.closed = True
        for sock in (pair.client, pair.server):
            try:
                self._sel.unregister(sock)
            except (KeyError, ValueError):
                pass
            try:
                if rst:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RST)
                sock.close()
            except OSError:
                pass
        if pair in self._pairs:
            self._pairs.remove(pair)


def _produce_acks_zero(payload: bytes) -> bool:
    """Whether a Produce request (v3+ header v1/v2) has acks=0 (no response comes)."""
    try:
        pos = 8
        cid_len = struct.unpack_from(">h", payload, pos)[0]
        pos += 2 + max(cid_len, 0)
        version = struct.unpack_from(">h", payload, 2)[0]
        if version >= 9:
            pos += 1  # empty header tags
            n = payload[pos]  # compact nullable transactional id (small ints only)
            pos += 1 + max(n - 1, 0)
        else:
            tl = struct.unpack_from(">h", payload, pos)[0]
            pos += 2 + max(tl, 0)
        return struct.unpack_from(">h", payload, pos)[0] == 0
    except (struct.error, IndexError):
        return False
