"""Avro for typed reads: the column type of a reader schema and the decoding of payloads.

Owns the two calls the rest of ``formats`` makes for Avro, so that they live in one place:
``arrow_type(reader, *, recursive_depth=-1) -> pa.DataType`` (Spark's ``from_avro`` type
mapping, ``broker.schema.avro_arrow.arrow_type``) and ``decode(payloads, writer,
reader=None, *, recursive_depth=-1) -> DecodeResult`` (the vectorised decoder,
``broker.schema.avro_columnar.decode``: the writer resolved to the reader by Avro's rules,
bad payloads null and flagged, never raised).

Invariants: ``decode(...).array`` has ``arrow_type(reader or writer)``'s type and one row
per payload; a null payload is a null row, never a bad one.

Thread-safety: pure functions (the decoder's plan cache is locked).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

    from broker.schema.avro import AvroSchema
    from broker.schema.avro_columnar import DecodeResult

__all__ = ["arrow_type", "decode"]


def arrow_type(reader: AvroSchema, *, recursive_depth: int = -1) -> pa.DataType:
    """The Arrow type of ``reader``'s values (its ``AvroArrowError``, a ``ValueError``, for
    a schema without one)."""
    from broker.schema.avro_arrow import arrow_type as avro_arrow_type

    return avro_arrow_type(reader, recursive_depth=recursive_depth)


def decode(payloads: pa.Array, writer: AvroSchema, reader: AvroSchema | None = None, *,
           recursive_depth: int = -1) -> DecodeResult:
    """Decode Avro binary ``payloads`` written with ``writer`` as ``reader`` (the writer
    when None)."""
    from broker.schema.avro_columnar import decode as columnar_decode

    return columnar_decode(payloads, writer, reader, recursive_depth=recursive_depth)
