"""The reference pages of the documentation site, generated from the code so that they cannot drift.

Owns four Markdown pages, made at every ``mkdocs build`` and never committed:

- ``reference/spark-options.md``: every option of the ``kafkalog`` source
  (``spark_kafkalog.options.OPTION_NAMES``) and sink
  (``spark_kafkalog.writers.common.WRITE_OPTION_NAMES``), with its type, default and
  meaning, and the ``kafka.*`` keys each side refuses. Names, defaults and refusals come
  from the code (the defaults from parsing a minimal set of options); the type and meaning
  of each option are the table ``SOURCE_OPTIONS`` / ``SINK_OPTIONS`` below, and a name the
  code has and the table lacks (or the other way round) stops the build, so a new option
  cannot go undocumented.
- ``reference/broker-config.md``: every key of ``server.properties`` the broker defines
  (``broker.server.config.SERVER_CONFIG_DEF``: its own keys, the TLS keys and every
  feature's, one table per owner: ``SERVER_CONFIG_SECTIONS``),
  the broker-wide ``log.*`` defaults of topic keys (``broker.log.config.SERVER_DEFAULT_KEYS``)
  and every topic-level key (``broker.log.config.LOG_CONFIG_DEF``): type, default, meaning
  and, for broker keys, whether it can change without a restart
  (``broker.server.dynamic_config.DYNAMIC_KEYS``).
- ``reference/client-config.md``: the keys of the producer, consumer and admin client
  (``PRODUCER_CONFIG_DEF``, ``CONSUMER_CONFIG_DEF``, ``ADMIN_CONFIG_DEF``): what
  ``--producer.config`` / ``--consumer.config`` / ``--command-config`` files and Spark's
  ``kafka.*`` options take.
- ``reference/cli.md``: every ``kafkalog`` subcommand (``spark_kafkalog.cli.main.SUBCOMMANDS``)
  and every option of its argparse parser, nested subcommands included; a subcommand that
  hands its arguments to another program (``PASSTHROUGH``, e.g. ``broker``) is asked for
  that program's parser.

Use: ``mkdocs.yml`` names this file under ``hooks:``, and MkDocs calls ``on_files``, which
adds the pages to the build. ``python tools/gen_docs.py OUTDIR`` writes them to OUTDIR to
read them without a build. ``PAGES`` maps each page's path to the function that renders it;
``tests/test_docs.py`` checks that each lists every option, key and subcommand.

Thread-safety: pure functions of the imported definitions (the CLI page patches
``argparse.ArgumentParser.parse_args`` for the duration of one call, on the calling thread).
"""

from __future__ import annotations

import argparse
import html
import importlib
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # MkDocs loads this file by path: make the packages importable
    sys.path.insert(0, str(ROOT))

GENERATED_NOTE = ("*Generated from the code at every `mkdocs build` (`tools/gen_docs.py`); "
                  "edit the code, not this page.*")


class DocsDriftError(RuntimeError):
    """The code and the generator's tables disagree (an option without documentation, or
    documentation of an option that no longer exists)."""


# -- cells -------------------------------------------------------------------------------

def text(value: str) -> str:
    """Plain text for a Markdown table cell: HTML-escaped, pipes and emphasis marks escaped."""
    out = html.escape(" ".join(str(value).split()), quote=False)
    for ch in ("\\", "|", "*", "[", "]", "_"):
        out = out.replace(ch, "\\" + ch)
    return out


def code(value: str) -> str:
    """``value`` as inline code in a table cell (Python-Markdown's tables keep pipes inside a
    code span; backticks inside get a longer fence)."""
    value = " ".join(str(value).split())
    return f"`` {value} ``" if "`" in value else f"`{value}`"


