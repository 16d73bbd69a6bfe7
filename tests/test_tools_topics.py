"""``kafkalog topics`` (broker/tools/topics.py): the real console script in a
subprocess against the REAL broker: each action (--create, --list, --describe, --alter,
--delete) with kafka-topics.sh's output format, --if-exists / --if-not-exists, --topic as
a regular expression, --command-config, both spellings of --bootstrap-server, one-line
errors with exit status 1 (broker errors with their Kafka names, a missing topic, an
unreachable broker naming its address), and usage errors (in-process through ``main``).
"""

from __future__ import annotations

import base64
import json
import re
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from broker.server.metadata import REGISTRY_FILE
from spark_kafkalog.cli.main import main

pytestmark = pytest.mark.timeout(120)

SCRIPT = Path(sys.executable).parent / "kafkalog"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class Result:
    def __init__(self, proc: subprocess.CompletedProcess) -> None:
        self.code = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr

    @property
    def error_line(self) -> str:
        lines = self.err.splitlines()
        assert len(lines) == 1, self.err
        return lines[0]


def topics(*args: str, bootstrap: str | None = None) -> Result:
    cmd = [str(SCRIPT), "topics", *args]
    if bootstrap is not None:
        cmd += ["--bootstrap-server", bootstrap]
    return Result(subprocess.run(cmd, capture_output=True, text=True, timeout=90))


@pytest.fixture
def kt(kafka_broker):
    return lambda *args: topics(*args, bootstrap=kafka_broker.bootstrap)


def partition_lines(topic: str, n: int) -> list[str]:
    return [f"\tTopic: {topic}\tPartition: {p}\tLeader: 1\tReplicas: 1\tIsr: 1" for p in range(n)]


def check_header(line: str, broker, topic: str, partitions: int, configs: str) -> None:
    m = re.fullmatch(rf"Topic: {re.escape(topic)}(?:\tTopicId: (\S+))?\tPartitionCount: {partitions}"
                     rf"\tReplicationFactor: 1\tConfigs: {re.escape(configs)}", line)
    assert m, line
    if m.group(1) is not None:  # only when the broker sends ids (Metadata v10+)
        registry = json.loads((broker.log_dir / REGISTRY_FILE).read_text())
        tid = registry["topics"][topic]["topic_id"]
        assert m.group(1) == tid.rstrip("=") or base64.urlsafe_b64decode(tid + "==") == \
            base64.urlsafe_b64decode(m.group(1) + "==")


# --- the actions ---

def test_create_list_describe_alter_delete(kafka_broker, kt):
    topic = unique("cli")
    r = kt("--create", "--topic", topic, "--partitions", "3", "--replication-factor", "1",
           "--config", "retention.ms=3600000", "--config", "flush.messages=100")
    assert (r.code, r.out, r.err) == (0, f"Created topic {topic}.\n", "")
    r = kt("--list")
    assert r.code == 0 and topic in r.out.splitlines() and r.out.splitlines() == sorted(r.out.splitlines())

    r = kt("--describe", "--topic", topic)
    assert r.code == 0 and r.err == ""
    lines = r.out.splitlines()
    check_header(lines[0], kafka_broker, topic, 3, "flush.messages=100,retention.ms=3600000")
    assert lines[1:] == partition_lines(topic, 3)

    r = kt("--alter", "--topic", topic, "--partitions", "5", "--config", "segment.bytes=2000000",
           "--delete-config", "retention.ms", "--delete-config", "flush.messages")
    assert (r.code, r.out, r.err) == (0, f"Completed updating config for topic {topic}.\n", "")
    lines = kt("--describe", "--topic", topic).out.splitlines()
    # retention.ms=-1 comes from the test broker's server settings: not a Kafka default, so shown
    check_header(lines[0], kafka_broker, topic, 5, "segment.bytes=2000000,retention.ms=-1")
    assert lines[1:] == partition_lines(topic, 5)

    r = kt("--delete", "--topic", topic)
    assert (r.code, r.out, r.err) == (0, "", "")
    assert topic not in kt("--list").out.splitlines()


