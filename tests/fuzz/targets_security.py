"""Coverage-guided fuzz targets of the broker's authentication paths (atheris; issues 16
and 19), registered in ``tests/fuzz/targets.py`` next to the parser targets.

* ``sasl``: the bytes one client sends on a SASL listener before (and just after) it
  authenticates. The first byte picks one of the broker's SASL set-ups (``SETUPS``); the
  rest is the connection's byte stream, cut into frames by ``FrameDecoder`` with the limit
  the socket server gives a SASL listener (``SaslGate.initial_frame_limits``, widened on
  authentication) and handed frame by frame to the real ``SaslGate.handle``, built by
  ``KafkaBroker`` from server properties (PLAIN users from the JAAS line; SCRAM-SHA-256/512
  against a real ``CredentialStore`` in a temp dir; OAUTHBEARER with the unsecured
  validator on one set-up and the JWKS validator with a file:// key set on another). So
  SaslHandshake v0-1, SaslAuthenticate v0-2, legacy raw tokens, KIP-368 re-authentication,
  PLAIN, SCRAM's client-first / client-final messages (``broker.protocol.scram``) and the
  unsecured and signed JWT parsers are all reached. With bit 7 of the first byte set (JWT
  mode, ``jwt_stream``) the rest is a JWT's header and claims JSON, which the target
  base64url-encodes (and signs, on the ``jwks`` set-up) into an OAUTHBEARER exchange, as
  the ``batch`` target computes CRCs: mutations then land in the JSON, not in base64.
  ``KafkaApis`` (fuzzed by ``request``) is stood in for by a handler that answers nothing.
  Until ``CLOSE_CONNECTION`` each frame gets a response or nothing; an oversized size prefix
  is the decoder's ``ProtocolDecodeError`` (the socket server closes). The authenticator's
  catch-all (a bug costs only its connection, logged with ``log.exception``) is turned back
  into the exception here so that a bug is a finding, not a quiet close (both patches hold
  only during a call of the target).
  Determinism: the server nonce of SCRAM is fixed (``SERVER_NONCE``) and the credentials
  are made with a fixed salt, so a seed built by ``tools/capture_fuzz_corpus.py`` from
  ``SCRAM_USERS`` completes the exchange and the fuzzer can mutate what follows it.
* ``tls``: the fuzzer's bytes as the first bytes a client sends on an SSL listener (a
  ClientHello or garbage, then EOF), through the socket server's own handshake
  (``Connection._handshake``) on a real loopback TCP connection with the listener's
  ``SSLContext`` from ``KafkaBroker`` (``ssl_context.server_context``, client certificates
  requested). The first byte: bit 0 picks the listener with ``ssl.client.auth=required``;
  bit 1 wraps the rest in TLS handshake records (content type 22, right lengths) and bit 2
  first puts a ClientHello message header (type 1, right length) before it, so that
  mutations land in the ClientHello's fields rather than in the framing. The handshake
  must fail (returns False: ``ssl.SSLError`` or a clean close), never raise. Coverage of
  OpenSSL itself is not visible to atheris: this target is a robustness check of the
  Python around it and of OpenSSL as the broker configures it, seeded with real
  ClientHellos (raw, and unwrapped with bits 1 and 2 set).

Thread-safety: none needed (one fuzzing process per target); the set-ups are built once
per process, on first use.
"""

from __future__ import annotations

import base64
import json
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Any

from broker.protocol.errors import ProtocolDecodeError

SERVER_NONCE = "fuzzservernonce"
SCRAM_SALT = b"kafkalog-fuzz-salt"
PLAIN_USERS = {"admin": "admin-secret", "alice": "alice-secret"}
SCRAM_USERS = {"bob": "bob-secret"}
OAUTH_REQUIRED_SCOPE = "kafka"
# first byte of a sasl input -> set-up (index = (byte & 0x7F) % len(SETUPS)); bit 7: JWT mode
SETUPS = ("plain-scram-oauth", "reauth-scoped-oauth", "jwks")
JWT_MODE = 0x80

SASL_ALLOWED: tuple[type[BaseException], ...] = (ProtocolDecodeError,)
TLS_ALLOWED: tuple[type[BaseException], ...] = ()

_state: dict[str, Any] = {}


def _jaas_plain() -> str:
    users = " ".join(f'user_{u}="{p}"' for u, p in PLAIN_USERS.items())
    return f'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" ' \
           f'password="admin-secret" {users};'


def _oauth_jaas(scope: str | None) -> str:
    extra = f' unsecuredValidatorRequiredScope="{scope}"' if scope else ""
    return f"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required{extra};"


