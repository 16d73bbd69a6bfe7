"""Tests of broker/tools/consumer_groups.py: ``kafkalog groups --list | --describe |
--delete`` against the real broker (the console script in a subprocess, and ``main(argv)``):
kafka-consumer-groups.sh's table with committed offsets, log end offsets and lag, "-" for
what is unknown, deletion, and one-line errors with exit status 1 (usage, a group that does
not exist, an unreachable broker, a broker without consumer-group support)."""

from __future__ import annotations

import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from broker.client.consumer import commit_offsets
from broker.protocol import ApiKey
from broker.record.batch import encode_batch
from spark_kafkalog.cli.main import main
from tests.support.broker import RawClient

pytestmark = pytest.mark.timeout(120)

HEADER = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
          "CLIENT-ID"]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    return lines[0]


def topic_with_records(broker, partitions: dict[int, int]) -> str:
    """A new topic with ``count`` records in each ``partition``."""
    topic = unique("cli-groups")
    with RawClient(broker.host, broker.port) as c:
        r = c.request(ApiKey.CREATE_TOPICS, 4, {"topics": [
            {"name": topic, "num_partitions": max(partitions) + 1, "replication_factor": 1, "assignments": [],
             "configs": []}], "timeout_ms": 1000})
        assert r.topics[0].error_code == 0
        for p, count in partitions.items():
            batch = encode_batch([(None, b"v", 1_700_000_000_000)] * count)
            r = c.request(ApiKey.PRODUCE, 8, {"transactional_id": None, "acks": -1, "timeout_ms": 1000,
                                              "topic_data": [{"name": topic, "partition_data": [
                                                  {"index": p, "records": batch}]}]})
            assert r.responses[0].partition_responses[0].error_code == 0
    return topic


def table(out: str) -> list[list[str]]:
    lines = out.splitlines()
    assert lines[0] == ""  # a blank line before each table, as kafka-consumer-groups.sh prints
    assert lines[1].split() == HEADER
    return [line.split() for line in lines[2:]]


def kafkalog_script() -> Path:
    script = Path(sys.executable).parent / "kafkalog"
    if not script.exists():
        pytest.skip("the kafkalog console script is not installed (pip install -e .)")
    return script


def test_list_describe_and_delete(kafka_broker, capsys):
    topic = topic_with_records(kafka_broker, {0: 10, 1: 5})
    group = unique("cli-g")
    commit_offsets({"bootstrap.servers": kafka_broker.bootstrap}, group, {(topic, 0): 4, (topic, 1): 5})
    code, out, err = run(capsys, "groups", "--bootstrap-server", kafka_broker.bootstrap, "--list")
    assert (code, err) == (0, "")
    assert group in out.splitlines() and out.splitlines() == sorted(out.splitlines())
    # the describe through the console script, in a subprocess
    described = subprocess.run([str(kafkalog_script()), "groups", "--bootstrap-servers", kafka_broker.bootstrap,
                                "--describe", "--group", group], capture_output=True, text=True, timeout=60)
    assert described.returncode == 0
    assert described.stderr == f"Consumer group '{group}' has no active members.\n"
    assert table(described.stdout) == [[group, topic, "0", "4", "10", "6", "-", "-", "-"],
                                       [group, topic, "1", "5", "5", "0", "-", "-", "-"]]
    code, out, err = run(capsys, "groups", "--bootstrap-server", kafka_broker.bootstrap, "--delete", "--group", group)
    assert (code, err) == (0, "")
    assert out == f"Deletion of requested consumer groups ('{group}') was successful.\n"
    code, out, err = run(capsys, "groups", "--bootstrap-server", kafka_broker.bootstrap, "--describe", "--group", group)
    assert (code, out) == (1, "")
    assert err == f"kafkalog groups: error: Consumer group '{group}' does not exist.\n"


