"""kafkalog transactions, like Kafka's kafka-transactions.sh: list and describe
transactions, describe a partition's producers, and find and abort hanging transactions,
through the admin client's ListTransactions, DescribeTransactions, DescribeProducers and
WriteTxnMarkers.

Owns the command line and the output; the work is ``AdminClient.list_transactions`` /
``describe_transactions`` / ``describe_producers`` / ``abort_transaction`` (values:
``broker.client.admin_txn``). The subcommands and options are TransactionsCommand's:

* ``--bootstrap-server HOST:PORT``, ``--command-config FILE`` (admin client settings:
  security.protocol, sasl.* ...), before or after the subcommand; the broker defaults to
  bootstrap.servers of --command-config, else localhost:9092;
* ``list``: every broker's transactions (TransactionalId, Coordinator, ProducerId,
  TransactionState);
* ``describe --transactional-id ID``: its coordinator's view (CoordinatorId ...
  TransactionDurationMs, TopicPartitions);
* ``describe-producers --topic T --partition P [--broker-id B]``: the partition leader's
  (or broker B's) producer states; ``CurrentTransactionStartOffset`` ``None`` when the
  producer has no open transaction;
* ``abort --topic T --partition P`` with ``--start-offset O`` (the producer whose open
  transaction starts at O, found with DescribeProducers) or ``--producer-id``,
  ``--producer-epoch`` and ``--coordinator-epoch`` (a negative coordinator epoch is sent
  as 0): writes an ABORT marker to the partition (needs CLUSTER_ACTION on the cluster
  where an authorizer runs); prints nothing on success, as Kafka;
* ``find-hanging`` (``--broker-id B`` and/or ``--topic T [--partition P]``,
  ``--max-transaction-timeout MINUTES``, default 15): the open transactions
  (DescribeProducers: a current transaction start offset) whose producer last wrote more
  than the timeout ago and whose transaction, at the coordinator (ListTransactions by
  producer id, then DescribeTransactions), does not include the partition: the
  coordinator will never write their marker. As in Kafka any timeout >= 0 is accepted (0:
  every such open transaction, however young); a negative one is refused.

Output is Kafka's ``prettyPrintTable``: a header row then one row per item, each value
padded to its column's width and followed by a tab. Errors (bad option combinations, the
broker's refusal, an unknown transactional id...) are one line, ``kafkalog transactions:
error: ...``, exit status 1.

Thread-safety: a command runs on the main thread.
"""

from __future__ import annotations

import argparse
import contextlib
import time

from .common import CliError, admin_config, report_unreachable

NAME = "transactions"
SUMMARY = "list, describe, find and abort (hanging) transactions (like kafka-transactions.sh)"

DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN = 15

