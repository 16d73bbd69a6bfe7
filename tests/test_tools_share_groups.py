"""Tests of ``kafkalog share-groups`` (broker/tools/share_groups.py, kafka-share-groups.sh)
and of the admin client's share group calls (broker/client/admin_share.py through
``AdminClient``) against the real broker in a subprocess, with confluent-kafka's Producer
and ShareConsumer: --list (with --state filters), --describe --members / --state /
--offsets (start offset and lag after the group consumed part of a topic), --reset-offsets
(--to-earliest, --to-offset, --by-duration, --all-topics; a dry run prints the plan and
changes nothing; --execute moves the start offset and a consumer then receives from there;
refused while a member is active), --delete-offsets, --delete, one-line errors for bad
options; ``kafkalog groups --list --type`` (classic and consumer groups with their type,
share groups left to share-groups)."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient as ConfluentAdmin
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

from broker.client.admin import AdminClient
from broker.client.consumer import commit_offsets
from broker.client.consumer.offsets import TopicPartition
from broker.client.errors import KafkaError
from broker.protocol import ErrorCode
from spark_kafkalog.cli.main import main

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def bs(tmp_path_factory):
    from support.broker import BrokerProcess

    broker = BrokerProcess(tmp_path_factory.mktemp("share-tools"), name="share-tools").start()
    yield broker.bootstrap
    broker.kill()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def make_topic(bs: str, partitions: int = 1) -> str:
    name = unique("sgt")
    admin = ConfluentAdmin({"bootstrap.servers": bs})  # referenced until the future's result
    admin.create_topics([NewTopic(name, partitions)])[name].result(30)
    return name


def make_group(bs: str) -> str:
    """A new share group id whose share.auto.offset.reset is earliest."""
    group = unique("sg")
    admin = ConfluentAdmin({"bootstrap.servers": bs})
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    for future in admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, group,
                                                                  incremental_configs=[entry])]).values():
        future.result(30)
    return group


def produce(bs: str, topic: str, n: int, timestamp_ms: int | None = None, partition: int = 0) -> None:
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5})
    for i in range(n):
        if timestamp_ms is None:
            p.produce(topic, value=b"v%d" % i, partition=partition)
        else:
            p.produce(topic, value=b"v%d" % i, partition=partition, timestamp=timestamp_ms)
    assert p.flush(30) == 0


def share_consumer(bs: str, group: str, topic: str) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": bs, "group.id": group, "client.id": "sgt-client"})
    c.subscribe([topic])
    return c


def consume(c: ShareConsumer, n: int, timeout: float = 60.0) -> list[int]:
    """The offsets of the first ``n`` records delivered (implicitly acknowledged)."""
    got: list[int] = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        got += [m.offset() for m in c.poll(1.0) if m.error() is None]
    assert len(got) >= n, got
    return got


def consume_and_acknowledge(bs: str, c: ShareConsumer, group: str, topic: str, n: int) -> list[int]:
    """``consume`` n records, then poll on (the poll acknowledges what the previous one
    delivered) until the group's start offset of ``topic``-0 is past them."""
    got = consume(c, n)
    with AdminClient({"bootstrap.servers": bs}) as admin:
        def acknowledged() -> bool:
            c.poll(0.5)
            return admin.list_share_group_offsets(group, [(topic, 0)])[TopicPartition(topic, 0)].start_offset == n
        wait_for(f"{n} records acknowledged", acknowledged)
    return got


def consumer_group(bs: str, topic: str) -> str:
    """A KIP-848 consumer group (group.protocol=consumer) whose one member got its
    assignment and left."""
    group = unique("cg")
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "group.protocol": "consumer"})
    try:
        c.subscribe([topic])
        wait_for("the consumer's assignment", lambda: c.poll(0.5) is not None or bool(c.assignment()))
    finally:
        c.close()
    return group


def wait_for(what: str, fn, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)  # scenario: the broker applies acknowledgements and leaves asynchronously


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def sg(capsys, bs: str, *argv: str) -> tuple[int, str, str]:
    return run(capsys, "share-groups", "--bootstrap-server", bs, *argv)


def table(out: str) -> list[list[str]]:
    """The rows (header first) of one table printed after a blank line."""
    lines = out.splitlines()
    assert lines[0] == "", out
    return [line.split() for line in lines[1:]]


