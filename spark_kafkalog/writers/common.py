"""What the batch and the streaming sink of ``kafkalog`` share.

Owns:

* ``WriteOptions`` / ``parse_write_options``: the sink's options (``topic``, ``kafka.*``
  passed to the producer, ``kafkalog.writeBatchHeaders``, ``kafkalog.exactlyOnce``,
  ``kafkalog.transactionalIdPrefix``) validated on the driver, with
  Spark's Kafka sink's refusals (``kafka.key.serializer`` / ``kafka.value.serializer``);
  the producer settings are checked by building a ``ProducerConfig`` (no network).
* ``SinkColumns`` / ``sink_columns``: the input schema checked against Spark's Kafka sink
  rules (``KafkaWriter.validateQuery``) plus the ``timestamp`` column (CreateTime); any
  other column is an error naming it and its type. With ``valueFormat`` / ``keyFormat`` avro, protobuf or
  json (``formats.write_schema``: parsed with the options, ``WriteOptions.typed``), the
  ``value`` / ``key`` column may be of any type: ``write_batch`` encodes it with the writer
  schema resolved on the driver (``WriteOptions.encoding``, ``columnar.encode_typed_columns``)
  before sending. Both run when Spark asks the data
  source for a writer, on the driver, so a bad query fails before any record is sent.
* ``KafkaLogCommitMessage`` / ``WrittenRange``: what a task wrote, per topic-partition
  (first and last offset, count), with the producer id and epoch, the Spark partition and
  attempt, and, in a streaming query, the micro-batch id and query id.
* ``write_task``: the body of a task, shared by both writers (with ``kafkalog.exactlyOnce``
  the writers call ``exactly_once.write_task_transactional`` instead, which reuses
  ``_TaskWriter`` with a transactional producer): one idempotent ``KafkaProducer`` per task,
  the Arrow batches handed to ``send_arrow`` column-wise (no Python object per row; the
  column work is ``writers.columnar``'s), a flush before returning, and one INFO line on the
  executor saying what the attempt wrote. When the writer itself fails (a producer error, a
  null topic) it logs at WARNING (one line, the error included), and adds as a note to the
  exception, what the attempt had already written, then re-raises; an unreachable cluster
  (``BrokerUnreachableError``) is raised naming the sink's option (``no broker of X
  reachable (connection refused); waited 3000 ms (kafka.max.block.ms)``), without the
  client's frames (``sink_named_unreachable``). (When the task fails upstream of the writer,
  pyspark ends the writer's input as if it were complete: the writer then flushes what it
  got and logs its INFO line, and Spark discards its commit message.)
* ``check_reachable``: the driver's preflight, before any task starts: when none of the
  bootstrap servers answers (or TLS / SASL fails), the write fails once, from the driver,
  with the same error, instead of from every task.
* ``commit_summary`` / ``abort_summary``: the one-line reports of the driver's commit and
  abort (logged by the writers on logger ``spark_kafkalog.writers``).

Delivery semantics (the user-facing statement is in ``writers/__init__.py``): within a
task, producer retries never duplicate or reorder records (idempotent producer: broker-side
sequence numbers per partition); a Spark task retry or a replayed micro-batch writes its
rows again, so the sink as a whole is at-least-once, like Spark's Kafka sink.

Invariants: the rows of one task reach each partition in their input order (batches are
sent in order, and rows are only regrouped per topic and per run of explicit/implicit
partition, both stable); ``write_task`` returns only after every record it was given is
acknowledged (per ``kafka.acks``), else raises; the commit message counts exactly the
acknowledged records.

Thread-safety: ``write_task`` runs on the Python worker's task thread and owns its producer
(whose Sender thread is internal); everything else is pure or frozen.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import WriterCommitMessage

from ..formats.write_schema import WRITE_FORMAT_OPTIONS
from .columnar import BATCH_HEADER_KEYS, encode_typed_columns
from .columnar import BatchHeaders as _BatchHeaders
from .columnar import binary_bytes as _binary_bytes
from .columnar import runs as _runs

if TYPE_CHECKING:  # heavy imports stay inside functions (pyspark loads this in every worker)
    import pyarrow as pa
    from pyspark.sql.types import StructType

__all__ = [
    "KafkaLogWriteError", "WriteOptions", "parse_write_options", "SinkColumns",
    "sink_columns", "WrittenRange", "KafkaLogCommitMessage", "write_task",
    "commit_summary", "abort_summary", "sink_messages", "BATCH_HEADER_KEYS", "WRITE_OPTION_NAMES",
    "check_reachable", "sink_named_unreachable",
]

log = logging.getLogger("spark_kafkalog.writers")
if log.level == logging.NOTSET:
    # The commit summary is an INFO line; Python's last-resort handler still prints only
    # WARNING and above, so this shows nowhere unless a handler is installed (e.g. Spark's
    # python worker logging, spark.sql.pyspark.worker.logging.enabled=true).
    log.setLevel(logging.INFO)


class KafkaLogWriteError(ValueError):
    """An invalid option or input column of the ``kafkalog`` sink (raised on the driver,
    before any record is sent)."""


# -- options -------------------------------------------------------------------------------

OPT_TOPIC = "topic"
OPT_BATCH_HEADERS = "kafkalog.writeBatchHeaders"
OPT_EXACTLY_ONCE = "kafkalog.exactlyOnce"
OPT_TXN_ID_PREFIX = "kafkalog.transactionalIdPrefix"
DEFAULT_TXN_ID_PREFIX = "kafkalog-sink"
KAFKA_PREFIX = "kafka."

# The user-facing spelling of every option, keyed by its lower-cased form (Spark hands
# options over with lower-cased keys). checkpointLocation is Spark's own (streaming): it
# arrives with the options and is not the sink's business.
# checkpointLocation and queryName: Spark passes them to the sink with the user's options
# (DataStreamWriter.queryName() lands here too); the sink keeps checkpointLocation (the
# exactly-once driver reads the query id there) and ignores queryName.
# The typed-write options (valueFormat, keyFormat, ..., formats/write_schema.py) are the
# sink's too, and so is every schema.registry.* key (the registry client's settings).
WRITE_OPTION_NAMES: dict[str, str] = {
    name.lower(): name for name in (OPT_TOPIC, OPT_BATCH_HEADERS, OPT_EXACTLY_ONCE, OPT_TXN_ID_PREFIX,
                                    "checkpointLocation", "queryName", *WRITE_FORMAT_OPTIONS)
}

_REFUSED_KAFKA = {
    "key.serializer": ("Kafka option 'key.serializer' is not supported as keys are serialized "
                       "with ByteArraySerializer. Use DataFrame operations to explicitly "
                       "serialize the keys into either strings or byte arrays."),
    "value.serializer": ("Kafka option 'value.serializer' is not supported as values are "
                         "serialized with ByteArraySerializer. Use DataFrame operations to "
                         "explicitly serialize the values into either strings or byte arrays."),
    "partitioner.class": ("Kafka option 'partitioner.class' is not supported by the kafkalog "
                          "sink: give rows a 'partition' column to choose their partitions"),
    "transactional.id": ("Kafka option 'transactional.id' is not supported by the kafkalog sink: "
                         "with kafkalog.exactlyOnce=true the sink derives one transactional id per "
                         "task (choose their prefix with kafkalog.transactionalIdPrefix)"),
}

# Sink defaults where Kafka's do not suit a bulk writer (applied when the user set none).
# batch.size: a Spark task hands over whole Arrow batches (10,000 rows by default), so
# bigger record batches cost nothing in latency and save per-batch work on both sides
# (`bench/spark_write.py --task-cpu`, the task body without Spark, 1-KiB rows, lz4, on a
# loaded machine): the broker's CPU per row is ~12-22 us at Kafka's 16384, ~4.5 at 262144,
# ~3.9 at 1000000, the task's own ~15-26 us at 16384 and ~5.5 at the larger two. 1000000 is
# librdkafka's default: the largest that, compressed or not, stays under the broker's
# default message.max.bytes (1048588) with room for codec framing (lz4 adds up to ~80 bytes
# per MiB of incompressible rows, so 1 MiB exactly could be refused and split).
# linger.ms: a task flushes at its end anyway; 5 ms is Kafka's default since 3.x.
SINK_PRODUCER_DEFAULTS: dict[str, str] = {
    "batch.size": "1000000",
    "linger.ms": "5",
}


@dataclass(frozen=True)
class WriteOptions:
    """The validated options of one write."""
    topic: str | None
    # kafka.* without the prefix, sink defaults applied; out of the repr: it may hold secrets
    # (kafka.sasl.jaas.config, kafka.ssl.keystore.password ...)
    producer_config: Mapping[str, str] = field(repr=False)
    write_batch_headers: bool = False
    # kafkalog.exactlyOnce: one transaction per task, completed by the driver (exactly_once.py)
    exactly_once: bool = False
    transactional_id_prefix: str = DEFAULT_TXN_ID_PREFIX
    # A batch write's id (set on the driver by make_writer; part of the transactional ids)
    write_id: str | None = None
    # Spark's checkpointLocation of a stream (passed with the options): the driver reads the
    # query id from its metadata file when no task of a micro-batch finished (exactly_once.py)
    checkpoint_location: str | None = None
    # valueFormat / keyFormat avro, protobuf or json: the typed-write options
    # (formats.write_schema.TypedWriteOptions; None: the columns are written as they are) and,
    # set on the driver by make_writer, the columns' writer schemas (TypedWrite)
    typed: Any = field(default=None, repr=False)
    encoding: Any = field(default=None, repr=False)

    @property
    def bootstrap_servers(self) -> str:
        return self.producer_config["bootstrap.servers"]


def _valid_names() -> str:
    return ", ".join(sorted(WRITE_OPTION_NAMES.values())) + ", kafka.* (producer settings)"


def _bool(name: str, text: str) -> bool:
    t = str(text).strip().lower()
    if t in ("true", "false"):
        return t == "true"
    raise KafkaLogWriteError(f"{name}: '{text}' is not valid; use true or false")


def _unknown_option(key: str) -> KafkaLogWriteError:
    """``unknown option 'x' for the kafkalog sink; did you mean 'y'?`` (the valid names when
    none is close; Spark passes the keys lower-cased)."""
    import difflib
    names = {n.lower(): n for n in (*WRITE_OPTION_NAMES.values(), "kafka.bootstrap.servers")}
    close = difflib.get_close_matches(key.lower(), list(names), n=1, cutoff=0.75)
    if close:
        return KafkaLogWriteError(f"unknown option {key!r} for the kafkalog sink; did you mean {names[close[0]]!r}?")
    return KafkaLogWriteError(f"unknown option {key!r} for the kafkalog sink; valid options: {_valid_names()}")


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    """Validate the sink's options (see the module docstring). Never touches the network."""
    from broker.client.producer.config import ConfigError, ProducerConfig

    topic: str | None = None
    checkpoint: str | None = None
    batch_headers = exactly_once = False
    prefix = DEFAULT_TXN_ID_PREFIX
    producer: dict[str, str] = {}
    typed_options: dict[str, str] = {}
    for raw_key, value in options.items():
        key = raw_key.lower()
        if key.startswith(KAFKA_PREFIX):
            name = key[len(KAFKA_PREFIX):]
            if name in _REFUSED_KAFKA:
                raise KafkaLogWriteError(_REFUSED_KAFKA[name])
            producer[name] = value
        elif key == OPT_TOPIC:
            topic = value
        elif key == OPT_BATCH_HEADERS.lower():
            batch_headers = _bool(OPT_BATCH_HEADERS, value)
        elif key == OPT_EXACTLY_ONCE.lower():
            exactly_once = _bool(OPT_EXACTLY_ONCE, value)
        elif key == OPT_TXN_ID_PREFIX.lower():
            prefix = str(value).strip()
            if not prefix:
                raise KafkaLogWriteError(f"option {OPT_TXN_ID_PREFIX} must not be empty")
        elif key == "checkpointlocation":
            checkpoint = str(value)
        elif key in WRITE_OPTION_NAMES or key.startswith("schema.registry."):
            typed_options[key] = value
        elif key == "path":
            raise KafkaLogWriteError(
                f"the kafkalog sink writes through Kafka brokers (kafka.bootstrap.servers), "
                f"not to a path: remove the path {value!r} (save() takes none)")
        elif key not in WRITE_OPTION_NAMES:
            raise _unknown_option(raw_key)
    from ..formats.write_schema import TypedWriteError, parse_typed_write_options
    try:
        typed = parse_typed_write_options(typed_options)
    except TypedWriteError as exc:
        raise KafkaLogWriteError(str(exc)) from None
    if not producer.get("bootstrap.servers", "").strip():
        raise KafkaLogWriteError(
            "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka producer")
    if topic is not None and not topic.strip():
        raise KafkaLogWriteError("option topic must not be empty")
    for k, v in SINK_PRODUCER_DEFAULTS.items():
        producer.setdefault(k, v)
    try:
        # with exactlyOnce, checked as the tasks' transactional producers will be (acks=all,
        # idempotence on)
        ProducerConfig({**producer, "transactional.id": prefix} if exactly_once else producer)
    except ConfigError as e:
        what = " (kafkalog.exactlyOnce=true needs a transactional producer)" if exactly_once else ""
        raise KafkaLogWriteError(f"option kafka.{e.key}: {e}{what}") from None
    return WriteOptions(topic=topic, producer_config=dict(producer),
                        write_batch_headers=batch_headers, exactly_once=exactly_once,
                        transactional_id_prefix=prefix, checkpoint_location=checkpoint, typed=typed)


