"""The TLS steps of ``NetworkClient`` (``broker.client.network``): a mixin, i.e. a part of
that class kept in its own module, using its connection fields and helpers.

Owns:

* ``_handshake``: one non-blocking ``do_handshake`` step of a connection in state
  TLS_HANDSHAKING (WANT_READ / WANT_WRITE set the selector mask; done: on to ApiVersions
  through ``_connected``).
* ``_tls_failed``: a failed handshake, whatever the cause (the peer's alert, a certificate
  that does not verify, a host name mismatch, a PLAINTEXT listener resetting the
  ClientHello), is a non-retriable ``SslAuthenticationError``, as Kafka's
  SslTransportLayer: kept for ``take_authentication_error()``, handed to the metadata
  updater, and the connection closes as a failed one (backoff) whose cause, ``TLS
  handshake failed: ...``, ``NetworkClient.connection_failures`` keeps.
* ``_write_tls``: ``_write`` through TLS. An SSL socket has no ``sendmsg``: a request's
  buffers are joined into chunks of about ``TLS_WRITE_CHUNK`` bytes (a buffer that large is
  written as it is); a chunk that met WANT_WRITE stays in ``conn.tls_out`` and is written
  again as is (OpenSSL's rule for retried writes).

Thread-safety: as ``NetworkClient``: the polling thread only.
"""

from __future__ import annotations

import logging
import selectors
import ssl
from typing import Any

from broker.client.errors import NetworkError, SslAuthenticationError

log = logging.getLogger("broker.client.network")

# Through TLS: buffers are joined into writes of about this size (one SSL_write each).
TLS_WRITE_CHUNK = 256 * 1024


class TlsConnectionMixin:
    """TLS steps of ``NetworkClient`` (module docstring)."""

    _auth_error: Any
    metadata_updater: Any
    bytes_sent: int

    def _handshake(self, conn: Any, now: float) -> None:
        """One non-blocking step of the TLS handshake."""
        try:
            conn.sock.do_handshake()
        except ssl.SSLWantReadError:
            self._set_mask(conn, selectors.EVENT_READ)
            return
        except ssl.SSLWantWriteError:
            self._set_mask(conn, selectors.EVENT_WRITE)
            return
        except (ssl.SSLError, OSError) as e:
            self._tls_failed(conn, now, e)
            return
        conn.last_activity_ms = now
        log.debug("TLS to node %s: %s %s", conn.node_id, conn.sock.version(), conn.sock.cipher()[0])
        self._connected(conn, now)

    def _tls_failed(self, conn: Any, now: float, exc: BaseException) -> None:
        if isinstance(exc, ssl.SSLCertVerificationError):
            reason = f"certificate verify failed: {exc.verify_message or exc.reason}"
        elif isinstance(exc, ssl.SSLError):
            reason = exc.reason or str(exc)
        else:
            reason = str(exc) or type(exc).__name__
        # As Kafka's SslTransportLayer: a handshake that fails in any way, the peer closing
        # or resetting the connection included (a PLAINTEXT listener does that when it
        # reads a ClientHello), is an authentication failure, not a network error to retry.
        hint = "" if isinstance(exc, ssl.SSLCertVerificationError) else \
            " (is this a TLS listener? security.protocol=SSL needs one)"
        error = SslAuthenticationError(
            f"SSL handshake with node {conn.node_id} ({conn.host}:{conn.port}) failed: {reason}{hint}")
        self._auth_error = error
        updater = self.metadata_updater
        if updater is not None and hasattr(updater, "handle_authentication_failure"):
            updater.handle_authentication_failure(error)
        # remembered (and logged once) as the connection's failure, not retried
        self._close_conn(conn, now, error, failed=True, cause=f"TLS handshake failed: {reason}{hint}",
                         retriable=False)

    def _write_tls(self, conn: Any, now: float) -> None:
        """``_write`` through TLS: chunks of about TLS_WRITE_CHUNK bytes; a chunk that met
        WANT_WRITE stays in ``tls_out`` and is written again as is."""
        q = conn.send_queue
        while q and conn.sock is not None:
            req, views = q[0]
            if conn.tls_out is None:
                if len(views) == 1 or views[0].nbytes >= TLS_WRITE_CHUNK:
                    conn.tls_out, conn.tls_out_views = views[0], 1
                else:
                    size = count = 0
                    for v in views:
                        if size + v.nbytes > TLS_WRITE_CHUNK and count:
                            break
                        size += v.nbytes
                        count += 1
                    conn.tls_out = memoryview(b"".join(list(views)[:count]))
                    conn.tls_out_views = count
            try:
                n = conn.sock.send(conn.tls_out)
            except (ssl.SSLWantWriteError, ssl.SSLWantReadError, BlockingIOError, InterruptedError):
                break
            except OSError as e:
                self._close_conn(conn, now, NetworkError(f"send to node {conn.node_id}: {e}"))
                return
            self.bytes_sent += n
            if n < conn.tls_out.nbytes:  # a partial write (not OpenSSL's default): the rest later
                conn.tls_out = conn.tls_out[n:]
                continue
            conn.tls_out = None
            for _ in range(conn.tls_out_views):
                views.popleft()
            if views:
                continue
            q.popleft()
            req.written = True
            req.sent_ms = now
            req.buffers = None
            if not req.expect_response:
                self._complete(req, None, None, now)
        conn.last_activity_ms = now
        if conn.sock is not None:
            self._set_mask(conn, selectors.EVENT_READ | selectors.EVENT_WRITE if q
                           else selectors.EVENT_READ)
