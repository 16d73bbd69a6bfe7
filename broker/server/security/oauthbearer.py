"""The OAUTHBEARER mechanism's server side (RFC 7628, KIP-255) with Kafka's unsecured JWT
validator (``OAuthBearerUnsecuredValidatorCallbackHandler``: tokens whose JOSE header says
``"alg": "none"``, for development and tests), or, when the listener has a JWKS endpoint,
the signed-token validator of ``jwks.py`` (KIP-768).

Client message: gs2 header (``n,,`` or ``n,a=<authzid>,``), then ``\\x01``-separated
``key=value`` pairs, ``auth=Bearer <token>`` among them (other keys are SASL extensions,
accepted as Kafka's unsecured handler accepts them), ending with ``\\x01\\x01``.

Token checks (options of the listener's OAuthBearerLoginModule JAAS line, Kafka's names):
three base64url parts, the third empty; header ``alg`` = ``none``; claims JSON with the
principal claim (``unsecuredValidatorPrincipalClaimName``, default ``sub``) a non-empty
string, ``exp`` a number of seconds not in the past (finite, its ms within Kafka's long:
``expiry_ms``), ``iat`` (if present, a finite number: ``json_time``) not in the future,
each within ``unsecuredValidatorAllowableClockSkewMs`` (default 0); every scope of
``unsecuredValidatorRequiredScope`` (comma separated) in the scope claim
(``unsecuredValidatorScopeClaimName``, default ``scope``, a string or list). An authzid
must equal the principal.

Whatever the token holds (JSON nested beyond the parser's depth, ``Infinity``, 400-digit
numbers), a bad one only ever becomes a ``ValueError`` with the reason. A bad token is
answered, as RFC 7628 says, with a JSON error challenge
(``{"status":"invalid_token"}``); the client's ``\\x01`` reply then fails the
authentication with that reason. ``credential_expiry_ms`` (the token's ``exp``) bounds the
KIP-368 session.

Thread-safety: one instance per authentication, used by its connection's thread.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import time
from collections.abc import Mapping
from typing import Any

from broker.server.security.errors import SaslAuthenticationFailed

MAX_TOKEN = 64 * 1024
_SEP = "\x01"


def _b64url_json(part: str, what: str) -> dict:
    try:
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        value = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: [[[[...
        raise ValueError(f"invalid {what}: not base64url-encoded JSON") from None
    if not isinstance(value, dict):
        raise ValueError(f"invalid {what}: not a JSON object")
    return value


def expiry_ms(claims: dict) -> int:
    """The ``exp`` claim (NumericDate seconds) in epoch ms; ValueError unless it is a
    finite number whose ms fit Kafka's long (Infinity, NaN or 1e400 cannot be a session
    bound)."""
    exp = claims.get("exp")
    if not isinstance(exp, (int, float)) or isinstance(exp, bool):
        raise ValueError("the exp claim is missing or not a number")
    if isinstance(exp, float) and not math.isfinite(exp) or not -(2 ** 63) < exp * 1000 < 2 ** 63:
        raise ValueError("the exp claim is not a valid time")
    return int(exp * 1000)


def json_time(claims: dict, name: str) -> float | None:
    """A time claim (``iat``, ``nbf``) as seconds, None when absent; ValueError unless a
    finite number."""
    value = claims.get(name)
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool) or (
            isinstance(value, float) and not math.isfinite(value)):
        raise ValueError(f"the {name} claim is not a number")
    return float(value) if abs(value) < 2 ** 63 else math.copysign(2.0 ** 63, value)


class OAuthBearerServer:
    mechanism = "OAUTHBEARER"

    def __init__(self, options: Mapping[str, str], validator: Any = None) -> None:
        self._validator = validator  # jwks.JwksValidator, or None: the unsecured validator
        self._principal_claim = options.get("unsecuredValidatorPrincipalClaimName") or "sub"
        self._scope_claim = options.get("unsecuredValidatorScopeClaimName") or "scope"
        self._required_scope = [s for s in (options.get("unsecuredValidatorRequiredScope") or "").split(",") if s]
        try:
            self._skew_s = int(options.get("unsecuredValidatorAllowableClockSkewMs") or 0) / 1000.0
        except ValueError:
            self._skew_s = 0.0
        self.complete = False
        self.authorization_id: str | None = None
        self.credential_expiry_ms: int | None = None
        self._error: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if len(token) > MAX_TOKEN:
            raise SaslAuthenticationFailed("Invalid OAUTHBEARER client message: too large")
        if self._error is not None:  # the client's reply to our error challenge
            if bytes(token) == _SEP.encode():
                raise SaslAuthenticationFailed(f"Authentication failed: {self._error}")
            raise SaslAuthenticationFailed("Invalid OAUTHBEARER client message after an error challenge")
        try:
            text = bytes(token).decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationFailed("Invalid OAUTHBEARER client message: not UTF-8") from None
        m = re.fullmatch(r"n,(?:a=([^,]*))?,\x01((?:[A-Za-z]+=[\x21-\x7E \t\r\n]*\x01)*)\x01", text)
        if m is None:
            raise SaslAuthenticationFailed("Invalid OAUTHBEARER client first message")
        pairs = dict(p.split("=", 1) for p in m.group(2).split(_SEP) if p)
        auth = pairs.get("auth", "")
        bm = re.fullmatch(r"[Bb]earer +([A-Za-z0-9._~+/=-]+) *", auth)
        if bm is None:
            raise SaslAuthenticationFailed("Invalid OAUTHBEARER client first message: no auth=Bearer token")
        try:
            principal, expiry_ms = self._validate(bm.group(1))
        except ValueError as exc:
            self._error = str(exc)
            return json.dumps({"status": "invalid_token"}).encode()
        authzid = m.group(1)
        if authzid and authzid != principal:
            raise SaslAuthenticationFailed(f"Authentication failed: Client requested an authorization id "
                                           f"({authzid}) that is different from the token's principal name "
                                           f"({principal})")
        self.authorization_id = principal
        self.credential_expiry_ms = expiry_ms
        self.complete = True
        return b""

    def _validate(self, jws: str) -> tuple[str, int]:
        if self._validator is not None:
            return self._validator.validate(jws)
        parts = jws.split(".")
        if len(parts) != 3 or parts[2]:
            raise ValueError("not an unsecured JWS (three parts, no signature)")
        header = _b64url_json(parts[0], "JOSE header")
        if header.get("alg") != "none":
            raise ValueError("unsecured JWS must have alg none (signed tokens need a JWKS validator)")
        claims = _b64url_json(parts[1], "claims")
        principal = claims.get(self._principal_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise ValueError(f"the principal claim {self._principal_claim!r} is missing or not a string")
        now = time.time()
        exp_ms = expiry_ms(claims)
        if exp_ms <= (now - self._skew_s) * 1000:
            raise ValueError("the token has expired")
        iat = json_time(claims, "iat")
        if iat is not None and iat > now + self._skew_s:
            raise ValueError("the iat claim is in the future")
        if self._required_scope:
            scope = claims.get(self._scope_claim)
            have = set(scope.split() if isinstance(scope, str) else scope if isinstance(scope, list) else [])
            missing = [s for s in self._required_scope if s not in have]
            if missing:
                raise ValueError(f"the token lacks the required scope {missing}")
        return principal, exp_ms
