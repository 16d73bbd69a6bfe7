"""Capture the fuzzing corpus of tests/fuzz/ from real clients (issue 19): run
confluent-kafka, kafka-python, aiokafka and kcat workloads (produce with each codec,
group consumption, admin calls) through a recording TCP proxy in front of a real broker,
and write

* ``tests/fuzz/corpus/request/<client>-<sha1>.bin``: every distinct request frame's
  payload (no size prefix), at most ``PER_CLIENT`` per client;
* ``tests/fuzz/corpus/frames/<client>-<sha1>.bin``: a chunk-size byte and the raw byte
  stream of one connection's first requests (size prefixes included);
* ``tests/fuzz/corpus/batch/<sha1>.bin``: the record batches of the captured Produce
  requests in the ``batch`` target's layout (attributes, count, records area);
* ``tests/fuzz/corpus/log_dir/<sha1>.bin``: the first KiB of real segments;
* ``tests/fuzz/corpus/sasl/<client>-<mechanism>-<sha1>.bin``: a set-up byte (0, see
  ``tests/fuzz/targets_security.py``) and the byte stream of a connection to a
  SASL_PLAINTEXT listener (handshake, authentication, the first requests) from
  confluent-kafka (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER with an unsecured JWT),
  kafka-python and aiokafka (PLAIN, SCRAM-SHA-256/512); plus ``synthetic-*``: exchanges
  built from the target's own credentials and fixed server nonce, which complete in the
  target (the captured SCRAM finals answer a real broker's nonce, so they fail there),
  and ``jwt-*``: JWT-mode inputs (header and claims JSON) of the captured and synthetic
  tokens;
* ``tests/fuzz/corpus/tls/<client>-<sha1>.bin``: a flags byte (0: as is, to the listener
  with client certificates requested) and the first bytes (ClientHello on) of connections
  to an SSL listener from confluent-kafka and kafka-python, and Python's ``ssl``
  ClientHello, also as its bare ClientHello body (flags 6: the target adds the headers).

Run from the repository root: ``.venv/bin/python tools/capture_fuzz_corpus.py [TARGET ...]``
(no TARGET: all of them; e.g. ``sasl tls`` recaptures only those two).
"""

from __future__ import annotations

import hashlib
import select
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CORPUS = ROOT / "tests" / "fuzz" / "corpus"
PER_CLIENT = 60
MAX_FRAME = 64 * 1024


class RecordingProxy(threading.Thread):
    def __init__(self, target: tuple[str, int]) -> None:
        super().__init__(daemon=True)
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.frames: list[bytes] = []
        self.streams: list[bytes] = []
        self.lock = threading.Lock()

    def run(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._pair, args=(client,), daemon=True).start()

    def _pair(self, client: socket.socket) -> None:
        server = socket.create_connection(self.target)
        buf = b""
        stream = b""
        socks = [client, server]
        try:
            while True:
                r, _, _ = select.select(socks, [], [], 30)
                if not r:
                    return
                for s in r:
                    data = s.recv(65536)
                    if not data:
                        return
                    (server if s is client else client).sendall(data)
                    if s is client:
                        buf += data
                        if len(stream) < 16384:
                            stream += data
                        while len(buf) >= 4:
                            size = struct.unpack(">i", buf[:4])[0]
                            if len(buf) < 4 + size:
                                break
                            if size <= MAX_FRAME:
                                with self.lock:
                                    self.frames.append(buf[4:4 + size])
                            buf = buf[4 + size:]
        except OSError:  # a reset by either side ends the pair
            pass
        finally:
            with self.lock:
                if stream:
                    self.streams.append(stream)
            client.close()
            server.close()

    def take(self) -> tuple[list[bytes], list[bytes]]:
        with self.lock:
            frames, streams = self.frames, self.streams
            self.frames, self.streams = [], []
        return frames, streams


