"""SASL (issue 16): SCRAM against the RFC test vectors, the broker's mechanisms in process,
and the real broker in a subprocess with a SASL_PLAINTEXT listener next to PLAINTEXT,
driven by confluent-kafka, kafka-python, aiokafka, kcat and raw protocol clients.

The broker of the module (``sasl_broker``) enables PLAIN (users admin and alice from its
JAAS line) and SCRAM-SHA-256/512 (users created through AlterUserScramCredentials).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import socket
import struct
import subprocess
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.config import ConfigError, parse_jaas_config
from broker.protocol import ApiKey, ErrorCode, FrameDecoder
from broker.protocol.scram import (
    ClientFinalMessage,
    ClientFirstMessage,
    ScramCredential,
    ScramError,
    ScramMechanism,
    ServerFinalMessage,
    ServerFirstMessage,
    auth_message,
    client_proof,
    mechanism,
    salted_password,
    server_key,
    server_signature,
)
from broker.server.security.credentials import CREDENTIALS_FILE, CredentialStore, Upsertion
from broker.server.security.errors import SaslAuthenticationFailed
from broker.server.security.plain import PlainServer
from broker.server.security.scram import ScramServer
from tests.support.broker import BrokerProcess, RawClient

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
SASL_OVERRIDES = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# --- SCRAM: RFC test vectors ------------------------------------------------------------

def _rfc_exchange(mech: ScramMechanism, client_nonce: str, server_first: str, client_final: str,
                  server_final: str) -> None:
    first, bare = ClientFirstMessage.build("user", client_nonce)
    assert first == f"n,,n=user,r={client_nonce}"
    sf = ServerFirstMessage.parse(server_first.encode())
    salted = salted_password(mech, "pencil", sf.salt, sf.iterations)
    without_proof = ClientFinalMessage.build_without_proof("n,,", sf.nonce)
    message = auth_message(bare, server_first, without_proof)
    assert ClientFinalMessage.build(without_proof, client_proof(mech, salted, message)) == client_final
    signature = server_signature(mech, server_key(mech, salted), message)
    assert ServerFinalMessage.build(None, signature) == server_final
    # the server side verifies the same proof from the stored credential only
    cred = ScramCredential.from_password(mech, "pencil", salt=sf.salt, iterations=sf.iterations)
    parsed = ClientFinalMessage.parse(client_final.encode())
    from broker.protocol.scram import recover_client_key, stored_key
    assert stored_key(mech, recover_client_key(mech, cred.stored_key, message, parsed.proof)) == cred.stored_key


def test_scram_sha_256_rfc7677_vector():
    _rfc_exchange(
        mechanism("SCRAM-SHA-256"), "rOprNGfwEbeRWgbNEkqO",
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")


def test_scram_sha_1_rfc5802_vector_through_the_same_primitives():
    sha1 = ScramMechanism("SCRAM-SHA-1", "sha1", 0, 4096)  # not a Kafka mechanism: the RFC's example
    _rfc_exchange(
        sha1, "fyko+d2lbbFgONRv9qkxdawL",
        "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
        "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
        "v=rmF9pqV8S7suAoZWja4dJRkFsKQ=")


def test_scram_messages_reject_bad_grammar():
    for bad in (b"", b"n,,", b"p=tls-unique,,n=user,r=abc", b"n,,n=,r=abc", b"n,,n=us=er,r=abc",
                b"n,,n=user,r=abc,1x", b"\xff\xfe", b"n,,r=abc,n=user"):
        with pytest.raises(ScramError):
            ClientFirstMessage.parse(bad)
    first = ClientFirstMessage.parse(b"n,a=b=2Cc,n=b=2Cc,r=nonce,tokenauth=true")
    assert (first.username, first.authzid, first.extensions) == ("b,c", "b,c", {"tokenauth": "true"})
    for bad in (b"c=biws,r=x", b"c=!!,r=x,p=abc=", b"r=x,c=biws,p=AAAA"):
        with pytest.raises(ScramError):
            ClientFinalMessage.parse(bad)


# --- the broker's mechanisms, in process ------------------------------------------------

class _ScramClient:
    """A SCRAM client from the shared primitives (the client's own is tested end to end)."""

    def __init__(self, name: str, user: str, password: str, extensions: dict | None = None) -> None:
        self.mech = mechanism(name)
        self.user, self.password = user, password
        self.nonce = "clientnonce123"
        self.first, self.bare = ClientFirstMessage.build(user, self.nonce, extensions)

    def final(self, server_first: bytes) -> bytes:
        sf = ServerFirstMessage.parse(server_first)
        salted = salted_password(self.mech, self.password, sf.salt, sf.iterations)
        without = ClientFinalMessage.build_without_proof("n,,", sf.nonce)
        self.message = auth_message(self.bare, sf.text, without)
        self.salted = salted
        return ClientFinalMessage.build(without, client_proof(self.mech, salted, self.message)).encode()


def _store(tmp_path, user="bob", password="bob-secret", mech="SCRAM-SHA-512") -> CredentialStore:
    store = CredentialStore([tmp_path])
    store.alter([], [Upsertion(user, mech, ScramCredential.from_password(mechanism(mech), password))])
    return store


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_server_accepts_the_password_and_signs(tmp_path, mech):
    store = _store(tmp_path, mech=mech)
    server = ScramServer(mech, store)
    client = _ScramClient(mech, "bob", "bob-secret")
    final = server.evaluate(client.first.encode())
    assert not server.complete
    answer = ServerFinalMessage.parse(server.evaluate(client.final(final)))
    assert server.complete and server.authorization_id == "bob"
    assert answer.server_signature == server_signature(client.mech, server_key(client.mech, client.salted),
                                                       client.message)


@pytest.mark.parametrize("user, password, extensions", [
    ("bob", "wrong", None), ("nobody", "bob-secret", None), ("bob", "bob-secret", {"tokenauth": "true"})])
def test_scram_server_refuses_wrong_password_unknown_user_and_tokenauth(tmp_path, user, password, extensions):
    server = ScramServer("SCRAM-SHA-512", _store(tmp_path))
    client = _ScramClient("SCRAM-SHA-512", user, password, extensions)
    with pytest.raises(SaslAuthenticationFailed) as info:
        server.evaluate(client.final(server.evaluate(client.first.encode())))
    assert password not in str(info.value)
    assert not server.complete


def test_plain_server():
    users = {"alice": "alice-secret"}
    ok = PlainServer(users)
    assert ok.evaluate(b"\x00alice\x00alice-secret") == b"" and ok.authorization_id == "alice"
    assert PlainServer(users).evaluate(b"alice\x00alice\x00alice-secret") == b""
    for token in (b"\x00alice\x00wrong", b"\x00bob\x00alice-secret", b"bob\x00alice\x00alice-secret",
                  b"alice-secret", b"\x00\x00", b"\x00alice\x00", b"\xff\x00alice\x00alice-secret",
                  b"\x00alice\x00alice-secret\x00"):
        with pytest.raises(SaslAuthenticationFailed) as info:
            PlainServer(users).evaluate(token)
        assert "alice-secret" not in str(info.value) and "wrong" not in str(info.value)


def test_jaas_grammar():
    [entry] = parse_jaas_config("k", PLAIN_JAAS + "\n")
    assert entry.login_module.endswith("PlainLoginModule") and entry.flag == "required"
    assert entry.options["user_alice"] == "alice-secret"
    assert "alice-secret" not in repr(entry)
    [entry] = parse_jaas_config("k", 'a.B optional x=unquoted y="with \\"quote\\" and ;";')
    assert entry.options == {"x": "unquoted", "y": 'with "quote" and ;'}
    for bad in ("", "a.B required x=1", "a.B x=1;", 'a.B required x="open;', "a.B required x=;"):
        with pytest.raises(ConfigError) as info:
            parse_jaas_config("sasl.jaas.config", bad)
        assert "sasl.jaas.config" in str(info.value) and "x=1" not in str(info.value)


def test_credentials_survive_a_reload_and_hold_no_password(tmp_path):
    store = _store(tmp_path, password="p4ssw0rd-unique")
    text = (tmp_path / CREDENTIALS_FILE).read_text()
    assert "p4ssw0rd-unique" not in text and base64.b64encode(b"p4ssw0rd-unique").decode() not in text
    assert (tmp_path / CREDENTIALS_FILE).stat().st_mode & 0o077 == 0
    again = CredentialStore([tmp_path])
    again.load()
    assert again.get("bob", "SCRAM-SHA-512") == store.get("bob", "SCRAM-SHA-512")
    assert again.describe() == {"bob": {"SCRAM-SHA-512": 4096}}


# --- the real broker ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory):
    broker = BrokerProcess(tmp_path_factory.mktemp("sasl-broker"), SASL_OVERRIDES, name="sasl")
    broker.start()
    yield broker
    code = broker.stop()
    assert code == 0, broker.stderr_text()[-3000:]


def _bootstrap(broker: BrokerProcess) -> str:
    return f"{broker.host}:{broker.listener_port('SASL_PLAINTEXT')}"


def _ck_conf(broker: BrokerProcess, mech: str, user: str, password: str, **extra) -> dict:
    return {"bootstrap.servers": _bootstrap(broker), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mech, "sasl.username": user, "sasl.password": password, **extra}


def _ck_create_scram_user(broker: BrokerProcess, user: str, password: str, mechs=("SCRAM-SHA-256", "SCRAM-SHA-512"),
                          iterations: int = 4096) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )
    admin = AdminClient(_ck_conf(broker, "PLAIN", "admin", "admin-secret"))
    upserts = [UserScramCredentialUpsertion(user, ScramCredentialInfo(getattr(ScramMechanism, m.replace("-", "_")),
                                                                      iterations), password.encode())
               for m in mechs]
    for future in admin.alter_user_scram_credentials(upserts).values():
        assert future.result(30) is None


