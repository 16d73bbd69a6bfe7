"""The Schema Registry client's HTTP side: its settings, the requests, the retries and the
errors (``broker.client.registry`` is the API on top).

Owns:

* ``RegistrySettings.from_config(conf)``: Confluent's client keys, checked once (a bad or
  unknown key is a ``ValueError`` naming it):

  ``url``                          one URL or several, comma-separated
                                   (``http://host:8081,https://other:8081``; a path
                                   prefix is kept); user info in a URL
                                   (``http://user:password@host``) is its credentials
  ``basic.auth.user.info``         ``user:password`` for HTTP Basic
  ``basic.auth.credentials.source`` ``USER_INFO`` (the key above) or ``URL`` (the URL's
                                   user info); unset: whichever is given
  ``ssl.ca.location``              PEM file or directory of the CAs to trust (default: the
                                   system's); ``ssl.certificate.location``,
                                   ``ssl.key.location``, ``ssl.key.password``: the client
                                   certificate for mutual TLS
  ``request.timeout.ms``           connect and read timeout of one request (30000)
  ``max.retries``                  retries of a request on a connection failure or a
                                   408/429/5xx answer (3), after ``retries.wait.ms``
                                   (1000) doubling up to ``retries.max.wait.ms`` (20000),
                                   with full jitter, as confluent-kafka's client
  ``cache.capacity``               entries per cache (1000); ``latest.cache.ttl.sec``
                                   (also ``cache.latest.ttl.sec``): how long a subject's
                                   latest version is cached (unset: not cached)

  Values may be strings (a properties file).
* ``RestTransport.request(method, path, query=, body=)``: one REST call with Confluent's
  media types, trying the URLs in order: each gets ``max.retries`` retries of a
  connection failure or a retriable status, then the next URL is tried. Connections are
  kept alive in a small pool per URL; a pooled connection the registry had closed is
  replaced at once (not a retry). Each request is logged at DEBUG on
  ``broker.client.registry`` (``GET http://host:8081/subjects -> 200``), URLs without
  their user info.
* The errors: ``SchemaRegistryError(http_status, error_code, message)``, the registry's
  answer (``error_code`` Confluent's, e.g. 40401 subject not found; -1 when the body
  was not Confluent's error JSON), and ``SchemaRegistryUnreachableError``, no URL could
  be reached: one line naming the URLs, the cause and the wait, worded like the Kafka
  clients' ``BrokerUnreachableError`` (``no schema registry of http://127.0.0.1:1
  reachable (connection refused); waited 3012 ms (max.retries 3)``). Causes in words:
  ``connection refused``, ``unknown host``, ``DNS lookup failed (...)``, ``no answer
  within 30000 ms (request.timeout.ms)``, ``TLS handshake failed: certificate verify
  failed: ...``, ``connection closed by the server``. A TLS failure is not retried (the
  next URL still is). A secret (password, user info) is never in a message.

Imports the standard library only. Thread-safety: a transport is shared by threads; the
pool is under a lock, and a connection is used by one request at a time.
"""

from __future__ import annotations

import base64
import errno
import http.client
import json
import logging
import os
import random
import socket
import ssl
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urlencode, urlsplit

LOG = logging.getLogger("broker.client.registry")

MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"
ACCEPT = "application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json, application/json"
RETRIABLE_STATUSES = frozenset((408, 429, 500, 502, 503, 504))
_POOL_SIZE = 4  # idle connections kept per URL

_KEYS = ("url", "basic.auth.user.info", "basic.auth.credentials.source", "ssl.ca.location",
         "ssl.certificate.location", "ssl.key.location", "ssl.key.password", "request.timeout.ms",
         "max.retries", "retries.wait.ms", "retries.max.wait.ms", "cache.capacity", "latest.cache.ttl.sec",
         "cache.latest.ttl.sec")
CONFIG_KEYS = frozenset(_KEYS)


