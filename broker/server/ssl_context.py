"""The broker's TLS: one ``ssl.SSLContext`` per SSL / SASL_SSL listener, and principals
from client certificates.

Owns:

* ``listener_ssl_values(config, props, listener)``: the ``ssl.*`` values for one listener,
  with Kafka's precedence: ``listener.name.<listener lowercase>.ssl.<key>`` (from
  server.properties, validated as the plain key) wins over ``ssl.<key>``. On a SASL_SSL
  listener ``ssl.client.auth`` counts only listener-prefixed, as Kafka's ``ChannelBuilders``
  (KIP-684): SASL authenticates those clients, so the broker-wide ``ssl.client.auth`` (meant
  for SSL listeners, logged as a warning when set) does not ask them for certificates.
* ``server_context(values, listener)``: a server-side context from those values (key
  store required; trust store and ``ssl.client.auth`` none / requested / required;
  ``ssl.enabled.protocols``, ``ssl.cipher.suites``), built at startup so that a bad key
  store or password fails the broker's start with ``ConfigError`` naming the key (stores
  are read by ``broker.ssl_stores``).
* ``PrincipalMapper`` (``ssl.principal.mapping.rules``, Kafka's ``SslPrincipalMapper``):
  ``DEFAULT`` keeps the subject DN; ``RULE:pattern/replacement/[LU]`` rules, first full
  match wins, none matching is an authentication failure. ``peer_principal`` gives
  Kafka's default principal for a TLS connection: ``User:`` + the client certificate's
  subject DN in RFC 2253 form (``User:CN=client,OU=eng,O=org``), ``User:ANONYMOUS``
  without a client certificate.

Thread-safety: contexts and mappers are immutable once built and shared by the connection
threads (an ``SSLContext`` may wrap sockets concurrently).
"""

from __future__ import annotations

import logging
import re
import ssl
from collections.abc import Mapping
from typing import Any

from broker.config import ConfigDef, ConfigError, define_ssl_keys
from broker.ssl_stores import apply_protocols, hidden, load_key_store, load_trust_store

log = logging.getLogger(__name__)

ANONYMOUS = "User:ANONYMOUS"
SSL_PROTOCOLS = ("SSL", "SASL_SSL")
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
# the broker's TLS keys (also in broker.server.config.SERVER_CONFIG_DEF): what a
# listener.name.<l>.ssl.* key is validated as
SSL_CONFIG_DEF = define_ssl_keys(ConfigDef(), client=False)


def listener_ssl_values(config: Mapping[str, Any], props: Mapping[str, Any], listener: str,
                        security_protocol: str = "SSL") -> dict[str, Any]:
    """``ssl.*`` for ``listener``: ``listener.name.<l>.ssl.*`` over ``ssl.*`` (a SASL_SSL
    listener takes ``ssl.client.auth`` only from its prefixed key: module docstring)."""
    prefix = f"listener.name.{listener.lower()}."
    out = {k: v for k, v in config.items() if k.startswith("ssl.")}
    if security_protocol == "SASL_SSL" and f"{prefix}ssl.client.auth" not in props:
        if (out.get("ssl.client.auth") or "none") != "none":
            log.warning("Broker configuration 'ssl.client.auth' is applied only to SSL listeners: listener %s "
                        "(SASL_SSL) does not request client certificates; set "
                        "listener.name.%s.ssl.client.auth to request them there", listener, listener.lower())
        out["ssl.client.auth"] = "none"
    for key, raw in props.items():
        if key.startswith(prefix) and key[len(prefix):].startswith("ssl."):
            name = key[len(prefix):]
            if name not in SSL_CONFIG_DEF.keys:
                raise ConfigError(key, hidden(key, raw), "unknown SSL configuration")
            try:
                out[name] = SSL_CONFIG_DEF.validate_value(name, raw)
            except ConfigError as exc:
                raise ConfigError(key, hidden(key, raw), str(exc).split(": ", 1)[-1]) from None
    return out


