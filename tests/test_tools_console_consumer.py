"""Tests of ``kafkalog consume`` (broker/tools/console_consumer.py), records_format.py's
MessageFormatter and broker/client/consumer/poller.py against the REAL broker: records
written by confluent-kafka (explicit timestamps, keys, null keys and values, headers with
null values, every codec, a LogAppendTime topic) are printed with Kafka's
DefaultMessageFormatter layout, checked line by line; --partition/--offset,
--max-messages, --timeout-ms, following new records until Ctrl-C (subprocess, exit 130),
``| head`` (exit 141, quiet), read_committed over a log holding transactions, consumer
group offsets (--group, checked with kafka-python's committed()), two --group consumers as members of
one group sharing the partitions, conf/consumer.properties
and one-line errors.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from broker.client.consumer import ConsumerNetworkClient, TopicPartition
from broker.client.consumer.offsets import EARLIEST, LATEST
from broker.client.consumer.poller import ConsumerRecord, PartitionPoller
from broker.client.errors import OffsetOutOfRangeError
from broker.tools.records_format import MessageFormatter
from spark_kafkalog.cli.main import main
from tests.support.txn_log import write_transactions

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path(sys.executable).parent / "kafkalog"
TS0 = 1_700_000_000_000


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def consume(capsysbinary, *argv: str) -> tuple[int, list[str], str]:
    """``kafkalog consume`` in-process: (exit code, stdout lines, stderr)."""
    code = main(["consume", *argv])
    captured = capsysbinary.readouterr()
    return code, captured.out.decode().splitlines(), captured.err.decode()


def one_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    return lines[0]


def create_topic(bootstrap: str, topic: str, partitions: int = 1, config: dict | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])[topic].result(30)


def produce(bootstrap: str, topic: str, records: list[tuple], codec: str = "none") -> list:
    """Send (partition, key, value, headers, timestamp) with confluent-kafka; returns the
    records with their offsets, (partition, offset, key, value, headers, timestamp)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                         "linger.ms": 5})
    out = []

    def done(err, msg, headers):
        assert err is None, err
        out.append((msg.partition(), msg.offset(), msg.key(), msg.value(), headers or [],
                    msg.timestamp()[1]))

    for partition, key, value, headers, ts in records:
        producer.produce(topic, value=value, key=key, headers=headers, timestamp=ts or 0,
                         partition=partition,
                         on_delivery=lambda err, msg, h=headers: done(err, msg, h))
    assert producer.flush(30) == 0
    return sorted(out)


def line(partition: int, offset: int, key, value, headers, ts, kind: str = "CreateTime") -> str:
    text = lambda b: "null" if b is None else b.decode()  # noqa: E731
    hdrs = ",".join(f"{k}:{text(v)}" for k, v in headers) if headers else "NO_HEADERS"
    return f"{kind}:{ts}\tPartition:{partition}\tOffset:{offset}\t{hdrs}\t{text(key)}\t{text(value)}"


ALL_FLAGS = ("--print-timestamp", "--print-partition", "--print-offset", "--print-headers",
             "--print-key")


# --- the formatter: Kafka's DefaultMessageFormatter layout --------------------------------

def test_formatter_layout():
    rec = ConsumerRecord("t", 3, 42, TS0, 0, b"k", b"v", (("h1", b"a"), ("h2", None)))
    full = MessageFormatter({f"print.{f}": "true" for f in
                             ("timestamp", "partition", "offset", "headers", "key")})
    assert full.format(rec) == f"CreateTime:{TS0}\tPartition:3\tOffset:42\th1:a,h2:null\tk\tv\n".encode()
    bare = rec._replace(timestamp_type=-1, timestamp=-1, key=None, value=None, headers=())
    assert full.format(bare) == b"NO_TIMESTAMP\tPartition:3\tOffset:42\tNO_HEADERS\tnull\tnull\n"
    assert full.format(rec._replace(timestamp_type=1)).startswith(f"LogAppendTime:{TS0}\t".encode())
    assert MessageFormatter({}).format(rec) == b"v\n"
    custom = MessageFormatter({"print.key": "true", "key.separator": " | ", "line.separator": "\\n--\\n",
                               "null.literal": "<nil>", "print.headers": "TRUE",
                               "headers.separator": ";"})
    assert custom.format(rec._replace(key=None)) == b"h1:a;h2:<nil> | <nil> | v\n--\n"
    no_value = MessageFormatter({"print.key": "true", "print.value": "false"})
    assert no_value.format(rec) == b"k\n"
    assert MessageFormatter({"print.value": "false"}).format(rec) == b""
    # UTF-8 passes through; anything else is shown as \xNN.
    assert MessageFormatter({}).format(rec._replace(value="é ✓".encode())) == "é ✓\n".encode()
    assert MessageFormatter({}).format(rec._replace(value=b"a\xffb\x00")) == b"a\\xffb\x00\n"


