"""SASL_SSL end to end (issue 16): SCRAM-SHA-512 and PLAIN over a TLS listener whose
certificate the clients check against a PEM CA: confluent-kafka, kafka-python, aiokafka,
kcat and this project's producer/consumer round-trip records; a wrong password and an
untrusted CA fail cleanly; the broker's principal is the SASL user's.

The broker-wide ``ssl.client.auth=required`` of the module's broker does not apply to its
SASL_SSL listeners (Kafka's KIP-684): only SASL_MTLS, whose ``listener.name.sasl_mtls.
ssl.client.auth`` asks for it, needs a client certificate as well as SASL."""

from __future__ import annotations

import asyncio
import subprocess
import uuid

import pytest

from broker.client.errors import AuthenticationError
from tests.support.broker import BrokerProcess
from tests.support.tls import pki  # noqa: F401 - the session PKI fixture
from tests.test_security_sasl import PLAIN_JAAS


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def sasl_ssl_broker(tmp_path_factory, pki):  # noqa: F811
    broker = BrokerProcess(tmp_path_factory.mktemp("sasl-ssl"), {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SASL_MTLS://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,SASL_MTLS:SASL_SSL",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_mtls.plain.sasl.jaas.config": PLAIN_JAAS,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.path("server.pem"),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.path("ca.pem"),
        "ssl.client.auth": "required",  # for SSL listeners only (KIP-684)
        "listener.name.sasl_mtls.ssl.client.auth": "required",
    }, name="sasl-ssl")
    broker.start()
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
    admin = AdminClient({**client_conf(broker, pki, "PLAIN", "admin", "admin-secret")})
    for f in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"bob-secret")]).values():
        assert f.result(30) is None
    yield broker
    broker.stop()


def client_conf(broker: BrokerProcess, pki, mech: str, user: str, password: str,  # noqa: F811
                listener: str = "SASL_SSL") -> dict:
    return {"bootstrap.servers": f"localhost:{broker.listener_port(listener)}", "security.protocol": "SASL_SSL",
            "ssl.ca.location": pki.path("ca.pem"), "sasl.mechanism": mech, "sasl.username": user,
            "sasl.password": password}


def ours_conf(broker: BrokerProcess, pki, mech: str, user: str, password: str) -> dict:  # noqa: F811
    return {"bootstrap.servers": f"localhost:{broker.listener_port('SASL_SSL')}", "security.protocol": "SASL_SSL",
            "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.path("ca.pem"),
            "sasl.mechanism": mech, "sasl.username": user, "sasl.password": password}


@pytest.mark.parametrize("mech, user, password", [("SCRAM-SHA-512", "bob", "bob-secret"),
                                                  ("PLAIN", "alice", "alice-secret")])
