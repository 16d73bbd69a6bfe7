"""kafkalog topics: create, list, describe, alter and delete topics on a broker, like
Kafka's kafka-topics.sh (with --alter also changing topic configs, as kafka-configs.sh).

Owns the command line and the output; the work is ``broker.client.admin.AdminClient``'s.
Exactly one action per run:

  --create    --topic T [--partitions N] [--replication-factor R] [--config K=V ...]
              [--if-not-exists]                    prints "Created topic T."
  --list      [--topic REGEX] [--exclude-internal] one name per line, sorted
  --describe  [--topic REGEX] [--exclude-internal] [--if-exists]
              "Topic: T<TAB>TopicId: ..<TAB>PartitionCount: N<TAB>ReplicationFactor: R<TAB>Configs: k=v,..."
              then per partition "<TAB>Topic: T<TAB>Partition: P<TAB>Leader: L<TAB>Replicas: ..<TAB>Isr: .."
              (Configs lists every value that is not a Kafka default, as kafka-topics.sh
              does; TopicId is left out when the broker sends none, i.e. Metadata < v10)
  --alter     --topic REGEX [--partitions N] [--config K=V ...] [--delete-config K ...]
              [--if-exists]   grows partitions (CreatePartitions) and sets / removes config
              overrides (IncrementalAlterConfigs); both are validated by the broker first
              (validate_only) so a bad value changes nothing; prints "Completed updating
              config for topic T." after a config change
  --delete    --topic REGEX [--if-exists]

As in kafka-topics.sh, --topic is a regular expression (matched against the whole name;
a comma separates alternatives) for every action but --create, and a topic that does not
match is an error ("Topic 'T' does not exist as expected") unless --if-exists. The
broker comes from --bootstrap-server (or --bootstrap-servers), else bootstrap.servers of
--command-config, else localhost:9092. --command-config is a Java properties file of
admin client settings (client.id, request.timeout.ms, default.api.timeout.ms ...). An
unreachable broker is told at once, in one line naming the cause (``no broker of
127.0.0.1:1 reachable yet (connection refused); retrying until default.api.timeout.ms
(30000 ms)...``), retried for default.api.timeout.ms (30000 here unless set), then the
error names it again (``no broker of 127.0.0.1:1 reachable (connection refused); waited
30000 ms (default.api.timeout.ms)``); a TLS or SASL failure is an error at once.

Errors are one line, ``kafkalog topics: error: <Kafka error name>: <broker message>``, exit
status 1 (e.g. TOPIC_ALREADY_EXISTS, INVALID_CONFIG naming the key, INVALID_PARTITIONS).

Thread-safety: a command runs on the main thread.
"""

from __future__ import annotations

import argparse
import re
import sys

from .common import DEFAULT_BOOTSTRAP, CliError, admin_config, parse_key_value, report_unreachable, warn

NAME = "topics"
SUMMARY = "create, list, describe, alter and delete topics (like kafka-topics.sh)"

_ACTIONS = ("create", "list", "describe", "alter", "delete")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--create", action="store_true", help="create a topic")
    actions.add_argument("--list", action="store_true", help="list the topics")
    actions.add_argument("--describe", action="store_true", help="describe topics, partitions and configs")
    actions.add_argument("--alter", action="store_true",
                         help="add partitions and/or change config overrides of topics")
    actions.add_argument("--delete", action="store_true", help="delete topics")
    parser.add_argument("--bootstrap-server", "--bootstrap-servers", dest="bootstrap_server", metavar="HOST:PORT",
                        help=f"the broker(s) to connect to, comma-separated (default {DEFAULT_BOOTSTRAP})")
    parser.add_argument("--topic", metavar="TOPIC",
                        help="the topic to create; for the other actions a regular expression of topics")
    parser.add_argument("--partitions", type=int, metavar="N",
                        help="partition count of a new topic, or the new total with --alter")
    parser.add_argument("--replication-factor", type=int, metavar="R",
                        help="replication factor of a new topic (this broker has one node: 1)")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="a topic config override for --create, or one to set with --alter (repeatable)")
    parser.add_argument("--delete-config", action="append", default=[], metavar="KEY",
                        help="a config override to remove with --alter (repeatable)")
    parser.add_argument("--if-not-exists", action="store_true",
                        help="with --create: do nothing if the topic exists")
    parser.add_argument("--if-exists", action="store_true",
                        help="with --alter, --delete, --describe: do nothing if no topic matches")
    parser.add_argument("--command-config", metavar="FILE",
                        help="admin client settings (Java properties: client.id, request.timeout.ms, ...)")
    parser.add_argument("--exclude-internal", action="store_true",
                        help="with --list, --describe: leave internal topics out")


def _action(args) -> str:
    return next(a for a in _ACTIONS if getattr(args, a))


def _check_options(args, action: str) -> None:
    def only(option: str, given: bool, allowed: tuple[str, ...]) -> None:
        if given and action not in allowed:
            raise CliError(f"{option} can only be used with {' or '.join('--' + a for a in allowed)}")

    if action in ("create", "alter", "delete") and not args.topic:
        raise CliError(f"--topic is required with --{action}")
    only("--partitions", args.partitions is not None, ("create", "alter"))
    only("--replication-factor", args.replication_factor is not None, ("create",))
    only("--config", bool(args.config), ("create", "alter"))
    only("--delete-config", bool(args.delete_config), ("alter",))
    only("--if-not-exists", args.if_not_exists, ("create",))
    only("--if-exists", args.if_exists, ("alter", "delete", "describe"))
    only("--exclude-internal", args.exclude_internal, ("list", "describe"))
    if args.partitions is not None and args.partitions < 1:
        raise CliError(f"--partitions must be at least 1, not {args.partitions}")
    if args.replication_factor is not None and args.replication_factor < 1:
        raise CliError(f"--replication-factor must be at least 1, not {args.replication_factor}")
    if action == "alter" and args.partitions is None and not args.config and not args.delete_config:
        raise CliError("--alter needs --partitions, --config or --delete-config")