def _ck_round_trip(broker: BrokerProcess, mech: str, user: str, password: str) -> None:
    from confluent_kafka import Consumer, Producer

    topic = unique("ck")
    p = Producer(_ck_conf(broker, mech, user, password))
    p.produce(topic, b"v-" + mech.encode())
    assert p.flush(30) == 0
    c = Consumer(_ck_conf(broker, mech, user, password, **{"group.id": unique("g"), "auto.offset.reset": "earliest"}))
    try:
        c.subscribe([topic])
        msg = None
        for _ in range(60):
            msg = c.poll(1.0)
            if msg is not None and msg.error() is None:
                break
        assert msg is not None and msg.error() is None and msg.value() == b"v-" + mech.encode()
    finally:
        c.close()


def test_confluent_kafka_plain(sasl_broker):
    _ck_round_trip(sasl_broker, "PLAIN", "alice", "alice-secret")


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_confluent_kafka_scram_with_users_from_alter_user_scram_credentials(sasl_broker, mech):
    from confluent_kafka.admin import AdminClient

    user = unique("ck-user")
    _ck_create_scram_user(sasl_broker, user, "s3cret-" + user)
    _ck_round_trip(sasl_broker, mech, user, "s3cret-" + user)
    admin = AdminClient(_ck_conf(sasl_broker, mech, user, "s3cret-" + user))
    described = {u: f.result(30) for u, f in admin.describe_user_scram_credentials([user]).items()}
    infos = sorted((i.mechanism.name, i.iterations) for i in described[user].scram_credential_infos)
    assert infos == [("SCRAM_SHA_256", 4096), ("SCRAM_SHA_512", 4096)]


