"""kafkalog share-groups: list, describe and delete share groups (KIP-932), reset and
delete their start offsets, like Kafka's kafka-share-groups.sh (``ShareGroupCommand``,
Kafka 4.2).

Owns the command line and the output; the work is ``broker.client.admin_share``'s (the
share group calls), ``broker.client.admin_groups``'s (the reset targets, shared with
``kafkalog groups``) and ``broker.tools.consumer_groups``'s (client settings, tables).
Exactly one action per run:

  --list [--state [S,S]]           one share group id per line, sorted; with --state the
                                   table GROUP STATE (only the groups in the given states:
                                   Empty, Stable, Dead)
  --describe --group G [--group G2 ...] | --all-groups   [--offsets | --members | --state]
                                   [--verbose]
      --offsets (the default)      per group, after a blank line, the table
                                   GROUP TOPIC PARTITION START-OFFSET LAG (--verbose:
                                   GROUP TOPIC PARTITION LEADER-EPOCH START-OFFSET LAG), one
                                   row per partition with share state, sorted; "-" for what
                                   is unknown; no table for a group without share state
      --members                    GROUP CONSUMER-ID HOST CLIENT-ID ASSIGNMENT (--verbose
                                   adds MEMBER-EPOCH before ASSIGNMENT); ASSIGNMENT as
                                   "t:0,1;u:2"; no table for a group without members
      --state                      GROUP COORDINATOR (ID) STATE #MEMBERS (--verbose:
                                   GROUP COORDINATOR (ID) STATE GROUP-EPOCH ASSIGNMENT-EPOCH
                                   #MEMBERS)
                                   "Share group 'G' has no active members." goes to stderr
                                   first for an Empty group; a group that does not exist is
                                   an error ("Share group 'G' does not exist.")
  --delete --group G [--group G2 ...] | --all-groups
                                   "Deletion of requested share groups ('G') was
                                   successful."; a group with members, one that does not
                                   exist or one of another type ("Group 'G' is not a share
                                   group.") fails: "Deletion of some share groups failed:
                                   ..." naming each, after the deleted ones are listed
  --reset-offsets --group G ... | --all-groups   --topic T[:P,P] ... | --all-topics
                  --to-earliest | --to-latest | --to-offset N | --to-datetime
                  YYYY-MM-DDTHH:mm:SS.sss | --by-duration PnDTnHnMnS   [--dry-run | --execute]
                                   the new start offsets, after a blank line, as the table
                                   GROUP TOPIC PARTITION NEW-OFFSET; set only with --execute
                                   (without --dry-run or --execute Kafka's "WARN: No action
                                   will be performed ..." goes to stderr first). Refused for
                                   a group with members ("Share group 'G' is not empty.").
                                   --all-topics: the partitions the group has share state
                                   for. A group that does not exist is created by --execute
                                   (AlterShareGroupOffsets). Notes (a clamped offset, an
                                   empty partition) are warnings on stderr.
  --delete-offsets --group G --topic T ...
                                   drops the share state of every partition of the topics
                                   (the next fetch starts at share.auto.offset.reset):
                                   "Request succeeded for deleting offsets from group G." and
                                   the table TOPIC STATUS ("Successful" or "Error: ...")

The broker comes from --bootstrap-server, else bootstrap.servers of --command-config,
else localhost:9092 (as ``kafkalog groups``: a Java properties file of client settings);
the command waits at most default.api.timeout.ms (30000 unless set) for an unreachable
broker.

Errors are one line, exit status 1: bad usage, a group that does not exist with
--describe, a group with members for --reset-offsets / --delete-offsets, a failed
deletion, a broker without share groups (naming it), an unreachable broker.

Thread-safety: a command runs on the main thread.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from broker.config import parse_duration_ms

from .common import CliError, report_unreachable, warn
from .consumer_groups import (
    DRY_RUN_WARNING,
    MISSING,
    RESET_HEADERS,
    _client_config,
    _print_table,
    check_group_options,
)

NAME = "share-groups"
SUMMARY = "list, describe and delete share groups, reset and delete their offsets (like kafka-share-groups.sh)"

_ACTIONS = ("list", "describe", "delete", "reset_offsets", "delete_offsets")
_SCENARIOS = ("to_earliest", "to_latest", "to_offset", "to_datetime", "by_duration")
SHARE_GROUP_STATES = ("Empty", "Stable", "Dead")
OFFSET_HEADERS = ("GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG")
VERBOSE_OFFSET_HEADERS = ("GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "START-OFFSET", "LAG")
MEMBER_HEADERS = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "ASSIGNMENT")
VERBOSE_MEMBER_HEADERS = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "MEMBER-EPOCH", "ASSIGNMENT")
STATE_HEADERS = ("GROUP", "COORDINATOR (ID)", "STATE", "#MEMBERS")
VERBOSE_STATE_HEADERS = ("GROUP", "COORDINATOR (ID)", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH", "#MEMBERS")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--list", action="store_true", help="list every share group")
    actions.add_argument("--describe", action="store_true",
                         help="show the start offsets and lag of share groups (or, with --members / --state, their "
                              "members / state)")
    actions.add_argument("--delete", action="store_true", help="delete share groups")
    actions.add_argument("--reset-offsets", action="store_true",
                         help="reset the start offsets of share groups without members (a dry run unless --execute)")
    actions.add_argument("--delete-offsets", action="store_true",
                         help="delete the share state of a group for --topic")
    parser.add_argument("--bootstrap-server", "--bootstrap-servers", dest="bootstrap_server", metavar="HOST:PORT",
                        help="the broker(s) to connect to, comma-separated (default localhost:9092)")
    parser.add_argument("--command-config", metavar="FILE",
                        help="client settings (Java properties: client.id, request.timeout.ms, ...)")
    parser.add_argument("--group", action="append", default=[], metavar="GROUP",
                        help="the share group to act on (repeatable)")
    parser.add_argument("--all-groups", action="store_true",
                        help="with --describe, --reset-offsets or --delete: every share group")
    parser.add_argument("--topic", action="append", default=[], metavar="TOPIC[:P,P]",
                        help="with --reset-offsets: a topic, or some of its partitions; with --delete-offsets: a "
                             "topic (repeatable)")
    parser.add_argument("--all-topics", action="store_true",
                        help="with --reset-offsets: every partition the group has share state for")
    parser.add_argument("--to-earliest", action="store_true", help="reset offsets to the earliest offset")
    parser.add_argument("--to-latest", action="store_true", help="reset offsets to the latest offset")
    parser.add_argument("--to-offset", type=int, metavar="OFFSET", help="reset offsets to this offset")
    parser.add_argument("--to-datetime", metavar="DATETIME",
                        help="reset offsets to the offset at a time, format YYYY-MM-DDTHH:mm:SS.sss (UTC unless "
                             "a zone such as +01:00 follows)")
    parser.add_argument("--by-duration", metavar="DURATION",
                        help="reset offsets to the offset at this long ago, format PnDTnHnMnS (ISO 8601)")
    parser.add_argument("--dry-run", action="store_true", help="with --reset-offsets: only show the new offsets")
    parser.add_argument("--execute", action="store_true", help="with --reset-offsets: set the new offsets")
    parser.add_argument("--offsets", action="store_true", help="with --describe: start offsets and lag (the default)")
    parser.add_argument("--members", action="store_true", help="with --describe: the group's members")
    parser.add_argument("--state", nargs="?", const="", default=None, metavar="STATES",
                        help="with --describe: the group's state; with --list: each group's state (optionally "
                             "only those in the comma-separated STATES)")
    parser.add_argument("--verbose", action="store_true",
                        help="with --describe: leader epochs, member epochs, group epochs")


def _action(args: argparse.Namespace) -> str:
    return next(a for a in _ACTIONS if getattr(args, a))


def _scenarios(args: argparse.Namespace) -> list[str]:
    return [s for s in _SCENARIOS if getattr(args, s) not in (None, False)]


def _check_options(args: argparse.Namespace, action: str) -> None:
    check_group_options(args, action, _scenarios(args), "--by-duration",
                        "--to-earliest, --to-latest, --to-offset, --to-datetime, --by-duration")
    if action == "delete":
        if bool(args.group) == bool(args.all_groups):
            raise CliError("--delete needs exactly one of --group or --all-groups")
    elif action == "delete_offsets":
        for topic in args.topic:
            if not topic or ":" in topic:
                raise CliError(f"--delete-offsets takes topic names (every partition), not '{topic}'")
    elif action == "reset_offsets":
        if args.to_offset is not None and args.to_offset < 0:
            raise CliError(f"--to-offset must not be negative, not {args.to_offset}")
        try:
            if args.by_duration is not None and parse_duration_ms(args.by_duration) < 0:
                raise ValueError(f"--by-duration must not be negative, not '{args.by_duration}'")
        except ValueError as exc:
            raise CliError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    from broker.client.consumer.client import ConsumerNetworkClient
    from broker.client.consumer.config import ConsumerConfig
    from broker.client.errors import KafkaError

    action = _action(args)
    _check_options(args, action)
    if action == "reset_offsets" and not (args.dry_run or args.execute):
        print(DRY_RUN_WARNING, file=sys.stderr, flush=True)
    config = _client_config(args)
    if config["client.id"] == "kafkalog-groups":
        config["client.id"] = "kafkalog-share-groups"
    cfg = ConsumerConfig(config)
    try:
        with report_unreachable(NAME, "default.api.timeout.ms", cfg["default.api.timeout.ms"]), \
                ConsumerNetworkClient(cfg) as client:
            if action == "list":
                _list(client, args.state)
            elif action == "describe":
                groups = list(dict.fromkeys(args.group or _share_group_ids(client)))
                described = _described(client, groups)
                if args.members:
                    _describe_members(described, args.verbose)
                elif args.state is not None:
                    _describe_state(described, args.verbose)
                else:
                    _describe_offsets(client, described, args.verbose)
            elif action == "delete":
                _delete(client, list(dict.fromkeys(args.group or _share_group_ids(client))))
            elif action == "reset_offsets":
                _reset_offsets(client, args)
            else:
                _delete_offsets(client, args.group[0], list(dict.fromkeys(args.topic)))
    except (KafkaError, ValueError) as exc:
        raise CliError(str(exc)) from None
    return 0


def _share_group_ids(client: Any) -> list[str]:
    from broker.client import admin_share

    return [g.group_id for g in admin_share.list_groups(client, types=[admin_share.SHARE_GROUP_TYPE])]


# --- list ---

def _list(client: Any, states: str | None) -> None:
    from broker.client import admin_share

    listings = admin_share.list_groups(client, types=[admin_share.SHARE_GROUP_TYPE])
    if states is None:
        for listing in listings:
            print(listing.group_id)
        return
    wanted = {s.strip().lower() for s in states.split(",") if s.strip()}
    if wanted - {s.lower() for s in SHARE_GROUP_STATES}:
        raise CliError(f"Invalid state list '{states}'. Valid states are: {', '.join(SHARE_GROUP_STATES)}")
    rows = [(g.group_id, g.state or "Unknown") for g in listings if not wanted or g.state.lower() in wanted]
    width = max([15] + [len(r[0]) for r in rows])
    for row in [("GROUP", "STATE"), *rows]:
        print(f"{row[0]:<{width}} {row[1]}")


# --- describe ---

def _described(client: Any, groups: list[str]) -> dict:
    from broker.client import admin_share

    described = admin_share.describe_share_groups(client, groups)
    for group in groups:
        if described[group].state == "Dead":
            raise CliError(f"Share group '{group}' does not exist.")
    return described


def _empty_note(group: str, state: str) -> None:
    if state == "Empty":
        print(f"Share group '{group}' has no active members.", file=sys.stderr, flush=True)


def _describe_offsets(client: Any, described: dict, verbose: bool) -> None:
    from broker.client import admin_share

    for group, desc in described.items():
        _empty_note(group, desc.state)
        offsets = admin_share.list_share_group_offsets(client, group)
        rows = []
        for tp, info in offsets.items():
            start = MISSING if info.start_offset is None else str(info.start_offset)
            lag = MISSING if info.lag is None else str(info.lag)
            epoch = MISSING if info.leader_epoch is None else str(info.leader_epoch)
            rows.append((group, tp.topic, str(tp.partition), *((epoch,) if verbose else ()), start, lag))
        if not rows:
            continue
        if verbose:
            _print_table(VERBOSE_OFFSET_HEADERS, rows, [15, 15, 10, 13, 13], grow=(0, 1))
        else:
            _print_table(OFFSET_HEADERS, rows, [15, 15, 10, 13], grow=(0, 1))


def assignment_text(assignment: tuple) -> str:
    """kafka-share-groups.sh's ASSIGNMENT cell: ``t:0,1;u:2``, topics sorted; "" for none."""
    by_topic: dict[str, list[int]] = {}
    for tp in assignment:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ";".join(f"{t}:{','.join(map(str, sorted(ps)))}" for t, ps in sorted(by_topic.items()))