def _workdir() -> Path:
    if "dir" not in _state:
        _state["dir"] = Path(tempfile.mkdtemp(prefix="fuzz-security-"))
        import atexit
        atexit.register(shutil.rmtree, _state["dir"], True)
    return _state["dir"]


def jwks_key() -> Any:
    """The EC key whose public half is the ``jwks`` set-up's key set (kid ``fuzz``);
    deterministic so that seeds signed with it stay valid."""
    from cryptography.hazmat.primitives.asymmetric import ec
    return ec.derive_private_key(0x6B61666B616C6F67, ec.SECP256R1())


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _jwks_file(directory: Path) -> Path:
    numbers = jwks_key().public_key().public_numbers()
    jwk = {"kty": "EC", "crv": "P-256", "kid": "fuzz", "x": _b64url(numbers.x.to_bytes(32, "big")),
           "y": _b64url(numbers.y.to_bytes(32, "big"))}
    path = directory / "jwks.json"
    path.write_text(json.dumps({"keys": [jwk]}))
    return path


def _broker_props(setup: str, directory: Path) -> dict[str, str]:
    props = {"node.id": "1", "log.dirs": str(directory / "logs"),
             "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
             "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
             "listener.name.sasl_plaintext.plain.sasl.jaas.config": _jaas_plain(),
             "connection.failed.authentication.delay.ms": "0"}
    if setup == "plain-scram-oauth":
        props["listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config"] = _oauth_jaas(None)
    elif setup == "reauth-scoped-oauth":
        props["listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config"] = _oauth_jaas(OAUTH_REQUIRED_SCOPE)
        props["connections.max.reauth.ms"] = "3600000"
        props["sasl.server.max.receive.size"] = "2048"
    else:
        props["listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config"] = _oauth_jaas(None)
        props["sasl.oauthbearer.jwks.endpoint.url"] = _jwks_file(directory).as_uri()
        props["sasl.oauthbearer.expected.audience"] = "kafkalog"
    return props


