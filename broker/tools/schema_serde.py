"""Schema Registry formats for ``kafkalog produce`` and ``kafkalog consume``: the serializers
and deserializers of Confluent's ``kafka-avro-console-producer`` /
``kafka-avro-console-consumer`` (and their Protobuf and JSON Schema variants), over
``broker.schema`` (parsing, framing) and ``broker.client.registry`` (the REST client).

Owns the ``--property`` keys of those tools (Confluent's names) and what they do:

- The registry client: ``schema.registry.url`` (default ``http://localhost:8081``, as
  ``kafkalog schemas``), ``basic.auth.user.info``, ``basic.auth.credentials.source``,
  ``ssl.ca.location``, ``ssl.certificate.location``, ``ssl.key.location``,
  ``ssl.key.password`` (PEM files), each also prefixed ``schema.registry.``, and any other
  client key prefixed ``schema.registry.`` (``schema.registry.request.timeout.ms`` ...).
  Java's ``[schema.registry.]ssl.truststore.location`` (with ``.type`` PEM or PKCS12 and
  ``.password``) is read with ``broker.ssl_stores`` into the client's CA file; a Java key
  store is refused (give the PEM certificate and key).
- Formats: ``value.format`` / ``key.format`` = ``avro``, ``protobuf``, ``json`` (JSON
  Schema) or ``string`` (the bytes as they are, the default of keys and, without a schema,
  of values). ``key.serializer`` / ``key.deserializer`` set to Kafka's
  ``StringSerializer`` / ``StringDeserializer`` class, as scripts written for Confluent's
  tools give them, mean ``key.format=string``; no other class is taken.
- ``ProducerSerdes`` (``kafkalog produce``): ``value.schema`` (the text), ``value.schema.file``
  (a file holding it) or ``value.schema.id`` (a registered schema), and the same for keys
  (``key.schema`` ...; keys need ``parse.key=true``); a schema without a format is Avro, a
  schema by id or ``use.latest.version`` has the registry's type (a different
  ``*.format`` is an error). ``auto.register`` (also ``auto.register.schemas``, default
  true) registers the schema under its subject, else it is looked up there;
  ``use.latest.version=true`` writes with the subject's latest version (and implies
  ``auto.register=false``); ``normalize.schemas``. The subject is
  ``value.subject.name.strategy`` / ``key.subject.name.strategy``: ``TopicNameStrategy``
  (``<topic>-value``, the default), ``RecordNameStrategy`` (the record's full name: the Avro
  named type, the Protobuf message, the JSON Schema's ``title``) or
  ``TopicRecordNameStrategy`` (``<topic>-<record>``), as Confluent's class names
  (``io.confluent.kafka.serializers.subject.RecordNameStrategy``) or short ones.
  ``value.schema.message`` / ``key.schema.message`` picks the message of a ``.proto`` with
  several (its full name, or its name within the package; default: the first). Every
  schema is parsed before the broker is contacted (``InvalidSchemaError`` is a one-line
  error), and resolved with the registry once, before the first record (``connect``):
  a schema the registry refuses (409, incompatible) stops the command before anything
  is sent. Each line is then one value: Avro's JSON encoding (a union's value as
  ``{"string": "x"}``, fastavro's JSON decoder), Protobuf's JSON mapping
  (``google.protobuf.json_format``), or a JSON document valid for the JSON Schema (sent
  compact). The bytes are framed as confluent-kafka's serializers frame them: magic 0, the
  id, for Protobuf the message indexes, the payload. A line that does not fit raises
  ``LineSchemaError`` (a ``records_format.LineError``: the producer names the line).
- ``SchemaFormatter`` (``kafkalog consume``): decodes each record's value (and its key
  with ``key.format``) before ``records_format.MessageFormatter`` lays the line out. The
  writer schema is found by the frame's id (magic 0), GUID (magic 1) or the
  ``__value_schema_id`` / ``__key_schema_id`` header (confluent-kafka's
  ``header_schema_id_serializer``), fetched once per id with its references, and gives the
  format (``value.format``, when given, must match). Output is compact JSON: Avro's JSON
  encoding (fastavro's), Protobuf's JSON mapping with default values (Confluent's
  ``includingDefaultValueFields``), the JSON document. ``print.schema.ids=true`` appends
  ``<schema.id.separator><id>`` (default TAB) to each decoded key and value, as
  Confluent's ``SchemaMessageFormatter``. A record that cannot be decoded (not framed, an
  id the registry does not know, a payload its schema cannot read) prints one line on
  stderr naming its topic, partition and offset and is skipped (``failures`` counts them;
  Confluent's tool stops instead); a registry that cannot be reached or refuses the
  client (401, 403) raises ``SchemaRegistryError`` out of ``format``: that ends the command.

Invariants: nothing is sent before every schema the command writes with has its id; a
framed key or value is what confluent-kafka's serializer writes for that id and datum;
each consumed record is either printed or told on stderr, and only a registry that
cannot be used at all stops the loop. Bad input raises only ``CliError`` (settings),
``LineSchemaError`` (a line) or ``RecordDecodeError`` (a record).

Thread-safety: a ``ProducerSerdes`` or ``SchemaFormatter`` is used by the command's main
thread only (its caches are not locked).
"""

