"""kafkalog groups: list, describe and delete consumer groups, reset and delete their
committed offsets, like Kafka's kafka-consumer-groups.sh (``ConsumerGroupCommand``).

Owns the command line and the output; the work is
``broker.client.consumer.group_offsets``'s (groups, commits, OffsetDelete),
``broker.client.admin_groups``'s (the reset targets) and ``offsets.latest_offsets``'s (log
end offsets). Exactly one action per run:

  --list [--state [S,S]] [--type [T,T]]
                                   one consumer group id per line, sorted (classic and
                                   consumer groups: share groups are listed by
                                   ``kafkalog share-groups``); with --type and/or --state
                                   Kafka 4's table GROUP [TYPE] [STATE], TYPE "Classic" or
                                   "Consumer" (ListGroups v5; "Unknown" from an older broker),
                                   only the groups of the given types (classic, consumer) and
                                   states, if any
  --describe --group G [--group G2 ...] | --all-groups   [--offsets | --members | --state]
                                   [--verbose]
      --offsets (the default)      per group, after a blank line, the table
                                   GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG
                                   CONSUMER-ID HOST CLIENT-ID
                                   (the partitions assigned to members, members with the
                                   most partitions first, then the committed partitions no
                                   member holds with "-" as consumer columns; "-" for what is
                                   unknown: no committed offset, the log end of a topic that
                                   no longer exists); "Consumer group 'G' has no active
                                   members." goes to stderr first for an Empty group,
                                   "Warning: Consumer group 'G' is rebalancing." for one
                                   that rebalances
      --members                    GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS, and with
                                   --verbose ASSIGNMENT ("t(0,1), u(2)", "-" for none); no
                                   rows for a group without members (a group of simple
                                   consumers, such as the ones this broker holds today)
      --state                      GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE #MEMBERS
                                   (--verbose adds GROUP-EPOCH TARGET-ASSIGNMENT-EPOCH: "-"
                                   for classic groups)
  --delete --group G [--group G2 ...]
                                   "Deletion of requested consumer groups ('G') was successful.";
                                   on failure "Deletion of some consumer groups failed: ..."
                                   naming each group and its error (GROUP_ID_NOT_FOUND ...)
  --reset-offsets --group G ... | --all-groups   --topic T[:P,P] ... | --all-topics
                  --to-earliest | --to-latest | --to-current | --to-offset N | --shift-by N
                  | --to-datetime YYYY-MM-DDTHH:mm:SS.sss   [--dry-run | --execute]
                                   the new offsets, after a blank line, as the table
                                   GROUP TOPIC PARTITION NEW-OFFSET; committed only with
                                   --execute (without --dry-run or --execute Kafka's "WARN: No
                                   action will be performed as the --execute option is
                                   missing. ..." goes to stderr first). Refused for a group
                                   that is not Empty or Dead ("Assignments can only be reset
                                   if the group 'G' is inactive, but the current state is
                                   Stable."). Notes (a clamped offset, an empty partition)
                                   are warnings on stderr. --all-topics: the partitions the
                                   group has committed offsets for.
  --delete-offsets --group G --topic T[:P,P] ...
                                   "Request succeeded for deleting offsets from group G." and
                                   the table TOPIC PARTITION STATUS ("Successful" or
                                   "Error: ..."); needs a broker serving OffsetDelete (a
                                   broker without it is an error naming it)

The broker comes from --bootstrap-server (or --bootstrap-servers), else bootstrap.servers
of --command-config, else localhost:9092. --command-config is a Java properties file of
client settings (client.id, request.timeout.ms, default.api.timeout.ms, ...; keys the
consumer client does not know are ignored with a warning); the command waits at most
default.api.timeout.ms (30000 here unless set) for an unreachable broker.

Errors are one line, exit status 1: bad usage, a group that does not exist with
--describe ("Consumer group 'G' does not exist."), a failed deletion, a reset refused, a
broker without consumer-group support (naming it), an unreachable broker (naming the
addresses tried).

Thread-safety: a command runs on the main thread.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .common import CliError, report_unreachable, warn

NAME = "groups"
SUMMARY = "list, describe and delete consumer groups, reset and delete their offsets (like kafka-consumer-groups.sh)"

DEFAULT_BOOTSTRAP = "localhost:9092"
DEFAULT_API_TIMEOUT_MS = 30000
_ACTIONS = ("list", "describe", "delete", "reset_offsets", "delete_offsets")
HEADERS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
           "CLIENT-ID")
MEMBER_HEADERS = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
STATE_HEADERS = ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")
RESET_HEADERS = ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")
MISSING = "-"
GROUP_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty")
_REBALANCING = ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling")
_SCENARIOS = ("to_earliest", "to_latest", "to_current", "to_offset", "shift_by", "to_datetime")
DRY_RUN_WARNING = (
    "WARN: No action will be performed as the --execute option is missing. In a future major release, the "
    "default behavior of this command will be to prompt the user before executing the reset rather than doing "
    "a dry run. You should add the --dry-run option explicitly if you are scripting this command and want to "
    "keep the current default behavior without prompting.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--list", action="store_true", help="list every consumer group")
    actions.add_argument("--describe", action="store_true",
                         help="show the committed offsets, log end offsets and lag of groups (or, with "
                              "--members / --state, their members / state)")
    actions.add_argument("--delete", action="store_true", help="delete groups and their committed offsets")
    actions.add_argument("--reset-offsets", action="store_true",
                         help="reset the offsets of inactive groups (a dry run unless --execute)")
    actions.add_argument("--delete-offsets", action="store_true",
                         help="delete the committed offsets of a group for --topic (OffsetDelete)")
    parser.add_argument("--bootstrap-server", "--bootstrap-servers", dest="bootstrap_server", metavar="HOST:PORT",
                        help=f"the broker(s) to connect to, comma-separated (default {DEFAULT_BOOTSTRAP})")
    parser.add_argument("--group", action="append", default=[], metavar="GROUP",
                        help="the group to act on (repeatable)")
    parser.add_argument("--all-groups", action="store_true",
                        help="with --describe or --reset-offsets: every consumer group (no share group)")
    parser.add_argument("--topic", action="append", default=[], metavar="TOPIC[:P,P]",
                        help="with --reset-offsets / --delete-offsets: a topic, or some of its partitions "
                             "(repeatable)")
    parser.add_argument("--all-topics", action="store_true",
                        help="with --reset-offsets: every partition the group has committed offsets for")
    parser.add_argument("--to-earliest", action="store_true", help="reset offsets to the earliest offset")
    parser.add_argument("--to-latest", action="store_true", help="reset offsets to the latest offset")
    parser.add_argument("--to-current", action="store_true", help="reset offsets to the current offset")
    parser.add_argument("--to-offset", type=int, metavar="OFFSET", help="reset offsets to this offset")
    parser.add_argument("--shift-by", type=int, metavar="N",
                        help="reset offsets shifting the current offset by N (positive or negative)")
    parser.add_argument("--to-datetime", metavar="DATETIME",
                        help="reset offsets to the offset at a time, format YYYY-MM-DDTHH:mm:SS.sss (UTC unless "
                             "a zone such as +01:00 follows)")
    parser.add_argument("--dry-run", action="store_true", help="with --reset-offsets: only show the new offsets")
    parser.add_argument("--execute", action="store_true", help="with --reset-offsets: commit the new offsets")
    parser.add_argument("--offsets", action="store_true", help="with --describe: offsets and lag (the default)")
    parser.add_argument("--members", action="store_true", help="with --describe: the group's members")
    parser.add_argument("--state", nargs="?", const="", default=None, metavar="STATES",
                        help="with --describe: the group's state; with --list: each group's state (optionally "
                             "only those in the comma-separated STATES)")
    parser.add_argument("--type", nargs="?", const="", default=None, metavar="TYPES",
                        help="with --list: each group's type (optionally only those of the comma-separated TYPES: "
                             "classic, consumer)")
    parser.add_argument("--verbose", action="store_true",
                        help="with --describe --members: each member's assignment; with --state: the epochs")
    parser.add_argument("--command-config", metavar="FILE",
                        help="client settings (Java properties: client.id, request.timeout.ms, ...)")


def _action(args: argparse.Namespace) -> str:
    return next(a for a in _ACTIONS if getattr(args, a))


def _scenarios(args: argparse.Namespace) -> list[str]:
    return [s for s in _SCENARIOS if getattr(args, s) not in (None, False)]


def check_group_options(args: argparse.Namespace, action: str, scenarios: list[str], scenario_flags: str,
                        scenario_choices: str) -> None:
    """The option checks kafka-consumer-groups.sh and kafka-share-groups.sh share (CliError):
    ``scenarios``, the reset scenarios given; ``scenario_flags`` / ``scenario_choices`` word
    the messages (the other options than --to-*, and the list of scenarios)."""
    for group in args.group:
        if not group:
            raise CliError("--group must not be empty")
    if action != "describe" and (args.members or args.offsets or args.verbose):
        raise CliError("--members, --offsets and --verbose can only be used with --describe")
    if action not in ("describe", "list") and args.state is not None:
        raise CliError("--state can only be used with --describe or --list")
    if action != "reset_offsets":
        if scenarios or args.all_topics or args.dry_run or args.execute:
            raise CliError(f"--to-*, {scenario_flags}, --all-topics, --dry-run and --execute can only be used with "
                           "--reset-offsets")
        if args.topic and action != "delete_offsets":
            raise CliError("--topic can only be used with --reset-offsets or --delete-offsets")
    if action == "list":
        if args.group or args.all_groups:
            raise CliError("--list takes no --group or --all-groups")
    elif action == "describe":
        if bool(args.group) == bool(args.all_groups):
            raise CliError("--describe needs exactly one of --group or --all-groups")
        if sum((args.members, args.offsets, args.state is not None)) > 1:
            raise CliError("--describe takes at most one of --members, --offsets, --state")
        if args.state:
            raise CliError("--describe does not take a value for --state")
    elif action == "delete_offsets":
        if args.all_groups or len(args.group) != 1 or not args.topic:
            raise CliError("--delete-offsets takes one --group and at least one --topic")
    elif action == "reset_offsets":
        if bool(args.group) == bool(args.all_groups):
            raise CliError("--reset-offsets needs exactly one of --group or --all-groups")
        if len(scenarios) != 1:
            raise CliError(f"--reset-offsets needs exactly one of {scenario_choices}")
        if bool(args.topic) == bool(args.all_topics):
            raise CliError("--reset-offsets needs exactly one of the reset scopes --all-topics, --topic")
        if args.dry_run and args.execute:
            raise CliError("--reset-offsets only accepts one of --execute and --dry-run")
        if args.to_datetime is not None:
            from broker.client.admin_groups import parse_datetime

            try:
                parse_datetime(args.to_datetime)
            except ValueError as exc:
                raise CliError(str(exc)) from None


def _check_options(args: argparse.Namespace, action: str) -> None:
    if action != "list" and args.type is not None:
        raise CliError("--type can only be used with --list")
    check_group_options(args, action, _scenarios(args), "--shift-by",
                        "--to-earliest, --to-latest, --to-current, --to-offset, --shift-by, --to-datetime")
    if action == "delete":
        if args.all_groups:
            raise CliError("--all-groups can only be used with --describe or --reset-offsets")
        if not args.group:
            raise CliError("--delete needs --group")


def _client_config(args: argparse.Namespace) -> dict[str, Any]:
    from broker.client.consumer.config import CONSUMER_CONFIG_DEF
    from broker.config import load_properties

    config: dict[str, Any] = {}
    if args.command_config:
        for key, value in load_properties(args.command_config).items():
            if key in CONSUMER_CONFIG_DEF.keys:
                config[key] = value
            else:
                warn(NAME, f"{args.command_config}: {key} is not a client setting used here; ignored")
    if args.bootstrap_server:
        config["bootstrap.servers"] = args.bootstrap_server
    config.setdefault("bootstrap.servers", DEFAULT_BOOTSTRAP)
    config.setdefault("default.api.timeout.ms", DEFAULT_API_TIMEOUT_MS)
    config.setdefault("client.id", "kafkalog-groups")
    return config


def run(args: argparse.Namespace) -> int:
    from broker.client.consumer import group_offsets
    from broker.client.consumer.client import ConsumerNetworkClient
    from broker.client.consumer.config import ConsumerConfig
    from broker.client.errors import KafkaError

    action = _action(args)
    _check_options(args, action)
    if action == "reset_offsets" and not (args.dry_run or args.execute):
        print(DRY_RUN_WARNING, file=sys.stderr, flush=True)
    cfg = ConsumerConfig(_client_config(args))
    try:
        with report_unreachable(NAME, "default.api.timeout.ms", cfg["default.api.timeout.ms"]), \
                ConsumerNetworkClient(cfg) as client:
            if action == "list":
                _list(client, args.state, args.type)
            elif action == "describe":
                groups = args.group or [g.group_id for g in _consumer_groups(client)]
                groups = list(dict.fromkeys(groups))
                if args.members:
                    _describe_members(client, groups, args.verbose)
                elif args.state is not None:
                    _describe_state(client, groups, args.verbose)
                else:
                    _describe(client, groups)
            elif action == "delete":
                groups = list(dict.fromkeys(args.group))
                try:
                    group_offsets.delete_groups(client, groups)
                except group_offsets.GroupsNotSupportedError:
                    raise
                except KafkaError as exc:
                    raise CliError(f"Deletion of some consumer groups failed: {exc}") from None
                print(f"Deletion of requested consumer groups ({', '.join(repr(g) for g in groups)}) "
                      "was successful.")
            elif action == "reset_offsets":
                _reset_offsets(client, args)
            else:
                _delete_offsets(client, args.group[0], args.topic)
    except (KafkaError, ValueError) as exc:
        raise CliError(str(exc)) from None
    return 0


# --- list ---

GROUP_TYPES = ("classic", "consumer")


def _consumer_groups(client: Any) -> list:
    """The cluster's consumer groups (Kafka's ListGroupsOptions.forConsumerGroups), which
    ``--list`` prints and ``--all-groups`` means: share groups are kafka-share-groups.sh's,
    and "" is the type an older broker (ListGroups < v5) gives."""
    from broker.client import admin_share

    return [g for g in admin_share.list_groups(client) if g.group_type in ("", *GROUP_TYPES)]


def _list(client: Any, states: str | None, types: str | None = None) -> None:
    listings = _consumer_groups(client)
    if states is None and types is None:
        for listing in listings:
            print(listing.group_id)
        return
    wanted = {s.strip().lower() for s in (states or "").split(",") if s.strip()}
    valid = {s.lower() for s in GROUP_STATES}
    if wanted - valid:
        raise CliError(f"Invalid state list '{states}'. Valid states are: {', '.join(GROUP_STATES)}")
    wanted_types = {t.strip().lower() for t in (types or "").split(",") if t.strip()}
    if wanted_types - set(GROUP_TYPES):
        raise CliError(f"Invalid types list '{types}'. Valid types are: {', '.join(GROUP_TYPES)}")
    chosen = [g for g in listings if (not wanted or g.state.lower() in wanted)
              and (not wanted_types or g.group_type in wanted_types)]
    header = ("GROUP", *(("TYPE",) if types is not None else ()), *(("STATE",) if states is not None else ()))
    rows = [(g.group_id, *((g.group_type.capitalize() or "Unknown",) if types is not None else ()),
             *((g.state or "Unknown",) if states is not None else ())) for g in chosen]
    width = max([15] + [len(r[0]) for r in rows]) + 10
    for row in [header, *rows]:
        print(f"{row[0]:<{width}}" + "".join(f" {cell:<20}" for cell in row[1:]))


# --- describe ---

def _state_note(group: str, state: str) -> None:
    """Kafka's shouldPrintMemberState: the note on stderr; a Dead group is an error."""
    if state == "Dead":
        raise CliError(f"Consumer group '{group}' does not exist.")
    if state == "Empty":
        print(f"Consumer group '{group}' has no active members.", file=sys.stderr, flush=True)
    elif state in _REBALANCING:
        print(f"Warning: Consumer group '{group}' is rebalancing.", file=sys.stderr, flush=True)


