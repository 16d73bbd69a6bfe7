"""Export topics to Parquet, CSV or JSON files, or one topic to an Iceberg or Delta table
exactly once and incrementally, with a Spark batch job, from a Kafka cluster
(--bootstrap-servers) or straight from a broker's log directory (--path).

Tables (``--format iceberg|delta --table ...``; ``spark_kafkalog/tables/job.py`` is the
manual): each run appends what the topic holds after the offsets the table's last commit
stores, and stores the new ones in the same commit; ``--compact`` and ``--expire`` keep the
table in shape afterwards. ``--streaming`` runs the same export as a structured streaming
query (``spark_kafkalog/tables/stream.py``): ``--trigger available-now`` (the default) or an
interval (until Ctrl-C: the query is stopped, exit status 130), ``--max-offsets-per-trigger``;
one line per committed micro-batch, then a summary. ``--output``, ``--starting-offsets``, ``--ending-offsets``,
``--mode`` and ``--binary-encoding`` are the files' options only.

Owns the ``kafkalog export`` subcommand: its options, the checks made before any JVM
starts (--bootstrap-servers and/or --path: both is stitched mode, the cluster's remote
storage read from --path for the offsets only it holds; an existing --output without
--mode, and the whole offset planning: unknown topics, bad offsets JSON, an unreachable
cluster), the SparkSession it runs in, the progress bar and the closing summary. The job
itself (columns per format, binary encodings, progress granularity, counts) is
``spark_kafkalog/jobs/export.py``, whose docstring is the manual.

The session (``spark_kafkalog/jobs/session.py``): an active one is used as it is; under
``spark-submit`` the one spark-submit configured; otherwise a quiet local one on
``--master`` (default ``local[*]``), which the command stops at the end.

Output: a progress bar of the offsets read (stderr, only on a terminal; --no-progress
turns it off), then one paragraph on stdout: records, partitions, output directory,
files, bytes, seconds. Errors: one line ``kafkalog export: error: ...``, exit 1, never a
Java stack trace (a failure inside the Spark job may be preceded by Spark's own one-line
ERROR log messages, such as ``ERROR FileFormatWriter: Aborting job ...``).

Examples::

    kafkalog export --topic clicks --format parquet --output /tmp/clicks --path data/kafka-logs
    kafkalog export --topic a,b --format csv --binary-encoding base64 --output out \\
        --bootstrap-servers localhost:9092 --ending-offsets '{"a":{"0":100},"b":{"0":-1}}'
    kafkalog export --topic users --format parquet --output /tmp/users --value-format avro \\
        --key-format string --bootstrap-servers localhost:9092 \\
        --schema-registry-url http://localhost:8081 --option mode=DROPMALFORMED

Typed keys and values: --value-format / --key-format / --schema-registry-url are the
source's valueFormat / keyFormat / schema.registry.url (its other typed-read options,
schema.registry.basic.auth.user.info, valueSubject, mode, ..., through --option; one
given both ways is an error). Parquet and JSON lines keep a typed value as a nested
struct; CSV writes a struct, array or map as JSON text.

The file is also the script ``spark-submit`` runs, with the same arguments and behaviour
(``spark-submit spark_kafkalog/cli/export_cmd.py --topic clicks ...``; ``python`` on the
file or ``python -m spark_kafkalog.cli.export_cmd`` too); it needs ``spark_kafkalog``
importable (installed, or the checkout on ``PYTHONPATH``).

Thread-safety: runs on the main thread; the job's monitoring thread updates the bar.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from broker.tools.common import CliError, offset_progress, parse_key_value

NAME = "export"
SUMMARY = "export topics to Parquet, CSV or JSON files, or to Iceberg or Delta tables, with Spark"



def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value} is not positive")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from spark_kafkalog.formats.options import FORMATS as FIELD_FORMATS
    from spark_kafkalog.jobs.export import BINARY_ENCODINGS, FORMATS, MODES
    from spark_kafkalog.tables.job import ON_NEW_TOPIC_ID, TABLE_FORMATS
    from spark_kafkalog.tables.layout import LAYOUTS

    parser.add_argument("--topic", action="append", required=True, metavar="TOPIC",
                        help="topic to export (repeatable, or a comma-separated list)")
    parser.add_argument("--format", required=True, choices=FORMATS + TABLE_FORMATS, dest="fmt",
                        help="file format of the output, or a table: iceberg or delta (with --table: "
                             "exactly-once and incremental, the offsets kept in the table's commits)")
    parser.add_argument("--output", metavar="DIR",
                        help="output directory (local path or any Hadoop file system URI); not with "
                             "--table")
    parser.add_argument("--table", metavar="TABLE",
                        help="--format iceberg: a directory holding the embedded SQL catalog "
                             "(catalog.db) and warehouse, table default.<topic>; with --catalog-uri, "
                             "namespace.name. --format delta: the table's path or object-store URI")
    parser.add_argument("--catalog-uri", metavar="URI",
                        help="Iceberg: the catalog (REST http(s)://..., sql sqlite:///... or "
                             "postgresql://..., thrift://... for Hive) instead of the embedded one")
    parser.add_argument("--catalog-property", action="append", default=[], metavar="KEY=VALUE",
                        help="Iceberg: a catalog property (repeatable), e.g. type=rest, warehouse=..., "
                             "credential=..., s3.endpoint=...")
    parser.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE",
                        help="Delta: an object-store option (repeatable), e.g. AWS_ENDPOINT_URL=..., "
                             "AWS_REGION=..., AWS_ACCESS_KEY_ID=...")
    parser.add_argument("--partition-by", metavar="COLS",
                        help="the table's partitioning, comma-separated (default: Iceberg "
                             "partition,day(timestamp); Delta partition,timestamp_date); none for none")
    parser.add_argument("--layout", choices=LAYOUTS, default="flat",
                        help="flat (default: Kafka's columns, a typed value's fields as columns) or "
                             "key_value (Redpanda's: a redpanda struct and the value's bytes)")
    parser.add_argument("--on-new-topic-id", choices=ON_NEW_TOPIC_ID, default="fail",
                        help="when the topic was deleted and created again since the table's last "
                             "export: fail (default) or restart from its earliest offsets")
    parser.add_argument("--compact", action="store_true",
                        help="after the export, rewrite the table's small files (offsets unchanged)")
    parser.add_argument("--target-file-size", type=_positive_int, default=DEFAULT_TARGET_FILE_SIZE,
                        metavar="BYTES", help=f"the file size --compact aims at (default "
                                              f"{DEFAULT_TARGET_FILE_SIZE})")
    parser.add_argument("--expire", action="store_true",
                        help="after the export, expire old snapshots (Iceberg) or vacuum (Delta) "
                             "older than --retention-ms, keeping --retain-last")
    parser.add_argument("--retention-ms", type=_positive_int, default=DEFAULT_RETENTION_MS, metavar="MS",
                        help=f"what --expire keeps (default {DEFAULT_RETENTION_MS}, 7 days)")
    parser.add_argument("--retain-last", type=_positive_int, default=1, metavar="N",
                        help="snapshots or versions --expire always keeps (default 1)")
    parser.add_argument("--streaming", action="store_true",
                        help="with --table: export with a structured streaming query, one commit per "
                             "micro-batch, resuming from the offsets the table holds")
    parser.add_argument("--trigger", metavar="TRIGGER",
                        help="with --streaming: available-now (default: up to the end offsets at the "
                             "start, then stop) or a processing-time interval such as '10 seconds' (runs "
                             "until Ctrl-C)")
    parser.add_argument("--max-offsets-per-trigger", type=_positive_int, metavar="N",
                        help="with --streaming: at most about N records per micro-batch")
    parser.add_argument("--bootstrap-servers", "--bootstrap-server", dest="bootstrap_servers",
                        metavar="HOST:PORT[,...]",
                        help="network mode: fetch from this Kafka cluster (with --path: "
                             "stitched mode, the offsets only its remote storage holds read from --path)")
    parser.add_argument("--path", action="append", metavar="LOGDIR",
                        help="direct mode: read this Kafka log directory (a log.dirs entry, "
                             "or a copy on an object store: s3://bucket/prefix, gs://, abfs://, "
                             "hdfs://, with --option fs.s3a.endpoint=... etc.; repeatable); with "
                             "--bootstrap-servers: the cluster's remote storage (rsm.config.storage.uri)")
    parser.add_argument("--starting-offsets", default="earliest", metavar="SPEC",
                        help="Spark's startingOffsets: earliest (default) or JSON "
                             "{\"topic\":{\"0\":23,\"1\":-2}}")
    parser.add_argument("--ending-offsets", default="latest", metavar="SPEC",
                        help="Spark's endingOffsets: latest (default, as planned at the "
                             "start) or JSON {\"topic\":{\"0\":100,\"1\":-1}}")
    parser.add_argument("--partitions", type=_positive_int, metavar="N",
                        help="Spark's minPartitions: split the read into at least about N "
                             "tasks (default: about 4 per core, 100000+ offsets each); each "
                             "task writes one file")
    parser.add_argument("--mode", choices=MODES, default="errorifexists",
                        help="when --output exists: fail (default), replace it, or add files")
    parser.add_argument("--include-headers", action="store_true",
                        help="add the headers column (a JSON string in CSV)")
    parser.add_argument("--binary-encoding", choices=BINARY_ENCODINGS, metavar="ENC",
                        help="how key, value and header values become text: utf8 (default "
                             "for csv and json), base64 or hex; Parquet keeps bytes unless "
                             "this is given")
    parser.add_argument("--value-format", choices=FIELD_FORMATS, metavar="FMT",
                        help="read the value as binary (default), string, avro, protobuf or "
                             "json (Schema Registry framing); Parquet and JSON keep a typed "
                             "value as a nested struct, CSV writes it as JSON text; adds "
                             "_corrupt_value (PERMISSIVE mode) and, for avro, protobuf and "
                             "json, valueSchemaId")
    parser.add_argument("--key-format", choices=FIELD_FORMATS, metavar="FMT",
                        help="read the key as binary (default), string, avro, protobuf or json")
    parser.add_argument("--schema-registry-url", metavar="URL",
                        help="the Schema Registry of avro, protobuf and json keys and values "
                             "(direct mode without it: the log directory's _schemas); other "
                             "settings with --option schema.registry.KEY=VALUE")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="an option of the kafkalog reader (repeatable), e.g. "
                             "failOnDataLoss=false, kafka.isolation.level=read_committed, "
                             "startingTimestamp=1700000000000, mode=DROPMALFORMED, "
                             "schema.registry.basic.auth.user.info=USER:PASSWORD")
    parser.add_argument("--master", metavar="URL",
                        help="Spark master when the command builds its own session "
                             "(default local[*]; under spark-submit, spark-submit's)")
    parser.add_argument("--no-progress", action="store_true",
                        help="never show the progress bar")


DEFAULT_TARGET_FILE_SIZE = 128 * 1024 * 1024
DEFAULT_RETENTION_MS = 7 * 24 * 3600 * 1000
_FILE_ONLY = ("starting_offsets", "ending_offsets", "mode", "binary_encoding")
_TABLE_ONLY = ("catalog_uri", "partition_by")


def run(args: argparse.Namespace) -> int:
    from spark_kafkalog.jobs.export import ExportError, _local_output, plan_export, run_export
    from spark_kafkalog.jobs.session import job_session

    topics = [t.strip() for item in args.topic for t in item.split(",") if t.strip()]
    if not topics:
        raise CliError("--topic names no topic")
    if args.bootstrap_servers is None and args.path is None:
        raise CliError("give --bootstrap-servers (network mode), --path (direct mode), or both "
                       "(stitched mode: --path is the cluster's remote storage)")
    if args.fmt in ("iceberg", "delta"):
        return _run_table(args, topics)
    streaming = [f for f, v in (("--streaming", args.streaming), ("--trigger", args.trigger),
                                ("--max-offsets-per-trigger", args.max_offsets_per_trigger)) if v]
    if streaming:
        raise CliError(f"{', '.join(streaming)}: for --format iceberg or delta with --table")
    if args.output is None:
        raise CliError(f"--format {args.fmt} writes files: give --output (--table is for iceberg and delta)")
    given = [f"--{n.replace('_', '-')}" for n in _TABLE_ONLY if getattr(args, n) is not None]
    given += [f for f, v in (("--table", args.table), ("--catalog-property", args.catalog_property),
                             ("--storage-option", args.storage_option), ("--compact", args.compact),
                             ("--expire", args.expire)) if v]
    if given:
        raise CliError(f"{', '.join(given)}: for --format iceberg or delta")
    options = _options(args)
    for flag, key in (("--value-format", "valueFormat"), ("--key-format", "keyFormat"),
                      ("--schema-registry-url", "schema.registry.url")):
        if (getattr(args, flag[2:].replace("-", "_")) is not None
                and any(k.lower() == key.lower() for k in options)):
            raise CliError(f"give {flag} or --option {key}=..., not both")
    local = _local_output(args.output)
    if args.mode == "errorifexists" and local is not None and os.path.exists(local):
        raise CliError(f"--output {args.output} already exists: use --mode overwrite or "
                       "--mode append")
    try:
        plan = plan_export(topics, bootstrap_servers=args.bootstrap_servers,
                           path=args.path if args.path is None or len(args.path) > 1 else args.path[0],
                           starting_offsets=args.starting_offsets,
                           ending_offsets=args.ending_offsets,
                           include_headers=args.include_headers, options=options,
                           value_format=args.value_format, key_format=args.key_format,
                           schema_registry_url=args.schema_registry_url)
    except ExportError as exc:
        raise CliError(str(exc)) from None

    session = job_session("kafkalog-export", master=args.master)
    spark = session.spark
    try:
        with offset_progress(plan.total_offsets, f"export {', '.join(plan.topics)}",
                             enabled=False if args.no_progress else None) as bar:
            result = run_export(spark, plan, fmt=args.fmt, output=args.output, mode=args.mode,
                                binary_encoding=args.binary_encoding, progress=bar.update)
    except ExportError as exc:
        raise CliError(str(exc)) from None
    finally:
        session.stop()
    print(result.summary(), flush=True)
    return 0


def _options(args: argparse.Namespace) -> dict[str, str]:
    options: dict[str, str] = {}
    for item in args.option:
        key, value = parse_key_value(item, "--option")
        options[key] = value
    if args.partitions is not None:
        if any(k.lower() == "minpartitions" for k in options):
            raise CliError("give --partitions or --option minPartitions=N, not both")
        options["minPartitions"] = str(args.partitions)
    return options


def _run_table(args: argparse.Namespace, topics: list[str]) -> int:
    """``--format iceberg|delta --table ...``: the exactly-once export of one topic
    (``spark_kafkalog.tables.job``), then the upkeep asked for."""
    import time

    from spark_kafkalog.jobs.session import job_session
    from spark_kafkalog.tables.base import TableError
    from spark_kafkalog.tables.job import export_table, open_target

    if args.table is None:
        raise CliError(f"--format {args.fmt} exports to a table: give --table")
    if args.output is not None:
        raise CliError("give --table or --output, not both")
    if len(topics) != 1:
        raise CliError("one topic per table: give one --topic")
    defaults = {"starting_offsets": "earliest", "ending_offsets": "latest", "mode": "errorifexists",
                "binary_encoding": None}
    wrong = [f"--{n.replace('_', '-')}" for n in _FILE_ONLY if getattr(args, n) != defaults[n]]
    if wrong:
        raise CliError(f"{', '.join(wrong)}: not with a table, which goes on from the offsets it holds")
    if args.fmt == "delta" and (args.catalog_uri or args.catalog_property):
        raise CliError("--catalog-uri and --catalog-property are Iceberg's: a Delta table is a path or URI")
    if args.fmt == "iceberg" and args.storage_option:
        raise CliError("--storage-option is Delta's: give an Iceberg catalog's with --catalog-property")
    catalog = dict(parse_key_value(item, "--catalog-property") for item in args.catalog_property)
    storage = dict(parse_key_value(item, "--storage-option") for item in args.storage_option)
    options = _options(args)
    if args.streaming:
        return _run_stream(args, topics[0], catalog, storage, options)
    if args.trigger is not None or args.max_offsets_per_trigger is not None:
        raise CliError("--trigger and --max-offsets-per-trigger: with --streaming")
    session = job_session("kafkalog-export", master=args.master)
    try:
        target = open_target(args.fmt, args.table, topic=topics[0], catalog_uri=args.catalog_uri,
                             catalog_properties=catalog, storage_options=storage)
        # the total is known once the export has planned: the bar takes it with each update
        with offset_progress(0, f"export {topics[0]} to {args.fmt}",
                             enabled=not args.no_progress and sys.stderr.isatty()) as bar:
            result = export_table(
                session.spark, topic=topics[0], table=args.table, fmt=args.fmt,
                bootstrap_servers=args.bootstrap_servers,
                path=args.path if args.path is None or len(args.path) > 1 else args.path[0],
                options=options, value_format=args.value_format, key_format=args.key_format,
                schema_registry_url=args.schema_registry_url, partition_by=args.partition_by,
                layout=args.layout, on_new_topic_id=args.on_new_topic_id, progress=bar.update, target=target)
        print(result.summary(), flush=True)
        if args.compact:
            state = target.compact(args.target_file_size)
            print(f"Compacted {args.table}: version {state.version}, {len(state.files)} data files.", flush=True)
        if args.expire:
            gone = target.expire(int(time.time() * 1000) - args.retention_ms, args.retain_last)
            what = "snapshots expired" if args.fmt == "iceberg" else "files vacuumed"
            print(f"{gone} {what} in {args.table}.", flush=True)
    except TableError as exc:
        raise CliError(str(exc)) from None
    finally:
        session.stop()
    return 0


def _run_stream(args: argparse.Namespace, topic: str, catalog: dict[str, str], storage: dict[str, str],
                options: dict[str, str]) -> int:
    """``--format iceberg|delta --table ... --streaming``: the streaming export
    (``spark_kafkalog.tables.stream``): one line per committed micro-batch, then a summary;
    with an interval trigger it runs until Ctrl-C, which stops the query and exits 130."""
    import time

    from spark_kafkalog.jobs.session import job_session
    from spark_kafkalog.tables.base import TableError
    from spark_kafkalog.tables.stream import AVAILABLE_NOW, export_stream, parse_trigger

    if args.compact or args.expire:
        raise CliError("--compact and --expire: not with --streaming (run them with a batch export)")
    try:
        trigger = parse_trigger(args.trigger or AVAILABLE_NOW)
    except TableError as exc:
        raise CliError(str(exc)) from None
    started = time.monotonic()
    committed: list = []

    def on_commit(batch) -> None:
        if batch.committed:
            committed.append(batch)
            print(batch.summary(), flush=True)

    session = job_session("kafkalog-export", master=args.master)
    interrupted = False
    try:
        query = export_stream(
            session.spark, topic=topic, table=args.table, fmt=args.fmt,
            bootstrap_servers=args.bootstrap_servers,
            path=args.path if args.path is None or len(args.path) > 1 else args.path[0],
            options=options, value_format=args.value_format, key_format=args.key_format,
            schema_registry_url=args.schema_registry_url, catalog_uri=args.catalog_uri,
            catalog_properties=catalog, storage_options=storage, partition_by=args.partition_by,
            layout=args.layout, on_new_topic_id=args.on_new_topic_id, trigger=trigger,
            max_offsets_per_trigger=args.max_offsets_per_trigger, on_commit=on_commit)
        try:
            interrupted = _await_or_interrupt(query)
        except Exception as exc:  # noqa: BLE001 - a failed query: awaitTermination raises its error
            raise CliError(f"the streaming export failed: {_one_line(exc)}") from None
        if interrupted:
            query.stop()
        failure = query.exception()
        if failure is not None:
            raise CliError(f"the streaming export failed: {_one_line(failure)}")
    except TableError as exc:
        raise CliError(str(exc)) from None
    finally:
        session.stop()
    records = sum(b.records for b in committed)
    last = committed[-1] if committed else None
    where = (f"version {last.version}, offsets {dict(sorted(last.offsets_after.next_offsets.items()))}"
             if last is not None else "nothing new")
    print(f"Streamed {records:,} records of {topic} to the {args.fmt} table {args.table} in {len(committed)} "
          f"commit{'' if len(committed) == 1 else 's'}: {where}, in {time.monotonic() - started:.1f} s"
          f"{' (stopped by Ctrl-C)' if interrupted else ''}.", flush=True)
    return 130 if interrupted else 0


def _await_or_interrupt(query) -> bool:
    """Wait for ``query`` to end; True when Ctrl-C came first. On the main thread SIGINT
    only sets a flag while waiting (pyspark's own handler would cancel every job and raise
    in the middle of a call to the JVM); the previous handler is put back afterwards."""
    import signal
    import threading

    stop = threading.Event()
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGINT, lambda signum, frame: stop.set())
    try:
        while not stop.is_set():
            if query.awaitTermination(1):
                return False
        return True
    except KeyboardInterrupt:
        return True
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def _one_line(exc: BaseException) -> str:
    """A streaming query's failure (``StreamingQueryException``) in one line: the
    export's own error when a micro-batch raised one, else the message's first line."""
    import re

    text = str(exc)
    ours = re.search(r"(?:TableError|TopicIdMismatchError|ExportError): ([^\n]+)", text)
    if ours is not None:
        return ours.group(1).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def main(argv: list[str] | None = None) -> int:
    """``spark-submit spark_kafkalog/cli/export_cmd.py ARGS`` == ``kafkalog export ARGS``."""
    from spark_kafkalog.cli.main import main as cli_main

    return cli_main(["export", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    # Run as a file, this directory is sys.path[0]: drop it, so that its modules cannot
    # shadow top-level ones; the package itself is imported absolutely.
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if not p or Path(p).resolve() != _here]
    sys.exit(main())