from __future__ import annotations

import io
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker.client.registry import RegisteredSchema, Schema, SchemaRegistryClient
from broker.client.registry_http import CONFIG_KEYS, SchemaRegistryError
from broker.record.limits import INT32_MAX
from broker.schema import AVRO, JSON, PROTOBUF, ParsedSchema, SchemaError, framing, parse_schema
from broker.schema.base import SchemaReference

from .common import CliError
from .records_format import LineError, MessageFormatter, parse_bool, unescape

__all__ = ["CONSUMER_PROPERTIES", "DEFAULT_URL", "FORMATS", "LineSchemaError", "PRODUCER_PROPERTIES",
           "ProducerSerdes", "RecordDecodeError", "RecordSerializer", "SchemaFormatter", "load_registered",
           "registry_client", "split_properties", "subject_name"]

DEFAULT_URL = "http://localhost:8081"
PREFIX = "schema.registry."
FORMATS = ("avro", "protobuf", "json", "string")
_TYPES = {"avro": AVRO, "protobuf": PROTOBUF, "json": JSON}
_FORMAT_ALIASES = {"jsonschema": "json", "json_schema": "json", "json-schema": "json", "proto": "protobuf"}
# client keys Confluent's console tools also take without the schema.registry. prefix
_UNPREFIXED = ("basic.auth.user.info", "basic.auth.credentials.source", "ssl.ca.location",
               "ssl.certificate.location", "ssl.key.location", "ssl.key.password")
_JAVA_TRUST = ("ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.password")
_JAVA_KEYS = ("ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.password")
_CLIENT_KEYS = ("schema.registry.url", *_UNPREFIXED, *_JAVA_TRUST, *_JAVA_KEYS)
_SIDE_KEYS = ("format", "schema", "schema.file", "schema.id", "schema.message", "subject.name.strategy")
PRODUCER_PROPERTIES = frozenset((*_CLIENT_KEYS, *(f"{side}.{k}" for side in ("key", "value") for k in _SIDE_KEYS),
                                 "auto.register", "auto.register.schemas", "use.latest.version",
                                 "normalize.schemas", "key.serializer"))
CONSUMER_PROPERTIES = frozenset((*_CLIENT_KEYS, "key.format", "value.format", "print.schema.ids",
                                 "schema.id.separator", "key.deserializer"))
# Kafka's string (de)serializer class, what Confluent's console tools are given for text keys
_STRING_CLASSES = {"key.serializer": "org.apache.kafka.common.serialization.StringSerializer",
                   "key.deserializer": "org.apache.kafka.common.serialization.StringDeserializer"}
STRATEGIES = ("TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy")
_STRATEGY_PACKAGE = "io.confluent.kafka.serializers.subject."


class LineSchemaError(LineError):
    """An input line that is not a value of the schema; the message says why."""


class RecordDecodeError(ValueError):
    """A consumed key or value that cannot be decoded with its writer schema."""


# --- properties ------------------------------------------------------------------------

def _is_client_key(key: str) -> bool:
    return key in _CLIENT_KEYS or key.startswith(PREFIX)


def split_properties(props: Mapping[str, str | None], *, consumer: bool,
                     others: Iterable[str]) -> tuple[dict[str, str], dict[str, str | None]]:
    """``props`` (``--property``) split into this module's keys and the rest (the line
    reader's or the formatter's, ``others``); ``CliError`` for a key neither knows."""
    known = CONSUMER_PROPERTIES if consumer else PRODUCER_PROPERTIES
    others = tuple(others)
    mine: dict[str, str] = {}
    rest: dict[str, str | None] = {}
    for key, value in props.items():
        if key in others:
            rest[key] = value
        elif key in known or _is_client_key(key):
            mine[key] = "" if value is None else value
        else:
            raise CliError(f"unknown --property {key} (known: {', '.join(others)}; with a Schema Registry: "
                           f"{', '.join(sorted(known - set(_CLIENT_KEYS)))}, schema.registry.url and the "
                           f"registry client's keys)")
    return mine, rest


