"""What every schema format shares: the parsed-schema interface the Schema Registry, the
clients, the tools and Spark use, the reference type, and the errors.

A format module (``avro``, ``protobuf``, ``json_schema``) exposes one function,
``parse(text, references=(), resolved={}) -> ParsedSchema``:

* ``text``: the schema as a client registers it (Avro JSON, ``.proto`` text or a base64
  ``FileDescriptorProto``, a JSON Schema document);
* ``references``: the schema's ``SchemaReference``s (``name``, ``subject``, ``version``),
  as registered (Confluent's ``references`` array);
* ``resolved``: every schema text those references reach, transitively, keyed by the
  reference name (Avro: the referenced type's full name; Protobuf: the imported file
  name, ``other.proto``; JSON: the ``$ref`` URL or name), dependencies before dependants
  (Confluent's ``resolvedReferences``).

It raises ``InvalidSchemaError`` for anything that is not a valid schema of the format
(a syntax error, an unknown type, a missing or cyclic reference), with a message a user
can act on; it never raises anything else for bad input.

``ParsedSchema`` (one per format) is immutable:

* ``schema_type``: ``AVRO``, ``PROTOBUF`` or ``JSON`` (Confluent's names);
* ``canonical_string()``: the schema's identity and the text the registry stores and
  returns: the parsed schema re-serialised, with everything the user wrote that has a
  meaning kept (Avro: defaults, docs, logical types, custom properties; Protobuf: the
  ``.proto`` text of the descriptor, options kept; JSON: the document, compact). Two
  registrations with equal ``(schema_type, canonical_string(), references)`` are one
  schema (one id);
* ``normalize()``: the schema in its normalised form, for ``normalize=true`` (Avro: the
  Parsing Canonical Form; Protobuf: options and declarations in a fixed order; JSON:
  keys sorted);
* ``formatted(fmt)``: the text for ``GET /schemas/ids/{id}?format=...`` (``""``: the
  canonical string; Protobuf ``serialized``: the base64 ``FileDescriptorProto``; Avro
  ``resolved``: named types of references inlined); an unknown format gives the
  canonical string, as Confluent's registry does;
* ``backward_errors(previous)``: the compatibility breaks of reading data written with
  ``previous`` using this schema (Confluent's ``isBackwardCompatible``: BACKWARD is
  ``new.backward_errors(old)``, FORWARD ``old.backward_errors(new)``, FULL both), one
  readable message per break, empty when compatible. A ``previous`` of another type is
  one break.

Thread-safety: parsed schemas are immutable and may be shared between threads.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

AVRO = "AVRO"
PROTOBUF = "PROTOBUF"
JSON = "JSON"
SCHEMA_TYPES = (AVRO, PROTOBUF, JSON)  # GET /schemas/types


class SchemaError(Exception):
    """A schema problem, with Confluent's error code (``error_code``)."""

    error_code = 42201


class InvalidSchemaError(SchemaError):
    """Not a valid schema of its format (Confluent's 42201 INVALID_SCHEMA)."""

    error_code = 42201


@dataclass(frozen=True)
class SchemaReference:
    """One entry of a schema's ``references``: the name it is referenced by in the
    schema, and the subject and version holding it."""

    name: str
    subject: str
    version: int

    def to_json(self) -> dict:
        return {"name": self.name, "subject": self.subject, "version": self.version}


class ParsedSchema(ABC):
    """A parsed schema of one format (module docstring)."""

    schema_type: str
    references: tuple[SchemaReference, ...] = ()

    @abstractmethod
    def canonical_string(self) -> str: ...

    @abstractmethod
    def normalize(self) -> ParsedSchema: ...

    def formatted(self, fmt: str = "") -> str:
        return self.canonical_string()

    @abstractmethod
    def backward_errors(self, previous: ParsedSchema) -> list[str]: ...

    def identity(self) -> tuple[str, str, tuple[SchemaReference, ...]]:
        return (self.schema_type, self.canonical_string(), tuple(self.references))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ParsedSchema) and self.identity() == other.identity()

    def __hash__(self) -> int:
        return hash(self.identity())

    def __repr__(self) -> str:
        text = self.canonical_string()
        return f"<{self.schema_type} schema {text[:60]!r}{'...' if len(text) > 60 else ''}>"


def type_mismatch(new: ParsedSchema, previous: ParsedSchema) -> list[str]:
    """The one break of comparing schemas of two types, or none."""
    if new.schema_type != previous.schema_type:
        return [f"the schema type changed from {previous.schema_type} to {new.schema_type}"]
    return []


Resolved = Mapping[str, str]
References = Sequence[SchemaReference]

__all__ = ["AVRO", "InvalidSchemaError", "JSON", "PROTOBUF", "ParsedSchema", "References", "Resolved",
           "SCHEMA_TYPES", "SchemaError", "SchemaReference", "type_mismatch"]