@pytest.fixture()
def consumed(bs):
    """(topic, group): a group that consumed the 10 records of a one-partition topic and
    left; then 5 more records were produced (start offset 10, lag 5)."""
    topic, group = make_topic(bs), make_group(bs)
    produce(bs, topic, 10)
    c = share_consumer(bs, group, topic)
    try:
        assert sorted(consume_and_acknowledge(bs, c, group, topic, 10)) == list(range(10))
    finally:
        c.close()
    with AdminClient({"bootstrap.servers": bs}) as admin:
        wait_for("the group empty at start offset 10", lambda: (
            admin.describe_share_groups([group])[group].state == "Empty"
            and admin.list_share_group_offsets(group).get(TopicPartition(topic, 0), (None,))[0] == 10))
    produce(bs, topic, 5)
    return topic, group


def test_active_member_list_describe_and_refusals(bs, capsys):
    topic, group = make_topic(bs), make_group(bs)
    produce(bs, topic, 10)
    c = share_consumer(bs, group, topic)
    try:
        consume_and_acknowledge(bs, c, group, topic, 10)
        code, out, err = sg(capsys, bs, "--list")
        assert (code, err) == (0, "") and group in out.splitlines()
        assert out.splitlines() == sorted(out.splitlines())
        code, out, err = sg(capsys, bs, "--list", "--state", "stable")
        assert code == 0 and out.splitlines()[0].split() == ["GROUP", "STATE"]
        assert [group, "Stable"] in [line.split() for line in out.splitlines()]
        code, out, _ = sg(capsys, bs, "--list", "--state", "Empty")
        assert code == 0 and group not in out

        code, out, err = sg(capsys, bs, "--describe", "--group", group, "--members")
        assert (code, err) == (0, "")
        rows = table(out)
        assert rows[0] == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "ASSIGNMENT"]
        assert len(rows) == 2 and rows[1][0] == group and rows[1][3:] == ["sgt-client", f"{topic}:0"]
        code, out, _ = sg(capsys, bs, "--describe", "--group", group, "--members", "--verbose")
        rows = table(out)
        assert rows[0][4] == "MEMBER-EPOCH" and int(rows[1][4]) >= 1 and rows[1][5] == f"{topic}:0"
        code, out, err = sg(capsys, bs, "--describe", "--group", group, "--state")
        assert (code, err) == (0, "")
        lines = out.splitlines()
        assert lines[1].startswith("GROUP") and "COORDINATOR (ID)" in lines[1]
        assert lines[2].split()[0] == group and lines[2].split()[-2:] == ["Stable", "1"]
        code, out, _ = sg(capsys, bs, "--describe", "--group", group, "--state", "--verbose")
        assert out.splitlines()[1].split()[-3:] == ["GROUP-EPOCH", "ASSIGNMENT-EPOCH", "#MEMBERS"]

        # a group with a member refuses every change
        code, out, err = sg(capsys, bs, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest",
                            "--execute")
        assert (code, out) == (1, "")
        assert err == f"kafkalog share-groups: error: Share group '{group}' is not empty.\n"
        code, out, err = sg(capsys, bs, "--delete-offsets", "--group", group, "--topic", topic)
        assert code == 1 and "NON_EMPTY_GROUP" in err and len(err.splitlines()) == 1
        code, out, err = sg(capsys, bs, "--delete", "--group", group)
        assert code == 1 and err.startswith("kafkalog share-groups: error: Deletion of some share groups failed: "
                                            f"Share group '{group}' could not be deleted due to: NON_EMPTY_GROUP")
        with AdminClient({"bootstrap.servers": bs}) as admin:
            with pytest.raises(KafkaError) as raised:
                admin.alter_share_group_offsets(group, {(topic, 0): 0})
            assert raised.value.code == ErrorCode.NON_EMPTY_GROUP
            assert admin.list_share_group_offsets(group)[TopicPartition(topic, 0)].start_offset == 10
    finally:
        c.close()


