"""Schema formats, sans-IO: Avro, Protobuf and JSON Schema parsing, identity, canonical
forms and compatibility rules (``avro``, ``protobuf``, ``json_schema`` and their
``*_compat`` modules), Confluent's wire framing of serialized keys and values
(``framing``), and what they share (``base``).

The Schema Registry (``broker.server.registry``), the registry client
(``broker.client.registry``), the tools and the Spark source all use this package, so a
schema means the same thing everywhere. Nothing here opens a socket or a file of the
project's (protoc's temporary files aside).

``parse_schema(schema_type, text, references, resolved)`` parses a schema of any of the
three types (``base`` documents the arguments); an unknown type raises
``UnknownSchemaTypeError`` (Confluent's 42202 ... answered as 422).

Thread-safety: every function is pure; parsed schemas are immutable.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

from broker.schema.base import (
    AVRO,
    JSON,
    PROTOBUF,
    SCHEMA_TYPES,
    InvalidSchemaError,
    ParsedSchema,
    SchemaError,
    SchemaReference,
)


class UnknownSchemaTypeError(SchemaError):
    """A schema type other than AVRO, PROTOBUF and JSON."""

    error_code = 42201


def parse_schema(schema_type: str | None, text: str, references: Sequence[SchemaReference] = (),
                 resolved: Mapping[str, str] | None = None) -> ParsedSchema:
    """Parse ``text`` as a schema of ``schema_type`` (None or empty: AVRO, as Confluent's
    registry defaults it)."""
    kind = (schema_type or AVRO).upper()
    module: Any
    if kind == AVRO:
        module = importlib.import_module("broker.schema.avro")
    elif kind == PROTOBUF:
        module = importlib.import_module("broker.schema.protobuf")
    elif kind == JSON:
        module = importlib.import_module("broker.schema.json_schema")
    else:
        raise UnknownSchemaTypeError(f"Unknown schema type {schema_type!r}; use one of {', '.join(SCHEMA_TYPES)}")
    if not isinstance(text, str) or not text.strip():
        raise InvalidSchemaError("Empty schema")
    parsed: ParsedSchema = module.parse(text, tuple(references), dict(resolved or {}))
    return parsed


__all__ = ["AVRO", "InvalidSchemaError", "JSON", "PROTOBUF", "ParsedSchema", "SCHEMA_TYPES", "SchemaError",
           "SchemaReference", "UnknownSchemaTypeError", "parse_schema"]
