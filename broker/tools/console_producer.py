"""Send each line of stdin, or of files, as one record to a topic, like Kafka's
kafka-console-producer.sh.

Owns the ``kafkalog produce`` subcommand: its options, the producer configuration it
builds, the input loop, and the exit code. Line parsing (keys, per-line headers, null
markers) is ``records_format.LineParser``; sending is the project's ``KafkaProducer``.

Behaviour:

- Input: stdin by default, or ``--file PATH`` (repeatable, ``-`` is stdin), read as
  bytes: each line is one record, its terminator (``\\n`` or ``\\r\\n``) removed, nothing
  else touched (no decoding: any bytes go through). An empty line is a record with an
  empty value, as in Kafka. Every file is checked before anything is sent.
- Keys: ``--key-separator SEP`` makes each line ``KEY<SEP>VALUE``
  (``--property parse.key=true`` and ``key.separator`` are Kafka's spelling; Kafka's
  default separator is TAB). A line without the separator stops the command with one line
  naming the file and line number, as Kafka's tool does; the records before it are
  delivered (``--property ignore.error=true`` sends such a line with a null key instead).
- Headers: ``--header K=V`` (repeatable) is added to every record; per-line headers with
  ``--parse-headers`` (``HEADERS<TAB>KEY<TAB>VALUE``, HEADERS ``k1:v1,k2:v2``) and
  ``--headers-delimiter`` / ``--headers-separator`` / ``--headers-key-separator`` (each
  implies ``--parse-headers``), Kafka's ``parse.headers`` properties.
- Schema Registry formats, as Confluent's ``kafka-avro-console-producer`` (and its
  Protobuf and JSON Schema variants): ``--property schema.registry.url=URL`` with
  ``value.schema`` / ``value.schema.file`` / ``value.schema.id`` (``value.format=avro``,
  the default, ``protobuf`` or ``json``; keys alike with ``key.*`` and ``parse.key``),
  ``auto.register``, ``use.latest.version``, ``*.subject.name.strategy``: each line's
  key and value are then JSON, serialized and framed as Confluent's serializers do
  (``schema_serde.ProducerSerdes``). The schemas are parsed before anything else and
  registered (or found) once, after the broker preflight and before the first line is
  read: a schema the registry refuses stops the command with nothing sent; a line that
  does not fit its schema stops it like a line without its key separator.
- Producer settings: ``--producer.config FILE`` (Java properties, e.g.
  conf/producer.properties) < ``--producer-property K=V`` < the dedicated options
  (``--bootstrap-server``, ``--compression``, ``--acks``), each overriding the previous,
  as in Kafka. Unknown keys are an error naming where they came from.
- Before reading any input the topic's metadata is fetched (the broker creates an unknown
  topic when its ``auto.create.topics.enable`` is true, Kafka's default and this
  broker's): an unreachable broker (retried for ``max.block.ms``, default 60 s, after one
  line naming the cause at once: ``no broker of 127.0.0.1:1 reachable yet (connection
  refused); retrying until max.block.ms (60000 ms)...``), a topic that does not exist and
  was not created, or a ``--partition`` past the topic's partitions exits 1 with one line
  (``no broker of 127.0.0.1:1 reachable (connection refused); waited 60000 ms
  (max.block.ms)``); a TLS or SASL failure at once.
- Nothing is lost: the producer is flushed and closed before exit; a record the broker
  did not take makes the command exit 1 saying how many were not delivered (reading stops
  at the first failure). Ctrl-C stops reading, delivers every line read so far and exits
  130 (a second Ctrl-C gives up on them). ``--sync`` waits for each record's
  acknowledgement before reading the next line.
- Output: nothing on stdout, and nothing on stderr for a successful short run (Kafka's
  tool prints nothing either). Files totalling more than 64 MiB show a byte progress
  bar on stderr when it is a terminal (``common.progress``; stdout does not matter, as
  nothing is printed there), followed by a one-line summary.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from pathlib import Path
from typing import Any, BinaryIO

from .common import PROGRESS_THRESHOLD_BYTES, CliError, parse_key_value, progress, report_unreachable
from .records_format import (
    READER_PROPERTIES,
    InterruptGuard,
    LineError,
    LineParser,
    add_bootstrap_argument,
    build_config,
    client_settings,
    key_values,
)

NAME = "produce"
SUMMARY = "send lines of stdin or files to a topic (like kafka-console-producer.sh)"

COMPRESSION_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
ACKS = ("all", "-1", "0", "1")
STDIN = "-"


def _partition(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_argument(parser)
    parser.add_argument("--topic", required=True, help="the topic to produce to")
    parser.add_argument("--file", action="append", metavar="PATH",
                        help="read lines from this file instead of stdin (repeatable; - is stdin)")
    parser.add_argument("--key-separator", metavar="SEP",
                        help="each line is KEY<SEP>VALUE (\\t, \\n, \\\\ escapes understood)")
    parser.add_argument("--parse-headers", action="store_true",
                        help="each line starts with headers: k1:v1,k2:v2<TAB>[KEY<SEP>]VALUE")
    parser.add_argument("--headers-delimiter", metavar="SEP",
                        help="between the headers and the rest of the line (default TAB; "
                             "implies --parse-headers)")
    parser.add_argument("--headers-separator", metavar="SEP",
                        help="between header pairs (default ','; implies --parse-headers)")
    parser.add_argument("--headers-key-separator", metavar="SEP",
                        help="between a header's key and value (default ':'; implies "
                             "--parse-headers)")
    parser.add_argument("--header", action="append", metavar="K=V",
                        help="a header added to every record (repeatable)")
    parser.add_argument("--property", action="append", metavar="K=V",
                        help="line reader property, Kafka's names: parse.key, key.separator, "
                             "parse.headers, headers.delimiter, headers.separator, "
                             "headers.key.separator, null.marker, ignore.error; and "
                             "Confluent's Schema Registry ones: schema.registry.url, "
                             "value.format=avro|protobuf|json, value.schema, value.schema.file, "
                             "value.schema.id, value.schema.message (key.* alike), auto.register, "
                             "use.latest.version, value.subject.name.strategy, "
                             "basic.auth.user.info, ...")
    parser.add_argument("--partition", type=_partition, metavar="N",
                        help="send every record to this partition (default: by key, else "
                             "sticky)")
    parser.add_argument("--compression", "--compression-codec", dest="compression",
                        choices=COMPRESSION_CODECS, nargs="?", const="gzip",
                        help="batch compression (given without a value: gzip, as Kafka's "
                             "--compression-codec)")
    parser.add_argument("--acks", "--request-required-acks", dest="acks", choices=ACKS,
                        help="acknowledgements the broker must collect (default all)")
    parser.add_argument("--producer-property", action="append", metavar="K=V",
                        help="a producer config key (repeatable), e.g. linger.ms=100")
    parser.add_argument("--producer.config", dest="producer_config", metavar="FILE",
                        help="a Java properties file of producer config keys "
                             "(see conf/producer.properties)")
    parser.add_argument("--sync", action="store_true",
                        help="wait for each record's acknowledgement before the next line")


# --- configuration ---------------------------------------------------------------------

def producer_settings(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, str]]:
    """The merged producer config keys and where each came from."""
    return client_settings("producer", args.producer_config, args.producer_property, {
        "bootstrap.servers": args.bootstrap_server, "compression.type": args.compression,
        "acks": args.acks})


def reader_properties(args: argparse.Namespace) -> dict[str, str]:
    props = key_values(args.property, "--property", strip=False)
    if args.key_separator is not None:
        props["parse.key"] = "true"
        props["key.separator"] = args.key_separator
    for option, key in (("headers_delimiter", "headers.delimiter"),
                        ("headers_separator", "headers.separator"),
                        ("headers_key_separator", "headers.key.separator")):
        value = getattr(args, option)
        if value is not None:
            props["parse.headers"] = "true"
            props[key] = value
    if args.parse_headers:
        props["parse.headers"] = "true"
    return props


def record_headers(items: list[str] | None) -> list[tuple[str, bytes | None]]:
    out: list[tuple[str, bytes | None]] = []
    for item in items or ():
        key, value = parse_key_value(item, "--header")
        out.append((key, value.encode("utf-8")))
    return out


def check_inputs(files: list[str] | None) -> list[str]:
    """The inputs in order (``-`` = stdin); ``CliError`` for a file that cannot be read."""
    inputs = list(files) if files else [STDIN]
    if inputs.count(STDIN) > 1:
        raise CliError("--file - (stdin) may be given once")
    for path in inputs:
        if path == STDIN:
            continue
        p = Path(path)
        if not p.exists():
            raise CliError(f"--file {path}: no such file")
        if p.is_dir():
            raise CliError(f"--file {path}: is a directory")
        if not os.access(p, os.R_OK):
            raise CliError(f"--file {path}: permission denied")
    return inputs


def preflight(settings: dict[str, Any], topic: str, partition: int | None) -> int:
    """The partition count of ``topic``, after asking the broker for its metadata (which
    creates it when the broker auto-creates topics); ``CliError`` when the broker cannot be
    reached within max.block.ms, the topic does not exist or ``partition`` is past it."""
    from broker.client.consumer import ConsumerConfig, ConsumerNetworkClient
    from broker.client.consumer.offsets import UNKNOWN_TOPIC_GRACE_MS
    from broker.client.errors import BrokerUnreachableError, KafkaTimeoutError
    from broker.client.network import now_ms
    from broker.client.producer.config import ProducerConfig
    from broker.client.ssl_context import security_settings

    cfg = ProducerConfig(settings)
    servers = ",".join(cfg["bootstrap.servers"])
    max_block = cfg.max_block_ms
    client_keys = ("client.id", "request.timeout.ms", "reconnect.backoff.ms",
                   "reconnect.backoff.max.ms", "socket.connection.setup.timeout.ms",
                   "retry.backoff.ms", "retry.backoff.max.ms", "security.protocol", "sasl.mechanism",
                   "sasl.jaas.config", "sasl.username", "sasl.password", "sasl.oauthbearer.token.endpoint.url")
    consumer_cfg = ConsumerConfig({"bootstrap.servers": cfg["bootstrap.servers"],
                                   "allow.auto.create.topics": True,
                                   **{k: cfg[k] for k in client_keys},
                                   **security_settings(cfg.values)})
    with report_unreachable(NAME, "max.block.ms", max_block), ConsumerNetworkClient(consumer_cfg) as client:
        md = client.metadata
        md.add_topic(topic)
        deadline = client.deadline(max_block, "max.block.ms")
        answered = False
        unknown_since = None
        attempt = 0
        while True:
            try:
                cluster = client.await_metadata_update(deadline)
            except BrokerUnreachableError as exc:
                raise CliError(str(exc)) from None
            except KafkaTimeoutError:
                if not answered:
                    raise CliError(f"cannot reach the broker at {servers} within {max_block} ms "
                                   "(max.block.ms)") from None
                raise CliError(f"topic {topic} is not available on {servers} after "
                               f"{max_block} ms (max.block.ms)") from None
            answered = True
            error = md.fatal_error(topic)
            if error is not None:
                raise CliError(str(error))
            count = cluster.partition_count(topic)
            if count and all(p.leader >= 0 for p in cluster.partitions_for_topic(topic)):
                break
            if not count:
                now = now_ms()
                unknown_since = unknown_since if unknown_since is not None else now
                if now - unknown_since >= UNKNOWN_TOPIC_GRACE_MS:
                    raise CliError(f"topic {topic} does not exist on {servers}, and the broker "
                                   "does not create topics on use (auto.create.topics.enable"
                                   "=false); create it first")
            client.sleep(client.backoff_ms(attempt), deadline)
            attempt += 1
    if partition is not None and partition >= count:
        raise CliError(f"--partition {partition}: topic {topic} has {count} partition"
                       f"{'s' if count != 1 else ''} (0-{count - 1})")
    return count


# --- the input loop --------------------------------------------------------------------

class _Delivery:
    """Counts acknowledged and failed records (callbacks run on the producer's thread)."""

    def __init__(self) -> None:
        self.acked = 0
        self.failed = 0
        self.first_error: BaseException | None = None
        self._lock = threading.Lock()

    def __call__(self, error: BaseException | None, metadata: Any) -> None:
        with self._lock:
            if error is None:
                self.acked += 1
            else:
                self.failed += 1
                if self.first_error is None:
                    self.first_error = error


def _show_progress(total: int) -> bool:
    """``common.progress``'s policy, except that stdout does not matter: this command
    writes nothing there, so a terminal stdout cannot tear the bar."""
    try:
        return total > PROGRESS_THRESHOLD_BYTES and sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _label(path: str) -> str:
    return "stdin" if path == STDIN else path


def _open(path: str) -> BinaryIO:
    return sys.stdin.buffer if path == STDIN else open(path, "rb")  # noqa: SIM115


def run(args: argparse.Namespace) -> int:
    from broker.client.errors import KafkaError
    from broker.client.producer import KafkaProducer
    from broker.client.producer.config import ProducerConfig

    inputs = check_inputs(args.file)
    props = reader_properties(args)
    serdes = None
    if any(k not in READER_PROPERTIES for k in props):  # a Schema Registry format (schema_serde)
        from .schema_serde import ProducerSerdes, split_properties

        schema_props, line_props = split_properties(props, consumer=False, others=READER_PROPERTIES)
        parser = LineParser(line_props)
        serdes = ProducerSerdes(schema_props, args.topic, parse_key=parser.parse_key)
    else:
        parser = LineParser(props)
    common_headers = record_headers(args.header)
    settings, sources = producer_settings(args)
    build_config(ProducerConfig, settings, sources)  # every key checked before connecting
    if settings.get("transactional.id") is not None:  # its records are not sent in a transaction
        raise CliError("transactional.id: transactions are not supported by kafkalog produce")
    topic = args.topic
    try:
        preflight(settings, topic, args.partition)
    except KafkaError as exc:
        raise CliError(str(exc)) from None
    if serdes is not None:
        try:
            serdes.connect()  # registered (or found) before the first record; CliError if refused
        except BaseException:
            serdes.close()
            raise
    key_serializer = serdes.key if serdes is not None else None
    value_serializer = serdes.value if serdes is not None else None
    total = sum(os.path.getsize(p) for p in inputs if p != STDIN)
    delivery = _Delivery()
    sent = 0
    sent_bytes = 0
    interrupted = False
    summary = False
    bad_line: str | None = None
    send_error: BaseException | None = None
    producer = build_config(KafkaProducer, settings, sources)
    try:
        with InterruptGuard() as interrupts, \
                progress(total, f"producing to {topic}", enabled=_show_progress(total)) as bar:
            send, partition, sync = producer.send, args.partition, args.sync
            for path in inputs:
                if interrupts.stop or delivery.failed:
                    break
                bar.describe(f"{_label(path)} -> {topic}")
                stream = _open(path)
                try:
                    lineno = 0
                    readline = stream.readline
                    while True:
                        interrupts.interruptible = True
                        try:
                            raw = readline()
                        finally:
                            interrupts.interruptible = False
                        if not raw:
                            break
                        lineno += 1
                        bar.advance(len(raw))
                        line = raw[:-1] if raw.endswith(b"\n") else raw
                        if line.endswith(b"\r"):
                            line = line[:-1]
                        try:
                            key, value, headers = parser.parse(line)
                            if key_serializer is not None and key is not None:
                                key = key_serializer(key)
                            if value_serializer is not None and value is not None:
                                value = value_serializer(value)
                        except LineError as exc:
                            bad_line = (f"{_label(path)} line {lineno}: {exc} (nothing after "
                                        f"it was sent; the {sent} record"
                                        f"{'s' if sent != 1 else ''} before it "
                                        f"{'were' if sent != 1 else 'was'})")
                            break
                        if common_headers:
                            headers = common_headers + headers if headers else common_headers
                        future = send(topic, value, key, partition, None, headers or None,
                                      delivery)
                        sent += 1
                        sent_bytes += len(line)
                        if sync:
                            future.exception()
                        if interrupts.stop or delivery.failed:
                            break
                finally:
                    if path != STDIN:
                        stream.close()
                if bad_line is not None:
                    break
            interrupted = interrupts.stop
            if bar.enabled:
                summary = True
                bar.describe(f"delivering to {topic}")
                producer.flush()
    except KeyboardInterrupt:
        interrupted = True
    except KafkaError as exc:  # send() itself refused (buffer.memory exhausted, ...)
        send_error = exc
    finally:
        producer.close()  # delivers everything sent (a second Ctrl-C abandons it)
        if serdes is not None:
            serdes.close()
    problems = []
    if bad_line is not None:
        problems.append(bad_line)
    if send_error is not None:
        problems.append(f"record {sent + 1} could not be sent: {send_error} (the {sent} before "
                        "it were)")
    if delivery.failed:
        problems.append(f"{delivery.failed} of {sent} records were not delivered to {topic}: "
                        f"{delivery.first_error}")
    if problems:
        raise CliError("; ".join(problems))
    if interrupted:
        return 130
    if summary:
        print(f"kafkalog {NAME}: sent {sent} records ({sent_bytes} bytes) to {topic}",
              file=sys.stderr, flush=True)
    return 0