def _table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> list[str]:
    header = list(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


# -- Spark options -----------------------------------------------------------------------

# Type and meaning of each option of the source (spark_kafkalog.options): (type, used by, meaning).
SOURCE_OPTIONS: dict[str, tuple[str, str, str]] = {
    "path": ("string", "read, stream",
             "Direct mode: a Kafka log directory (a `log.dirs` entry), as `.load(dir)`: a local path, a "
             "`file:` URI or an object-store URI (`s3://`, `s3a://`, `s3n://`, `gs://`, `gcs://`, `abfs://`, "
             "`abfss://`, `hdfs://`, `viewfs://`). With `kafka.bootstrap.servers` too: stitched reads, the "
             "path being the cluster's remote storage."),
    "paths": ("JSON list", "read, stream",
              "Several log directories read together (what `.load([dir1, dir2])` passes), e.g. a broker "
              "with several `log.dirs`."),
    "assign": ("JSON", "read, stream",
               'These partitions: `{"topicA":[0,1],"topicB":[2,4]}`. Exactly one of `assign`, `subscribe`, '
               "`subscribePattern`."),
    "subscribe": ("string", "read, stream",
                  "Comma-separated topics: all their partitions (a missing topic reads as empty, with a "
                  "warning)."),
    "subscribePattern": ("regex", "read, stream",
                         "A regular expression matched against the whole topic name: all partitions of the "
                         "matching topics (internal topics only with `kafka.exclude.internal.topics=false`)."),
    "startingOffsets": ("earliest, latest or JSON", "read, stream",
                        'Where each partition starts: `earliest`, `latest` (streaming only) or '
                        '`{"topicA":{"0":23,"1":-2}}` (-2 earliest, -1 latest). A restarted stream resumes '
                        "from its checkpoint instead."),
    "endingOffsets": ("latest or JSON", "read",
                      "Where each partition ends (exclusive): `latest` (the log end when the query is "
                      "planned) or JSON (-1 latest). Refused in streaming queries."),
    "startingTimestamp": ("long (ms)", "read, stream",
                          "For every partition, start at the first record whose timestamp is at or after "
                          "this (the time index). Wins over `startingOffsetsByTimestamp` and "
                          "`startingOffsets`."),
    "endingTimestamp": ("long (ms)", "read",
                        "For every partition, end at the first record whose timestamp is at or after this. "
                        "Wins over `endingOffsetsByTimestamp` and `endingOffsets`."),
    "startingOffsetsByTimestamp": ("JSON", "read, stream",
                                   'A starting timestamp per partition: `{"topicA":{"0":1700000000000}}`.'),
    "endingOffsetsByTimestamp": ("JSON", "read", "An ending timestamp per partition."),
    "startingOffsetsByTimestampStrategy": ("error or latest", "read, stream",
                                           "What a starting timestamp that matches no record becomes: "
                                           "`error` (the query fails) or `latest`."),
    "failOnDataLoss": ("boolean", "read, stream",
                       "Offsets to read that the log no longer holds (retention, DeleteRecords, a deleted "
                       "partition) or an invalid batch on disk: `true` fails the query naming the partition "
                       "and range, `false` logs a warning and reads the rest."),
    "minPartitions": ("int", "read, stream",
                      "Split large offset ranges so that there are at least about this many Spark tasks."),
    "maxRecordsPerPartition": ("long", "read, stream",
                               "Split every offset range into pieces of at most this many offsets."),
    "includeHeaders": ("boolean", "read, stream", "Add the `headers` column."),
    "kafkaConsumer.pollTimeoutMs": ("long (ms)", "network mode",
                                    "Accepted for compatibility with Spark's Kafka source (validated)."),
    "fetchOffset.numRetries": ("int", "network mode",
                               "Accepted for compatibility with Spark's Kafka source (validated)."),
    "fetchOffset.retryIntervalMs": ("long (ms)", "network mode",
                                    "Accepted for compatibility with Spark's Kafka source (validated)."),
    "groupIdPrefix": ("string", "network mode",
                      "Accepted for compatibility with Spark's Kafka source (no consumer group is joined)."),
    "maxOffsetsPerTrigger": ("long", "stream",
                             "At most about this many offsets per micro-batch, shared by the partitions in "
                             "proportion to their lag."),
    "minOffsetsPerTrigger": ("long", "stream",
                             "Skip a trigger while fewer offsets than this are waiting, unless "
                             "`maxTriggerDelay` passed."),
    "maxTriggerDelay": ("duration", "stream",
                        "The longest a trigger is skipped for `minOffsetsPerTrigger` (Spark's time string: "
                        "`500ms`, `10s`, `15m`, `1h`)."),
    "kafkalog.commitOffsetsToGroup": ("string", "stream (network mode)",
                                      "After each micro-batch, commit its end offsets to this consumer group "
                                      "so that lag tools see the query (never read back: the checkpoint stays "
                                      "the source of truth)."),
    "maxBytesPerBatch": ("long (bytes)", "read, stream",
                         "Direct mode: record bytes decoded into one Arrow batch; a task holds about four "
                         "times this at its peak (at least 65536)."),
    "kafkalog.snapshot": ("boolean", "read",
                          "`true`: one row per key, its latest record in the range (tombstoned keys left "
                          "out): a table view of a compacted topic. Not with `minPartitions` / "
                          "`maxRecordsPerPartition` nor in streaming queries."),
    "kafkalog.table": ("string", "read, stream",
                       "A bridge read: the topic's Iceberg or Delta table (what `kafkalog export --table` "
                       "names) as of its latest commit, then the log from the offsets that commit stores. "
                       "One topic; no starting bounds (see Topics as tables)."),
    "kafkalog.table.format": ("string", "read, stream",
                              "`iceberg` or `delta` for `kafkalog.table` (default: told from the location)."),
    "fs.s3a.endpoint": ("string", "read, stream",
                        "Direct mode on S3: the endpoint, `host:port` or a URL (omit for AWS itself)."),
    "fs.s3a.endpoint.region": ("string", "read, stream", "Direct mode on S3: the region."),
    "fs.s3a.region": ("string", "read, stream", "Direct mode on S3: the region (another spelling)."),
    "fs.s3a.access.key": ("string", "read, stream", "Direct mode on S3: the access key (never printed)."),
    "fs.s3a.secret.key": ("string", "read, stream", "Direct mode on S3: the secret key (never printed)."),
    "fs.s3a.session.token": ("string", "read, stream", "Direct mode on S3: a session token (never printed)."),
    "fs.s3a.path.style.access": ("boolean", "read, stream",
                                 "Direct mode on S3: path-style URLs (`true` for MinIO and most "
                                 "S3-compatible stores)."),
    "fs.s3a.connection.ssl.enabled": ("boolean", "read, stream", "Direct mode on S3: HTTPS to the endpoint."),
    "fs.s3a.aws.credentials.provider": ("string", "read, stream",
                                        "Direct mode on S3: Hadoop's provider class name "
                                        "(`...AnonymousAWSCredentialsProvider`: public buckets)."),
    "valueFormat": ("binary, string, avro, protobuf or json", "read, stream",
        "How `value` is read: `binary` (Spark's column, unchanged), UTF-8 `string`, or a struct "
        "of a Schema Registry schema ([typed reads](../spark/formats.md))."),
    "keyFormat": ("binary, string, avro, protobuf or json", "read, stream",
        "How `key` is read, as `valueFormat`."),
    "valueFraming": ("confluent or none", "read, stream",
        "`confluent`: Confluent's wire format (magic byte and schema id or GUID, Protobuf's "
        "message indexes, or the id in a `__value_schema_id` header); `none`: the bare payload, "
        "written with the reader schema."),
    "keyFraming": ("confluent or none", "read, stream",
        "As `valueFraming`, for the key."),
    "valueSubject": ("string", "read, stream",
        "The subject(s) of the value's reader schema, comma-separated (several: a struct with one"
        " member per record). Default: from `subject.name.strategy`."),
    "keySubject": ("string", "read, stream",
        "As `valueSubject`, for the key."),
    "subject.name.strategy": ("TopicNameStrategy, RecordNameStrategy or TopicRecordNameStrategy", "read, stream",
        "How subjects are named (Confluent's strategies): `<topic>-value`, the record's full "
        "name, or `<topic>-<record full name>`."),
    "valueSchema": ("latest, version:N, id:N or a schema", "read, stream",
        "The value's reader schema: the subject's latest version when the DataFrame is loaded, a "
        "version, a schema id, or the schema's text."),
    "keySchema": ("latest, version:N, id:N or a schema", "read, stream",
        "As `valueSchema`, for the key."),
    "valueMessageName": ("string", "read, stream",
        "Protobuf: the reader schema's message (default: the record name under the record "
        "strategies, else the file's first message)."),
    "keyMessageName": ("string", "read, stream",
        "As `valueMessageName`, for the key."),
    "mode": ("PERMISSIVE, FAILFAST or DROPMALFORMED", "read, stream",
        "Typed reads: an undecodable key or value is null with its bytes in the corrupt-record "
        "column, fails the query naming topic, partition and offset, or is left out."),
    "columnNameOfCorruptRecord": ("string", "read, stream",
        "The value's corrupt-record column in PERMISSIVE mode (the key's is `_corrupt_key`)."),
    "recursive.fields.max.depth": ("int", "read, stream",
        "-1: a recursive schema is refused; 1..10: read to that depth (Spark's option)."),
}

# Type and meaning of each option of the sink (spark_kafkalog.writers.common).
SINK_OPTIONS: dict[str, tuple[str, str]] = {
    "topic": ("string", "The topic of every row (wins over a `topic` column)."),
    "kafkalog.writeBatchHeaders": ("boolean",
                                   "Add the headers `kafkalog.queryId`, `kafkalog.batchId`, "
                                   "`kafkalog.partition`, `kafkalog.attempt` and `kafkalog.seq` to every "
                                   "record, so that copies written by retried tasks can be told apart."),
    "kafkalog.exactlyOnce": ("boolean",
                             "Exactly-once: each task writes in a Kafka transaction that the driver commits "
                             "once every task succeeded; read_committed readers see each row once."),
    "kafkalog.transactionalIdPrefix": ("string",
                                       "With `kafkalog.exactlyOnce`: the prefix of the tasks' transactional "
                                       "ids (and of a stream's marker groups)."),
    "checkpointLocation": ("string", "Spark's own (streaming): the query's checkpoint directory."),
    "queryName": ("string", "Spark's own (streaming, `DataStreamWriter.queryName`): ignored by the sink."),
    "valueFormat": ("string", "`avro`, `protobuf` or `json`: the `value` column (a struct, or any type its schema "
                              "takes) is encoded with a Schema Registry writer schema, framed the Confluent way; "
                              "`binary` / `string` (default): written as it is. See "
                              "[typed writes](../spark/formats.md#typed-writes)."),
    "keyFormat": ("string", "As `valueFormat`, for the `key` column (subject `<topic>-key`)."),
    "valueFraming": ("string", "`confluent` (default: magic byte 0 and the schema id) or `none` (the bare payload; "
                               "with an inline `valueSchema`)."),
    "keyFraming": ("string", "As `valueFraming`, for the key."),
    "valueSubject": ("string", "The subject of the value's writer schema (default: from `subject.name.strategy`)."),
    "keySubject": ("string", "The subject of the key's writer schema."),
    "subject.name.strategy": ("string", "`TopicNameStrategy` (default: `<topic>-value`), `RecordNameStrategy` or "
                                        "`TopicRecordNameStrategy`."),
    "valueSchema": ("string", "The value's writer schema: `latest` (default: derived from the column's type, or "
                              "the subject's latest version when it maps to that type), `version:N`, `id:N` or "
                              "the schema's text."),
    "keySchema": ("string", "As `valueSchema`, for the key."),
    "valueMessageName": ("string", "Protobuf: the writer schema's message (full name; default the first)."),
    "keyMessageName": ("string", "As `valueMessageName`, for the key."),
    "auto.register.schemas": ("boolean", "Register the writer schema under its subject (default true; a 409 of "
                                         "the registry fails the write before any record is sent); false: it must "
                                         "be registered already."),
    "use.latest.version": ("boolean", "Write with the subject's latest version (default false; Protobuf needs it "
                                      "or a `valueSchema`)."),
    "recordName": ("string", "The derived Avro record's name (default `topLevelRecord`, as Spark's `to_avro`)."),
    "recordNamespace": ("string", "The derived Avro record's namespace (default empty)."),
}


def _source_defaults() -> dict[str, str]:
    """Each source option's default, read from what ``parse_options`` makes of a minimal
    batch read and a minimal streaming read."""
    from spark_kafkalog.options import OPTION_NAMES, parse_options

    base = {"subscribe": "t", "path": "/tmp/kafka-logs"}
    batch = parse_options(base)
    stream = parse_options(base, streaming=True)

    def bound(spec) -> str:
        return spec.kind if spec.kind in ("earliest", "latest") else "none"

    def seconds(ms: int) -> str:
        return f"{ms // 60000}m" if ms % 60000 == 0 else f"{ms}ms"

    def opt(value: Any) -> str:
        if value is None:
            return "none"
        if isinstance(value, bool):
            return str(value).lower()
        return str(value)

    known = {
        "startingoffsets": f"{bound(batch.starting)} (batch), {bound(stream.starting)} (streaming)",
        "endingoffsets": bound(batch.ending),
        "startingoffsetsbytimestampstrategy": batch.starting.strategy,
        "failondataloss": opt(batch.fail_on_data_loss),
        "minpartitions": opt(batch.min_partitions),
        "maxrecordsperpartition": opt(batch.max_records_per_partition),
        "includeheaders": opt(batch.include_headers),
        "kafkaconsumer.polltimeoutms": opt(batch.poll_timeout_ms),
        "fetchoffset.numretries": opt(batch.fetch_offset_num_retries),
        "fetchoffset.retryintervalms": opt(batch.fetch_offset_retry_interval_ms),
        "groupidprefix": opt(batch.group_id_prefix),
        "maxoffsetspertrigger": opt(stream.max_offsets_per_trigger),
        "minoffsetspertrigger": opt(stream.min_offsets_per_trigger),
        "maxtriggerdelay": seconds(stream.max_trigger_delay_ms),
        "kafkalog.commitoffsetstogroup": opt(stream.commit_offsets_to_group),
        "maxbytesperbatch": f"{batch.max_bytes_per_batch} ({batch.max_bytes_per_batch // 2**20} MiB)",
        "kafkalog.snapshot": opt(batch.snapshot),
        "valueformat": batch.formats.value.format, "keyformat": batch.formats.key.format,
        "valueframing": batch.formats.value.framing, "keyframing": batch.formats.key.framing,
        "subject.name.strategy": batch.formats.strategy, "valueschema": "latest", "keyschema": "latest",
        "mode": batch.formats.mode, "columnnameofcorruptrecord": batch.formats.value.corrupt_column,
        "recursive.fields.max.depth": str(batch.formats.recursive_depth),
    }
    return {name: known.get(key, "none") for key, name in OPTION_NAMES.items()}


def _sink_defaults() -> tuple[dict[str, str], dict[str, str]]:
    """The sink options' defaults and the producer defaults the sink sets, from
    ``parse_write_options`` of the one required option."""
    from spark_kafkalog.writers.common import SINK_PRODUCER_DEFAULTS, WRITE_OPTION_NAMES, parse_write_options

    opts = parse_write_options({"kafka.bootstrap.servers": "localhost:9092"})
    known = {
        "topic": "none",
        "kafkalog.writebatchheaders": str(opts.write_batch_headers).lower(),
        "kafkalog.exactlyonce": str(opts.exactly_once).lower(),
        "kafkalog.transactionalidprefix": opts.transactional_id_prefix,
        "valueformat": "binary", "keyformat": "binary", "valueframing": "confluent", "keyframing": "confluent",
        "subject.name.strategy": "TopicNameStrategy", "valueschema": "latest", "keyschema": "latest",
        "auto.register.schemas": "true", "use.latest.version": "false", "recordname": "topLevelRecord",
    }
    defaults = {name: known.get(key, "none") for key, name in WRITE_OPTION_NAMES.items()}
    producer = {k: opts.producer_config[k] for k in SINK_PRODUCER_DEFAULTS}
    return defaults, producer


def _check_documented(kind: str, in_code: Iterable[str], documented: Iterable[str]) -> None:
    in_code, documented = set(in_code), set(documented)
    missing, stale = sorted(in_code - documented), sorted(documented - in_code)
    if missing or stale:
        raise DocsDriftError(
            f"tools/gen_docs.py: the {kind} options in the code and in the generator's table differ: "
            f"undocumented {missing}, no longer in the code {stale}; update the table")


def spark_options_page() -> str:
    from spark_kafkalog.options import _REFUSED_KAFKA as SOURCE_REFUSED
    from spark_kafkalog.options import OPTION_NAMES
    from spark_kafkalog.writers.common import _REFUSED_KAFKA as SINK_REFUSED
    from spark_kafkalog.writers.common import WRITE_OPTION_NAMES

    _check_documented("source", OPTION_NAMES.values(), SOURCE_OPTIONS)
    _check_documented("sink", WRITE_OPTION_NAMES.values(), SINK_OPTIONS)
    source_defaults = _source_defaults()
    sink_defaults, producer_defaults = _sink_defaults()

    out = ["# Spark options", "", GENERATED_NOTE, "",
           "Option names are case-insensitive, as in Spark. An unknown option is an error that names it "
           "with the closest valid name, or lists the valid ones when none is close (Spark's own Kafka "
           "source ignores unknown options); a bad value names the option and the values it takes. The guide: "
           "[the Spark connector](../spark/index.md).", "",
           "## Reading: `spark.read` and `spark.readStream`", "",
           "Give `path` (direct mode), `kafka.bootstrap.servers` (network mode) or both (stitched reads), "
           "and exactly one of `assign`, `subscribe`, `subscribePattern`.", ""]
    rows = []
    for name in sorted(OPTION_NAMES.values(), key=lambda n: (n.startswith("fs."), n.lower())):
        kind, used, meaning = SOURCE_OPTIONS[name]
        rows.append([code(name), text(kind), text(used), _default(source_defaults[name]), _md(meaning)])
    out += _table(["option", "type", "used by", "default", "meaning"], rows)
    out += ["", "`kafka.<key>`: a Kafka consumer setting for network mode (see the "
            "[client configuration](client-config.md)), e.g. `kafka.bootstrap.servers`, "
            "`kafka.isolation.level`, `kafka.security.protocol`. Refused, as in Spark:", ""]
    out += [f"- {code('kafka.' + key)}: {text(message)}" for key, message in sorted(SOURCE_REFUSED.items())]
    out += ["", "`kafkalog.table.catalog.<key>` (`uri` and pyiceberg's catalog properties) and "
               "`kafkalog.table.storage.<key>` (deltalake's storage options): where the table of a bridge "
               "read (`kafkalog.table`) is."]
    out += ["", "`schema.registry.<key>`: a Schema Registry client setting for typed reads, passed as "
            "`<key>` (`schema.registry.url`, `schema.registry.basic.auth.user.info`, "
            "`schema.registry.ssl.ca.location`, ...); an unknown key is refused."]
    out += ["", "## Writing: `df.write` and `df.writeStream`", "",
            "`kafka.bootstrap.servers` is required; the rows' columns are Spark's Kafka sink's "
            "(`value`; optional `key`, `topic`, `partition`, `headers`, `timestamp`).", ""]
    rows = []
    for name in sorted(WRITE_OPTION_NAMES.values(), key=str.lower):
        kind, meaning = SINK_OPTIONS[name]
        rows.append([code(name), text(kind), _default(sink_defaults[name]), _md(meaning)])
    out += _table(["option", "type", "default", "meaning"], rows)
    out += ["", "`kafka.<key>`: a producer setting (see the [client configuration](client-config.md)). "
            "The sink's own defaults, where Kafka's do not suit a bulk writer: "
            + ", ".join(code(f"kafka.{k}={v}") for k, v in sorted(producer_defaults.items()))
            + ". Refused:", ""]
    out += [f"- {code('kafka.' + key)}: {text(message)}" for key, message in sorted(SINK_REFUSED.items())]
    out += ["", "`schema.registry.<key>`: a Schema Registry client setting for typed writes (`valueFormat` / "
            "`keyFormat` avro, protobuf or json), as for typed reads."]
    return "\n".join(out) + "\n"


def _default(value: str) -> str:
    return "not set" if value == "none" else code(value)


def _md(value: str) -> str:
    """A hand-written cell that may hold `code`: only pipes and line breaks need care."""
    return " ".join(value.split()).replace("|", "\\|")


# -- configuration keys ------------------------------------------------------------------

_LONG_MAX = 2**63 - 1
_INT_MAX = 2**31 - 1


def format_default(value: Any, type_: str = "") -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value) if value else '""'
    if value == _LONG_MAX:
        return f"{value} (Long.MAX_VALUE)"
    if value == _INT_MAX:
        return f"{value} (Integer.MAX_VALUE)"
    if isinstance(value, float) and value == sys.float_info.max:
        return "Double.MAX_VALUE"
    if value == "":
        return '""'
    return str(value)