LIST_HEADERS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADERS = ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                    "TopicPartitions")
PRODUCERS_HEADERS = ("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                     "CurrentTransactionStartOffset")
HANGING_HEADERS = ("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                   "LastTimestamp", "Duration(min)")


def _connection_arguments(parser: argparse.ArgumentParser, default=None) -> None:
    parser.add_argument("--bootstrap-server", dest="bootstrap_server", metavar="HOST:PORT", default=default,
                        help="the broker to connect to (default: bootstrap.servers of --command-config, "
                             "else localhost:9092)")
    parser.add_argument("--command-config", metavar="FILE", default=default,
                        help="properties file of admin client settings (security.protocol, sasl.* ...)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _connection_arguments(parser)
    sub = parser.add_subparsers(dest="subcommand", metavar="COMMAND", title="commands")
    sub.required = True

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text, allow_abbrev=False)
        _connection_arguments(p, default=argparse.SUPPRESS)  # also accepted after the subcommand
        return p

    command("list", "list transactions")
    p = command("describe", "describe the state of an active transactional-id")
    p.add_argument("--transactional-id", required=True, metavar="ID", help="transactional id")
    p = command("describe-producers", "describe the states of active producers for a topic partition")
    p.add_argument("--broker-id", type=int, metavar="ID",
                   help="optional broker id to describe the producer state on a specific replica")
    p.add_argument("--topic", required=True, help="topic name")
    p.add_argument("--partition", type=int, required=True, help="partition number")
    p = command("abort", "abort a hanging transaction (requires administrative privileges)")
    p.add_argument("--topic", required=True, help="topic name")
    p.add_argument("--partition", type=int, required=True, help="partition number")
    p.add_argument("--start-offset", type=int, metavar="OFFSET", help="start offset of the transaction to abort")
    p.add_argument("--producer-id", type=int, metavar="ID", help="producer id (with --producer-epoch and "
                                                                 "--coordinator-epoch, instead of --start-offset)")
    p.add_argument("--producer-epoch", type=int, metavar="EPOCH", help="producer epoch")
    p.add_argument("--coordinator-epoch", type=int, metavar="EPOCH", help="coordinator epoch")
    p = command("find-hanging", "find hanging transactions")
    p.add_argument("--broker-id", type=int, metavar="ID", help="broker id to search for hanging transactions")
    p.add_argument("--max-transaction-timeout", type=int, default=DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN,
                   metavar="MINUTES", help="maximum transaction timeout in minutes to limit the scope of the "
                                           f"search (default {DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN})")
    p.add_argument("--topic", help="topic name to limit search to")
    p.add_argument("--partition", type=int, help="partition number")


def table(headers, rows) -> str:
    """Kafka's ``prettyPrintTable``: every value padded to its column's width, then a tab."""
    rows = [[str(v) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    return "\n".join("".join(v.ljust(w) + "\t" for v, w in zip(row, widths, strict=True))
                     for row in [list(headers), *rows])


def _now_ms() -> int:
    return int(time.time() * 1000)


@contextlib.contextmanager
def _failing(what: str):
    """A broker's or the client's error as one line: ``<what>: <error>``."""
    from broker.client.errors import KafkaError

    try:
        yield
    except KafkaError as exc:
        raise CliError(f"{what}: {exc}") from None


def run(args) -> int:
    from broker.client.admin import AdminClient
    from broker.client.errors import KafkaError

    commands = {"list": _list, "describe": _describe, "describe-producers": _describe_producers,
                "abort": _abort, "find-hanging": _find_hanging}
    _check(args)
    config = admin_config(args, "kafkalog-transactions")
    try:
        with report_unreachable(NAME, "default.api.timeout.ms", config["default.api.timeout.ms"]), \
                AdminClient(config) as admin:
            commands[args.subcommand](admin, args)
    except KafkaError as exc:
        raise CliError(str(exc)) from None
    return 0


def _check(args) -> None:
    """The option rules TransactionsCommand checks before it connects."""
    if args.subcommand == "abort" and args.start_offset is None:
        if args.producer_id is None:
            raise CliError("The transaction to abort must be identified either with --start-offset (for brokers "
                           "on 3.0 or above) or with --producer-id, --producer-epoch, and --coordinator-epoch "
                           "(for older brokers)")
        if args.producer_epoch is None:
            raise CliError("Missing required argument --producer-epoch")
        if args.coordinator_epoch is None:
            raise CliError("Missing required argument --coordinator-epoch")
    if args.subcommand == "find-hanging":
        if args.topic is None and args.broker_id is None:
            raise CliError("The `find-hanging` command requires either --topic or --broker-id to limit the scope "
                           "of the search")
        if args.partition is not None and args.topic is None:
            raise CliError("The --partition argument requires --topic to be provided")
        if args.max_transaction_timeout < 0:
            raise CliError(f"--max-transaction-timeout must be >= 0 minutes, not {args.max_transaction_timeout}")


def _list(admin, args) -> None:
    with _failing("Failed to list transactions"):
        by_broker = admin.list_transactions_by_broker()
    rows = [(t.transactional_id, broker, t.producer_id, t.state)
            for broker, listings in by_broker.items() for t in listings]
    print(table(LIST_HEADERS, rows))


def _describe(admin, args) -> None:
    tid = args.transactional_id
    with _failing(f"Failed to describe transaction state of transactional-id `{tid}`"):
        d = admin.describe_transactions([tid])[tid].result()
    start = d.transaction_start_time_ms
    duration = "None" if start is None else _now_ms() - start
    print(table(DESCRIBE_HEADERS, [(d.coordinator_id, tid, d.producer_id, d.producer_epoch, d.state,
                                    d.transaction_timeout_ms, "None" if start is None else start, duration,
                                    ",".join(f"{tp.topic}-{tp.partition}" for tp in d.topic_partitions))]))


def _producers(admin, topic: str, partition: int, broker_id: int | None = None) -> list:
    where = "leader" if broker_id is None else f"broker {broker_id}"
    with _failing(f"Failed to describe producers for partition {topic}-{partition} on {where}"):
        return admin.describe_producers([(topic, partition)], broker_id=broker_id)[(topic, partition)].result()


def _describe_producers(admin, args) -> None:
    rows = [(s.producer_id, s.producer_epoch, -1 if s.coordinator_epoch is None else s.coordinator_epoch,
             s.last_sequence, s.last_timestamp,
             "None" if s.current_transaction_start_offset is None else s.current_transaction_start_offset)
            for s in _producers(admin, args.topic, args.partition, args.broker_id)]
    print(table(PRODUCERS_HEADERS, rows))


def _abort(admin, args) -> None:
    tp = f"{args.topic}-{args.partition}"
    if args.start_offset is None:
        pid, epoch, coordinator_epoch = args.producer_id, args.producer_epoch, args.coordinator_epoch
    else:
        found = [s for s in _producers(admin, args.topic, args.partition)
                 if s.current_transaction_start_offset == args.start_offset]
        if not found:
            raise CliError(f"Could not find any open transactions starting at offset {args.start_offset} on "
                           f"partition {tp}")
        pid, epoch = found[0].producer_id, found[0].producer_epoch
        coordinator_epoch = found[0].coordinator_epoch or 0
    spec = (f"AbortTransactionSpec(topicPartition={tp}, producerId={pid}, producerEpoch={epoch}, "
            f"coordinatorEpoch={max(0, coordinator_epoch)})")
    with _failing(f"Failed to abort transaction {spec}"):
        admin.abort_transaction(args.topic, args.partition, pid, epoch, coordinator_epoch)


def _find_hanging(admin, args) -> None:
    """FindHangingTransactionsCommand: open transactions older than the timeout that their
    coordinator does not know of (see the module docstring)."""
    max_ms = args.max_transaction_timeout * 60_000
    partitions = _partitions_to_search(admin, args)
    candidates = []  # (TopicPartition, ProducerState)
    if partitions:
        where = "their leaders" if args.broker_id is None else f"broker {args.broker_id}"
        with _failing(f"Failed to describe producers for {len(partitions)} partitions on {where}"):
            results = admin.describe_producers(partitions, broker_id=args.broker_id).all()
        now = _now_ms()
        candidates = [(tp, s) for tp in partitions for s in results[tp]
                      if s.current_transaction_start_offset is not None and now - s.last_timestamp > max_ms]
    hanging = _filter_hanging(admin, candidates) if candidates else []
    now = _now_ms()
    print(table(HANGING_HEADERS, [
        (tp.topic, tp.partition, s.producer_id, s.producer_epoch,
         -1 if s.coordinator_epoch is None else s.coordinator_epoch, s.current_transaction_start_offset,
         s.last_timestamp, (now - s.last_timestamp) // 60_000) for tp, s in hanging]))


def _partitions_to_search(admin, args) -> list:
    from broker.client.consumer.offsets import TopicPartition

    if args.topic is not None and args.partition is not None:
        return [TopicPartition(args.topic, args.partition)]
    with _failing("Failed to list topics"):
        topics = [args.topic] if args.topic is not None else admin.list_topics()
    with _failing(f"Failed to describe {len(topics)} topics"):
        descriptions = admin.describe_topics(topics).all()
    return [TopicPartition(d.name, p.partition) for d in descriptions.values() for p in d.partitions
            if args.broker_id is None or args.broker_id in p.replicas]


def _filter_hanging(admin, candidates: list) -> list:
    from broker.client.errors import KafkaError
    from broker.protocol import ErrorCode

    pids = sorted({s.producer_id for _, s in candidates})
    with _failing(f"Failed to list transactions for {len(pids)} producers"):
        ids = {t.producer_id: t.transactional_id for t in admin.list_transactions(producer_ids=pids)
               if t.producer_id in pids}
    descriptions = {}
    if ids:
        results = admin.describe_transactions(sorted(set(ids.values())))
        for tid, result in results.items():
            try:
                descriptions[tid] = result.result()
            except KafkaError as exc:
                if exc.code != ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
                    raise CliError(f"Failed to describe {len(results)} transactions: {exc}") from None
    hanging = []
    for tp, s in candidates:
        d = descriptions.get(ids.get(s.producer_id))
        # DescribeTransactions lists the partitions of an Ongoing transaction and those
        # still waiting for their marker in PrepareCommit / PrepareAbort: the coordinator
        # will end those. Any other open transaction is hanging.
        if d is None or tp not in d.topic_partitions:
            hanging.append((tp, s))
    return hanging