# --- printing what another client produced ---------------------------------------------------

def test_print_flags_on_records_confluent_produced(kafka_broker, capsysbinary):
    bs, topic = kafka_broker.bootstrap, unique("flags")
    create_topic(bs, topic, 2)
    records = [(i % 2, None if i == 4 else b"key-%d" % i, None if i == 5 else b"value %d" % i,
                [("h", b"%d" % i), ("n", None)] if i % 3 == 0 else None, TS0 + i)
               for i in range(8)]
    sent = produce(bs, topic, records, codec="lz4")
    code, lines, err = consume(capsysbinary, "--bootstrap-server", bs, "--topic", topic,
                               "--from-beginning", "--max-messages", "8", *ALL_FLAGS)
    assert (code, err) == (0, "Processed a total of 8 messages\n")
    expected = [line(p, o, k, v, h, ts) for p, o, k, v, h, ts in sent]
    assert sorted(lines) == sorted(expected)
    for partition in (0, 1):  # offset order within each partition
        mine = [x for x in lines if f"\tPartition:{partition}\t" in x]
        assert mine == [x for x in expected if f"\tPartition:{partition}\t" in x]
    # The default: values only.
    code, lines, _ = consume(capsysbinary, "--bootstrap-server", bs, "--topic", topic,
                             "--partition", "1", "--offset", "0", "--max-messages", "4")
    assert lines == [("null" if v is None else v.decode()) for p, _, _, v, _, _ in sent if p == 1]


def test_log_append_time_and_every_codec(kafka_broker, capsysbinary):
    bs = kafka_broker.bootstrap
    topic = unique("lat")
    create_topic(bs, topic, 1, {"message.timestamp.type": "LogAppendTime"})
    produce(bs, topic, [(0, b"k", b"v", None, TS0)])
    code, lines, _ = consume(capsysbinary, "--bootstrap-server", bs, "--topic", topic,
                             "--from-beginning", "--max-messages", "1", "--print-timestamp")
    kind, ts = lines[0].split("\t")[0].split(":")
    assert code == 0 and kind == "LogAppendTime" and int(ts) > TS0  # the broker's clock
    for codec in ("gzip", "snappy", "zstd"):
        topic = unique(f"codec-{codec}")
        sent = produce(bs, topic, [(0, None, b"%s %d" % (codec.encode(), i) * 20, None, TS0 + i)
                                   for i in range(50)], codec=codec)
        code, lines, _ = consume(capsysbinary, "--bootstrap-server", bs, "--topic", topic,
                                 "--from-beginning", "--max-messages", "50", "--print-offset")
        assert lines == [f"Offset:{o}\t{v.decode()}" for _, o, _, v, _, _ in sent]


# --- where to start and when to stop ---------------------------------------------------------

