"""The options of the ``kafkalog`` source: names, defaults, parsing and validation.

Owns: turning the option map Spark hands a Python data source (case-insensitive keys,
string values) into a typed ``ReadOptions``, with Spark's Kafka source's option names,
meanings and error messages (``KafkaSourceProvider.validateBatchOptions``,
``getKafkaOffsetRangeLimit``, ``JsonUtils``), plus this project's own options. What the
options *mean* against a log (resolving offsets, splitting) is ``planning.py``'s job.

Rules kept from Spark's Kafka source:
- exactly one of ``assign`` / ``subscribe`` / ``subscribePattern``;
- starting bound precedence ``startingTimestamp`` > ``startingOffsetsByTimestamp`` >
  ``startingOffsets`` (default ``earliest`` in batch queries, ``latest`` in streaming
  queries), the same for the ending bound of batch queries (default ``latest``);
- batch queries refuse ``startingOffsets=latest``, ``endingOffsets=earliest``, a JSON
  ``-1`` in ``startingOffsets`` and a JSON ``-2`` in ``endingOffsets``
  (``validateBatchOptions``); streaming queries refuse every ending bound
  (``validateStreamOptions``: ``endingOffsets``, ``endingTimestamp``,
  ``endingOffsetsByTimestamp``) and a ``minOffsetsPerTrigger`` above
  ``maxOffsetsPerTrigger``;
- ``kafka.auto.offset.reset``, ``kafka.key.deserializer``, ``kafka.value.deserializer``,
  ``kafka.enable.auto.commit``, ``kafka.interceptor.classes`` are refused; any other
  ``kafka.*`` key is passed through (network mode gives them to the consumer);
- streaming-only options (``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger``,
  ``maxTriggerDelay``: Spark's time string, e.g. ``15m``, its default) are used by
  streaming queries and ignored with a warning by batch queries, as Spark does (so is
  this project's ``kafkalog.commitOffsetsToGroup``: a non-empty group id, network mode
  only, i.e. it needs ``kafka.bootstrap.servers``); the
  consumer-tuning options (``kafkaConsumer.pollTimeoutMs``, ``fetchOffset.numRetries``,
  ``fetchOffset.retryIntervalMs``, ``groupIdPrefix``) are validated and used by network
  mode only; this project's ``kafkalog.snapshot`` (``true``: the latest value of each key,
  ``snapshot.py``) is for batch queries only, refused in streaming queries and with
  ``minPartitions`` / ``maxRecordsPerPartition``.

``path`` (or ``paths``) and ``kafka.bootstrap.servers`` together are stitched mode
(``readers/stitched.py``): the path is the cluster's remote storage (tiered storage,
KIP-405), read for the offsets below each partition's local log start; the rest is fetched
from the brokers. Its consumer reads committed records unless ``kafka.isolation.level``
says otherwise (the store never returns an aborted record).

Direct mode's ``path`` / ``paths`` may be object-store URIs (``s3://bucket/prefix``;
``s3a://`` and ``s3n://`` are the same store; ``gs://``, ``gcs://``, ``abfs://``,
``abfss://``, ``hdfs://``, ``viewfs://``) as well as local paths and ``file:`` URIs; the
S3 settings are Hadoop's keys, as Spark users set them for ``s3a://``:
``fs.s3a.endpoint``, ``fs.s3a.endpoint.region`` (or ``fs.s3a.region``),
``fs.s3a.access.key``, ``fs.s3a.secret.key``, ``fs.s3a.session.token``,
``fs.s3a.path.style.access``, ``fs.s3a.connection.ssl.enabled``,
``fs.s3a.aws.credentials.provider`` (``broker.log.storage.S3A_KEYS``, mapped onto pyarrow's
``S3FileSystem`` by ``broker.log.storage.s3_options``); without them the AWS SDK's usual
chain applies (``AWS_*`` variables, ``~/.aws``). They land in ``ReadOptions.storage_options``
(never printed: they hold secrets). Another ``fs.s3a.*`` key is an error, as any unknown
option.

Typed reads (``valueFormat`` / ``keyFormat`` and the options that go with them) are parsed by
``formats/options.py`` into ``ReadOptions.formats``; their names are registered here with
the others, and ``schema.registry.*`` keys pass through to the registry client as
``kafka.*`` keys pass to the consumer.

Unlike Spark's Kafka source, an unknown option is an error (``KafkaLogOptionError``) that
names it as Spark passed it (lower-cased: pyspark hands a Python data source its option
keys lower-cased, the user's spelling is lost) with the closest valid name
(``Unknown option 'startingoffset' for the kafkalog source; did you mean
'startingOffsets'?``), or the list of valid ones when none is close, so that a typo never
silently reads something else. A bad value names the option and what it takes
(``startingOffsets: 'begin' is not valid; use earliest, latest, or a JSON object of offsets
such as {"topicA":{"0":23}}``). The message is ``str()`` of the error, first line first.

Which rules apply depends on the query: ``parse_options(options)`` checks a batch read,
``parse_options(options, streaming=True)`` a streaming read, and
``parse_options(options, streaming=None)`` only the rules both share: what
``DataSource.schema()`` can check at ``load()``, where pyspark does not tell a batch read
from a streaming one (the batch-only and streaming-only rules are then checked when the
query is planned or started).

Invariants: ``parse_options`` either returns a fully validated ``ReadOptions`` or raises
``KafkaLogOptionError`` (a ``ValueError``) naming the offending option; it never touches a
file or the network.

Thread-safety: pure functions and frozen values.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from broker.log.storage import S3A_KEYS, is_uri
from broker.record.limits import INT32_MAX, INT64_MAX, INT64_MIN

from .formats.options import FORMAT_OPTIONS, REGISTRY_PREFIX, FormatOptionError, FormatOptions, parse_format_options

__all__ = [
    "KafkaLogOptionError", "ReadOptions", "Strategy", "OffsetSpec", "parse_options",
    "EARLIEST", "LATEST", "OPTION_NAMES", "DEFAULT_MAX_BYTES_PER_BATCH",
    "DEFAULT_MAX_TRIGGER_DELAY_MS", "parse_duration_ms", "TableRead",
]

log = logging.getLogger("spark_kafkalog")

EARLIEST = -2  # KafkaOffsetRangeLimit.EARLIEST
LATEST = -1    # KafkaOffsetRangeLimit.LATEST

# Record bytes decoded per Arrow batch in direct mode. An executor task holds about four
# times this at its peak (the decoder's unit and its output, one mapped window of the
# segment, the batch pyspark is sending): about 70 MiB over the worker's baseline at
# 16 MiB, measured by bench/spark_read.py. Larger budgets stop paying past 16 MiB.
DEFAULT_MAX_BYTES_PER_BATCH = 16 * 1024 * 1024
MIN_MAX_BYTES_PER_BATCH = 64 * 1024
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000  # Spark's maxTriggerDelay default, "15m"

# The user-facing spelling of every option, keyed by its lower-cased form.
_SPARK_OPTIONS = [
    "assign", "subscribe", "subscribePattern",
    "startingOffsets", "endingOffsets",
    "startingTimestamp", "endingTimestamp",
    "startingOffsetsByTimestamp", "endingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "failOnDataLoss", "minPartitions", "maxRecordsPerPartition", "includeHeaders",
]
_NETWORK_ONLY_OPTIONS = [
    "kafkaConsumer.pollTimeoutMs", "fetchOffset.numRetries", "fetchOffset.retryIntervalMs",
    "groupIdPrefix",
]
_STREAMING_ONLY_OPTIONS = ["maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay",
                           "kafkalog.commitOffsetsToGroup"]
_OWN_OPTIONS = ["path", "paths", "maxBytesPerBatch"]
_BATCH_ONLY_OPTIONS = ["kafkalog.snapshot"]
# Bridge reads (readers/bridge.py): the table, its format, and the prefixes passed on to
# the catalog (pyiceberg's catalog properties) and to the store (deltalake's storage options)
TABLE_OPTION = "kafkalog.table"
TABLE_FORMAT_OPTION = "kafkalog.table.format"
TABLE_CATALOG_PREFIX = "kafkalog.table.catalog."
TABLE_STORAGE_PREFIX = "kafkalog.table.storage."
TABLE_FORMATS = ("iceberg", "delta")
_TABLE_OPTIONS = [TABLE_OPTION, TABLE_FORMAT_OPTION]
OPTION_NAMES: dict[str, str] = {
    name.lower(): name
    for name in (_SPARK_OPTIONS + _NETWORK_ONLY_OPTIONS + _STREAMING_ONLY_OPTIONS + _OWN_OPTIONS
                 + _BATCH_ONLY_OPTIONS + _TABLE_OPTIONS + FORMAT_OPTIONS + list(S3A_KEYS))
}
# Object stores direct mode reads through pyarrow (broker.log.storage.open_location).
OBJECT_STORE_SCHEMES = ("s3", "s3a", "s3n", "gs", "gcs", "abfs", "abfss", "hdfs", "viewfs")

_STRATEGY_KEYS = ("subscribe", "subscribepattern", "assign")

_REFUSED_KAFKA = {
    "auto.offset.reset": (
        "Kafka option 'auto.offset.reset' is not supported. Instead set the source option "
        "'startingOffsets' to 'earliest' or 'latest' to specify where to start."),
    "key.deserializer": (
        "Kafka option 'key.deserializer' is not supported as keys are deserialized as byte "
        "arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly "
        "deserialize the keys."),
    "value.deserializer": (
        "Kafka option 'value.deserializer' is not supported as values are deserialized as "
        "byte arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly "
        "deserialize the values."),
    "enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported",
    "interceptor.classes": "Kafka option 'interceptor.classes' is not supported",
}

_ASSIGN_EXAMPLE = '{"topicA":[0,1],"topicB":[0,1]}'
_OFFSETS_EXAMPLE = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
_TIMESTAMPS_EXAMPLE = ('{"topicA": {"0": 123456789, "1": 123456789}, '
                       '"topicB": {"0": 123456789, "1": 123456789}}')


class KafkaLogOptionError(ValueError):
    """An invalid, missing or unknown option of the ``kafkalog`` source."""


TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class Strategy:
    """Which partitions to read: ``kind`` is ``assign`` (``partitions``), ``subscribe``
    (``topics``) or ``subscribePattern`` (``pattern``, a regular expression matched
    against the whole topic name, as Java's ``Pattern.matcher(t).matches()``)."""
    kind: str
    topics: tuple[str, ...] = ()
    pattern: str = ""
    partitions: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True)
