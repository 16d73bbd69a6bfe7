"""Print the records of a topic on stdout, one line each, like Kafka's
kafka-console-consumer.sh: from the end (or the beginning, or an offset) and then
following new records until Ctrl-C, a message count or an idle timeout.

Owns the ``kafkalog consume`` subcommand: its options, where each partition starts, the
poll-and-print loop, the consumer group commit and the exit code. Fetching is
``broker.client.consumer.poller.PartitionPoller``; the line layout is
``records_format.MessageFormatter`` (Kafka's ``DefaultMessageFormatter``).

Behaviour:

- Partitions: every partition of ``--topic``, or only ``--partition N``. The topic must
  exist (a typo is an error, not a wait; consuming never creates a topic).
- Start: the latest offset (only new records), ``--from-beginning`` (the log start), or,
  with ``--partition``, ``--offset N|earliest|latest`` (Kafka's rules: ``--offset`` needs
  ``--partition`` and excludes ``--from-beginning``). An ``--offset`` outside the log
  follows ``auto.offset.reset`` (``latest`` unless set), as Kafka's consumer does.
- End: after ``--max-messages N`` records; after ``--timeout-ms N`` without a record
  (Kafka's option; here the exit code is 0); on Ctrl-C (exit 130); otherwise never
  (following). ``Processed a total of N messages`` goes to stderr at the end, as in
  Kafka.
- Output: one line per record on stdout, the value only by default; ``--print-key``,
  ``--print-headers``, ``--print-timestamp``, ``--print-offset``, ``--print-partition``
  or Kafka's ``--property print.key=true`` (and ``key.separator``, ``line.separator``,
  ``headers.separator``, ``null.literal``, ``print.value``) add fields in Kafka's layout.
  Keys, values and header values are UTF-8; other bytes print as ``\\xNN``. Output is
  flushed after each poll's records; a closed stdout (``| head``) ends the command
  quietly (exit 141).
- Schema Registry formats, as Confluent's ``kafka-avro-console-consumer`` (and its
  Protobuf and JSON Schema variants): with ``--property schema.registry.url=URL`` (or
  ``value.format``, ``key.format``, ``print.schema.ids``) each value, and each key with
  ``key.format``, is decoded with the writer schema its frame or header names and printed
  as JSON (``schema_serde.SchemaFormatter``). A record that cannot be decoded is told on
  stderr (topic, partition, offset, why), not printed, counted and committed like the
  others; the command then exits 1 at the end (Confluent's tool stops at it). A registry
  that cannot be reached or refuses the client ends the command in one line, as a
  broker error does.
- ``--group G`` (or ``group.id`` in the config) without ``--partition``: the command is a
  member of the group, as Kafka's console consumer (``KafkaConsumer.subscribe``; the
  classic protocol, or KIP-848's with ``--consumer-property group.protocol=consumer``):
  the group shares the topic's partitions among its members, each partition
  starts from the group's committed offset, else ``--from-beginning``: earliest, else
  latest (Kafka's ``auto.offset.reset``). After each poll the records printed are
  committed (with the member's generation or epoch), and again when partitions are revoked and at
  exit (``--max-messages``, ``--timeout-ms``, Ctrl-C): exactly the records printed are
  consumed; then the member leaves the group. ``--timeout-ms`` counts from the first
  assignment (joining a group may take ``group.initial.rebalance.delay.ms``).
- ``--group G`` with ``--partition``: no membership; the partition starts from the
  group's committed offset, else as above; an explicit ``--offset`` wins. At exit the
  next offset to read is committed as a simple consumer
  (``broker.client.consumer.group_offsets``). In both modes a closed stdout commits
  nothing after the last poll (the reader may not have read what was written: the
  records come again, at-least-once).
- A batch that cannot be read (bad CRC, records or compressed payload, a decompression
  bomb): the records before it are printed, then the command stops with one line
  ``kafkalog consume: error: CorruptBatchError: Record batch of t-0 at offsets [5, 9]
  (byte position 73) is invalid: record 3: key length -7 out of range`` and exit code 1
  (Kafka's console consumer stops with the consumer's CorruptRecordException; to read
  on, start again with ``--partition P --offset <last offset + 1>``). With ``--group``
  the records printed are committed, so the group resumes at the bad batch.
- Settings: ``--consumer.config FILE`` < ``--consumer-property K=V`` < dedicated options
  (``--bootstrap-server``, ``--isolation-level``, ``--group``). The first lookups (the
  topic's partitions, the offsets) wait at most ``default.api.timeout.ms`` (60 s) for the
  broker, or ``--timeout-ms`` when it is shorter: it bounds the whole wait, connecting
  included. An unreachable broker is told at once in one line naming the cause (``no
  broker of 127.0.0.1:1 reachable yet (connection refused); retrying until
  default.api.timeout.ms (60000 ms)...``), and the error after the wait names it again
  (``no broker of 127.0.0.1:1 reachable (connection refused); waited 3000 ms
  (--timeout-ms)``); a TLS or SASL failure is an error at once. While following, a lost
  broker is retried for ever (one warning on stderr per outage), as Kafka's tool does.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import TYPE_CHECKING, Any

from .common import CliError, report_unreachable, unreachable_message, warn
from .records_format import (
    FORMATTER_PROPERTIES,
    InterruptGuard,
    MessageFormatter,
    add_bootstrap_argument,
    build_config,
    client_settings,
    key_values,
)

if TYPE_CHECKING:
    from .schema_serde import SchemaFormatter

    Formatter = MessageFormatter | SchemaFormatter

NAME = "consume"
SUMMARY = "print the records of a topic (like kafka-console-consumer.sh)"

ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
PRINT_FLAGS = ("timestamp", "key", "headers", "offset", "partition")
# Longest single wait of the loop: bounds how late Ctrl-C's commit and --timeout-ms are.
POLL_MS = 1000.0


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return value


def _positive(text: str) -> int:
    value = _non_negative(text)
    if value == 0:
        raise argparse.ArgumentTypeError("0 is not positive")
    return value


def _offset(text: str) -> int | str:
    low = text.strip().lower()
    if low in ("earliest", "latest"):
        return low
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an offset (a number, earliest or latest)") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative (use earliest or latest)")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_argument(parser)
    parser.add_argument("--topic", required=True, help="the topic to consume")
    parser.add_argument("--partition", type=_non_negative, metavar="N",
                        help="only this partition (default: all of them)")
    parser.add_argument("--offset", type=_offset, metavar="N|earliest|latest",
                        help="where to start in --partition (default latest)")
    parser.add_argument("--from-beginning", action="store_true",
                        help="start with the earliest record rather than the latest")
    parser.add_argument("--max-messages", type=_positive, metavar="N",
                        help="exit after N records")
    parser.add_argument("--timeout-ms", type=_positive, metavar="N",
                        help="exit when no record arrived for N ms (default: follow until "
                             "Ctrl-C)")
    parser.add_argument("--group", metavar="G",
                        help="the consumer group: without --partition, join it (the "
                             "members share the partitions); start from its committed "
                             "offsets and commit what was printed")
    parser.add_argument("--isolation-level", choices=ISOLATION_LEVELS,
                        help="read_committed hides aborted transactions (default "
                             "read_uncommitted)")
    for flag in PRINT_FLAGS:
        parser.add_argument(f"--print-{flag}", action="store_true",
                            help=f"print each record's {flag} (print.{flag}=true)")
    parser.add_argument("--property", action="append", metavar="K=V",
                        help="formatter property, Kafka's names: print.timestamp, "
                             "print.partition, print.offset, print.headers, print.key, "
                             "print.value, key.separator, line.separator, "
                             "headers.separator, null.literal; and Confluent's Schema "
                             "Registry ones: schema.registry.url (values printed as JSON), "
                             "value.format / key.format=avro|protobuf|json|string, "
                             "print.schema.ids, schema.id.separator, basic.auth.user.info, ...")
    parser.add_argument("--consumer-property", action="append", metavar="K=V",
                        help="a consumer config key (repeatable), e.g. fetch.max.wait.ms=100")
    parser.add_argument("--consumer.config", dest="consumer_config", metavar="FILE",
                        help="a Java properties file of consumer config keys "
                             "(see conf/consumer.properties)")


# --- configuration ---------------------------------------------------------------------

def consumer_settings(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, str]]:
    merged, sources = client_settings("consumer", args.consumer_config, args.consumer_property, {
        "bootstrap.servers": args.bootstrap_server, "isolation.level": args.isolation_level,
        "group.id": args.group})
    reset = str(merged.get("auto.offset.reset", "")).strip().lower()
    if args.from_beginning:
        if reset not in ("", "earliest"):
            raise CliError(f"--from-beginning contradicts auto.offset.reset={reset} (from "
                           f"{sources['auto.offset.reset']})")
        merged["auto.offset.reset"] = "earliest"
        sources["auto.offset.reset"] = "--from-beginning"
    elif not reset:
        merged["auto.offset.reset"] = "latest"
    return merged, sources


def formatter(args: argparse.Namespace) -> Formatter:
    """Kafka's formatter of ``--property`` and the ``--print-*`` flags; over the Schema
    Registry's deserializers when a property names them (``schema_serde``)."""
    props = key_values(args.property, "--property", strip=False)
    for flag in PRINT_FLAGS:
        if getattr(args, f"print_{flag}"):
            props[f"print.{flag}"] = "true"
    if all(k in FORMATTER_PROPERTIES for k in props):
        return MessageFormatter(props)
    from .schema_serde import SchemaFormatter, split_properties

    schema_props, rest = split_properties(props, consumer=True, others=FORMATTER_PROPERTIES)
    return SchemaFormatter.from_properties(schema_props, MessageFormatter({k: v or "" for k, v in rest.items()}),
                                           NAME)


