"""Columnar Avro decoding: a batch of Avro payloads (the values of many Kafka records, the
Confluent framing already stripped, one writer schema) into one Arrow array, column by
column with numpy, for the Spark data source's typed columns.

Owns ``decode(payloads, writer, reader=None, *, recursive_depth=-1) -> DecodeResult``,
``DecodeResult`` and the cache of compiled plans.

Input: ``payloads`` is a ``pyarrow.BinaryArray`` or ``LargeBinaryArray`` (a
``ChunkedArray`` of them, or a ``BinaryViewArray``, is converted), or a pair ``(offsets,
data)``: int64 offsets (n + 1, increasing) into ``data`` (bytes, a buffer, or uint8
numpy). Each payload is one Avro datum in the binary encoding of ``writer``. A null
payload (a tombstone) gives a null row that is not bad.

Output (``DecodeResult``): ``array``, of ``avro_arrow.arrow_type(reader)`` (Spark's
``from_avro`` mapping; a ``StructArray`` for a record), one row per payload; ``bad``, a
numpy bool mask of the payloads that failed (their rows are null): truncated, trailing
bytes, a union branch index or enum index out of range, a negative length, a varint
longer than 10 bytes (an int's longer than 5 or beyond 32 bits), a boolean byte other
than 0 and 1, a string that is not UTF-8, a decimal beyond its precision, a timestamp
beyond int64 microseconds, an array block count larger than its record can hold, data
nested more than 128 unions and arrays deep (only a recursive type's can), or data that
does not resolve (a writer enum symbol the reader lacks without a default, a writer union
branch no reader branch reads, a reader field without default the writer lacks);
``errors``: ``[(index, message)]`` of the first bad payload (empty when none), and
``reason(i)`` the message of any row. Bad data never raises.

Resolution: ``reader`` (default ``writer``) reads ``writer``'s data by Avro's rules
(``avro_columnar_compile``): fields by name or alias, the reader's defaults for fields the
writer lacks, writer-only fields skipped, the promotions int to long/float/double, long
to float/double, float to double, string and bytes; enum symbols by name (an unknown one
to the reader's default); union branches as Avro Java picks them. The reader's logical
types decide the output.

What is vectorised: every node (records, enums, fixed, all primitives, unions nullable,
merged or general, arrays and maps of any of these at any depth with blocks of any count
and sign, and the logical types) is read for all the values of the batch at once, one
field after the other, with numpy (``avro_columnar_plan``, ``avro_columnar_walk``,
``avro_columnar_vec``): no Python object per record or value. One step is per item in
Python: finding where the items of the few long arrays left in a column start, once only
a few arrays remain (``avro_columnar_walk``); their values are still read at once.
What takes the fallback (fastavro's ``schemaless_reader`` per value, then
``pyarrow.array``): the values of a recursive record past ``recursive_depth``, which
become JSON text (``avro_arrow``); and everything with ``vectorised=False`` (the
row-at-a-time path, kept to check the columnar one against and as a way out, about a
third of fastavro's own speed). Both paths give the same array and the same bad rows,
except for a value of a union holding both int and long (or float and double) besides
other branches, which the row path puts in the first of the two (fastavro does not say
which branch it read). Where both differ from fastavro alone: they refuse what fastavro
takes (a negative union or enum index, an int beyond 32 bits, a boolean byte of 2, a
union index written in more than one byte inside an array of fixed-size values), and
decode what fastavro refuses (a uuid string that is not a UUID: Spark's uuid is a string).

Plans are compiled once per (writer, reader, recursive_depth, vectorised) and kept in a
least-recently-used cache of ``PLAN_CACHE_SIZE``, keyed by the schemas' resolved texts
(``formatted("resolved")``: the canonical string with references inlined).

Errors: ``TypeError`` for arguments of the wrong type; ``ValueError`` for offsets that
do not fit ``data`` and for a batch whose one column would pass Arrow's 2 GiB / 2^31 item
limits (decode fewer records at a time); ``avro_arrow.AvroArrowError`` (a ``ValueError``)
for a reader with no Arrow form (a decimal above 38 digits, recursion without
``recursive_depth``).

Thread-safety: ``decode`` may run in many threads at once; the plan cache is locked and
plans are read-only. The input is only read; the output owns its memory.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from broker.schema.avro import AvroSchema
from broker.schema.avro_arrow import AvroArrowError
from broker.schema.avro_columnar_compile import compile_plan
from broker.schema.avro_columnar_plan import Plan
from broker.schema.avro_columnar_vec import Context

PLAN_CACHE_SIZE = 256

_plans: OrderedDict[tuple[str, str, int, bool], Plan] = OrderedDict()
_plans_lock = threading.Lock()


@dataclass(frozen=True)
class DecodeResult:
    """One decoded batch (module docstring)."""

    array: pa.Array
    bad: np.ndarray
    errors: list[tuple[int, str]]
    _codes: np.ndarray = field(repr=False)
    _messages: tuple[str, ...] = field(repr=False)

    def reason(self, i: int) -> str | None:
        """Why row ``i`` is bad (None when it is not)."""
        code = int(self._codes[i]) if self.bad[i] else 0
        return self._messages[code - 1] if code else None


def plan_for(writer: AvroSchema, reader: AvroSchema, recursive_depth: int = -1, vectorised: bool = True) -> Plan:
    """The compiled plan of a (writer, reader) pair, from the cache or compiled now."""
    key = (writer.formatted("resolved"), reader.formatted("resolved"), recursive_depth, vectorised)
    with _plans_lock:
        plan = _plans.get(key)
        if plan is not None:
            _plans.move_to_end(key)
            return plan
    try:
        plan = compile_plan(writer, reader, recursive_depth, vectorised)
    except RecursionError:
        raise AvroArrowError("the schema is nested too deeply to compile a decoder") from None
    with _plans_lock:
        _plans[key] = plan
        while len(_plans) > PLAN_CACHE_SIZE:
            _plans.popitem(last=False)
    return plan


def _payloads(payloads: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """(data, starts, ends, null rows or None) of the accepted inputs (module docstring)."""
    if isinstance(payloads, pa.ChunkedArray):
        payloads = payloads.combine_chunks() if payloads.num_chunks else pa.array([], payloads.type)
    if isinstance(payloads, pa.Array):
        kind = payloads.type
        if pa.types.is_binary_view(kind):
            payloads = payloads.cast(pa.binary())
            kind = payloads.type
        if not (pa.types.is_binary(kind) or pa.types.is_large_binary(kind)):
            raise TypeError(f"payloads must be a binary Arrow array, not {kind}")
        n = len(payloads)
        buffers = payloads.buffers()
        width = 8 if pa.types.is_large_binary(kind) else 4
        if n == 0 or buffers[1] is None:
            offsets = np.zeros(n + 1, np.int64)
        else:
            offsets = np.frombuffer(buffers[1], np.int64 if width == 8 else np.int32, count=n + 1,
                                    offset=payloads.offset * width).astype(np.int64)
        data = np.frombuffer(buffers[2], np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
        null = None
        if payloads.null_count:
            null = ~np.asarray(payloads.is_valid().to_numpy(zero_copy_only=False), np.bool_)
        return data, offsets[:-1], offsets[1:], null
    if isinstance(payloads, tuple) and len(payloads) == 2:
        raw_offsets, raw_data = payloads
        offsets = np.asarray(raw_offsets)
        if offsets.ndim != 1 or offsets.size == 0 or not np.issubdtype(offsets.dtype, np.integer):
            raise TypeError("offsets must be a 1-D integer array of n + 1 entries")
        offsets = offsets.astype(np.int64)
        if isinstance(raw_data, np.ndarray):
            data = np.ascontiguousarray(raw_data.reshape(-1).view(np.uint8))
        else:
            try:
                data = np.frombuffer(raw_data, np.uint8)
            except TypeError:
                raise TypeError(f"data must be bytes, a buffer or a uint8 array, not "
                                f"{type(raw_data).__name__}") from None
        if offsets[0] < 0 or offsets[-1] > data.size or (offsets[1:] < offsets[:-1]).any():
            raise ValueError(f"offsets must increase from 0 or more to at most the {data.size} bytes of data")
        return data, offsets[:-1], offsets[1:], None
    raise TypeError(f"payloads must be a pyarrow BinaryArray / LargeBinaryArray or (offsets, data), not "
                    f"{type(payloads).__name__}")


def _null_rows(array: pa.Array, nulls: np.ndarray) -> pa.Array:
    if not nulls.any():
        return array
    if array.null_count:
        nulls = nulls | np.asarray(array.is_null().to_numpy(zero_copy_only=False), np.bool_)
    if isinstance(array, pa.StructArray) and array.offset == 0:
        return pa.StructArray.from_arrays([array.field(i) for i in range(array.type.num_fields)],
                                          fields=list(array.type), mask=pa.array(nulls)) \
            if array.type.num_fields else pa.StructArray.from_buffers(
                array.type, len(array), [pa.py_buffer(np.packbits(~nulls, bitorder="little"))], children=[])
    return array.take(pa.array(np.arange(len(array)), mask=nulls))


def decode(payloads: Any, writer: AvroSchema, reader: AvroSchema | None = None, *, recursive_depth: int = -1,
           vectorised: bool = True) -> DecodeResult:
    """Decode a batch of Avro payloads written with ``writer`` into one Arrow array of
    ``reader``'s Arrow type (module docstring). ``vectorised=False`` decodes row by row
    with fastavro (the fallback)."""
    if not isinstance(writer, AvroSchema) or not (reader is None or isinstance(reader, AvroSchema)):
        raise TypeError("writer and reader must be Avro schemas (broker.schema.avro.parse)")
    plan = plan_for(writer, reader or writer, recursive_depth, vectorised)
    data, start, end, null = _payloads(payloads)
    ctx = Context(data, start, end)
    vals, pos = plan.read(ctx, start, ctx.root)
    off = pos != end
    if off.any():
        idx = np.flatnonzero(off)
        ctx.fail(idx, pos[idx], "trailing bytes after the value")  # past the end: "truncated"
    array = plan.build(ctx, vals, None)
    bad = ctx.code != 0
    nulls = bad
    if null is not None:
        bad = bad & ~null
        nulls = bad | null
    array = _null_rows(array, nulls)
    errors: list[tuple[int, str]] = []
    if bad.any():
        i = int(np.argmax(bad))
        message = ctx.message(i)
        errors.append((i, f"record {i}: {message} (at byte {int(ctx.where[i] - start[i])} of "
                          f"{int(end[i] - start[i])})"))
    return DecodeResult(array, bad, errors, np.where(bad, ctx.code, 0), tuple(ctx.messages))


__all__ = ["DecodeResult", "PLAN_CACHE_SIZE", "decode", "plan_for"]