class OffsetSpec:
    """One bound (starting or ending), before it is resolved against a log.

    ``kind``: ``earliest``, ``latest``, ``offsets`` (``offsets``: per partition, -2/-1 for
    earliest/latest), ``timestamp`` (``timestamp``: one for every partition) or
    ``timestamps`` (``timestamps``: per partition). ``strategy`` is
    startingOffsetsByTimestampStrategy (``error`` or ``latest``): what a starting
    timestamp that matches no record resolves to."""
    kind: str
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp: int = 0
    timestamps: Mapping[TopicPartition, int] = field(default_factory=dict)
    strategy: str = "error"


@dataclass(frozen=True)
class TableRead:
    """A bridge read's table (``kafkalog.table``): where it is, its format (``iceberg`` or
    ``delta``; None: told from the location when the read is planned), an Iceberg catalog's
    URI and properties, deltalake's storage options (both repr=False: they hold secrets)."""
    location: str
    format: str | None = None
    catalog_uri: str | None = None
    catalog_properties: Mapping[str, str] = field(default_factory=dict, repr=False)
    storage_options: Mapping[str, str] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class ReadOptions:
    strategy: Strategy
    starting: OffsetSpec
    ending: OffsetSpec
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    include_headers: bool = False
    paths: tuple[str, ...] = ()  # direct mode: the log directories (absolute, or object-store URIs)
    # direct mode on an object store: Hadoop's fs.s3a.* keys (repr=False: secrets)
    storage_options: Mapping[str, str] = field(default_factory=dict, repr=False)
    bootstrap_servers: str | None = None
    # repr=False: may hold secrets (kafka.sasl.jaas.config, kafka.ssl.keystore.password ...)
    kafka_params: Mapping[str, str] = field(default_factory=dict, repr=False)
    max_bytes_per_batch: int = DEFAULT_MAX_BYTES_PER_BATCH
    poll_timeout_ms: int | None = None
    fetch_offset_num_retries: int = 3
    fetch_offset_retry_interval_ms: int = 1000
    group_id_prefix: str = "spark-kafka-relation"
    # streaming queries only (parse_options(..., streaming=True))
    streaming: bool = False
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    commit_offsets_to_group: str | None = None  # kafkalog.commitOffsetsToGroup (network mode)
    # batch queries only: kafkalog.snapshot, the latest value of each key (snapshot.py)
    snapshot: bool = False
    # valueFormat / keyFormat and the options of typed reads (formats/options.py)
    formats: FormatOptions = field(default_factory=FormatOptions)
    # kafkalog.table: a bridge read, the table's rows then the log after its offsets
    table: TableRead | None = None

    @property
    def mode(self) -> str:
        """``direct`` (read ``paths`` on the executors), ``network`` (a Kafka cluster) or
        ``stitched`` (both given: ``paths`` is the cluster's remote storage, read for the
        offsets the brokers keep only there; ``readers/stitched.py``)."""
        if self.paths:
            return "stitched" if self.bootstrap_servers is not None else "direct"
        return "network"

    @property
    def brokers(self) -> str:
        """``bootstrap_servers`` of the network and stitched modes (``parse_options`` refuses
        a read with neither brokers nor a path)."""
        if self.bootstrap_servers is None:
            raise _fail(f"Option 'kafka.bootstrap.servers' must be specified ({self.mode} mode)")
        return self.bootstrap_servers


