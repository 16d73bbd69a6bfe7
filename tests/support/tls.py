"""Test support: a small PKI for the TLS tests, made with ``cryptography``.

``make_pki(directory)`` writes and returns (``Pki``) paths of:

* ``ca.pem`` (the test CA), ``other-ca.pem`` (a CA nobody trusts), ``truststore.p12``
  (the CA as a PKCS12 trust store, password ``trustpass``);
* the broker's key store: ``server.pem`` (key + chain, PEM), ``server.key`` / ``server.crt``,
  ``server.p12`` (PKCS12, password ``storepass``), for the names localhost and 127.0.0.1;
  ``wronghost.pem``: the same CA, but only for ``wrong.example`` (hostname mismatch);
* clients: ``client.pem``/``client.key``/``client.crt``/``client.p12`` with the subject
  ``CN=client,OU=test,O=kafkalog``; ``client-enc.key`` encrypted with ``keypass``;
  ``stranger.*``: a client certificate signed by the other CA.

The fixture ``pki`` (session scope) makes one set per test session.
Thread-safety: test-process only.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import pytest

STORE_PASSWORD = "storepass"
TRUST_PASSWORD = "trustpass"
KEY_PASSWORD = "keypass"
CLIENT_DN = "CN=client,OU=test,O=kafkalog"


@dataclass
class Pki:
    dir: Path

    def path(self, name: str) -> str:
        return str(self.dir / name)


def _key():
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _name(**attrs):
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    oid = {"CN": NameOID.COMMON_NAME, "OU": NameOID.ORGANIZATIONAL_UNIT_NAME, "O": NameOID.ORGANIZATION_NAME}
    # x509.Name lists the least specific attribute first: O, OU, CN
    return x509.Name([x509.NameAttribute(oid[k], v) for k, v in reversed(list(attrs.items()))])


def _cert(subject, key, issuer, issuer_key, *, ca: bool, sans: list[str] = ()):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    now = datetime.datetime.now(datetime.UTC)
    b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
         .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
         .not_valid_after(now + datetime.timedelta(days=30))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        b = b.add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                          content_commitment=False, key_encipherment=False,
                                          data_encipherment=False, key_agreement=False, encipher_only=False,
                                          decipher_only=False), critical=True)
        b = b.add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    else:
        b = b.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
                            critical=False)
    if sans:
        names = []
        for s in sans:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(s)))
            except ValueError:
                names.append(x509.DNSName(s))
        b = b.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def make_pki(directory: Path) -> Pki:
    from cryptography.hazmat.primitives.serialization import (
        BestAvailableEncryption,
        Encoding,
        NoEncryption,
        PrivateFormat,
        pkcs12,
    )

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)

    def pem_key(k, password=None):
        enc = BestAvailableEncryption(password.encode()) if password else NoEncryption()
        return k.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, enc)

    def write(name, data):
        (d / name).write_bytes(data)

    ca_key, other_key = _key(), _key()
    ca = _cert(_name(CN="kafkalog test CA", O="kafkalog"), ca_key, _name(CN="kafkalog test CA", O="kafkalog"),
               ca_key, ca=True)
    other = _cert(_name(CN="other CA"), other_key, _name(CN="other CA"), other_key, ca=True)
    write("ca.pem", ca.public_bytes(Encoding.PEM))
    write("other-ca.pem", other.public_bytes(Encoding.PEM))
    write("truststore.p12", pkcs12.serialize_java_truststore(
        [pkcs12.PKCS12Certificate(ca, b"ca")], BestAvailableEncryption(TRUST_PASSWORD.encode())))

    def leaf(name, subject, issuer, issuer_key, sans=()):
        k = _key()
        c = _cert(subject, k, issuer.subject, issuer_key, ca=False, sans=list(sans))
        cert_pem = c.public_bytes(Encoding.PEM) + issuer.public_bytes(Encoding.PEM)
        write(f"{name}.key", pem_key(k))
        write(f"{name}.crt", cert_pem)
        write(f"{name}.pem", pem_key(k) + cert_pem)
        write(f"{name}-enc.key", pem_key(k, KEY_PASSWORD))
        write(f"{name}.p12", pkcs12.serialize_key_and_certificates(
            name.encode(), k, c, [issuer], BestAvailableEncryption(STORE_PASSWORD.encode())))

    leaf("server", _name(CN="localhost", O="kafkalog"), ca, ca_key, ["localhost", "127.0.0.1"])
    leaf("wronghost", _name(CN="wrong.example"), ca, ca_key, ["wrong.example"])
    leaf("client", _name(CN="client", OU="test", O="kafkalog"), ca, ca_key)
    leaf("stranger", _name(CN="stranger"), other, other_key)
    return Pki(d)


@pytest.fixture(scope="session")
def pki(tmp_path_factory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))