class SchemaRegistryError(Exception):
    """The registry refused a request: ``http_status``, Confluent's ``error_code`` (-1
    when unknown) and its ``message``."""

    # Confluent's error codes the client and the tools look at
    SUBJECT_NOT_FOUND = 40401
    VERSION_NOT_FOUND = 40402
    SCHEMA_NOT_FOUND = 40403
    SUBJECT_SOFT_DELETED = 40404
    SUBJECT_NOT_SOFT_DELETED = 40405
    SCHEMAVERSION_SOFT_DELETED = 40406
    SCHEMAVERSION_NOT_SOFT_DELETED = 40407
    SUBJECT_LEVEL_COMPATIBILITY_NOT_CONFIGURED = 40408
    SUBJECT_LEVEL_MODE_NOT_CONFIGURED = 40409
    INCOMPATIBLE_SCHEMA = 409
    INVALID_SCHEMA = 42201
    INVALID_VERSION = 42202
    INVALID_COMPATIBILITY_LEVEL = 42203
    INVALID_MODE = 42204
    OPERATION_NOT_PERMITTED = 42205
    REFERENCE_EXISTS = 42206
    UNKNOWN = -1

    def __init__(self, http_status: int, error_code: int, message: str) -> None:
        self.http_status = http_status
        self.error_code = error_code
        self.message = message
        super().__init__(http_status, error_code, message)

    def __str__(self) -> str:
        return f"{self.message} (HTTP {self.http_status}, error code {self.error_code})"

    def __reduce__(self):
        return (type(self), (self.http_status, self.error_code, self.message))


class SchemaRegistryUnreachableError(SchemaRegistryError):
    """No URL of the registry answered: ``urls`` (as configured, without user info),
    ``cause`` (the last failure, in words), ``waited_ms`` and ``config`` (the setting
    that bounded the attempts). ``http_status`` and ``error_code`` are -1."""

    def __init__(self, urls: str, cause: str, waited_ms: float, config: str) -> None:
        self.urls = urls
        self.cause = cause
        self.waited_ms = waited_ms
        self.config = config
        super().__init__(-1, -1, f"no schema registry of {urls} reachable ({cause}); "
                                 f"waited {waited_ms:.0f} ms ({config})")

    def __str__(self) -> str:
        return self.message

    def __reduce__(self):
        return (SchemaRegistryUnreachableError, (self.urls, self.cause, self.waited_ms, self.config))


def _int(conf: Mapping[str, Any], key: str, default: int | None, minimum: int = 0) -> int | None:
    value = conf.get(key)
    if value is None or value == "":
        return default
    try:
        if isinstance(value, bool):
            raise ValueError
        number = int(value) if not isinstance(value, float) or value.is_integer() else None
        if number is None:
            raise ValueError
    except (TypeError, ValueError):
        raise ValueError(f"Invalid value {value!r} for configuration {key}: not an integer") from None
    if number < minimum:
        raise ValueError(f"Invalid value {value!r} for configuration {key}: must be at least {minimum}")
    return number


@dataclass(frozen=True)
class BaseUrl:
    """One configured registry URL: ``scheme``, ``host``, ``port``, ``prefix`` (its path),
    and ``shown``, the URL as messages print it (no user info)."""

    scheme: str
    host: str
    port: int
    prefix: str
    shown: str