def _described(client: Any, groups: list[str]) -> dict:
    from broker.client.consumer import group_offsets

    described = group_offsets.describe_groups(client, groups)
    missing = [g for g in groups if described[g].state == "Dead"]
    if missing:
        raise CliError(f"Consumer group '{missing[0]}' does not exist.")
    return described


def _describe(client: Any, groups: list[str]) -> None:
    from broker.client.consumer import group_offsets
    from broker.client.consumer.offsets import latest_offsets, partitions_for

    described = _described(client, groups)
    for group in groups:
        desc = described[group]
        committed = group_offsets.list_group_offsets(client, group)
        members = sorted((m for m in desc.members if m.assignment), key=lambda m: -len(m.assignment))
        assigned = {tp for m in members for tp in m.assignment}
        wanted = list(dict.fromkeys([*(tp for m in members for tp in m.assignment), *committed]))
        existing = partitions_for(client, {tp.topic for tp in wanted})
        known = [tp for tp in wanted if any(p.partition == tp.partition for p in existing.get(tp.topic, ()))]
        ends = latest_offsets(client, known) if known else {}
        _state_note(group, desc.state)

        rows = [_offsets_row(group, tp, committed.get(tp), ends.get(tp), m.member_id, m.client_host, m.client_id)
                for m in members for tp in m.assignment]
        rows += [_offsets_row(group, tp, committed[tp], ends.get(tp), MISSING, MISSING, MISSING)
                 for tp in committed if tp not in assigned]
        _print_table(HEADERS, rows, [15, 15, 10, 15, 15, 15, 15, 15], grow=(0, 1, 6, 7))