def test_partition_offset_max_messages_and_timeout(kafka_broker, capsysbinary):
    bs, topic = kafka_broker.bootstrap, unique("pos")
    create_topic(bs, topic, 3)
    produce(bs, topic, [(p, None, b"p%d-%d" % (p, i), None, TS0) for p in range(3) for i in range(5)])
    base = ["--bootstrap-server", bs, "--topic", topic]
    code, lines, err = consume(capsysbinary, *base, "--partition", "1", "--offset", "2",
                               "--max-messages", "3")
    assert (code, lines, err) == (0, ["p1-2", "p1-3", "p1-4"], "Processed a total of 3 messages\n")
    code, lines, _ = consume(capsysbinary, *base, "--partition", "2", "--offset", "earliest",
                             "--max-messages", "2")
    assert lines == ["p2-0", "p2-1"]
    # latest, explicit or by default: only new records, so none before the idle timeout.
    for extra in (["--partition", "0", "--offset", "latest"], []):
        code, lines, err = consume(capsysbinary, *base, *extra, "--timeout-ms", "200")
        assert (code, lines, err) == (0, [], "Processed a total of 0 messages\n")
    # An offset past the end follows auto.offset.reset: latest (nothing), or earliest.
    code, lines, _ = consume(capsysbinary, *base, "--partition", "0", "--offset", "99",
                             "--timeout-ms", "300")
    assert (code, lines) == (0, [])
    code, lines, _ = consume(capsysbinary, *base, "--partition", "0", "--offset", "99",
                             "--consumer-property", "auto.offset.reset=earliest",
                             "--max-messages", "5")
    assert lines == [f"p0-{i}" for i in range(5)]
    # --max-messages across partitions: exactly N.
    code, lines, err = consume(capsysbinary, *base, "--from-beginning", "--max-messages", "7")
    assert (code, len(lines), err) == (0, 7, "Processed a total of 7 messages\n")
    assert set(lines) <= {f"p{p}-{i}" for p in range(3) for i in range(5)}
    # --timeout-ms ends a run that printed everything (the timer restarts at each record).
    code, lines, _ = consume(capsysbinary, *base, "--from-beginning", "--timeout-ms", "1000")
    assert sorted(lines) == sorted(f"p{p}-{i}" for p in range(3) for i in range(5))