# -- reachability ----------------------------------------------------------------------------

def sink_named_unreachable(error: BaseException) -> BaseException | None:
    """A client's ``BrokerUnreachableError`` renamed after the sink's option (``max.block.ms``
    becomes ``kafka.max.block.ms``); None for any other error."""
    from broker.client.errors import BrokerUnreachableError

    if not isinstance(error, BrokerUnreachableError):
        return None
    return error.renamed(f"kafka.{error.config}" if "." in error.config else error.config)


def check_reachable(options: WriteOptions) -> None:
    """The driver's preflight of a write, run where Spark asks for the writer, before any
    task starts (``make_writer``; ``make_stream_writer``, which pyspark calls before each
    micro-batch's tasks): one Metadata request for no topic to ``kafka.bootstrap.servers``,
    on a client built from the same settings as the tasks' producers (TLS, SASL, timeouts),
    bounded by ``kafka.max.block.ms``, the bound of the tasks' own first wait. Raises
    ``BrokerUnreachableError`` (``no broker of X reachable (connection refused); waited N ms
    (kafka.max.block.ms)``) or the TLS / SASL failure, which would fail every task, so that
    the error comes once, from the driver, instead of from every task; any other outcome is
    left to the tasks (the check never fails a write that could succeed). Costs a
    connection and one round trip (a few ms) per write or micro-batch."""
    from broker.client.errors import AuthenticationError, BrokerUnreachableError

    try:
        from broker.client.consumer.client import ConsumerNetworkClient
        from broker.client.producer.config import ProducerConfig
        from broker.client.txn_completion import client_config

        max_block_ms = ProducerConfig(dict(options.producer_config)).max_block_ms
        config = client_config(options.producer_config)
        config.setdefault("client.id", "kafkalog-sink-driver")
        with ConsumerNetworkClient(config) as client:
            client.describe_topics([], client.deadline(max_block_ms, "max.block.ms"))
    except BrokerUnreachableError as e:
        named = sink_named_unreachable(e) or e
        raise named.with_traceback(None) from None
    except AuthenticationError as e:
        raise e.with_traceback(None) from None
    except Exception:  # noqa: BLE001 - anything else is the tasks' to meet
        log.debug("kafkalog sink: the driver's reachability check failed; left to the tasks",
                  exc_info=True)