def _key_rows(keys, *, dynamic: frozenset[str] = frozenset(), aliases: bool = True) -> list[list[str]]:
    rows = []
    for key in sorted(keys.values(), key=lambda k: k.name):
        name = code(key.name)
        if aliases and key.aliases:
            name += " (also " + ", ".join(code(a) for a in key.aliases) + ")"
        row = [name, text(key.type), code(format_default(key.default, key.type)), text(key.doc)]
        if dynamic:
            row.insert(3, "yes" if key.name in dynamic else "")
        rows.append(row)
    return rows


def broker_config_page() -> str:
    from broker.log.config import LOG_CONFIG_DEF, SERVER_DEFAULT_KEYS
    from broker.server.config import SERVER_CONFIG_DEF, SERVER_CONFIG_SECTIONS
    from broker.server.dynamic_config import DYNAMIC_KEYS
    from broker.server.group.group_configs import GROUP_CONFIG_KEYS

    out = ["# Broker configuration", "", GENERATED_NOTE, "",
           "Kafka's key names and defaults. The broker reads them from a Java-properties file "
           "(`kafkalog broker conf/server.properties --override KEY=VALUE`); `conf/server.properties` "
           "holds the ones that matter most, commented. Values are validated at startup, and a bad one "
           "stops the broker with a message naming the key. A key marked *dynamic* can also be changed "
           "while the broker runs (`kafkalog configs --entity-type brokers --alter`). The guide: "
           "[the broker](../broker/index.md).", "",
           "## Broker keys (`server.properties`)", "",
           "Per listener, `listener.name.<listener>.<key>` overrides a TLS key (`ssl.*`) or gives a SASL "
           "mechanism's JAAS line (`listener.name.<listener>.<mechanism>.sasl.jaas.config`); keys under "
           "`remote.log.storage.manager.impl.prefix` (`rsm.config.`) go to the remote storage manager. "
           "The keys are grouped by the part of the broker that reads them.", ""]
    listed: set[str] = set()
    for title, owner, section in SERVER_CONFIG_SECTIONS:
        out += [f"### {title}", "", f"Defined in `{owner}`.", ""]
        out += _table(["key", "type", "default", "dynamic", "meaning"],
                      _key_rows(section.keys, dynamic=frozenset(DYNAMIC_KEYS)))
        out += [""]
        listed.update(section.keys)
    unlisted = sorted(set(SERVER_CONFIG_DEF.keys) - listed)
    if unlisted:  # SERVER_CONFIG_DEF is the sections' union: a key outside them is a bug
        raise RuntimeError(f"broker keys of no section: {', '.join(unlisted)}")
    out.pop()
    out += ["", "## Broker-wide defaults of topic keys", "",
            "Each of these `server.properties` keys is the default of a topic-level key (below) for "
            "every topic that does not set its own. `log.retention.minutes` and `log.retention.hours` are "
            "taken as well, with Kafka's precedence (ms, then minutes, then hours).", ""]
    rows = []
    for server_key, topic_key in sorted(SERVER_DEFAULT_KEYS.items()):
        key = LOG_CONFIG_DEF.keys[topic_key]
        rows.append([code(server_key), f"[{code(topic_key)}](#topic-{_anchor(topic_key)})", text(key.type),
                     code(format_default(key.default, key.type))])
    out += _table(["broker key", "topic key", "type", "default"], rows)
    out += ["", "## Topic keys", "",
            "Set per topic at creation (`kafkalog topics --create --config K=V`) or later "
            "(`kafkalog topics --alter --config K=V`, `kafkalog configs --entity-type topics`). The broker "
            "validates them as Kafka 4 does: an invalid value is answered INVALID_CONFIG naming the key.",
            ""]
    rows = []
    for key in sorted(LOG_CONFIG_DEF.keys.values(), key=lambda k: k.name):
        rows.append([f'<span id="topic-{_anchor(key.name)}"></span>{code(key.name)}', text(key.type),
                     code(format_default(key.default, key.type)), text(key.doc)])
    out += _table(["key", "type", "default", "meaning"], rows)
    out += ["", "## Group keys", "",
            "Set per group, before or while it runs, on Kafka's GROUP config resource (`kafkalog configs "
            "--entity-type groups --entity-name G --alter --add-config K=V`, IncrementalAlterConfigs with "
            "resource type 32). A key's default is the broker key named, and its bounds the broker keys "
            "named (Kafka's defaults in brackets). The guide: [share groups](../broker/share-groups.md).", ""]
    rows = []
    for key in sorted(GROUP_CONFIG_KEYS.values(), key=lambda k: k.name):
        bounds = " .. ".join(f"{code(b[0])} [{b[1]}]" for b in (key.min_key, key.max_key) if b)
        rows.append([code(key.name), text(key.type), code(format_default(key.default, key.type)),
                     code(key.broker_key) if key.broker_key else "", bounds, text(key.doc)])
    out += _table(["key", "type", "default", "default from", "bounds", "meaning"], rows)
    return "\n".join(out) + "\n"


