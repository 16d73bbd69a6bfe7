"""SCRAM (RFC 5802, RFC 7677) as Kafka speaks it: mechanisms, key derivation and the
four messages of an exchange, shared by the broker's authenticator and the client.

Owns (Kafka's ``ScramMechanism`` / ``ScramFormatter`` / ``ScramMessages``):

* ``MECHANISMS``: SCRAM-SHA-256 and SCRAM-SHA-512 with their hash, Kafka's type byte
  (1 and 2, the ``mechanism`` int8 of DescribeUserScramCredentials and
  AlterUserScramCredentials) and the minimum iteration count, 4096.
* Key derivation: ``salted_password`` = Hi(normalized password, salt, i) (PBKDF2 with the
  mechanism's HMAC), ``client_key``, ``stored_key`` = H(ClientKey), ``server_key``,
  ``client_proof`` / ``client_signature`` / ``server_signature`` and ``recover_client_key``
  (ClientProof XOR ClientSignature), as RFC 5802 section 3.
* ``ScramCredential``: what a server keeps (salt, stored key, server key, iterations):
  enough to verify a proof, never the password.
* The messages: ``client-first-message`` (gs2 header ``n,,``: no channel binding, no
  authorization id other than empty or the user name; extensions such as ``tokenauth``
  after the nonce, Kafka's KIP-84 extension syntax), ``server-first-message`` (r, s, i),
  ``client-final-message`` (c = base64 of the gs2 header, r, p) and
  ``server-final-message`` (v or e). Parsers raise ``ScramError`` (a ``ValueError``) on
  any deviation from the grammar; user names are ``saslname``-escaped (``=2C`` for a
  comma, ``=3D`` for an equals sign).

Passwords are normalized the way Kafka does it: UTF-8 bytes of the string as given (Kafka
does not apply SASLprep).

Thread-safety: pure functions and immutable values.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from typing import NamedTuple


class ScramError(ValueError):
    """A SCRAM message that does not follow RFC 5802, or a failed verification."""


class ScramMechanism(NamedTuple):
    name: str
    hash_name: str  # hashlib name
    type: int  # Kafka's mechanism byte (ScramMechanism.type)
    min_iterations: int


MECHANISMS: dict[str, ScramMechanism] = {
    "SCRAM-SHA-256": ScramMechanism("SCRAM-SHA-256", "sha256", 1, 4096),
    "SCRAM-SHA-512": ScramMechanism("SCRAM-SHA-512", "sha512", 2, 4096),
}
MECHANISMS_BY_TYPE: dict[int, ScramMechanism] = {m.type: m for m in MECHANISMS.values()}
# Kafka's ScramMechanism: iterations above this are refused (credentials and server-first).
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096
GS2_HEADER = "n,,"


def mechanism(name: str) -> ScramMechanism:
    try:
        return MECHANISMS[name]
    except KeyError:
        raise ScramError(f"unknown SCRAM mechanism {name!r}") from None


def _hmac(mech: ScramMechanism, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, mech.hash_name).digest()


def _h(mech: ScramMechanism, data: bytes) -> bytes:
    return hashlib.new(mech.hash_name, data).digest()


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def salted_password(mech: ScramMechanism, password: str | bytes, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i): PBKDF2 with the mechanism's HMAC."""
    pw = password.encode("utf-8") if isinstance(password, str) else password
    return hashlib.pbkdf2_hmac(mech.hash_name, pw, salt, iterations)


def client_key(mech: ScramMechanism, salted: bytes) -> bytes:
    return _hmac(mech, salted, b"Client Key")


def stored_key(mech: ScramMechanism, key: bytes) -> bytes:
    return _h(mech, key)


def server_key(mech: ScramMechanism, salted: bytes) -> bytes:
    return _hmac(mech, salted, b"Server Key")


def client_signature(mech: ScramMechanism, stored: bytes, auth_message: bytes) -> bytes:
    return _hmac(mech, stored, auth_message)


def client_proof(mech: ScramMechanism, salted: bytes, auth_message: bytes) -> bytes:
    key = client_key(mech, salted)
    return _xor(key, client_signature(mech, stored_key(mech, key), auth_message))


def recover_client_key(mech: ScramMechanism, stored: bytes, auth_message: bytes, proof: bytes) -> bytes:
    signature = client_signature(mech, stored, auth_message)
    if len(proof) != len(signature):
        raise ScramError("Invalid client credentials")
    return _xor(proof, signature)


def server_signature(mech: ScramMechanism, server: bytes, auth_message: bytes) -> bytes:
    return _hmac(mech, server, auth_message)


def auth_message(client_first_bare: str, server_first: str, client_final_without_proof: str) -> bytes:
    return f"{client_first_bare},{server_first},{client_final_without_proof}".encode()


def nonce() -> str:
    """A printable random nonce (Kafka's ScramFormatter.secureRandomString)."""
    return secrets.token_urlsafe(24).replace("-", "a").replace("_", "b")