# -- input columns -------------------------------------------------------------------------

# Columns of the kafkalog/kafka source's row schema that the sink does not write: a
# DataFrame read from a topic can be written to another as it is (topic, partition, key,
# value, headers and timestamp are used; these two are ignored).
IGNORED_SOURCE_COLUMNS = ("offset", "timestampType")


@dataclass(frozen=True)
class SinkColumns:
    """Positions of the sink's columns in the input rows (Arrow batches have the input
    schema's column order); None when absent."""
    value: int
    key: int | None = None
    topic: int | None = None
    partition: int | None = None
    headers: int | None = None
    timestamp: int | None = None
    names: tuple[str, ...] = ()


def _headers_type_ok(dt: Any) -> bool:
    from pyspark.sql.types import ArrayType, BinaryType, StringType, StructType
    if not isinstance(dt, ArrayType) or not isinstance(dt.elementType, StructType):
        return False
    fields = dt.elementType.fields
    return (len(fields) == 2 and fields[0].name == "key" and isinstance(fields[0].dataType, StringType)
            and fields[1].name == "value" and isinstance(fields[1].dataType, BinaryType))


def sink_columns(schema: StructType, options: WriteOptions) -> SinkColumns:
    """Check ``schema`` against the sink's rules; raise ``KafkaLogWriteError`` naming the
    first offending column and its type (names are matched case-insensitively, as Spark's
    resolver does by default)."""
    from pyspark.sql.types import BinaryType, IntegerType, StringType, TimestampType

    found: dict[str, int] = {}
    for i, f in enumerate(schema.fields):
        name = f.name.lower()
        if name in found:
            raise KafkaLogWriteError(f"the input has two columns named {f.name!r} "
                                     "(names are case-insensitive)")
        found[name] = i

    def typ(i: int) -> str:
        return schema.fields[i].dataType.simpleString()

    def col(i: int) -> str:
        return schema.fields[i].name

    known = {"value", "key", "topic", "partition", "headers", "timestamp"}
    ignored = {c.lower() for c in IGNORED_SOURCE_COLUMNS}
    for name, i in found.items():
        if name not in known and name not in ignored:
            raise KafkaLogWriteError(
                f"column {col(i)!r} ({typ(i)}) is not written by the kafkalog sink; its input "
                "columns are value (binary or string, required), key (binary or string), topic "
                "(string), partition (int), headers (array<struct<key:string,value:binary>>) "
                "and timestamp (timestamp); drop or rename the column")
    if "value" not in found:
        raise KafkaLogWriteError("Required attribute 'value' not found (the input columns are "
                                 + ", ".join(f"{f.name} {f.dataType.simpleString()}"
                                             for f in schema.fields) + ")")
    v = found["value"]
    typed = options.typed
    if (typed is None or not typed.typed(False)) and not isinstance(schema.fields[v].dataType,
                                                                     (StringType, BinaryType)):
        raise KafkaLogWriteError(f"value attribute type must be a string or binary, "
                                 f"but column {col(v)!r} is {typ(v)}")
    k = found.get("key")
    if k is not None and (typed is None or not typed.typed(True)) \
            and not isinstance(schema.fields[k].dataType, (StringType, BinaryType)):
        raise KafkaLogWriteError(f"key attribute type must be a string or binary, "
                                 f"but column {col(k)!r} is {typ(k)}")
    t = found.get("topic")
    if options.topic is None:
        if t is None:
            raise KafkaLogWriteError("topic option required when no 'topic' attribute is "
                                     "present. Use the topic option for setting a topic.")
        if not isinstance(schema.fields[t].dataType, StringType):
            raise KafkaLogWriteError(f"topic attribute type must be a string, "
                                     f"but column {col(t)!r} is {typ(t)}")
    else:
        t = None  # the topic option wins over the column, as in Spark's sink
    p = found.get("partition")
    if p is not None and not isinstance(schema.fields[p].dataType, IntegerType):
        raise KafkaLogWriteError(f"partition attribute type must be an int, "
                                 f"but column {col(p)!r} is {typ(p)}")
    h = found.get("headers")
    if h is not None and not _headers_type_ok(schema.fields[h].dataType):
        raise KafkaLogWriteError(f"headers attribute type must be "
                                 f"array<struct<key:string,value:binary>>, "
                                 f"but column {col(h)!r} is {typ(h)}")
    ts = found.get("timestamp")
    if ts is not None and not isinstance(schema.fields[ts].dataType, TimestampType):
        raise KafkaLogWriteError(f"timestamp attribute type must be a timestamp (the record's "
                                 f"CreateTime), but column {col(ts)!r} is {typ(ts)}")
    return SinkColumns(value=v, key=k, topic=t, partition=p, headers=h, timestamp=ts,
                       names=tuple(f.name for f in schema.fields))


