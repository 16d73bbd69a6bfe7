"""kafkalog get-offsets (broker/tools/get_offsets.py), like kafka-get-offsets.sh, against
the real broker in a subprocess: every --time spec on a tiered topic (earliest-local and
latest-tiered checked against the broker's files and manifests), the topic and partition
filters (regexes, --topic-partitions ranges), internal topics, and one-line errors."""

from __future__ import annotations

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from spark_kafkalog.cli.main import main
from tests.test_tiered_storage_broker import (
    TOPIC,
    TS0,
    N,
    _local_logs,
    _manifests,
    tiered_topic_broker,
)


def get_offsets(capsys, broker, *argv: str) -> tuple[int, list[str], str]:
    code = main(["get-offsets", "--bootstrap-server", broker.bootstrap, *argv])
    out = capsys.readouterr()
    return code, out.out.splitlines(), out.err


@pytest.fixture(scope="module")
def tiered(tmp_path_factory):
    broker = tiered_topic_broker(tmp_path_factory.mktemp("get-offsets"))
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for name in ("gx", "gy"):
            admin.create_topics([NewTopic(name, 3, 1)])[name].result(30)
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
        for p in range(3):
            for _ in range(p + 1):
                producer.produce("gx", b"v", partition=p)
        assert producer.flush(30) == 0
        consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "get-offsets"})
        try:  # a committed offset: __consumer_offsets exists (an internal topic)
            consumer.commit(offsets=[confluent_kafka.TopicPartition("gx", 0, 1)], asynchronous=False)
        finally:
            consumer.close()
        yield broker
    finally:
        broker.stop()


def test_every_time_spec_on_a_tiered_topic(tiered, capsys):
    local_start = int(_local_logs(tiered)[0].name[:20])
    highest_remote = _manifests(tiered)[-1]["end_offset"]
    assert 0 < local_start <= highest_remote + 1
    expected = {"earliest": 0, "-2": 0, "latest": N, "-1": N, "max-timestamp": N - 1, "-3": N - 1,
                "earliest-local": local_start, "-4": local_start, "latest-tiered": highest_remote,
                "-5": highest_remote, str(TS0 + 7): 7, str(TS0 + N - 1): N - 1}
    for time, offset in expected.items():
        assert get_offsets(capsys, tiered, "--topic", TOPIC, "--time", time) == (0, [f"{TOPIC}:0:{offset}"], ""), time
    assert get_offsets(capsys, tiered, "--topic", TOPIC)[1] == [f"{TOPIC}:0:{N}"]  # latest by default
    # no record at or after the timestamp: an empty offset, as Kafka prints it
    assert get_offsets(capsys, tiered, "--topic", TOPIC, "--time", str(TS0 + N))[1] == [f"{TOPIC}:0:"]
    # a topic without tiered storage has nothing tiered, and its earliest-local is its earliest
    assert get_offsets(capsys, tiered, "--topic", "gx", "--partitions", "2", "--time", "latest-tiered")[1] == \
        ["gx:2:"]
    assert get_offsets(capsys, tiered, "--topic", "gx", "--partitions", "2", "--time", "earliest-local")[1] == \
        ["gx:2:0"]


def test_topic_and_partition_filters(tiered, capsys):
    assert get_offsets(capsys, tiered, "--topic", "gx")[1] == ["gx:0:1", "gx:1:2", "gx:2:3"]
    assert get_offsets(capsys, tiered, "--topic", "g.", "--partitions", "0,2")[1] == \
        ["gx:0:1", "gx:2:3", "gy:0:0", "gy:2:0"]
    assert get_offsets(capsys, tiered, "--topic", "g")[0] == 1  # a regex matches the whole name
    assert get_offsets(capsys, tiered, "--topic-partitions", "g.*:1-3")[1] == ["gx:1:2", "gx:2:3", "gy:1:0", "gy:2:0"]
    assert get_offsets(capsys, tiered, "--topic-partitions", "gx:2-,gy:-1")[1] == ["gx:2:3", "gy:0:0"]
    assert get_offsets(capsys, tiered, "--topic-partitions", f"{TOPIC},gx:0", "--topic", "ignored")[1] == \
        ["gx:0:1", f"{TOPIC}:0:{N}"]
    everything = get_offsets(capsys, tiered)[1]
    assert {"gx:0:1", "gy:2:0", f"{TOPIC}:0:{N}"} <= set(everything)
    fields = [line.split(":") for line in everything]
    assert fields == sorted(fields, key=lambda f: (f[0], int(f[1])))  # by topic, then partition number
    external = get_offsets(capsys, tiered, "--exclude-internal-topics")[1]
    assert not [line for line in external if line.startswith("__")]
    assert [line for line in everything if line.startswith("__consumer_offsets:")]  # the group's commits made it


@pytest.mark.parametrize("argv, message", [
    (["--topic", "nothing-like-this"], "Could not match any topic-partitions with the specified filters"),
    (["--topic", "gx", "--time", "yesterday"], "Malformed time argument yesterday"),
    (["--topic", "gx", "--time", "-9"], "Malformed time argument -9"),
    (["--topic-partitions", "gx:a-b"], "Invalid partition pattern"),
    (["--topic", "gx", "--partitions", "one"], "expected comma-separated partition ids"),
    (["--topic", "(", ], "Invalid regular expression"),
])
def test_errors_are_one_line(tiered, capsys, argv, message):
    code, out, err = get_offsets(capsys, tiered, *argv)
    assert code == 1 and out == [] and len(err.strip().splitlines()) == 1 and message in err, err
    assert err.startswith("kafkalog get-offsets: error: ")
