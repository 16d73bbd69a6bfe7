"""Real, unmodified Kafka clients against the broker subprocess (``kafka_broker`` fixture):
confluent-kafka (librdkafka 2.16), kafka-python 3.0, aiokafka 0.14 and kcat (librdkafka
2.0.2) produce with every codec and read everything back, administer topics, and
negotiate the API versions PROTOCOL.md section 1.1 predicts (read from the broker's
request log).
"""

from __future__ import annotations

import asyncio
import itertools
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from broker.protocol import ApiKey
from broker.record.batch import COMPRESSION_CODEC_MASK, iter_batch_headers
from broker.server.apis import advertised_versions

pytestmark = pytest.mark.timeout(180)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
BASE_TS = 1_700_000_000_000


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def stored_batches(broker, topic: str, partition: int = 0) -> list:
    out = []
    for path in sorted((Path(broker.log_dir) / f"{topic}-{partition}").glob("*.log")):
        out.extend(h for _, h in iter_batch_headers(path.read_bytes()))
    return out


def messages(n: int, tag: str) -> list[tuple[bytes, bytes, list, int]]:
    """(key, compressible value, headers, timestamp) per message."""
    return [(f"key-{i}".encode(), (f"{tag}-value-{i}-" + "abcdefgh" * 16).encode(),
             [("h1", f"hv{i}".encode()), ("h2", None)], BASE_TS + i * 1000) for i in range(n)]


def librdkafka_lz4_expected() -> int:
    """librdkafka compresses lz4 only when the broker advertises FindCoordinator (its
    RD_KAFKA_FEATURE_LZ4 is tied to that key); without it batches go uncompressed."""
    advertised = {k for k, _, _ in advertised_versions()}
    return CODEC_IDS["lz4"] if ApiKey.FIND_COORDINATOR in advertised else CODEC_IDS["none"]


# --- confluent-kafka (librdkafka 2.16) ---

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic  # noqa: E402


def _admin(broker, client_id: str = "ck-admin") -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap, "client.id": client_id})


def _create(admin: AdminClient, topic: str, partitions: int = 1, config: dict | None = None, **kw) -> None:
    admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})], **kw)[topic].result(10)


def _error_code(future) -> int:
    with pytest.raises(KafkaException) as info:
        future.result(10)
    return info.value.args[0].code()


def test_confluent_admin_create_list_describe_delete(kafka_broker):
    admin = _admin(kafka_broker)
    topic = unique("ck-admin")
    _create(admin, topic, 3, {"retention.ms": "3600000", "cleanup.policy": "delete"})
    md = admin.list_topics(timeout=10)
    assert len(md.topics[topic].partitions) == 3
    assert md.controller_id == 1 and list(md.brokers) == [1]
    assert md.brokers[1].port == kafka_broker.port

    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([res])[res].result(10)
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ck.admin.ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["segment.bytes"].value == "1073741824"
    assert configs["segment.bytes"].source == ck.admin.ConfigSource.DEFAULT_CONFIG.value

    admin.create_partitions([NewPartitions(topic, 5)])[topic].result(10)
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 5
    assert _error_code(admin.create_partitions([NewPartitions(topic, 2)])[topic]) == KafkaError.INVALID_PARTITIONS

    # validate_only creates nothing
    ghost = unique("ck-ghost")
    admin.create_topics([NewTopic(ghost, 1, 1)], validate_only=True)[ghost].result(10)
    assert ghost not in admin.list_topics(timeout=10).topics

    admin.delete_topics([topic])[topic].result(10)
    assert topic not in admin.list_topics(timeout=10).topics
    assert _error_code(admin.delete_topics([topic])[topic]) == KafkaError.UNKNOWN_TOPIC_OR_PART