# -- commit messages -----------------------------------------------------------------------

@dataclass(frozen=True)
class WrittenRange:
    """Records one task attempt wrote to one topic-partition: offsets
    [first_offset, last_offset] hold ``count`` of them (interleaved with other writers'
    records when several write to the partition); -1 when the broker did not say
    (acks=0)."""
    topic: str
    partition: int
    first_offset: int
    last_offset: int
    count: int

    def __str__(self) -> str:
        return (f"{self.topic}-{self.partition} offsets {self.first_offset}..{self.last_offset} "
                f"({self.count} records)")


@dataclass(frozen=True)
class KafkaLogCommitMessage(WriterCommitMessage):
    """What one task attempt wrote (returned by ``write`` and handed to the driver's
    ``commit``). ``producer_id`` / ``producer_epoch`` identify the idempotent producer
    (-1 when idempotence is off); ``batch_id`` / ``query_id`` are set in a streaming
    query. With ``kafkalog.exactlyOnce``: ``transactional_id`` names the task's transaction,
    left open for the driver to commit or abort (with ``producer_id`` / ``producer_epoch``);
    ``already_committed``: a replayed micro-batch whose transaction for this Spark
    partition had committed before, so nothing was written."""
    spark_partition: int
    attempt: int
    ranges: tuple[WrittenRange, ...]
    records: int
    bytes: int
    producer_id: int = -1
    producer_epoch: int = -1
    batch_id: int | None = None
    query_id: str | None = None
    seconds: float = 0.0
    extra: Mapping[str, Any] = field(default_factory=dict)
    transactional_id: str | None = None
    already_committed: bool = False


