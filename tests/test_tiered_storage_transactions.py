"""Transactions over tiered storage (KIP-405 with KIP-98), end to end: a real broker
subprocess tiers a topic written by a transactional producer (committed and aborted
transactions, interleaved with a plain producer's records) until the aborted ones live
only in remote segments; then real consumers from offset 0:

- read_committed (confluent-kafka, kafka-python) get exactly the committed and plain
  records, in offset order: the broker's remote reads carry the aborted transactions of
  the remote ``.txnindex`` files, as Kafka's remote fetch does;
- read_uncommitted get every data record (the control records are never returned);
- Spark: direct mode on the tiered prefix, stitched mode (store + broker) and network mode
  read_committed give the committed rows.
"""

from __future__ import annotations

from pathlib import Path

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.support.workload import wait_for_outcome  # noqa: E402
from tests.test_tiered_storage_broker import _broker  # noqa: E402

TOPIC = "tiered-txn"
TXNS = 12  # every third one aborted
PER_TXN = 6


@pytest.fixture(scope="module")
def tiered_txn(tmp_path_factory):
    """(broker, committed-or-plain values, every data value), offsets ascending; tiered."""
    broker = _broker(tmp_path_factory.mktemp("tiered-txn")).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1, config={
            "remote.storage.enable": "true", "internal.segment.bytes": "1024",
            "local.retention.bytes": "1"})])[TOPIC].result(30)
        txn = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "tiered-txn",
                                        "linger.ms": 0, "batch.num.messages": 1})
        plain = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        txn.init_transactions(30)
        visible: list[bytes] = []
        everything: list[bytes] = []
        for t in range(TXNS):
            aborted = t % 3 == 1
            txn.begin_transaction()
            for i in range(PER_TXN):
                value = f"txn-{t}-{i}".encode()
                txn.produce(TOPIC, value=value)
                everything.append(value)
                if not aborted:
                    visible.append(value)
                if i == 2:  # a plain record inside the open transaction's range
                    assert txn.flush(30) == 0
                    value = f"plain-{t}".encode()
                    plain.produce(TOPIC, value=value)
                    assert plain.flush(30) == 0
                    everything.append(value)
                    visible.append(value)
            assert txn.flush(30) == 0  # written: abort_transaction purges what is not yet sent
            if aborted:
                txn.abort_transaction(30)
            else:
                txn.commit_transaction(30)
        wait_for_outcome(lambda: _tiered(broker), "aborted transactions tiered and deleted locally")
        yield broker, visible, everything
    finally:
        broker.stop()


def _remote_dir(broker) -> Path:
    return broker.workdir / "remote" / f"{TOPIC}-0"


def _tiered(broker) -> bool:
    """Both aborted transactions of the first half are only remote: the remote
    ``.txnindex`` files hold entries and few local segments are left."""
    d = _remote_dir(broker)
    if not d.is_dir():
        return False
    txn_bytes = sum(p.stat().st_size for p in d.glob("*.txnindex"))  # remote objects: only added here
    local = list((broker.log_dir / f"{TOPIC}-0").glob("*.log"))
    return txn_bytes >= 2 * 34 and len(local) <= 2  # 34 bytes an aborted-txn entry


def _consume_confluent(broker, isolation: str, expected: int) -> list[bytes]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{isolation}",
                                         "enable.auto.commit": False, "isolation.level": isolation,
                                         "auto.offset.reset": "earliest", "max.partition.fetch.bytes": 512})
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        out: list[bytes] = []
        for _ in range(200):
            if len(out) >= expected:
                break
            for msg in consumer.consume(100, timeout=0.3):
                assert msg.error() is None, msg.error()
                out.append(msg.value())
        for msg in consumer.consume(100, timeout=1.0):  # nothing more (no aborted record late)
            out.append(msg.value())
        return out
    finally:
        consumer.close()


def test_the_aborted_transactions_are_in_remote_segments_only(tiered_txn) -> None:
    broker, _, _ = tiered_txn
    local = sorted(int(p.name[:20]) for p in (broker.log_dir / f"{TOPIC}-0").glob("*.log"))
    first_abort_end = 3 * (PER_TXN + 2)  # txn 0 (6 + plain + marker), txn 1 aborted ...
    assert local[0] > first_abort_end


def test_confluent_read_committed_from_offset_zero_skips_the_tiered_aborted_transactions(tiered_txn) -> None:
    broker, visible, _ = tiered_txn
    assert _consume_confluent(broker, "read_committed", len(visible)) == visible


def test_confluent_read_uncommitted_from_offset_zero_gets_every_record(tiered_txn) -> None:
    broker, _, everything = tiered_txn
    assert _consume_confluent(broker, "read_uncommitted", len(everything)) == everything


def test_kafka_python_read_committed_from_offset_zero(tiered_txn) -> None:
    kafka = pytest.importorskip("kafka")
    broker, visible, _ = tiered_txn
    consumer = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                                   isolation_level="read_committed", max_partition_fetch_bytes=512)
    try:
        tp = kafka.TopicPartition(TOPIC, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        out: list[bytes] = []
        for _ in range(200):
            if len(out) >= len(visible):
                break
            for records in consumer.poll(timeout_ms=300).values():
                out += [r.value for r in records]
        out += [r.value for records in consumer.poll(timeout_ms=1000).values() for r in records]
        assert out == visible
    finally:
        consumer.close()


def _spark_values(df) -> list[bytes]:
    return [bytes(r.value) for r in df.select("offset", "value").orderBy("offset").collect()]


def test_spark_reads_the_committed_rows_direct_from_the_store_and_stitched(spark, tiered_txn) -> None:
    """Direct mode on the tiered prefix leaves out the aborted transactions (the remote
    ``.txnindex``), up to what is tiered; stitched mode (store below the local log start,
    the broker above; its consumer read_committed by default) gets exactly the committed
    rows, as network mode does."""
    broker, visible, _ = tiered_txn
    remote = str(broker.workdir / "remote")
    direct = _spark_values(spark.read.format("kafkalog").option("subscribe", TOPIC).load(remote))
    assert direct and direct == visible[:len(direct)]
    stitched = _spark_values(spark.read.format("kafkalog").option("subscribe", TOPIC)
                             .option("kafka.bootstrap.servers", broker.bootstrap).option("path", remote).load())
    network = _spark_values(spark.read.format("kafkalog").option("subscribe", TOPIC)
                            .option("kafka.bootstrap.servers", broker.bootstrap)
                            .option("kafka.isolation.level", "read_committed").load())
    assert stitched == network == visible
