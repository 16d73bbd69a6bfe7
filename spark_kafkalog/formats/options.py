"""The options of typed reads: ``valueFormat`` / ``keyFormat`` and what goes with them.

Owns the option names (``FORMAT_OPTIONS``, registered in ``spark_kafkalog.options``
beside the others, and the ``schema.registry.`` prefix), their parsing into a frozen
``FormatOptions`` (``parse_format_options``) and the columns a typed read adds.

Options (names case-insensitive, as every option of the source):

``valueFormat`` / ``keyFormat``
    ``binary`` (default: Spark's Kafka column, unchanged), ``string`` (UTF-8 text),
    ``avro``, ``protobuf``, ``json`` (Schema Registry formats: the column becomes a struct
    of the reader schema).
``valueFraming`` / ``keyFraming``
    ``confluent`` (default): Confluent's wire format, magic byte 0 and an int32 schema id or
    magic byte 1 and a GUID, Protobuf's message indexes after it, or the id in a
    ``__value_schema_id`` / ``__key_schema_id`` header (``broker.schema.framing``).
    ``none``: the bytes are the bare Avro / Protobuf / JSON payload, written with the
    reader schema itself.
``schema.registry.<key>``
    Every ``schema.registry.X`` goes as ``X`` to the registry client
    (``broker.client.registry``): ``url``, ``basic.auth.user.info``, ``ssl.ca.location``,
    ``request.timeout.ms``, ... A key the client does not know is refused here.
``valueSubject`` / ``keySubject``
    The subject(s) of the reader schema, comma-separated; several subjects make the column a
    struct with one nullable member per record (see ``subject.name.strategy``). Default:
    from the strategy.
``subject.name.strategy``
    ``TopicNameStrategy`` (default: ``<topic>-value`` / ``<topic>-key``),
    ``RecordNameStrategy`` (the record's full name: the subjects must be given), or
    ``TopicRecordNameStrategy`` (``<topic>-<record full name>``: the topic's subjects of
    that form are found in the registry). Confluent's Java class names are accepted too.
``valueSchema`` / ``keySchema``
    The reader schema: ``latest`` (default: the subject's latest version when the
    DataFrame is loaded), ``version:N``, ``id:N``, or the schema's text itself.
``valueMessageName`` / ``keyMessageName``
    Protobuf: the reader schema's message (full name); default the subject's record name
    under the record strategies, else the schema's first message.
``mode``
    ``PERMISSIVE`` (default: an undecodable key or value is null and its bytes go to the
    corrupt-record column), ``FAILFAST`` (the read fails, naming topic, partition and
    offset), ``DROPMALFORMED`` (the record is left out).
``columnNameOfCorruptRecord``
    The value's corrupt-record column, ``_corrupt_value`` by default (the key's is
    ``_corrupt_key``). PERMISSIVE only.
``recursive.fields.max.depth``
    -1 (default: a recursive schema is refused) or 1..10 (Spark's option of
    ``from_avro`` / ``from_protobuf``).

Columns of a typed read: Spark's Kafka columns (``key`` and ``value`` typed as asked),
then ``keySchemaId`` / ``valueSchemaId`` (int, for Schema Registry formats) and, in
PERMISSIVE mode, the corrupt-record columns of the typed fields (binary).

Invariants: ``parse_format_options`` returns a fully validated ``FormatOptions`` or raises
``FormatOptionError`` naming the option (``parse_options`` raises it again as a
``KafkaLogOptionError``); it never touches the network (reader schemas
are resolved by ``formats.registry``). ``FormatOptions`` never prints the registry
settings (they may hold credentials).

Thread-safety: pure functions and frozen values. This module imports nothing heavy and
nothing of ``spark_kafkalog.options`` (that module imports this one).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "FORMAT_OPTIONS", "REGISTRY_PREFIX", "FORMATS", "BINARY", "STRING", "AVRO", "PROTOBUF", "JSON",
    "PERMISSIVE", "FAILFAST", "DROPMALFORMED", "SchemaSpec", "FieldFormat", "FormatOptions",
    "parse_format_options", "FormatOptionError",
]

FORMAT_OPTIONS = [
    "valueFormat", "keyFormat", "valueFraming", "keyFraming", "valueSubject", "keySubject",
    "subject.name.strategy", "valueSchema", "keySchema", "valueMessageName", "keyMessageName",
    "mode", "columnNameOfCorruptRecord", "recursive.fields.max.depth",
]
REGISTRY_PREFIX = "schema.registry."

BINARY, STRING, AVRO, PROTOBUF, JSON = "binary", "string", "avro", "protobuf", "json"
FORMATS = (BINARY, STRING, AVRO, PROTOBUF, JSON)
REGISTRY_TYPES = {AVRO: "AVRO", PROTOBUF: "PROTOBUF", JSON: "JSON"}  # broker.schema's schema types
CONFLUENT, NONE = "confluent", "none"
PERMISSIVE, FAILFAST, DROPMALFORMED = "PERMISSIVE", "FAILFAST", "DROPMALFORMED"
TOPIC_NAME, RECORD_NAME, TOPIC_RECORD_NAME = "TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy"
_STRATEGIES = {s.lower(): s for s in (TOPIC_NAME, RECORD_NAME, TOPIC_RECORD_NAME)}
_JAVA_STRATEGY_PACKAGE = "io.confluent.kafka.serializers.subject."
KAFKA_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers")
MAX_RECURSIVE_DEPTH = 10


@dataclass(frozen=True)
class SchemaSpec:
    """Which reader schema: ``kind`` ``latest``, ``version`` (``number``), ``id``
    (``number``) or ``inline`` (``text``)."""

    kind: str = "latest"
    number: int = 0
    text: str = field(default="", repr=False)

    def describe(self) -> str:
        """As the option spells it (``latest``, ``version:3``, ``id:7``; ``inline``)."""
        if self.kind in ("inline", "latest"):
            return self.kind
        return f"{self.kind}:{self.number}"


@dataclass(frozen=True)
class FieldFormat:
    """How the key or the value is read (``is_key``)."""

    is_key: bool
    format: str = BINARY
    framing: str = CONFLUENT
    subjects: tuple[str, ...] = ()  # given with valueSubject / keySubject
    schema: SchemaSpec = SchemaSpec()
    message_name: str | None = None
    corrupt_column: str = "_corrupt_value"

    @property
    def name(self) -> str:
        """``key`` or ``value``: the Kafka column."""
        return "key" if self.is_key else "value"

    @property
    def typed(self) -> bool:
        return self.format != BINARY

    @property
    def registry_format(self) -> bool:
        """Avro, Protobuf or JSON Schema (schemas, ids, a registry)."""
        return self.format in REGISTRY_TYPES

    @property
    def schema_type(self) -> str:
        return REGISTRY_TYPES[self.format]

    @property
    def id_column(self) -> str:
        return f"{self.name}SchemaId"

    def option(self, suffix: str) -> str:
        """The user's spelling of this field's option ``suffix`` (``Schema`` -> ``valueSchema``)."""
        return f"{self.name}{suffix}"


@dataclass(frozen=True)
class FormatOptions:
    """The typed-read options of a query (module docstring)."""

    key: FieldFormat = FieldFormat(True, corrupt_column="_corrupt_key")
    value: FieldFormat = FieldFormat(False)
    strategy: str = TOPIC_NAME
    mode: str = PERMISSIVE
    recursive_depth: int = -1
    # the registry client's configuration (schema.registry.* without the prefix); secrets
    registry: Mapping[str, str] = field(default_factory=dict, repr=False)

    @property
    def typed(self) -> bool:
        """Whether the key or the value is read as anything but binary."""
        return self.key.typed or self.value.typed

    @property
    def fields(self) -> tuple[FieldFormat, ...]:
        """The typed fields, key first."""
        return tuple(f for f in (self.key, self.value) if f.typed)

    @property
    def needs_schemas(self) -> bool:
        return any(f.registry_format for f in self.fields)

    @property
    def needs_headers(self) -> bool:
        """Whether ids may be in record headers (Confluent framing of a registry format)."""
        return any(f.registry_format and f.framing == CONFLUENT for f in self.fields)

    def extra_columns(self) -> list[str]:
        """The columns a typed read adds after Spark's Kafka ones, in order."""
        out = [f.id_column for f in self.fields if f.registry_format]
        if self.mode == PERMISSIVE:
            out += [f.corrupt_column for f in self.fields]
        return out