def sink_messages(messages: Sequence[WriterCommitMessage | None]) -> list[KafkaLogCommitMessage | None]:
    """What Spark hands the driver's ``commit`` / ``abort``, typed: each task's
    ``KafkaLogCommitMessage`` as its ``write`` returned it, None for a failed task."""
    out: list[KafkaLogCommitMessage | None] = []
    for m in messages:
        if m is not None and not isinstance(m, KafkaLogCommitMessage):
            raise TypeError(f"a commit message of another sink: {type(m).__name__}")
        out.append(m)
    return out


def _ranges_text(ranges: Iterable[WrittenRange], limit: int = 8) -> str:
    ranges = list(ranges)
    text = ", ".join(str(r) for r in ranges[:limit])
    if len(ranges) > limit:
        text += f", ... ({len(ranges) - limit} more)"
    return text or "nothing"


def _where(batch_id: int | None, query_id: str | None) -> str:
    if batch_id is None:
        return ""
    return f" (micro-batch {batch_id}" + (f" of query {query_id})" if query_id else ")")


def commit_summary(messages: Sequence[KafkaLogCommitMessage | None],
                   batch_id: int | None = None) -> str:
    """One line: records, bytes and topic-partitions written by the job's tasks."""
    msgs = [m for m in messages if m is not None]
    records = sum(m.records for m in msgs)
    nbytes = sum(m.bytes for m in msgs)
    parts = sorted({(r.topic, r.partition) for m in msgs for r in m.ranges})
    topics: dict[str, list[int]] = {}
    for t, p in parts:
        topics.setdefault(t, []).append(p)
    where = ", ".join(f"{t}[{','.join(map(str, ps))}]" for t, ps in topics.items()) or "-"
    retried = sum(1 for m in msgs if m.attempt > 0)
    query_id = next((m.query_id for m in msgs if m.query_id), None)
    line = (f"kafkalog write committed{_where(batch_id, query_id)}: {records} records, "
            f"{nbytes} bytes, {len(parts)} partitions ({where}), {len(msgs)} tasks")
    if retried:
        line += (f"; {retried} task(s) succeeded on a retry: their failed attempts may have "
                 "written duplicates (at-least-once)")
    return line


