"""The client's security settings: ``security.protocol`` and the ``ssl.*`` keys, and the TLS
context they describe.

Owns:

* ``define_security_keys(config_def)``: ``security.protocol`` (``CLIENT_SECURITY_PROTOCOLS``)
  and Kafka's client ``ssl.*`` keys (``broker.config.define_ssl_keys``), added to the
  producer's, the consumer's and the admin client's ``ConfigDef`` alike, so Spark's
  ``kafka.ssl.*`` options reach every client.
* ``client_context(values)``: the ``ssl.SSLContext`` for SSL and SASL_SSL (None for the
  other protocols). The server's certificate is always verified: against
  ``ssl.truststore.*`` (PEM file, PKCS12, inline ``ssl.truststore.certificates``) or the
  system's CAs when none is set. ``ssl.endpoint.identification.algorithm`` ``https`` (the
  default) also checks the host name against the certificate; an empty value turns that
  off. A key store (``ssl.keystore.*``, ``ssl.keystore.certificate.chain`` / ``.key``)
  gives the client certificate for mutual TLS. Stores are read by ``broker.ssl_stores``;
  errors are ``ConfigError`` naming the key, never showing a secret.
* ``security_settings(values)``: the security keys of one config, for another (reprs hide
  secrets with ``broker.config.redacted``).

Thread-safety: a context is built once per client and shared read-only by its connections.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import Any

from broker.config import STRING, ConfigDef, ConfigError, define_ssl_keys, one_of
from broker.ssl_stores import HIDDEN, apply_protocols, load_key_store, load_trust_store

# security.protocol values this client speaks (SASL_* come with the SASL client).
CLIENT_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")


def define_security_keys(config_def: ConfigDef) -> ConfigDef:
    """``security.protocol`` and the client ``ssl.*`` keys (module docstring). When
    ``security.protocol`` is already defined (by the SASL side) and accepts SASL_PLAINTEXT,
    SASL_SSL is accepted too: the two sides each add their protocols."""
    allowed = list(CLIENT_SECURITY_PROTOCOLS)
    existing = config_def.keys.get("security.protocol")
    if existing is not None and existing.validator is not None:
        try:
            existing.validator(existing.name, "SASL_PLAINTEXT")
            allowed += ["SASL_PLAINTEXT", "SASL_SSL"]
        except ConfigError:
            pass
    config_def.define("security.protocol", STRING, "PLAINTEXT",
                      f"Protocol used to talk to brokers: {', '.join(allowed)}.", one_of(*allowed))
    return define_ssl_keys(config_def, client=True)


def security_settings(values: Mapping[str, Any]) -> dict[str, Any]:
    """The security keys set in ``values`` (for a helper client made from another
    client's configuration, e.g. a producer's metadata client)."""
    return {k: v for k, v in values.items()
            if v is not None and (k == "security.protocol" or k.startswith(("ssl.", "sasl.")))}


def client_context(values: Mapping[str, Any]) -> ssl.SSLContext | None:
    """The TLS context of a client configured with ``values`` (module docstring)."""
    protocol = str(values.get("security.protocol") or "PLAINTEXT").upper()
    if protocol not in TLS_PROTOCOLS:
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.options |= ssl.OP_NO_COMPRESSION
    apply_protocols(context, values)
    cafile, cadata = load_trust_store(values)
    if cafile is None and cadata is None:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    else:
        try:
            context.load_verify_locations(cafile=cafile, cadata=cadata)
        except ssl.SSLError as exc:
            raise ConfigError("ssl.truststore.location", values.get("ssl.truststore.location") or HIDDEN,
                              f"cannot load the trust store: {exc.reason or exc}") from None
    load_key_store(context, values, required=False)
    algorithm = (values.get("ssl.endpoint.identification.algorithm") or "").strip().lower()
    context.check_hostname = algorithm == "https"
    context.verify_mode = ssl.CERT_REQUIRED
    return context
