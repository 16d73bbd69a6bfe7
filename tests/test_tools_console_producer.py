"""Tests of ``kafkalog produce`` (broker/tools/console_producer.py, records_format.py's
LineParser) against the REAL broker (``kafka_broker``): the console script in a subprocess
for stdin, files, Ctrl-C and the round trip with ``kafkalog consume``; ``main(argv)``
in-process for the many option variants. What was produced is read back with
kafka-python and kcat (independent clients) and, for codecs, from the broker's segment
files (each batch's compression attribute); conf/producer.properties is loaded through
the command.
"""

from __future__ import annotations

import fcntl
import io
import re
import signal
import struct
import subprocess
import sys
import termios
import time
import uuid
from pathlib import Path

import pytest

from broker.record.batch import iter_batch_headers
from broker.tools import console_producer
from broker.tools.records_format import LineError, LineParser
from spark_kafkalog.cli.main import main

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path(sys.executable).parent / "kafkalog"
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def kafkalog(*args: str, input: bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *args], input=input, capture_output=True,
                          timeout=timeout, cwd=ROOT)


def stdin(monkeypatch, data: bytes) -> None:
    """Give an in-process command ``data`` on stdin."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    return lines[0]


def read_back(bootstrap: str, topic: str, partitions=(0,)) -> list:
    """Every record of the partitions, read with kafka-python (an independent client)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             client_id="kp-verify")
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        got = []
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            for records in consumer.poll(500).values():
                got.extend(records)
        return sorted(got, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()


def stored_codecs(broker, topic: str, partition: int = 0) -> list[int]:
    out = []
    for path in sorted((Path(broker.log_dir) / f"{topic}-{partition}").glob("*.log")):
        out.extend(h.compression for _, h in iter_batch_headers(path.read_bytes()))
    return out


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


# --- the line parser (Kafka's LineMessageReader rules) ------------------------------------

def test_line_parser_rules():
    plain = LineParser({})
    assert plain.parse(b"a\tb") == (None, b"a\tb", None)
    keyed = LineParser({"parse.key": "true", "key.separator": "::"})
    assert keyed.parse(b"k::v::w") == (b"k", b"v::w", None)  # the first separator splits
    assert keyed.parse(b"::v") == (b"", b"v", None)
    with pytest.raises(LineError, match="no key separator '::'"):
        keyed.parse(b"no separator")
    lenient = LineParser({"parse.key": "true", "ignore.error": "true"})
    assert lenient.parse(b"whole line") == (None, b"whole line", None)
    both = LineParser({"parse.key": "true", "parse.headers": "true", "null.marker": "NULL"})
    assert both.parse(b"h1:v1,h2:NULL,h3:\tNULL\tNULL") == (
        None, None, [("h1", b"v1"), ("h2", None), ("h3", b"")])
    assert both.parse(b"\tk\tv") == (b"k", b"v", None)  # an empty headers block: no headers
    with pytest.raises(LineError, match="no header key separator ':' in header 'h1'"):
        both.parse(b"h1\tk\tv")
    with pytest.raises(LineError, match="null marker"):
        both.parse(b"NULL:x\tk\tv")
    with pytest.raises(LineError, match="no headers delimiter"):
        both.parse(b"no delimiter")
    custom = LineParser({"parse.headers": "true", "headers.delimiter": "|",
                         "headers.separator": ";", "headers.key.separator": "="})
    assert custom.parse(b"a=1;b=2|v") == (None, b"v", [("a", b"1"), ("b", b"2")])


# --- stdin, keys and headers: produce, then consume with the print flags ----------------

def test_keys_and_headers_round_trip_through_consume(kafka_broker):
    bs, topic = kafka_broker.bootstrap, unique("rt")
    lines = ["k1\tvalue one", "k2\tvalue\twith tab", "\tempty key", "k4\t", "ключ\tзначение"]
    proc = kafkalog("produce", "--bootstrap-server", bs, "--topic", topic, "--key-separator",
                    "\\t", "--header", "app=cli", "--header", "run=1",
                    input=("\n".join(lines) + "\n").encode())
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")
    got = read_back(bs, topic)
    assert [(r.key, r.value, r.headers) for r in got] == [
        (b"k1", b"value one", [("app", b"cli"), ("run", b"1")]),
        (b"k2", b"value\twith tab", [("app", b"cli"), ("run", b"1")]),
        (b"", b"empty key", [("app", b"cli"), ("run", b"1")]),
        (b"k4", b"", [("app", b"cli"), ("run", b"1")]),
        ("ключ".encode(), "значение".encode(), [("app", b"cli"), ("run", b"1")]),
    ]
    proc = kafkalog("consume", "--bootstrap-server", bs, "--topic", topic, "--from-beginning",
                    "--max-messages", "5", "--print-timestamp", "--print-partition",
                    "--print-offset", "--print-headers", "--print-key")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.decode() == "Processed a total of 5 messages\n"
    expected = [f"CreateTime:{r.timestamp}\tPartition:0\tOffset:{r.offset}\tapp:cli,run:1\t"
                f"{r.key.decode()}\t{r.value.decode()}" for r in got]
    assert proc.stdout.decode().splitlines() == expected


@pytest.mark.kcat
def test_per_line_headers_null_marker_and_kcat_reads_them(kafka_broker, capsys, monkeypatch):
    bs, topic = kafka_broker.bootstrap, unique("hdr")
    stdin(monkeypatch, b"a:1,b:2\tk1\tv1\nc:NULL\tNULL\tv2\nNULL\tk3\tNULL\n")
    assert run(capsys, "produce", "--bootstrap-server", bs, "--topic", topic, "--parse-headers",
               "--key-separator", "\\t", "--property", "null.marker=NULL") == (0, "", "")
    got = read_back(bs, topic)
    assert [(r.key, r.value, r.headers) for r in got] == [
        (b"k1", b"v1", [("a", b"1"), ("b", b"2")]),
        (None, b"v2", [("c", None)]),
        (b"k3", None, []),
    ]
    kcat = subprocess.run(["kcat", "-b", bs, "-C", "-t", topic, "-e", "-Z", "-q",
                           "-f", "%k|%s|%h\n"], capture_output=True, timeout=60)
    assert kcat.returncode == 0, kcat.stderr
    assert kcat.stdout.decode().splitlines() == ["k1|v1|a=1,b=2", "NULL|v2|c=NULL", "k3|NULL|"]


# --- files, empty lines, line endings, no progress bar off a terminal ------------------------

def test_files_in_order_with_empty_lines_and_crlf(kafka_broker, tmp_path, capsysbinary):
    bs, topic = kafka_broker.bootstrap, unique("files")
    first = tmp_path / "first.txt"
    first.write_bytes(b"one\n\ntwo\r\nthree")  # an empty line, CRLF, no final newline
    second = tmp_path / "second.txt"
    second.write_bytes(b"\xff\xfebinary\n\n")
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    proc = kafkalog("produce", "--bootstrap-server", bs, "--topic", topic, "--file", str(first),
                    "--file", str(empty), "--file", str(second))
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")  # no bar, no summary
    got = read_back(bs, topic)
    assert [(r.key, r.value) for r in got] == [
        (None, b"one"), (None, b""), (None, b"two"), (None, b"three"),
        (None, b"\xff\xfebinary"), (None, b"")]
    # The consumer prints invalid UTF-8 as \xNN and empty values as empty lines.
    assert main(["consume", "--bootstrap-server", bs, "--topic", topic, "--from-beginning",
                 "--max-messages", "6"]) == 0
    captured = capsysbinary.readouterr()
    assert captured.out == b"one\n\ntwo\nthree\n\\xff\\xfebinary\n\n"
    assert captured.err == b"Processed a total of 6 messages\n"


def test_progress_bar_and_summary_on_a_terminal(kafka_broker, tmp_path, capsys, monkeypatch):
    """The bar shows only for big inputs with stderr on a terminal; stdout stays empty."""
    bs, topic = kafka_broker.bootstrap, unique("bar")
    path = tmp_path / "lines.txt"
    path.write_bytes(b"".join(b"line %d\n" % i for i in range(2000)))

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setattr(console_producer, "PROGRESS_THRESHOLD_BYTES", path.stat().st_size - 1)
    assert main(["produce", "--bootstrap-server", bs, "--topic", topic, "--file", str(path)]) == 0
    assert capsys.readouterr().out == ""
    shown = terminal.getvalue()
    assert "━" in shown and "kB" in shown  # the bar was drawn (then erased: transient)
    assert shown.endswith(
        f"kafkalog produce: sent 2000 records ({path.stat().st_size - 2000} bytes) to {topic}\n")
    assert len(read_back(bs, topic)) == 2000
    # Below the threshold (or off a terminal): nothing at all on stderr.
    terminal.truncate(0)
    terminal.seek(0)
    monkeypatch.setattr(console_producer, "PROGRESS_THRESHOLD_BYTES", path.stat().st_size)
    assert main(["produce", "--bootstrap-server", bs, "--topic", topic, "--file", str(path)]) == 0
    assert terminal.getvalue() == ""


# --- codecs, partitions, acks, config files -------------------------------------------------

@pytest.mark.parametrize("codec", list(CODECS))
def test_each_compression_codec_is_stored_as_sent(kafka_broker, tmp_path, capsys, codec):
    bs, topic = kafka_broker.bootstrap, unique(f"codec-{codec}")
    path = tmp_path / "in.txt"
    values = [f"{codec} record {i} ".encode() + b"abcdefgh" * 8 for i in range(200)]
    path.write_bytes(b"\n".join(values) + b"\n")
    code, out, err = run(capsys, "produce", "--bootstrap-server", bs, "--topic", topic,
                         "--file", str(path), "--compression", codec,
                         "--producer-property", "linger.ms=50")
    assert (code, out, err) == (0, "", "")
    assert [r.value for r in read_back(bs, topic)] == values
    codecs = stored_codecs(kafka_broker, topic)
    assert codecs and set(codecs) == {CODECS[codec]}


def test_partition_acks_and_sync(kafka_broker, tmp_path, capsys):
    bs, topic = kafka_broker.bootstrap, unique("part")
    create_topic(bs, topic, 3)
    path = tmp_path / "in.txt"
    path.write_bytes(b"a\nb\nc\n")
    for acks in ("1", "0", "all"):
        code, _, err = run(capsys, "produce", "--bootstrap-server", bs, "--topic", topic,
                           "--file", str(path), "--partition", "2", "--acks", acks, "--sync")
        assert (code, err) == (0, "")
    got = read_back(bs, topic, partitions=(0, 1, 2))
    assert [(r.partition, r.value) for r in got] == [(2, v) for v in [b"a", b"b", b"c"] * 3]
    # Keyed records without --partition follow murmur2 of the key, as Kafka's partitioner.
    from broker.client.producer.murmur2 import partition_for_key
    topic2 = unique("keyed")
    create_topic(bs, topic2, 3)
    keys = [f"key-{i}".encode() for i in range(12)]
    path.write_bytes(b"".join(k + b"=x\n" for k in keys))
    code, _, _ = run(capsys, "produce", "--bootstrap-server", bs, "--topic", topic2,
                     "--file", str(path), "--key-separator", "=")
    assert code == 0
    got = read_back(bs, topic2, partitions=(0, 1, 2))
    assert sorted((r.key, r.partition) for r in got) == sorted(
        (k, partition_for_key(k, 3)) for k in keys)


def test_producer_config_file_and_precedence(kafka_broker, tmp_path, capsys):
    bs = kafka_broker.bootstrap
    path = tmp_path / "in.txt"
    path.write_bytes(b"x" * 100 + b"\n" + b"y" * 100 + b"\n")
    # The shipped example: its bootstrap.servers (localhost:9092) is overridden by the option.
    topic = unique("conf")
    code, _, err = run(capsys, "produce", "--producer.config", str(ROOT / "conf/producer.properties"),
                       "--bootstrap-server", bs, "--topic", topic, "--file", str(path))
    assert (code, err) == (0, "")
    assert stored_codecs(kafka_broker, topic) == [0]  # compression.type=none in the example
    # file < --producer-property < --compression
    conf = tmp_path / "p.properties"
    conf.write_text(f"# a comment\nbootstrap.servers={bs}\ncompression.type=gzip\nlinger.ms=20\n")
    topic = unique("conf-file")
    assert run(capsys, "produce", "--producer.config", str(conf), "--topic", topic,
               "--file", str(path))[0] == 0
    assert set(stored_codecs(kafka_broker, topic)) == {CODECS["gzip"]}
    topic = unique("conf-prop")
    assert run(capsys, "produce", "--producer.config", str(conf), "--topic", topic, "--file",
               str(path), "--producer-property", "compression.type=zstd")[0] == 0
    assert set(stored_codecs(kafka_broker, topic)) == {CODECS["zstd"]}
    topic = unique("conf-opt")
    assert run(capsys, "produce", "--producer.config", str(conf), "--topic", topic, "--file",
               str(path), "--producer-property", "compression.type=zstd", "--compression",
               "lz4")[0] == 0
    assert set(stored_codecs(kafka_broker, topic)) == {CODECS["lz4"]}
    # Every key of the example files is a real key, documented with its real default.
    from broker.client.consumer.config import CONSUMER_CONFIG_DEF
    from broker.client.producer.config import PRODUCER_CONFIG_DEF
    for name, definition in (("producer", PRODUCER_CONFIG_DEF), ("consumer", CONSUMER_CONFIG_DEF)):
        listed = {}
        for line in (ROOT / f"conf/{name}.properties").read_text().splitlines():
            m = re.match(r"^#?([a-z][a-z0-9.]+)=(.*)$", line.strip())
            if m:
                listed[m.group(1)] = m.group(2)
        assert set(listed) <= set(definition.keys), name
        settable = {k for k, key in definition.keys.items() if key.type != "callable"}
        assert settable <= set(listed), (name, settable - set(listed))
        for key, value in listed.items():
            default = definition.keys[key].default
            if key in ("bootstrap.servers", "group.id"):
                continue  # set to an example
            shown = ("" if default is None else ",".join(default) if isinstance(default, list)
                     else str(default)).lower()
            assert value.lower() == shown, (name, key, value, default)


def test_auto_created_topic_gets_the_records(kafka_broker, capsys, tmp_path):
    bs, topic = kafka_broker.bootstrap, unique("auto")
    path = tmp_path / "in.txt"
    path.write_bytes(b"first\n")
    assert run(capsys, "produce", "--bootstrap-server", bs, "--topic", topic, "--file",
               str(path)) == (0, "", "")
    assert [r.value for r in read_back(bs, topic)] == [b"first"]


# --- bad input: exit 1, one line, nothing half-sent --------------------------------------------

def test_line_without_key_separator_stops_after_sending_the_lines_before(
        kafka_broker, capsys, monkeypatch, tmp_path):
    bs, topic = kafka_broker.bootstrap, unique("nosep")
    stdin(monkeypatch, b"k1:v1\nk2:v2\nno separator here\nk4:v4\n")
    code, out, err = run(capsys, "produce", "--bootstrap-server", bs, "--topic", topic,
                         "--key-separator", ":")
    assert code == 1 and out == ""
    assert one_line(err) == (
        "kafkalog produce: error: stdin line 3: no key separator ':' (nothing after it was "
        "sent; the 2 records before it were)")
    assert [(r.key, r.value) for r in read_back(bs, topic)] == [(b"k1", b"v1"), (b"k2", b"v2")]
    # In a file, the file is named; in the second file, lines count from 1 again.
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_bytes(b"k:v\n")
    second.write_bytes(b"k:v\nbad\n")
    code, _, err = run(capsys, "produce", "--bootstrap-server", bs, "--topic", topic,
                       "--key-separator", ":", "--file", str(first), "--file", str(second))
    assert code == 1 and one_line(err) == (
        f"kafkalog produce: error: {second} line 2: no key separator ':' (nothing after it "
        "was sent; the 2 records before it were)")
    # Kafka's ignore.error=true: such a line goes with a null key.
    topic = unique("ignore")
    stdin(monkeypatch, b"k1:v1\nno separator\n")
    assert run(capsys, "produce", "--bootstrap-server", bs, "--topic", topic, "--key-separator",
               ":", "--property", "ignore.error=true")[0] == 0
    assert [(r.key, r.value) for r in read_back(bs, topic)] == [(b"k1", b"v1"),
                                                                (None, b"no separator")]


def test_bad_options_are_one_line_errors(kafka_broker, tmp_path, capsys):
    bs = kafka_broker.bootstrap
    topic = unique("bad")
    create_topic(bs, topic, 2)
    path = tmp_path / "in.txt"
    path.write_bytes(b"x\n")
    base = ["produce", "--bootstrap-server", bs, "--topic", topic, "--file", str(path)]
    cases = [
        (["--acks", "2"], "argument --acks/--request-required-acks: invalid choice: '2'"),
        (["--compression", "brotli"], "invalid choice: 'brotli'"),
        (["--partition", "-1"], "argument --partition: -1 is negative"),
        (["--partition", "2"], f"--partition 2: topic {topic} has 2 partitions (0-1)"),
        (["--producer-property", "lingerms=5"],
         "Invalid value '5' for configuration lingerms: unknown producer configuration "
         "(from --producer-property)"),
        (["--producer-property", "linger.ms=soon"], "linger.ms"),
        (["--producer-property", "novalue"], "--producer-property 'novalue' is not of the form KEY=VALUE"),
        (["--property", "parse.kee=true"], "unknown --property parse.kee"),
        (["--property", "parse.key=yes"], "--property parse.key=yes: expected true or false"),
        (["--key-separator", ""], "key.separator must not be empty"),
        (["--header", "=v"], "--header '=v' is not of the form KEY=VALUE"),
        (["--file", str(tmp_path / "missing.txt")], f"--file {tmp_path / 'missing.txt'}: no such file"),
        (["--file", str(tmp_path)], f"--file {tmp_path}: is a directory"),
        (["--producer.config", str(tmp_path / "none.properties")], "no such file"),
        (["--producer-property", "transactional.id=t"], "transactions are not supported"),
        (["--producer-property", "enable.idempotence=true", "--acks", "1"],
         "must be all (-1) to use the idempotent producer"),
    ]
    for extra, message in cases:
        code, out, err = run(capsys, *base, *extra)
        line = one_line(err)
        assert code == 1 and out == "", extra
        assert line.startswith("kafkalog produce: error: ") and message in line, (extra, line)
    assert read_back(bs, topic, partitions=(0, 1)) == []  # none of them sent anything


def test_unreachable_broker_and_unknown_topic(broker_factory, capsys, tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"x\n")
    # A port nobody listens on: the cause at once, then the error after max.block.ms.
    code, out, err = run(capsys, "produce", "--bootstrap-server", "127.0.0.1:9", "--topic", "t",
                         "--file", str(path), "--producer-property", "max.block.ms=1500")
    assert code == 1 and out == ""
    assert err.splitlines() == [
        "kafkalog produce: no broker of 127.0.0.1:9 reachable yet (connection refused); retrying until "
        "max.block.ms (1500 ms)...",
        "kafkalog produce: error: no broker of 127.0.0.1:9 reachable (connection refused); waited 1500 ms "
        "(max.block.ms)"]
    # A broker that does not create topics on use.
    broker = broker_factory({"auto.create.topics.enable": "false"}, name="noauto")
    code, out, err = run(capsys, "produce", "--bootstrap-server", broker.bootstrap,
                         "--topic", "missing", "--file", str(path))
    assert code == 1 and out == ""
    assert one_line(err) == (
        f"kafkalog produce: error: topic missing does not exist on {broker.bootstrap}, and the "
        "broker does not create topics on use (auto.create.topics.enable=false); create it first")
    code, _, err = run(capsys, "produce", "--bootstrap-server", broker.bootstrap,
                       "--topic", "bad/name", "--file", str(path))
    assert code == 1 and "INVALID_TOPIC_EXCEPTION" in one_line(err)
    # The same broker serves the consume side's unknown-topic error.
    code, out, err = run(capsys, "consume", "--bootstrap-server", broker.bootstrap,
                         "--topic", "missing", "--timeout-ms", "100")
    assert code == 1 and out == ""
    assert one_line(err) == (f"kafkalog consume: error: topic missing does not exist on "
                             f"{broker.bootstrap}")


def test_undeliverable_record_is_reported(kafka_broker, tmp_path, capsys):
    """A record larger than max.request.size fails at once: exit 1 with the count."""
    bs, topic = kafka_broker.bootstrap, unique("toolarge")
    path = tmp_path / "in.txt"
    path.write_bytes(b"small\n" + b"x" * 5000 + b"\nnever read\n")
    code, out, err = run(capsys, "produce", "--bootstrap-server", bs, "--topic", topic,
                         "--file", str(path), "--producer-property", "max.request.size=2000")
    assert code == 1 and out == ""
    line = one_line(err)
    assert line.startswith(f"kafkalog produce: error: 1 of 2 records were not delivered to "
                           f"{topic}: ") and "max.request.size" in line
    assert [r.value for r in read_back(bs, topic)] == [b"small"]


# --- Ctrl-C: what was read is delivered ---------------------------------------------------

def _waiting_on_stdin(proc: subprocess.Popen) -> bool:
    """The child read everything we wrote and sleeps in read() on its stdin again."""
    pending = fcntl.ioctl(proc.stdin.fileno(), termios.FIONREAD, struct.pack("i", 0))
    if struct.unpack("i", pending)[0]:
        return False
    wchan = Path(f"/proc/{proc.pid}/wchan").read_text()
    return "pipe_read" in wchan or "pipe_wait" in wchan


def test_ctrl_c_delivers_every_line_read_and_exits_130(kafka_broker):
    bs, topic = kafka_broker.bootstrap, unique("sigint")
    # A long linger keeps the records in the producer's buffer until close() sends them.
    proc = subprocess.Popen([str(SCRIPT), "produce", "--bootstrap-server", bs, "--topic", topic,
                             "--producer-property", "linger.ms=60000"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        proc.stdin.write(b"one\ntwo\nthree\n")
        proc.stdin.flush()
        deadline = time.monotonic() + 60
        while not _waiting_on_stdin(proc):
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, "the producer never read its input"
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (proc.returncode, out, err) == (130, b"", b"")
    assert [r.value for r in read_back(bs, topic)] == [b"one", b"two", b"three"]


# --- interop: what other clients produced, read by our consumer ---------------------------------

@pytest.mark.kcat
def test_kcat_produces_and_our_consumer_reads(kafka_broker):
    bs, topic = kafka_broker.bootstrap, unique("kcat")
    lines = [f"key{i}:value {i}" for i in range(20)]
    kcat = subprocess.run(["kcat", "-b", bs, "-P", "-t", topic, "-K", ":", "-z", "gzip",
                           "-H", "src=kcat"], input=("\n".join(lines) + "\n").encode(),
                          capture_output=True, timeout=60)
    assert kcat.returncode == 0, kcat.stderr
    proc = kafkalog("consume", "--bootstrap-server", bs, "--topic", topic, "--from-beginning",
                    "--max-messages", "20", "--print-key", "--print-headers", "--property",
                    "key.separator=|")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode().splitlines() == [
        f"src:kcat|key{i}|value {i}" for i in range(20)]
    assert proc.stderr.decode() == "Processed a total of 20 messages\n"