@dataclass(frozen=True)
class RegistrySettings:
    """The checked client settings (module docstring); ``authorization`` is the Basic
    header value or None, never printed (``repr`` hides it)."""

    urls: tuple[BaseUrl, ...]
    authorization: str | None
    ssl_context: ssl.SSLContext | None
    timeout_ms: int
    max_retries: int
    retries_wait_ms: int
    retries_max_wait_ms: int
    cache_capacity: int
    latest_ttl_sec: float | None

    def __repr__(self) -> str:
        return (f"RegistrySettings(urls={[u.shown for u in self.urls]}, "
                f"authorization={'(hidden)' if self.authorization else None}, timeout_ms={self.timeout_ms}, "
                f"max_retries={self.max_retries})")

    @property
    def shown_urls(self) -> str:
        return ",".join(u.shown for u in self.urls)

    @classmethod
    def from_config(cls, conf: Mapping[str, Any]) -> RegistrySettings:
        unknown = sorted(k for k in conf if k not in CONFIG_KEYS)
        if unknown:
            raise ValueError(f"Unrecognized Schema Registry client properties: {', '.join(unknown)}")
        raw = conf.get("url")
        if not raw or not isinstance(raw, str):
            raise ValueError("Missing required configuration url (the Schema Registry's URL)")
        urls: list[BaseUrl] = []
        userinfos: list[tuple[str, str]] = []
        for item in raw.split(","):
            item = item.strip()
            if not item:
                continue
            parts = urlsplit(item)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"Invalid value {_hide_userinfo(item)} for configuration url: "
                                 "a URL is http://HOST[:PORT] or https://HOST[:PORT]")
            try:
                port = parts.port or (443 if parts.scheme == "https" else 80)
            except ValueError:
                raise ValueError(f"Invalid value {_hide_userinfo(item)} for configuration url: bad port") from None
            host = parts.hostname
            netloc = f"[{host}]" if ":" in host else host
            if parts.port is not None:
                netloc += f":{parts.port}"
            prefix = parts.path.rstrip("/")
            urls.append(BaseUrl(parts.scheme, host, port, prefix, f"{parts.scheme}://{netloc}{prefix}"))
            if parts.username is not None:
                userinfos.append((unquote(parts.username), unquote(parts.password or "")))
        if not urls:
            raise ValueError("Missing required configuration url (the Schema Registry's URL)")
        source = str(conf.get("basic.auth.credentials.source") or "").upper()
        user_info = conf.get("basic.auth.user.info")
        if source not in ("", "USER_INFO", "URL"):
            raise ValueError(f"Invalid value {source} for configuration basic.auth.credentials.source: "
                             "USER_INFO or URL")
        credentials: tuple[str, str] | None = None
        if source == "URL" or (not source and not user_info and userinfos):
            if not userinfos:
                raise ValueError("basic.auth.credentials.source URL: no user info in url (http://USER:PASSWORD@HOST)")
            credentials = userinfos[0]
        elif user_info or source == "USER_INFO":
            user, sep, password = str(user_info or "").partition(":")
            if not sep:
                raise ValueError("basic.auth.user.info must be of the form USER:PASSWORD")
            credentials = (user, password)
        authorization = None
        if credentials is not None:
            token = base64.b64encode(f"{credentials[0]}:{credentials[1]}".encode()).decode("ascii")
            authorization = f"Basic {token}"
        timeout_ms = _int(conf, "request.timeout.ms", 30000, 1)
        ttl_raw = conf.get("latest.cache.ttl.sec", conf.get("cache.latest.ttl.sec"))
        latest_ttl: float | None = None
        if ttl_raw not in (None, ""):
            try:
                latest_ttl = float(ttl_raw)
            except (TypeError, ValueError):
                raise ValueError(f"Invalid value {ttl_raw!r} for configuration latest.cache.ttl.sec: "
                                 "not a number") from None
            if latest_ttl < 0:
                raise ValueError(f"Invalid value {ttl_raw!r} for configuration latest.cache.ttl.sec: negative")
        return cls(tuple(urls), authorization, _ssl_context(conf) if any(u.scheme == "https" for u in urls) else None,
                   timeout_ms or 30000, _int(conf, "max.retries", 3) or 0, _int(conf, "retries.wait.ms", 1000) or 0,
                   _int(conf, "retries.max.wait.ms", 20000) or 0, _int(conf, "cache.capacity", 1000, 1) or 1000,
                   latest_ttl)


def _hide_userinfo(url: str) -> str:
    parts = urlsplit(url)
    if parts.username is None:
        return url
    return url.replace(parts.netloc, parts.netloc.rsplit("@", 1)[1], 1)


