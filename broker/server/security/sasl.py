"""SASL on the request path: the gate between the socket server and ``KafkaApis``, and the
per-connection authenticator state (Kafka's ``SaslServerAuthenticator``).

The hook: when a listener's security protocol is SASL_PLAINTEXT or SASL_SSL,
``KafkaBroker`` hands the socket server ``SaslGate.wrap(KafkaApis.handle, store)`` (that is
``SaslGate.handle``) instead of ``KafkaApis.handle``. The gate keeps one
``ServerAuthenticator`` per connection (attribute ``conn.authenticator``) and sets
``conn.principal`` (``User:<name>``) once authenticated, for the authorizer. Connections
on other listeners go straight to ``KafkaApis`` except SaslHandshake / SaslAuthenticate,
answered ILLEGAL_SASL_STATE as Kafka's ``KafkaApis`` answers them there.

States of a SASL connection (frames are whole; until authenticated the socket server's
decoder refuses a size prefix above ``sasl.server.max.receive.size``, the gate's
``initial_frame_limits``, before reading the frame; ``_complete`` widens it to
``socket.request.max.bytes``):

    HANDSHAKE_OR_VERSIONS --ApiVersions--> (same; answered by KafkaApis, retries allowed)
        --SaslHandshake v1, mechanism enabled--> AUTHENTICATE
        --SaslHandshake v0, mechanism enabled--> RAW_TOKENS (legacy: tokens are bare frames)
        --SaslHandshake, mechanism not enabled--> UNSUPPORTED_SASL_MECHANISM + list, close
        --anything else--> close ("Unexpected Kafka request of type X during SASL handshake")
    AUTHENTICATE --SaslAuthenticate v0-2--> challenge (same state) or AUTHENTICATED
        --wrong credentials / bad token--> SASL_AUTHENTICATION_FAILED + message, close
        --anything else--> close
    RAW_TOKENS --token frame--> token frame (same state) or AUTHENTICATED; failure: close
    AUTHENTICATED --any request--> KafkaApis (past the session lifetime: close)
        --SaslHandshake v1, same mechanism--> REAUTHENTICATE (KIP-368) --SaslAuthenticate-->
        AUTHENTICATED again with a new session, same principal (a different one: close)
        --SaslAuthenticate without a handshake--> ILLEGAL_SASL_STATE

Mechanisms: PLAIN (``plain.py``), SCRAM-SHA-256/512 (``scram.py``), OAUTHBEARER with the
unsecured JWT validator (``oauthbearer.py``) or the JWKS validator (``jwks.py``).

Re-authentication (KIP-368): with ``connections.max.reauth.ms`` > 0 a session lasts that
long (an OAUTHBEARER session no longer than its token); SaslAuthenticate v1+ tells the
client (``session_lifetime_ms``); a request arriving after the session expired closes the
connection (also for v0 clients, which cannot re-authenticate). A failed authentication is
answered at once and the connection closed ``connection.failed.authentication.delay.ms``
later (the connection's own thread sleeps: no other connection waits; clients read the
answer before the close, as Kafka delays the close), and logged at INFO with the peer
address and the reason, never a password or token.

Thread-safety: ``SaslGate`` is immutable after construction and called on connection
threads; a ``ServerAuthenticator`` belongs to its connection's thread.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Callable, Mapping
from typing import Any

from broker.config import BrokerConfig
from broker.protocol import ApiKey, ErrorCode, ProtocolDecodeError, Reader, encode_response, parse_request_header
from broker.protocol.messages.sasl_authenticate import SASL_AUTHENTICATE_RESPONSE
from broker.protocol.messages.sasl_handshake import SASL_HANDSHAKE_RESPONSE
from broker.protocol.schema import decode
from broker.protocol.versions import request_schema
from broker.server.handlers import CLOSE_CONNECTION
from broker.server.security.config import SaslConfig
from broker.server.security.credentials import CredentialStore
from broker.server.security.errors import SaslAuthenticationFailed
from broker.server.security.jaas import (
    OAUTHBEARER,
    PLAIN,
    SASL_PROTOCOLS,
    enabled_mechanisms,
    listener_security_protocols,
    oauthbearer_options,
    plain_users,
)
from broker.server.security.jwks import jwks_validator
from broker.server.security.oauthbearer import OAuthBearerServer
from broker.server.security.plain import PlainServer
from broker.server.security.scram import ScramServer

log = logging.getLogger(__name__)

ANONYMOUS = "User:ANONYMOUS"
HANDSHAKE_OR_VERSIONS, AUTHENTICATE, RAW_TOKENS, AUTHENTICATED, REAUTHENTICATE = range(5)
_SASL_HANDSHAKE = int(ApiKey.SASL_HANDSHAKE)
_SASL_AUTHENTICATE = int(ApiKey.SASL_AUTHENTICATE)
_API_VERSIONS = int(ApiKey.API_VERSIONS)
SaslHandshakeResponse = SASL_HANDSHAKE_RESPONSE.cls
SaslAuthenticateResponse = SASL_AUTHENTICATE_RESPONSE.cls


def _api_name(key: int) -> str:
    try:
        return ApiKey(key).name
    except ValueError:
        return f"UNKNOWN({key})"


def _api_key(frame: memoryview) -> int:
    return (frame[0] << 8 | frame[1]) if len(frame) >= 2 else -1


class ListenerSasl:
    """What one SASL listener accepts: its mechanisms and, for PLAIN, its users."""

    def __init__(self, name: str, mechanisms: list[str], plain: dict[str, str] | None,
                 oauthbearer: dict[str, str] | None = None, jwks: Any = None) -> None:
        self.name = name
        self.mechanisms = mechanisms
        self.plain_users = plain or {}
        self.oauthbearer_options = oauthbearer or {}
        self.jwks = jwks  # jwks.JwksValidator (signed tokens), or None (unsecured tokens)


class SaslGate:
    """The request-path hook (module docstring): ``handle(conn, frame)`` has the socket
    server's handler signature and wraps ``KafkaApis.handle``."""

    def __init__(self, config: Mapping[str, Any], listeners: list[str]) -> None:
        """Reads and validates the SASL keys (``ConfigError`` naming the key)."""
        self._handler: Callable[[Any, memoryview], Any] | None = None
        self.store: CredentialStore | None = None
        self.protocols = listener_security_protocols(config, listeners)
        self.listeners: dict[str, ListenerSasl] = {}
        for name, protocol in self.protocols.items():
            if protocol in SASL_PROTOCOLS:
                mechanisms = enabled_mechanisms(config, name)
                users = plain_users(config, name) if PLAIN in mechanisms else None
                oauth = oauthbearer_options(config, name) if OAUTHBEARER in mechanisms else None
                jwks = jwks_validator(config, name) if OAUTHBEARER in mechanisms else None
                self.listeners[name] = ListenerSasl(name, mechanisms, users, oauth, jwks)
        sasl = SaslConfig.from_config(config)
        self.reauth_ms = sasl.connections_max_reauth_ms
        self.max_receive_size = sasl.server_max_receive_size
        self.max_request_bytes = BrokerConfig.from_config(config).socket_request_max_bytes
        self.failed_delay_s = sasl.failed_authentication_delay_ms / 1000.0

    def wrap(self, handler: Callable[[Any, memoryview], Any],
             store: CredentialStore) -> Callable[[Any, memoryview], Any]:
        """The socket server's handler: ``handle``, in front of ``handler`` (KafkaApis.handle)."""
        self._handler = handler
        self.store = store
        return self.handle

    def initial_frame_limits(self) -> dict[str, int]:
        """listener -> largest frame before authentication (the socket server's decoder
        refuses a bigger size prefix as soon as its 4 bytes arrive)."""
        return {name: min(self.max_receive_size, self.max_request_bytes) for name in self.listeners}

    @property
    def enabled(self) -> bool:
        """Whether any listener speaks SASL (the broker then advertises the SASL APIs)."""
        return bool(self.listeners)

    def handle(self, conn: Any, frame: memoryview) -> Any:
        auth = getattr(conn, "authenticator", None)
        if auth is None:
            sasl = self.listeners.get(conn.listener)
            auth = conn.authenticator = ServerAuthenticator(self, sasl) if sasl is not None else _NOT_SASL
        if not isinstance(auth, ServerAuthenticator):  # _NOT_SASL: a listener without SASL
            key = _api_key(frame)
            if key == _SASL_HANDSHAKE or key == _SASL_AUTHENTICATE:
                return _illegal_state(conn, frame, "SASL is not enabled on this listener")
            return self._next(conn, frame)
        if auth.state == AUTHENTICATED:
            if auth.session_expiry and time.monotonic() >= auth.session_expiry:
                log.info("closing connection %s (%s): SASL session of %s expired without re-authentication",
                         conn.id, _peer(conn), auth.principal)
                return CLOSE_CONNECTION
            key = _api_key(frame)
            if key == _SASL_HANDSHAKE:
                return auth.handle(conn, frame)
            if key == _SASL_AUTHENTICATE:
                return _illegal_state(conn, frame, "SaslAuthenticate request received after successful "
                                                   "authentication")
            return self._next(conn, frame)
        return auth.handle(conn, frame)

    def api_versions(self, conn: Any, frame: memoryview) -> Any:
        return self._next(conn, frame)

    def _next(self, conn: Any, frame: memoryview) -> Any:
        """The wrapped handler (KafkaApis.handle), set by ``wrap`` before any connection."""
        if self._handler is None:
            raise RuntimeError("SaslGate.wrap was not called")
        return self._handler(conn, frame)