def abort_summary(messages: Sequence[KafkaLogCommitMessage | None],
                  batch_id: int | None = None) -> str:
    """One line: which tasks failed, and what the finished ones had written (records stay
    in the log: Kafka cannot take them back)."""
    failed = [i for i, m in enumerate(messages) if m is None]
    done = [m for m in messages if m is not None]
    query_id = next((m.query_id for m in done if m.query_id), None)
    line = (f"kafkalog write aborted{_where(batch_id, query_id)}: {len(failed)} of "
            f"{len(messages)} tasks failed or did not finish (tasks {failed}; what their "
            "attempts had written is in their task errors)")
    if done:
        line += (f"; {len(done)} finished task(s) had written {sum(m.records for m in done)} "
                 f"records, which stay in the log: "
                 + _ranges_text(r for m in done for r in m.ranges))
    return line


# -- the task ------------------------------------------------------------------------------

# How long a failing task keeps delivering what it had queued, so that its report of
# what was written is exact (the records are duplicates-to-be either way).
FAILURE_FLUSH_SECONDS = 10.0


@dataclass
class TaskInfo:
    """The Spark task a ``write_task`` call runs in."""
    partition: int = 0
    attempt: int = 0
    batch_id: int | None = None
    query_id: str | None = None

    @classmethod
    def current(cls, streaming: bool) -> TaskInfo:
        from pyspark import TaskContext
        tc = TaskContext.get()
        if tc is None:  # outside Spark (unit use)
            return cls()
        info = cls(partition=tc.partitionId(), attempt=tc.attemptNumber())
        if streaming:
            bid = tc.getLocalProperty("streaming.sql.batchId")
            info.batch_id = int(bid) if bid is not None else None
            info.query_id = tc.getLocalProperty("sql.streaming.queryId")
        return info


