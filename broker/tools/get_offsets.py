"""``kafkalog get-offsets``: kafka-get-offsets.sh (Kafka's GetOffsetShell): the offset of
each matching partition for a time spec, one ``topic:partition:offset`` line each.

Options, Kafka's:

* ``--bootstrap-server HOST:PORT`` (``--broker-list``, deprecated, the same),
  ``--command-config FILE`` (client settings: security.protocol, sasl.* ...);
* which partitions: ``--topic-partitions`` (comma-separated ``TOPIC_REGEX:PARTITIONS``
  patterns; the regex may be omitted (any topic), PARTITIONS is a number, ``N-M`` (M
  excluded), ``N-``, ``-M`` (M excluded) or omitted (every partition)), else ``--topic``
  (a regex, full match; every topic when absent) with ``--partitions`` (comma-separated
  ids); ``--exclude-internal-topics`` leaves out ``__consumer_offsets`` and the like;
* ``--time``: ``-1`` / ``latest`` (the default; the high watermark), ``-2`` /
  ``earliest`` (the log start offset), ``-3`` / ``max-timestamp`` (the record with the
  largest timestamp), ``-4`` / ``earliest-local`` (the first offset still on the broker's
  disk under tiered storage), ``-5`` / ``latest-tiered`` (the highest offset in remote
  storage), or a timestamp in ms (the first offset at or after it).

Output: one line per partition, sorted by topic then partition, ``topic:partition:offset``;
a partition without an answer (a timestamp past every record, nothing tiered for -5) gets
an empty offset, ``topic:partition:``, as Kafka prints it. No partition matching the
filters is an error ("Could not match any topic-partitions with the specified filters").
Errors (an unreachable broker, a spec the broker's ListOffsets does not know) are one
line and exit code 1.

Thread-safety: runs on the main thread.
"""

from __future__ import annotations

import argparse
import re

from .common import CliError, admin_config, report_unreachable

NAME = "get-offsets"
SUMMARY = "the offsets of partitions for a time: latest, earliest, max-timestamp, earliest-local, " \
          "latest-tiered or a timestamp (like kafka-get-offsets.sh)"

TIME_NAMES = {"latest": -1, "earliest": -2, "max-timestamp": -3, "earliest-local": -4, "latest-tiered": -5}
_PARTITIONS_RE = re.compile(r"^(?:(\d+)|(\d+)-(\d+)|(\d+)-|-(\d+))?$")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", "--broker-list", dest="bootstrap_server", metavar="HOST:PORT",
                        help="the server(s) to connect to (default: bootstrap.servers of --command-config, "
                             "else localhost:9092)")
    parser.add_argument("--command-config", metavar="FILE", help="properties file of client settings")
    parser.add_argument("--topic-partitions", metavar="PATTERNS",
                        help="comma-separated topic-partition patterns TOPIC_REGEX:PARTITIONS, PARTITIONS a "
                             "number, N-M (M excluded), N-, -M or omitted for all (e.g. t1:1,t2:0-3,t3,t4:5-)")
    parser.add_argument("--topic", "-t", metavar="REGEX", help="the topics (a regular expression); all when absent "
                                                                "(ignored with --topic-partitions)")
    parser.add_argument("--partitions", metavar="IDS", help="comma-separated partition ids; all when absent")
    parser.add_argument("--time", default="-1", metavar="TIME",
                        help="-1 or latest (default), -2 or earliest, -3 or max-timestamp, -4 or earliest-local, "
                             "-5 or latest-tiered, or a timestamp in ms")
    parser.add_argument("--exclude-internal-topics", action="store_true",
                        help="leave out internal topics (__consumer_offsets ...)")


def parse_time(text: str) -> int:
    """``--time``'s value as a ListOffsets spec."""
    value = TIME_NAMES.get(text.strip().lower())
    if value is not None:
        return value
    try:
        value = int(text)
    except ValueError:
        raise CliError(f"Malformed time argument {text}. Please use -1 or latest / -2 or earliest / -3 or "
                       "max-timestamp / -4 or earliest-local / -5 or latest-tiered, or a specified long "
                       "format timestamp") from None
    if value < -5:
        raise CliError(f"Malformed time argument {text}: a timestamp is >= 0")
    return value


def _partition_filter(spec: str, option: str):
    """A predicate on partition ids from Kafka's partition pattern."""
    m = _PARTITIONS_RE.match(spec.strip())
    if m is None:
        raise CliError(f"Invalid partition pattern {spec!r} in {option}")
    one, low, high, lower, upper = m.groups()
    if one is not None:
        return lambda p: p == int(one)
    if low is not None:
        return lambda p: int(low) <= p < int(high)
    if lower is not None:
        return lambda p: p >= int(lower)
    if upper is not None:
        return lambda p: p < int(upper)
    return lambda p: True


def _topic_filter(regex: str | None, option: str):
    if not regex:
        return lambda t: True
    try:
        pattern = re.compile(regex)
    except re.error as exc:
        raise CliError(f"Invalid regular expression {regex!r} in {option}: {exc}") from None
    return lambda t: pattern.fullmatch(t) is not None


def filters(args) -> list[tuple]:
    """[(topic predicate, partition predicate)]: a partition is asked when one pair matches it."""
    if args.topic_partitions:
        out = []
        for item in args.topic_partitions.split(","):
            topic, _, partitions = item.strip().rpartition(":") if ":" in item else (item.strip(), "", "")
            out.append((_topic_filter(topic, "--topic-partitions"),
                        _partition_filter(partitions, "--topic-partitions")))
        return out
    if args.partitions:
        try:
            ids = {int(p) for p in args.partitions.split(",") if p.strip()}
        except ValueError:
            raise CliError(f"--partitions {args.partitions!r}: expected comma-separated partition ids") from None
        return [(_topic_filter(args.topic, "--topic"), lambda p: p in ids)]
    return [(_topic_filter(args.topic, "--topic"), lambda p: True)]


def run(args) -> int:
    from broker.client.consumer import list_offsets, list_topics
    from broker.client.errors import KafkaError

    spec = parse_time(args.time)
    wanted = filters(args)
    config = admin_config(args, "kafkalog-get-offsets")
    try:
        with report_unreachable(NAME, "default.api.timeout.ms", config["default.api.timeout.ms"]):
            topics = list_topics(config, include_internal=not args.exclude_internal_topics)
            tps = [(t, p) for t, count in topics.items() for p in range(count)
                   if any(topic_ok(t) and partition_ok(p) for topic_ok, partition_ok in wanted)]
            if not tps:
                raise CliError("Could not match any topic-partitions with the specified filters")
            offsets = list_offsets(config, {tp: spec for tp in tps})
    except KafkaError as exc:
        raise CliError(f"{exc}") from None
    for topic, partition in sorted(tps):
        found = offsets.get((topic, partition))
        print(f"{topic}:{partition}:{found.offset if found is not None and found.offset >= 0 else ''}")
    return 0