@dataclass(frozen=True)
class ScramCredential:
    """What the broker stores for one user and mechanism (Kafka's ``ScramCredential``)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:  # keys are password-equivalent for this server: keep them out of logs
        return f"ScramCredential(iterations={self.iterations})"

    @classmethod
    def from_salted_password(cls, mech: ScramMechanism, salt: bytes, salted: bytes,
                             iterations: int) -> ScramCredential:
        return cls(salt, stored_key(mech, client_key(mech, salted)), server_key(mech, salted), iterations)

    @classmethod
    def from_password(cls, mech: ScramMechanism, password: str, *, salt: bytes | None = None,
                      iterations: int = DEFAULT_ITERATIONS) -> ScramCredential:
        salt = salt if salt is not None else secrets.token_bytes(32)
        return cls.from_salted_password(mech, salt, salted_password(mech, password, salt, iterations), iterations)


# --- messages ----------------------------------------------------------------------------

_VALUE_SAFE = re.compile(r"^[\x21-\x2b\x2d-\x7e]+$")  # printable without ','


def escape_saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_saslname(name: str) -> str:
    if re.search(r"=(?!2C|3D)", name):
        raise ScramError(f"invalid escape in user name {name!r}")
    return name.replace("=2C", ",").replace("=3D", "=")


def _b64decode(value: str, what: str) -> bytes:
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise ScramError(f"invalid base64 in {what}") from None


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


def _decode_utf8(token: bytes, what: str) -> str:
    try:
        return bytes(token).decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError(f"{what} is not UTF-8") from None


class ClientFirstMessage(NamedTuple):
    username: str  # unescaped
    authzid: str
    nonce: str
    extensions: dict[str, str]
    bare: str  # client-first-message-bare, as sent (for the AuthMessage)
    gs2_header: str

    @classmethod
    def parse(cls, token: bytes) -> ClientFirstMessage:
        text = _decode_utf8(token, "client-first-message")
        m = re.fullmatch(r"([nyp][^,]*),(a=[^,]*)?,(n=([^,]*),r=([^,]*)((?:,[^,]*)*))", text, re.S)
        if m is None:
            raise ScramError("Invalid SCRAM client first message format")
        cbind = m.group(1)
        if cbind != "n" and cbind != "y":
            raise ScramError("channel binding is not supported")
        authzid = unescape_saslname(m.group(2)[2:]) if m.group(2) else ""
        username = unescape_saslname(m.group(4))
        nonce_ = m.group(5)
        if not username or not nonce_ or not _VALUE_SAFE.match(nonce_):
            raise ScramError("Invalid SCRAM client first message: empty user name or nonce")
        extensions: dict[str, str] = {}
        for item in filter(None, m.group(6).split(",")):
            key, eq, value = item.partition("=")
            if not eq or not re.fullmatch(r"[A-Za-z]+", key):
                raise ScramError("Invalid SCRAM client first message extension")
            extensions[key] = value
        gs2 = text[:len(text) - len(m.group(3))]
        return cls(username, authzid, nonce_, extensions, m.group(3), gs2)

    @staticmethod
    def build(username: str, client_nonce: str, extensions: dict[str, str] | None = None) -> tuple[str, str]:
        """(whole message, bare part) with the ``n,,`` gs2 header."""
        bare = f"n={escape_saslname(username)},r={client_nonce}"
        for key, value in (extensions or {}).items():
            bare += f",{key}={value}"
        return GS2_HEADER + bare, bare


class ServerFirstMessage(NamedTuple):
    nonce: str
    salt: bytes
    iterations: int
    text: str

    @classmethod
    def parse(cls, token: bytes) -> ServerFirstMessage:
        text = _decode_utf8(token, "server-first-message")
        m = re.fullmatch(r"(?:m=[^,]*,)?r=([^,]+),s=([^,]+),i=([0-9]{1,9})(?:,.*)?", text, re.S)
        if m is None:
            raise ScramError("Invalid SCRAM server first message format")
        return cls(m.group(1), _b64decode(m.group(2), "salt"), int(m.group(3)), text)

    @staticmethod
    def build(nonce_: str, salt: bytes, iterations: int) -> str:
        return f"r={nonce_},s={_b64(salt)},i={iterations}"


class ClientFinalMessage(NamedTuple):
    channel_binding: bytes
    nonce: str
    proof: bytes
    without_proof: str

    @classmethod
    def parse(cls, token: bytes) -> ClientFinalMessage:
        text = _decode_utf8(token, "client-final-message")
        m = re.fullmatch(r"(c=([^,]*),r=([^,]*)(?:,[^,]*)*?),p=([^,]+)", text, re.S)
        if m is None:
            raise ScramError("Invalid SCRAM client final message format")
        return cls(_b64decode(m.group(2), "channel binding"), m.group(3),
                   _b64decode(m.group(4), "proof"), m.group(1))

    @staticmethod
    def build_without_proof(gs2_header: str, nonce_: str) -> str:
        return f"c={_b64(gs2_header.encode())},r={nonce_}"

    @staticmethod
    def build(without_proof: str, proof: bytes) -> str:
        return f"{without_proof},p={_b64(proof)}"


class ServerFinalMessage(NamedTuple):
    error: str | None
    server_signature: bytes

    @classmethod
    def parse(cls, token: bytes) -> ServerFinalMessage:
        text = _decode_utf8(token, "server-final-message")
        m = re.fullmatch(r"(?:e=([^,]*)|v=([^,]+))(?:,.*)?", text, re.S)
        if m is None:
            raise ScramError("Invalid SCRAM server final message format")
        if m.group(1) is not None:
            return cls(m.group(1), b"")
        return cls(None, _b64decode(m.group(2), "server signature"))

    @staticmethod
    def build(error: str | None, signature: bytes = b"") -> str:
        return f"e={error}" if error is not None else f"v={_b64(signature)}"
