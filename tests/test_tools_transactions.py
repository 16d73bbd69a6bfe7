"""kafkalog transactions (broker/tools/transactions.py), like kafka-transactions.sh, against
real brokers: list / describe / describe-producers print Kafka's tables for a real
transactional producer; find-hanging finds an open transaction its coordinator forgot (a
broker restarted without its ``__transaction_state`` log) and not a healthy open one;
abort --start-offset ends it, after which a confluent-kafka read_committed consumer reads
past it and the read_committed end offset is the high watermark; bad option combinations
and unknown ids are one-line errors with exit status 1."""

from __future__ import annotations

import shutil
import uuid

import pytest
from confluent_kafka import Producer

from broker.client.admin import AdminClient
from broker.client.consumer import offsets
from broker.client.consumer.offsets import TopicPartition
from broker.client.producer import KafkaProducer
from broker.tools.transactions import HANGING_HEADERS, table
from spark_kafkalog.cli.main import main
from tests.support.broker import RawClient
from tests.support.txn_protocol import RawTxn, create_topic
from tests.test_server_transactions_clients import consume_all


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def txn_tool(capsys):
    """Run ``kafkalog transactions ARGS``: (exit code, stdout rows split on tabs, stderr)."""
    def run(bootstrap: str, *argv: str) -> tuple[int, list[list[str]], str]:
        code = main(["transactions", "--bootstrap-server", bootstrap, *argv])
        out = capsys.readouterr()
        rows = [[cell.strip() for cell in line.split("\t")[:-1]] for line in out.out.splitlines()]
        return code, rows, out.err

    return run


def test_list_describe_and_describe_producers(kafka_broker, raw_client, txn_tool, capsys):
    bootstrap = kafka_broker.bootstrap
    topic = unique("tool-txn")
    create_topic(raw_client(), topic)
    done_tid, open_tid = unique("ck-done"), unique("ours-open")
    ck = Producer({"bootstrap.servers": bootstrap, "transactional.id": done_tid})
    ck.init_transactions(30)
    ck.begin_transaction()
    ck.produce(topic, b"committed", partition=0)
    ck.commit_transaction(30)
    ours = KafkaProducer({"bootstrap.servers": bootstrap, "transactional.id": open_tid})
    try:
        ours.init_transactions()
        ours.begin_transaction()
        start = ours.send(topic, b"open", partition=0).get(30).offset

        code, rows, err = txn_tool(bootstrap, "list")
        assert code == 0, err
        assert rows[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
        by_id = {r[0]: r for r in rows[1:]}
        assert by_id[done_tid][1:2] + by_id[done_tid][3:] == ["1", "CompleteCommit"]
        assert by_id[open_tid][1:2] + by_id[open_tid][3:] == ["1", "Ongoing"]
        open_pid, done_pid = by_id[open_tid][2], by_id[done_tid][2]

        # after the subcommand too, as kafka-transactions.sh accepts it only before
        code = main(["transactions", "describe", "--transactional-id", open_tid, "--bootstrap-server", bootstrap])
        out = capsys.readouterr().out
        header, row = out.splitlines()
        assert header.split() == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
                                  "TransactionState", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs",
                                  "TransactionDurationMs", "TopicPartitions"]
        assert code == 0 and header.endswith("\t") and len(header) == len(row)  # Kafka's padded columns
        cells = row.split()
        assert cells[:5] == ["1", open_tid, open_pid, "0", "Ongoing"] and cells[8] == f"{topic}-0"
        assert int(cells[7]) >= 0  # duration

        code, rows, err = txn_tool(bootstrap, "describe-producers", "--topic", topic, "--partition", "0")
        assert code == 0, err
        assert rows[0] == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                           "CurrentTransactionStartOffset"]
        by_pid = {r[0]: r for r in rows[1:]}
        assert by_pid[open_pid][5] == str(start) and by_pid[open_pid][2] == "-1"  # no marker yet
        assert by_pid[done_pid][5] == "None" and by_pid[done_pid][2] != "-1"

        code, rows, err = txn_tool(bootstrap, "describe", "--transactional-id", "no-such-id")
        assert (code, rows) == (1, [])
        assert err.count("\n") == 1 and "Failed to describe transaction state of transactional-id `no-such-id`" \
            in err and "TRANSACTIONAL_ID_NOT_FOUND" in err
        code, rows, err = txn_tool(bootstrap, "describe-producers", "--topic", unique("none"), "--partition", "0")
        assert code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in err
        ours.commit_transaction()
    finally:
        ours.close()


