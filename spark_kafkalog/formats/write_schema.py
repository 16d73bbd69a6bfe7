"""Typed writes on the driver: the writer schema of the ``value`` / ``key`` column of a
``df.write`` / ``df.writeStream`` with ``valueFormat`` / ``keyFormat`` avro, protobuf or json, and its
registration in the Schema Registry.

Owns:

* ``TypedWriteOptions`` / ``parse_typed_write_options``: the typed-write options. The
  options shared with typed reads (``valueFormat``, ``keyFormat``, ``valueFraming``,
  ``valueSubject``, ``subject.name.strategy``, ``valueSchema``, ``schema.registry.*``, ...)
  are parsed by ``formats.options.parse_format_options``; the write-only ones are
  ``auto.register.schemas`` (default true), ``use.latest.version`` (default false),
  ``recordName`` (default ``topLevelRecord``) and ``recordNamespace`` (default empty),
  with the meaning of Confluent's serializers and Spark's ``to_avro``.
* ``to_avro_schema``: the Avro schema of a Spark type, as Spark's ``to_avro``
  (``SchemaConverters.toAvroType``): a struct is a record named ``recordName`` in
  ``recordNamespace`` (nested records are named after their field, in the namespace
  ``<namespace>.<recordName>``), a nullable type is the union ``[T, "null"]`` (Spark's
  order, no default); the top-level type is not made nullable: a null row is a tombstone.
  ``to_json_schema``: a JSON Schema (draft-07) of a Spark type, for ``valueFormat=json``.
* ``FieldEncoding`` (one column's writer schema, its id, framing and, for the executors,
  everything ``parse_schema`` needs) and ``TypedWrite`` (the key's and the value's),
  made by ``resolve_typed_write`` when Spark asks for the writer, before any task starts.

Which writer schema (per column; ``<subject>`` from ``valueSubject`` / ``keySubject`` or
the strategy: ``<topic>-value``, the record's full name, ``<topic>-<full name>``):

1. ``valueSchema`` ``version:N`` / ``id:N``: that schema, registered nothing.
2. ``valueSchema`` = a schema's text: registered under the subject when
   ``auto.register.schemas`` (a 409 fails the write), else looked up (it must be there).
3. ``use.latest.version=true``: the subject's latest version.
4. Otherwise (Avro, JSON) the schema derived from the column's Spark type: when the
   subject's latest version maps to the column's Spark type (``from_avro``'s mapping,
   nullability aside), that version, registering nothing; else registered when
   ``auto.register.schemas`` (the registry checks the subject's compatibility level and
   answers 409 with its reasons, which fail the write before any record is sent), else
   looked up. Protobuf never derives a schema (field numbers are not invented): it needs
   3 or 1/2.
The Avro encoder's plan is compiled on the driver for the column's Arrow type, so a
column the writer schema cannot take fails here, not in the tasks.

Invariants: every error is a ``KafkaLogWriteError`` naming the option or the column (the
registry's message included as it is); a ``TypedWrite`` holds no connection and pickles
small; nothing here sends a record.

Thread-safety: pure functions but for the registry calls of ``resolve_typed_write``, made
on the calling (driver) thread.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .options import (
    AVRO,
    CONFLUENT,
    JSON,
    PROTOBUF,
    RECORD_NAME,
    REGISTRY_PREFIX,
    TOPIC_RECORD_NAME,
    FieldFormat,
    FormatOptionError,
    FormatOptions,
    parse_format_options,
)
from .registry import CatalogEntry

if TYPE_CHECKING:
    from .sources import SchemaSource

__all__ = ["WRITE_FORMAT_OPTIONS", "TypedWriteError", "TypedWriteOptions", "parse_typed_write_options",
           "to_avro_schema", "to_json_schema", "FieldEncoding", "TypedWrite", "resolve_typed_write"]

# The typed-write options (user spellings); schema.registry.* besides.
SHARED_OPTIONS = ("valueFormat", "keyFormat", "valueFraming", "keyFraming", "valueSubject", "keySubject",
                  "subject.name.strategy", "valueSchema", "keySchema", "valueMessageName", "keyMessageName")
WRITE_ONLY_OPTIONS = ("auto.register.schemas", "use.latest.version", "recordName", "recordNamespace")
WRITE_FORMAT_OPTIONS = SHARED_OPTIONS + WRITE_ONLY_OPTIONS
DEFAULT_RECORD_NAME = "topLevelRecord"


class TypedWriteError(ValueError):
    """A typed-write option or writer schema that cannot be used; the sink raises it as its
    ``KafkaLogWriteError`` (``writers``), so this module never imports the writers."""


def _error(message: str) -> Exception:
    return TypedWriteError(message)


@dataclass(frozen=True)
class TypedWriteOptions:
    """The typed-write options of one write (module docstring)."""

    formats: FormatOptions
    auto_register: bool = True
    use_latest: bool = False
    record_name: str = DEFAULT_RECORD_NAME
    record_namespace: str = ""

    @property
    def fields(self) -> tuple[FieldFormat, ...]:
        """The columns written in a registry format (key first)."""
        return tuple(f for f in self.formats.fields if f.registry_format)

    def typed(self, is_key: bool) -> bool:
        return any(f.is_key == is_key for f in self.fields)


def _bool(opts: Mapping[str, str], key: str, name: str, default: bool) -> bool:
    if key not in opts:
        return default
    text = str(opts[key]).strip().lower()
    if text not in ("true", "false"):
        raise _error(f"{name}: '{opts[key]}' is not valid; use true or false")
    return text == "true"


def parse_typed_write_options(options: Mapping[str, str]) -> TypedWriteOptions | None:
    """The typed-write options among ``options`` (any key case); None when the key and the
    value are written as they are (binary or string). Never touches the network."""
    lowered = {str(k).lower(): str(v) for k, v in options.items()}
    names = {n.lower(): n for n in WRITE_FORMAT_OPTIONS}
    ours = {k: v for k, v in lowered.items() if k in names or k.startswith(REGISTRY_PREFIX)}
    if not ours:
        return None
    try:
        formats = parse_format_options({k: v for k, v in ours.items() if k not in
                                        {n.lower() for n in WRITE_ONLY_OPTIONS}}, log_dir=False, write=True)
    except FormatOptionError as exc:
        raise _error(str(exc).replace("typed reads", "typed writes")) from None
    if not any(f.registry_format for f in formats.fields):
        given = [names.get(k, k) for k in ours if k not in ("valueformat", "keyformat")]
        if given:
            raise _error(f"Option(s) {', '.join(sorted(given))} are for typed writes: set valueFormat or keyFormat "
                         "to avro, protobuf or json")
        return None
    for spec in formats.fields:
        if len(spec.subjects) > 1:
            raise _error(f"Option '{spec.option('Subject')}' names several subjects; a write registers or uses "
                         "one: give one")
    record_name = ours.get("recordname", DEFAULT_RECORD_NAME).strip()
    if not record_name:
        raise _error("recordName is empty: give the Avro record's name")
    return TypedWriteOptions(formats, _bool(ours, "auto.register.schemas", "auto.register.schemas", True),
                             _bool(ours, "use.latest.version", "use.latest.version", False),
                             record_name, ours.get("recordnamespace", "").strip())


# -- Spark types to schemas ----------------------------------------------------------------------

def _min_bytes_for_precision(precision: int) -> int:
    size = 1
    while 2 ** (8 * size - 1) < 10 ** precision:
        size += 1
    return size


def to_avro_schema(data_type: Any, nullable: bool = False, record_name: str = DEFAULT_RECORD_NAME,
                   namespace: str = "") -> Any:
    """The Avro schema (JSON value) of a Spark ``data_type``, as Spark's ``to_avro``
    (``SchemaConverters.toAvroType``); ``KafkaLogWriteError`` for a type Avro cannot hold."""
    from pyspark.sql import types as T

    dt = data_type
    schema: Any
    if isinstance(dt, T.BooleanType):
        schema = "boolean"
    elif isinstance(dt, (T.ByteType, T.ShortType, T.IntegerType)):
        schema = "int"
    elif isinstance(dt, T.LongType):
        schema = "long"
    elif isinstance(dt, T.DateType):
        schema = {"type": "int", "logicalType": "date"}
    elif isinstance(dt, T.TimestampNTZType):
        schema = {"type": "long", "logicalType": "local-timestamp-micros"}
    elif isinstance(dt, T.TimestampType):
        schema = {"type": "long", "logicalType": "timestamp-micros"}
    elif isinstance(dt, T.FloatType):
        schema = "float"
    elif isinstance(dt, T.DoubleType):
        schema = "double"
    elif isinstance(dt, T.DecimalType):
        name = f"{namespace}.{record_name}.fixed" if namespace else f"{record_name}.fixed"
        schema = {"type": "fixed", "name": name, "size": _min_bytes_for_precision(dt.precision),
                  "logicalType": "decimal", "precision": dt.precision, "scale": dt.scale}
    elif isinstance(dt, T.StringType):
        schema = "string"
    elif isinstance(dt, T.BinaryType):
        schema = "bytes"
    elif isinstance(dt, T.NullType):
        return "null"
    elif isinstance(dt, T.ArrayType):
        schema = {"type": "array", "items": to_avro_schema(dt.elementType, dt.containsNull, record_name, namespace)}
    elif isinstance(dt, T.MapType):
        if not isinstance(dt.keyType, T.StringType):
            raise _error(f"Avro maps have string keys; {dt.simpleString()} cannot be written as Avro")
        schema = {"type": "map", "values": to_avro_schema(dt.valueType, dt.valueContainsNull, record_name,
                                                          namespace)}
    elif isinstance(dt, T.StructType):
        child_namespace = f"{namespace}.{record_name}" if namespace else record_name
        schema = {"type": "record", "name": record_name}
        if namespace:
            schema["namespace"] = namespace
        schema["fields"] = [{"name": f.name, "type": to_avro_schema(f.dataType, f.nullable, f.name, child_namespace)}
                            for f in dt.fields]
    else:
        raise _error(f"Spark type {dt.simpleString()} cannot be written as Avro")
    return [schema, "null"] if nullable else schema


def to_json_schema(data_type: Any, nullable: bool = False, title: str | None = None) -> Any:
    """A JSON Schema (draft-07) of a Spark ``data_type``: structs are objects with their
    fields as properties (the non-nullable ones required, no other property allowed),
    nullable types ``oneOf`` null and the type."""
    from pyspark.sql import types as T

    dt = data_type
    schema: dict[str, Any]
    if isinstance(dt, T.BooleanType):
        schema = {"type": "boolean"}
    elif isinstance(dt, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        schema = {"type": "integer"}
    elif isinstance(dt, (T.FloatType, T.DoubleType, T.DecimalType)):
        schema = {"type": "number"}
    elif isinstance(dt, T.StringType):
        schema = {"type": "string"}
    elif isinstance(dt, T.BinaryType):
        schema = {"type": "string", "contentEncoding": "base64"}
    elif isinstance(dt, T.DateType):
        schema = {"type": "string", "format": "date"}
    elif isinstance(dt, (T.TimestampType, T.TimestampNTZType)):
        schema = {"type": "string", "format": "date-time"}
    elif isinstance(dt, T.ArrayType):
        schema = {"type": "array", "items": to_json_schema(dt.elementType, dt.containsNull)}
    elif isinstance(dt, T.MapType):
        if not isinstance(dt.keyType, T.StringType):
            raise _error(f"JSON objects have string keys; {dt.simpleString()} cannot be written as JSON")
        schema = {"type": "object", "additionalProperties": to_json_schema(dt.valueType, dt.valueContainsNull)}
    elif isinstance(dt, T.StructType):
        schema = {"type": "object", "properties": {f.name: to_json_schema(f.dataType, f.nullable)
                                                   for f in dt.fields},
                  "additionalProperties": False}
        required = [f.name for f in dt.fields if not f.nullable]
        if required:
            schema["required"] = required
    else:
        raise _error(f"Spark type {dt.simpleString()} cannot be written as JSON")
    if title is not None:
        schema = {"$schema": "http://json-schema.org/draft-07/schema#", "title": title, **schema}
    return {"oneOf": [{"type": "null"}, schema]} if nullable else schema


# -- the writer schemas ----------------------------------------------------------------------------

@dataclass(frozen=True)
class FieldEncoding:
    """How one column is encoded: ``entry`` (the writer schema, its id and what parsing
    needs), the ``framing`` (``confluent``: magic byte 0 and ``entry.id``; ``none``: the
    bare payload), the ``subject`` it was resolved under, Protobuf's ``message_indexes``,
    and whether this write registered it (``registered``)."""

    is_key: bool
    format: str
    entry: CatalogEntry
    framing: str = CONFLUENT
    subject: str | None = None
    message_indexes: tuple[int, ...] | None = None
    registered: bool = False

    @property
    def name(self) -> str:
        return "key" if self.is_key else "value"

    def prefix(self) -> bytes:
        """The bytes before every payload (Confluent's frame head; empty without framing)."""
        if self.framing != CONFLUENT:
            return b""
        from broker.schema.framing import SchemaId, _prefix

        assert self.entry.id is not None
        return _prefix(SchemaId(self.entry.id, message_indexes=self.message_indexes),
                       self.format == PROTOBUF, None)


@dataclass(frozen=True)
class TypedWrite:
    """The encodings of a write's typed columns (None: written as they are)."""

    key: FieldEncoding | None = None
    value: FieldEncoding | None = None
    # the registry settings are not needed by the tasks: not kept
    notes: tuple[str, ...] = field(default=(), repr=False)


def _topic_subject(spec: FieldFormat, strategy: str, topic: str | None, record_full_name: str | None) -> str:
    if spec.subjects:
        return spec.subjects[0]
    if strategy == RECORD_NAME:  # Confluent's: the record's full name
        if not record_full_name:
            raise _error(f"subject.name.strategy={RECORD_NAME} names the subject after the writer schema's record, "
                         f"which has no name here: set {spec.option('Subject')}")
        return record_full_name
    if topic is None:
        raise _error(f"{spec.option('Format')}={spec.format} names its subject after the topic: set the topic "
                     f"option (or {spec.option('Subject')})")
    if strategy == TOPIC_RECORD_NAME:
        if not record_full_name:
            raise _error(f"subject.name.strategy={TOPIC_RECORD_NAME} needs a named record: the writer schema "
                         "has no name")
        return f"{topic}-{record_full_name}"
    return f"{topic}-{spec.name}"


def _spark_type_of(entry: CatalogEntry) -> str | None:
    """The Spark type (simpleString) ``from_avro`` gives ``entry``'s schema; None when
    it has none."""
    try:
        from pyspark.sql.pandas.types import from_arrow_type

        from broker.schema.avro_arrow import arrow_type

        return str(from_arrow_type(arrow_type(entry.parsed())).simpleString())  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - a schema of no Spark type does not match
        return None


def _check_encodable(spec: FieldFormat, entry: CatalogEntry, data_type: Any, subject: str | None) -> None:
    """Compile the encoder's plan for the column's Arrow type (driver-side, no rows)."""
    if spec.format != AVRO:
        return
    from pyspark.sql.pandas.types import to_arrow_type

    from broker.schema.avro_encode import AvroEncodeError, plan

    try:
        plan(entry.parsed(), to_arrow_type(data_type, timezone="UTC"))  # type: ignore[arg-type]
    except AvroEncodeError as exc:
        where = f"subject {subject!r}" if subject else "the given schema"
        raise _error(f"column {spec.name} ({data_type.simpleString()}) cannot be written with the writer schema "
                     f"of {where} (id {entry.id}): {exc}") from None


def _registry_error(spec: FieldFormat, subject: str, what: str, exc: Exception) -> Exception:
    return _error(f"{spec.option('Format')}={spec.format}: the Schema Registry refused to {what} under subject "
                  f"{subject!r}: {exc}")


def _register(client: Any, spec: FieldFormat, subject: str, text: str, register: bool) -> tuple[int, str | None]:
    from broker.client.registry import Schema, SchemaRegistryError

    schema = Schema(text, spec.schema_type)
    try:
        if register:
            found = client.register_schema_full_response(subject, schema)
        else:
            found = client.lookup_schema(subject, schema)
    except SchemaRegistryError as exc:
        if not register and exc.http_status == 404:
            raise _error(f"{spec.option('Format')}={spec.format}: the writer schema is not registered under subject "
                         f"{subject!r} and auto.register.schemas=false: register it, set auto.register.schemas=true "
                         f"or use.latest.version=true ({exc})") from None
        raise _registry_error(spec, subject, "register the writer schema" if register else "look the schema up",
                              exc) from None
    return int(found.id), found.guid


def _derived_text(spec: FieldFormat, data_type: Any, options: TypedWriteOptions) -> str:
    if spec.format == AVRO:
        return json.dumps(to_avro_schema(data_type, False, options.record_name, options.record_namespace))
    return json.dumps(to_json_schema(data_type, False, options.record_name))


def _resolve_field(source: SchemaSource, client: Any, spec: FieldFormat, data_type: Any,
                   options: TypedWriteOptions, topic: str | None) -> FieldEncoding:
    from .registry import entry_for
    from .sources import SchemaNotFoundError

    strategy = options.formats.strategy
    kind = spec.schema.kind
    full_name: str | None = None
    if spec.format == AVRO and kind == "latest" and not options.use_latest:
        full_name = (f"{options.record_namespace}.{options.record_name}" if options.record_namespace
                     else options.record_name)

    def record_name_of(text: str) -> str | None:
        try:
            parsed = CatalogEntry(None, None, spec.schema_type, text).parsed()
        except Exception as exc:  # noqa: BLE001 - named for the user
            raise _error(f"{spec.option('Schema')}: not a valid {spec.format} schema: {exc}") from None
        return getattr(parsed, "name", None)

    if kind in ("version", "id"):
        try:
            if kind == "id":
                record = source.by_id(spec.schema.number)
            else:
                subject = _topic_subject(spec, strategy, topic, None)
                record = source.version(subject, spec.schema.number)
        except SchemaNotFoundError as exc:
            raise _error(f"{spec.option('Schema')}={spec.schema.describe()}: {exc}") from None
        entry = entry_for(source, record)
        _check_encodable(spec, entry, data_type, None)
        return FieldEncoding(spec.is_key, spec.format, entry, spec.framing, None, _indexes(spec, entry))
    if kind == "inline":
        text = spec.schema.text
        name = record_name_of(text)
        if spec.framing != CONFLUENT:
            entry = CatalogEntry(None, None, spec.schema_type, text)
            _check_encodable(spec, entry, data_type, None)
            return FieldEncoding(spec.is_key, spec.format, entry, spec.framing, None, _indexes(spec, entry))
        subject = _topic_subject(spec, strategy, topic, name)
        schema_id, guid = _register(client, spec, subject, text, options.auto_register)
        entry = CatalogEntry(schema_id, guid, spec.schema_type, text)
        _check_encodable(spec, entry, data_type, subject)
        return FieldEncoding(spec.is_key, spec.format, entry, spec.framing, subject, _indexes(spec, entry),
                             registered=options.auto_register)
    if spec.format == PROTOBUF and not options.use_latest:
        raise _error(f"{spec.option('Format')}=protobuf writes with a registered or given schema (field numbers are "
                     f"not invented): set use.latest.version=true or {spec.option('Schema')}")
    subject = _topic_subject(spec, strategy, topic, full_name)
    try:
        latest = entry_for(source, source.version(subject, None))
    except SchemaNotFoundError:
        latest = None
    if options.use_latest:
        if latest is None:
            raise _error(f"use.latest.version=true: subject {subject!r} has no schema in the Schema Registry")
        _check_encodable(spec, latest, data_type, subject)
        return FieldEncoding(spec.is_key, spec.format, latest, spec.framing, subject, _indexes(spec, latest))
    text = _derived_text(spec, data_type, options)
    if latest is not None and latest.schema_type == spec.schema_type:
        if spec.format == AVRO and _spark_type_of(latest) == data_type.simpleString():
            _check_encodable(spec, latest, data_type, subject)
            return FieldEncoding(spec.is_key, spec.format, latest, spec.framing, subject)
        if spec.format == JSON and _same_json(latest.schema, text):
            return FieldEncoding(spec.is_key, spec.format, latest, spec.framing, subject)
    schema_id, guid = _register(client, spec, subject, text, options.auto_register)
    entry = CatalogEntry(schema_id, guid, spec.schema_type, text)
    _check_encodable(spec, entry, data_type, subject)
    return FieldEncoding(spec.is_key, spec.format, entry, spec.framing, subject, registered=options.auto_register)


def _same_json(a: str, b: str) -> bool:
    try:
        return bool(json.loads(a) == json.loads(b))
    except ValueError:
        return False


def _indexes(spec: FieldFormat, entry: CatalogEntry) -> tuple[int, ...] | None:
    if spec.format != PROTOBUF:
        return None
    parsed: Any = entry.parsed()
    name = spec.message_name or parsed.message_names()[0]
    try:
        return tuple(parsed.message_index(name))
    except KeyError:
        raise _error(f"{spec.option('MessageName')}: no message {name!r} in the writer schema "
                     f"(its messages: {', '.join(parsed.message_names())})") from None


def resolve_typed_write(options: TypedWriteOptions, schema: Any, topic: str | None) -> TypedWrite:
    """The writer schemas of the typed columns of ``schema`` (the DataFrame's StructType),
    registered as the module docstring says; raises ``KafkaLogWriteError`` (a 409 of the
    registry included) before any record is sent."""
    from broker.client.registry import SchemaRegistryClient, SchemaRegistryError
    from broker.client.registry_http import SchemaRegistryUnreachableError

    from .sources import RegistrySchemaSource

    columns = {f.name.lower(): f for f in schema.fields}
    out: dict[str, FieldEncoding] = {}
    needs_registry = any(f.framing == CONFLUENT or f.schema.kind != "inline" for f in options.fields)
    source: Any = RegistrySchemaSource(options.formats.registry) if needs_registry else None
    client = SchemaRegistryClient(dict(options.formats.registry)) if needs_registry else None
    try:
        for spec in options.fields:
            column = columns.get(spec.name)
            if column is None:
                if spec.is_key:
                    raise _error(f"keyFormat={spec.format} needs a 'key' column")
                continue  # sink_columns names the missing value column
            try:
                out[spec.name] = _resolve_field(source, client, spec, column.dataType, options, topic)
            except (SchemaRegistryError, SchemaRegistryUnreachableError) as exc:
                raise _error(f"{spec.option('Format')}={spec.format}: the writer schema could not be resolved: "
                             f"{exc}") from None
    finally:
        if source is not None:
            source.close()
        if client is not None:
            client.close()
    return TypedWrite(key=out.get("key"), value=out.get("value"))