def _fail(message: str) -> KafkaLogOptionError:
    return KafkaLogOptionError(message)


def _valid_names() -> str:
    return (", ".join(sorted(OPTION_NAMES.values(), key=str.lower)) + ", kafka.<consumer config>, "
            f"{REGISTRY_PREFIX}<registry client config>")


# kafka.* (and schema.registry.*) keys a misspelling is most likely meant to be (any other
# kafka.* key is passed on)
_COMMON_KAFKA_KEYS = ("kafka.bootstrap.servers", "kafka.isolation.level", "kafka.security.protocol",
                      "kafka.sasl.mechanism", "kafka.sasl.jaas.config", "kafka.group.id",
                      "schema.registry.url", "schema.registry.basic.auth.user.info")


def _unknown_options(unknown: list[str]) -> KafkaLogOptionError:
    """``Unknown option 'x' for the kafkalog source; did you mean 'y'?`` (Spark passes the keys
    lower-cased), or the valid names when nothing is close."""
    candidates = {name.lower(): name for name in (*OPTION_NAMES.values(), *_COMMON_KAFKA_KEYS)}
    parts, missed = [], False
    for key in unknown:
        close = difflib.get_close_matches(key.lower(), list(candidates), n=1, cutoff=0.75)
        if close:
            parts.append(f"{key!r} for the kafkalog source; did you mean {candidates[close[0]]!r}?")
        else:
            parts.append(f"{key!r} for the kafkalog source")
            missed = True
    message = f"Unknown option{'s' if len(unknown) > 1 else ''} " + (
        parts[0] if len(parts) == 1 else "; ".join(parts))
    if missed:
        message += f". Valid options: {_valid_names()}."
    return _fail(message)