@pytest.mark.parametrize("argv, message", [
    (["abort", "--topic", "t", "--partition", "0"], "must be identified either with --start-offset"),
    (["abort", "--topic", "t", "--partition", "0", "--producer-id", "5"], "Missing required argument --producer-epoch"),
    (["abort", "--topic", "t", "--partition", "0", "--producer-id", "5", "--producer-epoch", "0"],
     "Missing required argument --coordinator-epoch"),
    (["find-hanging"], "requires either --topic or --broker-id"),
    (["find-hanging", "--broker-id", "1", "--partition", "0"], "--partition argument requires --topic"),
    (["find-hanging", "--topic", "t", "--max-transaction-timeout", "-1"], "must be >= 0 minutes"),
    (["describe"], "--transactional-id"),
    ([], "COMMAND"),
])
def test_bad_option_combinations(txn_tool, argv, message):
    code, rows, err = txn_tool("127.0.0.1:1", *argv)  # refused before connecting
    assert (code, rows) == (1, []) and err.startswith("kafkalog transactions") and message in err
    assert err.count("\n") == 1


def test_find_hanging_then_abort_with_start_offset(broker_factory, txn_tool):
    broker = broker_factory()
    topic = unique("hanging")
    with RawClient("127.0.0.1", broker.port) as c:
        create_topic(c, topic, 2)
        lost = RawTxn(c, unique("lost"))
        assert lost.init() == 0 and lost.add(topic, 0) == 0 and lost.produce(topic, 0, [b"never", b"ended"]) == 0
    # The coordinator forgets the transaction: its partition 0 data stays open in the log.
    assert broker.stop() == 0
    removed = list(broker.log_dir.glob("__transaction_state-*"))
    assert removed
    for d in removed:
        shutil.rmtree(d)
    broker.restart()
    bootstrap = broker.bootstrap
    with RawClient("127.0.0.1", broker.port) as c:
        healthy = RawTxn(c, unique("healthy"))
        assert healthy.init() == 0 and healthy.add(topic, 1) == 0 and healthy.produce(topic, 1, [b"open"]) == 0
        p = Producer({"bootstrap.servers": bootstrap})
        p.produce(topic, b"after", partition=0)
        assert p.flush(30) == 0

        code, rows, err = txn_tool(bootstrap, "find-hanging", "--topic", topic)  # default: 15 minutes
        assert (code, rows) == (0, [list(HANGING_HEADERS)]), err
        for scope in (["--topic", topic], ["--broker-id", "1"], ["--topic", topic, "--partition", "0"]):
            code, rows, err = txn_tool(bootstrap, "find-hanging", *scope, "--max-transaction-timeout", "0")
            assert code == 0, err
            assert [r[:6] for r in rows[1:] if r[0] == topic] == [
                [topic, "0", str(lost.producer_id), str(lost.epoch), "-1", "0"]]  # not the healthy partition 1

        tp = TopicPartition(topic, 0)
        with AdminClient(bootstrap_servers=bootstrap) as admin:
            def end(isolation: str) -> int:
                return admin.list_offsets({tp: offsets.LATEST}, isolation_level=isolation)[tp].offset

            assert (end("read_committed"), end("read_uncommitted")) == (0, 3)
            code, rows, err = txn_tool(bootstrap, "abort", "--topic", topic, "--partition", "0", "--start-offset", "1")
            assert code == 1 and "Could not find any open transactions starting at offset 1 on partition" in err
            code, rows, err = txn_tool(bootstrap, "abort", "--topic", topic, "--partition", "0", "--start-offset", "0")
            assert (code, rows, err) == (0, [], "")
            assert end("read_committed") == end("read_uncommitted") == 4  # never ended after ABORT
        assert consume_all(bootstrap, topic, 1, "read_committed") == [b"after"]
        code, rows, err = txn_tool(bootstrap, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0")
        assert (code, rows) == (0, [list(HANGING_HEADERS)]), err
        assert healthy.end(commit=True) == 0


def test_table_is_kafkas_pretty_print():
    assert table(("A", "Long"), [("xyz", 1)]) == "A  \tLong\t\nxyz\t1   \t"