class _Ranges:
    """Per topic-partition [first, last, count] of acknowledged sends."""

    def __init__(self) -> None:
        self.parts: dict[tuple[str, int], list[int]] = {}

    def add(self, result: Any) -> None:
        if result is None:
            return
        for p, r in result.partitions.items():
            cur = self.parts.get((result.topic, p))
            if cur is None:
                self.parts[(result.topic, p)] = [r.first_offset, r.last_offset, r.count]
            else:
                if r.first_offset >= 0 and (cur[0] < 0 or r.first_offset < cur[0]):
                    cur[0] = r.first_offset
                cur[1] = max(cur[1], r.last_offset)
                cur[2] += r.count

    def ranges(self) -> tuple[WrittenRange, ...]:
        return tuple(WrittenRange(t, p, *v) for (t, p), v in sorted(self.parts.items()))

    @property
    def records(self) -> int:
        return sum(v[2] for v in self.parts.values())


class _TaskWriter:
    """One task's sends (see ``write_task``)."""

    def __init__(self, options: WriteOptions, columns: SinkColumns, info: TaskInfo,
                 overrides: Mapping[str, str] | None = None) -> None:
        from broker.client.producer import KafkaProducer

        self.options = options
        self.columns = columns
        self.info = info
        config = {**options.producer_config, **(overrides or {})}
        if "client.id" not in config:
            config["client.id"] = f"kafkalog-sink-p{info.partition}-a{info.attempt}"
        self.producer = KafkaProducer(config)
        self.futures: list = []
        self.ranges = _Ranges()
        self.bytes = 0
        self.seq = 0
        self.headers_builder = _BatchHeaders(info) if options.write_batch_headers else None

    # -- sending -------------------------------------------------------------------------

    def _reap(self) -> None:
        """Fold completed sends into the ranges (raising the first failure early)."""
        if not self.futures or not self.futures[0].done():
            return
        keep = []
        for i, f in enumerate(self.futures):
            if f.done():
                self.ranges.add(f.result())
            else:
                keep = self.futures[i:]
                break
        self.futures = keep

    def _send(self, topic: str, values, keys, headers, timestamps, partitions) -> None:
        self.futures.append(self.producer.send_arrow(topic, values, keys=keys, headers=headers,
                                                     timestamps=timestamps, partitions=partitions))

    def _send_partitioned(self, topic: str, values, keys, headers, timestamps, partitions) -> None:
        """Rows with a null partition go to the producer's partitioner; runs keep order."""
        if partitions is None or partitions.null_count == 0:
            self._send(topic, values, keys, headers, timestamps, partitions)
            return
        import numpy as np
        if partitions.null_count == len(partitions):
            self._send(topic, values, keys, headers, timestamps, None)
            return
        valid = partitions.is_valid().to_numpy(zero_copy_only=False).astype(bool)
        for s, e, explicit in _runs(np.asarray(valid)):
            sl = (lambda c, s=s, e=e: None if c is None else c.slice(s, e - s))
            self._send(topic, sl(values), sl(keys), sl(headers), sl(timestamps),
                       sl(partitions) if explicit else None)

    def write_batch(self, batch: pa.RecordBatch) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc
        n = batch.num_rows
        if n == 0:
            return
        c = self.columns
        get = (lambda i: None if i is None else batch.column(i))
        values, keys = get(c.value), get(c.key)
        if self.options.encoding is not None:  # valueFormat / keyFormat: the framed payloads
            values, keys = encode_typed_columns(values, keys, self.options.encoding)
        headers, timestamps, partitions = get(c.headers), get(c.timestamp), get(c.partition)
        if partitions is not None and c.partition is not None:  # the one implies the other
            if partitions.null_count < n and pc.min(partitions).as_py() < 0:
                raise ValueError(f"a negative partition in column {c.names[c.partition]!r}: "
                                 f"{pc.min(partitions).as_py()}")
        if self.headers_builder is not None:
            headers = self.headers_builder.build(self.seq, n, headers)
        self.seq += n
        self.bytes += _binary_bytes(values) + _binary_bytes(keys)
        if self.options.topic is not None:  # then no topic column (sink_columns)
            self._send_partitioned(self.options.topic, values, keys, headers, timestamps, partitions)
        else:
            topics = batch.column(c.topic)
            if topics.null_count:
                raise ValueError("null topic present in the data. Use the topic option for "
                                 "setting a topic.")
            uniq = pc.unique(topics)
            if len(uniq) == 1:
                self._send_partitioned(uniq[0].as_py(), values, keys, headers, timestamps, partitions)
            else:
                for t in uniq.to_pylist():
                    mask = pc.equal(topics, pa.scalar(t, topics.type))
                    f = (lambda col, mask=mask: None if col is None else col.filter(mask))
                    self._send_partitioned(t, f(values), f(keys), f(headers), f(timestamps),
                                           f(partitions))
        self._reap()

    # -- ending --------------------------------------------------------------------------

    def finish(self) -> None:
        """Flush; fold every send's result in; raise the first failure."""
        self.producer.flush()
        futures, self.futures = self.futures, []
        error = None
        for f in futures:
            try:
                self.ranges.add(f.result())
            except BaseException as e:  # noqa: BLE001 (kept: the first error is raised)
                self.ranges.add(getattr(e, "partial_result", None))
                error = error or e
        if error is not None:
            raise error

    def salvage(self, own_error: bool) -> None:
        """After a failure: deliver what is queued (briefly, unless the producer itself
        failed) and fold in what was acknowledged, for the report."""
        try:
            self.producer.close(0 if own_error else FAILURE_FLUSH_SECONDS)
        except BaseException:  # noqa: BLE001 (best effort on the failure path)
            pass
        for f in self.futures:
            if not f.done():
                continue
            try:
                self.ranges.add(f.result(0))
            except BaseException as e:  # noqa: BLE001
                self.ranges.add(getattr(e, "partial_result", None))
        self.futures = []

    def message(self, seconds: float) -> KafkaLogCommitMessage:
        m = self.producer.metrics()
        return KafkaLogCommitMessage(
            spark_partition=self.info.partition, attempt=self.info.attempt,
            ranges=self.ranges.ranges(), records=self.ranges.records, bytes=self.bytes,
            producer_id=int(m.get("producer-id", -1)), producer_epoch=int(m.get("producer-epoch", -1)),
            batch_id=self.info.batch_id, query_id=self.info.query_id, seconds=round(seconds, 3))


