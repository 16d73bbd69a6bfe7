"""Bad input on the broker's authenticating listeners (issue 16 "Bad input"), against a real
broker subprocess: each bad client gets a clear error or a closed connection, and nothing
else is affected: a well-behaved client authenticated before the bad one keeps being
served while the bad connection is open and after it, and fresh clients still
authenticate on every listener (RELIABILITY.md F1, F2, F3, S1, S3, S4).

What tests/test_security_*.py already prove is not repeated here: garbage and fuzzed
ClientHellos on an SSL listener and a client certificate from an unknown CA on an
``ssl.client.auth=required`` listener (test_security_tls.py), a Kafka request before
authentication, a wrong password and an oversized SASL frame on SASL_PLAINTEXT, and
fuzzed / truncated SASL tokens (test_security_sasl.py). This module adds the SASL_SSL
listener (garbage before, inside and right after the TLS handshake; a truncated token; a
frame beyond ``socket.request.max.bytes``; requests before authenticating), parallel
wrong passwords during ``connection.failed.authentication.delay.ms``, OAUTHBEARER with
expired and malformed JWTs over the wire, and the unknown-CA client while another
mutual-TLS client is connected.

The broker (module scope) has PLAINTEXT, SASL_PLAINTEXT, SASL_SSL (PLAIN, SCRAM-SHA-256,
OAUTHBEARER with the unsecured validator) and MTLS (SSL, client certificates required).
"""

from __future__ import annotations

import base64
import json
import random
import socket
import ssl
import struct
import threading
import time
import uuid

import pytest

from broker.client.admin import AdminClient
from broker.protocol import ApiKey, ErrorCode, FrameDecoder
from tests.support.broker import BrokerProcess, RawClient
from tests.support.tls import pki  # noqa: F401 - the session PKI fixture

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
OAUTH_JAAS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
MAX_REQUEST = 1048576
FAILED_DELAY_MS = 500
METADATA = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
TIMEOUT = 30


@pytest.fixture(scope="module")
def broker(tmp_path_factory, pki):  # noqa: F811
    props = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,MTLS://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,"
                                          "MTLS:SSL",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,OAUTHBEARER",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.path("server.pem"),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.path("ca.pem"),
        "listener.name.mtls.ssl.client.auth": "required",
        "socket.request.max.bytes": str(MAX_REQUEST),
        "connection.failed.authentication.delay.ms": str(FAILED_DELAY_MS),
    }
    for listener in ("sasl_plaintext", "sasl_ssl"):
        props[f"listener.name.{listener}.plain.sasl.jaas.config"] = PLAIN_JAAS
        props[f"listener.name.{listener}.oauthbearer.sasl.jaas.config"] = OAUTH_JAAS
    b = BrokerProcess(tmp_path_factory.mktemp("bad-input"), props, name="bad-input")
    b.start()
    yield b
    assert b.stop() == 0, b.stderr_text()[-3000:]
    assert "Traceback" not in b.stderr_text()


# --- clients -------------------------------------------------------------------------------

def _client_context(pki, cert: str | None = None) -> ssl.SSLContext:  # noqa: F811
    context = ssl.create_default_context(cafile=pki.path("ca.pem"))
    if cert is not None:
        context.load_cert_chain(pki.path(cert))
    return context


def _raw_over(sock: socket.socket, client_id: str) -> RawClient:
    c = RawClient.__new__(RawClient)
    c.sock, c.client_id, c.decoder, c.frames, c.correlation_id, c.pending = sock, client_id, FrameDecoder(), [], 0, {}
    return c


def raw_tls(broker: BrokerProcess, pki, listener: str = "SASL_SSL", cert: str | None = None) -> RawClient:  # noqa: F811
    plain = socket.create_connection(("127.0.0.1", broker.listener_port(listener)), timeout=TIMEOUT)
    return _raw_over(_client_context(pki, cert).wrap_socket(plain, server_hostname="localhost"), "raw-tls")


def raw_plain(broker: BrokerProcess) -> RawClient:
    return RawClient(broker.host, broker.listener_port("SASL_PLAINTEXT"), client_id="raw-sasl")


def handshake(c: RawClient, mechanism: str = "PLAIN") -> None:
    assert c.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism}).error_code == 0


