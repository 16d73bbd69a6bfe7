"""kafkalog acls (broker/tools/acls.py), like kafka-acls.sh, against the real broker in a
subprocess with the StandardAuthorizer on a SASL_PLAINTEXT listener, as the super user
``admin`` (--command-config): --add / --list / --remove with Kafka's output, the
confirmation of --remove, --producer / --consumer ACLs that let a user who is not a super
user produce and consume with confluent-kafka (refused TOPIC_AUTHORIZATION_FAILED without
them), and one-line errors with exit status 1 for bad option combinations and the
broker's refusals."""

from __future__ import annotations

import io
import sys

import pytest

from broker.client.admin import AdminClient, NewTopic
from broker.client.admin_acls import AclBinding, AclBindingFilter, AclOperation, PatternType, ResourceType
from spark_kafkalog.cli.main import main
from tests.support.acl_admin import ck_conf, command_config, our_conf, start_authz_broker, unique


@pytest.fixture(scope="module")
def authz_broker(tmp_path_factory):
    broker = start_authz_broker(tmp_path_factory.mktemp("acl-tool"))
    yield broker
    code = broker.stop()
    assert code == 0, broker.stderr_text()[-3000:]


@pytest.fixture
def acls(authz_broker, tmp_path, capsys, monkeypatch):
    """Run ``kafkalog acls --command-config <admin's> ARGS``; (exit code, stdout, stderr)."""
    props = command_config(tmp_path / "admin.properties", authz_broker)

    def run(*argv: str, stdin: str | None = None, user_props: str | None = None) -> tuple[int, str, str]:
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        code = main(["acls", "--command-config", user_props or props, *argv])
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


def block(title: str, *entries: str) -> str:
    """Kafka's block: "<title>: \\n \\t<entry>\\n\\t<entry> \\n" and println's newline."""
    return f"{title}: \n " + "\n".join(f"\t{e}" for e in entries) + " \n\n"


def entry(principal: str, op: str, perm: str = "ALLOW", host: str = "*") -> str:
    return f"(principal={principal}, host={host}, operation={op}, permissionType={perm})"


def topic(name: str, pattern: str = "LITERAL") -> str:
    return f"ResourcePattern(resourceType=TOPIC, name={name}, patternType={pattern})"


def test_add_list_remove(acls, authz_broker):
    t = unique("cli")
    code, out, err = acls("--add", "--allow-principal", "User:alice", "--allow-principal", "User:bob",
                          "--operation", "Read", "--operation", "DescribeConfigs", "--topic", t)
    assert (code, err) == (0, "")
    entries = [entry("User:alice", "READ"), entry("User:alice", "DESCRIBE_CONFIGS"),
               entry("User:bob", "READ"), entry("User:bob", "DESCRIBE_CONFIGS")]
    assert out == (block(f"Adding ACLs for resource `{topic(t)}`", *entries)
                   + block(f"Current ACLs for resource `{topic(t)}`", *entries))
    code, out, _ = acls("--add", "--deny-principal", "User:mallory", "--deny-host", "10.0.0.9", "--operation",
                        "write", "--topic", t, "--resource-pattern-type", "prefixed")
    assert code == 0
    deny = entry("User:mallory", "WRITE", "DENY", "10.0.0.9")
    assert out.endswith(block(f"Current ACLs for resource `{topic(t, 'PREFIXED')}`", deny))

    # what the CLI wrote, as our admin client reads it
    with AdminClient(our_conf(authz_broker)) as admin:
        found = admin.describe_acls(AclBindingFilter.of(ResourceType.TOPIC, t, PatternType.ANY))
    assert len(found) == 5 and AclBinding.of("TOPIC", t, "PREFIXED", "User:mallory", "10.0.0.9", "WRITE",
                                             "DENY") in found

    # --list: one resource, MATCH (every pattern applying to the name), a principal
    code, out, _ = acls("--list", "--topic", t)
    assert (code, out) == (0, block(f"Current ACLs for resource `{topic(t)}`", *entries))
    code, out, _ = acls("--list", "--topic", t + "-more", "--resource-pattern-type", "match")
    assert (code, out) == (0, block(f"Current ACLs for resource `{topic(t, 'PREFIXED')}`", deny))
    code, out, _ = acls("--list", "--topic", t, "--resource-pattern-type", "any", "--principal", "User:bob")
    assert (code, out) == (0, "ACLs for principal `User:bob`\n"
                              + block(f"Current ACLs for resource `{topic(t)}`", *entries[2:]))
    code, out, _ = acls("--list")
    assert code == 0 and f"Current ACLs for resource `{topic(t)}`" in out

    # --remove of some entries, then of the whole resource
    code, out, _ = acls("--remove", "--allow-principal", "User:bob", "--operation", "Read", "--topic", t, "--force")
    assert (code, out) == (0, block(f"Current ACLs for resource `{topic(t)}`", *entries[:2], entries[3]))
    code, out, _ = acls("--remove", "--topic", t, "--resource-pattern-type", "any", "--force")
    assert (code, out) == (0, "")
    assert acls("--list", "--topic", t, "--resource-pattern-type", "any")[:2] == (0, "")