def _configs(items: list[str], option: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, value = parse_key_value(item, option)
        out[key] = value
    return out


def _matcher(pattern: str):
    """kafka-topics.sh's include list: a regex over the whole name, ',' = '|'."""
    regex = pattern.strip().strip("\"'").replace(",", "|")
    try:
        compiled = re.compile(regex)
    except re.error as exc:
        raise CliError(f"--topic {pattern!r} is not a valid regular expression: {exc}") from None
    return lambda name: compiled.fullmatch(name) is not None


def _matching(admin, args, include_internal: bool = True) -> list[str]:
    names = admin.list_topics(include_internal=include_internal)
    if not args.topic:
        return names
    found = [n for n in names if args.match(n)]
    if not found and not args.if_exists and not args.list:
        raise CliError(f"Topic '{args.topic}' does not exist as expected")
    return found


def run(args) -> int:
    from broker.client.errors import KafkaError

    action = _action(args)
    _check_options(args, action)
    configs = _configs(args.config, "--config")
    args.match = _matcher(args.topic) if args.topic and action != "create" else None
    from broker.client.admin import AdminClient

    config = admin_config(args, "kafkalog-topics")
    try:
        with report_unreachable(NAME, "default.api.timeout.ms", config["default.api.timeout.ms"]), \
                AdminClient(config) as admin:
            if action == "create":
                _create(admin, args, configs)
            elif action == "list":
                for name in _matching(admin, args, include_internal=not args.exclude_internal):
                    print(name)
            elif action == "describe":
                _describe(admin, _matching(admin, args, include_internal=not args.exclude_internal))
            elif action == "alter":
                _alter(admin, _matching(admin, args), args, configs)
            else:
                topics = _matching(admin, args)
                internal = set(topics) - set(admin.list_topics(include_internal=False))
                if internal:
                    raise CliError(f"Topic {sorted(internal)[0]} is a kafka internal topic and is not "
                                   f"allowed to be marked for deletion.")
                admin.delete_topics(topics).all()
    except KafkaError as exc:
        raise CliError(str(exc)) from None
    return 0


def _create(admin, args, configs: dict[str, str]) -> None:
    from broker.client.admin import NewTopic, TopicAlreadyExistsError

    topic = args.topic
    if "." in topic or "_" in topic:
        warn(NAME, "due to limitations in metric names, topics with a period ('.') or underscore ('_') "
                   "could collide; it is best to use either, but not both")
    new = NewTopic(topic, -1 if args.partitions is None else args.partitions,
                   -1 if args.replication_factor is None else args.replication_factor, configs)
    try:
        admin.create_topics([new])[topic].result()
    except TopicAlreadyExistsError:
        if args.if_not_exists:
            return
        raise
    print(f"Created topic {topic}.")


def _describe(admin, topics: list[str]) -> None:
    from broker.client.admin import ConfigResource, ConfigResourceType

    if not topics:
        return
    descriptions = admin.describe_topics(topics)
    resources = {t: ConfigResource(ConfigResourceType.TOPIC, t) for t in topics}
    configs = admin.describe_configs(list(resources.values()))
    out = sys.stdout
    for topic in topics:
        d = descriptions[topic].result()
        config = configs[resources[topic]].result()
        shown = ",".join(f"{e.name}={'' if e.value is None else e.value}"
                         for e in config.values() if not e.is_default)
        rf = len(d.partitions[0].replicas) if d.partitions else 0
        head = f"Topic: {topic}"
        if d.topic_id is not None:
            head += f"\tTopicId: {_topic_id_text(d.topic_id)}"
        out.write(f"{head}\tPartitionCount: {len(d.partitions)}\tReplicationFactor: {rf}\tConfigs: {shown}\n")
        for p in d.partitions:
            leader = "none" if p.leader is None else p.leader
            out.write(f"\tTopic: {topic}\tPartition: {p.partition}\tLeader: {leader}\t"
                      f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}\n")


def _topic_id_text(topic_id) -> str:
    """Kafka's Uuid text: URL-safe base64 of the 16 bytes, without padding."""
    import base64

    return base64.urlsafe_b64encode(topic_id.bytes).decode("ascii").rstrip("=")


def _alter(admin, topics: list[str], args, configs: dict[str, str]) -> None:
    from broker.client.admin import AlterConfigOp, AlterConfigOpType, ConfigResource, ConfigResourceType

    if not topics:
        return
    ops = [AlterConfigOp(k, v, AlterConfigOpType.SET) for k, v in configs.items()]
    ops += [AlterConfigOp(k.strip(), None, AlterConfigOpType.DELETE) for k in args.delete_config]
    changes = {ConfigResource(ConfigResourceType.TOPIC, t): ops for t in topics} if ops else {}
    counts = {t: args.partitions for t in topics} if args.partitions is not None else {}
    # Validate everything first, so that a bad value or count changes nothing.
    if changes:
        admin.incremental_alter_configs(changes, validate_only=True).all()
    if counts:
        admin.create_partitions(counts, validate_only=True).all()
        admin.create_partitions(counts).all()
    if changes:
        admin.incremental_alter_configs(changes).all()
        for topic in topics:
            print(f"Completed updating config for topic {topic}.")