def _describe_members(described: dict, verbose: bool) -> None:
    for group, desc in described.items():
        _empty_note(group, desc.state)
        if not desc.members:
            continue
        rows = [(group, m.member_id, m.client_host, m.client_id, *((str(m.member_epoch),) if verbose else ()),
                 assignment_text(m.assignment)) for m in desc.members]
        if verbose:
            _print_table(VERBOSE_MEMBER_HEADERS, rows, [15, 15, 15, 15, 13], grow=(0, 1, 2, 3))
        else:
            _print_table(MEMBER_HEADERS, rows, [15, 15, 15, 15], grow=(0, 1, 2, 3))


def _describe_state(described: dict, verbose: bool) -> None:
    for group, desc in described.items():
        _empty_note(group, desc.state)
        c = desc.coordinator
        coordinator = f"{c.host}:{c.port}  ({c.node_id})" if c is not None else MISSING
        row: tuple[str, ...]
        if verbose:
            row = (group, coordinator, desc.state, str(desc.group_epoch), str(desc.assignment_epoch),
                   str(len(desc.members)))
            _print_table(VERBOSE_STATE_HEADERS, [row], [15, 25, 15, 12, 17], grow=(0, 1))
        else:
            row = (group, coordinator, desc.state, str(len(desc.members)))
            _print_table(STATE_HEADERS, [row], [15, 25, 15], grow=(0, 1))