def test_describe_offsets_with_lag(bs, capsys, consumed):
    topic, group = consumed
    code, out, err = sg(capsys, bs, "--describe", "--group", group)
    assert code == 0
    assert err == f"Share group '{group}' has no active members.\n"
    assert table(out) == [["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"], [group, topic, "0", "10", "5"]]
    code, out, _ = sg(capsys, bs, "--describe", "--group", group, "--offsets", "--verbose")
    rows = table(out)
    assert rows[0] == ["GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "START-OFFSET", "LAG"]
    assert rows[1][:3] == [group, topic, "0"] and rows[1][3].isdigit() and rows[1][4:] == ["10", "5"]
    code, out, _ = sg(capsys, bs, "--list", "--state", "Empty")
    assert [group, "Empty"] in [line.split() for line in out.splitlines()]
    code, out, err = sg(capsys, bs, "--describe", "--all-groups", "--state")
    assert code == 0 and [group] == [line.split()[0] for line in out.splitlines() if line.startswith(group)]
    missing = unique("sg-missing")
    code, out, err = sg(capsys, bs, "--describe", "--group", missing)
    assert (code, out, err) == (1, "", f"kafkalog share-groups: error: Share group '{missing}' does not exist.\n")


def test_reset_offsets_dry_run_execute_and_receive_from_there(bs, capsys, consumed):
    topic, group = consumed
    admin = AdminClient({"bootstrap.servers": bs})
    try:
        tp = TopicPartition(topic, 0)
        code, out, err = sg(capsys, bs, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest",
                            "--dry-run")
        assert (code, err) == (0, "")
        assert table(out) == [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], [group, topic, "0", "0"]]
        assert admin.list_share_group_offsets(group)[tp].start_offset == 10  # a dry run changes nothing
        code, out, err = sg(capsys, bs, "--reset-offsets", "--group", group, "--all-topics", "--to-latest")
        assert code == 0 and err.startswith("WARN: No action will be performed as the --execute option is missing.")
        assert table(out)[1] == [group, topic, "0", "15"]
        assert admin.list_share_group_offsets(group)[tp] == (10, admin.list_share_group_offsets(group)[tp][1], 5)
        code, out, err = sg(capsys, bs, "--reset-offsets", "--group", group, "--topic", f"{topic}:0", "--to-offset",
                            "100", "--dry-run")
        assert code == 0 and table(out)[1] == [group, topic, "0", "15"]
        assert "New offset (100) is higher than latest offset for topic partition" in err

        code, out, err = sg(capsys, bs, "--reset-offsets", "--group", group, "--topic", topic, "--to-offset", "3",
                            "--execute")
        assert (code, err) == (0, "") and table(out)[1] == [group, topic, "0", "3"]
        start, epoch, lag = admin.list_share_group_offsets(group, [topic])[tp]
        assert (start, lag) == (3, 12) and epoch is not None
        c = share_consumer(bs, group, topic)
        try:
            assert min(consume(c, 1)) == 3  # the consumer receives from the new start offset
        finally:
            c.close()
    finally:
        admin.close()


def test_reset_by_duration_creates_a_missing_group(bs, capsys):
    topic = make_topic(bs)
    now = int(time.time() * 1000)
    produce(bs, topic, 4, timestamp_ms=now - 2 * 3600 * 1000)
    produce(bs, topic, 3, timestamp_ms=now)
    group = unique("sg-new")
    code, out, err = sg(capsys, bs, "--reset-offsets", "--group", group, "--topic", topic, "--by-duration", "PT1H",
                        "--dry-run")
    assert (code, err) == (0, "") and table(out)[1] == [group, topic, "0", "4"]
    code, out, _ = sg(capsys, bs, "--reset-offsets", "--group", group, "--topic", topic, "--by-duration", "P1DT1H",
                      "--dry-run")
    assert table(out)[1] == [group, topic, "0", "0"]
    with AdminClient({"bootstrap.servers": bs}) as admin:
        assert admin.describe_share_groups([group])[group].state == "Dead"
        code, out, err = sg(capsys, bs, "--reset-offsets", "--group", group, "--topic", topic, "--by-duration",
                            "PT30M", "--execute")
        assert (code, err) == (0, "") and table(out)[1] == [group, topic, "0", "4"]
        listed = {g.group_id: g for g in admin.list_groups(types=["share"])}
        assert (listed[group].group_type, listed[group].protocol_type, listed[group].state) == ("share", "share",
                                                                                                "Empty")
        assert admin.list_share_group_offsets(group) == {TopicPartition(topic, 0): (4, 0, 3)}