def test_remove_asks_for_confirmation(acls):
    t = unique("confirm")
    assert acls("--add", "--allow-principal", "User:alice", "--topic", t, "--group", t)[0] == 0
    question = f"Are you sure you want to delete all ACLs for resource filter `{topic(t)}`? (y/n)\n"
    code, out, _ = acls("--remove", "--topic", t, stdin="n\n")
    assert code == 0 and out.startswith(question) and f"Current ACLs for resource `{topic(t)}`" in out
    code, out, err = acls("--remove", "--topic", t, stdin="")  # no terminal, no answer
    assert code == 1 and out == question
    assert err == ("kafkalog acls: error: no answer on stdin to the confirmation question: use --force to "
                   "remove ACLs without confirmation\n")
    code, out, _ = acls("--remove", "--topic", t, "--allow-principal", "User:alice", "--operation", "All",
                        stdin="Y\n")
    assert code == 0
    assert out == (f"Are you sure you want to remove ACLs: \n \t{entry('User:alice', 'ALL')} \n from resource "
                   f"filter `{topic(t)}`? (y/n)\n")
    group = f"ResourcePattern(resourceType=GROUP, name={t}, patternType=LITERAL)"
    assert acls("--list", "--group", t)[1] == block(f"Current ACLs for resource `{group}`", entry("User:alice", "ALL"))
    assert acls("--remove", "--group", t, "--force")[:2] == (0, "")


def _produce(broker, user: str, topic_name: str, value: bytes):
    """The delivery error of one confluent-kafka message (None when delivered)."""
    from confluent_kafka import Producer

    outcome = []
    p = Producer(ck_conf(broker, user, **{"message.timeout.ms": 20000}))
    p.produce(topic_name, value, on_delivery=lambda err, msg: outcome.append(err))
    p.flush(30)
    assert len(outcome) == 1
    return outcome[0]


def _consume(broker, user: str, topic_name: str, group: str):
    """The first message or error confluent-kafka's consumer gets."""
    from confluent_kafka import Consumer

    c = Consumer(ck_conf(broker, user, **{"group.id": group, "auto.offset.reset": "earliest"}))
    try:
        c.subscribe([topic_name])
        for _ in range(60):
            msg = c.poll(1.0)
            if msg is not None:
                return msg
        return None
    finally:
        c.close()


def test_producer_and_consumer_acls_let_a_user_produce_and_consume(acls, authz_broker):
    from confluent_kafka import KafkaError
    from confluent_kafka import admin as ck

    t, g = unique("pc"), unique("pc-group")
    with AdminClient(our_conf(authz_broker)) as admin:
        admin.create_topics([NewTopic(t, 1, 1)]).all()
    error = _produce(authz_broker, "alice", t, b"refused")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    code, out, err = acls("--add", "--producer", "--allow-principal", "User:alice", "--topic", t)
    assert (code, err) == (0, "")
    assert out.startswith(block(f"Adding ACLs for resource `{topic(t)}`", entry("User:alice", "WRITE"),
                                entry("User:alice", "CREATE"), entry("User:alice", "DESCRIBE")))
    assert _produce(authz_broker, "alice", t, b"hello") is None
    # without READ on the topic and the group, alice's consumer is refused
    msg = _consume(authz_broker, "alice", t, g)
    assert msg is not None and msg.error() is not None
    assert msg.error().code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED)

    assert acls("--add", "--consumer", "--allow-principal", "User:alice", "--topic", t, "--group", g)[0] == 0
    msg = _consume(authz_broker, "alice", t, g)
    assert msg is not None and msg.error() is None and msg.value() == b"hello"

    # confluent-kafka's AdminClient sees what the CLI wrote
    other = ck.AdminClient(ck_conf(authz_broker))
    flt = ck.AclBindingFilter(ck.ResourceType.ANY, None, ck.ResourcePatternType.ANY, "User:alice", None,
                              ck.AclOperation.ANY, ck.AclPermissionType.ANY)
    mine = {(b.restype.name, b.operation.name) for b in other.describe_acls(flt).result(30) if b.name in (t, g)}
    assert mine == {("TOPIC", "WRITE"), ("TOPIC", "CREATE"), ("TOPIC", "DESCRIBE"), ("TOPIC", "READ"),
                    ("GROUP", "READ")}

    # removing the producer ACLs refuses alice's producer again
    assert acls("--remove", "--producer", "--allow-principal", "User:alice", "--topic", t, "--force")[0] == 0
    error = _produce(authz_broker, "alice", t, b"refused again")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    acls("--remove", "--topic", t, "--group", g, "--force")


