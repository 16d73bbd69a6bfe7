"""Typed reads on the driver: which reader schemas a read uses, and the catalog of schemas
shipped to the executors (plus the executors' fetch of an id they were not sent).

Owns:

* ``CatalogEntry`` (one schema: id, GUID, type, text, references and the texts they
  resolve to, dependencies first: what ``broker.schema.parse_schema`` needs; parsed once
  per process) and ``SchemaCatalog`` (entries by id and GUID);
* ``Member`` (one reader schema of a column: the subject, the record's full name, the
  entry, the Protobuf message) and ``TypedRead``, resolved once per query
  (``resolve_typed_read``, when the DataFrame is loaded): the reader schemas of the key
  and the value, the Spark schema of the rows, and ``partition_schemas(topics)``, called
  when each batch or micro-batch is planned: every version of the subjects involved,
  loaded afresh from the read's ``sources.SchemaSource``, as the ``PartitionSchemas`` each
  input partition carries;
* ``fetch_entry``: on an executor, the schema of an id (or GUID) its partition's catalog
  lacks, fetched once per process and cached.

Subjects: the options' ``valueSubject`` / ``keySubject`` when given; else by
``subject.name.strategy``: ``<topic>-value`` (TopicNameStrategy), or the subjects
``<topic>-<record full name>`` whose latest schema is that record (TopicRecordNameStrategy).
Reader schema: the subject's latest version (``valueSchema=latest``), a version, an id, or
an inline text. A column read from several topics has one type: each topic's reader
schema must map to the same Spark type (an error names the topics otherwise; set
``valueSubject`` to read them with one schema). A topic seen first while a streaming query
runs gets its reader schema then, under the same rule. Several subjects make the column a
struct with one member per record full name (``Member.record_name``).

Invariants: every ``KafkaLogOptionError`` raised here names the option to change; the
registry client's errors come through as they are. A ``TypedRead`` and a
``PartitionSchemas`` hold no connection and pickle small.

Thread-safety: ``TypedRead`` belongs to the planning thread; the process caches
(``CatalogEntry.parsed``, ``fetch_entry``) are under locks.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from broker.schema.base import SchemaReference

from .options import (
    AVRO,
    JSON,
    PROTOBUF,
    RECORD_NAME,
    STRING,
    TOPIC_NAME,
    TOPIC_RECORD_NAME,
    FieldFormat,
    FormatOptions,
)
from .sources import (
    LogSchemaSource,
    SchemaNotFoundError,
    SchemaRecord,
    SchemaSource,
    SourceConfig,
    open_source,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from broker.schema.base import ParsedSchema

    from ..options import ReadOptions

__all__ = ["CatalogEntry", "SchemaCatalog", "Member", "PartitionSchemas", "TypedRead", "resolve_typed_read",
           "fetch_entry", "entry_for", "source_config"]

NEGATIVE_CACHE_SECONDS = 60.0  # an id no source knows is asked again after this long


# -- the catalog -----------------------------------------------------------------------------

_PARSED: dict[tuple, ParsedSchema] = {}
_PARSED_LOCK = threading.Lock()
_PARSED_CAPACITY = 1024


@dataclass(frozen=True)
class CatalogEntry:
    """One schema with everything ``parse_schema`` needs (``resolved``: the texts of its
    references, transitively, dependencies first)."""

    id: int | None
    guid: str | None
    schema_type: str
    schema: str = field(repr=False)
    references: tuple[SchemaReference, ...] = ()
    resolved: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    def parsed(self) -> ParsedSchema:
        """The parsed schema, cached per process (Protobuf runs protoc: not per batch)."""
        from broker.schema import parse_schema

        key = (self.schema_type, self.schema, self.references, self.resolved)
        found = _PARSED.get(key)
        if found is None:
            found = parse_schema(self.schema_type, self.schema, self.references, dict(self.resolved))
            with _PARSED_LOCK:
                if len(_PARSED) >= _PARSED_CAPACITY:
                    _PARSED.pop(next(iter(_PARSED)))
                _PARSED[key] = found
        return found


@dataclass
class SchemaCatalog:
    """Schemas by id (and GUID -> id): what the executors decode with."""

    entries: dict[int, CatalogEntry] = field(default_factory=dict)
    guids: dict[str, int] = field(default_factory=dict)

    def add(self, entry: CatalogEntry) -> None:
        if entry.id is not None:
            self.entries[entry.id] = entry
            if entry.guid:
                self.guids[str(entry.guid)] = entry.id

    def get(self, schema_id: int) -> CatalogEntry | None:
        return self.entries.get(schema_id)

    def by_guid(self, guid: str) -> CatalogEntry | None:
        schema_id = self.guids.get(guid)
        return None if schema_id is None else self.entries.get(schema_id)


def entry_for(source: SchemaSource, record: SchemaRecord) -> CatalogEntry:
    """``record`` with its references resolved through ``source``."""
    resolved: dict[str, str] = {}
    _resolve(source, record.references, resolved, set())
    return CatalogEntry(record.id, record.guid, record.schema_type.upper(), record.schema, record.references,
                        tuple(resolved.items()))


def _resolve(source: SchemaSource, references: Iterable[SchemaReference], out: dict[str, str],
             visiting: set[tuple[str, int]]) -> None:
    for ref in references:
        if ref.name in out or (ref.subject, ref.version) in visiting:
            continue
        visiting.add((ref.subject, ref.version))
        target = source.version(ref.subject, None if ref.version in (-1, 0) else ref.version)
        _resolve(source, target.references, out, visiting)  # dependencies first
        out[ref.name] = target.schema


# -- reader schemas --------------------------------------------------------------------------


@dataclass(frozen=True)
class Member:
    """One reader schema of a typed column: ``record_name`` is the record's full name
    (a union member's name), ``subject`` where it came from (None: inline), ``message``
    the Protobuf message read."""

    record_name: str | None
    subject: str | None
    reader: CatalogEntry
    message: str | None = None


@dataclass
class PartitionSchemas:
    """What an input partition carries: the catalog (every version of the subjects the
    read uses, loaded when the batch or micro-batch was planned) and the reader schemas
    of its topic's key and value."""

    catalog: SchemaCatalog
    members: dict[str, tuple[Member, ...]]  # "key" / "value" -> members


@dataclass
class TypedRead:
    """The typed read of a query, resolved when the DataFrame is loaded (module docstring)."""

    formats: FormatOptions
    source: SourceConfig | None
    members: dict[str, dict[str, tuple[Member, ...]]]  # field -> topic ("*": every topic) -> members
    arrow_types: dict[str, pa.DataType]  # field -> the column's Arrow type, as pyspark expects it
    member_types: dict[str, tuple[pa.DataType, ...]]  # field -> each member's own type (decoders)
    spark_types: dict[str, Any] = field(default_factory=dict)  # field -> Spark DataType

    def spark_schema(self, include_headers: bool) -> Any:
        """The rows' Spark schema: Spark's Kafka columns with the typed key / value, then
        the schema-id and corrupt-record columns."""
        from pyspark.sql.types import BinaryType, IntegerType, StructField, StructType

        from ..schema import kafka_schema

        fields = []
        for f in kafka_schema(include_headers).fields:
            typed = self.spark_types.get(f.name)
            fields.append(StructField(f.name, typed, True) if typed is not None else f)
        for spec in self.formats.fields:
            if spec.registry_format:
                fields.append(StructField(spec.id_column, IntegerType(), True))
        if self.formats.mode == "PERMISSIVE":
            for spec in self.formats.fields:
                fields.append(StructField(spec.corrupt_column, BinaryType(), True))
        return StructType(fields)

    def partition_schemas(self, topics: Iterable[str]) -> dict[str, PartitionSchemas]:
        """For each topic: its reader schemas and a catalog of every version of the
        subjects, loaded now (called when a batch or micro-batch is planned)."""
        topics = sorted(set(topics))
        if not topics:
            return {}
        source = None if self.source is None else open_source(self.source)
        try:
            catalog = SchemaCatalog()
            out: dict[str, PartitionSchemas] = {}
            loaded: set[str] = set()
            for topic in topics:
                members: dict[str, tuple[Member, ...]] = {}
                for spec in self.formats.fields:
                    members[spec.name] = self._members_of(spec, topic, source)
                    for member in members[spec.name]:
                        catalog.add(member.reader)
                        if member.subject is not None and member.subject not in loaded and source is not None \
                                and spec.framing == "confluent":
                            loaded.add(member.subject)
                            _load_subject(source, member.subject, catalog)
                out[topic] = PartitionSchemas(catalog, members)
            return out
        finally:
            if source is not None:
                source.close()

    def _members_of(self, spec: FieldFormat, topic: str, source: SchemaSource | None) -> tuple[Member, ...]:
        by_topic = self.members[spec.name]
        found = by_topic.get("*") or by_topic.get(topic)
        if found is not None:
            return found
        # a topic first seen now (a streaming query's new topic): resolved now, same type required
        members = _resolve_members(source, spec, self.formats.strategy, topic)
        types = tuple(_member_type(m, spec, self.formats.recursive_depth) for m in members)
        if types != self.member_types[spec.name]:
            from ..options import KafkaLogOptionError

            raise KafkaLogOptionError(
                f"The {spec.name} schema of topic {topic} ({', '.join(str(m.subject) for m in members)}) gives "
                f"another Spark type than the topics read before; set {spec.option('Subject')} to read every "
                "topic with one reader schema")
        by_topic[topic] = members
        return members


def _load_subject(source: SchemaSource, subject: str, catalog: SchemaCatalog) -> None:
    """Every live version of ``subject`` into ``catalog`` (what its records were written with)."""
    try:
        versions = source.versions(subject)
    except SchemaNotFoundError:
        return
    for version in versions:
        try:
            record = source.version(subject, version)
        except SchemaNotFoundError:  # deleted meanwhile
            continue
        if record.id is not None and record.id not in catalog.entries:
            catalog.add(entry_for(source, record))


def _fail(message: str) -> Exception:
    from ..options import KafkaLogOptionError

    return KafkaLogOptionError(message)


def _record_name(entry: CatalogEntry, message: str | None) -> str | None:
    parsed = entry.parsed()
    if entry.schema_type == "AVRO":
        return getattr(parsed, "name", None)
    if entry.schema_type == "PROTOBUF":
        return message
    from broker.schema.json_arrow import record_name

    return record_name(parsed)  # type: ignore[arg-type]


def _protobuf_message(entry: CatalogEntry, spec: FieldFormat, subject: str | None, topic: str | None,
                      strategy: str) -> str:
    parsed: Any = entry.parsed()
    names = parsed.message_names()
    if spec.message_name is not None:
        if spec.message_name not in names:
            raise _fail(f"{spec.option('MessageName')}: '{spec.message_name}' is not a message of the reader "
                        f"schema ({', '.join(names) or 'none'})")
        return spec.message_name
    if subject is not None and strategy != TOPIC_NAME:
        candidate = subject[len(topic) + 1:] if strategy == TOPIC_RECORD_NAME and topic and \
            subject.startswith(topic + "-") else subject
        if candidate in names:
            return candidate
    if not names:
        raise _fail(f"The Protobuf reader schema{f' of subject {subject}' if subject else ''} declares no message")
    return str(parsed.message_descriptor([0]).full_name)


def _reader_record(source: SchemaSource | None, spec: FieldFormat, subject: str | None) -> SchemaRecord:
    if spec.schema.kind == "inline":
        return SchemaRecord(None, None, spec.schema_type, spec.schema.text)
    assert source is not None
    try:
        if spec.schema.kind == "id":
            return source.by_id(spec.schema.number)
        assert subject is not None
        return source.version(subject, spec.schema.number if spec.schema.kind == "version" else None)
    except SchemaNotFoundError as exc:
        raise _fail(f"{spec.option('Schema')}={spec.schema.describe()}: {exc}; register the schema, or set "
                    f"{spec.option('Subject')} / {spec.option('Schema')}") from None


def _subjects(source: SchemaSource | None, spec: FieldFormat, strategy: str, topic: str | None) -> tuple[str, ...]:
    if spec.subjects:
        return spec.subjects
    if spec.framing == "none" and spec.schema.kind == "inline":
        return ()
    if strategy == TOPIC_NAME:
        assert topic is not None
        return (f"{topic}-{spec.name}",)
    if strategy == RECORD_NAME:
        raise _fail(f"subject.name.strategy={RECORD_NAME}: set {spec.option('Subject')}")
    assert source is not None and topic is not None
    prefix = topic + "-"
    found = []
    for subject in source.subjects():
        if not subject.startswith(prefix) or subject[len(prefix):] in ("key", "value"):
            continue
        try:
            record = source.version(subject, None)
        except SchemaNotFoundError:
            continue
        if record.schema_type.upper() != spec.schema_type:
            continue
        entry = entry_for(source, record)
        name = subject[len(prefix):]
        if spec.format == PROTOBUF:
            names: Sequence[str] = entry.parsed().message_names()  # type: ignore[attr-defined]
        else:
            names = [n for n in (_record_name(entry, None),) if n]
        if name in names:
            found.append(subject)
    if not found:
        raise _fail(f"subject.name.strategy={TOPIC_RECORD_NAME}: no subject {prefix}<record name> of a "
                    f"{spec.schema_type} schema in {source.describe()}; set {spec.option('Subject')}")
    return tuple(found)


def _resolve_members(source: SchemaSource | None, spec: FieldFormat, strategy: str,
                     topic: str | None) -> tuple[Member, ...]:
    if spec.format == STRING:
        return ()
    subjects = _subjects(source, spec, strategy, topic)
    members = []
    for subject in subjects or (None,):
        record = _reader_record(source, spec, subject)
        if record.schema_type.upper() != spec.schema_type:
            raise _fail(f"{spec.option('Format')}={spec.format}, but the reader schema"
                        f"{f' of subject {subject!r}' if subject else ''} is {record.schema_type}")
        entry = entry_for(source, record) if source is not None else CatalogEntry(
            None, None, record.schema_type, record.schema)
        try:
            entry.parsed()
        except Exception as exc:  # InvalidSchemaError, and anything a broken text provokes
            raise _fail(f"{spec.option('Schema')}: the reader schema{f' of subject {subject!r}' if subject else ''} "
                        f"is not a valid {spec.schema_type} schema: {exc}") from None
        message = _protobuf_message(entry, spec, subject, topic, strategy) if spec.format == PROTOBUF else None
        members.append(Member(_record_name(entry, message), subject, entry, message))
    if len(members) > 1:
        names = [m.record_name for m in members]
        if None in names or len(set(names)) != len(names):
            raise _fail(f"{spec.option('Subject')}: the subjects {', '.join(subjects)} must hold records of "
                        f"distinct full names to be read side by side (got {names})")
    return tuple(members)


def _member_type(member: Member, spec: FieldFormat, depth: int) -> pa.DataType:
    from broker.schema.base import InvalidSchemaError

    parsed: Any = member.reader.parsed()
    try:
        if spec.format == AVRO:
            from .avro import arrow_type

            return arrow_type(parsed, recursive_depth=depth)
        if spec.format == PROTOBUF:
            from broker.schema.protobuf_arrow import arrow_type as protobuf_type

            return protobuf_type(parsed.pool().FindMessageTypeByName(member.message), recursive_depth=depth)
        if spec.format == JSON:
            from broker.schema.json_arrow import arrow_type as json_type

            return json_type(parsed, recursive_depth=depth)
    except (InvalidSchemaError, ValueError) as exc:  # ValueError: avro_arrow's AvroArrowError
        raise _fail(f"{spec.option('Schema')}: the reader schema has no Spark type: {exc}") from None
    raise AssertionError(spec.format)


def _column_type(spec: FieldFormat, members: Sequence[Member], types: Sequence[pa.DataType]) -> pa.DataType:
    import pyarrow as pa

    if spec.format == STRING:
        return pa.string()
    if len(members) == 1:
        return types[0]
    return pa.struct([pa.field(str(m.record_name), t) for m, t in zip(members, types, strict=True)])


def _spark_arrow(arrow: pa.DataType) -> tuple[Any, pa.DataType]:
    """(Spark type, the Arrow type pyspark expects of it) for a decoder's Arrow type."""
    from pyspark.sql.pandas.types import from_arrow_type, to_arrow_schema
    from pyspark.sql.types import StructField, StructType

    spark = from_arrow_type(arrow)
    expected = to_arrow_schema(StructType([StructField("c", spark, True)]), timezone="UTC").field("c").type
    return spark, expected


def _topics_at_load(options: ReadOptions) -> list[str]:
    strategy = options.strategy
    if strategy.kind == "subscribe":
        return list(strategy.topics)
    if strategy.kind == "assign":
        return sorted({t for t, _ in strategy.partitions})
    import re

    from ..readers import open_offset_reader

    reader = open_offset_reader(options)
    try:
        pattern = re.compile(strategy.pattern)
        return sorted({t for t, _ in reader.topic_partitions() if pattern.fullmatch(t)})
    finally:
        close = getattr(reader, "close", None)
        if close is not None:
            close()


def source_config(options: ReadOptions) -> SourceConfig | None:
    if options.formats.registry:
        return SourceConfig(registry=dict(options.formats.registry))
    if options.mode == "direct":
        return SourceConfig(paths=tuple(options.paths), storage_options=dict(options.storage_options))
    return None


def resolve_typed_read(options: ReadOptions) -> TypedRead:
    """The reader schemas of ``options``' typed key and value, resolved now (module
    docstring)."""
    formats = options.formats
    config = source_config(options) if formats.needs_schemas else None
    needs_source = any(f.registry_format and (f.framing == "confluent" or f.schema.kind != "inline")
                       for f in formats.fields)
    source = open_source(config) if config is not None and needs_source else None
    try:
        members: dict[str, dict[str, tuple[Member, ...]]] = {}
        arrow_types: dict[str, pa.DataType] = {}
        member_types: dict[str, tuple[pa.DataType, ...]] = {}
        spark_types: dict[str, Any] = {}
        topics: list[str] | None = None
        for spec in formats.fields:
            per_topic = (spec.registry_format and not spec.subjects and formats.strategy != RECORD_NAME
                         and not (spec.framing == "none" and spec.schema.kind == "inline"))
            by_topic: dict[str, tuple[Member, ...]] = {}
            if per_topic:
                if topics is None:
                    topics = _topics_at_load(options)
                if not topics:
                    raise _fail(f"No topic matches subscribePattern {options.strategy.pattern!r} yet, so "
                                f"{spec.name}'s reader schema cannot be chosen: set {spec.option('Subject')}")
                seen: dict[tuple, list[str]] = {}
                for topic in topics:
                    by_topic[topic] = _resolve_members(source, spec, formats.strategy, topic)
                    types = tuple(_member_type(m, spec, formats.recursive_depth) for m in by_topic[topic])
                    seen.setdefault(types, []).append(topic)
                if len(seen) > 1:
                    groups = "; ".join(", ".join(ts) for ts in seen.values())
                    raise _fail(f"The topics' {spec.name} schemas give different Spark types ({groups}): read them "
                                f"separately or set {spec.option('Subject')} to read them with one reader schema")
                first = next(iter(by_topic.values()))
                types = next(iter(seen))
            else:
                first = _resolve_members(source, spec, formats.strategy, None)
                by_topic["*"] = first
                types = tuple(_member_type(m, spec, formats.recursive_depth) for m in first)
            members[spec.name] = by_topic
            member_types[spec.name] = types
            spark_types[spec.name], arrow_types[spec.name] = _spark_arrow(_column_type(spec, first, types))
        return TypedRead(formats, config, members, arrow_types, member_types, spark_types)
    finally:
        if source is not None:
            source.close()


# -- the executors' fetch of an id they were not sent -------------------------------------------

_SOURCES: dict[tuple, SchemaSource] = {}
_FETCHED: dict[tuple, tuple[CatalogEntry | None, float]] = {}
_FETCH_LOCK = threading.Lock()
_FETCH_CAPACITY = 10_000


def fetch_entry(config: SourceConfig | None, schema_id: int | None = None, guid: str | None = None
                ) -> CatalogEntry | None:
    """The schema of ``schema_id`` (or ``guid``) from the read's source, fetched once per
    process and cached (an unknown one for ``NEGATIVE_CACHE_SECONDS``); None when the
    source does not hold it."""
    if config is None:
        return None
    key = (config.key(), schema_id, guid)
    now = time.monotonic()
    with _FETCH_LOCK:
        cached = _FETCHED.get(key)
        if cached is not None and (cached[0] is not None or now - cached[1] < NEGATIVE_CACHE_SECONDS):
            return cached[0]
        source = _SOURCES.get(config.key())
        if source is None:
            source = _SOURCES[config.key()] = open_source(config)
        elif isinstance(source, LogSchemaSource):
            source.close()  # read _schemas afresh: the id may be new
        try:
            record = source.by_id(schema_id) if schema_id is not None else source.by_guid(str(guid))
            entry: CatalogEntry | None = entry_for(source, record)
        except SchemaNotFoundError:
            entry = None
        if len(_FETCHED) >= _FETCH_CAPACITY:
            _FETCHED.pop(next(iter(_FETCHED)))
        _FETCHED[key] = (entry, now)
        return entry