def _offsets_row(group: str, tp: Any, offset: int | None, end: int | None, consumer: str, host: str,
                 client_id: str) -> tuple[str, ...]:
    lag = MISSING if offset is None or end is None else str(end - offset)
    return (group, tp.topic, str(tp.partition), MISSING if offset is None else str(offset),
            MISSING if end is None else str(end), lag, consumer, host, client_id)


def _assignment_text(assignment: tuple) -> str:
    """Kafka's (3.x) ASSIGNMENT cell: ``t(0,1), u(2)``, topics sorted; "-" for none."""
    if not assignment:
        return MISSING
    by_topic: dict[str, list[int]] = {}
    for tp in assignment:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ", ".join(sorted(f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in by_topic.items()))


def _describe_members(client: Any, groups: list[str], verbose: bool) -> None:
    described = _described(client, groups)
    for group in groups:
        desc = described[group]
        _state_note(group, desc.state)
        rows = [(group, m.member_id, m.client_host, m.client_id, str(len(m.assignment)))
                + ((_assignment_text(m.assignment),) if verbose else ()) for m in desc.members]
        headers = MEMBER_HEADERS + (("ASSIGNMENT",) if verbose else ())
        widths = [15, 15, 15, 15, 15] if verbose else [15, 15, 15, 15]
        _print_table(headers, rows, widths, grow=(0, 1, 2, 3), pad_last=not verbose)


