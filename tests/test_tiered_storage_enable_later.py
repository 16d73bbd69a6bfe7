"""Turning tiered storage on for a topic that already holds data, the way operators
migrate (KIP-405): ``kafkalog configs --alter --add-config remote.storage.enable=true,...``
(kafka-configs.sh's options) on a topic created without it, against a real broker
subprocess with the system enabled. The segments written before the change are copied,
the local ones deleted past local retention, and a consumer from offset 0 still gets every
record; ``kafkalog configs --describe`` shows the new values; ``get-offsets`` answers
``earliest-local`` past 0 while ``earliest`` stays 0.
"""

from __future__ import annotations

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from spark_kafkalog.cli.main import main  # noqa: E402
from tests.support.workload import wait_for_outcome  # noqa: E402
from tests.test_tiered_storage_broker import _broker  # noqa: E402

TOPIC = "enable-later"
N = 200


def _cli(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


def test_remote_storage_turned_on_for_an_existing_topic_tiers_what_it_already_holds(tmp_path, capsys) -> None:
    broker = _broker(tmp_path).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1, config={"internal.segment.bytes": "1024"})])[TOPIC].result(30)
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0,
                                             "batch.num.messages": 1})
        for i in range(N):
            producer.produce(TOPIC, value=f"old-{i}".encode())
            producer.poll(0)
        assert producer.flush(30) == 0
        local_dir = broker.log_dir / f"{TOPIC}-0"
        before = sorted(local_dir.glob("*.log"))
        assert len(before) >= 5
        assert not (broker.workdir / "remote" / f"{TOPIC}-0").exists()  # nothing tiered yet

        code, _ = _cli(capsys, "configs", "--bootstrap-server", broker.bootstrap, "--entity-type", "topics",
                       "--entity-name", TOPIC, "--alter", "--add-config",
                       "remote.storage.enable=true,local.retention.bytes=1")
        assert code == 0
        code, out = _cli(capsys, "configs", "--bootstrap-server", broker.bootstrap, "--entity-type", "topics",
                         "--entity-name", TOPIC, "--describe")
        assert code == 0 and "remote.storage.enable=true" in out and "local.retention.bytes=1" in out

        remote = broker.workdir / "remote" / f"{TOPIC}-0"

        def tiered() -> bool:
            manifests = list(remote.glob("*.remote-segment.json")) if remote.is_dir() else []
            return len(manifests) >= len(before) - 1 and len(list(local_dir.glob("*.log"))) <= 2

        wait_for_outcome(tiered, "the segments written before the change tiered and deleted locally")
        assert (remote / f"{0:020d}.log").is_file() and not (local_dir / f"{0:020d}.log").exists()

        consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "later",
                                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                             "max.partition.fetch.bytes": 512})
        try:
            assert consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10) == (0, N)
            consumer.subscribe([TOPIC])
            values: list[bytes] = []
            for _ in range(200):
                if len(values) >= N:
                    break
                values += [m.value() for m in consumer.consume(100, timeout=0.3) if m.error() is None]
            assert values == [f"old-{i}".encode() for i in range(N)]
        finally:
            consumer.close()

        local_start = int(sorted(local_dir.glob("*.log"))[0].name[:20])
        code, out = _cli(capsys, "get-offsets", "--bootstrap-server", broker.bootstrap, "--topic", TOPIC,
                         "--time", "earliest-local")
        assert (code, out.split()) == (0, [f"{TOPIC}:0:{local_start}"]) and local_start > 0
        code, out = _cli(capsys, "get-offsets", "--bootstrap-server", broker.bootstrap, "--topic", TOPIC,
                         "--time", "earliest")
        assert (code, out.split()) == (0, [f"{TOPIC}:0:0"])
    finally:
        broker.stop()
