"""Kafka's ``ssl.*`` keys and what they name: key stores, trust stores, protocols, ciphers.

Shared by the broker (``broker.server.ssl_context``: a context per listener) and the client
(``broker.client.ssl_context``), like ``broker.config``, which every layer may use. Owns:

* (the keys themselves: ``broker.config.define_ssl_keys``, Kafka's names, defaults and types;
  every secret is a ``PASSWORD``, so DescribeConfigs hides it and no repr shows it).
* ``load_key_store``/``load_trust_store``: ``ssl.keystore.type`` / ``ssl.truststore.type``
  PEM (a file with the private key and the certificate chain, or inline with KIP-651's
  ``ssl.keystore.certificate.chain`` / ``ssl.keystore.key`` / ``ssl.truststore.certificates``)
  and PKCS12 (read with the ``cryptography`` package). JKS, Java's proprietary format, is
  NOT supported (no maintained Python reader): a JKS file fails with a message saying how
  to convert it; a file that is really PKCS12 is read whatever the type says (as Java's
  ``keystore.type.compat`` does: keytool writes PKCS12 by default since Java 9).
* ``apply_protocols``: ``ssl.enabled.protocols`` (TLSv1.2, TLSv1.3 ...) as the context's
  minimum and maximum versions; ``ssl.cipher.suites`` in Java's (IANA) names or OpenSSL's.
  Python's ``ssl`` cannot narrow TLSv1.3 suites: they are OpenSSL's defaults.

Errors are ``ConfigError`` naming the key at fault; a secret's value is shown as
``[hidden]``, as Kafka shows passwords. Private keys never touch the disk in clear text:
``ssl.SSLContext.load_cert_chain`` reads only files, so a PKCS12 or inline key is written
to a private temporary file encrypted with a one-time random password, loaded, and removed.

Thread-safety: pure functions; an ``SSLContext`` built here is shared read-only.
"""

from __future__ import annotations

import os
import secrets
import ssl
import tempfile
from collections.abc import Mapping
from typing import Any

from broker.config import TLS_PROTOCOLS, ConfigError