@pytest.mark.parametrize("name, config, partitions, rf, expected", [
    ("bad name!", {}, 1, 1, KafkaError.TOPIC_EXCEPTION),
    ("x" * 250, {}, 1, 1, KafkaError.TOPIC_EXCEPTION),
    ("..", {}, 1, 1, KafkaError.TOPIC_EXCEPTION),
    (None, {"retention.ms": "soon"}, 1, 1, KafkaError.INVALID_CONFIG),
    (None, {"no.such.config": "1"}, 1, 1, KafkaError.INVALID_CONFIG),
    (None, {"cleanup.policy": "shred"}, 1, 1, KafkaError.INVALID_CONFIG),
    (None, {}, 1, 3, KafkaError.INVALID_REPLICATION_FACTOR),
])
def test_confluent_admin_error_codes(kafka_broker, name, config, partitions, rf, expected):
    admin = _admin(kafka_broker)
    topic = name or unique("ck-bad")
    fut = admin.create_topics([NewTopic(topic, partitions, rf, config=config)])[topic]
    assert _error_code(fut) == expected
    assert topic not in admin.list_topics(timeout=10).topics


def test_confluent_topic_already_exists_and_collision(kafka_broker):
    admin = _admin(kafka_broker)
    topic = unique("ck.dup")
    _create(admin, topic)
    assert _error_code(admin.create_topics([NewTopic(topic, 1, 1)])[topic]) == KafkaError.TOPIC_ALREADY_EXISTS
    twin = topic.replace(".", "_")
    assert _error_code(admin.create_topics([NewTopic(twin, 1, 1)])[twin]) == KafkaError.TOPIC_EXCEPTION


def _consume_all(bootstrap: str, topic: str, n: int, partitions: int = 1, client_id: str = "ck-consumer",
                 offset: int = 0) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-no-commits", "client.id": client_id,
                  "enable.auto.commit": False, "enable.auto.offset.store": False})
    try:
        c.assign([TopicPartition(topic, p, offset) for p in range(partitions)])
        for p in range(partitions):
            c.seek(TopicPartition(topic, p, offset))
        got = []
        deadline = time.monotonic() + 30
        while len(got) < n and time.monotonic() < deadline:
            for m in c.consume(1000, 0.5):
                assert m.error() is None, m.error()
                got.append(m)
        return got
    finally:
        c.close()


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
@pytest.mark.parametrize("codec", CODECS)
def test_confluent_produce_consume_codecs(kafka_broker, codec, idempotent):
    topic = unique(f"ck-{codec}")
    client_id = f"ck-{codec}-{int(idempotent)}"
    p = Producer({"bootstrap.servers": kafka_broker.bootstrap, "compression.type": codec,
                  "enable.idempotence": idempotent, "linger.ms": 20, "client.id": client_id})
    sent = messages(200, codec)
    errors = []
    for key, value, headers, ts in sent:
        p.produce(topic, value, key, partition=0, headers=headers, timestamp=ts,
                  on_delivery=lambda err, msg: err and errors.append(err))
    assert p.flush(30) == 0
    assert not errors
    got = _consume_all(kafka_broker.bootstrap, topic, len(sent))
    assert [(m.key(), m.value(), m.headers(), m.timestamp()[1], m.offset()) for m in got] == \
        [(k, v, h, ts, i) for i, (k, v, h, ts) in enumerate(sent)]
    batches = stored_batches(kafka_broker, topic)
    codecs = {h.attributes & COMPRESSION_CODEC_MASK for h in batches}
    expected = librdkafka_lz4_expected() if codec == "lz4" else CODEC_IDS[codec]
    assert codecs == {expected}
    assert all((h.producer_id >= 0) == idempotent for h in batches)
    used = kafka_broker.api_versions_used(client_id)
    assert used["PRODUCE"] == {10}  # librdkafka's max (flexible) since Produce v12 is served
    if idempotent:
        assert used["INIT_PRODUCER_ID"] == {4}  # v4 since transactions (issue 17): v2+ flexible


def test_confluent_offsets_for_times_and_watermarks(kafka_broker):
    admin = _admin(kafka_broker)
    topic = unique("ck-times")
    _create(admin, topic)
    p = Producer({"bootstrap.servers": kafka_broker.bootstrap, "linger.ms": 0})
    for key, value, _headers, ts in messages(10, "t"):
        p.produce(topic, value, key, partition=0, timestamp=ts)
        p.flush(10)  # one batch per message, so that time lookups are exact
    c = Consumer({"bootstrap.servers": kafka_broker.bootstrap, "group.id": "unused", "client.id": "ck-times"})
    try:
        found = [c.offsets_for_times([TopicPartition(topic, 0, ts)], 10)[0].offset
                 for ts in (BASE_TS + 5500, BASE_TS, BASE_TS + 9000, BASE_TS + 99_000)]
        assert found == [6, 0, 9, -1]
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 10)
    finally:
        c.close()
    used = kafka_broker.api_versions_used("ck-times")
    assert used["LIST_OFFSETS"] == {7}  # librdkafka's max (flexible) since v10 is served (issue 21)
    assert used["API_VERSIONS"] == {3}
    assert used["METADATA"] == {12}