def authenticate(c: RawClient, token: bytes, version: int = 2):
    return c.request(ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": token})


def login(c: RawClient, user: str = "alice", password: str = "alice-secret") -> RawClient:
    handshake(c)
    assert authenticate(c, f"\x00{user}\x00{password}".encode()).error_code == 0
    return c


def closed(s: socket.socket, timeout: float = TIMEOUT) -> bool:
    """True when the broker closes ``s`` (EOF, reset, or a TLS alert then EOF)."""
    s.settimeout(timeout)
    try:
        while s.recv(65536):
            pass
        return True
    except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
        return True
    except TimeoutError:
        return False


@pytest.fixture
def good(broker, pki):  # noqa: F811
    """A well-behaved client authenticated over SASL_SSL before the bad input, checked to
    be served during it (``good.serves()``) and, with fresh clients on every listener,
    after it."""
    c = login(raw_tls(broker, pki))

    def serves() -> None:
        assert c.request(ApiKey.METADATA, 8, METADATA).brokers

    c.serves = serves
    yield c
    serves()
    c.close()
    with raw_plain(broker) as fresh:
        login(fresh)
        assert fresh.request(ApiKey.METADATA, 8, METADATA).brokers
    base = {"bootstrap.servers": f"localhost:{broker.listener_port('SASL_SSL')}", "security.protocol": "SASL_SSL",
            "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.path("ca.pem"),
            "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": "admin-secret"}
    with AdminClient(base) as admin:
        assert isinstance(admin.list_topics(), list)
    with AdminClient({"bootstrap.servers": f"localhost:{broker.listener_port('MTLS')}", "security.protocol": "SSL",
                      "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.path("ca.pem"),
                      "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.path("client.pem")}) as admin:
        assert isinstance(admin.list_topics(), list)
    assert broker.alive()


def _client_hello(pki) -> bytes:  # noqa: F811
    tls = _client_context(pki).wrap_bio(ssl.MemoryBIO(), outgoing := ssl.MemoryBIO(), server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


# --- TLS on the SASL_SSL listener ------------------------------------------------------------

def test_f3_garbage_before_the_tls_handshake_on_sasl_ssl_closes_only_that_connection(broker, good):
    """RELIABILITY.md F3: 1024 random bytes instead of a ClientHello."""
    garbage = random.Random(16).randbytes(1024)
    assert garbage[0] != 0x16  # not a TLS handshake record: the broker has all it needs to refuse
    with socket.create_connection(("127.0.0.1", broker.listener_port("SASL_SSL")), timeout=TIMEOUT) as s:
        s.sendall(garbage)
        good.serves()
        assert closed(s)
    assert "TLS handshake failed" in broker.stderr_text()


@pytest.mark.parametrize("shape", ["truncated-hello-then-eof", "hello-then-garbage-records", "garbage-record-body"])
def test_f3_garbage_inside_the_tls_handshake_on_sasl_ssl(broker, pki, good, shape):  # noqa: F811
    """RELIABILITY.md F3: a real ClientHello cut short, followed by garbage, or a handshake
    record whose body is garbage: an alert or a close, nothing else."""
    hello = _client_hello(pki)
    rng = random.Random(shape)
    body = len(hello) - 9  # a whole ClientHello message of garbage: nothing left to wait for
    payload = {"truncated-hello-then-eof": hello[:len(hello) // 2],
               "hello-then-garbage-records": hello + b"\x16\x03\x03\x01\x00" + rng.randbytes(256),
               "garbage-record-body": hello[:5] + b"\x01" + body.to_bytes(3, "big") + rng.randbytes(body)}[shape]
    with socket.create_connection(("127.0.0.1", broker.listener_port("SASL_SSL")), timeout=TIMEOUT) as s:
        s.sendall(payload)
        good.serves()
        if shape == "truncated-hello-then-eof":
            s.shutdown(socket.SHUT_WR)
        assert closed(s)


def test_f3_garbage_right_after_the_tls_handshake_closes_before_sasl(broker, pki, good):  # noqa: F811
    """RELIABILITY.md F3 (after the handshake): 1024 random bytes inside TLS instead of a
    SaslHandshake; the first 4 are a size prefix beyond the pre-authentication limit (F1, F2)."""
    garbage = random.Random(19).randbytes(1024)
    size = struct.unpack(">i", garbage[:4])[0]
    assert not 0 <= size <= 524288  # beyond sasl.server.max.receive.size: refused at the prefix
    c = raw_tls(broker, pki)
    with c:
        c.send_raw(garbage)
        good.serves()
        assert closed(c.sock)


# --- SASL on the SASL_SSL listener ------------------------------------------------------------

def test_s4_kafka_requests_before_authenticating_on_sasl_ssl_close(broker, pki, good):  # noqa: F811
    """RELIABILITY.md S4: before authentication only ApiVersions, SaslHandshake and
    SaslAuthenticate; a Metadata before the handshake, or an ApiVersions or a Metadata
    after it, closes the connection."""
    with raw_tls(broker, pki) as c:
        c.send(ApiKey.METADATA, 8, METADATA)
        assert closed(c.sock)
    for api, version, body in ((ApiKey.API_VERSIONS, 3, {"client_software_name": "raw",
                                                         "client_software_version": "1"}),
                               (ApiKey.METADATA, 8, METADATA)):
        with raw_tls(broker, pki) as c:
            handshake(c)
            c.send(api, version, body)
            good.serves()
            assert closed(c.sock)
    assert "Unexpected Kafka request of type API_VERSIONS during SASL authentication" in broker.stderr_text()


def test_a_truncated_sasl_token_on_sasl_ssl_holds_only_its_connection(broker, pki, good):  # noqa: F811
    """A SaslAuthenticate frame cut short, the client then silent: the broker waits for
    the rest on that connection's thread only; the client's EOF then closes it."""
    from broker.protocol import RequestHeader, encode_request, request_schema

    header = RequestHeader(ApiKey.SASL_AUTHENTICATE, 2, 7, "truncated")
    frame = b"".join(bytes(b) for b in encode_request(header, request_schema(ApiKey.SASL_AUTHENTICATE, 2).cls(
        auth_bytes=b"\x00alice\x00alice-secret")))
    with raw_tls(broker, pki) as c:
        handshake(c)
        c.send_raw(frame[:-6])
        good.serves()  # while the truncated token waits
        with raw_plain(broker) as other:  # and a new client authenticates meanwhile
            login(other)
        c.sock.shutdown(socket.SHUT_WR)
        assert closed(c.sock)


@pytest.mark.parametrize("authenticated", [False, True])
def test_f1_f2_a_sasl_frame_beyond_socket_request_max_bytes_closes_at_its_size_prefix(broker, pki, good,  # noqa: F811
                                                                                       authenticated):
    """RELIABILITY.md F1/F2: a SaslAuthenticate whose size prefix is beyond
    socket.request.max.bytes (1 MiB here) closes the connection when the 4 bytes arrive
    (nothing of the announced body is read or allocated), before and after authentication."""
    with raw_tls(broker, pki) as c:
        if authenticated:
            login(c)
        else:
            handshake(c)
        c.send_raw(struct.pack(">i", MAX_REQUEST + 1) + b"\x00\x24\x00\x02")
        good.serves()
        assert closed(c.sock)
    assert f"{MAX_REQUEST + 1}" in broker.stderr_text()


def test_s1_s3_parallel_wrong_passwords_during_the_failed_authentication_delay(broker, pki, good):  # noqa: F811
    """RELIABILITY.md S1/S3: 20 clients with wrong passwords at once over SASL_SSL: each
    gets SASL_AUTHENTICATION_FAILED with the generic message, then a close after
    connection.failed.authentication.delay.ms; the well-behaved client is served while
    they wait."""
    answers: list = []
    clients = [raw_tls(broker, pki) for _ in range(20)]
    try:
        for c in clients:
            handshake(c)

        def bad(c: RawClient) -> None:
            answers.append(authenticate(c, b"\x00alice\x00wrong-" + uuid.uuid4().hex.encode()))

        threads = [threading.Thread(target=bad, args=(c,)) for c in clients]
        for t in threads:
            t.start()
        good.serves()
        for t in threads:
            t.join(TIMEOUT)
        assert len(answers) == 20
        for r in answers:
            assert r.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
            assert r.error_message == "Authentication failed: Invalid username or password"
        assert all(closed(c.sock) for c in clients)
    finally:
        for c in clients:
            c.close()
    assert "wrong-" not in broker.stderr_text()


# --- OAUTHBEARER over the wire ------------------------------------------------------------------

def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _jwt(claims: dict | bytes, header: dict | None = None) -> str:
    raw = claims if isinstance(claims, bytes) else json.dumps(claims).encode()
    return f"{_b64url(json.dumps(header or {'alg': 'none'}).encode())}.{_b64url(raw)}."


def _oauth(token: str) -> bytes:
    return f"n,,\x01auth=Bearer {token}\x01\x01".encode()


NOW = time.time()
BAD_TOKENS = {
    "expired": (_jwt({"sub": "carol", "exp": NOW - 3600, "iat": NOW - 7200}), "the token has expired"),
    "exp-infinity": (_jwt(b'{"sub":"carol","exp":Infinity}'), "exp claim is not a valid time"),
    "two-parts": ("eyJhbGciOiJub25lIn0.eyJzdWIiOiJjYXJvbCJ9", "not an unsecured JWS"),
    "claims-not-json": (_jwt(b"not json"), "not base64url-encoded JSON"),
    "claims-nested-json": (_jwt(b"[" * 3000 + b"]" * 3000), "not base64url-encoded JSON"),
    "signed-without-jwks": (_jwt({"sub": "carol", "exp": NOW + 3600}, {"alg": "RS256"}) + "c2ln",
                            "not an unsecured JWS"),
    "alg-rs256-unsigned": (_jwt({"sub": "carol", "exp": NOW + 3600}, {"alg": "RS256"}), "alg none"),
    "no-principal": (_jwt({"exp": NOW + 3600}), "principal claim 'sub' is missing"),
}


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("case", sorted(BAD_TOKENS))
def test_oauthbearer_expired_and_malformed_jwts_fail_cleanly(broker, pki, good, listener, case):  # noqa: F811
    """An expired or malformed unsecured JWT: RFC 7628's error challenge
    ({"status":"invalid_token"}), and after the client's \\x01 SASL_AUTHENTICATION_FAILED
    with the reason, then a close."""
    token, reason = BAD_TOKENS[case]
    with (raw_plain(broker) if listener == "SASL_PLAINTEXT" else raw_tls(broker, pki)) as c:
        handshake(c, "OAUTHBEARER")
        r = authenticate(c, _oauth(token))
        assert (r.error_code, json.loads(bytes(r.auth_bytes))) == (0, {"status": "invalid_token"})
        good.serves()
        r = authenticate(c, b"\x01")
        assert r.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and reason in r.error_message
        assert closed(c.sock)


def test_oauthbearer_message_that_is_not_rfc_7628_fails_at_once(broker, good):
    with raw_plain(broker) as c:
        handshake(c, "OAUTHBEARER")
        r = authenticate(c, b"n,,auth=Bearer x")
        assert r.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert r.error_message == "Invalid OAUTHBEARER client first message"
        assert closed(c.sock)


# --- mutual TLS ------------------------------------------------------------------------------------

def test_unknown_ca_client_certificate_while_a_trusted_one_is_connected(broker, pki, good):  # noqa: F811
    """ssl.client.auth=required: a certificate from an unknown CA fails the handshake,
    while a client with a trusted certificate, connected before, keeps being served."""
    trusted = raw_tls(broker, pki, "MTLS", cert="client.pem")
    with trusted:
        assert trusted.request(ApiKey.METADATA, 8, METADATA).brokers
        plain = socket.create_connection(("127.0.0.1", broker.listener_port("MTLS")), timeout=TIMEOUT)
        with pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError)):
            stranger = _client_context(pki, "stranger.pem").wrap_socket(plain, server_hostname="localhost")
            with stranger:  # TLS 1.3: the server's verdict arrives with the first read
                stranger.sendall(b"\x00\x00\x00\x00")
                if not stranger.recv(1):
                    raise ConnectionResetError("closed")
        plain.close()
        assert trusted.request(ApiKey.METADATA, 8, METADATA).brokers
        good.serves()