def _anchor(name: str) -> str:
    return name.replace(".", "-").replace("_", "-").lower()


def client_config_page() -> str:
    from broker.client.admin import ADMIN_CONFIG_DEF
    from broker.client.consumer.config import CONSUMER_CONFIG_DEF
    from broker.client.consumer.share import SHARE_CONFIG_DEF
    from broker.client.consumer.share import UNSUPPORTED_KEYS as SHARE_UNSUPPORTED
    from broker.client.producer.config import PRODUCER_CONFIG_DEF

    out = ["# Client configuration", "", GENERATED_NOTE, "",
           "The keys this project's producer, consumer and admin client read: Kafka's names and "
           "defaults. They are what `kafkalog produce --producer.config`, `kafkalog consume "
           "--consumer.config` and the tools' `--command-config` files hold, and, prefixed with "
           "`kafka.`, what the Spark connector passes on (`kafka.linger.ms`, `kafka.isolation.level`, "
           "`kafka.security.protocol`, ...). Against another Kafka cluster the same keys apply.", ""]
    for title, config_def in (("Producer", PRODUCER_CONFIG_DEF), ("Consumer", CONSUMER_CONFIG_DEF),
                              ("Admin client", ADMIN_CONFIG_DEF)):
        out += [f"## {title}", ""]
        out += _table(["key", "type", "default", "meaning"], _key_rows(config_def.keys))
        out.append("")
    out += ["## Share consumer", "",
            "`KafkaShareConsumer` (share groups) takes the consumer's keys above, except those Kafka's share "
            "consumer refuses (" + ", ".join(code(k) for k in sorted(SHARE_UNSUPPORTED)) + "), and these:", ""]
    out += _table(["key", "type", "default", "meaning"], _key_rows(SHARE_CONFIG_DEF.keys))
    out.append("")
    return "\n".join(out)