def check_options(args: argparse.Namespace) -> None:
    if args.offset is not None and args.partition is None:
        raise CliError("--offset needs --partition (the offset of which partition?)")
    if args.offset is not None and args.from_beginning:
        raise CliError("--offset and --from-beginning cannot be given together")


# --- the group's offsets (another module: imported only with --group) -----------------

def _group_offsets() -> Any:
    name = "broker.client.consumer.group_offsets"
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise CliError(f"--group: {name} cannot be imported: {exc}") from None
        raise CliError(f"--group is not available: this installation has no consumer group "
                       f"client ({name})") from None


def _group_error(exc: BaseException, group: str | None, servers: str) -> CliError:
    """One line for a failed group call (``GroupsNotSupportedError`` already names the
    broker and the missing API)."""
    return CliError(f"--group {group}: {exc}")


# --- run -------------------------------------------------------------------------------

def run(args: argparse.Namespace) -> int:
    from broker.client.consumer import ConsumerConfig

    check_options(args)
    fmt = formatter(args)
    try:
        settings, sources = consumer_settings(args)
        cfg = build_config(ConsumerConfig, settings, sources)
        bound = _Bound(args, cfg)
        with report_unreachable(NAME, bound.config, bound.ms):
            code = _run(args, cfg, fmt, bound)
    finally:
        if not isinstance(fmt, MessageFormatter):
            fmt.close()
    if code == 0 and not isinstance(fmt, MessageFormatter) and fmt.failures:
        raise CliError(f"{fmt.failures} record{'s' if fmt.failures != 1 else ''} could not be deserialized "
                       "(each told above, not printed)")
    return code


