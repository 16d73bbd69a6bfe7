"""OAUTHBEARER tokens for the client (KIP-255, KIP-768), from Kafka's client keys.

Owns ``TokenProvider.from_config(cfg)`` and ``token()``, with the JAAS line
``org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ...;``:

* ``sasl.oauthbearer.token.endpoint.url`` set (KIP-768): the OAuth 2 client credentials
  grant. ``https://`` / ``http://``: a POST of ``grant_type=client_credentials`` (and
  ``scope`` when the JAAS line has one) with HTTP basic authentication
  ``clientId:clientSecret``; the answer's ``access_token`` is used until 80% of its
  ``expires_in`` (default: one hour). ``file://``: the token is the file's content, read
  at each authentication.
* otherwise the unsecured JWT Kafka's ``OAuthBearerUnsecuredLoginCallbackHandler`` makes,
  for development: header ``{"alg":"none"}``, claims from ``unsecuredLoginStringClaim_<name>``
  (``sub`` required, the principal), ``unsecuredLoginNumberClaim_<name>``,
  ``unsecuredLoginListClaim_<name>`` (first character is the separator), ``iat`` now and
  ``exp`` after ``unsecuredLoginLifetimeSeconds`` (3600).

The token request runs on the polling thread when a connection authenticates (at most once
per token lifetime). Failures raise ``SaslAuthenticationError`` naming the endpoint and
the HTTP status, never the secret; ``repr`` hides it too.

Thread-safety: ``token()`` may be called from one polling thread at a time.
"""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from broker.client.errors import SaslAuthenticationError
from broker.config import ConfigError, parse_jaas_config

LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
TOKEN_REFRESH_FRACTION = 0.8
HTTP_TIMEOUT_S = 10.0


def _error(message: str) -> Exception:
    return SaslAuthenticationError(message)


def _b64url(obj: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj, separators=(",", ":")).encode()).rstrip(b"=").decode()


class TokenProvider:
    """Where OAUTHBEARER tokens come from (see the module docstring)."""

    def __init__(self, options: Mapping[str, str], endpoint: str | None) -> None:
        self._options = dict(options)
        self.endpoint = endpoint
        self._token: str | None = None
        self._refresh_at = 0.0

    def __repr__(self) -> str:
        return f"TokenProvider(endpoint={self.endpoint!r}, options={sorted(self._options)})"

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> TokenProvider:
        jaas = cfg.get("sasl.jaas.config")
        options: dict[str, str] = {}
        if jaas:
            entries = parse_jaas_config("sasl.jaas.config", str(jaas))
            if len(entries) != 1 or entries[0].login_module != LOGIN_MODULE:
                raise ConfigError("sasl.jaas.config", "[hidden]", f"OAUTHBEARER needs one {LOGIN_MODULE} line")
            options = entries[0].options
        endpoint = cfg.get("sasl.oauthbearer.token.endpoint.url")
        if endpoint:
            scheme = urllib.parse.urlsplit(str(endpoint)).scheme
            if scheme not in ("http", "https", "file"):
                raise ConfigError("sasl.oauthbearer.token.endpoint.url", endpoint,
                                  "must be an http(s):// or file:// URL")
            if scheme != "file" and not (options.get("clientId") and options.get("clientSecret")):
                raise ConfigError("sasl.jaas.config", "[hidden]",
                                  "the token endpoint needs clientId and clientSecret options")
        elif not options.get("unsecuredLoginStringClaim_sub"):
            raise ConfigError("sasl.jaas.config", "[hidden]" if jaas else None,
                              "OAUTHBEARER needs sasl.oauthbearer.token.endpoint.url, or an unsecured JWT "
                              "(unsecuredLoginStringClaim_sub option)")
        return cls(options, str(endpoint) if endpoint else None)

    def token(self) -> str:
        now = time.time()
        if self._token is not None and now < self._refresh_at:
            return self._token
        if self.endpoint is None:
            token, lifetime = self._unsecured(now)
        elif self.endpoint.startswith("file:"):
            token, lifetime = self._from_file(), 0.0
        else:
            token, lifetime = self._client_credentials()
        self._token, self._refresh_at = token, now + lifetime * TOKEN_REFRESH_FRACTION
        return token

    def _unsecured(self, now: float) -> tuple[str, float]:
        o = self._options
        lifetime = float(o.get("unsecuredLoginLifetimeSeconds") or 3600)
        claims: dict[str, Any] = {"iat": int(now), "exp": int(now + lifetime)}
        for key, value in o.items():
            if key.startswith("unsecuredLoginStringClaim_"):
                claims[key.split("_", 1)[1]] = value
            elif key.startswith("unsecuredLoginNumberClaim_"):
                claims[key.split("_", 1)[1]] = float(value) if "." in value else int(value)
            elif key.startswith("unsecuredLoginListClaim_") and value:
                claims[key.split("_", 1)[1]] = [v for v in value[1:].split(value[0]) if v]
        return f"{_b64url({'alg': 'none'})}.{_b64url(claims)}.", lifetime

    def _from_file(self) -> str:
        path = urllib.parse.urlsplit(self.endpoint).path
        try:
            with open(path, encoding="utf-8") as f:
                return f.read().strip()
        except OSError as exc:
            raise _error(f"cannot read the OAUTHBEARER token file {path}: {exc.strerror}") from None

    def _client_credentials(self) -> tuple[str, float]:
        o = self._options
        form = {"grant_type": "client_credentials"}
        if o.get("scope"):
            form["scope"] = o["scope"]
        basic = base64.b64encode(f"{urllib.parse.quote(o['clientId'])}:{urllib.parse.quote(o['clientSecret'])}"
                                 .encode()).decode()
        request = urllib.request.Request(
            self.endpoint, data=urllib.parse.urlencode(form).encode(), method="POST",
            headers={"Authorization": f"Basic {basic}", "Accept": "application/json",
                     "Content-Type": "application/x-www-form-urlencoded"})
        try:
            with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:  # noqa: S310 - configured URL
                body = json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            raise _error(f"the OAuth token endpoint {self.endpoint} answered HTTP {exc.code}") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise _error(f"no token from the OAuth token endpoint {self.endpoint}: {exc}") from None
        token = body.get("access_token") if isinstance(body, dict) else None
        if not isinstance(token, str) or not token:
            raise _error(f"the OAuth token endpoint {self.endpoint} sent no access_token")
        try:
            lifetime = float(body.get("expires_in") or 3600)
        except (TypeError, ValueError):
            lifetime = 3600.0
        return token, lifetime