class FormatOptionError(ValueError):
    """An invalid typed-read option (``spark_kafkalog.options`` raises it again as its
    ``KafkaLogOptionError``)."""


def _fail(message: str) -> FormatOptionError:
    return FormatOptionError(message)


def _choice(opts: Mapping[str, str], key: str, name: str, choices: tuple[str, ...], default: str) -> str:
    if key not in opts:
        return default
    value = opts[key].strip().lower()
    if value not in choices:
        raise _fail(f"{name}: '{opts[key]}' is not valid; use {', '.join(choices)}")
    return value


def _schema_spec(opts: Mapping[str, str], key: str, name: str) -> SchemaSpec:
    if key not in opts:
        return SchemaSpec()
    text = opts[key]
    stripped = text.strip()
    if not stripped:
        raise _fail(f"{name} is empty: use latest, version:N, id:N or the schema's text")
    lowered = stripped.lower()
    if lowered == "latest":
        return SchemaSpec("latest")
    m = re.fullmatch(r"(version|id)\s*:\s*(\S*)", lowered)
    if m:
        number = m.group(2)
        if not number.isdigit() or int(number) > 2**31 - 1 or (m.group(1) == "version" and int(number) < 1):
            raise _fail(f"{name}: '{text}' is not valid; use {m.group(1)}:N with N "
                        f"{'>= 1' if m.group(1) == 'version' else '>= 0'}")
        return SchemaSpec(m.group(1), int(number))
    return SchemaSpec("inline", text=stripped)