# -- the kafkalog command ----------------------------------------------------------------

class _GotParser(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        super().__init__("parser")
        self.parser = parser


def passthrough_parser(module) -> argparse.ArgumentParser:
    """The parser a PASSTHROUGH subcommand's program builds: ``run_argv([])`` is called with
    ``parse_args`` replaced by a hook that hands back the parser before anything runs."""
    original = argparse.ArgumentParser.parse_args

    def grab(self, *args, **kwargs):
        raise _GotParser(self)

    argparse.ArgumentParser.parse_args = grab
    try:
        module.run_argv([])
    except _GotParser as got:
        return got.parser
    finally:
        argparse.ArgumentParser.parse_args = original
    raise DocsDriftError(f"{module.__name__}.run_argv([]) built no argparse parser")


def cli_commands() -> list[tuple[str, argparse.ArgumentParser, str]]:
    """(command line, parser, one-line summary) of every subcommand, nested ones included,
    in ``kafkalog --help``'s order."""
    from spark_kafkalog.cli.main import PROG, SUBCOMMANDS, build_parser

    modules = [importlib.import_module(name) for name in SUBCOMMANDS]
    parser = build_parser(modules)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    summaries = {m.NAME: m.SUMMARY for m in modules}
    out = []
    for module in modules:
        child = sub.choices[module.NAME]
        if getattr(module, "PASSTHROUGH", False):
            child = passthrough_parser(module)
            child.prog = f"{PROG} {module.NAME}"  # the program's own name (kafkalog-broker) otherwise
        out.extend(_walk(f"{PROG} {module.NAME}", child, summaries[module.NAME]))
    return out


def _walk(command: str, parser: argparse.ArgumentParser, summary: str):
    yield command, parser, summary
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, child in action.choices.items():
                yield from _walk(f"{command} {name}", child, helps.get(name) or "")


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.help or action.help == argparse.SUPPRESS:
        return ""
    formatter = parser._get_formatter()
    return formatter._expand_help(action)


def option_rows(parser: argparse.ArgumentParser) -> list[tuple[list[str], str, str, str]]:
    """(option strings, argument, default, help) of each documented action of ``parser``."""
    rows = []
    groups = {id(a): i for i, g in enumerate(parser._mutually_exclusive_groups, 1) for a in g._group_actions}
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)):
            continue
        if action.help == argparse.SUPPRESS:
            continue
        names = action.option_strings or [action.metavar or action.dest]
        if action.nargs == 0 or not action.option_strings:
            argument = ""
        elif action.metavar:
            argument = action.metavar if isinstance(action.metavar, str) else " ".join(action.metavar)
        elif action.choices:
            argument = "{" + ",".join(str(c) for c in action.choices) + "}"
        else:
            argument = action.dest.upper()
        default = action.default
        if action.nargs == 0 or default in (None, [], argparse.SUPPRESS):
            default_text = ""
        else:
            default_text = str(default)
        help_text = _help(parser, action)
        if action.required and action.option_strings:
            help_text = "required; " + help_text
        if id(action) in groups:
            help_text += " (one of the command's actions)"
        rows.append((names, argument, default_text, help_text))
    return rows