def test_confluent_kafka_admin_errors_for_bad_credentials_requests(sasl_broker):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )
    admin = AdminClient(_ck_conf(sasl_broker, "PLAIN", "admin", "admin-secret"))
    few = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "few", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 100), b"x")])
    with pytest.raises(KafkaException, match="UNACCEPTABLE_CREDENTIAL|[Tt]oo few iterations"):
        few["few"].result(30)
    gone = admin.alter_user_scram_credentials([UserScramCredentialDeletion("nobody", ScramMechanism.SCRAM_SHA_512)])
    with pytest.raises(KafkaException, match="RESOURCE_NOT_FOUND|does not exist"):
        gone["nobody"].result(30)
    with pytest.raises(KafkaException, match="RESOURCE_NOT_FOUND|does not exist"):
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result(30)


@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-256"])
def test_confluent_kafka_wrong_password_fails_with_an_authentication_error(sasl_broker, mech):
    from confluent_kafka import KafkaError, Producer

    errors = []
    p = Producer(_ck_conf(sasl_broker, mech, "alice", "wrong-password", error_cb=errors.append))
    p.produce(unique("denied"), b"x")
    for _ in range(30):
        p.poll(0.5)
        if errors:
            break
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION
    assert "wrong-password" not in errors[0].str()
    p.purge()
    assert "Failed authentication with 127.0.0.1" in sasl_broker.stderr_text()
    assert "wrong-password" not in sasl_broker.stderr_text()


@pytest.mark.kcat
@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kcat(sasl_broker, mech):
    topic = unique("kcat")
    user, password = ("alice", "alice-secret") if mech == "PLAIN" else (unique("kcat-user"), "kcat-secret")
    if mech != "PLAIN":
        _ck_create_scram_user(sasl_broker, user, password, mechs=(mech,))
    args = ["kcat", "-b", _bootstrap(sasl_broker), "-X", "security.protocol=SASL_PLAINTEXT",
            "-X", f"sasl.mechanisms={mech}", "-X", f"sasl.username={user}", "-X", f"sasl.password={password}"]
    subprocess.run(args + ["-P", "-t", topic], input=b"one\ntwo\n", check=True, timeout=60)
    out = subprocess.run(args + ["-C", "-t", topic, "-o", "beginning", "-e", "-q"], capture_output=True,
                         check=True, timeout=60)
    assert out.stdout.split() == [b"one", b"two"]
    # The failure comes at once; -m bounds kcat's metadata wait after it (10 s would all be waited).
    bad = subprocess.run([*args[:-1], "sasl.password=nope", "-L", "-m", "3"], capture_output=True, timeout=60)
    assert bad.returncode != 0 and b"Authentication failed" in bad.stderr + bad.stdout


@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kafka_python(sasl_broker, mech, caplog):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.errors import KafkaError as KPError

    user, password = ("alice", "alice-secret") if mech == "PLAIN" else (unique("kp"), "kp-secret")
    if mech != "PLAIN":
        _ck_create_scram_user(sasl_broker, user, password, mechs=(mech,))
    conf = {"bootstrap_servers": _bootstrap(sasl_broker), "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": mech, "sasl_plain_username": user, "sasl_plain_password": password}
    topic = unique("kp")
    producer = KafkaProducer(**conf)
    producer.send(topic, b"kafka-python").get(30)
    producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", **conf)
    records = []
    for _ in range(30):
        records += [r for rs in consumer.poll(1000).values() for r in rs]
        if records:
            break
    consumer.close()
    assert [r.value for r in records] == [b"kafka-python"]
    with caplog.at_level(logging.ERROR, logger="kafka"), pytest.raises(KPError):
        # the failure is logged at the first connection; max_block_ms is then waited out
        KafkaProducer(**{**conf, "sasl_plain_password": "wrong"}, api_version=(2, 4), max_block_ms=1500).send(
            topic, b"x").get(10)
    assert "[Error 58] SaslAuthenticationFailedError" in caplog.text
    assert ("Invalid username or password" if mech == "PLAIN" else f"invalid credentials with SASL mechanism {mech}") \
        in caplog.text


@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_aiokafka(sasl_broker, mech):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.errors import KafkaError as AKError

    user, password = ("alice", "alice-secret") if mech == "PLAIN" else (unique("ak"), "ak-secret")
    if mech != "PLAIN":
        _ck_create_scram_user(sasl_broker, user, password, mechs=(mech,))
    conf = {"bootstrap_servers": _bootstrap(sasl_broker), "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": mech, "sasl_plain_username": user, "sasl_plain_password": password}
    topic = unique("ak")

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(**conf)
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"aiokafka")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **conf)
        await consumer.start()
        try:
            msg = await asyncio.wait_for(consumer.getone(), 30)
            return [msg.value]
        finally:
            await consumer.stop()

    async def wrong() -> None:
        producer = AIOKafkaProducer(**{**conf, "sasl_plain_password": "wrong"}, request_timeout_ms=10000)
        try:
            await producer.start()
        finally:
            await producer.stop()

    assert asyncio.run(run()) == [b"aiokafka"]
    with pytest.raises(AKError):
        asyncio.run(wrong())


# --- the wire, raw ----------------------------------------------------------------------------

def _raw(broker: BrokerProcess, listener: str = "SASL_PLAINTEXT") -> RawClient:
    return RawClient(broker.host, broker.listener_port(listener), client_id="raw-sasl")


def _handshake(c: RawClient, mech: str, version: int = 1):
    return c.request(ApiKey.SASL_HANDSHAKE, version, {"mechanism": mech})