def write_task(options: WriteOptions, columns: SinkColumns,
               batches: Iterator[pa.RecordBatch], *, streaming: bool,
               info: TaskInfo | None = None) -> KafkaLogCommitMessage:
    """Send every row of ``batches`` and return what was written (see the module
    docstring). ``info`` defaults to the current Spark task's."""
    from broker.client.errors import KafkaError

    start = time.monotonic()
    info = info or TaskInfo.current(streaming)
    task = _TaskWriter(options, columns, info)
    try:
        for batch in batches:
            task.write_batch(batch)
        task.finish()
    except BaseException as e:
        task.salvage(own_error=isinstance(e, KafkaError))
        written = _ranges_text(task.ranges.ranges())
        note = (f"kafkalog sink: Spark partition {info.partition} attempt {info.attempt}"
                f"{_where(info.batch_id, info.query_id)} failed after writing "
                f"{task.ranges.records} records: {written}; a retry writes them again "
                "(at-least-once)")
        unreachable = sink_named_unreachable(e)
        if unreachable is not None:  # named by the sink's option, without the client's frames
            e = unreachable
        log.warning(f"{note}: {type(e).__name__}: {e}")
        try:
            e.add_note(note)
        except (AttributeError, TypeError):
            pass
        if unreachable is not None:
            raise e from None
        raise
    task.producer.close()
    message = task.message(time.monotonic() - start)
    # Also logged when the task fails later or upstream: Spark then ends the writer's input
    # as if it were complete, and discards the message, so this line (executor log) is
    # where the failed attempt's writes are told.
    log.info(f"kafkalog sink: Spark partition {info.partition} attempt {info.attempt}"
             f"{_where(info.batch_id, info.query_id)} wrote {message.records} records, "
             f"{message.bytes} bytes in {message.seconds:.3f} s (producer id "
             f"{message.producer_id} epoch {message.producer_epoch}): "
             f"{_ranges_text(message.ranges)}")
    return message