def test_describe_all_groups_and_unknown_log_ends(kafka_broker, capsys):
    topic = topic_with_records(kafka_broker, {0: 3})
    doomed = topic_with_records(kafka_broker, {0: 2})
    a, b = unique("cli-a"), unique("cli-b" + "x" * 20)  # a long id widens the GROUP column
    cfg = {"bootstrap.servers": kafka_broker.bootstrap}
    commit_offsets(cfg, a, {(topic, 0): 1})
    commit_offsets(cfg, b, {(doomed, 0): 2, (topic, 0): 3})
    with RawClient(kafka_broker.host, kafka_broker.port) as c:
        r = c.request(ApiKey.DELETE_TOPICS, 3, {"topic_names": [doomed], "timeout_ms": 1000})
        assert r.responses[0].error_code == 0
    code, out, err = run(capsys, "groups", "--bootstrap-server", kafka_broker.bootstrap, "--describe",
                         "--group", b)
    assert code == 0, err
    rows = table(out)
    assert sorted(rows) == sorted([[b, doomed, "0", "2", "-", "-", "-", "-", "-"],
                                   [b, topic, "0", "3", "3", "0", "-", "-", "-"]])
    header_line = out.splitlines()[1]
    assert header_line.index("TOPIC") == len(b) + 1  # the GROUP column is as wide as the longest id
    code, out, err = run(capsys, "groups", "--bootstrap-server", kafka_broker.bootstrap, "--describe",
                         "--all-groups")
    assert code == 0, err
    lines = out.splitlines()
    headers = [i for i, line in enumerate(lines) if line.split() == HEADER]
    assert len(headers) >= 2 and all(lines[i - 1] == "" for i in headers)  # a blank line, a header per group
    rows = [line.split() for line in lines if line and line.split() != HEADER]
    assert [a, topic, "0", "1", "3", "2", "-", "-", "-"] in rows
    assert [b, topic, "0", "3", "3", "0", "-", "-", "-"] in rows
    assert f"Consumer group '{a}' has no active members." in err.splitlines()


@pytest.mark.parametrize("argv, message", [
    (["--list", "--describe"], "argument --describe: not allowed with argument --list"),
    (["--describe"], "--describe needs exactly one of --group or --all-groups"),
    (["--describe", "--group", "g", "--all-groups"], "--describe needs exactly one of --group or --all-groups"),
    (["--delete"], "--delete needs --group"),
    (["--delete", "--all-groups"], "--all-groups can only be used with --describe"),
    (["--list", "--group", "g"], "--list takes no --group or --all-groups"),
    (["--delete", "--group", ""], "--group must not be empty"),
    ([], "one of the arguments --list --describe --delete --reset-offsets --delete-offsets is required"),
])
def test_usage_errors_are_one_line(capsys, argv, message):
    code, out, err = run(capsys, "groups", *argv)
    assert code == 1 and out == ""
    assert message in one_line(err) and one_line(err).startswith("kafkalog groups: error: ")


def test_delete_failure_and_unreachable_broker(kafka_broker, capsys, tmp_path):
    ghost = unique("ghost")
    code, out, err = run(capsys, "groups", "--bootstrap-server", kafka_broker.bootstrap, "--delete", "--group", ghost)
    assert code == 1 and out == ""
    line = one_line(err)
    assert line.startswith("kafkalog groups: error: Deletion of some consumer groups failed: ")
    assert "GROUP_ID_NOT_FOUND" in line and ghost in line
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    props = tmp_path / "client.properties"
    props.write_text(f"bootstrap.servers=127.0.0.1:{port}\ndefault.api.timeout.ms=1500\nretries=3\n")
    code, out, err = run(capsys, "groups", "--command-config", str(props), "--list")
    assert code == 1 and out == ""
    lines = err.splitlines()
    assert lines[0] == f"kafkalog groups: warning: {props}: retries is not a client setting used here; ignored"
    assert lines[1:] == [
        f"kafkalog groups: no broker of 127.0.0.1:{port} reachable yet (connection refused); retrying until "
        "default.api.timeout.ms (1500 ms)...",
        f"kafkalog groups: error: no broker of 127.0.0.1:{port} reachable (connection refused); waited 1500 ms "
        "(default.api.timeout.ms)"]


def test_broker_without_group_support(tmp_path, capsys):
    from broker.server import KafkaBroker

    broker = KafkaBroker({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "logs")})
    broker.start()
    try:
        state = broker.apis.state
        state.api_versions = tuple(a for a in state.api_versions if a[0] != ApiKey.LIST_GROUPS)
        code, out, err = run(capsys, "groups", "--bootstrap-server", broker.bootstrap_servers, "--list")
    finally:
        broker.shutdown()
    assert code == 1 and out == ""
    line = one_line(err)
    assert "does not support consumer groups" in line and broker.bootstrap_servers in line