def _subjects(opts: Mapping[str, str], key: str, name: str) -> tuple[str, ...]:
    if key not in opts:
        return ()
    subjects = tuple(dict.fromkeys(s.strip() for s in opts[key].split(",") if s.strip()))
    if not subjects:
        raise _fail(f"{name} is empty: give the subject of the reader schema (several: comma-separated)")
    return subjects


def _field(opts: Mapping[str, str], is_key: bool, corrupt: str) -> FieldFormat:
    side = "key" if is_key else "value"
    fmt = _choice(opts, f"{side}format", f"{side}Format", FORMATS, BINARY)
    framing = _choice(opts, f"{side}framing", f"{side}Framing", (CONFLUENT, NONE), CONFLUENT)
    message = opts.get(f"{side}messagename", "").strip() or None
    spec = FieldFormat(is_key, fmt, framing, _subjects(opts, f"{side}subject", f"{side}Subject"),
                       _schema_spec(opts, f"{side}schema", f"{side}Schema"), message, corrupt)
    if fmt not in REGISTRY_TYPES:
        for option in ("framing", "subject", "schema", "messagename"):
            if f"{side}{option}" in opts:
                words = {"framing": "Framing", "subject": "Subject", "schema": "Schema", "messagename": "MessageName"}
                raise _fail(f"Option '{side}{words[option]}' needs {side}Format avro, protobuf or json "
                            f"({side}Format is {fmt})")
    if message is not None and fmt != PROTOBUF:
        raise _fail(f"Option '{side}MessageName' is for {side}Format protobuf")
    if framing == NONE and len(spec.subjects) > 1:
        raise _fail(f"Option '{side}Subject' names several subjects, but {side}Framing=none records carry no "
                    "schema id to tell their record types apart: give one subject or an inline schema")
    if spec.schema.kind in ("version", "id", "inline") and len(spec.subjects) > 1:
        raise _fail(f"Option '{side}Schema' ({spec.schema.describe()}) names one reader schema, but "
                    f"'{side}Subject' names several subjects: leave {side}Schema at latest")
    return spec


