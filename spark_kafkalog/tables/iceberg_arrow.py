"""Arrow schemas and values for the Iceberg target (``iceberg.py``): the Arrow schema of an
Iceberg schema as the export writes it (regular, not large, types; no field ids), schemas
made nullable (Iceberg optional columns), whether a column already holds a type, and
Parquet statistics in the form Iceberg's transforms take.

Thread-safety: pure functions.
"""

from __future__ import annotations

from typing import Any

__all__ = ["plain_type", "plain_field", "arrow_schema", "nullable_type", "nullable", "internal_value", "covers"]


def plain_type(t):
    """``t`` with Arrow's large types made regular ones (what the export writes)."""
    import pyarrow as pa

    if pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_large_list(t) or pa.types.is_list(t):
        return pa.list_(plain_field(t.value_field))
    if pa.types.is_map(t):
        return pa.map_(plain_field(t.key_field).with_nullable(False), plain_field(t.item_field))
    if pa.types.is_struct(t):
        return pa.struct([plain_field(t.field(i)) for i in range(t.num_fields)])
    return t


def plain_field(f, nullable: bool | None = None):
    import pyarrow as pa

    return pa.field(f.name, plain_type(f.type), f.nullable if nullable is None else nullable)


def arrow_schema(iceberg_schema):
    """The Arrow schema of an Iceberg schema, without field ids, with regular types."""
    import pyarrow as pa
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    arrow = schema_to_pyarrow(iceberg_schema, include_field_ids=False)
    return pa.schema([plain_field(f) for f in arrow])


def nullable_type(t):
    """``t`` with its nested fields nullable, and a timestamp with a time zone in UTC (the
    same instants: Iceberg's ``timestamptz``, which pyiceberg only maps from UTC)."""
    import pyarrow as pa

    if pa.types.is_timestamp(t) and t.tz is not None and t.tz != "UTC":
        return pa.timestamp(t.unit, tz="UTC")
    if pa.types.is_struct(t):
        return pa.struct([pa.field(t.field(i).name, nullable_type(t.field(i).type), True)
                          for i in range(t.num_fields)])
    if pa.types.is_large_list(t):
        return pa.large_list(pa.field(t.value_field.name, nullable_type(t.value_type), True))
    if pa.types.is_list(t):
        return pa.list_(pa.field(t.value_field.name, nullable_type(t.value_type), True))
    if pa.types.is_map(t):
        return pa.map_(t.key_type, pa.field(t.item_field.name, nullable_type(t.item_type), True))
    return t


def nullable(schema):
    """``schema`` with every field (nested ones too) nullable: Iceberg optional columns,
    which files whose columns are required can still fill, and which an evolution may add."""
    import pyarrow as pa

    return pa.schema([pa.field(f.name, nullable_type(f.type), True) for f in schema])


def internal_value(value: Any) -> Any:
    """A Parquet statistic as Iceberg's transforms take it (timestamps in microseconds,
    dates in days)."""
    import datetime as dt

    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        delta = value - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(value, dt.date):
        return (value - dt.date(1970, 1, 1)).days
    return value


def covers(have, want) -> bool:
    """Whether a column of type ``have`` already holds ``want`` (no evolution needed)."""
    import pyarrow as pa

    have, want = plain_type(have), plain_type(want)
    if pa.types.is_struct(have) and pa.types.is_struct(want):
        names = {have.field(i).name: have.field(i).type for i in range(have.num_fields)}
        return all(want.field(i).name in names and covers(names[want.field(i).name], want.field(i).type)
                   for i in range(want.num_fields))
    if pa.types.is_list(have) and pa.types.is_list(want):
        return covers(have.value_type, want.value_type)
    if pa.types.is_map(have) and pa.types.is_map(want):
        return covers(have.key_type, want.key_type) and covers(have.item_type, want.item_type)
    return bool(have == want)