def workloads(bootstrap: str) -> dict[str, callable]:
    def confluent() -> None:
        import confluent_kafka
        from confluent_kafka.admin import AdminClient, NewTopic
        a = AdminClient({"bootstrap.servers": bootstrap})
        a.create_topics([NewTopic("ck", 2, 1)])["ck"].result(30)
        for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
            p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                                          "enable.idempotence": True})
            for i in range(20):
                p.produce("ck", b"value-%d" % i, key=b"k%d" % i, headers=[("h", b"v")])
            p.flush(30)
        c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "ckg",
                                      "auto.offset.reset": "earliest"})
        c.subscribe(["ck"])
        deadline = time.time() + 20
        got = 0
        while got < 100 and time.time() < deadline:
            got += len(c.consume(100, 0.5))
        c.commit()
        c.close()
        a.list_consumer_groups().result(30)

    def kafka_python() -> None:
        from kafka import KafkaConsumer, KafkaProducer
        for codec in (None, "gzip", "lz4", "zstd"):
            p = KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec)
            for i in range(20):
                p.send("kp", b"v%d" % i, key=b"k")
            p.flush()
            p.close()
        c = KafkaConsumer("kp", bootstrap_servers=bootstrap, group_id="kpg", auto_offset_reset="earliest",
                          consumer_timeout_ms=5000)
        for _ in c:
            pass
        c.close()

    def aiokafka() -> None:
        import asyncio

        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

        async def main() -> None:
            p = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type="gzip")
            await p.start()
            for i in range(20):
                await p.send_and_wait("aio", b"v%d" % i)
            await p.stop()
            c = AIOKafkaConsumer("aio", bootstrap_servers=bootstrap, group_id="aiog", auto_offset_reset="earliest")
            await c.start()
            await c.getmany(timeout_ms=3000)
            await c.commit()
            await c.stop()

        asyncio.run(main())

    def kcat() -> None:
        if not shutil.which("kcat"):
            return
        subprocess.run(["kcat", "-b", bootstrap, "-P", "-t", "kc", "-z", "lz4"], input=b"a\nb\nc\n", timeout=60)
        subprocess.run(["kcat", "-b", bootstrap, "-C", "-t", "kc", "-e", "-q"], capture_output=True, timeout=60)
        subprocess.run(["kcat", "-b", bootstrap, "-G", "kcg", "-e", "-q", "kc"], capture_output=True, timeout=60)
        subprocess.run(["kcat", "-b", bootstrap, "-L"], capture_output=True, timeout=60)

    return {"confluent": confluent, "kafka-python": kafka_python, "aiokafka": aiokafka, "kcat": kcat}


