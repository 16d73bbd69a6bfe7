"""TLS (issue 16, TLS part): the broker's SSL listeners and the client's security.protocol=SSL,
proven with real clients: confluent-kafka, kcat, kafka-python, aiokafka and ours.

One broker (module scope) has four listeners at once: PLAINTEXT; SSL (PEM key store, client
certificates requested); MTLS (mapped to SSL, with per-listener overrides: a PKCS12 key
store and ssl.client.auth=required); WRONG (mapped to SSL, a certificate for another host
name). The certificates come from ``tests/support/tls.py`` (``pki``).
"""

from __future__ import annotations

import asyncio
import errno
import socket
import ssl
import subprocess
import uuid

import pytest

from broker.client.admin import AdminClient, NewTopic
from broker.client.consumer.consumer import KafkaConsumer
from broker.client.errors import SslAuthenticationError
from broker.client.producer.config import ProducerConfig
from broker.client.producer.producer import KafkaProducer
from broker.config import ConfigError
from broker.protocol import ApiKey, RequestHeader, encode_request, request_schema
from broker.server.ssl_context import PrincipalMapper, subject_dn
from tests.support.broker import BrokerProcess, RawClient
from tests.support.tls import CLIENT_DN, KEY_PASSWORD, STORE_PASSWORD, TRUST_PASSWORD

TIMEOUT = 30


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory, pki):
    b = BrokerProcess(tmp_path_factory.mktemp("tls-broker"), {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0,WRONG://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,WRONG:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pki.path("server.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": pki.path("ca.pem"),
        "ssl.client.auth": "requested",
        "listener.name.mtls.ssl.keystore.type": "PKCS12",
        "listener.name.mtls.ssl.keystore.location": pki.path("server.p12"),
        "listener.name.mtls.ssl.keystore.password": STORE_PASSWORD,
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.wrong.ssl.keystore.location": pki.path("wronghost.pem"),
    }, name="tls")
    b.start()
    yield b
    assert b.stop() == 0, b.stderr_text()[-3000:]


def _addr(broker, listener):
    return f"localhost:{broker.ports[listener]}"


def _topic():
    return f"tls-{uuid.uuid4().hex[:8]}"