def test_producer_with_transactional_id_and_idempotent(acls):
    t, tx = unique("tx-topic"), unique("tx")
    code, out, _ = acls("--add", "--producer", "--allow-principal", f"User:{t}", "--topic", t,
                        "--transactional-id", tx, "--idempotent")
    assert code == 0
    cluster = "ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, patternType=LITERAL)"
    txn = f"ResourcePattern(resourceType=TRANSACTIONAL_ID, name={tx}, patternType=LITERAL)"
    assert block(f"Adding ACLs for resource `{cluster}`", entry(f"User:{t}", "IDEMPOTENT_WRITE")) in out
    assert block(f"Adding ACLs for resource `{txn}`", entry(f"User:{t}", "WRITE"),
                 entry(f"User:{t}", "DESCRIBE")) in out
    assert acls("--remove", "--producer", "--allow-principal", f"User:{t}", "--topic", t, "--transactional-id", tx,
                "--idempotent", "--force")[0] == 0
    code, out, _ = acls("--list", "--principal", f"User:{t}")
    assert (code, out) == (0, f"ACLs for principal `User:{t}`\n")


@pytest.mark.parametrize("argv, message", [
    ((), "Command must include exactly one action: --list, --add, --remove."),
    (("--add", "--list", "--topic", "t"), "Command must include exactly one action"),
    (("--add", "--topic", "t"), "You must specify one of: --allow-principal, --deny-principal when trying to add "
                                "ACLs."),
    (("--add", "--allow-principal", "User:a"), "You must provide at least one resource: --topic <topic> or "
                                               "--cluster"),
    (("--add", "--allow-principal", "alice", "--topic", "t"),
     "expected a string in format principalType:principalName but got 'alice'"),
    (("--add", "--allow-principal", "User:a", "--topic", "t", "--operation", "Frob"), "Unknown operation 'Frob'"),
    (("--add", "--allow-principal", "User:a", "--topic", "t", "--operation", "ClusterAction"),
     "ResourceType TOPIC only supports operations READ,WRITE,CREATE,DESCRIBE,DELETE,ALTER,DESCRIBE_CONFIGS,"
     "ALTER_CONFIGS,ALL"),
    (("--add", "--allow-principal", "User:a", "--group", "g", "--operation", "Write"),
     "ResourceType GROUP only supports operations READ,DESCRIBE,DELETE,ALL"),
    (("--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"),
     "A '--resource-pattern-type' value of 'MATCH' is not valid when adding acls."),
    (("--list", "--resource-pattern-type", "fuzzy"), "--resource-pattern-type 'fuzzy': one of literal, prefixed, "
                                                     "any, match"),
    (("--list", "--producer", "--topic", "t"), 'Option "--list" can\'t be used with option "--producer"'),
    (("--list", "--allow-principal", "User:a"), 'Option "--list" can\'t be used with option "--allow-principal"'),
    (("--add", "--producer", "--topic", "t", "--allow-principal", "User:a", "--operation", "Read"),
     'Option "--producer" can\'t be used with option "--operation"'),
    (("--add", "--consumer", "--topic", "t", "--deny-principal", "User:a", "--group", "g"),
     'Option "--consumer" can\'t be used with option "--deny-principal"'),
    (("--add", "--producer", "--allow-principal", "User:a"), "With --producer you must specify a --topic"),
    (("--add", "--topic", "t", "--allow-principal", "User:a", "--idempotent"),
     "The --idempotent option is only available if --producer is set"),
    (("--add", "--consumer", "--topic", "t", "--allow-principal", "User:a"),
     "With --consumer you must specify a --topic and a --group and no --cluster or --transactional-id"),
    (("--add", "--topic", "t", "--allow-principal", "User:a", "--principal", "User:a"),
     "The --principal option is only available if --list is set"),
])
def test_bad_option_combinations(capsys, argv, message):
    code = main(["acls", "--bootstrap-server", "127.0.0.1:1", *argv])  # refused before connecting
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("kafkalog acls: error: ") and message in err and err.count("\n") == 1


def test_the_brokers_refusals(acls, authz_broker, tmp_path, kafka_broker, capsys):
    alice = command_config(tmp_path / "alice.properties", authz_broker, "alice")
    code, out, err = acls("--add", "--allow-principal", "User:alice", "--topic", unique("t"), user_props=alice)
    assert code == 1 and err.startswith("kafkalog acls: error: CLUSTER_AUTHORIZATION_FAILED")
    assert acls("--list", user_props=alice)[0] == 1
    code = main(["acls", "--bootstrap-server", kafka_broker.bootstrap, "--list"])
    err = capsys.readouterr().err
    assert code == 1 and err == ("kafkalog acls: error: SECURITY_DISABLED: No Authorizer is configured on the "
                                 "broker\n")


def test_operation_names_are_kafkas():
    from broker.tools.acls import parse_operation

    assert parse_operation("DescribeConfigs") == AclOperation.DESCRIBE_CONFIGS
    assert parse_operation("describe_configs") == AclOperation.DESCRIBE_CONFIGS
    assert parse_operation("IDEMPOTENT_WRITE") == AclOperation.IDEMPOTENT_WRITE
    assert parse_operation("ClusterAction") == AclOperation.CLUSTER_ACTION
    assert parse_operation(" All ") == AclOperation.ALL