@pytest.mark.kcat
def test_follow_new_records_until_ctrl_c(kafka_broker):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    bs, topic, group = kafka_broker.bootstrap, unique("follow"), unique("follow-group")
    create_topic(bs, topic, 2)
    proc = subprocess.Popen([str(SCRIPT), "consume", "--bootstrap-server", bs, "--topic", topic,
                             "--from-beginning", "--print-partition", "--group", group],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    try:
        # kcat writes while the consumer follows (it starts at the log start: nothing missed).
        kcat = subprocess.run(["kcat", "-b", bs, "-P", "-t", topic, "-p", "1"],
                              input=b"first\nsecond\n", capture_output=True, timeout=60)
        assert kcat.returncode == 0, kcat.stderr
        assert proc.stdout.readline() == b"Partition:1\tfirst\n"
        assert proc.stdout.readline() == b"Partition:1\tsecond\n"
        produce(bs, topic, [(0, None, b"third", None, TS0)])
        assert proc.stdout.readline() == b"Partition:0\tthird\n"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (proc.returncode, out, err) == (130, b"", b"Processed a total of 3 messages\n")
    # Ctrl-C committed the next offset to read of each partition.
    consumer = KafkaConsumer(bootstrap_servers=bs, group_id=group, enable_auto_commit=False)
    try:
        assert [consumer.committed(KTP(topic, p)) for p in (0, 1)] == [1, 2]
    finally:
        consumer.close()


def test_follow_survives_a_broker_restart(broker_factory):
    """While following, a lost broker is one warning and a retry, not an exit."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    broker = broker_factory({"listeners": f"PLAINTEXT://127.0.0.1:{port}"}, name="restart")
    bs, topic = broker.bootstrap, unique("restart")
    produce(bs, topic, [(0, None, b"before", None, TS0)])
    proc = subprocess.Popen([str(SCRIPT), "consume", "--bootstrap-server", bs, "--topic", topic,
                             "--from-beginning", "--consumer-property", "reconnect.backoff.max.ms=200",
                             "--consumer-property", "retry.backoff.max.ms=200"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    try:
        assert proc.stdout.readline() == b"before\n"
        broker.stop()
        warning = proc.stderr.readline().decode()
        assert warning.startswith(f"kafkalog consume: warning: cannot fetch from {bs} (")
        assert warning.endswith("); retrying\n")
        broker.start()
        produce(bs, topic, [(0, None, b"after", None, TS0)])
        assert proc.stdout.readline() == b"after\n"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (proc.returncode, out, err) == (130, b"", b"Processed a total of 2 messages\n")


def test_closed_stdout_ends_quietly(kafka_broker):
    bs, topic = kafka_broker.bootstrap, unique("head")
    produce(bs, topic, [(0, None, b"%06d " % i + b"x" * 200, None, TS0) for i in range(2000)])
    proc = subprocess.run(f"'{SCRIPT}' consume --bootstrap-server {bs} --topic {topic} "
                          "--from-beginning | head -n 2; echo \"status=${PIPESTATUS[0]}\"",
                          shell=True, executable="/bin/bash", capture_output=True, timeout=60,
                          cwd=ROOT)
    lines = proc.stdout.decode().splitlines()
    assert lines[:2] == ["000000 " + "x" * 200, "000001 " + "x" * 200]
    assert lines[2] == "status=141" and proc.stderr == b""


# --- read_committed over a log holding transactions ------------------------------------------

def test_read_committed_hides_aborted_transactions(broker_factory, capsysbinary):
    broker = broker_factory(name="txn")
    topic = unique("txn")
    create_topic(broker.bootstrap, topic)
    broker.stop()
    write_transactions(broker.log_dir, topic)
    broker.start()
    base = ["--bootstrap-server", broker.bootstrap, "--topic", topic, "--from-beginning",
            "--print-offset"]
    code, lines, _ = consume(capsysbinary, *base, "--isolation-level", "read_committed",
                             "--max-messages", "7")
    assert code == 0
    assert lines == ["Offset:0\ta", "Offset:1\tb", "Offset:2\tc", "Offset:3\td", "Offset:5\tf",
                     "Offset:7\tg", "Offset:13\tj"]
    code, lines, _ = consume(capsysbinary, *base, "--max-messages", "10")
    assert [x.split("\t")[1] for x in lines] == list("abcdefghij")
    # One batch per Fetch: markers and aborted data arrive in answers of their own, and
    # the position moves past them (the poller never stalls on a marker).
    with PartitionPoller({"bootstrap.servers": broker.bootstrap, "isolation.level": "read_committed",
                          "max.partition.fetch.bytes": 1}) as poller:
        poller.assign({(topic, 0): 4})
        got = []
        while poller.position((topic, 0)) < 14:
            got.extend(r.value for r in poller.poll(1000))
        assert got == [b"f", b"g", b"j"] and poller.position((topic, 0)) == 14


# --- the poller's contract ---------------------------------------------------------------------

def test_poller_positions_max_poll_records_seek_and_reset(kafka_broker):
    bs, topic = kafka_broker.bootstrap, unique("poller")
    produce(bs, topic, [(0, None, b"%d" % i, None, TS0 + i) for i in range(30)])
    tp = TopicPartition(topic, 0)
    with ConsumerNetworkClient({"bootstrap.servers": bs, "max.poll.records": 7}) as client:
        poller = PartitionPoller(client, auto_offset_reset="none")
        poller.assign({tp: EARLIEST})
        assert poller.position(tp) == 0
        seen = []
        while len(seen) < 30:
            batch = poller.poll(1000)
            assert len(batch) <= 7
            seen.extend(batch)
            assert poller.position(tp) == seen[-1].offset + 1  # the next one to return
        assert [r.offset for r in seen] == list(range(30)) and poller.high_watermark(tp) == 30
        assert all(r.timestamp_type == 0 and r.timestamp == TS0 + r.offset for r in seen)
        assert poller.poll(0) == []
        poller.seek(tp, 25)
        assert [r.value for r in poller.poll(1000)] == [b"%d" % i for i in range(25, 30)]
        poller.assign({tp: LATEST})
        assert poller.position(tp) == 30
        poller.seek(tp, 1000)  # out of range with auto.offset.reset=none
        with pytest.raises(OffsetOutOfRangeError, match="auto.offset.reset"):
            while True:
                poller.poll(1000)
        latest = PartitionPoller(client)  # auto.offset.reset=latest (the default)
        latest.assign({tp: 1000})
        assert latest.poll(500) == [] and latest.position(tp) == 30
        with pytest.raises(ValueError):
            poller.assign({tp: -5})
        poller.close()


# --- consumer groups --------------------------------------------------------------------------

def test_group_starts_from_committed_offsets_and_commits_what_was_printed(kafka_broker, capsysbinary):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    bs, topic, group = kafka_broker.bootstrap, unique("grp"), unique("group")
    create_topic(bs, topic, 2)
    produce(bs, topic, [(i % 2, None, b"v%d" % i, None, TS0) for i in range(10)])
    base = ["--bootstrap-server", bs, "--topic", topic, "--group", group]
    code, first, _ = consume(capsysbinary, *base, "--from-beginning", "--max-messages", "3")
    assert code == 0 and len(first) == 3
    code, second, _ = consume(capsysbinary, *base, "--from-beginning", "--max-messages", "4")
    code, third, err = consume(capsysbinary, *base, "--timeout-ms", "1000")
    assert err == "Processed a total of 3 messages\n"
    assert sorted(first + second + third) == sorted(f"v{i}" for i in range(10))  # each once
    code, rest, _ = consume(capsysbinary, *base, "--from-beginning", "--timeout-ms", "300")
    assert rest == []
    # kafka-python sees the committed offsets: the end of each partition.
    consumer = KafkaConsumer(bootstrap_servers=bs, group_id=group, enable_auto_commit=False)
    try:
        assert [consumer.committed(KTP(topic, p)) for p in (0, 1)] == [5, 5]
    finally:
        consumer.close()
    # A new group without offsets starts at latest (or earliest with --from-beginning), and
    # an explicit --offset wins over the committed one.
    code, lines, _ = consume(capsysbinary, "--bootstrap-server", bs, "--topic", topic,
                             "--group", unique("new"), "--timeout-ms", "300")
    assert lines == []
    code, lines, _ = consume(capsysbinary, *base, "--partition", "1", "--offset", "3",
                             "--max-messages", "2")
    assert lines == ["v7", "v9"]


# --- configuration and errors ---------------------------------------------------------------

def test_consumer_config_files(kafka_broker, capsysbinary, tmp_path):
    bs, topic = kafka_broker.bootstrap, unique("cconf")
    produce(bs, topic, [(0, b"k", b"v", None, TS0)])
    code, lines, _ = consume(capsysbinary, "--consumer.config", str(ROOT / "conf/consumer.properties"),
                             "--bootstrap-server", bs, "--topic", topic, "--from-beginning",
                             "--max-messages", "1")
    assert (code, lines) == (0, ["v"])
    conf = tmp_path / "c.properties"
    conf.write_text(f"bootstrap.servers={bs}\nauto.offset.reset=earliest\nfetch.max.wait.ms=50\n")
    code, lines, _ = consume(capsysbinary, "--consumer.config", str(conf), "--topic", topic,
                             "--max-messages", "1", "--print-key")
    assert (code, lines) == (0, ["k\tv"])
    conf.write_text(f"bootstrap.servers={bs}\nkey.deserializer=org.apache.kafka.Foo\n")
    code, lines, err = consume(capsysbinary, "--consumer.config", str(conf), "--topic", topic)
    assert code == 1 and one_line(err) == (
        "kafkalog consume: error: Invalid value 'org.apache.kafka.Foo' for configuration "
        f"key.deserializer: unknown consumer configuration (from --consumer.config {conf})")


def test_bad_options_are_one_line_errors(kafka_broker, capsysbinary):
    bs, topic = kafka_broker.bootstrap, unique("cbad")
    create_topic(bs, topic, 2)
    base = ["--bootstrap-server", bs, "--topic", topic, "--timeout-ms", "100"]
    cases = [
        (["--offset", "3"], "--offset needs --partition"),
        (["--partition", "0", "--offset", "3", "--from-beginning"],
         "--offset and --from-beginning cannot be given together"),
        (["--from-beginning", "--consumer-property", "auto.offset.reset=latest"],
         "--from-beginning contradicts auto.offset.reset=latest (from --consumer-property)"),
        (["--partition", "2"], f"--partition 2: topic {topic} has 2 partitions (0-1)"),
        (["--partition", "0", "--offset", "soon"], "is not an offset"),
        (["--partition", "0", "--offset", "-2"], "-2 is negative (use earliest or latest)"),
        (["--max-messages", "0"], "0 is not positive"),
        (["--isolation-level", "committed"], "invalid choice: 'committed'"),
        (["--property", "print.keys=true"], "unknown --property print.keys"),
        (["--property", "print.key=1"], "--property print.key=1: expected true or false"),
        (["--consumer-property", "fetch.max.wait.ms=-5"], "fetch.max.wait.ms"),
        (["--consumer-property", "security.protocol=BOGUS"], "security.protocol"),
        # TLS to a PLAINTEXT listener: the handshake fails at once, not after the timeout
        # (a later --timeout-ms wins: room for a loaded machine, the error comes first anyway)
        (["--consumer-property", "security.protocol=SSL", "--timeout-ms", "5000"], "SSL handshake"),
        (["--consumer.config", "/nonexistent.properties"],
         "--consumer.config /nonexistent.properties: no such file"),
    ]
    for extra, message in cases:
        code, lines, err = consume(capsysbinary, *base, *extra)
        text = one_line(err)
        assert code == 1 and lines == [], extra
        assert text.startswith("kafkalog consume: error: ") and message in text, (extra, text)
    code, lines, err = consume(capsysbinary, "--bootstrap-server", "127.0.0.1:9", "--topic", topic,
                               "--consumer-property", "default.api.timeout.ms=1000")
    # the cause at once, then the error after the wait
    assert code == 1 and err.splitlines() == [
        "kafkalog consume: no broker of 127.0.0.1:9 reachable yet (connection refused); retrying until "
        "default.api.timeout.ms (1000 ms)...",
        "kafkalog consume: error: no broker of 127.0.0.1:9 reachable (connection refused); waited 1000 ms "
        "(default.api.timeout.ms)"]


def test_group_members_share_the_partitions(broker_factory):
    """Two ``consume --group`` (no --partition) are members of one group, as Kafka's
    console consumers: each prints its own partitions, together every record once, and
    Ctrl-C commits what each printed."""
    import threading
    import time

    from broker.client.consumer.group_offsets import describe_groups, fetch_committed

    broker = broker_factory({"group.initial.rebalance.delay.ms": "0"})
    bs, topic, group = broker.bootstrap, unique("members"), unique("members-group")
    create_topic(bs, topic, 6)
    admin = {"bootstrap.servers": bs}
    procs, outputs, readers = [], [], []
    for _ in range(2):
        proc = subprocess.Popen([str(SCRIPT), "consume", "--bootstrap-server", bs, "--topic", topic,
                                 "--from-beginning", "--print-partition", "--group", group,
                                 "--consumer-property", "heartbeat.interval.ms=300"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
        lines: list[str] = []
        reader = threading.Thread(target=lambda p=proc, out=lines: out.extend(
            iter(lambda: p.stdout.readline().decode(), "")), daemon=True)
        reader.start()
        procs.append(proc)
        outputs.append(lines)
        readers.append(reader)
    try:
        def shared() -> bool:
            d = describe_groups(admin, [group])[group]
            owned = [m.assignment for m in d.members]
            return (d.state == "Stable" and len(owned) == 2 and all(owned)
                    and sorted(tp.partition for a in owned for tp in a) == list(range(6)))

        deadline = time.monotonic() + 90
        while not shared():
            assert time.monotonic() < deadline, "the two members never shared the topic"
            time.sleep(0.1)
        d = describe_groups(admin, [group])[group]
        expected = {frozenset(tp.partition for tp in m.assignment) for m in d.members}
        produce(bs, topic, [(i % 6, None, b"v%d" % i, None, TS0) for i in range(60)])
        while sum(map(len, outputs)) < 60:
            assert time.monotonic() < deadline, f"only {sum(map(len, outputs))} records printed"
            time.sleep(0.1)
        for proc in procs:
            proc.send_signal(signal.SIGINT)
        errs = [proc.communicate(timeout=60)[1] for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for r in readers:
        r.join(10)
    assert [p.returncode for p in procs] == [130, 130]
    assert sorted(errs) == sorted(f"Processed a total of {len(o)} messages\n".encode() for o in outputs)
    printed = [line.rstrip("\n").split("\t") for o in outputs for line in o]
    assert sorted(v for _, v in printed) == sorted(f"v{i}" for i in range(60))  # each once
    got = {frozenset(int(line.split("\t")[0].split(":")[1]) for line in o) for o in outputs}
    assert got == expected  # each printed exactly its own partitions
    committed = fetch_committed(admin, group, [TopicPartition(topic, p) for p in range(6)])
    assert list(committed.values()) == [10] * 6