def server_context(values: Mapping[str, Any], listener: str) -> ssl.SSLContext:
    """The listener's server-side context; ``ConfigError`` names the key at fault (with
    the listener's prefix when the listener overrides it)."""
    try:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.options |= ssl.OP_NO_COMPRESSION
        apply_protocols(context, values)
        load_key_store(context, values, required=True)
        cafile, cadata = load_trust_store(values)
        auth = values.get("ssl.client.auth") or "none"
        context.verify_mode = _CLIENT_AUTH[auth]
        if auth != "none":
            if cafile is None and cadata is None:
                raise ConfigError("ssl.client.auth", auth, "client certificates need a trust store "
                                  "(ssl.truststore.location or ssl.truststore.certificates)")
            context.load_verify_locations(cafile=cafile, cadata=cadata)
        PrincipalMapper(values.get("ssl.principal.mapping.rules") or "DEFAULT")
    except ConfigError as exc:
        raise ConfigError(exc.key, exc.value, f"listener {listener}: {str(exc).split(': ', 1)[-1]}") from None
    except ssl.SSLError as exc:
        raise ConfigError("ssl.truststore.location", values.get("ssl.truststore.location"),
                          f"listener {listener}: cannot load the trust store: {exc.reason or exc}") from None
    return context


# Kafka's SslPrincipalMapper.RULE_PARSER
_RULE_SPLITTER = re.compile(
    r"\s*((DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?))\s*(?:,\s*|$)")


class NoMatchingRule(Exception):
    """No ``ssl.principal.mapping.rules`` rule matched a subject DN."""


class PrincipalMapper:
    """``ssl.principal.mapping.rules`` (module docstring)."""

    def __init__(self, rules: str) -> None:
        self.rules: list[tuple[re.Pattern[str], str, str] | None] = []  # None: DEFAULT
        text = rules.strip() or "DEFAULT"
        pos = 0
        while pos < len(text):
            m = _RULE_SPLITTER.match(text, pos)
            if m is None or m.end() == pos:
                raise ConfigError("ssl.principal.mapping.rules", rules, f"cannot parse the rule at {text[pos:]!r}")
            pos = m.end()
            if m.group(2):
                self.rules.append(None)
            elif m.group(3) is not None:
                pattern = m.group(3).replace("\\/", "/")
                replacement = re.sub(r"\$(\d)", r"\\\1", m.group(4).replace("\\/", "/"))
                try:
                    self.rules.append((re.compile(pattern), replacement, m.group(5)))
                except re.error as exc:
                    raise ConfigError("ssl.principal.mapping.rules", rules, f"bad pattern {pattern!r}: {exc}") from None
            elif m.group(6):
                raise ConfigError("ssl.principal.mapping.rules", rules, f"invalid rule {m.group(6)!r}")

    def name(self, dn: str) -> str:
        for rule in self.rules:
            if rule is None:
                return dn
            pattern, replacement, case = rule
            if pattern.fullmatch(dn):
                out = pattern.sub(replacement, dn)
                return out.lower() if case == "L" else out.upper() if case == "U" else out
        raise NoMatchingRule(f"no ssl.principal.mapping.rules rule matches {dn}")


def subject_dn(der: bytes) -> str:
    """A certificate's subject DN as Java's ``X500Principal.getName()`` (RFC 2253: most
    specific first, ``CN=client,OU=eng,O=org,C=US``)."""
    from cryptography import x509

    return x509.load_der_x509_certificate(der).subject.rfc4514_string()


def peer_principal(sock: ssl.SSLSocket, mapper: PrincipalMapper) -> str:
    """Kafka's default SSL principal for a handshaken socket (module docstring)."""
    der = sock.getpeercert(binary_form=True)
    if not der:
        return ANONYMOUS
    return "User:" + mapper.name(subject_dn(der))
