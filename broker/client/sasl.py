"""The client side of SASL: configuration and the per-connection exchange (Kafka's
``SaslClientAuthenticator``), driven by ``broker.client.network`` in its AUTHENTICATING
state.

Owns:

* ``SaslSettings.from_config(cfg)``: ``security.protocol`` (PLAINTEXT, SASL_PLAINTEXT;
  SSL and SASL_SSL once the TLS side wraps the socket before this state),
  ``sasl.mechanism`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER), credentials from
  ``sasl.jaas.config`` (Kafka's JAAS line: PlainLoginModule / ScramLoginModule with
  ``username`` and ``password`` options) or the ``sasl.username`` / ``sasl.password``
  convenience keys (these win); OAUTHBEARER tokens come from ``broker.client.oauthbearer``
  (a token endpoint, or an unsecured JWT for development). ``repr`` never shows the password; configuration errors
  name the key, never the value.
* ``SaslClientAuthenticator``: SaslHandshake v1 with the mechanism, then SaslAuthenticate
  (the highest version both sides have, up to 2) carrying the mechanism's tokens: PLAIN
  sends ``NUL user NUL password`` once; OAUTHBEARER sends ``n,,^Aauth=Bearer <token>^A^A``
  (an error challenge is acknowledged with ``^A``, then the broker's error is raised); SCRAM
  sends client-first, then client-final
  (proof), and checks the server signature of the server-final message (a broker that
  cannot prove it knows the credential fails the authentication too). The result is
  ``session_lifetime_ms`` (KIP-368; 0 when the broker gives none): the network client
  re-authenticates over the same connection at 85-95% of it (random, as Kafka's clients).
* raises ``SaslAuthenticationError`` (``broker.client.errors``; non-retriable, code
  SASL_AUTHENTICATION_FAILED, or UNSUPPORTED_SASL_MECHANISM / ILLEGAL_SASL_STATE): the
  broker's message, never the password.

Thread-safety: settings are immutable; an authenticator belongs to the polling thread.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from broker.client.errors import SaslAuthenticationError
from broker.client.oauthbearer import TokenProvider
from broker.config import PASSWORD, STRING, ConfigDef, ConfigError, one_of, parse_jaas_config
from broker.protocol import ApiKey, ErrorCode, request_schema
from broker.protocol.scram import MAX_ITERATIONS as SCRAM_MAX_ITERATIONS
from broker.protocol.scram import MECHANISMS as SCRAM_MECHANISMS
from broker.protocol.scram import (
    ClientFinalMessage,
    ClientFirstMessage,
    ScramError,
    ServerFinalMessage,
    ServerFirstMessage,
    auth_message,
    client_proof,
    mechanism,
    nonce,
    salted_password,
    server_key,
    server_signature,
)

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
OAUTHBEARER = "OAUTHBEARER"
MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS, OAUTHBEARER)
LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
    OAUTHBEARER: "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
}
SASL_AUTHENTICATE_MAX_VERSION = 2


def define_security_keys(config_def: ConfigDef) -> ConfigDef:
    """Add security.protocol and the SASL keys to a client's ConfigDef (producer, consumer,
    admin): one definition for the three."""
    return (config_def
            .define("security.protocol", STRING, "PLAINTEXT",
                    "PLAINTEXT or SASL_PLAINTEXT (TLS: SSL / SASL_SSL with the TLS side).",
                    one_of("PLAINTEXT", "SASL_PLAINTEXT"))
            .define("sasl.mechanism", STRING, "GSSAPI", "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.")
            .define("sasl.jaas.config", PASSWORD, None,
                    "JAAS login module line (PlainLoginModule / ScramLoginModule with username, password).")
            .define("sasl.username", STRING, None, "Convenience: the SASL user (wins over the JAAS line).")
            .define("sasl.password", PASSWORD, None, "Convenience: the SASL password (wins over the JAAS line).")
            .define("sasl.oauthbearer.token.endpoint.url", STRING, None,
                    "OAUTHBEARER: the OAuth token endpoint (client credentials: clientId / clientSecret "
                    "[/ scope] options of the JAAS line)."))


class SaslSettings:
    """security.protocol and the SASL keys of a client config (see the module docstring)."""

    __slots__ = ("security_protocol", "mechanism", "username", "_password", "oauth")

    def __init__(self, security_protocol: str, mechanism: str, username: str, password: str,
                 oauth: Any = None) -> None:
        self.security_protocol = security_protocol
        self.mechanism = mechanism
        self.username = username
        self._password = password
        self.oauth = oauth  # broker.client.oauthbearer.TokenProvider for OAUTHBEARER

    @property
    def password(self) -> str:
        return self._password

    def __repr__(self) -> str:
        return (f"SaslSettings({self.security_protocol}, {self.mechanism}, username={self.username!r}, "
                "password=[hidden])")

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> SaslSettings | None:
        """None for PLAINTEXT / SSL; ConfigError for incomplete or unknown settings."""
        protocol = str(cfg.get("security.protocol") or "PLAINTEXT").upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError("security.protocol", protocol, f"String must be one of: {', '.join(SECURITY_PROTOCOLS)}")
        if protocol not in SASL_PROTOCOLS:
            return None
        mech = str(cfg.get("sasl.mechanism") or "GSSAPI").upper()
        if mech not in MECHANISMS:
            raise ConfigError("sasl.mechanism", mech, f"SASL mechanism must be one of: {', '.join(MECHANISMS)}")
        username = cfg.get("sasl.username")
        password = cfg.get("sasl.password")
        jaas = cfg.get("sasl.jaas.config")
        if mech == OAUTHBEARER:
            return cls(protocol, mech, "", "", TokenProvider.from_config(cfg))
        if jaas and (username is None or password is None):
            entries = parse_jaas_config("sasl.jaas.config", str(jaas))
            if len(entries) != 1:
                raise ConfigError("sasl.jaas.config", "[hidden]", "must contain exactly one login module")
            entry = entries[0]
            if entry.login_module != LOGIN_MODULES[mech]:
                raise ConfigError("sasl.jaas.config", "[hidden]",
                                  f"sasl.mechanism {mech} needs {LOGIN_MODULES[mech]}, not {entry.login_module}")
            username = entry.options.get("username") if username is None else username
            password = entry.options.get("password") if password is None else password
        if not username or password is None:
            raise ConfigError("sasl.jaas.config", "[hidden]" if jaas else None,
                              f"{mech} needs a username and a password (sasl.jaas.config, or sasl.username "
                              "and sasl.password)")
        return cls(protocol, mech, str(username), str(password))


def reauthentication_delay_ms(session_lifetime_ms: float, rng: random.Random | None = None) -> float:
    """When to re-authenticate: 85-95% of the session lifetime (Kafka's clients)."""
    r = rng or random
    return session_lifetime_ms * r.uniform(0.85, 0.95)


class SaslClientAuthenticator:
    """One SASL exchange on one connection. ``next_request()`` gives (api_key, version,
    body) to send, or None when done; ``on_response(body)`` consumes each answer and
    raises ``SaslAuthenticationError`` on failure."""

    def __init__(self, settings: SaslSettings, authenticate_version: int) -> None:
        self.settings = settings
        self.authenticate_version = min(authenticate_version, SASL_AUTHENTICATE_MAX_VERSION)
        self._step = "handshake"
        self._pending_token: bytes | None = None
        self.session_lifetime_ms = 0
        self.complete = False
        mech = settings.mechanism
        self._scram = mechanism(mech) if mech in SCRAM_MECHANISMS else None
        self._nonce = nonce()
        self._bare = ""
        self._server_first = ""
        self._expected_signature = b""
        self._oauth_error = False

    def next_request(self) -> tuple[int, int, Any] | None:
        if self._step == "handshake":
            return ApiKey.SASL_HANDSHAKE, 1, request_schema(ApiKey.SASL_HANDSHAKE, 1).cls(
                mechanism=self.settings.mechanism)
        if self._pending_token is not None:
            token, self._pending_token = self._pending_token, None
            version = self.authenticate_version
            return ApiKey.SASL_AUTHENTICATE, version, request_schema(ApiKey.SASL_AUTHENTICATE, version).cls(
                auth_bytes=token)
        return None

    def on_response(self, api_key: int, body: Any) -> None:
        if api_key == ApiKey.SASL_HANDSHAKE:
            if body.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM:
                raise SaslAuthenticationError(
                    f"Client SASL mechanism '{self.settings.mechanism}' not enabled in the server, enabled "
                    f"mechanisms are {list(body.mechanisms)}", ErrorCode.UNSUPPORTED_SASL_MECHANISM)
            if body.error_code:
                raise SaslAuthenticationError(f"SaslHandshake failed with error {ErrorCode(body.error_code).name}",
                                              body.error_code)
            self._step = "first"
            self._pending_token = self._first_token()
            return
        if body.error_code:
            message = body.error_message or ErrorCode(body.error_code).name
            raise SaslAuthenticationError(message, body.error_code)
        token = bytes(body.auth_bytes)
        if self.settings.mechanism == OAUTHBEARER and token:  # RFC 7628 error challenge: ack it
            if self._oauth_error:
                raise SaslAuthenticationError("OAUTHBEARER: unexpected second server challenge")
            self._oauth_error = True
            self._pending_token = b"\x01"
            return
        if self._step == "first" and self._scram is not None:
            self._step = "final"
            self._pending_token = self._scram_final(token)
            return
        if self._step == "final":
            self._verify_server_final(token)
        self.session_lifetime_ms = getattr(body, "session_lifetime_ms", 0) or 0
        self._step = "done"
        self.complete = True

    # --- mechanisms ---

    def _first_token(self) -> bytes:
        s = self.settings
        if s.mechanism == OAUTHBEARER:  # RFC 7628 client first message
            return f"n,,\x01auth=Bearer {s.oauth.token()}\x01\x01".encode()
        if self._scram is None:  # PLAIN: authzid empty, authcid, password
            return b"\x00" + s.username.encode("utf-8") + b"\x00" + s.password.encode("utf-8")
        first, self._bare = ClientFirstMessage.build(s.username, self._nonce)
        return first.encode("utf-8")

    def _scram_final(self, token: bytes) -> bytes:
        mech = self._scram
        assert mech is not None
        try:
            sf = ServerFirstMessage.parse(token)
        except ScramError as exc:
            raise SaslAuthenticationError(f"Invalid SCRAM server first message: {exc}") from None
        if not sf.nonce.startswith(self._nonce) or len(sf.nonce) == len(self._nonce):
            raise SaslAuthenticationError("Invalid server nonce: does not start with client nonce")
        if not mech.min_iterations <= sf.iterations <= SCRAM_MAX_ITERATIONS:
            raise SaslAuthenticationError(f"Requested iterations {sf.iterations} is out of range")
        salted = salted_password(mech, self.settings.password, sf.salt, sf.iterations)
        without_proof = ClientFinalMessage.build_without_proof("n,,", sf.nonce)
        message = auth_message(self._bare, sf.text, without_proof)
        self._expected_signature = server_signature(mech, server_key(mech, salted), message)
        return ClientFinalMessage.build(without_proof, client_proof(mech, salted, message)).encode("ascii")

    def _verify_server_final(self, token: bytes) -> None:
        try:
            final = ServerFinalMessage.parse(token)
        except ScramError as exc:
            raise SaslAuthenticationError(f"Invalid SCRAM server final message: {exc}") from None
        if final.error is not None:
            raise SaslAuthenticationError(f"Sasl authentication using {self.settings.mechanism} failed with error: "
                                          f"{final.error}")
        if final.server_signature != self._expected_signature:
            raise SaslAuthenticationError("Invalid server signature in server final message")