# --- delete ---

def _delete(client: Any, groups: list[str]) -> None:
    from broker.client import admin_share

    types = {g.group_id: g.group_type for g in admin_share.list_groups(client)}
    failed: dict[str, str] = {}
    for group in groups:
        if types.get(group, admin_share.SHARE_GROUP_TYPE) != admin_share.SHARE_GROUP_TYPE:
            failed[group] = f"Group '{group}' is not a share group."
    results = admin_share.delete_share_groups(client, [g for g in groups if g not in failed])
    failed.update({g: str(e) for g, e in results.items() if e is not None})
    deleted = [g for g in groups if g not in failed]
    if not failed:
        print(f"Deletion of requested share groups ({', '.join(repr(g) for g in groups)}) was successful.")
        return
    if deleted:
        print(f"These share groups were deleted successfully: {', '.join(repr(g) for g in deleted)}")
    raise CliError("Deletion of some share groups failed: "
                   + "; ".join(f"Share group '{g}' could not be deleted due to: {e}" for g, e in failed.items()))


# --- reset / delete offsets ---

def _reset_spec(args: argparse.Namespace) -> Any:
    from broker.client.admin_groups import OffsetResetSpec

    if args.to_earliest:
        return OffsetResetSpec.to_earliest()
    if args.to_latest:
        return OffsetResetSpec.to_latest()
    if args.to_offset is not None:
        return OffsetResetSpec.to_offset(args.to_offset)
    if args.by_duration is not None:
        return OffsetResetSpec.to_datetime(max(0, int(time.time() * 1000) - parse_duration_ms(args.by_duration)))
    return OffsetResetSpec.to_datetime(args.to_datetime)


