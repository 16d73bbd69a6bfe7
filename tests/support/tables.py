"""Shared pieces of the table tests (exports, streaming exports, bridge reads): a broker
with a Schema Registry and three partitions per topic, numbered records, the topic's end
offsets, and a table's rows read back by the format's own library (pyiceberg, deltalake).

Records ``i`` are produced to partition ``i % partitions`` with value ``v<i>``, key
``k<i>`` (null when ``i % 7 == 0``) and a header ``h=<i>`` when ``i % 5 == 0``, so that a
row read back says which record it is and what it must hold.

Thread-safety: plain functions; the fixture is per test module.
"""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker import BrokerProcess

__all__ = ["table_broker", "create_topic", "produce_numbered", "end_offsets", "table_rows", "check_table"]


@pytest.fixture(scope="module")
def table_broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("tables"), {"schema.registry.listeners": "http://127.0.0.1:0",
                                                          "num.partitions": "3"}, name="tables")
    b.start()
    yield b
    b.kill()


def create_topic(broker, topic: str, partitions: int = 3) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic].result(30)


def produce_numbered(broker, topic: str, start: int, n: int, partitions: int = 3) -> None:
    """Records ``start`` .. ``start + n - 1`` (module docstring)."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(start, start + n):
        producer.produce(topic, key=None if i % 7 == 0 else f"k{i}".encode(), value=f"v{i}".encode(),
                         partition=i % partitions, headers=[("h", f"{i}".encode())] if i % 5 == 0 else None)
    assert producer.flush(30) == 0


def end_offsets(broker, topic: str, partitions: int = 3) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ends"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions)}
    finally:
        c.close()


def table_rows(fmt: str, table: str, topic: str) -> pa.Table:
    """Every row of the table, read by the format's own library (deltalake through
    QueryBuilder: its to_pyarrow_table aborts the interpreter at exit in deltalake 1.6)."""
    if fmt == "iceberg":
        from pyiceberg.catalog import load_catalog
        catalog = load_catalog("kafkalog", type="sql", uri=f"sqlite:///{table}/catalog.db", warehouse=f"file://{table}")
        return catalog.load_table(("default", topic)).scan().to_arrow()
    from deltalake import DeltaTable, QueryBuilder
    return pa.table(QueryBuilder().register("t", DeltaTable(table)).execute("select * from t").read_all())


def check_table(fmt: str, table: str, topic: str, broker, partitions: int = 3) -> pa.Table:
    """Every (partition, offset) of the topic exactly once, with its key, value and
    headers; the stored offsets are the end offsets. Returns the rows."""
    from spark_kafkalog.tables.targets import open_target

    rows = table_rows(fmt, table, topic)
    seen = Counter(zip(rows.column("partition").to_pylist(), rows.column("offset").to_pylist(), strict=True))
    assert max(seen.values()) == 1, [k for k, n in seen.items() if n > 1][:5]
    ends = end_offsets(broker, topic, partitions)
    assert set(seen) == {(p, o) for p, end in ends.items() for o in range(end)}
    by_value = {v.decode(): (k, h) for k, v, h in zip(rows.column("key").to_pylist(), rows.column("value").to_pylist(),
                                                      rows.column("headers").to_pylist(), strict=True)}
    for value, (key, headers) in list(by_value.items())[:200]:
        i = int(value[1:])
        assert key == (None if i % 7 == 0 else f"k{i}".encode())
        # no headers: null, as Spark's Kafka source gives them (pyiceberg's scan reads [])
        assert (headers or []) == ([{"key": "h", "value": f"{i}".encode()}] if i % 5 == 0 else [])
    state = open_target(fmt, table, topic=topic).load()
    assert dict(state.offsets.next_offsets) == ends
    return rows