def cli_page() -> str:
    commands = cli_commands()
    out = ["# The `kafkalog` command", "", GENERATED_NOTE, "",
           "Every subcommand and its options, from its argparse parser (`kafkalog <command> --help` "
           "prints the same). Bad usage prints one line `kafkalog <command>: error: ...` and exits 1. "
           "The guide: [the command line](../cli.md).", "",
           "| command | what it does |", "|---|---|"]
    out += [f"| [{code(cmd)}](#{_anchor(cmd.replace(' ', '-'))}) | {text(summary)} |" for cmd, _, summary in commands]
    out.append("")
    for cmd, parser, summary in commands:
        out += [f"## {code(cmd)}", ""]  # its anchor: kafkalog-consume, kafkalog-transactions-list ...
        description = (parser.description or summary or "").strip()
        if description:
            out += [text(description), ""]
        out += ["```text", parser.format_usage().strip().replace("usage: ", "", 1), "```", ""]
        rows = option_rows(parser)
        if rows:
            out += _table(["option", "argument", "default", "meaning"],
                          [[", ".join(code(n) for n in names), code(a) if a else "", code(d) if d else "", text(h)]
                           for names, a, d, h in rows])
            out.append("")
    return "\n".join(out)


# -- the pages -----------------------------------------------------------------------------

PAGES: dict[str, Callable[[], str]] = {
    "reference/spark-options.md": spark_options_page,
    "reference/broker-config.md": broker_config_page,
    "reference/client-config.md": client_config_page,
    "reference/cli.md": cli_page,
}


def on_files(files, config):
    """MkDocs hook: add the generated pages to the build."""
    from mkdocs.structure.files import File

    for path, render in PAGES.items():
        files.append(File.generated(config, path, content=render()))
    return files


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python tools/gen_docs.py OUTDIR", file=sys.stderr)
        return 2
    out = Path(args[0])
    for path, render in PAGES.items():
        target = out / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(render())
        print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