def _authenticate(c: RawClient, token: bytes, version: int = 1):
    return c.request(ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": token})


def test_api_versions_advertise_sasl_and_a_kafka_request_before_authentication_disconnects(sasl_broker):
    with _raw(sasl_broker) as c:
        r = c.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "raw", "client_software_version": "1"})
        table = {a.api_key: (a.min_version, a.max_version) for a in r.api_keys}
        assert table[ApiKey.SASL_HANDSHAKE] == (0, 1) and table[ApiKey.SASL_AUTHENTICATE] == (0, 2)
        c.send(ApiKey.METADATA, 8, {"topics": None, "allow_auto_topic_creation": False,
                                    "include_topic_authorized_operations": False})
        assert c.is_closed_by_peer()
    with _raw(sasl_broker) as c:  # after the handshake too
        assert _handshake(c, "PLAIN").error_code == 0
        c.send(ApiKey.METADATA, 8, {"topics": None, "allow_auto_topic_creation": False,
                                    "include_topic_authorized_operations": False})
        assert c.is_closed_by_peer()
    assert "Unexpected Kafka request of type METADATA during SASL handshake" in sasl_broker.stderr_text()


def test_plain_over_sasl_authenticate_then_requests_work(sasl_broker):
    with _raw(sasl_broker) as c:
        r = _handshake(c, "PLAIN")
        assert (r.error_code, sorted(r.mechanisms)) == (0, ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
        r = _authenticate(c, b"\x00alice\x00alice-secret", version=2)
        assert (r.error_code, r.error_message, r.session_lifetime_ms) == (0, None, 0)
        r = c.request(ApiKey.METADATA, 8, {"topics": None, "allow_auto_topic_creation": False,
                                           "include_topic_authorized_operations": False})
        assert r.brokers and r.brokers[0].port == sasl_broker.listener_port("SASL_PLAINTEXT")
        r = _authenticate(c, b"\x00alice\x00alice-secret")  # without a new handshake
        assert r.error_code == ErrorCode.ILLEGAL_SASL_STATE


def test_wrong_password_gets_sasl_authentication_failed_then_a_close(sasl_broker):
    with _raw(sasl_broker) as c:
        _handshake(c, "PLAIN")
        r = _authenticate(c, b"\x00alice\x00not-her-password")
        assert r.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert "Invalid username or password" in r.error_message and "not-her-password" not in r.error_message
        assert c.is_closed_by_peer()


def test_unsupported_mechanism_lists_the_enabled_ones_then_closes(sasl_broker):
    with _raw(sasl_broker) as c:
        r = _handshake(c, "GSSAPI")
        assert r.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert sorted(r.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert c.is_closed_by_peer()


def test_sasl_requests_on_a_plaintext_listener_get_illegal_sasl_state(sasl_broker):
    with _raw(sasl_broker, "PLAINTEXT") as c:
        assert _handshake(c, "PLAIN").error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert _authenticate(c, b"\x00alice\x00alice-secret").error_code == ErrorCode.ILLEGAL_SASL_STATE
        r = c.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "raw", "client_software_version": "1"})
        assert r.error_code == 0  # the connection is still usable


def test_legacy_v0_handshake_with_raw_tokens(sasl_broker):
    with _raw(sasl_broker) as c:
        assert _handshake(c, "PLAIN", version=0).error_code == 0
        token = b"\x00alice\x00alice-secret"
        c.send_raw(struct.pack(">i", len(token)) + token)
        assert c.recv_frame().tobytes() == b""  # PLAIN's empty final token, size-prefixed
        r = c.request(ApiKey.API_VERSIONS, 0, {})
        assert r.error_code == 0
    with _raw(sasl_broker) as c:
        assert _handshake(c, "PLAIN", version=0).error_code == 0
        token = b"\x00alice\x00bad"
        c.send_raw(struct.pack(">i", len(token)) + token)
        assert c.is_closed_by_peer()


def test_scram_over_the_wire_with_a_legacy_handshake(sasl_broker):
    user = unique("raw-scram")
    _ck_create_scram_user(sasl_broker, user, "raw-secret", mechs=("SCRAM-SHA-256",))
    client = _ScramClient("SCRAM-SHA-256", user, "raw-secret")
    with _raw(sasl_broker) as c:
        assert _handshake(c, "SCRAM-SHA-256", version=0).error_code == 0
        c.send_raw(struct.pack(">i", len(client.first)) + client.first.encode())
        final = client.final(c.recv_frame().tobytes())
        c.send_raw(struct.pack(">i", len(final)) + final)
        assert ServerFinalMessage.parse(c.recv_frame().tobytes()).error is None


def test_a_sasl_frame_above_sasl_server_max_receive_size_closes(sasl_broker):
    with _raw(sasl_broker) as c:
        _handshake(c, "PLAIN")
        try:  # closed when the size prefix arrives: the rest of the send may hit a reset
            c.send(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"\x00" * 600_000})
        except (BrokenPipeError, ConnectionResetError):
            pass
        else:
            assert c.is_closed_by_peer()
    assert "(allowed 0..524288)" in sasl_broker.stderr_text()  # refused at its size prefix
    with _raw(sasl_broker) as c:  # a size prefix above socket.request.max.bytes: closed at once
        c.send_raw(struct.pack(">i", 0x7FFFFFF0))
        assert c.is_closed_by_peer()


def test_after_authentication_requests_may_exceed_sasl_server_max_receive_size(sasl_broker):
    from confluent_kafka import Producer

    p = Producer(_ck_conf(sasl_broker, "PLAIN", "alice", "alice-secret", **{"message.max.bytes": 2_000_000}))
    p.produce(unique("big"), b"x" * 700_000)  # one Produce request of ~700 KB > 512 KiB
    assert p.flush(30) == 0