def test_delete_offsets_and_delete_groups(bs, capsys, consumed):
    topic, group = consumed
    code, out, err = sg(capsys, bs, "--delete-offsets", "--group", group, "--topic", topic)
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == f"Request succeeded for deleting offsets from group {group}."
    assert [line.split() for line in out.splitlines()[2:]] == [["TOPIC", "STATUS"], [topic, "Successful"]]
    with AdminClient({"bootstrap.servers": bs}) as admin:
        assert admin.list_share_group_offsets(group) == {}
        start = admin.list_share_group_offsets(group, [(topic, 0)])[TopicPartition(topic, 0)]
        assert start.start_offset is None and start.lag is None
        code, out, err = sg(capsys, bs, "--delete-offsets", "--group", group, "--topic", "no-such-topic")
        assert code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in out
        classic = unique("classic")
        commit_offsets({"bootstrap.servers": bs}, classic, {(topic, 0): 1})
        code, out, err = sg(capsys, bs, "--delete", "--group", group)
        assert (code, err) == (0, "")
        assert out == f"Deletion of requested share groups ('{group}') was successful.\n"
        assert group not in {g.group_id for g in admin.list_groups()}
        missing = unique("sg-missing")
        code, out, err = sg(capsys, bs, "--delete", "--group", classic, "--group", missing)
        assert code == 1 and out == ""
        assert f"Group '{classic}' is not a share group." in err and "GROUP_ID_NOT_FOUND" in err
        assert len(err.splitlines()) == 1
        results = admin.delete_share_groups([missing])
        assert results[missing].error.code == ErrorCode.GROUP_ID_NOT_FOUND
        with pytest.raises(KafkaError) as raised:
            admin.delete_share_group_offsets(missing, [topic])
        assert raised.value.code == ErrorCode.GROUP_ID_NOT_FOUND


def test_admin_client_share_group_calls(bs):
    topic, group = make_topic(bs, partitions=2), make_group(bs)
    produce(bs, topic, 6, partition=0)
    produce(bs, topic, 2, partition=1)
    classic = unique("classic")
    commit_offsets({"bootstrap.servers": bs}, classic, {(topic, 0): 1})
    c = share_consumer(bs, group, topic)
    admin = AdminClient({"bootstrap.servers": bs})
    try:
        consume(c, 8)
        wait_for("every record acknowledged", lambda: c.poll(0.5) is not None and [  # a poll acknowledges
            o.start_offset for o in admin.list_share_group_offsets(group, [topic]).values()] == [6, 2])
        d = admin.describe_share_groups([group])[group]
        assert (d.state, d.assignor, len(d.members)) == ("Stable", "simple", 1)
        assert d.group_epoch >= 1 and d.assignment_epoch >= 1 and d.coordinator is not None
        m = d.members[0]
        assert (m.client_id, m.subscriptions) == ("sgt-client", (topic,))
        assert m.assignment == (TopicPartition(topic, 0), TopicPartition(topic, 1)) and m.client_host
        listed = {g.group_id: g for g in admin.list_groups()}
        assert (listed[group].group_type, listed[classic].group_type) == ("share", "classic")
        assert {g.group_id for g in admin.list_groups(types=["share"], states=["Stable"])} >= {group}
        assert classic not in {g.group_id for g in admin.list_groups(types=["share"])}
        assert group not in {g.group_id for g in admin.list_groups(states=["Empty"])}
        other = consumer_group(bs, topic)
        assert admin.list_groups(types=["consumer"])[0].group_type == "consumer"
        assert other in {g.group_id for g in admin.list_groups(types=["consumer"])}
        with pytest.raises(KafkaError) as raised:
            admin.describe_share_groups([other])
        assert raised.value.code == ErrorCode.GROUP_ID_NOT_FOUND and "not a share group" in str(raised.value)
        assert admin.describe_share_groups(["sg-none"])["sg-none"].state == "Dead"
        with pytest.raises(ValueError):
            admin.alter_share_group_offsets(group, {(topic, 0): -1})
    finally:
        c.close()
    try:
        tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        wait_for("the member gone", lambda: admin.describe_share_groups([group])[group].state == "Empty")
        results = admin.alter_share_group_offsets(group, {tps[0]: 2, (topic, 7): 0})
        assert results[tps[0]].result() is None
        assert results[TopicPartition(topic, 7)].error.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        offsets = admin.list_share_group_offsets(group)
        assert list(offsets) == tps and (offsets[tps[0]].start_offset, offsets[tps[0]].lag) == (2, 4)
        assert admin.delete_share_group_offsets(group, [topic]).all() == {topic: None}
        assert admin.delete_share_groups([group]).all() == {group: None}
        assert admin.describe_share_groups([group])[group].state == "Dead"
    finally:
        admin.close()