def test_describe_all_list_regex_and_bootstrap_servers_spelling(kafka_broker):
    tag = uuid.uuid4().hex[:8]
    a, b, other = f"rx-{tag}-a", f"rx-{tag}-b", f"rx-{tag}-c"
    for name, parts in ((a, 1), (b, 2), (other, 1)):
        assert topics("--create", "--topic", name, "--partitions", str(parts),
                      "--bootstrap-servers", kafka_broker.bootstrap).code == 0
    r = topics("--list", "--topic", f"rx-{tag}-[ab]", "--exclude-internal", bootstrap=kafka_broker.bootstrap)
    assert (r.code, r.out.splitlines()) == (0, [a, b])
    r = topics("--list", "--topic", f"{a},{other}", bootstrap=kafka_broker.bootstrap)  # ',' separates
    assert r.out.splitlines() == [a, other]
    assert topics("--list", "--topic", "no-such-.*", bootstrap=kafka_broker.bootstrap).out == ""

    r = topics("--describe", bootstrap=kafka_broker.bootstrap)  # every topic
    assert r.code == 0
    heads = [line for line in r.out.splitlines() if line.startswith("Topic: ")]
    assert len(heads) == len(topics("--list", bootstrap=kafka_broker.bootstrap).out.splitlines())
    block = r.out.split(f"Topic: {b}\t", 1)[1].splitlines()
    assert block[1:3] == partition_lines(b, 2)
    r = topics("--delete", "--topic", f"rx-{tag}-.*", bootstrap=kafka_broker.bootstrap)  # a regex deletes all
    assert r.code == 0
    assert not [n for n in topics("--list", bootstrap=kafka_broker.bootstrap).out.splitlines() if tag in n]


# --- broker errors: one line, exit 1 ---

def test_create_errors_and_if_not_exists(kt):
    topic = unique("cli-err")
    assert kt("--create", "--topic", topic).code == 0
    r = kt("--create", "--topic", topic)
    assert (r.code, r.out) == (1, "")
    assert r.error_line == f"kafkalog topics: error: TOPIC_ALREADY_EXISTS: Topic '{topic}' already exists."
    r = kt("--create", "--topic", topic, "--if-not-exists")
    assert (r.code, r.out, r.err) == (0, "", "")

    r = kt("--create", "--topic", unique("cli-cfg"), "--config", "retention.ms=soon")
    assert r.code == 1
    assert r.error_line.startswith("kafkalog topics: error: INVALID_CONFIG: ") and "retention.ms" in r.error_line
    r = kt("--create", "--topic", unique("cli-rf"), "--replication-factor", "3")
    assert r.code == 1 and "INVALID_REPLICATION_FACTOR" in r.error_line
    r = kt("--create", "--topic", "bad/name")
    assert r.code == 1 and "INVALID_TOPIC_EXCEPTION" in r.error_line

    dotted = f"cli.dot_{uuid.uuid4().hex[:6]}"
    r = kt("--create", "--topic", dotted)
    assert r.code == 0 and r.out == f"Created topic {dotted}.\n"
    assert r.error_line.startswith("kafkalog topics: warning: due to limitations in metric names")


def test_missing_topics_and_if_exists(kt):
    ghost = unique("cli-ghost")
    for action in (["--describe"], ["--delete"], ["--alter", "--partitions", "2"]):
        r = kt(*action, "--topic", ghost)
        assert (r.code, r.out) == (1, ""), action
        assert r.error_line == f"kafkalog topics: error: Topic '{ghost}' does not exist as expected"
        r = kt(*action, "--topic", ghost, "--if-exists")
        assert (r.code, r.out, r.err) == (0, "", ""), action