def _failure(exc: BaseException) -> CliError:
    """The one line of an error that ends the loop."""
    from broker.client.registry_http import SchemaRegistryError, SchemaRegistryUnreachableError
    from broker.record.errors import DecodeError

    if isinstance(exc, DecodeError):
        return CliError(f"{exc.__class__.__name__}: {exc}")
    if isinstance(exc, SchemaRegistryError) and not isinstance(exc, SchemaRegistryUnreachableError):
        return CliError(f"the Schema Registry refused a request: {exc}")
    return CliError(str(exc))


class _Bound:
    """The bound of the first lookups (module docstring): default.api.timeout.ms, or
    --timeout-ms when shorter, counted from the start of the command."""

    def __init__(self, args: argparse.Namespace, cfg: Any) -> None:
        from broker.client.network import now_ms

        default = cfg["default.api.timeout.ms"]
        self.explicit = args.timeout_ms is not None and args.timeout_ms < default
        self.ms = args.timeout_ms if self.explicit else default
        self.config = "--timeout-ms" if self.explicit else "default.api.timeout.ms"
        self._end = now_ms() + self.ms

    def left(self) -> float | None:
        """The timeout_ms of the next lookup (None: the client's default)."""
        from broker.client.network import now_ms

        return max(0.0, self._end - now_ms()) if self.explicit else None

    def error(self, exc: BaseException, servers: str) -> CliError:
        return CliError(_unreachable(exc, servers, self))