def _describe_state(client: Any, groups: list[str], verbose: bool) -> None:
    described = _described(client, groups)
    for group in groups:
        desc = described[group]
        _state_note(group, desc.state)
        c = desc.coordinator
        coordinator = f"{c.host}:{c.port}  ({c.node_id})" if c is not None else MISSING
        strategy = desc.protocol or MISSING
        if verbose:
            headers = ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH",
                       "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS")
            row = (group, coordinator, strategy, desc.state, MISSING, MISSING, str(len(desc.members)))
            widths = [15, 25, 20, 20, 15, 25]
        else:
            headers, widths = STATE_HEADERS, [15, 25, 20, 20]
            row = (group, coordinator, strategy, desc.state, str(len(desc.members)))
        _print_table(headers, [row], widths, grow=(0, 1))


# --- reset / delete offsets ---

def _reset_spec(args: argparse.Namespace) -> Any:
    from broker.client.admin_groups import OffsetResetSpec

    if args.to_earliest:
        return OffsetResetSpec.to_earliest()
    if args.to_latest:
        return OffsetResetSpec.to_latest()
    if args.to_current:
        return OffsetResetSpec.to_current()
    if args.to_offset is not None:
        return OffsetResetSpec.to_offset(args.to_offset)
    if args.shift_by is not None:
        return OffsetResetSpec.shift_by(args.shift_by)
    return OffsetResetSpec.to_datetime(args.to_datetime)


