"""kafkalog groups: list, describe and delete consumer groups and their committed offsets,
like Kafka's kafka-consumer-groups.sh.

Owns the command line and the output; the work is
``broker.client.consumer.group_offsets``'s (and ``offsets.latest_offsets`` for the log end
offsets). Exactly one action per run:

  --list                           one group id per line, sorted
  --describe --group G [--group G2 ...] | --all-groups
                                   per group, after a blank line, the table
                                   GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG
                                   CONSUMER-ID HOST CLIENT-ID
                                   (one row per partition with a committed offset; "-" for
                                   what is unknown: the log end of a topic that no longer
                                   exists, and the consumer columns, since no group has
                                   active members on this broker); "Consumer group 'G' has no
                                   active members." goes to stderr first, as Kafka prints it
  --delete --group G [--group G2 ...]
                                   "Deletion of requested consumer groups ('G') was successful.";
                                   on failure "Deletion of some consumer groups failed: ..."
                                   naming each group and its error (GROUP_ID_NOT_FOUND ...)

The broker comes from --bootstrap-server (or --bootstrap-servers), else bootstrap.servers
of --command-config, else localhost:9092. --command-config is a Java properties file of
client settings (client.id, request.timeout.ms, default.api.timeout.ms, ...; keys the
consumer client does not know are ignored with a warning); the command waits at most
default.api.timeout.ms (30000 here unless set) for an unreachable broker.

Errors are one line, exit status 1: a group that does not exist with --describe ("Consumer
group 'G' does not exist."), a failed deletion, a broker without consumer-group support
(naming it), an unreachable broker (naming the addresses tried).

Thread-safety: a command runs on the main thread.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .common import CliError, warn

NAME = "groups"
SUMMARY = "list, describe and delete consumer groups and their offsets (like kafka-consumer-groups.sh)"

DEFAULT_BOOTSTRAP = "localhost:9092"
DEFAULT_API_TIMEOUT_MS = 30000
_ACTIONS = ("list", "describe", "delete")
HEADERS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
           "CLIENT-ID")
MISSING = "-"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--list", action="store_true", help="list every consumer group")
    actions.add_argument("--describe", action="store_true",
                         help="show the committed offsets, log end offsets and lag of groups")
    actions.add_argument("--delete", action="store_true", help="delete groups and their committed offsets")
    parser.add_argument("--bootstrap-server", "--bootstrap-servers", dest="bootstrap_server", metavar="HOST:PORT",
                        help=f"the broker(s) to connect to, comma-separated (default {DEFAULT_BOOTSTRAP})")
    parser.add_argument("--group", action="append", default=[], metavar="GROUP",
                        help="the group to describe or delete (repeatable)")
    parser.add_argument("--all-groups", action="store_true", help="with --describe: every group")
    parser.add_argument("--command-config", metavar="FILE",
                        help="client settings (Java properties: client.id, request.timeout.ms, ...)")


def _action(args: argparse.Namespace) -> str:
    return next(a for a in _ACTIONS if getattr(args, a))


def _check_options(args: argparse.Namespace, action: str) -> None:
    if action == "list":
        if args.group or args.all_groups:
            raise CliError("--list takes no --group or --all-groups")
    elif action == "describe":
        if bool(args.group) == bool(args.all_groups):
            raise CliError("--describe needs exactly one of --group or --all-groups")
    elif args.all_groups:
        raise CliError("--all-groups can only be used with --describe")
    elif not args.group:
        raise CliError("--delete needs --group")
    for group in args.group:
        if not group:
            raise CliError("--group must not be empty")


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
    from broker.client.consumer import ConsumerConfig, ConsumerNetworkClient, group_offsets
    from broker.client.errors import KafkaError

    action = _action(args)
    _check_options(args, action)
    cfg = ConsumerConfig(_client_config(args))
    try:
        with ConsumerNetworkClient(cfg) as client:
            if action == "list":
                for listing in group_offsets.list_groups(client):
                    print(listing.group_id)
            elif action == "describe":
                groups = args.group or [g.group_id for g in group_offsets.list_groups(client)]
                _describe(client, list(dict.fromkeys(groups)))
            else:
                groups = list(dict.fromkeys(args.group))
                try:
                    group_offsets.delete_groups(client, groups)
                except group_offsets.GroupsNotSupportedError:
                    raise
                except KafkaError as exc:
                    raise CliError(f"Deletion of some consumer groups failed: {exc}") from None
                print(f"Deletion of requested consumer groups ({', '.join(repr(g) for g in groups)}) "
                      "was successful.")
    except group_offsets.GroupsNotSupportedError as exc:
        raise CliError(str(exc)) from None
    except KafkaError as exc:
        raise CliError(str(exc)) from None
    return 0


def _describe(client: Any, groups: list[str]) -> None:
    from broker.client.consumer import group_offsets, latest_offsets, partitions_for

    described = group_offsets.describe_groups(client, groups)
    missing = [g for g in groups if described[g].state == "Dead"]
    if missing:
        raise CliError(f"Consumer group '{missing[0]}' does not exist.")
    for group in groups:
        desc = described[group]
        committed = group_offsets.list_group_offsets(client, group)
        existing = partitions_for(client, {tp.topic for tp in committed})
        known = [tp for tp in committed
                 if any(p.partition == tp.partition for p in existing.get(tp.topic, ()))]
        ends = latest_offsets(client, known) if known else {}
        if not desc.members:
            print(f"Consumer group '{group}' has no active members.", file=sys.stderr, flush=True)
        rows = []
        for tp, offset in committed.items():
            end = ends.get(tp)
            # CONSUMER-ID, HOST, CLIENT-ID: no partition is assigned to a member (no membership)
            rows.append((group, tp.topic, str(tp.partition), str(offset),
                         MISSING if end is None else str(end),
                         MISSING if end is None else str(end - offset), MISSING, MISSING, MISSING))
        _print_table(rows)


def _print_table(rows: list[tuple[str, ...]]) -> None:
    """Kafka's layout: the group, topic, consumer id and host columns at least 15 wide,
    PARTITION 10, the offsets 15, CLIENT-ID last; one space between columns."""
    widths = [15, 15, 10, 15, 15, 15, 15, 15]
    for i in (0, 1, 6, 7):
        widths[i] = max([widths[i]] + [len(r[i]) for r in rows])
    print()
    for row in [HEADERS, *rows]:
        print(" ".join(f"{cell:<{w}}" for cell, w in zip(row, widths)) + " " + row[-1])
