"""Export topics to Parquet, CSV or JSON files with a Spark batch job, from a Kafka cluster
(--bootstrap-servers) or straight from a broker's log directory (--path).

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
SUMMARY = "export topics to Parquet, CSV or JSON files with a Spark batch job"



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

    parser.add_argument("--topic", action="append", required=True, metavar="TOPIC",
                        help="topic to export (repeatable, or a comma-separated list)")
    parser.add_argument("--format", required=True, choices=FORMATS, dest="fmt",
                        help="file format of the output")
    parser.add_argument("--output", required=True, metavar="DIR",
                        help="output directory (local path or any Hadoop file system URI)")
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


def run(args: argparse.Namespace) -> int:
    from spark_kafkalog.jobs.export import ExportError, _local_output, plan_export, run_export
    from spark_kafkalog.jobs.session import job_session

    topics = [t.strip() for item in args.topic for t in item.split(",") if t.strip()]
    if not topics:
        raise CliError("--topic names no topic")
    if args.bootstrap_servers is None and args.path is None:
        raise CliError("give --bootstrap-servers (network mode), --path (direct mode), or both "
                       "(stitched mode: --path is the cluster's remote storage)")
    options: dict[str, str] = {}
    for item in args.option:
        key, value = parse_key_value(item, "--option")
        options[key] = value
    if args.partitions is not None:
        if any(k.lower() == "minpartitions" for k in options):
            raise CliError("give --partitions or --option minPartitions=N, not both")
        options["minPartitions"] = str(args.partitions)
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
