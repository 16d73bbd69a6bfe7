"""The Schema Registry's security with real clients (confluent-kafka's
``SchemaRegistryClient`` and its admin client): HTTP Basic against the broker's SASL PLAIN
users and SCRAM credentials (401 without valid ones), reads for any authenticated
principal, writes for a super user or ALTER on the CLUSTER resource (403 with 40301
otherwise), and HTTPS from the broker's key store (S-series scenarios of RELIABILITY.md:
authentication and authorization at every entrance).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from tests.support.broker import BrokerProcess
from tests.support.tls import STORE_PASSWORD

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
SCHEMA = json.dumps({"type": "record", "name": "Secured", "fields": [{"name": "a", "type": "int"}]})


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    broker = BrokerProcess(tmp_path_factory.mktemp("registry-sec"), {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "schema.registry.listeners": "http://127.0.0.1:0",
    }, name="registry-sec")
    broker.start()
    yield broker
    broker.kill()


def sr(broker: BrokerProcess, user: str | None = None, password: str | None = None) -> SchemaRegistryClient:
    conf = {"url": broker.schema_registry_url}
    if user is not None:
        conf["basic.auth.user.info"] = f"{user}:{password}"
    return SchemaRegistryClient(conf)


def admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.listener_port('SASL_PLAINTEXT')}",
                        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                        "sasl.username": "admin", "sasl.password": "admin-secret"})


def test_s_registry_requests_without_valid_credentials_get_401(secured):
    with pytest.raises(SchemaRegistryError) as none:
        sr(secured).get_subjects()
    assert none.value.http_status_code == 401
    with pytest.raises(SchemaRegistryError) as wrong:
        sr(secured, "alice", "not-her-password").get_subjects()
    assert wrong.value.http_status_code == 401
    try:
        urllib.request.urlopen(f"{secured.schema_registry_url}/subjects", timeout=10)
        raise AssertionError("no 401")
    except urllib.error.HTTPError as exc:
        assert exc.code == 401
        assert exc.headers["WWW-Authenticate"].startswith("Basic")
        assert json.loads(exc.read())["error_code"] == 401


def test_s_any_principal_reads_only_cluster_alter_writes(secured):
    subject = unique("sec-value")
    sid = sr(secured, "admin", "admin-secret").register_schema(subject, Schema(SCHEMA, "AVRO"))
    alice = sr(secured, "alice", "alice-secret")
    assert subject in alice.get_subjects()
    assert json.loads(alice.get_schema(sid).schema_str)["name"] == "Secured"
    # alice is no super user and has no ALTER on the cluster: she reads, she may not write
    a = admin(secured)
    with pytest.raises(SchemaRegistryError) as denied:
        sr(secured, "alice", "alice-secret").register_schema(unique("alice-value"), Schema(SCHEMA, "AVRO"))
    assert denied.value.http_status_code == 403 and denied.value.error_code == 40301
    with pytest.raises(SchemaRegistryError) as denied_config:
        sr(secured, "alice", "alice-secret").set_compatibility(level="NONE")
    assert denied_config.value.error_code == 40301
    futures = a.create_acls([AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                                        "User:alice", "*", AclOperation.ALTER, AclPermissionType.ALLOW)])
    for f in futures.values():
        f.result(10)
    assert sr(secured, "alice", "alice-secret").register_schema(unique("alice-value"), Schema(SCHEMA, "AVRO")) == sid


def test_s_scram_credentials_authenticate_too(secured):
    a = admin(secured)
    futures = a.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"carol-secret")])
    for f in futures.values():
        f.result(10)
    assert isinstance(sr(secured, "carol", "carol-secret").get_subjects(), list)
    with pytest.raises(SchemaRegistryError) as wrong:
        sr(secured, "carol", "wrong").get_subjects()
    assert wrong.value.http_status_code == 401


def test_s_https_from_the_brokers_key_store(tmp_path, pki):
    broker = BrokerProcess(tmp_path / "tls", {
        "schema.registry.listeners": "https://127.0.0.1:0",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": pki.path("server.p12"),
        "ssl.keystore.password": STORE_PASSWORD,
        "ssl.key.password": STORE_PASSWORD,
    }, name="registry-tls").start()
    try:
        url = broker.schema_registry_url
        assert url.startswith("https://")
        good = SchemaRegistryClient({"url": url, "ssl.ca.location": pki.path("ca.pem")})
        sid = good.register_schema(unique("tls-value"), Schema(SCHEMA, "AVRO"))
        assert json.loads(good.get_schema(sid).schema_str)["name"] == "Secured"
        untrusting = SchemaRegistryClient({"url": url, "ssl.ca.location": pki.path("other-ca.pem")})
        with pytest.raises(Exception, match="(?i)certificate|ssl"):
            untrusting.get_subjects()
        # plain HTTP to the TLS port gets no answer, and the listener keeps serving
        with pytest.raises(Exception):  # noqa: B017 - any failure: the server speaks TLS only
            urllib.request.urlopen(url.replace("https://", "http://") + "/subjects", timeout=5)
        assert isinstance(good.get_subjects(), list)
    finally:
        broker.stop()
