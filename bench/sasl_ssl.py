"""SASL_SSL for the benches: a broker listener, a SCRAM user and client connections.

Owns what ``broker_ingest.py --security-protocol SASL_SSL`` and ``spark_read.py
--security-protocol SASL_SSL`` share to run their plaintext figures side by side with the
same figures through SASL_SSL, on one broker process with both listeners:

* ``Pki``: a throw-away CA and server certificate (``tests.support.tls.make_pki``; PEM key
  store for the broker, the CA as the clients' PEM trust store);
* ``broker_overrides(pki)``: ``--override`` values for a broker with a ``PLAINTEXT`` and a
  ``SASL_SSL`` listener (SCRAM-SHA-256; TLSv1.3, OpenSSL's default suite AES-256-GCM);
* ``create_user(host, port)``: the bench's SCRAM-SHA-256 credential (``USER``/``PASSWORD``),
  stored through the PLAINTEXT listener with this project's ``AdminClient``
  (AlterUserScramCredentials);
* ``connect(host, port, cafile)``: a blocking socket, TLS-handshaken (the CA checked, host
  name ``localhost``) and SASL-authenticated (SaslHandshake v1 + SaslAuthenticate with the
  project's ``SaslClientAuthenticator``), ready for raw requests;
* ``client_config(bootstrap, cafile)``: the same as Kafka client configuration keys
  (``security.protocol``, ``ssl.truststore.*``, ``sasl.mechanism``, ``sasl.jaas.config``);
* ``parse_listeners(text)``: listener name -> port, from the broker's "listening on" line.

Thread-safety: plain functions; each connection belongs to its caller.
"""

from __future__ import annotations

import os
import re
import socket
import ssl
import struct
import sys
import tempfile
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

SECURITY_PROTOCOLS = ("PLAINTEXT", "SASL_SSL")
MECHANISM = "SCRAM-SHA-256"
USER = "bench"
PASSWORD = "bench-secret"
JAAS = f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{USER}" password="{PASSWORD}";'
_I32 = struct.Struct(">i")


def make_pki(directory: Path | None = None):
    """A throw-away PKI (``tests.support.tls.Pki``: ``.path("ca.pem")``, ``.dir``)."""
    from tests.support.tls import make_pki as make
    return make(Path(directory or tempfile.mkdtemp(prefix="bench-pki-")))


def broker_overrides(pki) -> list[str]:
    """``key=value`` overrides: PLAINTEXT and SASL_SSL listeners on free ports of 127.0.0.1."""
    return ["listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            f"sasl.enabled.mechanisms={MECHANISM}",
            "ssl.keystore.type=PEM", f"ssl.keystore.location={pki.path('server.pem')}"]


def parse_listeners(text: str) -> dict[str, int]:
    """Listener name -> port, from the broker's "listening on NAME://host:port,..." line."""
    return {name: int(port) for name, port in re.findall(r"(\w+)://127\.0\.0\.1:(\d+)", text)}


def create_user(host: str, port: int) -> None:
    """Store the bench's SCRAM credential, through the PLAINTEXT listener at ``port``."""
    from broker.client.admin import AdminClient
    from broker.client.admin_scram import ScramCredentialUpsertion
    admin = AdminClient({"bootstrap.servers": f"{host}:{port}"})
    try:
        for _user, result in admin.alter_user_scram_credentials(
                [ScramCredentialUpsertion(USER, MECHANISM, PASSWORD)], timeout_ms=30000).items():
            result.result()
    finally:
        admin.close()


def client_config(bootstrap: str, cafile: str) -> dict[str, str]:
    """Kafka client keys of a SASL_SSL connection as the bench's user."""
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL",
            "ssl.truststore.type": "PEM", "ssl.truststore.location": cafile,
            "sasl.mechanism": MECHANISM, "sasl.jaas.config": JAAS}


def _exchange(sock: socket.socket, api_key: int, version: int, body, correlation_id: int):
    from broker.protocol import RequestHeader, decode_response, encode_request
    sock.sendall(b"".join(bytes(b) for b in encode_request(RequestHeader(api_key, version, correlation_id,
                                                                         "bench-sasl"), body)))
    head = _recv_exactly(sock, 4)
    frame = _recv_exactly(sock, _I32.unpack(head)[0])
    return decode_response(memoryview(frame), api_key, version)[1]


def _recv_exactly(sock: socket.socket, n: int) -> bytearray:
    buf = bytearray(n)
    view, have = memoryview(buf), 0
    while have < n:
        got = sock.recv_into(view[have:])
        if not got:
            raise ConnectionError("closed by the broker")
        have += got
    return buf


def connect(host: str, port: int, cafile: str, context: ssl.SSLContext | None = None) -> ssl.SSLSocket:
    """A blocking, TLS-handshaken and SASL-authenticated socket (TCP_NODELAY) to ``port``."""
    from broker.client.sasl import SaslClientAuthenticator, SaslSettings
    context = context or ssl.create_default_context(cafile=cafile)
    raw = socket.create_connection((host, port))
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock = context.wrap_socket(raw, server_hostname="localhost")
    auth = SaslClientAuthenticator(SaslSettings("SASL_SSL", MECHANISM, USER, PASSWORD), 2)
    cid = 1 << 30
    while (step := auth.next_request()) is not None:
        api_key, version, body = step
        auth.on_response(api_key, _exchange(sock, api_key, version, body, cid))
        cid += 1
    if not auth.complete:
        raise ConnectionError("SASL authentication did not complete")
    return sock