_NOT_SASL = object()


def _peer(conn: Any) -> str:
    host, port = conn.peer_address[:2]
    return f"{host}:{port}"


def _illegal_state(conn: Any, frame: memoryview, message: str) -> Any:
    """ILLEGAL_SASL_STATE for a SASL request where none is expected (Kafka's KafkaApis)."""
    try:
        reader = Reader(frame)
        header, _ = parse_request_header(reader)
        decode(request_schema(header.api_key, header.api_version), header.api_version, reader)
        if header.api_key == _SASL_HANDSHAKE:
            body = SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
        else:
            body = SaslAuthenticateResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, error_message=message,
                                            auth_bytes=b"", session_lifetime_ms=0)
        return encode_response(header, body)
    except Exception as exc:  # noqa: BLE001 - unreadable or unsupported version: close, as for any API
        log.info("closing connection %s: bad %s request: %s", conn.id, _api_name(_api_key(frame)), exc)
        return CLOSE_CONNECTION


class ServerAuthenticator:
    """One connection's SASL state (the state machine of the module docstring)."""

    def __init__(self, gate: SaslGate, listener: ListenerSasl) -> None:
        self.gate = gate
        self.listener = listener
        self.state = HANDSHAKE_OR_VERSIONS
        self.mechanism: str | None = None
        self.server: Any = None
        self.principal: str | None = None
        self.session_expiry = 0.0  # monotonic seconds; 0: no limit
        self.authenticate_version = 0

    # --- entry point ---

    def handle(self, conn: Any, frame: memoryview) -> Any:
        if len(frame) > self.gate.max_receive_size:
            log.info("closing connection %s (%s): SASL frame of %d bytes exceeds sasl.server.max.receive.size %d",
                     conn.id, _peer(conn), len(frame), self.gate.max_receive_size)
            return CLOSE_CONNECTION
        try:
            if self.state == RAW_TOKENS:
                return self._raw_token(conn, frame)
            return self._kafka_request(conn, frame)
        except Exception:  # noqa: BLE001 - a bug here must only cost this connection
            log.exception("SASL authentication on connection %s failed unexpectedly", conn.id)
            return CLOSE_CONNECTION

    def _kafka_request(self, conn: Any, frame: memoryview) -> Any:
        key = _api_key(frame)
        if self.state == HANDSHAKE_OR_VERSIONS and key == _API_VERSIONS:
            return self.gate.api_versions(conn, frame)
        expected = _SASL_HANDSHAKE if self.state in (HANDSHAKE_OR_VERSIONS, AUTHENTICATED) else _SASL_AUTHENTICATE
        if key != expected:
            phase = "handshake" if expected == _SASL_HANDSHAKE else "authentication"
            log.info("closing connection %s (%s): Unexpected Kafka request of type %s during SASL %s",
                     conn.id, _peer(conn), _api_name(key), phase)
            return CLOSE_CONNECTION
        reader = Reader(frame)
        try:
            header, _ = parse_request_header(reader)
            if not 0 <= header.api_version <= (1 if key == _SASL_HANDSHAKE else 2):
                raise ProtocolDecodeError(f"unsupported version {header.api_version}")
            body = decode(request_schema(key, header.api_version), header.api_version, reader)
        except ProtocolDecodeError as exc:
            log.info("closing connection %s (%s): malformed %s request: %s", conn.id, _peer(conn),
                     _api_name(key), exc)
            return CLOSE_CONNECTION
        if key == _SASL_HANDSHAKE:
            return self._handshake(conn, header, body)
        return self._authenticate(conn, header, body)

    # --- SaslHandshake ---

    def _handshake(self, conn: Any, header: Any, body: Any) -> Any:
        mechanism = body.mechanism
        enabled = self.listener.mechanisms
        reauth = self.state == AUTHENTICATED
        if mechanism not in enabled:
            log.info("closing connection %s (%s): unsupported SASL mechanism %r (enabled: %s)",
                     conn.id, _peer(conn), mechanism[:64], ",".join(enabled))
            conn.send(encode_response(header, SaslHandshakeResponse(
                error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=list(enabled))))
            return CLOSE_CONNECTION
        if reauth and (mechanism != self.mechanism or header.api_version < 1):
            log.info("closing connection %s (%s): re-authentication with mechanism %s (was %s), handshake v%d",
                     conn.id, _peer(conn), mechanism, self.mechanism, header.api_version)
            conn.send(encode_response(header, SaslHandshakeResponse(
                error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=list(enabled))))
            return CLOSE_CONNECTION
        self.mechanism = mechanism
        if mechanism == PLAIN:
            self.server = PlainServer(self.listener.plain_users)
        elif mechanism == OAUTHBEARER:
            self.server = OAuthBearerServer(self.listener.oauthbearer_options, self.listener.jwks)
        else:
            if self.gate.store is None:
                raise RuntimeError("SaslGate.wrap was not called: no credential store")
            self.server = ScramServer(mechanism, self.gate.store)
        if reauth:
            self.state = REAUTHENTICATE
        else:
            self.state = AUTHENTICATE if header.api_version >= 1 else RAW_TOKENS
        return encode_response(header, SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=list(enabled)))

    # --- SaslAuthenticate ---

    def _authenticate(self, conn: Any, header: Any, body: Any) -> Any:
        self.authenticate_version = header.api_version
        try:
            challenge = self.server.evaluate(bytes(body.auth_bytes))
            complete = self.server.complete
            lifetime = self._session_lifetime_ms() if complete else 0
            if complete:
                self._complete(conn, lifetime)
        except SaslAuthenticationFailed as exc:
            self._failed(conn, str(exc), encode_response(header, SaslAuthenticateResponse(
                error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=str(exc), auth_bytes=b"",
                session_lifetime_ms=0)))
            return CLOSE_CONNECTION
        return encode_response(header, SaslAuthenticateResponse(
            error_code=ErrorCode.NONE, error_message=None, auth_bytes=challenge, session_lifetime_ms=lifetime))

    def _raw_token(self, conn: Any, frame: memoryview) -> Any:
        try:
            challenge = self.server.evaluate(bytes(frame))
            if self.server.complete:
                self._complete(conn, self._session_lifetime_ms())
        except SaslAuthenticationFailed as exc:
            self._failed(conn, str(exc), None)
            return CLOSE_CONNECTION
        return [struct.pack(">i", len(challenge)), challenge]

    def _session_lifetime_ms(self) -> int:
        """connections.max.reauth.ms, shortened to the credential's expiry (an OAUTHBEARER
        token's exp) as Kafka does; 0 (no limit) when connections.max.reauth.ms is 0."""
        lifetime = self.gate.reauth_ms
        expiry = getattr(self.server, "credential_expiry_ms", None)
        if lifetime > 0 and expiry is not None:
            lifetime = max(1, min(lifetime, int(expiry - time.time() * 1000)))
        return lifetime

    def _complete(self, conn: Any, lifetime_ms: int) -> None:
        principal = f"User:{self.server.authorization_id}"
        if self.state == REAUTHENTICATE and principal != self.principal:
            raise SaslAuthenticationFailed("Cannot change principals during re-authentication from "
                                           f"{self.principal}: {principal}")
        first = self.principal is None
        self.principal = principal
        conn.principal = principal
        decoder = getattr(conn, "decoder", None)
        if decoder is not None:  # authenticated: frames up to socket.request.max.bytes
            decoder.max_frame_bytes = self.gate.max_request_bytes
        self.state = AUTHENTICATED
        self.server = None
        self.session_expiry = time.monotonic() + lifetime_ms / 1000.0 if lifetime_ms > 0 else 0.0
        (log.debug if first else log.info)("connection %s (%s) %s as %s with %s", conn.id, _peer(conn),
                                           "authenticated" if first else "re-authenticated", principal,
                                           self.mechanism)

    def _failed(self, conn: Any, reason: str, response: list | None) -> None:
        """Log, send ``response`` (the error, when the flow has one), then wait
        ``connection.failed.authentication.delay.ms`` before the caller closes: the client
        reads the answer before the close, as Kafka delays the close, not the answer."""
        log.info("Failed authentication with %s (channelId=%s) (%s) on listener %s with SASL mechanism %s",
                 _peer(conn), conn.id, reason, self.listener.name, self.mechanism)
        self.server = None
        if response is not None:
            conn.send(response)
        if self.gate.failed_delay_s > 0:
            time.sleep(self.gate.failed_delay_s)  # this connection's thread only