def _reset_offsets(client: Any, args: argparse.Namespace) -> None:
    from broker.client import admin_groups
    from broker.client.consumer import group_offsets

    spec = _reset_spec(args)
    groups = list(dict.fromkeys(args.group or [g.group_id for g in _consumer_groups(client)]))
    described = group_offsets.describe_groups(client, groups) if groups else {}
    for group in groups:
        state = described[group].state
        if state not in ("Empty", "Dead"):
            raise CliError(f"Assignments can only be reset if the group '{group}' is inactive, but the current "
                           f"state is {state}.")
    scoped = admin_groups.parse_topic_partitions(client, args.topic) if args.topic else None
    plans = {}
    for group in groups:
        partitions = scoped if scoped is not None else list(group_offsets.list_group_offsets(client, group))
        plan = admin_groups.plan_offsets_reset(client, group, partitions, spec)
        for note in plan.warnings:
            warn(NAME, note)
        if args.execute and plan.offsets:
            group_offsets.commit_offsets(client, group, plan.offsets)
        plans[group] = plan.offsets
    rows = [(g, tp.topic, str(tp.partition), str(offset)) for g, offsets in plans.items()
            for tp, offset in offsets.items()]
    if rows:
        _print_table(RESET_HEADERS, rows, [15, 15, 10], grow=(0, 1))
    else:
        print()