def test_groups_list_shows_types(bs, capsys):
    topic = make_topic(bs)
    classic = unique("classic")
    commit_offsets({"bootstrap.servers": bs}, classic, {(topic, 0): 0})
    share = unique("sg-typed")
    with AdminClient({"bootstrap.servers": bs}) as admin:
        admin.alter_share_group_offsets(share, {(topic, 0): 0}).all()  # creates the share group
    code, out, err = run(capsys, "groups", "--bootstrap-server", bs, "--list")
    assert (code, err) == (0, "") and classic in out.splitlines() and share not in out
    code, out, err = run(capsys, "groups", "--bootstrap-server", bs, "--list", "--type")
    lines = [line.split() for line in out.splitlines()]
    assert (code, lines[0]) == (0, ["GROUP", "TYPE"]) and [classic, "Classic"] in lines
    assert share not in out
    code, out, _ = run(capsys, "groups", "--bootstrap-server", bs, "--list", "--type", "--state")
    lines = [line.split() for line in out.splitlines()]
    assert lines[0] == ["GROUP", "TYPE", "STATE"] and [classic, "Classic", "Empty"] in lines
    other = consumer_group(bs, topic)
    code, out, _ = run(capsys, "groups", "--bootstrap-server", bs, "--list", "--type", "consumer")
    lines = [line.split() for line in out.splitlines()]
    assert code == 0 and lines[0] == ["GROUP", "TYPE"] and [other, "Consumer"] in lines and classic not in out
    code, out, err = run(capsys, "groups", "--bootstrap-server", bs, "--list", "--type", "share")
    assert (code, out) == (1, "")
    assert err == ("kafkalog groups: error: Invalid types list 'share'. Valid types are: classic, consumer\n")
    code, out, _ = sg(capsys, bs, "--list")
    assert share in out.splitlines() and classic not in out


@pytest.mark.parametrize(("argv", "message"), [
    (["--describe"], "--describe needs exactly one of --group or --all-groups"),
    (["--describe", "--group", "g", "--members", "--state"], "--describe takes at most one of --members, --offsets, "
                                                              "--state"),
    (["--list", "--members"], "--members, --offsets and --verbose can only be used with --describe"),
    (["--list", "--group", "g"], "--list takes no --group or --all-groups"),
    (["--delete"], "--delete needs exactly one of --group or --all-groups"),
    (["--reset-offsets", "--group", "g", "--topic", "t"],
     "--reset-offsets needs exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime, --by-duration"),
    (["--reset-offsets", "--group", "g", "--to-earliest"],
     "--reset-offsets needs exactly one of the reset scopes --all-topics, --topic"),
    (["--reset-offsets", "--group", "g", "--all-topics", "--to-earliest", "--dry-run", "--execute"],
     "--reset-offsets only accepts one of --execute and --dry-run"),
    (["--reset-offsets", "--group", "g", "--topic", "t", "--by-duration", "1H"],
     "Error parsing duration '1H': expected the format PnDTnHnMnS (e.g. PT1H30M)"),
    (["--reset-offsets", "--group", "g", "--topic", "t", "--to-offset", "-1"], "--to-offset must not be negative, "
                                                                                "not -1"),
    (["--reset-offsets", "--group", "g", "--topic", "t", "--to-datetime", "yesterday"],
     "Error parsing timestamp 'yesterday': expected the format YYYY-MM-DDTHH:mm:SS.sss, optionally followed by a "
     "time zone (Z, +hh:mm)"),
    (["--describe", "--group", "g", "--to-earliest"],
     "--to-*, --by-duration, --all-topics, --dry-run and --execute can only be used with --reset-offsets"),
    (["--delete-offsets", "--group", "g", "--topic", "t:0"],
     "--delete-offsets takes topic names (every partition), not 't:0'"),
    (["--delete-offsets", "--group", "g"], "--delete-offsets takes one --group and at least one --topic"),
])
def test_bad_options_are_one_line_errors(capsys, argv, message):
    code, out, err = run(capsys, "share-groups", "--bootstrap-server", "127.0.0.1:1", *argv)
    assert (code, out) == (1, "")
    assert err == f"kafkalog share-groups: error: {message}\n"


def test_bad_state_filter_and_unreachable_broker(bs, capsys, tmp_path):
    code, out, err = sg(capsys, bs, "--list", "--state", "Stable,Rebalancing")
    assert (code, out) == (1, "")
    assert err == ("kafkalog share-groups: error: Invalid state list 'Stable,Rebalancing'. Valid states are: "
                   "Empty, Stable, Dead\n")
    props = tmp_path / "client.properties"
    props.write_text("default.api.timeout.ms=1500\n")
    code, out, err = run(capsys, "share-groups", "--bootstrap-server", "127.0.0.1:1", "--command-config", str(props),
                         "--list")
    assert code == 1 and out == ""
    assert "127.0.0.1:1" in err.splitlines()[-1]