def sha(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()[:16]


def batches_of(frame: bytes) -> list[bytes]:
    """The record batches inside a Produce request payload, in the batch target's layout."""
    from broker.protocol import Reader, parse_request_header
    from broker.protocol.schema import decode
    from broker.protocol.versions import request_schema
    reader = Reader(memoryview(frame))
    header, _ = parse_request_header(reader)
    if header.api_key != 0:
        return []
    body = decode(request_schema(0, header.api_version), header.api_version, reader)
    out = []
    for t in body.topic_data:
        for p in t.partition_data:
            rec = bytes(p.records or b"")
            if len(rec) >= 61:
                attributes = rec[22] & 0x77
                count = struct.unpack(">i", rec[57:61])[0]
                out.append(bytes([attributes, (count >> 8) & 0xFF, count & 0xFF]) + rec[61:])
    return out


def main() -> None:
    targets = sys.argv[1:] or ["request", "frames", "batch", "log_dir", "sasl", "tls"]
    if {"request", "frames", "batch", "log_dir"} & set(targets):
        capture_requests()
    if {"sasl", "tls"} & set(targets):
        capture_security([t for t in targets if t in ("sasl", "tls")])


def capture_requests() -> None:
    from tests.support.broker import BrokerProcess

    work = Path(tempfile.mkdtemp(prefix="capture-"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        broker_port = s.getsockname()[1]
    proxy = RecordingProxy(("127.0.0.1", broker_port))
    proxy.start()
    # clients are told (Metadata) to come back through the proxy, not to the broker itself
    broker = BrokerProcess(work, {"auto.create.topics.enable": "true", "group.initial.rebalance.delay.ms": "0",
                                  "listeners": f"PLAINTEXT://127.0.0.1:{broker_port}",
                                  "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"})
    broker.start()
    bootstrap = f"127.0.0.1:{proxy.port}"
    for d in ("request", "frames", "batch", "log_dir"):
        shutil.rmtree(CORPUS / d, ignore_errors=True)
        (CORPUS / d).mkdir(parents=True)
    try:
        for name, fn in workloads(bootstrap).items():
            fn()
            time.sleep(0.5)
            frames, streams = proxy.take()
            unique = {sha(f): f for f in frames}
            for h, f in list(unique.items())[:PER_CLIENT]:
                (CORPUS / "request" / f"{name}-{h}.bin").write_bytes(f)
                for b in batches_of(f):
                    (CORPUS / "batch" / f"{sha(b)}.bin").write_bytes(b[:8192])
            for s in streams[:4]:
                (CORPUS / "frames" / f"{name}-{sha(s)}.bin").write_bytes(bytes([97]) + s[:4096])
            print(f"{name}: {len(unique)} distinct requests", flush=True)
    finally:
        broker.stop()
    segments = [seg for seg in sorted(work.glob("kafka-logs/*/00000000000000000000.log")) if seg.stat().st_size]
    for seg in segments[:12]:
        data = seg.read_bytes()[:1024]
        (CORPUS / "log_dir" / f"{sha(data)}.bin").write_bytes(data)
    shutil.rmtree(work, ignore_errors=True)
    for d in sorted(CORPUS.iterdir()):
        print(d.name, len(list(d.iterdir())), "files", sum(f.stat().st_size for f in d.iterdir()), "bytes")



# --- SASL and TLS (the sasl and tls targets) -----------------------------------------------

def _request(api_key: int, version: int, body: dict, correlation_id: int = 1) -> bytes:
    from tests.fuzz.targets_security import request_frame
    return request_frame(api_key, version, body, correlation_id)


def unsecured_jwt(claims: dict) -> str:
    import json

    from tests.fuzz.targets_security import jwt
    return jwt(b'{"alg": "none"}', json.dumps(claims).encode(), signed=False)


def signed_jwt(claims: dict) -> str:
    """ES256 with the sasl target's JWKS key (kid ``fuzz``)."""
    import json

    from tests.fuzz.targets_security import jwt
    return jwt(b'{"alg": "ES256", "kid": "fuzz"}', json.dumps(claims).encode(), signed=True)


def oauth_message(token: str) -> bytes:
    from tests.fuzz.targets_security import oauth_message as message
    return message(token)


def jwt_seeds(streams: list[bytes]) -> dict[str, bytes]:
    """JWT-mode inputs of the sasl target: the tokens of the captured OAUTHBEARER
    exchanges, and the synthetic claims, on each set-up."""
    import base64
    import json
    import re

    from tests.fuzz.targets_security import JWT_MODE, OAUTH_REQUIRED_SCOPE, SETUPS

    def unb64(part: bytes) -> bytes:
        return base64.urlsafe_b64decode(part + b"=" * (-len(part) % 4))

    pairs = {}
    for stream in streams:
        for m in re.finditer(rb"auth=Bearer ([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)\.", stream):
            pairs[f"captured-{sha(m.group(0))}"] = (unb64(m.group(1)), unb64(m.group(2)))
    claims = {"sub": "alice", "exp": 4102444800, "iat": 1700000000, "scope": OAUTH_REQUIRED_SCOPE, "aud": "kafkalog"}
    pairs["synthetic"] = (b'{"alg":"none"}', json.dumps(claims).encode())
    pairs["synthetic-jwks"] = (b'{"alg":"ES256","kid":"fuzz"}', json.dumps(claims).encode())
    out = {}
    for name, (header, body) in pairs.items():
        for index, setup in enumerate(SETUPS):
            if (setup == "jwks") == name.endswith("jwks"):
                out[f"jwt-{setup}-{name}"] = bytes([JWT_MODE | index]) + header + b"\x00" + body
    return out


def synthetic_sasl_streams() -> dict[str, bytes]:
    """Connections that authenticate in the sasl target (its users, salt and fixed server
    nonce), each followed by a Metadata request; name -> input (set-up byte + stream)."""
    from broker.protocol import ApiKey
    from broker.protocol.scram import (
        ClientFinalMessage,
        ClientFirstMessage,
        ServerFirstMessage,
        auth_message,
        client_proof,
        mechanism,
        salted_password,
    )
    from tests.fuzz.targets_security import OAUTH_REQUIRED_SCOPE, SCRAM_SALT, SCRAM_USERS, SERVER_NONCE, SETUPS

    def handshake(mech: str, version: int = 1) -> bytes:
        return _request(ApiKey.SASL_HANDSHAKE, version, {"mechanism": mech})

    def authenticate(token: bytes, version: int) -> bytes:
        return _request(ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": token})

    def raw(token: bytes) -> bytes:
        return struct.pack(">i", len(token)) + token

    versions = _request(ApiKey.API_VERSIONS, 3, {"client_software_name": "seed", "client_software_version": "1"})
    metadata = _request(ApiKey.METADATA, 8, {"topics": None, "allow_auto_topic_creation": False,
                                             "include_topic_authorized_operations": False})
    plain = b"\x00alice\x00alice-secret"
    out: dict[str, bytes] = {}
    for v in (0, 1, 2):
        out[f"plain-v{v}"] = b"\x00" + versions + handshake("PLAIN") + authenticate(plain, v) + metadata
    out["plain-legacy"] = b"\x00" + handshake("PLAIN", 0) + raw(plain) + metadata
    out["plain-wrong-password"] = b"\x00" + handshake("PLAIN") + authenticate(b"\x00alice\x00nope", 1)
    user, password = next(iter(SCRAM_USERS.items()))
    for name in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        mech = mechanism(name)
        first, bare = ClientFirstMessage.build(user, "clientnonce")
        server_first = ServerFirstMessage.build("clientnonce" + SERVER_NONCE, SCRAM_SALT, 4096)
        without = ClientFinalMessage.build_without_proof("n,,", "clientnonce" + SERVER_NONCE)
        proof = client_proof(mech, salted_password(mech, password, SCRAM_SALT, 4096),
                             auth_message(bare, server_first, without))
        final = ClientFinalMessage.build(without, proof).encode()
        for v in (0, 1, 2):
            out[f"{name}-v{v}"] = (b"\x00" + versions + handshake(name) + authenticate(first.encode(), v)
                                   + authenticate(final, v) + metadata)
        out[f"{name}-legacy"] = b"\x00" + handshake(name, 0) + raw(first.encode()) + raw(final) + metadata
        # KIP-368 on the re-authenticating set-up: authenticate, a request, then again
        out[f"{name}-reauth"] = (bytes([SETUPS.index("reauth-scoped-oauth")]) + handshake(name)
                                 + authenticate(first.encode(), 2) + authenticate(final, 2) + metadata
                                 + handshake(name) + authenticate(first.encode(), 2) + authenticate(final, 2)
                                 + metadata)
    claims = {"sub": "alice", "exp": 4102444800, "iat": 1700000000, "scope": OAUTH_REQUIRED_SCOPE}
    good = oauth_message(unsecured_jwt(claims))
    out["oauth-unsecured"] = b"\x00" + handshake("OAUTHBEARER") + authenticate(good, 2) + metadata
    out["oauth-reauth"] = (bytes([SETUPS.index("reauth-scoped-oauth")]) + handshake("OAUTHBEARER")
                           + authenticate(good, 2) + metadata + handshake("OAUTHBEARER") + authenticate(good, 2))
    expired = oauth_message(unsecured_jwt({**claims, "exp": 1000000000}))
    out["oauth-expired"] = b"\x00" + handshake("OAUTHBEARER") + authenticate(expired, 2) + authenticate(b"\x01", 2)
    jwks_claims = {**claims, "aud": "kafkalog"}
    out["oauth-jwks"] = (bytes([SETUPS.index("jwks")]) + handshake("OAUTHBEARER")
                         + authenticate(oauth_message(signed_jwt(jwks_claims)), 1) + metadata)
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def python_client_hellos(cafile: str) -> dict[str, bytes]:
    import ssl
    out = {}
    for name, top in (("python-ssl", None), ("python-ssl-tls12", ssl.TLSVersion.TLSv1_2)):
        context = ssl.create_default_context(cafile=cafile)
        if top is not None:
            context.maximum_version = top
        outgoing = ssl.MemoryBIO()
        tls = context.wrap_bio(ssl.MemoryBIO(), outgoing, server_hostname="localhost")
        try:
            tls.do_handshake()
        except ssl.SSLWantReadError:
            pass
        out[name] = outgoing.read()
    return out


def capture_security(targets: list[str]) -> None:
    """Real clients through recording proxies in front of a broker's SASL_PLAINTEXT and
    SSL listeners (module docstring), plus the synthetic SASL exchanges."""
    from tests.support.broker import BrokerProcess
    from tests.support.tls import make_pki

    work = Path(tempfile.mkdtemp(prefix="capture-security-"))
    pki = make_pki(work / "pki")
    ports = {name: _free_port() for name in ("PLAINTEXT", "SASL_PLAINTEXT", "SSL")}
    proxies = {name: RecordingProxy(("127.0.0.1", ports[name])) for name in ("SASL_PLAINTEXT", "SSL")}
    for proxy in proxies.values():
        proxy.start()
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
    broker = BrokerProcess(work, {
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{ports['PLAINTEXT']},"
                                f"SASL_PLAINTEXT://127.0.0.1:{proxies['SASL_PLAINTEXT'].port},"
                                f"SSL://127.0.0.1:{proxies['SSL'].port}",
        "auto.create.topics.enable": "true",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.path("server.pem"),
    }, name="capture-security")
    broker.start()
    sasl = f"127.0.0.1:{proxies['SASL_PLAINTEXT'].port}"
    tls = f"127.0.0.1:{proxies['SSL'].port}"
    try:
        from confluent_kafka.admin import (
            AdminClient,
            ScramCredentialInfo,
            ScramMechanism,
            UserScramCredentialUpsertion,
        )
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"})
        for f in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
                "bob", ScramCredentialInfo(getattr(ScramMechanism, m), 4096), b"bob-secret")
                for m in ("SCRAM_SHA_256", "SCRAM_SHA_512")]).values():
            f.result(30)
        if "sasl" in targets:
            _capture_sasl(sasl, proxies["SASL_PLAINTEXT"])
        if "tls" in targets:
            _capture_tls(tls, proxies["SSL"], pki)
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    for d in targets:
        files = list((CORPUS / d).iterdir())
        print(d, len(files), "files", sum(f.stat().st_size for f in files), "bytes")


def _capture_sasl(bootstrap: str, proxy: RecordingProxy) -> None:
    shutil.rmtree(CORPUS / "sasl", ignore_errors=True)
    (CORPUS / "sasl").mkdir(parents=True)
    mechs = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    users = {"PLAIN": ("alice", "alice-secret"), "SCRAM-SHA-256": ("bob", "bob-secret"),
             "SCRAM-SHA-512": ("bob", "bob-secret")}

    def confluent(mech: str) -> None:
        import confluent_kafka
        conf = {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mech}
        if mech == "OAUTHBEARER":
            conf.update({"enable.sasl.oauthbearer.unsecure.jwt": True,
                         "sasl.oauthbearer.config": "principal=alice scope=kafka"})
        else:
            conf.update({"sasl.username": users[mech][0], "sasl.password": users[mech][1]})
        p = confluent_kafka.Producer(conf)
        p.produce("sasl-ck", b"v")
        p.flush(30)

    def kafka_python(mech: str) -> None:
        from kafka import KafkaProducer
        p = KafkaProducer(bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism=mech,
                          sasl_plain_username=users[mech][0], sasl_plain_password=users[mech][1])
        p.send("sasl-kp", b"v").get(30)
        p.close()

    def aiokafka(mech: str) -> None:
        import asyncio

        from aiokafka import AIOKafkaProducer

        async def main() -> None:
            p = AIOKafkaProducer(bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT",
                                 sasl_mechanism=mech, sasl_plain_username=users[mech][0],
                                 sasl_plain_password=users[mech][1])
            await p.start()
            try:
                await p.send_and_wait("sasl-aio", b"v")
            finally:
                await p.stop()

        asyncio.run(main())

    runs = [("confluent", m, confluent) for m in (*mechs, "OAUTHBEARER")]
    runs += [("kafka-python", m, kafka_python) for m in mechs] + [("aiokafka", m, aiokafka) for m in mechs]
    proxy.take()
    oauth_streams: list[bytes] = []
    for client, mech, fn in runs:
        fn(mech)
        time.sleep(0.5)
        _, streams = proxy.take()
        for s in streams[:3]:
            (CORPUS / "sasl" / f"{client}-{mech}-{sha(s)}.bin").write_bytes(b"\x00" + s[:4096])
        print(f"sasl {client} {mech}: {len(streams)} connections", flush=True)
        oauth_streams += streams if mech == "OAUTHBEARER" else []
    for name, data in synthetic_sasl_streams().items():
        (CORPUS / "sasl" / f"synthetic-{name}.bin").write_bytes(data)
    for name, data in jwt_seeds(oauth_streams).items():
        (CORPUS / "sasl" / f"{name}.bin").write_bytes(data)


def _capture_tls(bootstrap: str, proxy: RecordingProxy, pki) -> None:
    shutil.rmtree(CORPUS / "tls", ignore_errors=True)
    (CORPUS / "tls").mkdir(parents=True)

    def confluent() -> None:
        import confluent_kafka
        p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "security.protocol": "SSL",
                                      "ssl.ca.location": pki.path("ca.pem")})
        p.produce("tls-ck", b"v")
        p.flush(30)

    def kafka_python() -> None:
        from kafka import KafkaProducer
        p = KafkaProducer(bootstrap_servers=bootstrap, security_protocol="SSL", ssl_cafile=pki.path("ca.pem"))
        p.send("tls-kp", b"v").get(30)
        p.close()

    proxy.take()
    for client, fn in (("confluent", confluent), ("kafka-python", kafka_python)):
        fn()
        time.sleep(0.5)
        _, streams = proxy.take()
        for s in streams[:2]:
            (CORPUS / "tls" / f"{client}-{sha(s)}.bin").write_bytes(b"\x00" + s[:4096])
        print(f"tls {client}: {len(streams)} connections", flush=True)
    for name, hello in python_client_hellos(pki.path("ca.pem")).items():
        (CORPUS / "tls" / f"{name}-{sha(hello)}.bin").write_bytes(b"\x00" + hello)
        # the same, unwrapped: the target rebuilds the record and handshake headers (flags 6)
        if hello[:1] == b"\x16" and hello[5:6] == b"\x01":
            body = hello[9:5 + int.from_bytes(hello[3:5], "big")]
            (CORPUS / "tls" / f"{name}-body-{sha(body)}.bin").write_bytes(b"\x06" + body)


if __name__ == "__main__":
    main()