def _still_serves(broker: BrokerProcess) -> None:
    with _raw(broker) as c:
        _handshake(c, "PLAIN")
        assert _authenticate(c, b"\x00alice\x00alice-secret").error_code == 0


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mech=st.sampled_from(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]),
       tokens=st.lists(st.binary(max_size=300), min_size=1, max_size=3),
       legacy=st.booleans(), cut=st.integers(0, 8))
def test_fuzzed_tokens_never_break_the_broker(sasl_broker, mech, tokens, legacy, cut):
    s = socket.create_connection((sasl_broker.host, sasl_broker.listener_port("SASL_PLAINTEXT")), timeout=10)
    c = RawClient.__new__(RawClient)
    c.sock, c.client_id, c.decoder, c.frames, c.correlation_id, c.pending = s, "fuzz", FrameDecoder(), [], 0, {}
    try:
        _handshake(c, mech, version=0 if legacy else 1)
        for i, token in enumerate(tokens):
            if legacy:
                frame = struct.pack(">i", len(token)) + token
            else:
                c.correlation_id += 1
                frame = _authenticate_frame(token, c.correlation_id)
            if i == len(tokens) - 1 and cut:
                frame = frame[:-cut] if len(frame) > cut else frame[:1]
                s.sendall(frame)
                s.shutdown(socket.SHUT_WR)  # a truncated token, then EOF
                break
            s.sendall(frame)
            try:
                s.settimeout(5)
                data = s.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not data:
                break
    except (ConnectionError, OSError):
        pass
    finally:
        s.close()
    assert sasl_broker.alive()


def _authenticate_frame(token: bytes, correlation_id: int) -> bytes:
    from broker.protocol import RequestHeader, encode_request
    return b"".join(bytes(b) for b in encode_request(
        RequestHeader(ApiKey.SASL_AUTHENTICATE, 1, correlation_id, "fuzz"), _sasl_auth_body(token)))


def _sasl_auth_body(token: bytes):
    from broker.protocol.versions import request_schema
    return request_schema(ApiKey.SASL_AUTHENTICATE, 1).cls(auth_bytes=token)


def test_after_the_fuzzing_the_broker_still_authenticates(sasl_broker):
    _still_serves(sasl_broker)
    assert "Traceback" not in sasl_broker.stderr_text()


# --- durability, configuration, re-authentication -------------------------------------

def test_scram_credentials_survive_a_restart(broker_factory):
    from confluent_kafka.admin import AdminClient

    broker = broker_factory(SASL_OVERRIDES)
    _ck_create_scram_user(broker, "carol", "carol-secret", mechs=("SCRAM-SHA-512",), iterations=8192)
    text = (broker.log_dir / CREDENTIALS_FILE).read_text()
    assert "carol-secret" not in text and json.loads(text)["users"]["carol"]["SCRAM-SHA-512"]["iterations"] == 8192
    broker.restart()
    _ck_round_trip(broker, "SCRAM-SHA-512", "carol", "carol-secret")
    admin = AdminClient(_ck_conf(broker, "PLAIN", "admin", "admin-secret"))
    assert list(admin.describe_user_scram_credentials().result()) == ["carol"]


def test_bad_sasl_configuration_fails_the_start_naming_the_key(broker_factory):
    broker = broker_factory({**SASL_OVERRIDES, "sasl.enabled.mechanisms": "GSSAPI"}, start=False)
    with pytest.raises(RuntimeError, match="sasl.enabled.mechanisms"):
        broker.start(timeout=30)
    broker = broker_factory({k: v for k, v in SASL_OVERRIDES.items() if "jaas" not in k}, name="nojaas",
                            start=False)
    with pytest.raises(RuntimeError, match="plain.sasl.jaas.config"):
        broker.start(timeout=30)


def test_reauthentication_kip_368(broker_factory):
    import time

    from confluent_kafka import Consumer, Producer

    broker = broker_factory({**SASL_OVERRIDES, "connections.max.reauth.ms": "1500"})
    with _raw(broker) as c:  # the lifetime is announced; a request after it closes the connection
        _handshake(c, "PLAIN")
        r = _authenticate(c, b"\x00alice\x00alice-secret", version=1)
        assert r.error_code == 0 and r.session_lifetime_ms == 1500
        time.sleep(1.7)  # scenario: the 1500 ms session lifetime expires
        c.send(ApiKey.API_VERSIONS, 0, {})
        assert c.is_closed_by_peer()
    with _raw(broker) as c:  # re-authentication mid-connection keeps it open
        _handshake(c, "PLAIN")
        _authenticate(c, b"\x00alice\x00alice-secret")
        assert _handshake(c, "PLAIN").error_code == 0
        assert _authenticate(c, b"\x00alice\x00alice-secret").session_lifetime_ms == 1500
        assert c.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0
    with _raw(broker) as c:  # but not as someone else
        _handshake(c, "PLAIN")
        _authenticate(c, b"\x00alice\x00alice-secret")
        _handshake(c, "PLAIN")
        assert _authenticate(c, b"\x00admin\x00admin-secret").error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    # librdkafka re-authenticates on its own: one producer keeps working across several
    # lifetimes (produced until one connection has re-authenticated three times: how many
    # lifetimes a fixed count of sends spans depends on the machine's load)
    import collections
    import re

    def reauths() -> collections.Counter:
        return collections.Counter(re.findall(r"connection (\S+) \S+ re-authenticated as User:alice with PLAIN",
                                              broker.stderr_text()))
    topic = unique("reauth")
    p = Producer(_ck_conf(broker, "PLAIN", "alice", "alice-secret", **{"linger.ms": 0}))
    sent: list[bytes] = []
    deadline = time.monotonic() + 90
    while len(sent) < 5 or (max(reauths().values(), default=0) < 3 and time.monotonic() < deadline):
        sent.append(str(len(sent)).encode())
        p.produce(topic, sent[-1])
        assert p.flush(30) == 0
        time.sleep(0.8)  # scenario: sends spread over the 1500 ms session lifetimes
    c = Consumer(_ck_conf(broker, "PLAIN", "alice", "alice-secret",
                          **{"group.id": unique("g"), "auto.offset.reset": "earliest"}))
    c.subscribe([topic])
    got = []
    for _ in range(60):
        m = c.poll(1.0)
        if m is not None and m.error() is None:
            got.append(m.value())
        if len(got) == len(sent):
            break
    c.close()
    assert got == sent
    # the producer's connection lived through several sessions, re-authenticating each time
    assert max(reauths().values()) >= 3