HIDDEN = "[hidden]"
_JKS_MAGIC = b"\xfe\xed\xfe\xed"
_PROTOCOLS = {
    "TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
assert set(_PROTOCOLS) == set(TLS_PROTOCOLS)
# TLSv1.3 suites (same names in Java and OpenSSL): Python's ssl cannot select among them.
_TLS13_SUITES = frozenset(("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
                           "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256"))


def hidden(key: str, value: Any) -> Any:
    """What an error message may show of ``key``'s value."""
    return HIDDEN if value is not None and ("password" in key or key.endswith((".key", ".certificate.chain",
                                                                               ".certificates"))) else value


def _read(key: str, path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise ConfigError(key, path, f"cannot read the file: {exc.strerror or exc}") from None


def _store_type(prefix: str, declared: str, location: str, data: bytes) -> str:
    if data.startswith(_JKS_MAGIC):
        raise ConfigError(f"{prefix}.type", declared,
                          f"{location} is a JKS store, which this broker and client cannot read (no maintained "
                          f"Python library reads JKS); convert it: keytool -importkeystore -srckeystore {location} "
                          f"-destkeystore {location}.p12 -deststoretype PKCS12, and set {prefix}.type=PKCS12")
    if declared == "JKS":
        if data[:1] == b"\x30":
            return "PKCS12"  # keytool's default format since Java 9, whatever the file is called
        raise ConfigError(f"{prefix}.type", declared, f"{location} is not a JKS or PKCS12 store; for PEM files "
                          f"set {prefix}.type=PEM")
    return declared


def _password(value: str | None) -> bytes | None:
    return value.encode() if value else None


def _load_pkcs12(prefix: str, location: str, data: bytes, password: str | None) -> Any:
    from cryptography.hazmat.primitives.serialization import pkcs12

    try:
        return pkcs12.load_pkcs12(data, _password(password))
    except ValueError as exc:
        raise ConfigError(f"{prefix}.password", hidden("password", password),
                          f"cannot open the PKCS12 store {location}: {exc} (wrong password or not a PKCS12 "
                          f"file)") from None


def load_trust_store(values: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(cafile, cadata) for ``SSLContext.load_verify_locations``, or (None, None) when no
    trust store is configured (the system's default CAs apply)."""
    inline = values.get("ssl.truststore.certificates")
    location = values.get("ssl.truststore.location")
    kind = values.get("ssl.truststore.type") or "JKS"
    if inline:
        if location:
            raise ConfigError("ssl.truststore.location", location,
                              "set either ssl.truststore.location or ssl.truststore.certificates, not both")
        if "-----BEGIN CERTIFICATE-----" not in inline:
            raise ConfigError("ssl.truststore.certificates", HIDDEN, "no PEM certificate in the value")
        return None, inline
    if not location:
        return None, None
    data = _read("ssl.truststore.location", location)
    kind = _store_type("ssl.truststore", kind, location, data)
    if kind == "PEM":
        if b"-----BEGIN CERTIFICATE-----" not in data:
            raise ConfigError("ssl.truststore.location", location, "no PEM certificate in the file")
        return location, None
    from cryptography.hazmat.primitives.serialization import Encoding

    store = _load_pkcs12("ssl.truststore", location, data, values.get("ssl.truststore.password"))
    certs = ([store.cert] if store.cert is not None else []) + list(store.additional_certs)
    if not certs:
        raise ConfigError("ssl.truststore.location", location, "the PKCS12 store holds no certificate")
    return None, "".join(c.certificate.public_bytes(Encoding.PEM).decode() for c in certs)


def load_key_store(context: ssl.SSLContext, values: Mapping[str, Any], *, required: bool) -> bool:
    """Load the key store's key and certificate chain into ``context``; False when none is
    configured (an error instead when ``required``)."""
    inline_chain = values.get("ssl.keystore.certificate.chain")
    inline_key = values.get("ssl.keystore.key")
    location = values.get("ssl.keystore.location")
    key_password = values.get("ssl.key.password")
    kind = values.get("ssl.keystore.type") or "JKS"
    if inline_chain or inline_key:
        if not (inline_chain and inline_key):
            missing = "ssl.keystore.key" if inline_chain else "ssl.keystore.certificate.chain"
            raise ConfigError(missing, None, "ssl.keystore.certificate.chain and ssl.keystore.key go together")
        if location:
            raise ConfigError("ssl.keystore.location", location,
                              "set either ssl.keystore.location or the inline PEM keys, not both")
        _load_chain(context, "ssl.keystore.key", inline_chain.encode(), inline_key.encode(), key_password)
        return True
    if not location:
        if required:
            raise ConfigError("ssl.keystore.location", None, "an SSL listener needs a key store (ssl.keystore.location "
                              "or ssl.keystore.certificate.chain with ssl.keystore.key)")
        return False
    data = _read("ssl.keystore.location", location)
    kind = _store_type("ssl.keystore", kind, location, data)
    if kind == "PEM":
        _load_chain(context, "ssl.keystore.location", data, data, key_password, location)
        return True
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

    store = _load_pkcs12("ssl.keystore", location, data, values.get("ssl.keystore.password") or key_password)
    if store.key is None or store.cert is None:
        raise ConfigError("ssl.keystore.location", location, "the PKCS12 store holds no private key with a certificate")
    chain = b"".join(c.certificate.public_bytes(Encoding.PEM) for c in [store.cert, *store.additional_certs])
    key = store.key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    _load_chain(context, "ssl.keystore.location", chain, key, None, location)
    return True


def _load_chain(context: ssl.SSLContext, key_name: str, chain: bytes, key: bytes, password: str | None,
                shown: str | None = None) -> None:
    """``load_cert_chain`` from bytes: one private temporary file, the key in it encrypted
    with a one-time password (never in clear text on disk), removed at once."""
    from cryptography.hazmat.primitives.serialization import (
        BestAvailableEncryption,
        Encoding,
        PrivateFormat,
        load_pem_private_key,
    )

    shown = shown if shown is not None else HIDDEN
    try:
        private = load_pem_private_key(_pem_block(key, b"PRIVATE KEY"), _password(password))
    except TypeError:  # encrypted key without a password, or a password for a clear key
        raise ConfigError("ssl.key.password", hidden("password", password),
                          f"the private key of {shown} is encrypted: set ssl.key.password" if not password else
                          f"the private key of {shown} is not encrypted: remove ssl.key.password") from None
    except ValueError as exc:
        reason = "wrong ssl.key.password" if password else f"no usable PEM private key ({exc})"
        raise ConfigError("ssl.key.password" if password else key_name,
                          hidden("password", password) if password else shown, reason) from None
    one_time = secrets.token_urlsafe(24)
    pem = private.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(one_time.encode()))
    if b"-----BEGIN CERTIFICATE-----" not in chain:
        raise ConfigError(key_name, shown, "no PEM certificate in the key store")
    certs = b"".join(_pem_blocks(chain, b"CERTIFICATE"))
    fd, path = tempfile.mkstemp(prefix="kafkalog-key-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(pem + certs)
        try:
            context.load_cert_chain(path, password=one_time)
        except ssl.SSLError as exc:
            raise ConfigError(key_name, shown,
                              f"the private key does not match the certificate ({exc.reason})") from None
    finally:
        os.unlink(path)


def _pem_blocks(data: bytes, label: bytes) -> list[bytes]:
    out = []
    begin, end = b"-----BEGIN " + label + b"-----", b"-----END " + label + b"-----"
    pos = 0
    while (start := data.find(begin, pos)) >= 0:
        stop = data.find(end, start)
        if stop < 0:
            break
        out.append(data[start:stop + len(end)] + b"\n")
        pos = stop + len(end)
    return out


def _pem_block(data: bytes, suffix: bytes) -> bytes:
    """The first PEM block whose label ends with ``suffix`` (PRIVATE KEY, RSA PRIVATE KEY,
    ENCRYPTED PRIVATE KEY, EC PRIVATE KEY)."""
    pos = 0
    while (start := data.find(b"-----BEGIN ", pos)) >= 0:
        label_end = data.find(b"-----", start + 11)
        label = data[start + 11:label_end]
        if label.endswith(suffix):
            blocks = _pem_blocks(data[start:], label)
            if blocks:
                return blocks[0]
        pos = label_end + 5 if label_end >= 0 else len(data)
    return data


def openssl_cipher_name(name: str) -> str:
    """A Java/IANA suite name (TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384) as OpenSSL names it
    (ECDHE-RSA-AES256-GCM-SHA384); other names unchanged."""
    if not name.startswith("TLS_") or "_WITH_" not in name:
        return name
    kx, enc = name[4:].split("_WITH_", 1)
    kx = "" if kx == "RSA" else kx.replace("_", "-") + "-"
    parts = enc.split("_")
    if parts[0] == "AES" and len(parts) >= 4:  # AES_256_GCM_SHA384, AES_128_CBC_SHA256
        mode = parts[2]
        cipher = f"AES{parts[1]}" + ("" if mode == "CBC" else f"-{mode}")
        mac = "-".join(parts[3:])
        return f"{kx}{cipher}-{mac}"
    if parts[:2] == ["CHACHA20", "POLY1305"]:
        return f"{kx}CHACHA20-POLY1305"
    return f"{kx}{'-'.join(parts)}"


def apply_protocols(context: ssl.SSLContext, values: Mapping[str, Any]) -> None:
    """``ssl.enabled.protocols`` and ``ssl.cipher.suites`` onto ``context``."""
    enabled = values.get("ssl.enabled.protocols") or ["TLSv1.2", "TLSv1.3"]
    versions = sorted(_PROTOCOLS[p] for p in enabled)
    try:
        context.minimum_version = versions[0]
        context.maximum_version = versions[-1]
    except (ValueError, ssl.SSLError) as exc:
        raise ConfigError("ssl.enabled.protocols", ",".join(enabled), str(exc)) from None
    suites = values.get("ssl.cipher.suites") or []
    tls12 = [openssl_cipher_name(s) for s in suites if s not in _TLS13_SUITES]
    if tls12:
        try:
            context.set_ciphers(":".join(tls12))
        except ssl.SSLError:
            raise ConfigError("ssl.cipher.suites", ",".join(suites), "none of these cipher suites is "
                              "available in this OpenSSL") from None
    elif suites:  # only TLSv1.3 suites named: no TLSv1.2 suite is allowed
        if ssl.TLSVersion.TLSv1_3 not in versions:
            raise ConfigError("ssl.cipher.suites", ",".join(suites), "only TLSv1.3 suites, but TLSv1.3 is not in "
                              "ssl.enabled.protocols")
        context.minimum_version = ssl.TLSVersion.TLSv1_3