def _run(args: argparse.Namespace, cfg: Any, fmt: Formatter, bound: _Bound) -> int:
    from broker.client.consumer import ConsumerNetworkClient, partitions_for
    from broker.client.consumer.offsets import EARLIEST, LATEST, TopicPartition
    from broker.client.consumer.poller import PartitionPoller
    from broker.client.errors import BrokerUnreachableError, KafkaError
    from broker.client.network import now_ms
    from broker.client.registry_http import SchemaRegistryError
    from broker.record.errors import DecodeError

    servers = ",".join(cfg["bootstrap.servers"])
    topic = args.topic
    group = cfg["group.id"] or None
    group_api = _group_offsets() if group else None
    if group is not None and args.partition is None:
        return _run_member(args, cfg, fmt, group, servers, bound)
    try:
        client = ConsumerNetworkClient(cfg)
    except KafkaError as exc:  # a malformed bootstrap address
        raise CliError(str(exc)) from None
    count = 0
    stdout = sys.stdout.buffer
    commit: dict[TopicPartition, int] | None = None
    pending: list[Any] = []  # records of the current poll not printed yet
    poller = None
    try:
        try:
            infos = partitions_for(client, [topic], timeout_ms=bound.left()).get(topic)
        except KafkaError as exc:
            raise bound.error(exc, servers) from None
        if not infos:
            raise CliError(f"topic {topic} does not exist on {servers}")
        partitions = [p.partition for p in infos]
        if args.partition is not None:
            if args.partition not in partitions:
                raise CliError(f"--partition {args.partition}: topic {topic} has "
                               f"{len(partitions)} partition{'s' if len(partitions) != 1 else ''}"
                               f" (0-{len(partitions) - 1})")
            partitions = [args.partition]
        tps = [TopicPartition(topic, p) for p in partitions]
        default = EARLIEST if cfg["auto.offset.reset"] == "earliest" else LATEST
        specs: dict[Any, int] = {tp: default for tp in tps}
        if group_api is not None:
            try:
                committed = group_api.fetch_committed(client, group, tps, timeout_ms=bound.left())
            except BrokerUnreachableError as exc:
                raise bound.error(exc, servers) from None
            except KafkaError as exc:
                raise _group_error(exc, group, servers) from None
            for tp in tps:
                offset = committed.get(tp)
                if offset is not None and offset >= 0:
                    specs[tp] = offset
        if args.offset is not None:
            specs[tps[0]] = {"earliest": EARLIEST, "latest": LATEST}.get(args.offset, args.offset)
        poller = PartitionPoller(client)
        try:
            poller.assign(specs, timeout_ms=bound.left())
        except KafkaError as exc:
            raise bound.error(exc, servers) from None
        commit = poller.positions()
        limit = args.max_messages
        idle_ms = args.timeout_ms
        last_record = now_ms()
        warned = False
        with InterruptGuard() as guard:
            while limit is None or count < limit:
                wait = POLL_MS if idle_ms is None else min(POLL_MS, max(
                    0.0, last_record + idle_ms - now_ms()))
                guard.interruptible = True  # Ctrl-C interrupts the wait at once...
                try:
                    records = poller.poll(wait)
                finally:
                    guard.interruptible = False  # ...and the printing once it is done
                if poller.last_error is None:
                    warned = False
                elif not warned:
                    warn(NAME, f"cannot fetch from {servers} ({poller.last_error}); retrying")
                    warned = True
                if not records:
                    commit = poller.positions()  # past markers and aborted data, if any
                    if idle_ms is not None and now_ms() - last_record >= idle_ms:
                        break
                else:
                    last_record = now_ms()
                    pending = records
                    take = len(records) if limit is None else min(len(records), limit - count)
                    stdout.write(b"".join(map(fmt.format, records[:take])))
                    stdout.flush()
                    count += take
                    commit = _first_unprinted(poller.positions(), records[take:])
                    pending = []
                if guard.stop:
                    raise KeyboardInterrupt
    except KeyboardInterrupt:
        if commit is not None and pending and poller is not None:
            commit = _first_unprinted({**commit, **poller.positions()}, pending)
        _finish(group_api, cfg, group, commit, count, servers)
        return 130
    except (KafkaError, DecodeError, SchemaRegistryError) as exc:  # commit what was printed, then one line
        _finish(group_api, cfg, group, commit, count, servers)
        raise _failure(exc) from None
    finally:
        if poller is not None:
            poller.close()
        client.close()
    _finish(group_api, cfg, group, commit, count, servers)
    return 0


