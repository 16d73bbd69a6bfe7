"""Spark source in network mode (issue 6): ``kafka.bootstrap.servers`` instead of a path.

Data produced by confluent-kafka (every codec, keys, null values, headers) to the real
broker subprocess is read back through Spark over the wire and compared, with chispa, to
what was produced and to direct mode reading the broker's own log directory: same rows,
same schema. Data loss after DeleteRecords follows failOnDataLoss.
"""

from __future__ import annotations

import time
import uuid

import pytest
from chispa import assert_df_equality

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PER_CODEC = 300
# Recent timestamps: the shared broker's retention (retention.ms, 7 days) would delete
# older records, and its retention check runs while the tests do.
T0 = int(time.time() * 1000) - 600_000


def _produce(bootstrap: str, topic: str, codec: str) -> list[tuple]:
    import confluent_kafka as ck

    producer = ck.Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                            "linger.ms": 20})
    rows = []
    for i in range(PER_CODEC):
        key = None if i % 7 == 0 else f"k{i}".encode()
        value = None if i % 11 == 0 else (codec + "-" + "v" * (i % 50)).encode()
        headers = [("h", str(i).encode()), ("n", None)] if i % 3 == 0 else None
        producer.produce(topic, key=key, value=value, timestamp=T0 + i, headers=headers,
                         partition=i % 2)
        rows.append((key, value, i % 2, T0 + i, headers))
    assert producer.flush(30) == 0
    return rows


@pytest.fixture(scope="module")
def produced(kafka_broker):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    topics = {codec: f"net-{codec}-{uuid.uuid4().hex[:6]}" for codec in CODECS}
    futures = admin.create_topics([NewTopic(t, num_partitions=2) for t in topics.values()])
    for f in futures.values():
        f.result(30)
    rows = {codec: _produce(kafka_broker.bootstrap, topic, codec)
            for codec, topic in topics.items()}
    return kafka_broker, topics, rows


def _network(spark, broker, **options):
    reader = spark.read.format("kafkalog").option("kafka.bootstrap.servers", broker.bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


@pytest.mark.parametrize("codec", CODECS)
def test_network_mode_reads_what_was_produced(spark, produced, codec):
    broker, topics, rows = produced
    df = _network(spark, broker, subscribe=topics[codec], includeHeaders="true")
    got = sorted(((r.key, r.value, r.partition, int(r.timestamp.timestamp() * 1000),
                  [(h.key, h.value) for h in r.headers] if r.headers is not None else None)
                  for r in df.collect()), key=lambda row: row[3])
    want = sorted(rows[codec], key=lambda row: row[3])  # timestamps are unique
    assert got == want
    offsets = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert offsets == sorted((p, o) for p in (0, 1) for o in range(PER_CODEC // 2))


def test_network_and_direct_modes_give_the_same_dataframe(spark, produced):
    broker, topics, _ = produced
    pattern = "net-.*"
    net = _network(spark, broker, subscribePattern=pattern, includeHeaders="true")
    direct = spark.read.format("kafkalog").option("subscribePattern", pattern) \
        .option("includeHeaders", "true").load(str(broker.log_dir))
    order = ["topic", "partition", "offset"]
    assert_df_equality(net.orderBy(*order), direct.orderBy(*order))


def test_network_offsets_and_timestamps(spark, produced):
    broker, topics, _ = produced
    topic = topics["lz4"]
    df = _network(spark, broker, assign=f'{{"{topic}":[1]}}',
                  startingOffsets=f'{{"{topic}":{{"1":10}}}}', endingOffsets=f'{{"{topic}":{{"1":20}}}}')
    assert [r.offset for r in df.orderBy("offset").select("offset").collect()] == list(range(10, 20))
    # startingTimestamp: partition 0 holds the even i at offset i // 2, timestamp T0 + i
    df = _network(spark, broker, subscribe=topic, startingTimestamp=str(T0 + 100))
    assert df.where("partition = 0").agg({"offset": "min"}).collect()[0][0] == 50


def test_network_data_loss_follows_fail_on_data_loss(spark, kafka_broker):
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"net-loss-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(30)
    producer = ck.Producer({"bootstrap.servers": kafka_broker.bootstrap, "linger.ms": 0})
    for i in range(40):
        producer.produce(topic, value=b"x%d" % i)
        producer.flush(10)  # one batch per record, so DeleteRecords can cut anywhere
    records = admin.delete_records([ck.TopicPartition(topic, 0, 25)])
    for f in records.values():
        f.result(30)
    spec = f'{{"{topic}":{{"0":5}}}}'
    with pytest.raises(Exception, match=r"\[5, 25\)"):
        _network(spark, kafka_broker, subscribe=topic, startingOffsets=spec).count()
    df = _network(spark, kafka_broker, subscribe=topic, startingOffsets=spec, failOnDataLoss="false")
    assert df.count() == 15