def test_confluent_consumer_versions_and_auto_create(kafka_broker):
    topic = unique("ck-auto")
    p = Producer({"bootstrap.servers": kafka_broker.bootstrap, "client.id": "ck-auto"})
    p.produce(topic, b"v")
    assert p.flush(20) == 0
    assert len(_admin(kafka_broker).list_topics(topic, timeout=10).topics[topic].partitions) == 1
    got = _consume_all(kafka_broker.bootstrap, topic, 1, client_id="ck-auto-consumer")
    assert [m.value() for m in got] == [b"v"]
    used = kafka_broker.api_versions_used("ck-auto-consumer")
    assert used["FETCH"] == {11}
    assert used["API_VERSIONS"] == {3}


# --- kafka-python 3.0 ---

kafka = pytest.importorskip("kafka")


def _kp_admin(broker):
    from kafka import KafkaAdminClient
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="kp-admin")


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_kafka_python_produce_consume_codecs(kafka_broker, codec):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP
    from kafka.admin import NewTopic as KNewTopic

    topic = unique(f"kp-{codec}")
    admin = _kp_admin(kafka_broker)
    try:
        admin.create_topics([KNewTopic(topic, 2, 1)])
    finally:
        admin.close()
    client_id = f"kp-{codec}"
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap, compression_type=codec,
                             client_id=client_id, linger_ms=10)
    assert producer.config["api_version"] >= (2, 4)  # inferred from the ApiVersions table (PROTOCOL.md 1.4)
    sent = messages(100, str(codec))
    futures = [producer.send(topic, value=v, key=k, headers=[(hk, hv or b"") for hk, hv in h],
                             partition=i % 2, timestamp_ms=ts) for i, (k, v, h, ts) in enumerate(sent)]
    producer.flush(30)
    assert all(f.get(10).offset >= 0 for f in futures)
    producer.close()

    consumer = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap, client_id=f"{client_id}-c",
                             enable_auto_commit=False)
    try:
        tps = [KTP(topic, 0), KTP(topic, 1)]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        got = []
        deadline = time.monotonic() + 30
        while len(got) < len(sent) and time.monotonic() < deadline:
            for records in consumer.poll(500).values():
                got.extend(records)
    finally:
        consumer.close()
    by_key = {r.key: r for r in got}
    assert len(got) == len(sent)
    for k, v, h, ts in sent:
        r = by_key[k]
        assert (r.value, r.timestamp, r.headers) == (v, ts, [(hk, hv or b"") for hk, hv in h])
    batches = stored_batches(kafka_broker, topic, 0) + stored_batches(kafka_broker, topic, 1)
    assert {h.attributes & COMPRESSION_CODEC_MASK for h in batches} == {CODEC_IDS[codec or "none"]}
    assert all(h.producer_id >= 0 for h in batches)  # idempotence is on by default there
    used = kafka_broker.api_versions_used(client_id)
    assert used["API_VERSIONS"] == {4, 3}  # v4 answered UNSUPPORTED_VERSION, then v3
    assert used["PRODUCE"] == {9}  # kafka-python's max (flexible) since Produce v12 is served
    assert used["INIT_PRODUCER_ID"] == {4}  # v4 since transactions (issue 17)
    used_c = kafka_broker.api_versions_used(f"{client_id}-c")
    assert used_c["FETCH"] == {11}


def test_kafka_python_admin_create_delete(kafka_broker):
    from kafka.admin import NewTopic as KNewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = _kp_admin(kafka_broker)
    topic = unique("kp-admin")
    try:
        admin.create_topics([KNewTopic(topic, 3, 1, topic_configs={"retention.ms": "60000"})])
        assert topic in admin.list_topics()
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([KNewTopic(topic, 3, 1)])
        admin.delete_topics([topic])
        assert topic not in admin.list_topics()
    finally:
        admin.close()
    used = kafka_broker.api_versions_used("kp-admin")
    assert used["CREATE_TOPICS"] == {4}
    assert used["DELETE_TOPICS"] == {3}
    assert used["METADATA"] == {12}