# --- --reset-offsets, --delete-offsets, --describe --members / --state, --list --state ---

def reset_table(out: str) -> list[list[str]]:
    lines = out.splitlines()
    assert lines[0] == "" and lines[1].split() == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], out
    return [line.split() for line in lines[2:]]


def committed(broker, group: str) -> dict:
    from broker.client.consumer.group_offsets import list_group_offsets

    return {(tp.topic, tp.partition): o for tp, o in
            list_group_offsets({"bootstrap.servers": broker.bootstrap}, group).items()}


def test_reset_offsets_dry_run_execute_and_scenarios(kafka_broker, capsys):
    topic = topic_with_records(kafka_broker, {0: 10, 1: 5})  # every record at 1_700_000_000_000
    group = unique("reset")
    commit_offsets({"bootstrap.servers": kafka_broker.bootstrap}, group, {(topic, 0): 4, (topic, 1): 5})
    base = ["groups", "--bootstrap-server", kafka_broker.bootstrap, "--reset-offsets", "--group", group]
    # neither --dry-run nor --execute: Kafka's warning, the plan, nothing committed
    code, out, err = run(capsys, *base, "--topic", topic, "--to-earliest")
    assert code == 0 and err.startswith("WARN: No action will be performed as the --execute option is missing.")
    assert reset_table(out) == [[group, topic, "0", "0"], [group, topic, "1", "0"]]
    assert committed(kafka_broker, group) == {(topic, 0): 4, (topic, 1): 5}
    code, out, err = run(capsys, *base, "--topic", f"{topic}:1", "--to-earliest", "--dry-run")
    assert (code, err) == (0, "") and reset_table(out) == [[group, topic, "1", "0"]]
    # --execute commits; the table has Kafka's widths (GROUP and TOPIC at least 15, PARTITION 10)
    code, out, err = run(capsys, *base, "--topic", f"{topic}:0", "--to-offset", "2", "--execute")
    assert (code, err) == (0, "") and reset_table(out) == [[group, topic, "0", "2"]]
    header = out.splitlines()[1]
    assert header.index("TOPIC") == max(15, len(group)) + 1
    assert header.index("NEW-OFFSET") == header.index("PARTITION") + 11
    assert committed(kafka_broker, group) == {(topic, 0): 2, (topic, 1): 5}
    # --shift-by over every committed partition, clamped with a warning
    code, out, err = run(capsys, *base, "--all-topics", "--shift-by", "-3", "--execute")
    assert code == 0 and reset_table(out) == [[group, topic, "0", "0"], [group, topic, "1", "2"]]
    assert err == (f"kafkalog groups: warning: New offset (-1) is lower than earliest offset for topic partition "
                   f"{topic}-0. Value will be set to 0.\n")
    # --to-datetime (Kafka's format, UTC): before every record -> 0, after them -> log end, with a warning
    code, out, err = run(capsys, *base, "--topic", topic, "--to-datetime", "2023-11-14T22:13:19.999", "--execute")
    assert code == 0 and reset_table(out) == [[group, topic, "0", "0"], [group, topic, "1", "0"]]
    code, out, err = run(capsys, *base, "--topic", topic, "--to-datetime", "2023-11-14T22:13:20.001", "--execute")
    assert code == 0 and reset_table(out) == [[group, topic, "0", "10"], [group, topic, "1", "5"]]
    assert f"Partition 0 from topic {topic} is empty. Falling back to latest known offset." in err
    code, out, err = run(capsys, *base, "--topic", f"{topic}:1", "--to-latest", "--execute")
    assert committed(kafka_broker, group) == {(topic, 0): 10, (topic, 1): 5}
    # a new group (Dead) may be reset: --execute creates it; its lag then shows in --describe
    fresh = unique("reset-new")
    code, out, err = run(capsys, "groups", "--bootstrap-server", kafka_broker.bootstrap, "--reset-offsets",
                         "--group", fresh, "--topic", topic, "--to-current", "--execute")
    assert code == 0 and reset_table(out) == [[fresh, topic, "0", "10"], [fresh, topic, "1", "5"]]
    code, out, err = run(capsys, "groups", "--bootstrap-server", kafka_broker.bootstrap, "--describe", "--group", fresh)
    assert table(out) == [[fresh, topic, "0", "10", "10", "0", "-", "-", "-"],
                          [fresh, topic, "1", "5", "5", "0", "-", "-", "-"]]