def _invalid(name: str, value: object, use: str) -> KafkaLogOptionError:
    """A bad value: ``name: 'value' is not valid; use ...`` (``name`` as the user spells it)."""
    return _fail(f"{name}: '{value}' is not valid; use {use}")


def _bool(options: Mapping[str, str], key: str, default: bool) -> bool:
    if key not in options:
        return default
    text = str(options[key]).strip().lower()
    if text not in ("true", "false"):
        raise _invalid(OPTION_NAMES[key], options[key], "true or false")
    return text == "true"


def _long(options: Mapping[str, str], key: str, *, positive: bool = False,
          non_negative: bool = False) -> int | None:
    if key not in options:
        return None
    text = str(options[key]).strip()
    use = ("a positive integer" if positive else "an integer >= 0" if non_negative
           else "an integer")
    try:
        value = int(text)
    except ValueError:
        raise _invalid(OPTION_NAMES[key], options[key], use) from None
    if not INT64_MIN <= value <= INT64_MAX:
        raise _invalid(OPTION_NAMES[key], options[key], f"{use} (at most {INT64_MAX})")
    if (positive and value <= 0) or (non_negative and value < 0):
        raise _invalid(OPTION_NAMES[key], options[key], use)
    return value


def _json_object(text: str, example: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError:
        raise _fail(f"Expected e.g. {example}, got {text}") from None
    if not isinstance(value, dict):
        raise _fail(f"Expected e.g. {example}, got {text}")
    return value


def _is_long(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and INT64_MIN <= value <= INT64_MAX


def _partition_number(key: str, text: str, example: str) -> int:
    if not re.fullmatch(r"\d{1,10}", key.strip()) or int(key) > INT32_MAX:
        raise _fail(f"Expected e.g. {example}, got {text}")
    return int(key)


def parse_assign(text: str) -> tuple[TopicPartition, ...]:
    """``{"topicA":[0,1],"topicB":[2,4]}`` -> ((topicA, 0), (topicA, 1), ...) (JsonUtils.partitions)."""
    obj = _json_object(text, _ASSIGN_EXAMPLE)
    out: list[TopicPartition] = []
    for topic, parts in obj.items():
        if not isinstance(parts, list) or not all(_is_long(p) and 0 <= p <= INT32_MAX for p in parts):
            raise _fail(f"Expected e.g. {_ASSIGN_EXAMPLE}, got {text}")
        out.extend((topic, p) for p in parts)
    return tuple(sorted(set(out)))


def _parse_partition_map(text: str, example: str) -> dict[TopicPartition, int]:
    obj = _json_object(text, example)
    out: dict[TopicPartition, int] = {}
    for topic, parts in obj.items():
        if not isinstance(parts, dict):
            raise _fail(f"Expected e.g. {example}, got {text}")
        for key, value in parts.items():
            if not _is_long(value):
                raise _fail(f"Expected e.g. {example}, got {text}")
            out[(topic, _partition_number(key, text, example))] = value
    return out


def parse_partition_offsets(text: str) -> dict[TopicPartition, int]:
    """``{"topicA":{"0":23,"1":-1}}`` -> {(topicA, 0): 23, ...} (JsonUtils.partitionOffsets)."""
    return _parse_partition_map(text, _OFFSETS_EXAMPLE)


def parse_partition_timestamps(text: str) -> dict[TopicPartition, int]:
    """``{"topicA":{"0":1000}}`` -> {(topicA, 0): 1000} (JsonUtils.partitionTimestamps)."""
    return _parse_partition_map(text, _TIMESTAMPS_EXAMPLE)


def _tp(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def _offset_spec(options: Mapping[str, str], ts_key: str, by_ts_key: str, offsets_key: str,
                 default: str, strategy: str) -> OffsetSpec:
    """Spark's getKafkaOffsetRangeLimit: timestamp > offsetsByTimestamp > offsets."""
    if ts_key in options:
        text = str(options[ts_key]).strip()
        try:
            ts = int(text)
        except ValueError:
            raise _invalid(OPTION_NAMES[ts_key], options[ts_key],
                           "a timestamp in milliseconds since the epoch, such as 1700000000000") from None
        return OffsetSpec("timestamp", timestamp=ts, strategy=strategy)
    if by_ts_key in options:
        try:
            timestamps = parse_partition_timestamps(str(options[by_ts_key]).strip())
        except KafkaLogOptionError:
            raise _invalid(OPTION_NAMES[by_ts_key], options[by_ts_key],
                           f"a JSON object of timestamps per partition such as {_TIMESTAMPS_EXAMPLE}") from None
        return OffsetSpec("timestamps", timestamps=timestamps, strategy=strategy)
    if offsets_key in options:
        text = str(options[offsets_key]).strip()
        if text.lower() == "latest":
            return OffsetSpec("latest")
        if text.lower() == "earliest":
            return OffsetSpec("earliest")
        try:
            offsets = parse_partition_offsets(text)
        except KafkaLogOptionError:
            starting = offsets_key == "startingoffsets"
            raise _invalid(OPTION_NAMES[offsets_key], options[offsets_key],
                           f"{'earliest, latest,' if starting else 'latest'} or a JSON object of offsets "
                           'per partition such as {"topicA":{"0":23,"1":-1}} '
                           f"({'-2: earliest, ' if starting else ''}-1: latest)") from None
        for tp, off in offsets.items():
            if off < EARLIEST:
                raise _fail(f"Invalid offset {off} for {_tp(tp)} in option "
                            f"'{OPTION_NAMES[offsets_key]}': use an offset >= 0, -1 for latest or "
                            "-2 for earliest")
        return OffsetSpec("offsets", offsets=offsets)
    return OffsetSpec(default)


def _validate_timestamps(spec: OffsetSpec, key: str) -> None:
    values = [spec.timestamp] if spec.kind == "timestamp" else list(spec.timestamps.values())
    for ts in values:
        if ts < 0 and ts not in (EARLIEST, LATEST):
            raise _fail(f"Invalid timestamp {ts} in option '{OPTION_NAMES[key]}': timestamps are "
                        "milliseconds since the epoch (>= 0)")


def _check_offset_limit_validity(start: OffsetSpec, end: OffsetSpec) -> None:
    """Spark's checkOffsetLimitValidity, before anything is resolved."""
    if start.kind == end.kind == "offsets":
        pairs, what = (start.offsets, end.offsets), "offset"
    elif start.kind == end.kind == "timestamps":
        pairs, what = (start.timestamps, end.timestamps), "timestamp"
    else:
        return
    a, b = pairs
    if set(a) != set(b):
        raise _fail("The specified start offset and end offset should have the same topic-partitions. "
                    f"Topic-partitions for start offset: {_tps(a)}, topic-partitions for end offset: "
                    f"{_tps(b)}.")
    for tp in sorted(a):
        s, e = a[tp], b[tp]
        if s > e and s >= 0 and e >= 0:
            raise _fail(f"The specified start {what} {s} is greater than the end {what} {e} for "
                        f"topic {tp[0]} partition {tp[1]}.")


def _tps(m) -> str:
    return "{" + ", ".join(_tp(tp) for tp in sorted(m)) + "}"


# Spark's Utils.timeStringAsMs units
_TIME_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000,
                  "d": 86_400_000}


def parse_duration_ms(text: str, name: str) -> int:
    """Milliseconds of a Spark time string (``500``, ``500ms``, ``10s``, ``15m``, ``1h``,
    ``1d``; no unit: milliseconds), as ``Utils.timeStringAsMs``."""
    m = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", str(text).lower())
    if m is None or (m.group(2) and m.group(2) not in _TIME_UNITS_MS):
        raise _invalid(name, text, "a duration such as 500ms, 10s, 15m or 1h (no unit: milliseconds)")
    return int(int(m.group(1)) * _TIME_UNITS_MS[m.group(2) or "ms"])


_ENDING_KEYS = {  # validateStreamOptions
    "endingoffsets": "ending offset not valid in streaming queries",
    "endingtimestamp": "ending timestamp not valid in streaming queries",
    "endingoffsetsbytimestamp": "ending timestamp not valid in streaming queries",
}


def parse_options(options: Mapping[str, str], *, streaming: bool | None = False) -> ReadOptions:
    """Validate the options of a read (keys in any case) into ``ReadOptions``: a batch read
    (``streaming=False``), a streaming read (``True``), or either (``None``: only the rules
    both kinds share, for ``load()``; the result's bounds are then a batch read's)."""
    opts = {str(k).lower(): ("" if v is None else str(v)) for k, v in options.items()}
    unknown = sorted(str(k) for k in options if str(k).lower() not in OPTION_NAMES
                     and not str(k).lower().startswith(("kafka.", REGISTRY_PREFIX, TABLE_CATALOG_PREFIX,
                                                        TABLE_STORAGE_PREFIX)))
    if unknown:
        raise _unknown_options(unknown)

    # strategy
    specified = [k for k in _STRATEGY_KEYS if k in opts]
    names = ", ".join(_STRATEGY_KEYS)
    if not specified:
        raise _fail(f"One of the following options must be specified for Kafka source: {names}. "
                    "See the docs for more details.")
    if len(specified) > 1:
        raise _fail(f"Only one of the following options can be specified for Kafka source: {names}. "
                    "See the docs for more details.")
    key = specified[0]
    value = opts[key]
    if key == "assign":
        if not value.strip().startswith("{"):
            raise _fail(f"No topicpartitions to assign as specified value for option 'assign' is '{value}'")
        try:
            strategy = Strategy("assign", partitions=parse_assign(value.strip()))
        except KafkaLogOptionError:
            raise _invalid("assign", value,
                           f"a JSON object of partitions per topic such as {_ASSIGN_EXAMPLE}") from None
    elif key == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise _fail(f"No topics to subscribe to as specified value for option 'subscribe' is '{value}'")
        strategy = Strategy("subscribe", topics=tuple(dict.fromkeys(topics)))
    else:
        pattern = value.strip()
        if not pattern:
            raise _fail("Pattern to subscribe is empty as specified value for option "
                        f"'subscribePattern' is '{value}'")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise _invalid("subscribePattern", value, f"a regular expression ({exc})") from None
        strategy = Strategy("subscribePattern", pattern=pattern)

    # starting / ending bounds
    ts_strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if ts_strategy not in ("error", "latest"):
        raise _invalid("startingOffsetsByTimestampStrategy", opts["startingoffsetsbytimestampstrategy"],
                       "error or latest")
    if streaming:
        for key, message in _ENDING_KEYS.items():
            if key in opts:
                raise _fail(message)
    starting = _offset_spec(opts, "startingtimestamp", "startingoffsetsbytimestamp", "startingoffsets",
                            "latest" if streaming else "earliest", ts_strategy)
    ending = _offset_spec(opts, "endingtimestamp", "endingoffsetsbytimestamp", "endingoffsets",
                          "latest", ts_strategy)
    if streaming is False and starting.kind == "latest":
        raise _fail("starting offset can't be latest for batch queries on Kafka")
    if streaming is False and starting.kind == "offsets":
        for tp, off in sorted(starting.offsets.items()):
            if off == LATEST:
                raise _fail(f"startingOffsets for {_tp(tp)} can't be latest for batch queries on Kafka")
    if ending.kind == "earliest":
        raise _fail("ending offset can't be earliest for batch queries on Kafka")
    if ending.kind == "offsets":
        for tp, off in sorted(ending.offsets.items()):
            if off == EARLIEST:
                raise _fail(f"ending offset for {_tp(tp)} can't be earliest for batch queries on Kafka")
    _validate_timestamps(starting, "startingtimestamp" if starting.kind == "timestamp"
                         else "startingoffsetsbytimestamp")
    _validate_timestamps(ending, "endingtimestamp" if ending.kind == "timestamp"
                         else "endingoffsetsbytimestamp")
    _check_offset_limit_validity(starting, ending)

    # numbers and flags
    min_partitions = _long(opts, "minpartitions", positive=True)
    if min_partitions is not None and not 0 < min_partitions <= INT32_MAX:
        raise _invalid("minPartitions", opts["minpartitions"], f"a positive integer (at most {INT32_MAX})")
    max_records = _long(opts, "maxrecordsperpartition", positive=True)
    fail_on_data_loss = _bool(opts, "failondataloss", True)
    include_headers = _bool(opts, "includeheaders", False)
    snapshot = _bool(opts, "kafkalog.snapshot", False)
    if snapshot and streaming:
        raise _fail("Option 'kafkalog.snapshot' is not valid in streaming queries: a snapshot is "
                    "the latest value of each key as of the end of a batch read's range")
    if snapshot and (min_partitions is not None or max_records is not None):
        raise _fail("Options 'minPartitions' and 'maxRecordsPerPartition' cannot be used with "
                    "'kafkalog.snapshot': a snapshot reads each Kafka partition in one task (all "
                    "the records of a key are in one partition, where they are reduced)")
    max_bytes = _long(opts, "maxbytesperbatch")
    if max_bytes is None:
        max_bytes = DEFAULT_MAX_BYTES_PER_BATCH
    elif max_bytes < MIN_MAX_BYTES_PER_BATCH:
        raise _invalid("maxBytesPerBatch", opts["maxbytesperbatch"],
                       f"a number of bytes >= {MIN_MAX_BYTES_PER_BATCH} (default {DEFAULT_MAX_BYTES_PER_BATCH})")
    poll_timeout = _long(opts, "kafkaconsumer.polltimeoutms", non_negative=True)
    retries = _long(opts, "fetchoffset.numretries", non_negative=True)
    retry_interval = _long(opts, "fetchoffset.retryintervalms", non_negative=True)
    max_offsets = _long(opts, "maxoffsetspertrigger", positive=True)
    min_offsets = _long(opts, "minoffsetspertrigger", positive=True)
    max_delay_ms = DEFAULT_MAX_TRIGGER_DELAY_MS
    if streaming:
        if min_offsets is not None and max_offsets is not None and min_offsets > max_offsets:
            raise _fail(f"The value of minOffsetPerTrigger({min_offsets}) is higher than the "
                        f"maxOffsetsPerTrigger({max_offsets}).")
        if "maxtriggerdelay" in opts:
            max_delay_ms = parse_duration_ms(opts["maxtriggerdelay"], "maxTriggerDelay")
    elif streaming is False:
        for key in _STREAMING_ONLY_OPTIONS:
            if key.lower() in opts:
                log.warning("%s option ignored in batch queries", key)

    # kafka.* passthrough
    kafka_params = {k[len("kafka."):]: v for k, v in opts.items() if k.startswith("kafka.")}
    for name, message in _REFUSED_KAFKA.items():
        if name in kafka_params:
            raise _fail(message)
    if "isolation.level" in kafka_params:  # as the consumer takes it (network mode) and direct mode's planning
        level = str(kafka_params["isolation.level"]).strip().lower()
        if level not in ("read_committed", "read_uncommitted"):  # the consumer's ISOLATION_LEVELS
            raise _invalid("kafka.isolation.level", kafka_params["isolation.level"],
                           "read_committed or read_uncommitted")
        kafka_params["isolation.level"] = level
    if "group.id" in kafka_params:
        log.warning("Kafka option 'kafka.group.id' has been set on this query, it is not recommended "
                    "to set this option (see Spark's Kafka integration guide)")
    bootstrap = kafka_params.get("bootstrap.servers")
    paths = _log_dirs(opts)
    if not paths and bootstrap is None:
        raise _fail("Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer "
                    "(network mode), or option 'path' (or .load(path)) with a Kafka log directory "
                    "to read directly (direct mode)")
    if paths and bootstrap is not None and "isolation.level" not in kafka_params:
        # stitched mode: the store never returns an aborted record (the transaction indexes);
        # the brokers' part reads committed records too, so both parts agree
        kafka_params["isolation.level"] = "read_committed"
    commit_group = None
    if streaming and "kafkalog.commitoffsetstogroup" in opts:
        commit_group = opts["kafkalog.commitoffsetstogroup"].strip()
        if not commit_group:
            raise _fail("Option 'kafkalog.commitOffsetsToGroup' is empty: give the consumer group id to "
                        "commit each micro-batch's end offsets to")
        if bootstrap is None:
            raise _fail("Option 'kafkalog.commitOffsetsToGroup' needs 'kafka.bootstrap.servers' (network "
                        "mode): the offsets are committed to the group's coordinator on those brokers; a "
                        "direct-mode query has none")

    try:
        formats = parse_format_options(opts, log_dir=bool(paths) and bootstrap is None)
    except FormatOptionError as exc:
        raise _fail(str(exc)) from None
    table = _table_read(opts, strategy, snapshot)

    return ReadOptions(
        strategy=strategy, starting=starting, ending=ending,
        fail_on_data_loss=fail_on_data_loss, min_partitions=min_partitions,
        max_records_per_partition=max_records, include_headers=include_headers,
        paths=paths, bootstrap_servers=bootstrap,
        storage_options={k: v for k, v in opts.items() if k in S3A_KEYS},
        kafka_params=kafka_params, max_bytes_per_batch=max_bytes, poll_timeout_ms=poll_timeout,
        fetch_offset_num_retries=3 if retries is None else retries,
        fetch_offset_retry_interval_ms=1000 if retry_interval is None else retry_interval,
        group_id_prefix=opts.get("groupidprefix", "spark-kafka-relation"),
        streaming=bool(streaming), max_offsets_per_trigger=max_offsets if streaming else None,
        min_offsets_per_trigger=min_offsets if streaming else None,
        max_trigger_delay_ms=max_delay_ms, commit_offsets_to_group=commit_group,
        snapshot=snapshot, formats=formats, table=table,
    )


_STARTING_KEYS = ("startingoffsets", "startingtimestamp", "startingoffsetsbytimestamp")


def _table_read(opts: Mapping[str, str], strategy: Strategy, snapshot: bool) -> TableRead | None:
    """``kafkalog.table`` and its options (``TableRead``), checked: one topic, no starting
    bound (the table's offsets are where the log part starts), no snapshot."""
    given = [k for k in opts if k == TABLE_OPTION or k.startswith("kafkalog.table.")]
    if TABLE_OPTION not in opts:
        if given:
            raise _fail(f"Option {OPTION_NAMES.get(given[0], given[0])!r} needs 'kafkalog.table' (the table "
                        "a bridge read starts with)")
        return None
    location = opts[TABLE_OPTION].strip()
    if not location:
        raise _fail("Option 'kafkalog.table' is empty: give the table (a path, an object-store URI, or "
                    "namespace.name with 'kafkalog.table.catalog.uri')")
    topics = set(strategy.topics) | {t for t, _ in strategy.partitions}
    if strategy.kind == "subscribePattern" or len(topics) != 1:
        raise _fail("Option 'kafkalog.table' reads one topic, the table's: use 'subscribe' (or 'assign') "
                    "with exactly one topic")
    for key in _STARTING_KEYS:
        if key in opts:
            raise _fail(f"Option {OPTION_NAMES[key]!r} cannot be used with 'kafkalog.table': the log is read "
                        "from the offsets the table holds")
    if snapshot:
        raise _fail("Options 'kafkalog.snapshot' and 'kafkalog.table' cannot be used together")
    fmt = opts.get(TABLE_FORMAT_OPTION, "").strip().lower() or None
    if fmt is not None and fmt not in TABLE_FORMATS:
        raise _invalid("kafkalog.table.format", opts[TABLE_FORMAT_OPTION], " or ".join(TABLE_FORMATS))
    catalog = {k[len(TABLE_CATALOG_PREFIX):]: v for k, v in opts.items() if k.startswith(TABLE_CATALOG_PREFIX)}
    catalog_uri = catalog.pop("uri", None)
    if fmt == "delta" and (catalog_uri is not None or catalog):
        raise _fail("Options 'kafkalog.table.catalog.*' are Iceberg's: a Delta table is a path or an "
                    "object-store URI")
    storage = {k[len(TABLE_STORAGE_PREFIX):]: v for k, v in opts.items() if k.startswith(TABLE_STORAGE_PREFIX)}
    return TableRead(location, fmt, catalog_uri, catalog, storage)


def _log_dirs(opts: Mapping[str, str]) -> tuple[str, ...]:
    """The log directories of ``path`` (``.load(dir)``) and ``paths`` (``.load([dir, ...])``,
    which Spark passes as a JSON list): a broker with several ``log.dirs`` is read whole."""
    given: list[str] = []
    if "path" in opts:
        if not opts["path"].strip():
            raise _fail("Option 'path' is empty: give the Kafka log directory to read")
        given.append(opts["path"].strip())
    if "paths" in opts:
        try:
            listed = json.loads(opts["paths"])
        except ValueError:
            listed = None
        if not isinstance(listed, list) or not all(isinstance(p, str) and p.strip() for p in listed):
            raise _fail(f"Option 'paths' must be a JSON list of log directories, got {opts['paths']}")
        given.extend(p.strip() for p in listed)
    return tuple(dict.fromkeys(_local_path(p) for p in given))


def _local_path(path: str) -> str:
    """An absolute local path (``file:`` URIs accepted), resolved where the read is
    planned (the driver) so that every executor gets the same path; an object-store URI
    as given (its trailing slashes dropped)."""
    if path.startswith("file:"):
        from urllib.parse import unquote, urlparse
        parsed = urlparse(path)
        if parsed.netloc not in ("", "localhost"):
            raise _fail(f"Option 'path' must be a local directory, got {path}")
        path = unquote(parsed.path)
    elif is_uri(path):
        scheme = path.split("://", 1)[0].lower()
        if scheme not in OBJECT_STORE_SCHEMES:
            raise _fail(f"Option 'path' must be a local directory, a file: URI or an object-store URI "
                        f"({', '.join(s + '://' for s in OBJECT_STORE_SCHEMES)}), got {path}")
        if not path.split("://", 1)[1].split("?", 1)[0].strip("/"):
            raise _fail(f"Option 'path' {path} names no bucket or container")
        return path.rstrip("/")
    return os.path.abspath(path)