def _reset_offsets(client: Any, args: argparse.Namespace) -> None:
    from broker.client import admin_groups, admin_share

    spec = _reset_spec(args)
    groups = list(dict.fromkeys(args.group or _share_group_ids(client)))
    described = admin_share.describe_share_groups(client, groups) if groups else {}
    for group in groups:
        if described[group].state not in ("Empty", "Dead"):
            raise CliError(f"Share group '{group}' is not empty.")
    scoped = admin_groups.parse_topic_partitions(client, args.topic) if args.topic else None
    rows: list[tuple[str, ...]] = []
    for group in groups:
        partitions = scoped if scoped is not None else list(admin_share.list_share_group_offsets(client, group))
        plan = admin_groups.plan_offsets_reset(client, group, partitions, spec)
        for note in plan.warnings:
            warn(NAME, note)
        if args.execute and plan.offsets:
            errors = admin_share.alter_share_group_offsets(client, group, plan.offsets)
            failed = {tp: e for tp, e in errors.items() if e is not None}
            if failed:
                raise CliError(f"Resetting the offsets of share group '{group}' failed: "
                               + "; ".join(f"{tp}: {e}" for tp, e in failed.items()))
        rows += [(group, tp.topic, str(tp.partition), str(offset)) for tp, offset in plan.offsets.items()]
    if rows:
        _print_table(RESET_HEADERS, rows, [30, 30, 10], grow=(0, 1))
    else:
        print()


def _delete_offsets(client: Any, group: str, topics: list[str]) -> None:
    from broker.client import admin_share

    results = admin_share.delete_share_group_offsets(client, group, topics)
    failed = {t: e for t, e in results.items() if e is not None}
    if failed:
        warn(NAME, "Encountered some topic-level error, see the follow-up details.")
    else:
        print(f"Request succeeded for deleting offsets from group {group}.")
    rows: list[tuple[str, ...]] = [(t, "Successful" if e is None else f"Error: {e}")
                                   for t, e in sorted(results.items())]
    _print_table(("TOPIC", "STATUS"), rows, [30], grow=(0,))
    if failed:
        raise CliError(f"deleting the offsets of {len(failed)} topic(s) from share group {group} failed")