def test_reset_offsets_errors_are_one_line(kafka_broker, capsys):
    topic = topic_with_records(kafka_broker, {0: 3})
    group = unique("reset-err")
    base = ["groups", "--bootstrap-server", kafka_broker.bootstrap, "--reset-offsets", "--group", group, "--dry-run"]
    for argv, message in [
        (["--topic", f"{topic}:7", "--to-earliest"], f'The partitions "{topic}-7" do not exist'),
        (["--topic", unique("nope"), "--to-earliest"], "does not exist"),
        (["--topic", f"{topic}:x", "--to-earliest"], f"Invalid partition 'x' specified in topic arg '{topic}:x'"),
        (["--topic", topic, "--shift-by", "1"], f"Cannot shift offset for partition {topic}-0 since there is no"),
        (["--topic", topic, "--to-datetime", "2023-11-14 10:00"], "expected the format YYYY-MM-DDTHH:mm:SS.sss"),
    ]:
        code, out, err = run(capsys, *base, *argv)
        assert code == 1 and out == "" and message in one_line(err), (argv, err)


def test_describe_members_and_state(kafka_broker, capsys):
    topic = topic_with_records(kafka_broker, {0: 1})
    group = unique("members")
    commit_offsets({"bootstrap.servers": kafka_broker.bootstrap}, group, {(topic, 0): 1})
    base = ["groups", "--bootstrap-server", kafka_broker.bootstrap, "--describe", "--group", group]
    code, out, err = run(capsys, *base, "--members")
    assert code == 0 and err == f"Consumer group '{group}' has no active members.\n"
    # no members: no rows, and the columns at Kafka's minimum widths (they grow with the rows)
    assert out.splitlines() == ["", f"{'GROUP':<15} {'CONSUMER-ID':<15} {'HOST':<15} {'CLIENT-ID':<15} "
                                    f"{'#PARTITIONS':<15} "]
    code, out, err = run(capsys, *base, "--members", "--verbose")
    assert code == 0 and out.splitlines()[1].split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS",
                                                         "ASSIGNMENT"]
    code, out, err = run(capsys, *base, "--state")
    lines = out.splitlines()
    assert code == 0 and lines[0] == "" and len(lines) == 3
    assert lines[1].split() == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
    cells = lines[2].split()
    assert cells[0] == group and cells[1] == kafka_broker.bootstrap and cells[2].startswith("(")
    assert cells[3:] == ["-", "Empty", "0"]
    assert lines[1].index("ASSIGNMENT-STRATEGY") == max(15, len(group)) + 1 + 25 + 1
    code, out, err = run(capsys, *base, "--state", "--verbose")
    assert code == 0 and out.splitlines()[1].split()[-3:] == ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"]
    assert out.splitlines()[2].split()[-4:] == ["Empty", "-", "-", "0"]
    code, out, err = run(capsys, "groups", "--bootstrap-server", kafka_broker.bootstrap, "--list", "--state", "empty")
    assert code == 0 and out.splitlines()[0].split() == ["GROUP", "STATE"] and [group, "Empty"] in \
        [line.split() for line in out.splitlines()]
    code, out, err = run(capsys, "groups", "--bootstrap-server", kafka_broker.bootstrap, "--list", "--state", "Stable")
    assert code == 0 and out.splitlines() == [f"{'GROUP':<25} {'STATE':<20}"]
    code, out, err = run(capsys, "groups", "--bootstrap-server", kafka_broker.bootstrap, "--list", "--state", "bogus")
    assert code == 1 and "Invalid state list 'bogus'" in one_line(err)