def _run_member(args: argparse.Namespace, cfg: Any, fmt: Formatter, group: str,
                servers: str, bound: _Bound) -> int:
    """``--group`` without ``--partition``: a subscribed group member (module docstring)."""
    from broker.client.consumer import ConsumerConfig, TopicPartition
    from broker.client.consumer.consumer import KafkaConsumer
    from broker.client.consumer.group_driver import ConsumerRebalanceListener
    from broker.client.errors import KafkaError
    from broker.client.network import now_ms
    from broker.client.registry_http import SchemaRegistryError
    from broker.record.errors import DecodeError

    topic = args.topic
    try:
        consumer = KafkaConsumer(ConsumerConfig(cfg, enable_auto_commit=False))
    except KafkaError as exc:  # a malformed bootstrap address
        raise CliError(str(exc)) from None
    printed: dict[TopicPartition, int] = {}  # next offset to read after what was printed
    committed: dict[TopicPartition, int] = {}

    def commit(only: Any = None) -> None:
        todo: dict[Any, int] = {tp: o for tp, o in printed.items() if committed.get(tp) != o
                and (only is None or tp in only)}
        if todo:
            try:
                consumer.commit_sync(todo)
            except KafkaError as exc:
                raise _group_error(exc, group, servers) from None
            committed.update(todo)

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
            try:
                commit(set(partitions))
            except CliError as exc:
                warn(NAME, str(exc))
            for tp in partitions:
                printed.pop(tp, None)
                committed.pop(tp, None)

        def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
            for tp in partitions:
                printed.pop(tp, None)
                committed.pop(tp, None)

    count = 0
    stdout = sys.stdout.buffer
    try:
        try:
            if not consumer.partitions_for(topic, timeout_ms=bound.left()):
                raise CliError(f"topic {topic} does not exist on {servers}")
        except KafkaError as exc:
            raise bound.error(exc, servers) from None
        consumer.subscribe([topic], listener=Listener())
        limit = args.max_messages
        idle_ms = args.timeout_ms
        last_record: float | None = None  # set once the first poll (the join) returned
        with InterruptGuard() as guard:
            while limit is None or count < limit:
                wait = 0.0 if last_record is None else (POLL_MS if idle_ms is None else min(
                    POLL_MS, max(0.0, last_record + idle_ms - now_ms())))
                guard.interruptible = True
                try:
                    records = consumer.poll(wait)
                finally:
                    guard.interruptible = False
                if last_record is None:
                    last_record = now_ms()
                if records:
                    last_record = now_ms()
                    take = len(records) if limit is None else min(len(records), limit - count)
                    stdout.write(b"".join(map(fmt.format, records[:take])))
                    stdout.flush()
                    count += take
                    for r in records[:take]:
                        printed[TopicPartition(r.topic, r.partition)] = r.offset + 1
                    commit()
                elif idle_ms is not None and now_ms() - last_record >= idle_ms:
                    break
                if guard.stop:
                    raise KeyboardInterrupt
    except KeyboardInterrupt:
        _leave(consumer, commit, count)
        return 130
    except (KafkaError, DecodeError, SchemaRegistryError) as exc:
        _leave(consumer, commit, count)
        raise _failure(exc) from None
    except BaseException:
        consumer.close(autocommit=False)
        raise
    _leave(consumer, commit, count)
    return 0


def _leave(consumer: Any, commit: Any, count: int) -> None:
    """Commit what was printed, leave the group, print the total."""
    try:
        commit()
    finally:
        try:
            consumer.close(autocommit=False)
        finally:
            print(f"Processed a total of {count} messages", file=sys.stderr, flush=True)


def _first_unprinted(positions: dict[Any, int], unprinted: list[Any]) -> dict[Any, int]:
    """The next offset to read per partition: the poller's ``positions`` (just after the
    records it returned), moved back to the first record of each partition that was
    returned but not printed (cut by --max-messages or Ctrl-C)."""
    out = dict(positions)
    for r in reversed(unprinted):
        out[(r.topic, r.partition)] = r.offset
    return out


def _finish(group_api: Any, cfg: Any, group: str | None, commit: dict[Any, int] | None,
            count: int, servers: str) -> None:
    """Commit the group's offsets (a client of its own: the loop's may have been cut
    mid-request by Ctrl-C) and print the total."""
    from broker.client.errors import KafkaError

    try:
        if group_api is not None and commit:
            try:
                group_api.commit_offsets(cfg, group, dict(commit))
            except KafkaError as exc:
                raise _group_error(exc, group, servers) from None
    finally:
        print(f"Processed a total of {count} messages", file=sys.stderr, flush=True)


def _unreachable(exc: BaseException, servers: str, bound: _Bound) -> str:
    from broker.client.errors import BrokerUnreachableError, KafkaTimeoutError

    if isinstance(exc, BrokerUnreachableError):  # the bound the command applied
        return unreachable_message(exc, bound.config, bound.ms)
    if isinstance(exc, KafkaTimeoutError):
        return (f"no answer from the broker at {servers} within {bound.ms:g} ms "
                f"({bound.config}): {exc}")
    return str(exc)