# --- our client, the kafkalog configs tool, Spark options ------------------------------

def _our_conf(broker: BrokerProcess, mech: str, user: str, password: str, *, jaas: bool = False) -> dict:
    conf = {"bootstrap.servers": _bootstrap(broker), "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mech}
    if jaas:
        module = "plain.PlainLoginModule" if mech == "PLAIN" else "scram.ScramLoginModule"
        conf["sasl.jaas.config"] = (f"org.apache.kafka.common.security.{module} required "
                                    f'username="{user}" password="{password}";')
    else:
        conf.update({"sasl.username": user, "sasl.password": password})
    return conf


def _kafkalog(*argv: str) -> subprocess.CompletedProcess:
    import sys
    return subprocess.run([sys.executable, "-m", "spark_kafkalog.cli", *argv], capture_output=True, text=True,
                          timeout=120)


def test_kafkalog_configs_creates_describes_and_deletes_scram_users(sasl_broker, tmp_path):
    props = tmp_path / "admin.properties"
    props.write_text(f"bootstrap.servers={_bootstrap(sasl_broker)}\nsecurity.protocol=SASL_PLAINTEXT\n"
                     "sasl.mechanism=PLAIN\nsasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule"
                     ' required username="admin" password="admin-secret";\n')
    user = unique("cfg")
    out = _kafkalog("configs", "--command-config", str(props), "--alter", "--entity-type", "users",
                    "--entity-name", user, "--add-config",
                    "SCRAM-SHA-256=[iterations=8192,password=cfg-secret],SCRAM-SHA-512=[password=cfg-secret]")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"Completed updating config for user {user}."
    out = _kafkalog("configs", "--command-config", str(props), "--describe", "--entity-type", "users",
                    "--entity-name", user)
    assert out.stdout.strip() == (f"SCRAM credential configs for user-principal '{user}' are "
                                  "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096")
    _ck_round_trip(sasl_broker, "SCRAM-SHA-256", user, "cfg-secret")
    out = _kafkalog("configs", "--command-config", str(props), "--alter", "--entity-type", "users",
                    "--entity-name", user, "--delete-config", "SCRAM-SHA-256")
    assert out.returncode == 0, out.stderr
    out = _kafkalog("configs", "--command-config", str(props), "--describe", "--entity-type", "users",
                    "--entity-name", user)
    assert out.stdout.strip().endswith("are SCRAM-SHA-512=iterations=4096")
    out = _kafkalog("configs", "--command-config", str(props), "--alter", "--entity-type", "users",
                    "--entity-name", user, "--add-config", "SCRAM-SHA-256=[iterations=10,password=x]")
    assert out.returncode == 1 and "UNACCEPTABLE_CREDENTIAL" in out.stderr
    assert "cfg-secret" not in out.stdout + out.stderr


@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_our_client_producer_consumer_admin(sasl_broker, mech):
    from broker.client.admin import AdminClient
    from broker.client.admin_scram import ScramCredentialUpsertion
    from broker.client.consumer import KafkaConsumer
    from broker.client.producer import KafkaProducer

    if mech == "PLAIN":
        user, password = "alice", "alice-secret"
    else:
        user, password = unique("own"), "own-secret"
        with AdminClient(_our_conf(sasl_broker, "PLAIN", "admin", "admin-secret", jaas=True)) as admin:
            admin.alter_user_scram_credentials([ScramCredentialUpsertion(user, mech, password)]).all()
            assert admin.describe_user_scram_credentials([user]).all() == {user: {mech: 4096}}
    conf = _our_conf(sasl_broker, mech, user, password, jaas=mech != "PLAIN")
    topic = unique("own")
    with KafkaProducer(conf) as producer:
        assert producer.send(topic, b"ours-" + mech.encode()).get(30).offset == 0
    consumer = KafkaConsumer({**conf, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([(topic, 0)])
        records = []
        for _ in range(30):
            records += consumer.poll(1000)
            if records:
                break
        assert [r.value for r in records] == [b"ours-" + mech.encode()]
    finally:
        consumer.close()
    with AdminClient(conf) as admin:
        assert topic in admin.list_topics()


def test_our_client_wrong_password_raises_sasl_authentication_error_everywhere(sasl_broker):
    from broker.client.admin import AdminClient
    from broker.client.consumer import KafkaConsumer
    from broker.client.producer import KafkaProducer
    from broker.client.sasl import SaslAuthenticationError

    conf = _our_conf(sasl_broker, "PLAIN", "alice", "wrong-pw-123")
    with KafkaProducer({**conf, "max.block.ms": 30000}) as producer, pytest.raises(SaslAuthenticationError) as info:
        producer.send(unique("denied"), b"x").get(30)
    assert info.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED and not info.value.retriable
    assert "Invalid username or password" in str(info.value) and "wrong-pw-123" not in str(info.value)
    consumer = KafkaConsumer(conf)
    try:
        consumer.assign([(unique("denied"), 0)])
        with pytest.raises(SaslAuthenticationError):
            for _ in range(30):
                consumer.poll(1000)
    finally:
        consumer.close()
    with AdminClient({**conf, "sasl.mechanism": "SCRAM-SHA-512"}) as admin, pytest.raises(SaslAuthenticationError):
        admin.list_topics()
    unsupported = _our_conf(sasl_broker, "SCRAM-SHA-256", "alice", "alice-secret")
    with AdminClient(unsupported) as admin, pytest.raises(SaslAuthenticationError, match="nobody|credentials"):
        admin.list_topics()


def test_our_client_reauthenticates(broker_factory):
    import time

    from broker.client.producer import KafkaProducer

    broker = broker_factory({**SASL_OVERRIDES, "connections.max.reauth.ms": "1200"})
    topic = unique("own-reauth")
    with KafkaProducer(_our_conf(broker, "PLAIN", "alice", "alice-secret")) as producer:
        for i in range(5):
            assert producer.send(topic, str(i).encode()).get(30).offset == i
            time.sleep(0.7)  # scenario: the sends span several 1200 ms session lifetimes
    log = broker.stderr_text()
    assert "re-authenticated as User:alice with PLAIN" in log
    assert "expired without re-authentication" not in log


def test_client_settings_and_secrets_stay_hidden():
    from broker.client.consumer.config import ConsumerConfig
    from broker.client.sasl import SaslSettings
    from spark_kafkalog.options import parse_options
    from spark_kafkalog.writers.common import parse_write_options

    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="u" '
            'password="top-secret-1";')
    cfg = {"bootstrap.servers": "h:1", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
           "sasl.jaas.config": jaas}
    s = SaslSettings.from_config(cfg)
    assert (s.mechanism, s.username, s.password) == ("SCRAM-SHA-512", "u", "top-secret-1")
    assert "top-secret-1" not in repr(s) and "top-secret-1" not in repr(ConsumerConfig(cfg))
    with pytest.raises(ConfigError) as info:  # a JAAS module that does not match the mechanism
        SaslSettings.from_config({**cfg, "sasl.mechanism": "PLAIN"})
    assert "top-secret-1" not in str(info.value)
    with pytest.raises(ConfigError, match="sasl.mechanism"):
        SaslSettings.from_config({**cfg, "sasl.mechanism": "GSSAPI"})
    assert SaslSettings.from_config({"security.protocol": "PLAINTEXT"}) is None
    spark = {f"kafka.{k}": v for k, v in cfg.items()}
    read = parse_options({**spark, "subscribe": "t"})
    assert read.kafka_params["sasl.jaas.config"] == jaas and "top-secret-1" not in repr(read)
    write = parse_write_options({**spark, "topic": "t"})
    assert write.producer_config["sasl.jaas.config"] == jaas and "top-secret-1" not in repr(write)


# --- OAUTHBEARER (unsecured JWT validator) -----------------------------------------------

def _jws(claims: dict, alg: str = "none", signature: str = "") -> str:
    def part(obj: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()
    return f"{part({'alg': alg})}.{part(claims)}.{signature}"


def _oauth_message(token: str, authzid: str = "") -> bytes:
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01\x01".encode()


def test_oauthbearer_unsecured_validator():
    import time

    from broker.server.security.oauthbearer import OAuthBearerServer

    now = time.time()
    good = {"sub": "carol", "iat": now - 5, "exp": now + 60, "scope": "kafka write"}
    server = OAuthBearerServer({"unsecuredValidatorRequiredScope": "kafka"})
    assert server.evaluate(_oauth_message(_jws(good))) == b"" and server.authorization_id == "carol"
    assert abs(server.credential_expiry_ms - (now + 60) * 1000) < 1000
    for claims, alg, sig in [({**good, "exp": now - 10}, "none", ""),      # expired
                             ({**good, "iat": now + 600}, "none", ""),     # issued in the future
                             ({k: v for k, v in good.items() if k != "sub"}, "none", ""),
                             ({**good, "scope": "other"}, "none", ""),      # lacks the required scope
                             (good, "RS256", "c2ln")]:                      # signed: needs a JWKS validator
        s = OAuthBearerServer({"unsecuredValidatorRequiredScope": "kafka"})
        assert json.loads(s.evaluate(_oauth_message(_jws(claims, alg, sig)))) == {"status": "invalid_token"}
        with pytest.raises(SaslAuthenticationFailed):
            s.evaluate(b"\x01")
    for bad in (b"", b"n,,auth=Bearer x", b"n,,\x01auth=Basic abc\x01\x01", b"\xff", _oauth_message("a.b"),
                _oauth_message(_jws(good), authzid="mallory")):
        s = OAuthBearerServer({})
        with pytest.raises(SaslAuthenticationFailed):
            if s.evaluate(bad).startswith(b"{"):
                s.evaluate(b"\x01")


OAUTH_OVERRIDES = {
    **SASL_OVERRIDES, "sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
    "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'unsecuredValidatorRequiredScope="kafka";'}


def test_confluent_kafka_oauthbearer_unsecured_jwt(broker_factory):
    from confluent_kafka import KafkaError, Producer

    broker = broker_factory(OAUTH_OVERRIDES)
    base = {"bootstrap.servers": _bootstrap(broker), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": True}
    p = Producer({**base, "sasl.oauthbearer.config": "principal=carol scope=kafka"})
    p.produce(unique("oauth"), b"x")
    assert p.flush(30) == 0
    errors = []
    p = Producer({**base, "sasl.oauthbearer.config": "principal=carol scope=other", "error_cb": errors.append})
    p.produce(unique("oauth"), b"x")
    for _ in range(30):
        p.poll(0.5)
        if errors:
            break
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION and "required scope" in errors[0].str()
    p.purge()


def test_our_client_oauthbearer_unsecured_jwt_and_token_endpoint(broker_factory):
    import http.server
    import threading
    import time

    from broker.client.admin import AdminClient
    from broker.client.producer import KafkaProducer
    from broker.client.sasl import SaslAuthenticationError

    broker = broker_factory(OAUTH_OVERRIDES)
    module = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required"
    base = {"bootstrap.servers": _bootstrap(broker), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER"}
    unsecured = {**base, "sasl.jaas.config": f'{module} unsecuredLoginStringClaim_sub="dave" '
                                             'unsecuredLoginListClaim_scope=",kafka,read";'}
    with KafkaProducer(unsecured) as producer:
        assert producer.send(unique("oauth-own"), b"x").get(30).offset == 0
    no_scope = {**base, "sasl.jaas.config": f'{module} unsecuredLoginStringClaim_sub="dave";'}
    with AdminClient(no_scope) as admin, pytest.raises(SaslAuthenticationError, match="required scope"):
        admin.list_topics()

    requests = []

    class TokenEndpoint(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers["Content-Length"])).decode()
            requests.append((self.headers["Authorization"], body))
            if self.headers["Authorization"] != "Basic " + base64.b64encode(b"spark-app:app-secret").decode():
                self.send_response(401)
                self.end_headers()
                return
            now = time.time()
            token = _jws({"sub": "spark-app", "iat": now, "exp": now + 300, "scope": "kafka"})
            data = json.dumps({"access_token": token, "token_type": "bearer", "expires_in": 300}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), TokenEndpoint)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/token"
        creds = {**base, "sasl.oauthbearer.token.endpoint.url": url,
                 "sasl.jaas.config": f'{module} clientId="spark-app" clientSecret="app-secret" scope="kafka";'}
        with AdminClient(creds) as admin:
            admin.list_topics()
        assert requests[0][1] == "grant_type=client_credentials&scope=kafka"
        wrong = {**creds, "sasl.jaas.config": f'{module} clientId="spark-app" clientSecret="nope-secret";'}
        with AdminClient(wrong) as admin, pytest.raises(SaslAuthenticationError, match="HTTP 401") as info:
            admin.list_topics()
        assert "nope-secret" not in str(info.value)
    finally:
        server.shutdown()


def _signed_jwt(private_key, claims: dict, kid: str = "k1") -> str:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    def part(obj: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()
    signed = f"{part({'alg': 'RS256', 'kid': kid, 'typ': 'JWT'})}.{part(claims)}"
    signature = private_key.sign(signed.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signed}.{base64.urlsafe_b64encode(signature).rstrip(b'=').decode()}"


def test_oauthbearer_jwks_validator_with_signed_tokens(broker_factory, tmp_path):
    import time

    pytest.importorskip("cryptography")
    from cryptography.hazmat.primitives.asymmetric import rsa

    from broker.client.admin import AdminClient
    from broker.client.sasl import SaslAuthenticationError

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    numbers = key.public_key().public_numbers()

    def b64int(n: int) -> str:
        return base64.urlsafe_b64encode(n.to_bytes((n.bit_length() + 7) // 8, "big")).rstrip(b"=").decode()
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [{"kty": "RSA", "kid": "k1", "alg": "RS256", "use": "sig",
                                          "n": b64int(numbers.n), "e": b64int(numbers.e)}]}))
    broker = broker_factory({
        **SASL_OVERRIDES, "sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
        "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
        "sasl.oauthbearer.jwks.endpoint.url": jwks.as_uri(),
        "sasl.oauthbearer.expected.audience": "kafka-cluster",
        "sasl.oauthbearer.expected.issuer": "https://issuer.example"})
    now = time.time()
    good = {"sub": "erin", "iss": "https://issuer.example", "aud": ["kafka-cluster"], "iat": now, "exp": now + 300}
    token_file = tmp_path / "token"
    conf = {"bootstrap.servers": _bootstrap(broker), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.token.endpoint.url": token_file.as_uri(),
            "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"}
    token_file.write_text(_signed_jwt(key, good))
    with AdminClient(conf) as admin:
        admin.list_topics()
    for claims, signer, reason in [(good, other, "signature"), ({**good, "aud": "elsewhere"}, key, "audience"),
                                   ({**good, "iss": "https://evil"}, key, "issuer"),
                                   ({**good, "exp": now - 600}, key, "expired")]:
        token_file.write_text(_signed_jwt(signer, claims))
        with AdminClient(conf) as admin, pytest.raises(SaslAuthenticationError, match=reason):
            admin.list_topics()
    token_file.write_text(_jws(good))  # unsecured tokens are refused by the JWKS validator
    with AdminClient(conf) as admin, pytest.raises(SaslAuthenticationError, match="signed JWT"):
        admin.list_topics()


def test_kafkalog_produce_and_consume_with_sasl_client_config(sasl_broker, tmp_path):
    props = tmp_path / "client.properties"
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                     'username="alice" password="alice-secret";\n')
    topic = unique("console")
    import sys
    produce = subprocess.run([sys.executable, "-m", "spark_kafkalog.cli", "produce", "--bootstrap-server",
                              _bootstrap(sasl_broker), "--topic", topic, "--producer.config", str(props)],
                             input="one\ntwo\n", capture_output=True, text=True, timeout=120)
    assert produce.returncode == 0, produce.stderr
    consume = _kafkalog("consume", "--bootstrap-server", _bootstrap(sasl_broker), "--topic", topic,
                        "--from-beginning", "--max-messages", "2", "--consumer.config", str(props))
    assert consume.returncode == 0, consume.stderr
    assert consume.stdout.split() == ["one", "two"]
    props.write_text(props.read_text().replace("alice-secret", "bad-secret-42"))
    denied = _kafkalog("consume", "--bootstrap-server", _bootstrap(sasl_broker), "--topic", topic,
                       "--from-beginning", "--max-messages", "1", "--consumer.config", str(props))
    assert denied.returncode == 1 and "SASL_AUTHENTICATION_FAILED" in denied.stderr
    assert "bad-secret-42" not in denied.stderr + denied.stdout
