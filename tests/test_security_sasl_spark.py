"""Spark through a SASL listener (issue 16): the sink writes and network mode reads with
SCRAM credentials given as ``kafka.security.protocol`` / ``kafka.sasl.mechanism`` /
``kafka.sasl.jaas.config``, exactly as with Spark's Kafka connector; a wrong password fails
the query with SASL_AUTHENTICATION_FAILED, and the password shows in no plan or error.
"""

from __future__ import annotations

import uuid

import pytest

from tests.support.broker import BrokerProcess
from tests.test_security_sasl import SASL_OVERRIDES, _ck_create_scram_user


@pytest.fixture(scope="module")
def sasl_spark_broker(tmp_path_factory):
    broker = BrokerProcess(tmp_path_factory.mktemp("sasl-spark"), SASL_OVERRIDES, name="sasl-spark")
    broker.start()
    _ck_create_scram_user(broker, "spark-user", "spark-Secret-9", mechs=("SCRAM-SHA-512",))
    yield broker
    broker.stop()


def _options(broker: BrokerProcess, password: str) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": f"{broker.host}:{broker.listener_port('SASL_PLAINTEXT')}",
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": ("org.apache.kafka.common.security.scram.ScramLoginModule required "
                                   f'username="spark-user" password="{password}";'),
    }


def test_spark_write_and_network_read_with_scram(spark, sasl_spark_broker):
    topic = f"spark-sasl-{uuid.uuid4().hex[:6]}"
    opts = _options(sasl_spark_broker, "spark-Secret-9")
    df = spark.createDataFrame([(f"k{i}", f"v{i}") for i in range(50)], "key string, value string")
    df.write.format("kafkalog").mode("append").options(**opts).option("topic", topic).save()
    read = spark.read.format("kafkalog").options(**opts).option("subscribe", topic).load()
    plan = read._jdf.queryExecution().toString()
    assert "spark-Secret-9" not in plan
    rows = sorted(r.value.decode() for r in read.select("value").collect())
    assert rows == sorted(f"v{i}" for i in range(50))


def test_spark_read_with_a_wrong_password_fails_cleanly(spark, sasl_spark_broker):
    opts = _options(sasl_spark_broker, "not-the-Secret-7")
    with pytest.raises(Exception) as info:  # noqa: B017 - Spark wraps the Python error
        spark.read.format("kafkalog").options(**opts).option("subscribe", "any").load().count()
    text = str(info.value)
    assert "SASL_AUTHENTICATION_FAILED" in text and "not-the-Secret-7" not in text


def test_spark_streaming_read_with_scram(spark, sasl_spark_broker, tmp_path):
    from confluent_kafka import Producer

    from tests.test_security_sasl import _ck_conf

    topic = f"spark-sasl-stream-{uuid.uuid4().hex[:6]}"
    p = Producer(_ck_conf(sasl_spark_broker, "SCRAM-SHA-512", "spark-user", "spark-Secret-9"))
    for i in range(20):
        p.produce(topic, f"s{i}".encode())
    assert p.flush(30) == 0
    df = (spark.readStream.format("kafkalog").options(**_options(sasl_spark_broker, "spark-Secret-9"))
          .option("subscribe", topic).option("startingOffsets", "earliest").load())
    q = (df.selectExpr("CAST(value AS STRING) AS v").writeStream.format("parquet")
         .option("path", str(tmp_path / "out")).option("checkpointLocation", str(tmp_path / "chk"))
         .trigger(availableNow=True).start())
    q.awaitTermination()
    assert q.exception() is None
    assert sorted(r.v for r in spark.read.parquet(str(tmp_path / "out")).collect()) == sorted(
        f"s{i}" for i in range(20))