def _client_conf(props: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """The registry client's keys and Java's trust/key store keys, from ``props``."""
    conf: dict[str, Any] = {}
    java: dict[str, str] = {}
    for key, value in props.items():
        if not _is_client_key(key):
            continue
        bare = key[len(PREFIX):] if key.startswith(PREFIX) else key
        if bare in _JAVA_TRUST or bare in _JAVA_KEYS:
            java[bare] = value
        elif bare in CONFIG_KEYS:
            conf[bare] = value
        else:
            raise CliError(f"--property {key}: not a Schema Registry client setting (they are "
                           f"{', '.join(sorted(PREFIX + k for k in CONFIG_KEYS))}, and {', '.join(_UNPREFIXED)} "
                           "without the prefix)")
    conf.setdefault("url", DEFAULT_URL)
    return conf, java


def registry_client(props: Mapping[str, str]) -> SchemaRegistryClient:
    """The registry client of ``props`` (module docstring); ``CliError`` for a bad setting."""
    conf, java = _client_conf(props)
    if any(java.get(k) for k in _JAVA_KEYS):
        raise CliError("--property ssl.keystore.location: Java key stores are not read here; give the client "
                       "certificate as PEM files: schema.registry.ssl.certificate.location and "
                       "schema.registry.ssl.key.location")
    temp: str | None = None
    if java.get("ssl.truststore.location"):
        if conf.get("ssl.ca.location"):
            raise CliError("--property ssl.truststore.location and ssl.ca.location: give one of them")
        from broker.config import ConfigError
        from broker.ssl_stores import load_trust_store

        try:
            cafile, cadata = load_trust_store({k: v for k, v in java.items() if k in _JAVA_TRUST})
        except ConfigError as exc:
            raise CliError(f"--property {exc}") from None
        if cadata is not None:  # certificates out of a PKCS12 store: public, a temporary file
            fd, temp = tempfile.mkstemp(prefix="kafkalog-registry-ca-", suffix=".pem")
            with os.fdopen(fd, "w", encoding="ascii") as out:
                out.write(cadata)
        conf["ssl.ca.location"] = cafile or temp
    try:
        return SchemaRegistryClient(conf)
    except ValueError as exc:
        raise CliError(f"--property: {exc}") from None
    finally:
        if temp is not None:  # the client's SSL context has read it
            os.unlink(temp)


def _format(props: Mapping[str, str], key: str) -> str | None:
    value = props.get(key)
    text = None
    if value is not None:
        text = value.strip().lower()
        text = _FORMAT_ALIASES.get(text, text)
        if text not in FORMATS:
            raise CliError(f"--property {key}={value}: expected one of {', '.join(FORMATS)}")
    for prop, cls in _STRING_CLASSES.items():  # key.serializer=...StringSerializer: key.format=string
        given = props.get(prop)
        if given is None or not key.startswith("key."):
            continue
        if given.strip() != cls:
            raise CliError(f"--property {prop}={given}: only {cls} is taken (keys as text); for a schema "
                           "format give key.format")
        if text not in (None, "string"):
            raise CliError(f"--property {prop} and {key}={value}: give one of them")
        text = "string"
    return text


def _strategy(props: Mapping[str, str], key: str) -> str:
    value = (props.get(key) or "").strip()
    if not value:
        return "TopicNameStrategy"
    short = value.removeprefix(_STRATEGY_PACKAGE)
    for name in STRATEGIES:
        if short.lower() == name.lower():
            return name
    raise CliError(f"--property {key}={value}: expected {', '.join(STRATEGIES)} (or Confluent's class names, "
                   f"{_STRATEGY_PACKAGE}TopicNameStrategy ...)")


def subject_name(strategy: str, topic: str, *, is_key: bool, record_name: str | None) -> str:
    """The subject of ``strategy`` (Confluent's ``TopicNameStrategy``,
    ``RecordNameStrategy``, ``TopicRecordNameStrategy``); ``CliError`` when it needs a
    record name and there is none."""
    if strategy == "TopicNameStrategy":
        return f"{topic}-{'key' if is_key else 'value'}"
    if not record_name:
        side = "key" if is_key else "value"
        raise CliError(f"{side}.subject.name.strategy={strategy} needs a record name: an Avro named type, a "
                       "Protobuf message or a JSON Schema with a title")
    return record_name if strategy == "RecordNameStrategy" else f"{topic}-{record_name}"


def record_name(schema: ParsedSchema, message: str | None = None) -> str | None:
    """The full name RecordNameStrategy uses: the Avro named type, the Protobuf message
    (``message``, a full name), the JSON Schema's ``title``."""
    if schema.schema_type == AVRO:
        return getattr(schema, "name", None)
    if schema.schema_type == PROTOBUF:
        return message
    document = getattr(schema, "document", None)
    title = document.get("title") if isinstance(document, dict) else None
    return title if isinstance(title, str) and title else None


# --- schemas from the registry -----------------------------------------------------------

def _resolve(client: SchemaRegistryClient, references: Iterable[SchemaReference], out: dict[str, str],
             visiting: set[tuple[str, int]]) -> None:
    for ref in references:
        if ref.name in out or (ref.subject, ref.version) in visiting:
            continue
        visiting.add((ref.subject, ref.version))
        found = client.get_version(ref.subject, ref.version)
        _resolve(client, found.references, out, visiting)  # dependencies first
        out[ref.name] = found.schema


def load_registered(client: SchemaRegistryClient, registered: RegisteredSchema) -> ParsedSchema:
    """``registered`` parsed, its references fetched from the registry (transitively,
    dependencies first). Raises ``SchemaRegistryError`` and ``SchemaError``."""
    resolved: dict[str, str] = {}
    _resolve(client, registered.references, resolved, set())
    return parse_schema(registered.schema_type, registered.schema, registered.references, resolved)


# --- producer --------------------------------------------------------------------------

@dataclass(frozen=True)
class _Side:
    """The settings of the key or the value (module docstring)."""

    is_key: bool
    fmt: str | None  # avro, protobuf, json, string or None (not given)
    text: str | None
    schema_id: int | None
    message: str | None
    strategy: str

    @property
    def name(self) -> str:
        return "key" if self.is_key else "value"

    @property
    def active(self) -> bool:
        return self.text is not None or self.schema_id is not None or self.fmt not in (None, "string")

    @classmethod
    def read(cls, props: Mapping[str, str], is_key: bool) -> _Side:
        side = "key" if is_key else "value"
        text = props.get(f"{side}.schema")
        path = props.get(f"{side}.schema.file")
        if path is not None:
            if text is not None:
                raise CliError(f"--property {side}.schema and {side}.schema.file: give one of them")
            try:
                text = Path(path).read_text(encoding="utf-8")
            except FileNotFoundError:
                raise CliError(f"--property {side}.schema.file={path}: no such file") from None
            except (OSError, UnicodeDecodeError) as exc:
                raise CliError(f"--property {side}.schema.file={path}: cannot be read ({exc})") from None
        if text is not None and not text.strip():
            raise CliError(f"--property {side}.schema{'.file' if path is not None else ''}: the schema is empty")
        schema_id = None
        raw_id = props.get(f"{side}.schema.id")
        if raw_id is not None:
            try:
                schema_id = int(raw_id)
            except ValueError:
                schema_id = -1
            if not 0 <= schema_id <= INT32_MAX:
                raise CliError(f"--property {side}.schema.id={raw_id}: not a schema id (a number from 0 to "
                               f"{INT32_MAX})")
            if text is not None:
                raise CliError(f"--property {side}.schema.id and {side}.schema: give one of them")
        fmt = _format(props, f"{side}.format")
        if fmt == "string" and (text is not None or schema_id is not None):
            raise CliError(f"--property {side}.format=string takes no schema")
        message = props.get(f"{side}.schema.message") or None
        return cls(is_key, fmt, text, schema_id, message, _strategy(props, f"{side}.subject.name.strategy"))


class RecordSerializer:
    """The key's or the value's serializer of ``kafkalog produce``: text -> framed bytes
    (module docstring). Usable once ``connect`` has found the schema's id."""

    def __init__(self, side: _Side, topic: str) -> None:
        self.side = side
        self.topic = topic
        self.local: ParsedSchema | None = None  # the schema given as text, parsed
        self.local_message: str | None = None
        if side.text is not None:
            kind = _TYPES[side.fmt] if side.fmt in _TYPES else AVRO
            try:
                self.local = parse_schema(kind, side.text)
            except SchemaError as exc:
                hint = (f" (the format is {side.name}.format: json for a JSON Schema, protobuf for a .proto)"
                        if side.fmt is None else "")
                raise CliError(f"--property {side.name}.schema: not a valid {kind} schema: {exc}{hint}") from None
            self.local_message = self._message(self.local)
        self.writer: ParsedSchema | None = None
        self.schema_id: int | None = None
        self.subject: str | None = None
        self._encode: Callable[[str], bytes] | None = None
        self._indexes: tuple[int, ...] | None = None

    def _message(self, schema: ParsedSchema) -> str | None:
        """The full name of the Protobuf message to write (``*.schema.message``)."""
        name = self.side.message
        if schema.schema_type != PROTOBUF:
            if name:
                raise CliError(f"--property {self.side.name}.schema.message is for Protobuf schemas")
            return None
        names: list[str] = schema.message_names()  # type: ignore[attr-defined]
        if not names:
            raise CliError(f"the {self.side.name} schema declares no message")
        if not name:
            return names[0]
        package = schema.file_descriptor.package  # type: ignore[attr-defined]
        for candidate in (name.lstrip("."), f"{package}.{name}" if package else name):
            if candidate in names:
                return candidate
        raise CliError(f"--property {self.side.name}.schema.message={name}: the schema has no such message "
                       f"(it has {', '.join(names)})")

    def connect(self, client: SchemaRegistryClient, *, auto_register: bool, use_latest: bool,
                normalize: bool) -> None:
        """Find (register, look up, fetch) the writer schema and its id; ``CliError`` naming
        what the registry answered."""
        side = self.side.name
        try:
            if self.side.schema_id is not None:
                what = f"fetching {side}.schema.id={self.side.schema_id}"
                registered = client.get_schema(self.side.schema_id)
                writer = self._load(client, registered, what)
                self.schema_id = self.side.schema_id
            elif use_latest:
                name = record_name(self.local, self.local_message) if self.local is not None else None
                self.subject = subject_name(self.side.strategy, self.topic, is_key=self.side.is_key, record_name=name)
                what = f"fetching the latest {side} schema of subject {self.subject} (use.latest.version)"
                registered = client.get_latest_version(self.subject)
                writer = self._load(client, registered, what)
                self.schema_id = registered.id
            else:
                assert self.local is not None
                writer = self.local
                self.subject = subject_name(self.side.strategy, self.topic, is_key=self.side.is_key,
                                            record_name=record_name(writer, self.local_message))
                schema = Schema(self.side.text or "", writer.schema_type)
                if auto_register:
                    what = f"registering the {side} schema under subject {self.subject}"
                    self.schema_id = client.register_schema_full_response(self.subject, schema, normalize).id
                else:
                    what = f"looking up the {side} schema under subject {self.subject} (auto.register=false)"
                    self.schema_id = client.lookup_schema(self.subject, schema, normalize).id
        except SchemaRegistryError as exc:
            raise CliError(f"{what}: {exc}") from None
        if self.schema_id is None:
            raise CliError(f"{what}: the registry did not say the schema's id")
        self.writer = writer
        self._prepare(writer)

    def _load(self, client: SchemaRegistryClient, registered: RegisteredSchema, what: str) -> ParsedSchema:
        try:
            writer = load_registered(client, registered)
        except SchemaError as exc:
            raise CliError(f"{what}: the registry's schema cannot be parsed: {exc}") from None
        fmt = self.side.fmt
        if fmt in _TYPES and _TYPES[fmt] != writer.schema_type:
            raise CliError(f"{what}: it is a {writer.schema_type} schema, not {fmt} ({self.side.name}.format)")
        return writer

    def _prepare(self, writer: ParsedSchema) -> None:
        if writer.schema_type == AVRO:
            self._encode = _avro_encoder(writer)
        elif writer.schema_type == PROTOBUF:
            message = self._message(writer) if writer is not self.local else self.local_message
            assert message is not None
            self._indexes = tuple(writer.message_index(message))  # type: ignore[attr-defined]
            self._encode = _protobuf_encoder(writer, message)
        else:
            self._encode = _json_encoder(writer)

    def __call__(self, data: bytes) -> bytes:
        """The framed bytes of one line's key or value; ``LineSchemaError`` when it does not
        fit the schema."""
        assert self._encode is not None and self.schema_id is not None, "connect() first"
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise LineSchemaError(f"the {self.side.name} is not UTF-8 text ({exc.reason} at byte "
                                  f"{exc.start})") from None
        try:
            payload = self._encode(text)
        except LineSchemaError as exc:
            raise LineSchemaError(f"the {self.side.name} does not fit its schema (id {self.schema_id}): "
                                  f"{exc}") from None
        schema_id = framing.SchemaId(self.schema_id, message_indexes=self._indexes)
        return framing.encode(schema_id, payload, with_indexes=self._indexes is not None)


def _clip(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _avro_encoder(schema: ParsedSchema) -> Callable[[str], bytes]:
    import fastavro
    from fastavro._read_py import reader as _json_datum_reader  # json_reader's, which returns named types
    from fastavro.io.json_decoder import AvroJSONDecoder
    from fastavro.validation import ValidationError, validate

    parsed = schema.parsed  # type: ignore[attr-defined]

    def encode(text: str) -> bytes:
        if not text.strip():
            raise LineSchemaError("an empty line is not Avro JSON (give null.marker for null values)")
        try:
            datum = next(_json_datum_reader(AvroJSONDecoder(io.StringIO(text)), parsed, return_named_type=True))
        except json.JSONDecodeError as exc:
            raise LineSchemaError(f"not JSON: {exc}") from None
        except Exception as exc:  # fastavro's decoder raises what the walk met: KeyError, TypeError, ...
            raise LineSchemaError(
                f"not Avro's JSON encoding of the schema ({type(exc).__name__}: {_clip(str(exc))}); a union's "
                'value is written {"<type>": value}, e.g. {"string": "x"}, or null') from None
        try:
            validate(datum, parsed, raise_errors=True)
        except ValidationError as exc:
            raise LineSchemaError("; ".join(_clip(str(e)) for e in exc.errors[:3]) or str(exc)) from None
        except Exception as exc:
            raise LineSchemaError(f"{type(exc).__name__}: {_clip(str(exc))}") from None
        out = io.BytesIO()
        try:
            fastavro.schemaless_writer(out, parsed, datum)
        except Exception as exc:
            raise LineSchemaError(f"{type(exc).__name__}: {_clip(str(exc))}") from None
        return out.getvalue()

    return encode


def _protobuf_encoder(schema: ParsedSchema, message: str) -> Callable[[str], bytes]:
    from google.protobuf import json_format, message_factory

    pool = schema.pool()  # type: ignore[attr-defined]
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName(message))

    def encode(text: str) -> bytes:
        try:
            msg = json_format.Parse(text, cls(), descriptor_pool=pool)
        except json_format.ParseError as exc:
            raise LineSchemaError(f"not the JSON of a {message}: {_clip(str(exc))}") from None
        except Exception as exc:  # a recursion limit, a bad Any
            raise LineSchemaError(f"not the JSON of a {message}: {type(exc).__name__}: {_clip(str(exc))}") from None
        return bytes(msg.SerializeToString())

    return encode


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _json_encoder(schema: ParsedSchema) -> Callable[[str], bytes]:
    def encode(text: str) -> bytes:
        try:
            document = json.loads(text, parse_constant=_refuse_constant)
        except (ValueError, RecursionError) as exc:
            raise LineSchemaError(f"not JSON: {exc}") from None
        errors = schema.validate(document)  # type: ignore[attr-defined]
        if errors:
            more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
            raise LineSchemaError("; ".join(_clip(e) for e in errors[:3]) + more)
        return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    return encode


class ProducerSerdes:
    """The serializers of ``kafkalog produce``'s keys and values (module docstring):
    ``key`` and ``value`` (None: bytes as read). Built from this module's ``--property``
    keys (``split_properties``; ``CliError`` for a bad one); call ``connect`` once before
    the first record and ``close`` at the end."""

    def __init__(self, props: Mapping[str, str], topic: str, *, parse_key: bool) -> None:
        value_side = _Side.read(props, False)
        key_side = _Side.read(props, True)
        self.auto_register = parse_bool("auto.register", props.get("auto.register",
                                                                   props.get("auto.register.schemas", "true")))
        self.use_latest = parse_bool("use.latest.version", props.get("use.latest.version", "false"))
        self.normalize = parse_bool("normalize.schemas", props.get("normalize.schemas", "false"))
        if self.use_latest:
            explicit = props.get("auto.register", props.get("auto.register.schemas"))
            if explicit is not None and self.auto_register:
                raise CliError("--property use.latest.version=true and auto.register=true: the schema cannot be "
                               "both the subject's latest and the one to register")
            self.auto_register = False
        if key_side.active and not parse_key:
            raise CliError("key.format / key.schema need parse.key=true (or --key-separator): a key to serialize")
        sides = []
        for side in (value_side, key_side):
            if not side.active and not (self.use_latest and side.fmt is None and not side.is_key):
                continue
            if side.fmt in _TYPES and side.text is None and side.schema_id is None and not self.use_latest:
                raise CliError(f"--property {side.name}.format={side.fmt} needs {side.name}.schema, "
                               f"{side.name}.schema.file, {side.name}.schema.id or use.latest.version=true")
            sides.append(side)
        if not sides:
            raise CliError("--property schema.registry.url: nothing to serialize; give value.schema, "
                           "value.schema.file or value.schema.id (and key.schema ... for keys)")
        self.value: RecordSerializer | None = None
        self.key: RecordSerializer | None = None
        for side in sides:
            serializer = RecordSerializer(side, topic)
            if side.is_key:
                self.key = serializer
            else:
                self.value = serializer
        self._props = dict(props)
        self._client: SchemaRegistryClient | None = None

    def connect(self) -> None:
        """Resolve each schema with the registry (module docstring); ``CliError``."""
        client = self._client = registry_client(self._props)
        for serializer in (self.key, self.value):
            if serializer is not None:
                serializer.connect(client, auto_register=self.auto_register, use_latest=self.use_latest,
                                   normalize=self.normalize)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


# --- consumer --------------------------------------------------------------------------

@dataclass
class _Writer:
    """A writer schema found by id or GUID: what it is and how to turn a payload into JSON."""

    schema: ParsedSchema
    shown_id: str  # printed by print.schema.ids: the id, else the GUID
    classes: dict[tuple[int, ...], Any]  # Protobuf message classes by message indexes


class SchemaFormatter:
    """``MessageFormatter`` over decoded keys and values (module docstring)."""

    def __init__(self, formatter: MessageFormatter, client: SchemaRegistryClient, *, value_format: str | None,
                 key_format: str | None, print_ids: bool, id_separator: bytes, command: str = "consume",
                 errors: Any = None) -> None:
        self.formatter = formatter
        self.client = client
        self.value_format = value_format
        self.key_format = key_format or "string"
        self.print_ids = print_ids
        self.id_separator = id_separator
        self.command = command
        self.errors = errors  # where a skipped record is told (default: stderr at the time)
        self.failures = 0
        self._writers: dict[str, _Writer | str] = {}  # "id:N" / "guid:G" -> writer, or why it failed

    @classmethod
    def from_properties(cls, props: Mapping[str, str], formatter: MessageFormatter,
                        command: str = "consume") -> SchemaFormatter:
        """The formatter of ``props`` (this module's keys, ``split_properties``) over
        ``formatter``; ``CliError`` for a bad value."""
        value_format = _format(props, "value.format")
        key_format = _format(props, "key.format")
        print_ids = parse_bool("print.schema.ids", props.get("print.schema.ids", "false"))
        separator = unescape(props.get("schema.id.separator", "\t")).encode("utf-8")
        return cls(formatter, registry_client(props), value_format=value_format, key_format=key_format,
                   print_ids=print_ids, id_separator=separator, command=command)

    def close(self) -> None:
        self.client.close()

    def format(self, record: Any) -> bytes:
        """The output line of ``record``; b"" (and a line on stderr) when it cannot be
        decoded. ``SchemaRegistryError`` when the registry cannot be used at all."""
        try:
            fmt = self.formatter
            value = self._side(record, record.value, is_key=False) if fmt.print_value else record.value
            key = self._side(record, record.key, is_key=True) if fmt.print_key else record.key
        except RecordDecodeError as exc:
            self.failures += 1
            print(f"kafkalog {self.command}: topic {record.topic} partition {record.partition} offset "
                  f"{record.offset}: {exc}; skipped", file=self.errors or sys.stderr, flush=True)
            return b""
        return self.formatter.format(record._replace(key=key, value=value))

    def _side(self, record: Any, data: bytes | None, *, is_key: bool) -> bytes | None:
        fmt = self.key_format if is_key else self.value_format
        if fmt == "string":
            return data
        if data is None:
            if not self.print_ids:
                return None
            null = self.formatter.null_literal
            return null + self.id_separator + (null if is_key else b"null")  # as Confluent's formatter
        side = "key" if is_key else "value"
        try:
            text, shown = self.decode(data, record.headers, is_key=is_key, fmt=fmt)
        except RecordDecodeError as exc:
            raise RecordDecodeError(f"cannot deserialize the {side}: {exc}") from None
        out = text.encode("utf-8")
        return out + self.id_separator + shown.encode("ascii") if self.print_ids else out

    def decode(self, data: bytes, headers: Any, *, is_key: bool, fmt: str | None) -> tuple[str, str]:
        """(the JSON text of ``data``, the schema id to print); ``RecordDecodeError``."""
        header = _header(headers, framing.header_name(is_key=is_key))
        try:
            if header is not None:
                schema_id, _ = framing.decode(header, with_indexes=False)
            else:
                schema_id, start = framing.decode(data, with_indexes=False)
            writer = self._writer(schema_id)
            kind = writer.schema.schema_type
            if fmt is not None and _TYPES[fmt] != kind:
                raise RecordDecodeError(f"written with a {kind} schema (id {writer.shown_id}), not "
                                        f"{fmt} ({'key' if is_key else 'value'}.format)")
            indexes: tuple[int, ...] | None = None
            if header is not None:
                found = framing.find_schema_id(headers, is_key=is_key, with_indexes=kind == PROTOBUF)
                assert found is not None
                indexes, start = found.message_indexes, 0
            elif kind == PROTOBUF:
                with_indexes, start = framing.decode(data, with_indexes=True)
                indexes = with_indexes.message_indexes
        except framing.FramingError as exc:
            where = f"header {framing.header_name(is_key=is_key)}" if header is not None else "frame"
            raise RecordDecodeError(f"bad {where}: {exc}") from None
        payload = memoryview(data)[start:]
        if kind == AVRO:
            return _avro_json(writer.schema, payload), writer.shown_id
        if kind == PROTOBUF:
            return _protobuf_json(writer, indexes or (0,), payload), writer.shown_id
        return _json_json(payload), writer.shown_id

    def _writer(self, schema_id: framing.SchemaId) -> _Writer:
        key = f"id:{schema_id.id}" if schema_id.id is not None else f"guid:{schema_id.guid}"
        known = self._writers.get(key)
        if isinstance(known, str):
            raise RecordDecodeError(known)
        if known is not None:
            return known
        shown = str(schema_id.id) if schema_id.id is not None else f"guid {schema_id.guid}"
        try:
            if schema_id.id is not None:
                registered = self.client.get_schema(schema_id.id)
            else:
                registered = self.client.get_schema_by_guid(str(schema_id.guid))
            parsed = load_registered(self.client, registered)
        except SchemaRegistryError as exc:
            if exc.http_status != 404:  # unreachable, unauthorized...: the command cannot go on
                raise
            reason = f"schema {shown} is not in the registry: {exc}"
        except SchemaError as exc:
            reason = f"schema {shown} of the registry cannot be parsed: {exc}"
        else:
            writer = _Writer(parsed, str(registered.id) if registered.id is not None else str(schema_id.guid), {})
            self._writers[key] = writer
            return writer
        self._writers[key] = reason
        raise RecordDecodeError(reason)


def _header(headers: Any, name: str) -> bytes | None:
    for key, value in headers or ():
        if key == name:
            return value if value is not None else b""
    return None


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _avro_json(schema: ParsedSchema, payload: memoryview) -> str:
    import fastavro

    parsed = schema.parsed  # type: ignore[attr-defined]
    source = io.BytesIO(payload)
    try:
        datum = fastavro.schemaless_reader(source, parsed, None, return_named_type=True)
    except Exception as exc:  # EOFError, UnicodeDecodeError, an index out of range: not this schema's bytes
        raise RecordDecodeError(f"not Avro data of the schema ({type(exc).__name__}: {_clip(str(exc))})") from None
    left = len(payload) - source.tell()
    if left:
        raise RecordDecodeError(f"{left} bytes left after the Avro value: not data of the schema")
    out = io.StringIO()
    try:
        fastavro.json_writer(out, parsed, [datum])
        return _compact(json.loads(out.getvalue()))
    except Exception as exc:
        raise RecordDecodeError(f"cannot write the Avro value as JSON ({type(exc).__name__}: {exc})") from None


def _protobuf_json(writer: _Writer, indexes: tuple[int, ...], payload: memoryview) -> str:
    from google.protobuf import json_format, message_factory
    from google.protobuf.message import DecodeError

    cls = writer.classes.get(indexes)
    schema = writer.schema
    if cls is None:
        try:
            descriptor = schema.message_descriptor(indexes)  # type: ignore[attr-defined]
        except IndexError as exc:
            raise RecordDecodeError(f"message indexes {list(indexes)}: {exc}") from None
        cls = writer.classes[indexes] = message_factory.GetMessageClass(descriptor)
    try:
        message = cls.FromString(bytes(payload))
    except (DecodeError, RecursionError) as exc:
        raise RecordDecodeError(f"not a {cls.DESCRIPTOR.full_name} ({exc})") from None
    try:
        document = json_format.MessageToDict(message, always_print_fields_with_no_presence=True,
                                             descriptor_pool=schema.pool())  # type: ignore[attr-defined]
    except Exception as exc:  # an Any of an unknown type
        raise RecordDecodeError(f"cannot write the {cls.DESCRIPTOR.full_name} as JSON: {exc}") from None
    return _compact(document)


def _json_json(payload: memoryview) -> str:
    try:
        return _compact(json.loads(bytes(payload).decode("utf-8"), parse_constant=_refuse_constant))
    except (ValueError, RecursionError) as exc:
        raise RecordDecodeError(f"not a JSON document ({exc})") from None