def _ssl_context(conf: Mapping[str, Any]) -> ssl.SSLContext:
    ca = conf.get("ssl.ca.location")
    cert = conf.get("ssl.certificate.location")
    key = conf.get("ssl.key.location")
    password = conf.get("ssl.key.password")
    try:
        if ca:
            context = ssl.create_default_context(capath=ca) if os.path.isdir(ca) else \
                ssl.create_default_context(cafile=ca)
        else:
            context = ssl.create_default_context()
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"Invalid value {ca} for configuration ssl.ca.location: {_reason(exc)}") from None
    if (key or password) and not cert:
        raise ValueError("ssl.certificate.location is required with ssl.key.location or ssl.key.password")
    if cert:
        try:
            context.load_cert_chain(certfile=cert, keyfile=key or None, password=password or None)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"Invalid value {cert} for configuration ssl.certificate.location "
                             f"(or ssl.key.location / ssl.key.password): {_reason(exc)}") from None
    return context


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"certificate verify failed: {exc.verify_message}"
    if isinstance(exc, ssl.SSLError):
        return exc.reason or str(exc)
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


_ERRNO_CAUSES = {
    errno.ECONNREFUSED: "connection refused",
    errno.ETIMEDOUT: "connection timed out",
    errno.EHOSTUNREACH: "host unreachable",
    errno.ENETUNREACH: "network unreachable",
    errno.ECONNRESET: "connection reset",
    errno.EADDRNOTAVAIL: "address not available",
    errno.EPIPE: "connection closed by the server",
}


class _Failure(Exception):
    """A request that got no HTTP answer: ``cause`` in words, ``retriable``."""

    def __init__(self, cause: str, retriable: bool) -> None:
        super().__init__(cause)
        self.cause = cause
        self.retriable = retriable


def _failure(exc: BaseException, timeout_ms: int) -> _Failure:
    if isinstance(exc, ssl.SSLError):
        return _Failure(f"TLS handshake failed: {_reason(exc)}", False)
    if isinstance(exc, socket.gaierror):
        if exc.errno in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)):
            return _Failure("unknown host", True)
        return _Failure(f"DNS lookup failed ({exc.strerror or exc})", True)
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return _Failure(f"no answer within {timeout_ms} ms (request.timeout.ms)", True)
    if isinstance(exc, (http.client.RemoteDisconnected, http.client.IncompleteRead)):
        return _Failure("connection closed by the server", True)
    if isinstance(exc, http.client.HTTPException):
        return _Failure(f"not an HTTP answer ({type(exc).__name__}: {exc})", False)
    if isinstance(exc, OSError) and exc.errno is not None:
        return _Failure(_ERRNO_CAUSES.get(exc.errno) or exc.strerror or os.strerror(exc.errno), True)
    return _Failure(str(exc) or type(exc).__name__, True)


_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, http.client.CannotSendRequest)