def _gates() -> list[Any]:
    if "gates" in _state:
        return _state["gates"]
    from broker.protocol.scram import ScramCredential, mechanism
    from broker.server.broker import KafkaBroker
    from broker.server.security import sasl as sasl_module
    from broker.server.security import scram as scram_server
    from broker.server.security.credentials import CredentialStore, Upsertion

    _state["patches"] = [(scram_server, "nonce", lambda: SERVER_NONCE),  # deterministic server-first
                         (sasl_module, "log", _RaisingLog(sasl_module.log))]
    directory = _workdir()
    store = CredentialStore([directory])
    store.alter([], [Upsertion(user, mech, ScramCredential.from_password(mechanism(mech), password, salt=SCRAM_SALT))
                     for user, password in SCRAM_USERS.items() for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512")])
    gates = []
    for setup in SETUPS:
        gate = KafkaBroker(_broker_props(setup, directory)).sasl_gate
        gate.wrap(_kafka_apis_stand_in, store)
        gates.append(gate)
    _state["gates"] = gates
    return gates


def _kafka_apis_stand_in(conn: Any, frame: memoryview) -> Any:
    from broker.server.handlers import NO_RESPONSE
    return NO_RESPONSE


class _RaisingLog:
    """The sasl module's logger, but ``exception`` re-raises what it would have logged."""

    def __init__(self, log: Any) -> None:
        self._log = log

    def exception(self, *args: Any, **kwargs: Any) -> None:
        raise  # noqa: PLE0704 - called from the except block of ServerAuthenticator.handle

    def __getattr__(self, name: str) -> Any:
        return getattr(self._log, name)


class FuzzConnection:
    """What the gate uses of a socket server ``Connection`` (no socket)."""

    def __init__(self, listener: str) -> None:
        self.listener = listener
        self.id = "fuzz"
        self.peer_address = ("127.0.0.1", 9)
        self.principal = "User:ANONYMOUS"
        self.decoder: Any = None
        self.sent: list[Any] = []

    def send(self, buffers: Any) -> None:
        self.sent.append(buffers)


def request_frame(api_key: int, version: int, body: dict, correlation_id: int = 1) -> bytes:
    """One size-prefixed request frame, as a client sends it."""
    from broker.protocol import RequestHeader, encode_request
    from broker.protocol.versions import request_schema
    header = RequestHeader(api_key, version, correlation_id, "fuzz-seed")
    return b"".join(bytes(b) for b in encode_request(header, request_schema(api_key, version).cls(**body)))


def jwt(header: bytes, claims: bytes, signed: bool) -> str:
    """``header.claims.`` (unsecured) or signed ES256 with ``jwks_key()``."""
    token = f"{_b64url(header)}.{_b64url(claims)}"
    if not signed:
        return token + "."
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
    r, s = decode_dss_signature(jwks_key().sign(token.encode(), ec.ECDSA(hashes.SHA256())))
    return f"{token}.{_b64url(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"


def oauth_message(token: str) -> bytes:
    return f"n,,\x01auth=Bearer {token}\x01\x01".encode()


def jwt_stream(setup: str, data: bytes) -> bytes:
    """JWT mode of the sasl target: ``data`` is the JOSE header JSON, NUL, the claims
    JSON; the stream is the OAUTHBEARER exchange carrying them (signed on the ``jwks``
    set-up), the client's ``\x01`` after an error challenge, then a Metadata request."""
    from broker.protocol import ApiKey
    header, _, claims = data.partition(b"\x00")
    return (request_frame(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "OAUTHBEARER"})
            + request_frame(ApiKey.SASL_AUTHENTICATE, 2,
                            {"auth_bytes": oauth_message(jwt(header, claims, signed=setup == "jwks"))})
            + request_frame(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\x01"})
            + request_frame(ApiKey.METADATA, 8, {"topics": None, "allow_auto_topic_creation": False,
                                                 "include_topic_authorized_operations": False}))


def fuzz_sasl(data: bytes) -> None:
    from broker.protocol import FrameDecoder
    from broker.server.handlers import CLOSE_CONNECTION, NO_RESPONSE

    if not data:
        return
    gates = _gates()
    index = (data[0] & 0x7F) % len(gates)
    gate = gates[index]
    stream = jwt_stream(SETUPS[index], data[1:]) if data[0] & JWT_MODE else data[1:]
    conn = FuzzConnection("SASL_PLAINTEXT")
    decoder = conn.decoder = FrameDecoder(gate.initial_frame_limits()["SASL_PLAINTEXT"])
    decoder.push(stream)
    # the fixed nonce and the raising log only for this call: replays run inside pytest,
    # whose other tests use the real modules
    saved = [(module, name, getattr(module, name)) for module, name, _ in _state["patches"]]
    for module, name, value in _state["patches"]:
        setattr(module, name, value)
    try:
        while True:
            frame = decoder.next_frame()
            if frame is None:
                return
            result = gate.handle(conn, frame)
            if result is CLOSE_CONNECTION:
                return
            if result is not NO_RESPONSE and not isinstance(result, list):
                raise AssertionError(f"the SASL gate answered {type(result).__name__}, not a response or a close")
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


def _tls_server() -> tuple[Any, list[tuple[Any, Any]]]:
    if "tls" in _state:
        return _state["tls"]
    from broker.server.broker import KafkaBroker
    from broker.server.socket_server import SocketServer
    from tests.support.tls import make_pki

    pki = make_pki(_workdir() / "pki")
    props = {"node.id": "1", "log.dirs": str(_workdir() / "logs"),
             "listeners": "SSL://127.0.0.1:0,MTLS://127.0.0.1:0",
             "listener.security.protocol.map": "SSL:SSL,MTLS:SSL",
             "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.path("server.pem"),
             "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.path("ca.pem"),
             "ssl.client.auth": "requested", "listener.name.mtls.ssl.client.auth": "required"}
    broker = KafkaBroker(props)
    server = SocketServer(broker.listeners, _kafka_apis_stand_in, tls=broker.tls, ssl_handshake_timeout_ms=5000)
    listen = socket.create_server(("127.0.0.1", 0))
    _state["tls"] = (server, listen)
    return _state["tls"]


TLS_RECORD_MAX = 16384


def tls_first_bytes(data: bytes) -> bytes:
    """What the tls target sends: ``data[1:]``, framed as its first byte says (module
    docstring)."""
    flags = data[0] if data else 0
    body = data[1:]
    if flags & 4:
        body = b"\x01" + len(body).to_bytes(3, "big") + body
    if flags & 2:
        body = b"".join(b"\x16\x03\x01" + len(chunk).to_bytes(2, "big") + chunk
                        for chunk in (body[i:i + TLS_RECORD_MAX] for i in range(0, len(body), TLS_RECORD_MAX)))
    return body


def fuzz_tls(data: bytes) -> None:
    from broker.server.socket_server import Connection

    server, listen = _tls_server()
    listener = server.listeners[data[0] & 1 if data else 0]
    client = socket.create_connection(listen.getsockname())
    accepted, _ = listen.accept()
    conn = None
    try:
        client.sendall(tls_first_bytes(data))
        client.shutdown(socket.SHUT_WR)  # then EOF: the handshake cannot wait for more
        conn = Connection(server, accepted, listener, 1)
        if conn._handshake(*server.tls[listener.name]):
            raise AssertionError("a TLS handshake completed on bytes no client answered")
    finally:
        client.close()
        (conn.sock if conn is not None else accepted).close()