def _delete_offsets(client: Any, group: str, topics: list[str]) -> None:
    from broker.client import admin_groups
    from broker.client.consumer import group_offsets

    partitions = admin_groups.parse_topic_partitions(client, topics)
    results = group_offsets.delete_group_offsets(client, group, partitions)
    failed = {tp: e for tp, e in results.items() if e is not None}
    if failed:
        warn(NAME, "Encountered some partition-level error, see the follow-up details.")
    else:
        print(f"Request succeeded for deleting offsets from group {group}.")
    rows = [(tp.topic, str(tp.partition), "Successful" if e is None else f"Error: {e}")
            for tp, e in sorted(results.items())]
    _print_table(("TOPIC", "PARTITION", "STATUS"), rows, [15, 10], grow=(0,))
    if failed:
        raise CliError(f"deleting the offsets of {len(failed)} partition(s) from group {group} failed")


def _print_table(headers: tuple[str, ...], rows: list[tuple[str, ...]], widths: list[int], *,
                 grow: tuple[int, ...] = (), pad_last: bool = False) -> None:
    """Kafka's layout: a blank line, the header, the rows; each column but the last padded
    to its width (the ``grow`` ones as wide as their longest cell), one space between;
    ``pad_last``: the last column padded to 15 and followed by a space (the members table)."""
    widths = list(widths)
    for i in grow:
        widths[i] = max([widths[i]] + [len(r[i]) for r in rows])
    print()
    for row in [headers, *rows]:
        cells = [f"{cell:<{w}}" for cell, w in zip(row, widths)]
        last = f"{row[-1]:<15} " if pad_last else row[-1]
        print(" ".join([*cells, last]))