def _ours(broker, pki, listener="SSL", **extra):
    return {"bootstrap.servers": _addr(broker, listener), "security.protocol": "SSL",
            "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.path("ca.pem"), **extra}


def _produce_consume_ours(config, topic, n=20, size=1000):
    producer = KafkaProducer(dict(config))
    try:
        futures = [producer.send(topic, b"v%d" % i + b"x" * size, key=b"k%d" % i) for i in range(n)]
        producer.flush()
        assert [f.result(TIMEOUT).offset for f in futures] == list(range(n))
    finally:
        producer.close()
    consumer = KafkaConsumer(dict(config))
    try:
        consumer.assign([(topic, 0)])
        consumer.seek_to_beginning()
        got = []
        while len(got) < n:
            got += consumer.poll(1000)
        assert [r.key for r in got] == [b"k%d" % i for i in range(n)]
        assert got[-1].value == b"v%d" % (n - 1) + b"x" * size
    finally:
        consumer.close()


# --- our client ---------------------------------------------------------------------------

def test_ours_over_ssl_with_a_pem_truststore(tls_broker, pki):
    _produce_consume_ours(_ours(tls_broker, pki), _topic(), n=50, size=100_000)


def test_ours_mutual_tls_pkcs12_stores(tls_broker, pki):
    config = _ours(tls_broker, pki, "MTLS", **{
        "ssl.truststore.type": "PKCS12", "ssl.truststore.location": pki.path("truststore.p12"),
        "ssl.truststore.password": TRUST_PASSWORD,
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": pki.path("client.p12"),
        "ssl.keystore.password": STORE_PASSWORD})
    _produce_consume_ours(config, _topic())


def test_ours_mutual_tls_inline_pem_and_encrypted_key(tls_broker, pki):
    with open(pki.path("client.crt")) as f:
        chain = f.read()
    with open(pki.path("client-enc.key")) as f:
        key = f.read()
    with open(pki.path("ca.pem")) as f:
        ca = f.read()
    config = {"bootstrap.servers": _addr(tls_broker, "MTLS"), "security.protocol": "SSL",
              "ssl.truststore.type": "PEM", "ssl.truststore.certificates": ca,
              "ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": chain, "ssl.keystore.key": key,
              "ssl.key.password": KEY_PASSWORD}
    _produce_consume_ours(config, _topic())
    # a PEM key store file (key and chain in one file) works as well
    _produce_consume_ours(_ours(tls_broker, pki, "MTLS", **{
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.path("client.pem")}), _topic())


def test_ours_admin_over_ssl(tls_broker, pki):
    topic = _topic()
    with AdminClient(_ours(tls_broker, pki)) as admin:
        admin.create_topics([NewTopic(topic, 3)]).all()
        assert topic in admin.list_topics()


def test_wrong_ca_fails_cleanly(tls_broker, pki):
    config = _ours(tls_broker, pki, **{"ssl.truststore.location": pki.path("other-ca.pem"),
                                       "max.block.ms": 20000})
    producer = KafkaProducer(config)
    try:
        with pytest.raises(SslAuthenticationError, match="certificate"):
            producer.send(_topic(), b"x").result(TIMEOUT)
    finally:
        producer.close()
    consumer = KafkaConsumer(_ours(tls_broker, pki, **{"ssl.truststore.location": pki.path("other-ca.pem")}))
    try:
        with pytest.raises(SslAuthenticationError):
            consumer.assign([("t", 0)])
            consumer.poll(5000)
    finally:
        consumer.close()


def test_hostname_mismatch_fails_unless_verification_is_off(tls_broker, pki):
    with AdminClient(_ours(tls_broker, pki, "WRONG")) as admin:
        with pytest.raises(SslAuthenticationError, match="match|mismatch"):
            admin.list_topics()
    with AdminClient(_ours(tls_broker, pki, "WRONG", **{"ssl.endpoint.identification.algorithm": ""})) as admin:
        assert isinstance(admin.list_topics(), list)


def test_unknown_client_ca_refused_when_client_auth_is_required(tls_broker, pki):
    stranger = _ours(tls_broker, pki, "MTLS", **{"ssl.keystore.type": "PEM",
                                                 "ssl.keystore.location": pki.path("stranger.pem")})
    with AdminClient(stranger) as admin:
        with pytest.raises(SslAuthenticationError):
            admin.list_topics()
    no_cert = _ours(tls_broker, pki, "MTLS")
    with AdminClient(no_cert) as admin:
        with pytest.raises(SslAuthenticationError):
            admin.list_topics()
    assert "TLS handshake failed" in tls_broker.stderr_text()
    # nothing else is affected
    with AdminClient(_ours(tls_broker, pki)) as admin:
        assert isinstance(admin.list_topics(), list)


def test_client_config_errors_name_the_key_and_hide_secrets(pki, tmp_path):
    with pytest.raises(ConfigError, match="ssl.keystore.password") as e:
        KafkaProducer({"bootstrap.servers": "localhost:1", "security.protocol": "SSL",
                       "ssl.keystore.type": "PKCS12", "ssl.keystore.location": pki.path("client.p12"),
                       "ssl.keystore.password": "not-the-password-42"})
    assert "not-the-password-42" not in str(e.value)
    jks = tmp_path / "client.jks"
    subprocess.run(["keytool", "-genkeypair", "-keystore", str(jks), "-storetype", "JKS", "-storepass", "secret1",
                    "-keypass", "secret1", "-alias", "a", "-dname", "CN=a", "-keyalg", "EC"],
                   check=True, capture_output=True)
    with pytest.raises(ConfigError, match="JKS.*keytool -importkeystore"):
        KafkaProducer({"bootstrap.servers": "localhost:1", "security.protocol": "SSL",
                       "ssl.keystore.location": str(jks), "ssl.keystore.password": "secret1"})
    text = repr(ProducerConfig({"security.protocol": "SSL", "ssl.key.password": "hush-123",
                                       "ssl.keystore.key": "-----BEGIN PRIVATE KEY-----hush"}))
    assert "hush" not in text and "[hidden]" in text


# --- the broker: principals, bad input, startup --------------------------------------------

def test_principal_from_the_client_certificate(pki):
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    with open(pki.path("client.crt"), "rb") as f:
        der = x509.load_pem_x509_certificate(f.read()).public_bytes(Encoding.DER)
    assert subject_dn(der) == CLIENT_DN
    assert PrincipalMapper("DEFAULT").name(CLIENT_DN) == CLIENT_DN
    rules = PrincipalMapper("RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$1@$3/L, DEFAULT")
    assert rules.name("CN=Client,OU=test,O=KafkaLog") == "client@kafkalog"
    assert rules.name("CN=x") == "CN=x"
    assert PrincipalMapper("RULE:^CN=([^,]*).*$/$1/U").name(CLIENT_DN) == "CLIENT"


def test_connection_principal_in_process(pki, tmp_path):
    from broker.server.broker import KafkaBroker

    b = KafkaBroker({"listeners": "SSL://127.0.0.1:0", "log.dirs": str(tmp_path / "logs"),
                     "ssl.keystore.type": "PKCS12", "ssl.keystore.location": pki.path("server.p12"),
                     "ssl.keystore.password": STORE_PASSWORD, "ssl.truststore.type": "PEM",
                     "ssl.truststore.location": pki.path("ca.pem"), "ssl.client.auth": "required",
                     "ssl.principal.mapping.rules": "RULE:^CN=([^,]*),.*$/$1/, DEFAULT"})
    b.start()
    try:
        port = b.bound_address("SSL")[1]
        with AdminClient({"bootstrap.servers": f"localhost:{port}", "security.protocol": "SSL",
                          "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.path("ca.pem"),
                          "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.path("client.pem")}) as admin:
            admin.list_topics()
            conns = list(b.socket_server._connections)
            assert conns and {(c.security_protocol, c.principal) for c in conns} == {("SSL", "User:client")}
    finally:
        b.shutdown()


def test_garbage_and_plaintext_requests_on_the_ssl_port_close_only_that_connection(tls_broker, pki):
    port = tls_broker.ports["SSL"]
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as s:
        s.sendall(b"\x16\x03\x01\x00\x05garbage-not-a-client-hello" * 10)
        assert _closed(s)
    header = RequestHeader(ApiKey.API_VERSIONS, 0, 1, "plain")
    frame = b"".join(bytes(b) for b in encode_request(header, request_schema(ApiKey.API_VERSIONS, 0).cls()))
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as s:
        s.sendall(frame)
        assert _closed(s)
    # a silent client holds its own thread only: another client completes meanwhile
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT):
        _produce_consume_ours(_ours(tls_broker, pki), _topic(), n=3)
        with RawClient("127.0.0.1", tls_broker.ports["PLAINTEXT"]) as raw:
            assert raw.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0
    assert tls_broker.alive()


def test_a_half_done_handshake_does_not_block_others(tls_broker, pki):
    """A client that sends its ClientHello and then stalls (never reads the answer)."""
    port = tls_broker.ports["SSL"]
    context = ssl.create_default_context(cafile=pki.path("ca.pem"))
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as stalled:
        stalled.sendall(outgoing.read())
        _produce_consume_ours(_ours(tls_broker, pki), _topic(), n=3)


def _closed(s: socket.socket) -> bool:
    try:
        while True:
            data = s.recv(65536)
            if not data:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def test_bad_key_store_fails_startup_with_a_clear_message(broker_factory, pki):
    b = broker_factory({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PKCS12",
                        "ssl.keystore.location": pki.path("server.p12"), "ssl.keystore.password": "wrong-pw-77"},
                       start=False)
    with pytest.raises(RuntimeError) as e:
        b.start()
    assert "ssl.keystore.password" in str(e.value) and "wrong-pw-77" not in str(e.value)
    b = broker_factory({"listeners": "SSL://127.0.0.1:0"}, start=False)
    with pytest.raises(RuntimeError, match="ssl.keystore.location"):
        b.start()
    b = broker_factory({"listeners": "NOPE://127.0.0.1:0"}, start=False)
    with pytest.raises(RuntimeError, match="listener.security.protocol.map"):
        b.start()


def test_describe_configs_hides_ssl_passwords(tls_broker):
    from confluent_kafka.admin import AdminClient as CkAdmin
    from confluent_kafka.admin import ConfigResource

    admin = CkAdmin({"bootstrap.servers": tls_broker.bootstrap})
    res = ConfigResource(ConfigResource.Type.BROKER, "1")
    entries = admin.describe_configs([res])[res].result(TIMEOUT)
    assert entries["ssl.keystore.location"].value.endswith("server.pem")
    assert entries["ssl.keystore.password"].is_sensitive and entries["ssl.keystore.password"].value is None


# --- other clients --------------------------------------------------------------------------

def _ck_conf(broker, pki, listener="SSL", mtls=False):
    conf = {"bootstrap.servers": _addr(broker, listener), "security.protocol": "SSL",
            "ssl.ca.location": pki.path("ca.pem")}
    if mtls:
        conf.update({"ssl.certificate.location": pki.path("client.crt"), "ssl.key.location": pki.path("client.key")})
    return conf


@pytest.mark.parametrize("listener,mtls", [("SSL", False), ("MTLS", True)])
def test_confluent_kafka_over_ssl(tls_broker, pki, listener, mtls):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient as CkAdmin

    topic = _topic()
    conf = _ck_conf(tls_broker, pki, listener, mtls)
    p = Producer(conf)
    for i in range(100):
        p.produce(topic, b"m%d" % i)
    assert p.flush(TIMEOUT) == 0
    assert topic in CkAdmin(conf).list_topics(timeout=TIMEOUT).topics
    c = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    while len(got) < 100:
        m = c.poll(TIMEOUT)
        assert m is not None and not m.error(), m and m.error()
        got.append(m.value())
    c.close()
    assert got == [b"m%d" % i for i in range(100)]


def test_confluent_kafka_refused_without_a_trusted_client_certificate(tls_broker, pki):
    from confluent_kafka.admin import AdminClient as CkAdmin

    conf = _ck_conf(tls_broker, pki, "MTLS")
    conf.update({"ssl.certificate.location": pki.path("stranger.crt"), "ssl.key.location": pki.path("stranger.key")})
    with pytest.raises(Exception):  # noqa: B017 - librdkafka's KafkaException: transport / SSL failure
        CkAdmin(conf).list_topics(timeout=2)  # refused in the handshake: the timeout is waited out


@pytest.mark.kcat
def test_kcat_over_mutual_tls(tls_broker, pki):
    topic = _topic()
    args = ["kcat", "-b", _addr(tls_broker, "MTLS"), "-X", "security.protocol=SSL",
            "-X", f"ssl.ca.location={pki.path('ca.pem')}", "-X", f"ssl.certificate.location={pki.path('client.crt')}",
            "-X", f"ssl.key.location={pki.path('client.key')}"]
    subprocess.run([*args, "-P", "-t", topic], input=b"one\ntwo\nthree\n", check=True, timeout=60)
    out = subprocess.run([*args, "-C", "-t", topic, "-o", "beginning", "-e", "-q"], check=True, timeout=60,
                         capture_output=True)
    assert out.stdout.split() == [b"one", b"two", b"three"]


def test_kafka_python_over_ssl(tls_broker, pki):
    from kafka import KafkaConsumer as KpConsumer
    from kafka import KafkaProducer as KpProducer
    from kafka import TopicPartition

    topic = _topic()
    ssl_args = {"security_protocol": "SSL", "ssl_cafile": pki.path("ca.pem"),
                "ssl_certfile": pki.path("client.crt"), "ssl_keyfile": pki.path("client.key")}
    p = KpProducer(bootstrap_servers=_addr(tls_broker, "MTLS"), **ssl_args)
    for i in range(10):
        p.send(topic, b"kp%d" % i)
    p.flush(TIMEOUT)
    p.close()
    c = KpConsumer(bootstrap_servers=_addr(tls_broker, "MTLS"), consumer_timeout_ms=10000, **ssl_args)
    c.assign([TopicPartition(topic, 0)])
    c.seek_to_beginning()
    got = [m.value for _, m in zip(range(10), c)]
    c.close()
    assert got == [b"kp%d" % i for i in range(10)]


def test_aiokafka_over_ssl(tls_broker, pki):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.helpers import create_ssl_context

    topic = _topic()

    async def run():
        context = create_ssl_context(cafile=pki.path("ca.pem"))
        p = AIOKafkaProducer(bootstrap_servers=_addr(tls_broker, "SSL"), security_protocol="SSL",
                             ssl_context=context)
        await p.start()
        try:
            for i in range(10):
                await p.send_and_wait(topic, b"aio%d" % i)
        finally:
            await p.stop()
        c = AIOKafkaConsumer(bootstrap_servers=_addr(tls_broker, "SSL"), security_protocol="SSL",
                             ssl_context=context)
        await c.start()
        try:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            got = []
            while len(got) < 10:
                batch = await c.getmany(tp, timeout_ms=5000)
                got += [m.value for m in batch.get(tp, [])]
            return got
        finally:
            await c.stop()

    assert asyncio.run(run()) == [b"aio%d" % i for i in range(10)]


def test_idle_and_silent_tls_connections_are_closed(broker_factory, pki):
    """connections.max.idle.ms through TLS (the receive timeout surfaces as SSLWantReadError)
    and the handshake timeout (bounded by it) for a client that never says hello."""
    b = broker_factory({"listeners": "SSL://127.0.0.1:0", "connections.max.idle.ms": "1000",
                        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.path("server.pem")})
    port = b.ports["SSL"]
    context = ssl.create_default_context(cafile=pki.path("ca.pem"))
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as raw:
        with context.wrap_socket(raw, server_hostname="localhost") as tls:
            assert tls.version() in ("TLSv1.2", "TLSv1.3")
            assert tls.recv(1) == b""  # closed by the broker, nothing sent
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as silent:
        assert _closed(silent)
    text = b.stderr_text()
    assert "no TLS handshake within 1000 ms" in text
    assert "Traceback" not in text


def test_kafkalog_tools_take_ssl_keys_from_command_config(tls_broker, pki, tmp_path):
    """`kafkalog topics` / `produce` / `consume` with --command-config / --producer.config /
    --consumer.config holding security.protocol=SSL and a PKCS12 key store (mutual TLS)."""
    import os
    import sys
    from pathlib import Path

    props = tmp_path / "client-ssl.properties"
    props.write_text("security.protocol=SSL\nssl.truststore.type=PEM\n"
                     f"ssl.truststore.location={pki.path('ca.pem')}\nssl.keystore.type=PKCS12\n"
                     f"ssl.keystore.location={pki.path('client.p12')}\nssl.keystore.password={STORE_PASSWORD}\n")
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(root))
    cli = [sys.executable, "-c", "import sys; from spark_kafkalog.cli.main import main; sys.exit(main())"]
    topic = _topic()
    bootstrap = _addr(tls_broker, "MTLS")

    def run(*args, stdin=None):
        return subprocess.run([*cli, *args], capture_output=True, text=True, timeout=90, env=env, input=stdin)

    r = run("topics", "--create", "--topic", topic, "--partitions", "2", "--bootstrap-server", bootstrap,
            "--command-config", str(props))
    assert r.returncode == 0, r.stderr
    r = run("topics", "--list", "--bootstrap-server", bootstrap, "--command-config", str(props))
    assert topic in r.stdout.split(), r.stderr
    r = run("produce", "--topic", topic, "--bootstrap-server", bootstrap, "--producer.config", str(props),
            stdin="a\nb\nc\n")
    assert r.returncode == 0, r.stderr
    r = run("consume", "--topic", topic, "--from-beginning", "--max-messages", "3", "--bootstrap-server",
            bootstrap, "--consumer.config", str(props))
    assert sorted(r.stdout.split()) == ["a", "b", "c"], r.stderr
    assert STORE_PASSWORD not in r.stderr


def test_fuzzed_client_hellos_close_only_their_connection(tls_broker, pki):
    """Truncated and mutated ClientHellos, and random bytes, on the SSL port: each
    connection is closed (the client half-closes after sending), the broker serves on."""
    import random

    rng = random.Random(16)
    context = ssl.create_default_context(cafile=pki.path("ca.pem"))
    tls = context.wrap_bio(ssl.MemoryBIO(), outgoing := ssl.MemoryBIO(), server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    hello = outgoing.read()
    payloads = [hello[:n] for n in (1, 5, 6, 40, len(hello) // 2, len(hello) - 1)]
    for _ in range(12):
        mutated = bytearray(hello)
        for _ in range(rng.randint(1, 8)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        payloads.append(bytes(mutated))
    payloads += [rng.randbytes(rng.randint(1, 3000)) for _ in range(6)]
    port = tls_broker.ports["SSL"]
    for payload in payloads:
        with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as s:
            try:
                s.sendall(payload)
                # the broker may already have closed (a reset when our bytes were unread):
                # shutdown then fails with ENOTCONN, which is the same outcome
                s.shutdown(socket.SHUT_WR)
                while s.recv(65536):  # whatever the broker answers (an alert), then EOF
                    pass
            except (ConnectionResetError, BrokenPipeError):
                pass
            except OSError as exc:
                if exc.errno != errno.ENOTCONN:
                    raise
    assert tls_broker.alive()
    with AdminClient(_ours(tls_broker, pki)) as admin:
        assert isinstance(admin.list_topics(), list)
    assert "Traceback" not in tls_broker.stderr_text()


def test_security_protocol_merges_with_a_sasl_definition():
    """Each side (TLS here, SASL in broker.client.sasl) adds its protocols to
    security.protocol: defined after a SASL definition, SASL_SSL is accepted too."""
    from broker.client.ssl_context import define_security_keys
    from broker.config import STRING, ConfigDef, one_of

    alone = define_security_keys(ConfigDef())
    assert alone.validate_value("security.protocol", "SSL") == "SSL"
    with pytest.raises(ConfigError, match="security.protocol"):
        alone.validate_value("security.protocol", "SASL_SSL")
    sasl_first = ConfigDef().define("security.protocol", STRING, "PLAINTEXT", "",
                                    one_of("PLAINTEXT", "SASL_PLAINTEXT"))
    both = define_security_keys(sasl_first)
    for protocol in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        assert both.validate_value("security.protocol", protocol) == protocol