def test_confluent_kafka_over_sasl_ssl(sasl_ssl_broker, pki, mech, user, password):  # noqa: F811
    from confluent_kafka import Consumer, Producer
    topic = unique("ss")
    conf = client_conf(sasl_ssl_broker, pki, mech, user, password)
    p = Producer(conf)
    for i in range(20):
        p.produce(topic, b"v%d" % i)
    assert p.flush(30) == 0
    c = Consumer({**conf, "group.id": unique("g"), "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = []
    for _ in range(100):
        got += [m.value() for m in c.consume(50, 0.5) if m.error() is None]
        if len(got) >= 20:
            break
    c.close()
    assert sorted(got) == sorted(b"v%d" % i for i in range(20))


def test_kafka_python_over_sasl_ssl(sasl_ssl_broker, pki):  # noqa: F811
    from kafka import KafkaConsumer, KafkaProducer
    topic = unique("kp")
    common = {"bootstrap_servers": f"localhost:{sasl_ssl_broker.listener_port('SASL_SSL')}",
              "security_protocol": "SASL_SSL", "ssl_cafile": pki.path("ca.pem"), "sasl_mechanism": "SCRAM-SHA-512",
              "sasl_plain_username": "bob", "sasl_plain_password": "bob-secret"}
    p = KafkaProducer(**common)
    for i in range(10):
        p.send(topic, b"k%d" % i)
    p.flush()
    p.close()
    c = KafkaConsumer(topic, auto_offset_reset="earliest", **common)
    got: list[bytes] = []
    for _ in range(40):  # until all ten are in (iterating with consumer_timeout_ms waits it out)
        got += [r.value for rs in c.poll(500).values() for r in rs]
        if len(got) >= 10:
            break
    got.sort()
    c.close()
    assert got == sorted(b"k%d" % i for i in range(10))


def test_our_client_over_sasl_ssl_and_clean_failures(sasl_ssl_broker, pki):  # noqa: F811
    from broker.client.consumer import KafkaConsumer
    from broker.client.producer import KafkaProducer
    topic = unique("ours")
    with KafkaProducer(ours_conf(sasl_ssl_broker, pki, "SCRAM-SHA-512", "bob", "bob-secret")) as p:
        for i in range(10):
            p.send(topic, value=b"o%d" % i)
        p.flush(30)
    with KafkaConsumer({**ours_conf(sasl_ssl_broker, pki, "SCRAM-SHA-512", "bob", "bob-secret"),
                        "auto.offset.reset": "earliest"}) as c:
        c.assign([(topic, 0)])
        got = []
        for _ in range(50):
            got += [r.value for r in c.poll(500)]
            if len(got) >= 10:
                break
    assert sorted(got) == sorted(b"o%d" % i for i in range(10))
    # a wrong password, and a CA the client does not trust: a clear authentication error
    for conf in (ours_conf(sasl_ssl_broker, pki, "SCRAM-SHA-512", "bob", "wrong"),
                 {**ours_conf(sasl_ssl_broker, pki, "SCRAM-SHA-512", "bob", "bob-secret"),
                  "ssl.truststore.location": pki.path("other-ca.pem")}):
        with KafkaConsumer(conf) as c, pytest.raises(AuthenticationError):
            c.list_topics(timeout_ms=20000)
    assert "Traceback" not in sasl_ssl_broker.stderr_text()


def test_aiokafka_over_sasl_ssl(sasl_ssl_broker, pki):  # noqa: F811
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    topic = unique("aio")
    conf = {"bootstrap_servers": f"localhost:{sasl_ssl_broker.listener_port('SASL_SSL')}",
            "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "bob",
            "sasl_plain_password": "bob-secret"}

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(ssl_context=create_ssl_context(cafile=pki.path("ca.pem")), **conf)
        await producer.start()
        try:
            for i in range(5):
                await producer.send_and_wait(topic, b"a%d" % i, partition=0)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest",
                                    ssl_context=create_ssl_context(cafile=pki.path("ca.pem")), **conf)
        await consumer.start()
        try:
            return [(await asyncio.wait_for(consumer.getone(), 30)).value for _ in range(5)]
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == [b"a%d" % i for i in range(5)]


def test_client_certificates_on_sasl_ssl_only_when_the_listener_asks(sasl_ssl_broker, pki):  # noqa: F811
    """KIP-684: the broker-wide ssl.client.auth=required leaves SASL_SSL alone (a warning says
    so); listener.name.sasl_mtls.ssl.client.auth=required makes that listener need both a
    trusted client certificate and SASL."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    assert "'ssl.client.auth' is applied only to SSL listeners: listener SASL_SSL" in sasl_ssl_broker.stderr_text()
    assert "listener SASL_MTLS" not in sasl_ssl_broker.stderr_text()
    # SASL_SSL: no client certificate needed
    assert AdminClient(client_conf(sasl_ssl_broker, pki, "SCRAM-SHA-512", "bob", "bob-secret")).list_topics(
        timeout=20).brokers
    # SASL_MTLS: SASL alone is refused in the handshake ...
    mtls = client_conf(sasl_ssl_broker, pki, "SCRAM-SHA-512", "bob", "bob-secret", listener="SASL_MTLS")
    with pytest.raises(KafkaException):
        AdminClient(mtls).list_topics(timeout=2)  # refused in the handshake: the timeout is waited out
    # ... and so is a certificate from a CA the broker does not trust
    with pytest.raises(KafkaException):
        AdminClient({**mtls, "ssl.certificate.location": pki.path("stranger.crt"),
                     "ssl.key.location": pki.path("stranger.key")}).list_topics(timeout=2)
    # a trusted certificate plus SASL: served, records round-trip
    from confluent_kafka import Consumer, Producer
    both = {**mtls, "ssl.certificate.location": pki.path("client.crt"), "ssl.key.location": pki.path("client.key")}
    topic = unique("mtls")
    p = Producer(both)
    p.produce(topic, b"both", partition=0)
    assert p.flush(30) == 0
    c = Consumer({**both, "group.id": unique("g"), "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = []
    for _ in range(60):
        got += [m.value() for m in c.consume(10, 0.5) if m.error() is None]
        if got:
            break
    c.close()
    assert got == [b"both"]
    # this project's client: a PEM key store plus SASL on SASL_MTLS; without the key store, refused
    from broker.client.consumer import KafkaConsumer
    ours = {**ours_conf(sasl_ssl_broker, pki, "SCRAM-SHA-512", "bob", "bob-secret"),
            "bootstrap.servers": f"localhost:{sasl_ssl_broker.listener_port('SASL_MTLS')}"}
    with KafkaConsumer({**ours, "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.path("client.pem"),
                        "auto.offset.reset": "earliest"}) as oc:
        oc.assign([(topic, 0)])
        got = []
        for _ in range(50):
            got += [r.value for r in oc.poll(500)]
            if got:
                break
    assert got == [b"both"]
    with KafkaConsumer(ours) as oc, pytest.raises(AuthenticationError):
        oc.list_topics(timeout_ms=20000)


@pytest.mark.kcat
@pytest.mark.parametrize("mech, user, password", [("SCRAM-SHA-512", "bob", "bob-secret"),
                                                  ("PLAIN", "alice", "alice-secret")])
def test_kcat_over_sasl_ssl(sasl_ssl_broker, pki, mech, user, password):  # noqa: F811

    topic = unique("kcat-ss")
    args = ["kcat", "-b", f"localhost:{sasl_ssl_broker.listener_port('SASL_SSL')}",
            "-X", "security.protocol=SASL_SSL", "-X", f"ssl.ca.location={pki.path('ca.pem')}",
            "-X", f"sasl.mechanisms={mech}", "-X", f"sasl.username={user}", "-X", f"sasl.password={password}"]
    subprocess.run(args + ["-P", "-t", topic], input=b"one\ntwo\n", check=True, timeout=60)
    out = subprocess.run(args + ["-C", "-t", topic, "-o", "beginning", "-e", "-q"], capture_output=True,
                         check=True, timeout=60)
    assert out.stdout.split() == [b"one", b"two"]
    # a CA kcat does not trust: a clean failure, no data
    bad = [a if not a.startswith("ssl.ca.location=") else f"ssl.ca.location={pki.path('other-ca.pem')}"
           for a in args]
    failed = subprocess.run(bad + ["-L", "-m", "3"], capture_output=True, timeout=60)  # -m: kcat waits it out
    assert failed.returncode != 0
