"""Tests of ``kafkalog dump-log --offsets-decoder`` / ``--transaction-log-decoder``
(broker/tools/coordinator_decoders.py, coordinator_schemas.py): the real broker writes
``__consumer_offsets`` for real clients (a classic group that subscribes and commits, a
standalone commit, a group deletion) and ``__transaction_state`` for a real transactional
producer, and the dump of the right partition's segment shows each record as the JSON Kafka
4's tool prints, parsed with ``json.loads``; a hand-written segment with a corrupt value, an
unknown record type and a keyless record prints Kafka's skip lines without failing; the
generated tables match the JSON specs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from broker.log.config import LogConfig
from broker.log.unified_log import UnifiedLog
from broker.record.batch import encode_batch
from broker.server.coordinator.topic import partition_for
from broker.server.group.records import OffsetCommitKey, OffsetCommitValue, encode_key, encode_offset_commit_value
from broker.server.txn.state import TransactionState
from spark_kafkalog.cli.main import main
from tests.support.broker import BrokerProcess
from tests.support.waits import wait_until

ROOT = Path(__file__).resolve().parents[1]
PARTITIONS = 3  # of both internal topics, on the test's broker
RECORD = re.compile(r"^\| offset: (\d+) .*?(?: key: (.*?))?(?: payload: (.*))?$")

confluent_kafka = pytest.importorskip("confluent_kafka")
admin = pytest.importorskip("confluent_kafka.admin")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("decoders"), {
        "offsets.topic.num.partitions": str(PARTITIONS),
        "transaction.state.log.num.partitions": str(PARTITIONS),
        "transaction.state.log.replication.factor": "1",
        "offsets.topic.replication.factor": "1",
    }, name="decoders")
    b.start()
    yield b
    b.stop()


def dump(capsys, *args: str) -> tuple[int, list[tuple[int, str | None, str | None]], str]:
    """(exit code, (offset, key text, payload text) of every record line, stderr)."""
    code = main(["dump-log", *args])
    captured = capsys.readouterr()
    records = []
    for line in captured.out.splitlines():
        m = RECORD.match(line)
        if m:
            records.append((int(m.group(1)), m.group(2), m.group(3)))
    return code, records, captured.err


def segment(log_dir: Path, topic: str, key: str) -> Path:
    return log_dir / f"{topic}-{partition_for(key, PARTITIONS)}" / "00000000000000000000.log"


def decoded(capsys, option: str, path: Path) -> list[tuple[dict, dict | str | None]]:
    code, records, err = dump(capsys, option, "--files", str(path))
    assert code == 0, err
    return [(json.loads(k), p if p is None or p == "<DELETE>" else json.loads(p)) for _, k, p in records]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def produce(bootstrap: str, topic: str, count: int) -> None:
    client = admin.AdminClient({"bootstrap.servers": bootstrap})
    client.create_topics([admin.NewTopic(topic, 1, 1)])[topic].result(10)
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i)
    assert p.flush(10) == 0


def test_offsets_decoder_shows_a_classic_group_its_commits_and_its_deletion(broker, capsys):
    topic, group, standalone = unique("orders"), unique("billing"), unique("manual")
    produce(broker.bootstrap, topic, 5)
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": "dump-test",
        "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got = []
    wait_until(lambda: len(got) >= 5, 30, lambda: f"consumed {len(got)} of 5",
               step=lambda: got.extend(m for m in [consumer.poll(0.2)] if m is not None and not m.error()))
    consumer.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, 5)], asynchronous=False)
    consumer.close()
    loose = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": standalone})
    loose.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, 3)], asynchronous=False)
    loose.close()
    client = admin.AdminClient({"bootstrap.servers": broker.bootstrap})
    client.delete_consumer_groups([standalone])[standalone].result(10)

    records = decoded(capsys, "--offsets-decoder", segment(broker.log_dir, "__consumer_offsets", group))
    commits = [(k, v) for k, v in records if k["type"] == "1" and k["data"]["group"] == group]
    assert commits, records
    key, value = commits[-1]
    assert key["data"] == {"group": group, "topic": topic, "partition": 0}
    assert value["version"] in ("1", "3", "4")
    assert value["data"]["offset"] == 5 and value["data"]["metadata"] == ""
    assert value["data"]["commitTimestamp"] > 0
    groups = [v for k, v in records if k == {"type": "2", "data": {"group": group}} and isinstance(v, dict)]
    assert groups, records
    stable = [g["data"] for g in groups if g["data"]["members"]]
    assert stable, groups
    assert stable[-1]["protocolType"] == "consumer" and stable[-1]["generation"] >= 1
    member = stable[-1]["members"][0]
    assert member["clientId"] == "dump-test" and member["memberId"] == stable[-1]["leader"]
    assert member["subscription"]["topics"] == [topic]  # ConsumerProtocolSubscription, decoded
    assert member["assignment"]["assignedPartitions"] == [{"topic": topic, "partitions": [0]}]

    records = decoded(capsys, "--offsets-decoder", segment(broker.log_dir, "__consumer_offsets", standalone))
    mine = [(k, v) for k, v in records if k["data"]["group"] == standalone]
    offset_key = {"type": "1", "data": {"group": standalone, "topic": topic, "partition": 0}}
    assert [v["data"]["offset"] for k, v in mine if k == offset_key and isinstance(v, dict)] == [3]
    assert (offset_key, "<DELETE>") in mine  # the deletion: tombstones
    assert ({"type": "2", "data": {"group": standalone}}, "<DELETE>") in mine


def test_transaction_log_decoder_shows_each_state_of_a_transaction(broker, capsys):
    topic, txn_id = unique("payments"), unique("txn")
    produce(broker.bootstrap, topic, 1)
    p = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id,
                                  "transaction.timeout.ms": 30000})
    p.init_transactions(10)
    p.begin_transaction()
    p.produce(topic, key=b"k", value=b"v")
    p.commit_transaction(10)
    path = segment(broker.log_dir, "__transaction_state", txn_id)

    def mine():
        return [(k, v) for k, v in decoded(capsys, "--transaction-log-decoder", path)
                if k == {"type": "0", "data": {"transactionalId": txn_id}}]

    def states():
        return [TransactionState(v["data"]["transactionStatus"]).name for _, v in mine()]

    wait_until(lambda: "COMPLETE_COMMIT" in states(), 10, lambda: f"states: {states()}")
    records = mine()
    assert states()[0] == "EMPTY" and states()[-1] == "COMPLETE_COMMIT", states()
    assert {"ONGOING", "PREPARE_COMMIT"} <= set(states())
    for _, value in records:
        data = value["data"]
        assert value["version"] in ("0", "1")
        assert data["producerId"] >= 0 and data["transactionTimeoutMs"] == 30000
        status = TransactionState(data["transactionStatus"]).name
        if status in ("ONGOING", "PREPARE_COMMIT"):
            assert data["transactionPartitions"] == [{"topic": topic, "partitionIds": [0]}]
        if status == "EMPTY":
            assert data["transactionPartitions"] == []


def test_undecodable_records_are_skipped_with_kafkas_lines(tmp_path, capsys):
    directory = tmp_path / "__consumer_offsets-0"
    log = UnifiedLog.create(directory, LogConfig.from_props({}))
    key = encode_key(OffsetCommitKey("g", "t", 0))
    value = encode_offset_commit_value(OffsetCommitValue(42, "", 1_700_000_000_000))
    log.append_as_leader(encode_batch([
        (key, value, 1_700_000_000_000),
        (key, value[:6], 1_700_000_000_000),  # truncated in the middle of the offset
        (b"\x00\x63group", b"\x00\x00", 1_700_000_000_000),  # record type 99
        (None, value, 1_700_000_000_000),
        (key, None, 1_700_000_000_000),
    ]))
    log.close()
    code, records, err = dump(capsys, "--offsets-decoder", "--files", str(directory / "00000000000000000000.log"))
    assert code == 0 and err == ""
    assert json.loads(records[0][2]) == {"version": "3", "data": {
        "offset": 42, "leaderEpoch": -1, "metadata": "", "commitTimestamp": 1_700_000_000_000}}
    assert records[1][1].startswith("Error at offset 1, skipping. Could not read record with version 3 "
                                    "from value's buffer") and records[1][2] is None
    assert records[2][1:] == ("Unknown record type 99 at offset 2, skipping.", None)
    assert records[3][1].startswith("Error at offset 3, skipping.") and "missing key" in records[3][1]
    assert records[4][2] == "<DELETE>"
    assert json.loads(records[4][1]) == {"type": "1", "data": {"group": "g", "topic": "t", "partition": 0}}
    # the transaction log decoder on the same file: a key it cannot read
    code, records, _ = dump(capsys, "--transaction-log-decoder", "--files", str(directory / "00000000000000000000.log"))
    assert code == 0 and records[0][1] == "Unknown record type 1 at offset 0, skipping."


def test_the_decoders_are_exclusive_and_imply_print_data_log(tmp_path, capsys):
    code = main(["dump-log", "--offsets-decoder", "--transaction-log-decoder", "--files", "x.log"])
    err = capsys.readouterr().err
    assert code == 1 and "not allowed with argument" in err and len(err.splitlines()) == 1


def test_generated_tables_match_the_specs() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_coordinator_schemas.py"), "--check"],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