class RestTransport:
    """REST calls to the registry (module docstring)."""

    def __init__(self, settings: RegistrySettings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._idle: dict[BaseUrl, list[http.client.HTTPConnection]] = {u: [] for u in settings.urls}
        self._closed = False

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle = [c for conns in self._idle.values() for c in conns]
            for conns in self._idle.values():
                conns.clear()
        for conn in idle:
            conn.close()

    # -- connections --

    def _connection(self, url: BaseUrl) -> tuple[http.client.HTTPConnection, bool]:
        with self._lock:
            if self._idle[url]:
                return self._idle[url].pop(), True
        timeout = self.settings.timeout_ms / 1000
        if url.scheme == "https":
            return http.client.HTTPSConnection(url.host, url.port, timeout=timeout,
                                               context=self.settings.ssl_context), False
        return http.client.HTTPConnection(url.host, url.port, timeout=timeout), False

    def _release(self, url: BaseUrl, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if not self._closed and len(self._idle[url]) < _POOL_SIZE:
                self._idle[url].append(conn)
                return
        conn.close()

    # -- requests --

    def request(self, method: str, path: str, *, query: Mapping[str, Any] | None = None,
                body: Any = None) -> Any:
        """The decoded JSON answer of ``method path`` (None for an empty one); raises
        ``SchemaRegistryError`` for an error answer, ``SchemaRegistryUnreachableError``
        when no URL answered."""
        target = path if path.startswith("/") else "/" + path
        if query:
            pairs = [(k, _query_value(v)) for k, v in query.items() if v is not None]
            if pairs:
                target += "?" + urlencode(pairs, doseq=True)
        payload = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        headers = {"Accept": ACCEPT, "User-Agent": "kafkalog-schema-registry-client"}
        if payload is not None:
            headers["Content-Type"] = MEDIA_TYPE
        if self.settings.authorization:
            headers["Authorization"] = self.settings.authorization
        started = time.monotonic()
        causes: dict[str, str] = {}
        last_error: SchemaRegistryError | None = None
        s = self.settings
        for url in s.urls:
            for attempt in range(s.max_retries + 1):
                try:
                    status, text = self._send(url, method, url.prefix + target, headers, payload)
                except _Failure as failure:
                    causes[url.shown] = failure.cause
                    LOG.debug("%s %s%s failed: %s", method, url.shown, target, failure.cause)
                    if not failure.retriable or attempt == s.max_retries:
                        break
                    self._backoff(attempt)
                    continue
                LOG.debug("%s %s%s -> %d", method, url.shown, target, status)
                if 200 <= status < 300:
                    return _json(status, text) if text.strip() else None
                last_error = _error(status, text)
                if status not in RETRIABLE_STATUSES:
                    raise last_error
                if attempt == s.max_retries:
                    break
                self._backoff(attempt)
            # this URL failed: the next one, if any
        if last_error is not None:  # a registry answered, with a retriable error
            raise last_error
        waited = (time.monotonic() - started) * 1000
        distinct = set(causes.values())
        if len(distinct) == 1:
            cause = distinct.pop()
        else:
            cause = "; ".join(f"{u}: {c}" for u, c in causes.items())
        raise SchemaRegistryUnreachableError(s.shown_urls, cause, waited, f"max.retries {s.max_retries}")

    def _backoff(self, attempt: int) -> None:
        s = self.settings
        delay = random.random() * min(s.retries_wait_ms * (2.0 ** attempt), s.retries_max_wait_ms)
        time.sleep(delay / 1000)

    def _send(self, url: BaseUrl, method: str, target: str, headers: dict[str, str],
              payload: bytes | None) -> tuple[int, str]:
        for _ in range(_POOL_SIZE + 2):
            conn, reused = self._connection(url)
            try:
                conn.request(method, target, body=payload, headers=headers)
                response = conn.getresponse()
                data = response.read()
            except _STALE as exc:
                conn.close()
                if reused:  # the registry closed an idle connection: a fresh one, at once
                    continue
                raise _failure(exc, self.settings.timeout_ms) from None
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                raise _failure(exc, self.settings.timeout_ms) from None
            if response.will_close:
                conn.close()
            else:
                self._release(url, conn)
            return response.status, data.decode("utf-8", errors="replace")
        raise _Failure("connection closed by the server", True)


def _query_value(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return [_query_value(v) for v in value]
    return str(value)


def _json(status: int, text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise SchemaRegistryError(status, -1, f"the registry's answer is not JSON: {text[:200]!r}") from None


def _error(status: int, text: str) -> SchemaRegistryError:
    try:
        body = json.loads(text)
        if isinstance(body, dict) and ("message" in body or "error_code" in body):
            code = body.get("error_code")
            return SchemaRegistryError(status, int(code) if isinstance(code, int) else -1,
                                       str(body.get("message") or http.client.responses.get(status, "")))
    except ValueError:
        pass
    reason = http.client.responses.get(status, "error")
    detail = f": {text.strip()[:200]}" if text.strip() else ""
    return SchemaRegistryError(status, -1, f"Unknown Schema Registry error: HTTP {status} {reason}{detail}")


def path_segment(value: str | int) -> str:
    """``value`` as one URL path segment (a subject may hold ``/``, ``:`` or spaces)."""
    return quote(str(value), safe="")


__all__ = ["CONFIG_KEYS", "RegistrySettings", "RestTransport", "SchemaRegistryError",
           "SchemaRegistryUnreachableError", "path_segment"]
