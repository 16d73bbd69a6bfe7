"""The Schema Registry's HTTP listeners: the standard library's threading HTTP server,
one per URL of ``schema.registry.listeners``, feeding ``RegistryApi``.

Per request:

1. the body is read up to ``schema.registry.max.request.bytes`` (a larger
   ``Content-Length`` is answered 413 without reading it; a missing one on a POST or PUT
   reads nothing);
2. with ``authentication.method=BASIC`` an ``Authorization: Basic`` header is checked
   against the broker's SASL credentials (``BasicAuthenticator``: the PLAIN users of every
   SASL listener, then the SCRAM-SHA-256/512 credentials); none or wrong: 401 with
   ``WWW-Authenticate: Basic realm="SchemaRegistry"``. The principal is ``User:<name>``;
3. ``RegistryApi.handle`` answers; JSON bodies go out as
   ``application/vnd.schemaregistry.v1+json`` (the ``/schema`` routes as text).

Any content type is accepted on requests (Confluent's, ``application/json``, none). An
``https://`` listener serves TLS with the broker's key store (``ssl.keystore.*``, or
``listener.name.schema_registry.ssl.*``), ``ssl.client.auth`` included.

Invariants: a request never takes the server down (every failure is an answer); a
connection is served by its own daemon thread, closed after ``IDLE_TIMEOUT_S`` without a
byte (an idle keep-alive connection, or a body that stops arriving); ``close()`` stops
every listener.

Thread-safety: handlers run on per-connection threads; they share only the API (whose
store locks) and the authenticator (read-only, over the thread-safe credential store).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import logging
import ssl
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from broker.protocol.scram import MECHANISMS, client_key, salted_password, stored_key
from broker.server.registry.api import RawText, RegistryApi

log = logging.getLogger(__name__)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
IDLE_TIMEOUT_S = 120  # seconds a connection may sit idle (between requests or inside a body)
REALM = 'Basic realm="SchemaRegistry"'


class BasicAuthenticator:
    """HTTP Basic against the broker's credentials: ``plain_users`` (user -> password of
    the PLAIN login modules) and ``scram`` (the ``CredentialStore``, or None)."""

    def __init__(self, plain_users: Mapping[str, str], scram: Any = None) -> None:
        self.plain_users = dict(plain_users)
        self.scram = scram

    def authenticate(self, header: str | None) -> str | None:
        """The principal (``User:<name>``) of a valid ``Authorization`` header, else None."""
        if not header or not header.startswith("Basic "):
            return None
        try:
            user, _, password = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            return None
        if not user:
            return None
        expected = self.plain_users.get(user)
        if expected is not None and hmac.compare_digest(expected.encode(), password.encode()):
            return f"User:{user}"
        if self.scram is not None:
            for name, mech in MECHANISMS.items():
                cred = self.scram.get(user, name)
                if cred is None:
                    continue
                salted = salted_password(mech, password, cred.salt, cred.iterations)
                if hmac.compare_digest(stored_key(mech, client_key(mech, salted)), cred.stored_key):
                    return f"User:{user}"
        return None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    registry: RegistryListener
    tls = False

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        # The TLS handshake runs on the connection's thread (not the accept loop), so a slow
        # or bad client never holds up the others.
        if self.tls:
            try:
                request.settimeout(30)
                request.do_handshake()
            except (OSError, ssl.SSLError) as exc:
                log.info("schema registry: TLS handshake with %s failed: %s", client_address[0], exc)
                self.shutdown_request(request)
                return
        super().process_request_thread(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    server_version = "kafkalog-schema-registry"
    # an idle keep-alive connection, or a body that stops arriving, frees its thread after this
    timeout = IDLE_TIMEOUT_S

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
        log.debug("%s - %s", self.address_string(), format % args)

    def _answer(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
        if isinstance(payload, RawText):
            body = payload.text.encode()
            content_type = "text/plain; charset=utf-8"
        else:
            body = json.dumps(payload).encode()
            content_type = CONTENT_TYPE
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _serve(self) -> None:
        listener = self.server.registry
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0:
            self.close_connection = True
            self._answer(400, {"error_code": 400, "message": "Bad Content-Length"})
            return
        if length > listener.max_request_bytes:
            self.close_connection = True
            self._answer(413, {"error_code": 413, "message": f"The request body of {length} bytes is larger than "
                               f"schema.registry.max.request.bytes ({listener.max_request_bytes})"})
            return
        body = self.rfile.read(length) if length else b""
        principal: str | None = None
        if listener.authenticator is not None:
            principal = listener.authenticator.authenticate(self.headers.get("Authorization"))
            if principal is None:
                self._answer(401, {"error_code": 401, "message": "Unauthorized"}, {"WWW-Authenticate": REALM})
                return
        parts = urlsplit(self.path)
        path = parts.path.rstrip("/") if parts.path not in ("", "/") else ""
        query = parse_qs(parts.query, keep_blank_values=True)
        status, payload = listener.api.handle(self.command, path, query, body, principal)
        self._answer(status, payload)

    def _safe(self) -> None:
        try:
            self._serve()
        except (ConnectionError, TimeoutError, ssl.SSLError):
            self.close_connection = True
        except Exception:  # noqa: BLE001 - one request never takes the listener down
            log.exception("schema registry: %s %s failed", self.command, self.path)
            self.close_connection = True
            try:
                self._answer(500, {"error_code": 50001, "message": "Internal error"})
            except Exception:  # noqa: BLE001 - the connection is gone
                pass

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = do_OPTIONS = _safe


class RegistryListener:
    """One HTTP(S) listener of the registry (``url``: ``http://host:port``, port 0 takes a
    free one; ``tls``: the server context of an ``https://`` URL)."""

    def __init__(self, url: str, api: RegistryApi, *, authenticator: BasicAuthenticator | None,
                 max_request_bytes: int, tls: ssl.SSLContext | None = None) -> None:
        parts = urlsplit(url)
        self.scheme = parts.scheme
        self.api = api
        self.authenticator = authenticator
        self.max_request_bytes = max_request_bytes
        host = parts.hostname or "0.0.0.0"
        self.server = _Server((host, parts.port or 0), _Handler, bind_and_activate=False)
        self.server.registry = self
        try:
            self.server.server_bind()
            self.server.server_activate()
        except OSError as exc:
            self.server.server_close()
            raise OSError(exc.errno, f"schema.registry.listeners: cannot listen on {host}:{parts.port}: "
                          f"{exc.strerror}") from exc
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True,
                                                 do_handshake_on_connect=False)
            self.server.tls = True
        self.host = host
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, name=f"schema-registry-{self.port}",
                                       daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        host = self.host
        if host in ("0.0.0.0", "", "::"):
            host = "127.0.0.1"
        if ":" in host:
            host = f"[{host}]"
        return f"{self.scheme}://{host}:{self.port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


__all__ = ["BasicAuthenticator", "CONTENT_TYPE", "RegistryListener"]
