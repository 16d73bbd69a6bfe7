"""The OAUTHBEARER JWKS validator (Kafka's ``OAuthBearerValidatorCallbackHandler``,
KIP-768): signed JWTs checked against the keys of a JSON Web Key Set.

Selected for a listener by ``sasl.oauthbearer.jwks.endpoint.url`` (also with the
``listener.name.<l>.oauthbearer.`` prefix), or by
``[listener.name.<l>.oauthbearer.]sasl.server.callback.handler.class`` naming Kafka's
``org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler`` (which
then needs the URL). Keys read as Kafka's, unprefixed or listener-prefixed:

    sasl.oauthbearer.jwks.endpoint.url         https://... or file:///... (JWKS JSON)
    sasl.oauthbearer.jwks.endpoint.refresh.ms  3600000: keys are re-read this often, and at
                                               once (at most every 10 s) for an unknown kid
    sasl.oauthbearer.expected.audience         comma list; the aud claim must hold one
    sasl.oauthbearer.expected.issuer           the iss claim must equal it
    sasl.oauthbearer.sub.claim.name            sub: the principal claim
    sasl.oauthbearer.scope.claim.name          scope
    sasl.oauthbearer.clock.skew.seconds        30

Algorithms: RS256/384/512, PS256/384/512 (RSA keys) and ES256/384/512 (EC keys), verified
with the ``cryptography`` package (imported only when a listener uses this validator);
``alg`` ``none`` and HMAC algorithms are refused. ``exp`` is required, ``nbf`` / ``iat``
must not be in the future (each with the clock skew).

The ``exp`` / ``nbf`` / ``iat`` checks are ``oauthbearer.expiry_ms`` / ``json_time``
(finite numbers; JSON too deeply nested is a bad token, not a RecursionError).

Thread-safety: ``JwksValidator`` is shared by the connections of a listener; the key cache
is swapped under a lock.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from broker.server.security.oauthbearer import expiry_ms, json_time

VALIDATOR_CLASS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
_HASHES = {"256": "SHA256", "384": "SHA384", "512": "SHA512"}
_CURVES = {"P-256": "SECP256R1", "P-384": "SECP384R1", "P-521": "SECP521R1"}
UNKNOWN_KID_REFRESH_S = 10.0


def _b64url(part: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except (binascii.Error, ValueError):
        raise ValueError("invalid base64url in the token") from None


def _setting(config: Mapping[str, Any], listener: str, name: str, default: Any = None) -> Any:
    for key in (f"listener.name.{listener.lower()}.oauthbearer.{name}", name):
        if config.get(key) not in (None, ""):
            return config[key]
    return default


def jwks_validator(config: Mapping[str, Any], listener: str) -> JwksValidator | None:
    """The listener's JWKS validator, or None for the unsecured one. ConfigError for a
    validator class without a URL."""
    from broker.config import ConfigError

    url = _setting(config, listener, "sasl.oauthbearer.jwks.endpoint.url")
    handler = _setting(config, listener, "sasl.server.callback.handler.class")
    if not url:
        if handler == VALIDATOR_CLASS:
            raise ConfigError("sasl.oauthbearer.jwks.endpoint.url", None,
                              f"{VALIDATOR_CLASS} needs the JWKS endpoint of the listener {listener}")
        return None
    audience = _setting(config, listener, "sasl.oauthbearer.expected.audience") or []
    if isinstance(audience, str):
        audience = [a.strip() for a in audience.split(",") if a.strip()]
    return JwksValidator(
        str(url), refresh_ms=int(_setting(config, listener, "sasl.oauthbearer.jwks.endpoint.refresh.ms", 3600000)),
        audience=list(audience), issuer=_setting(config, listener, "sasl.oauthbearer.expected.issuer"),
        sub_claim=_setting(config, listener, "sasl.oauthbearer.sub.claim.name", "sub"),
        scope_claim=_setting(config, listener, "sasl.oauthbearer.scope.claim.name", "scope"),
        skew_s=float(_setting(config, listener, "sasl.oauthbearer.clock.skew.seconds", 30)))


class JwksValidator:
    def __init__(self, url: str, *, refresh_ms: int, audience: list[str], issuer: str | None, sub_claim: str,
                 scope_claim: str, skew_s: float) -> None:
        self.url = url
        self.refresh_s = refresh_ms / 1000.0
        self.audience = audience
        self.issuer = issuer
        self.sub_claim = sub_claim
        self.scope_claim = scope_claim
        self.skew_s = skew_s
        self._lock = threading.Lock()
        self._keys: list[dict] = []
        self._fetched = 0.0

    # --- keys ---

    def _load(self) -> list[dict]:
        scheme = urllib.parse.urlsplit(self.url).scheme
        if scheme == "file":
            with open(urllib.parse.urlsplit(self.url).path, encoding="utf-8") as f:
                data = json.load(f)
        else:
            with urllib.request.urlopen(self.url, timeout=10) as response:  # noqa: S310 - configured URL
                data = json.loads(response.read().decode("utf-8"))
        keys = data.get("keys") if isinstance(data, dict) else None
        if not isinstance(keys, list):
            raise ValueError("the JWKS has no keys list")
        return [k for k in keys if isinstance(k, dict)]

    def _candidates(self, kid: str | None) -> list[dict]:
        now = time.monotonic()
        with self._lock:
            stale = not self._fetched or now - self._fetched > self.refresh_s
            unknown = kid is not None and all(k.get("kid") != kid for k in self._keys)
            if stale or (unknown and now - self._fetched > UNKNOWN_KID_REFRESH_S):
                try:
                    self._keys, self._fetched = self._load(), now
                except (OSError, ValueError) as exc:
                    if not self._keys:
                        raise ValueError(f"the JWKS endpoint {self.url} could not be read: {exc}") from None
            keys = self._keys
        return [k for k in keys if kid is None or k.get("kid") == kid]

    # --- tokens ---

    def validate(self, jws: str) -> tuple[str, int]:
        """(principal, expiry in epoch ms); ValueError with the reason otherwise."""
        parts = jws.split(".")
        if len(parts) != 3 or not parts[2]:
            raise ValueError("not a signed JWT (header.claims.signature)")
        try:
            header = json.loads(_b64url(parts[0]))
            claims = json.loads(_b64url(parts[1]))
        except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: [[[[...
            raise ValueError("the token's header or claims are not JSON") from None
        if not isinstance(header, dict) or not isinstance(claims, dict):
            raise ValueError("the token's header or claims are not JSON objects")
        alg = header.get("alg")
        if not isinstance(alg, str) or alg[:2] not in ("RS", "PS", "ES") or alg[2:] not in _HASHES:
            raise ValueError(f"unsupported JWS algorithm {alg!r}")
        signed = f"{parts[0]}.{parts[1]}".encode("ascii")
        signature = _b64url(parts[2])
        keys = self._candidates(header.get("kid") if isinstance(header.get("kid"), str) else None)
        if not any(self._verify(k, alg, signed, signature) for k in keys):
            raise ValueError("the token's signature matches no key of the JWKS")
        return self._check_claims(claims)

    @staticmethod
    def _verify(jwk: dict, alg: str, signed: bytes, signature: bytes) -> bool:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
        from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

        hash_alg = getattr(hashes, _HASHES[alg[2:]])()
        try:
            if alg[:2] in ("RS", "PS") and jwk.get("kty") == "RSA":
                numbers = rsa.RSAPublicNumbers(int.from_bytes(_b64url(jwk["e"]), "big"),
                                               int.from_bytes(_b64url(jwk["n"]), "big"))
                key = numbers.public_key()
                pad = padding.PKCS1v15() if alg[:2] == "RS" else padding.PSS(
                    mgf=padding.MGF1(hash_alg), salt_length=padding.PSS.DIGEST_LENGTH)
                key.verify(signature, signed, pad, hash_alg)
                return True
            if alg[:2] == "ES" and jwk.get("kty") == "EC" and jwk.get("crv") in _CURVES:
                curve = getattr(ec, _CURVES[jwk["crv"]])()
                ec_key = ec.EllipticCurvePublicNumbers(int.from_bytes(_b64url(jwk["x"]), "big"),
                                                       int.from_bytes(_b64url(jwk["y"]), "big"), curve).public_key()
                half = len(signature) // 2
                der = encode_dss_signature(int.from_bytes(signature[:half], "big"),
                                           int.from_bytes(signature[half:], "big"))
                ec_key.verify(der, signed, ec.ECDSA(hash_alg))
                return True
        except (InvalidSignature, KeyError, ValueError, TypeError):
            return False
        return False

    def _check_claims(self, claims: dict) -> tuple[str, int]:
        now = time.time()
        principal = claims.get(self.sub_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise ValueError(f"the principal claim {self.sub_claim!r} is missing or not a string")
        exp_ms = expiry_ms(claims)
        if exp_ms <= (now - self.skew_s) * 1000:
            raise ValueError("the token has expired")
        for name in ("nbf", "iat"):
            value = json_time(claims, name)
            if value is not None and value > now + self.skew_s:
                raise ValueError(f"the {name} claim is in the future")
        if self.issuer is not None and claims.get("iss") != self.issuer:
            raise ValueError("the token's issuer is not the expected one")
        if self.audience:
            aud = claims.get("aud")
            have = {aud} if isinstance(aud, str) else set(aud) if isinstance(aud, list) else set()
            if not have & set(self.audience):
                raise ValueError("the token's audience is not an expected one")
        return principal, exp_ms