def test_delete_offsets(kafka_broker, capsys):
    """OffsetDelete is not served by this broker yet: a one-line error naming it and the
    API; once it is, Kafka's success line and the TOPIC PARTITION STATUS table."""
    topic = topic_with_records(kafka_broker, {0: 1, 1: 1})
    group = unique("del-off")
    commit_offsets({"bootstrap.servers": kafka_broker.bootstrap}, group, {(topic, 0): 1, (topic, 1): 1})
    code, out, err = run(capsys, "groups", "--bootstrap-server", kafka_broker.bootstrap, "--delete-offsets",
                         "--group", group, "--topic", f"{topic}:0")
    if code == 1:
        assert out == "" and "OFFSET_DELETE" in one_line(err) and kafka_broker.bootstrap in one_line(err)
        return
    assert out.splitlines()[0] == f"Request succeeded for deleting offsets from group {group}."
    assert [line.split() for line in out.splitlines()[2:]] == [["TOPIC", "PARTITION", "STATUS"],
                                                               [topic, "0", "Successful"]]
    assert committed(kafka_broker, group) == {(topic, 1): 1}


@pytest.mark.parametrize("argv, message", [
    (["--reset-offsets", "--topic", "t", "--to-earliest"], "--reset-offsets needs exactly one of --group or"),
    (["--reset-offsets", "--group", "g", "--to-earliest"], "needs exactly one of the reset scopes --all-topics"),
    (["--reset-offsets", "--group", "g", "--topic", "t"], "--reset-offsets needs exactly one of --to-earliest"),
    (["--reset-offsets", "--group", "g", "--topic", "t", "--to-earliest", "--to-latest"], "exactly one of --to-"),
    (["--reset-offsets", "--group", "g", "--all-topics", "--to-latest", "--execute", "--dry-run"],
     "--reset-offsets only accepts one of --execute and --dry-run"),
    (["--describe", "--group", "g", "--to-earliest"], "can only be used with --reset-offsets"),
    (["--describe", "--group", "g", "--members", "--state"], "--describe takes at most one of --members"),
    (["--describe", "--group", "g", "--state", "Stable"], "--describe does not take a value for --state"),
    (["--list", "--members"], "--members, --offsets and --verbose can only be used with --describe"),
    (["--delete-offsets", "--group", "g"], "--delete-offsets takes one --group and at least one --topic"),
    (["--describe", "--group", "g", "--topic", "t"], "--topic can only be used with --reset-offsets"),
    (["--delete", "--group", "g", "--state"], "--state can only be used with --describe or --list"),
    (["--reset-offsets", "--group", "g", "--all-topics", "--to-datetime", "2023-11-14"],
     "Error parsing timestamp '2023-11-14': expected the format YYYY-MM-DDTHH:mm:SS.sss"),
])
def test_new_usage_errors_are_one_line(capsys, argv, message):
    code, out, err = run(capsys, "groups", *argv)
    assert code == 1 and out == ""
    assert message in one_line(err) and one_line(err).startswith("kafkalog groups: error: ")


def test_all_groups_means_the_consumer_groups_not_the_share_groups(kafka_broker, capsys):
    """A share group in the cluster (made by kafkalog share-groups --execute) is left out of
    --describe and --reset-offsets --all-groups, as kafka-consumer-groups.sh leaves it out
    (ListGroupsOptions.forConsumerGroups): describing it as a consumer group said it did
    not exist and failed the whole command."""
    topic = topic_with_records(kafka_broker, {0: 3})
    share, group = unique("all-share"), unique("all-consumer")
    code, _, err = run(capsys, "share-groups", "--bootstrap-server", kafka_broker.bootstrap, "--reset-offsets",
                       "--group", share, "--topic", topic, "--to-earliest", "--execute")
    assert (code, err) == (0, "")
    commit_offsets({"bootstrap.servers": kafka_broker.bootstrap}, group, {(topic, 0): 1})
    code, out, err = run(capsys, "groups", "--bootstrap-server", kafka_broker.bootstrap, "--list")
    assert code == 0 and group in out.split() and share not in out.split()
    code, out, err = run(capsys, "groups", "--bootstrap-server", kafka_broker.bootstrap, "--describe",
                         "--all-groups")
    assert code == 0, err
    assert [group, topic, "0", "1", "3", "2", "-", "-", "-"] in table(out) and share not in out
    code, out, err = run(capsys, "groups", "--bootstrap-server", kafka_broker.bootstrap, "--reset-offsets",
                         "--all-groups", "--topic", topic, "--to-earliest", "--dry-run")
    assert code == 0, err
    assert [group, topic, "0", "0"] in reset_table(out) and share not in out