def parse_format_options(opts: Mapping[str, str], *, log_dir: bool, write: bool = False) -> FormatOptions:
    """Validate the typed-read options among ``opts`` (keys lower-cased, as
    ``spark_kafkalog.options.parse_options`` passes them). ``log_dir``: the read has a log
    directory of its own (direct mode), whose ``_schemas`` partition can stand in for a
    registry. ``write``: the options of a typed write, whose RecordNameStrategy subject
    defaults to the writer schema's record full name."""
    value_corrupt = opts.get("columnnameofcorruptrecord", "_corrupt_value").strip()
    if not value_corrupt:
        raise _fail("columnNameOfCorruptRecord is empty: give the name of the corrupt-record column")
    key = _field(opts, True, "_corrupt_key")
    value = _field(opts, False, value_corrupt)
    strategy_text = opts.get("subject.name.strategy", TOPIC_NAME).strip()
    short = strategy_text[len(_JAVA_STRATEGY_PACKAGE):] if strategy_text.startswith(_JAVA_STRATEGY_PACKAGE) \
        else strategy_text
    strategy = _STRATEGIES.get(short.lower()) or _STRATEGIES.get(short.lower() + "strategy")
    if strategy is None:
        raise _fail(f"subject.name.strategy: '{strategy_text}' is not valid; use {TOPIC_NAME}, {RECORD_NAME} or "
                    f"{TOPIC_RECORD_NAME}")
    mode = opts.get("mode", PERMISSIVE).strip().upper()
    if mode not in (PERMISSIVE, FAILFAST, DROPMALFORMED):
        raise _fail(f"mode: '{opts['mode']}' is not valid; use {PERMISSIVE}, {FAILFAST} or {DROPMALFORMED}")
    depth_text = opts.get("recursive.fields.max.depth", "-1").strip()
    try:
        depth = int(depth_text)
    except ValueError:
        depth = -2
    if depth not in (-1, 0) and not 1 <= depth <= MAX_RECURSIVE_DEPTH:
        raise _fail(f"recursive.fields.max.depth: '{depth_text}' is not valid; use -1 (recursion refused) or "
                    f"1..{MAX_RECURSIVE_DEPTH}")
    registry = {k[len(REGISTRY_PREFIX):]: v for k, v in opts.items() if k.startswith(REGISTRY_PREFIX)}
    options = FormatOptions(key, value, strategy, mode, -1 if depth == 0 else depth, registry)
    if not options.typed:
        for name in ("mode", "columnnameofcorruptrecord", "subject.name.strategy", "recursive.fields.max.depth"):
            if name in opts:
                raise _fail(f"Option '{_spelling(name)}' is for typed reads: set valueFormat or keyFormat")
        if registry:
            raise _fail("Options 'schema.registry.*' are for typed reads: set valueFormat or keyFormat to avro, "
                        "protobuf or json")
        return options
    _check_columns(options)
    if registry:
        from broker.client.registry_http import RegistrySettings

        try:
            RegistrySettings.from_config(registry)
        except ValueError as exc:
            raise _fail(f"schema.registry.*: {exc} (each schema.registry.X is the registry client's X)") from None
    for spec in options.fields:
        if not spec.registry_format:
            continue
        needs_registry = spec.framing == CONFLUENT or spec.schema.kind != "inline"
        if needs_registry and not registry and not log_dir:
            raise _fail(f"{spec.option('Format')}={spec.format} needs the Schema Registry: set schema.registry.url "
                        f"(or {spec.option('Framing')}=none with an inline {spec.option('Schema')})")
        if not write and not spec.subjects and strategy == RECORD_NAME and (spec.framing == CONFLUENT or
                                                              spec.schema.kind != "inline"):
            raise _fail(f"subject.name.strategy={RECORD_NAME} names subjects after records, not topics: set "
                        f"{spec.option('Subject')} to the record full name(s) (comma-separated)")
    return options


def _spelling(lowered: str) -> str:
    return next((n for n in FORMAT_OPTIONS if n.lower() == lowered), lowered)


def _check_columns(options: FormatOptions) -> None:
    names = [f.corrupt_column for f in options.fields] if options.mode == PERMISSIVE else []
    taken = set(KAFKA_COLUMNS) | {f.id_column for f in options.fields if f.registry_format}
    for name in names:
        if name in taken:
            raise _fail(f"columnNameOfCorruptRecord: '{name}' is already a column of the read; choose another name")
        taken.add(name)
