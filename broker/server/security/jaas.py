"""Which SASL settings apply to which listener: security protocols, enabled mechanisms and
the JAAS login context, read from Kafka's keys.

Owns the broker-side resolution (the JAAS grammar itself is ``broker.config.parse_jaas_config``):

* ``listener_security_protocols(config)``: listener name -> security protocol, from
  ``listener.security.protocol.map`` (``NAME:PROTOCOL,...``; the TLS configuration
  defines and validates that key) or, for a listener not in the map, Kafka's default map
  where the name is the protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL).
* ``enabled_mechanisms(config, listener)``: ``listener.name.<l>.sasl.enabled.mechanisms``
  or ``sasl.enabled.mechanisms``; a mechanism this broker does not implement (GSSAPI,
  Kafka's default, or OAUTHBEARER) is a ``ConfigError`` at startup on SASL listeners.
* ``jaas_entry(config, listener, mechanism)``: the login module of
  ``listener.name.<l>.<mechanism lowercase>.sasl.jaas.config``, else ``sasl.jaas.config``
  (Kafka's lookup order; the KafkaServer section of a JAAS file is not read). PLAIN needs
  one (its ``user_<name>="<password>"`` options are the users, as Kafka's
  ``PlainServerCallbackHandler`` reads them); SCRAM does not (its users are in the
  credential store; the module's username/password would be for inter-broker traffic);
  OAUTHBEARER reads the unsecured validator's options from its line (``oauthbearer_options``).

Thread-safety: pure functions of an immutable config.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from broker.config import ConfigError, JaasEntry, parse_jaas_config
from broker.protocol.scram import MECHANISMS as SCRAM_MECHANISMS
from broker.server.security.config import SaslConfig

PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL = "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"
SECURITY_PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)
SASL_PROTOCOLS = (SASL_PLAINTEXT, SASL_SSL)
PLAIN = "PLAIN"
OAUTHBEARER = "OAUTHBEARER"
SUPPORTED_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS, OAUTHBEARER)
PROTOCOL_MAP_KEY = "listener.security.protocol.map"
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


def listener_security_protocols(config: Mapping[str, Any], listeners: list[str]) -> dict[str, str]:
    raw = config.get(PROTOCOL_MAP_KEY)
    if isinstance(raw, Mapping):
        raw = [f"{k}:{v}" for k, v in raw.items()]
    items = raw if isinstance(raw, (list, tuple)) else [p for p in str(raw or "").split(",") if p.strip()]
    mapping: dict[str, str] = {}
    for item in items:
        name, sep, protocol = str(item).strip().partition(":")
        if not sep or protocol.strip().upper() not in SECURITY_PROTOCOLS:
            raise ConfigError(PROTOCOL_MAP_KEY, raw, f"entry {item!r} is not NAME:PROTOCOL with a protocol "
                                                     f"among {', '.join(SECURITY_PROTOCOLS)}")
        mapping[name.strip().upper()] = protocol.strip().upper()
    out = {}
    for name in listeners:
        found = mapping.get(name.upper(), name.upper() if raw is None else None)
        if found is None or found not in SECURITY_PROTOCOLS:
            raise ConfigError(PROTOCOL_MAP_KEY, raw, f"no security protocol defined for listener {name}")
        out[name] = found
    return out


def _listener_key(listener: str, rest: str) -> str:
    return f"listener.name.{listener.lower()}.{rest}"


def enabled_mechanisms(config: Mapping[str, Any], listener: str) -> list[str]:
    key = _listener_key(listener, "sasl.enabled.mechanisms")
    raw = config.get(key)
    if raw is None:
        key, raw = "sasl.enabled.mechanisms", list(SaslConfig.from_config(config).enabled_mechanisms)
    values = raw if isinstance(raw, (list, tuple)) else [m for m in str(raw).split(",")]
    mechanisms = [m.strip().upper() for m in values if m.strip()]
    if not mechanisms:
        raise ConfigError(key, raw, f"no SASL mechanism enabled for listener {listener}")
    for m in mechanisms:
        if m not in SUPPORTED_MECHANISMS:
            raise ConfigError(key, ",".join(mechanisms),
                              f"SASL mechanism {m} is not supported (supported: {', '.join(SUPPORTED_MECHANISMS)})")
    return mechanisms


def jaas_entry(config: Mapping[str, Any], listener: str, mechanism: str) -> JaasEntry | None:
    for key in (_listener_key(listener, f"{mechanism.lower()}.sasl.jaas.config"), "sasl.jaas.config"):
        text = config.get(key)
        if text:
            entries = parse_jaas_config(key, str(text))
            if len(entries) != 1:
                raise ConfigError(key, "[hidden]", "must contain exactly one login module")
            return entries[0]
    return None


def oauthbearer_options(config: Mapping[str, Any], listener: str) -> dict[str, str]:
    """The unsecured validator's options (unsecuredValidator*) of the listener's
    OAuthBearerLoginModule line; none when there is no JAAS line."""
    entry = jaas_entry(config, listener, OAUTHBEARER)
    return dict(entry.options) if entry is not None else {}


def plain_users(config: Mapping[str, Any], listener: str) -> dict[str, str]:
    """user -> password from the PLAIN login module's ``user_<name>`` options; ConfigError
    when the listener has no JAAS configuration for PLAIN."""
    entry = jaas_entry(config, listener, PLAIN)
    if entry is None:
        raise ConfigError(_listener_key(listener, "plain.sasl.jaas.config"), None,
                          f"listener {listener} enables PLAIN but has no JAAS configuration "
                          "(set it or sasl.jaas.config)")
    if entry.login_module != PLAIN_LOGIN_MODULE:
        raise ConfigError(_listener_key(listener, "plain.sasl.jaas.config"), "[hidden]",
                          f"PLAIN needs {PLAIN_LOGIN_MODULE}, not {entry.login_module}")
    return {k[len("user_"):]: v for k, v in entry.options.items() if k.startswith("user_") and len(k) > 5}