# --- aiokafka 0.14 ---

aiokafka = pytest.importorskip("aiokafka")


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_aiokafka_produce_consume(kafka_broker, codec):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as ATP

    topic = unique(f"aio-{codec}")
    client_id = f"aio-{codec}"
    sent = messages(50, str(codec))

    async def run() -> list:
        producer = AIOKafkaProducer(bootstrap_servers=kafka_broker.bootstrap, compression_type=codec,
                                    client_id=client_id, enable_idempotence=codec == "gzip")
        await producer.start()
        try:
            batch = [producer.send(topic, value=v, key=k, headers=[(hk, hv or b"") for hk, hv in h],
                                   partition=0, timestamp_ms=ts) for k, v, h, ts in sent]
            for fut in await asyncio.gather(*batch):
                await fut
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=kafka_broker.bootstrap, client_id=f"{client_id}-c",
                                    enable_auto_commit=False)
        await consumer.start()
        try:
            tp = ATP(topic, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            got = []
            deadline = time.monotonic() + 30
            while len(got) < len(sent) and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    got.extend(records)
            return got
        finally:
            await consumer.stop()

    got = asyncio.run(run())
    assert [(r.key, r.value, r.timestamp, list(r.headers)) for r in got] == \
        [(k, v, ts, [(hk, hv or b"") for hk, hv in h]) for k, v, h, ts in sent]
    batches = stored_batches(kafka_broker, topic)
    assert {h.attributes & COMPRESSION_CODEC_MASK for h in batches} == {CODEC_IDS[codec or "none"]}
    used = kafka_broker.api_versions_used(client_id)
    assert used["API_VERSIONS"] == {0}
    assert used["METADATA"] == {5}
    assert used["PRODUCE"] == {7}
    if codec == "gzip":
        assert used["INIT_PRODUCER_ID"] == {0}
    used_c = kafka_broker.api_versions_used(f"{client_id}-c")
    assert used_c["FETCH"] == {11}
    assert used_c["LIST_OFFSETS"] == {3}


# --- kcat (librdkafka 2.0.2) ---



def _kcat(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["kcat", *args], input=stdin, capture_output=True, timeout=60, check=True)


@pytest.mark.kcat
def test_kcat_metadata_produce_consume(kafka_broker):
    topic = unique("kcat")
    out = _kcat("-b", kafka_broker.bootstrap, "-L", "-X", "client.id=kcat-list").stdout.decode()
    assert f"broker 1 at {kafka_broker.bootstrap} (controller)" in out
    lines = []
    for codec in CODECS:
        chunk = [f"{codec}-{i}-" + "x" * 60 for i in range(20)]
        lines += chunk
        _kcat("-b", kafka_broker.bootstrap, "-P", "-t", topic, "-p", "0", "-z", codec,
              "-X", "client.id=kcat-produce", stdin=("\n".join(chunk) + "\n").encode())
    out = _kcat("-b", kafka_broker.bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e",
                "-f", "%o %s\n", "-X", "client.id=kcat-consume").stdout.decode()
    assert out.splitlines() == [f"{i} {line}" for i, line in enumerate(lines)]
    # one run of batches per kcat invocation (librdkafka may split one run in two)
    codecs = [k for k, _ in itertools.groupby(h.attributes & COMPRESSION_CODEC_MASK
                                              for h in stored_batches(kafka_broker, topic))]
    # librdkafka 2.0.2: gzip/snappy/zstd compressed thanks to Produce min 0 (KAFKA-18659);
    # lz4 only with FindCoordinator advertised (PROTOCOL.md 1.3).
    assert codecs == [0, 1, 2, librdkafka_lz4_expected(), 4]
    produced = kafka_broker.api_versions_used("kcat-produce")
    assert produced["API_VERSIONS"] == {3}
    assert produced["METADATA"] == {4}
    assert produced["PRODUCE"] == {7}
    consumed = kafka_broker.api_versions_used("kcat-consume")
    assert consumed["FETCH"] == {11}
    assert consumed["LIST_OFFSETS"] == {2}