def test_alter_is_validated_before_anything_changes(kafka_broker, kt):
    topic = unique("cli-alter")
    assert kt("--create", "--topic", topic, "--partitions", "2").code == 0
    r = kt("--alter", "--topic", topic, "--partitions", "4", "--config", "cleanup.policy=shred")
    assert r.code == 1
    assert r.error_line.startswith("kafkalog topics: error: INVALID_CONFIG: ") and "cleanup.policy" in r.error_line
    r = kt("--alter", "--topic", topic, "--partitions", "1")
    assert r.code == 1
    assert r.error_line == ("kafkalog topics: error: INVALID_PARTITIONS: Topic currently has 2 partitions, "
                            "which is higher than the requested 1.")
    lines = kt("--describe", "--topic", topic).out.splitlines()
    check_header(lines[0], kafka_broker, topic, 2, "retention.ms=-1")  # nothing changed
    r = kt("--alter", "--topic", topic, "--partitions", "3")
    assert (r.code, r.out, r.err) == (0, "", "")
    assert len(kt("--describe", "--topic", topic).out.splitlines()) == 1 + 3


def test_unreachable_broker_and_command_config(tmp_path, kafka_broker):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    props = tmp_path / "admin.properties"
    props.write_text("# client settings\ndefault.api.timeout.ms=1000\nclient.id=cli-test\n")
    r = topics("--list", "--command-config", str(props), bootstrap=f"127.0.0.1:{port}")
    assert (r.code, r.out) == (1, "")
    assert r.err.splitlines() == [  # the cause at once, then the error after the wait
        f"kafkalog topics: no broker of 127.0.0.1:{port} reachable yet (connection refused); retrying until "
        "default.api.timeout.ms (1000 ms)...",
        f"kafkalog topics: error: no broker of 127.0.0.1:{port} reachable (connection refused); waited 1000 ms "
        "(default.api.timeout.ms)"]
    # bootstrap.servers may come from the file; its client.id is used
    props.write_text(f"bootstrap.servers={kafka_broker.bootstrap}\nclient.id=cli-props\n")
    assert topics("--list", "--command-config", str(props)).code == 0
    assert "METADATA" in kafka_broker.api_versions_used("cli-props")

    props.write_text("no.such.setting=1\n")
    r = topics("--list", "--command-config", str(props), bootstrap=kafka_broker.bootstrap)
    assert r.code == 1 and "no.such.setting" in r.error_line
    r = topics("--list", "--command-config", str(tmp_path / "missing.properties"), bootstrap=kafka_broker.bootstrap)
    assert r.code == 1 and r.error_line.endswith("missing.properties: No such file or directory")


# --- usage (in-process: the dispatcher's one-line errors) ---

@pytest.mark.parametrize("argv, message", [
    ([], "one of the arguments --create --list --describe --alter --delete is required"),
    (["--list", "--delete"], "argument --delete: not allowed with argument --list"),
    (["--create"], "--topic is required with --create"),
    (["--delete"], "--topic is required with --delete"),
    (["--list", "--partitions", "3"], "--partitions can only be used with --create or --alter"),
    (["--alter", "--topic", "t", "--replication-factor", "2"], "--replication-factor can only be used with --create"),
    (["--create", "--topic", "t", "--delete-config", "x"], "--delete-config can only be used with --alter"),
    (["--describe", "--if-not-exists"], "--if-not-exists can only be used with --create"),
    (["--create", "--topic", "t", "--if-exists"], "--if-exists can only be used with --alter or --delete or "
                                                 "--describe"),
    (["--create", "--topic", "t", "--config", "retention.ms"], "--config 'retention.ms' is not of the form KEY=VALUE"),
    (["--create", "--topic", "t", "--partitions", "0"], "--partitions must be at least 1, not 0"),
    (["--create", "--topic", "t", "--partitions", "x"], "argument --partitions: invalid int value: 'x'"),
    (["--alter", "--topic", "t"], "--alter needs --partitions, --config or --delete-config"),
    (["--describe", "--topic", "("], "--topic '(' is not a valid regular expression"),
])
def test_usage_errors_are_one_line(capsys, argv, message):
    code = main(["topics", *argv])
    captured = capsys.readouterr()
    assert (code, captured.out) == (1, "")
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kafkalog topics: error: ")
    assert message in lines[0]


def test_help(capsys):
    assert main(["topics", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: kafkalog topics ") and "kafka-topics.sh" in out
    for option in ("--bootstrap-server", "--command-config", "--delete-config", "--if-not-exists"):
        assert option in out
    assert main(["--help"]) == 0
    assert "    topics " in capsys.readouterr().out
