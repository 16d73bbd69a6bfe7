"""Column-wise Avro encoding: an Arrow array (one row per record) and a writer schema in,
the Avro binary payload of every row out, all rows at once (the Spark writer's Avro codec;
the caller frames the payloads the Confluent way, or asks for a fixed ``prefix`` here).

Owns ``encode(array, writer, *, prefix=b"", tombstones=False) -> EncodeResult``, the
row-at-a-time path ``encode_per_row`` (same arguments, same bytes: fastavro's
``schemaless_writer`` per row), the plan cache (``plan``) and re-exports
``AvroEncodeError``. The plan's compiler and nodes of structure are in
``avro_encode_plan``, its leaves and output machinery in ``avro_encode_nodes``.

Input (``array``: an Array, ChunkedArray, RecordBatch or Table): the Arrow types
``avro_arrow.arrow_type`` gives a schema (Spark's ``from_avro`` mapping) and the ones Spark
gives a DataFrame. boolean <- bool; int <- any integer type (range-checked); long <- any
integer type; float / double <- any floating point or integer type; string <- string /
large_string / string_view; bytes <- binary types (strings too, as UTF-8); fixed <- binary
types, each value exactly ``size`` bytes; enum <- strings among the symbols; record <-
struct, fields matched by name (a schema field the struct lacks takes its default, a
struct field the schema lacks is an error); array <- list / large_list / fixed_size_list;
map <- map<string, T>; ``[null, T]`` (either order) <- nullable T; a union of int and long
<- integers, of float and double <- floats (Spark's merges, null allowed); any other union
<- struct<member0..memberN>, one member per non-null branch in order (matched by
position), exactly one of them set per row (a null struct, or none set, is the null branch
when the union has one); a union of one branch <- that branch's type. Dictionary and
extension arrays are decoded first. Logical types: decimal (bytes or fixed) <- decimal128
(another scale is rescaled when exact); date <- date32 / date64 / integers; time-millis and
time-micros <- time32 / time64 / integers; timestamp-millis / -micros / -nanos and
local-timestamp-* <- timestamp of any unit, with or without a time zone (the stored value:
an instant, or a wall-clock time taken as UTC; a finer unit floored, a coarser one
multiplied with an overflow check), or integers already in the schema's unit; uuid <-
string (not checked). A top-level null row is an error unless the schema is a union with
null, or ``tombstones=True`` (then its payload is null: a Kafka tombstone, no prefix).

Bytes: identical to fastavro's ``schemaless_writer`` given the same values. Zigzag
varints; arrays and maps as one block (count, items, then the 0 terminator; an empty one
is the single 0); a bytes decimal as fastavro writes it (``(|unscaled|.bit_length() + 8)
// 8`` bytes of big-endian two's complement: one byte more than Avro Java's minimal form
for exactly -2^(8k-1)), a fixed decimal sign-extended to ``size``; a union of int and long
takes the int branch when int comes first and the value fits, else long; of float and
double the double branch (fastavro's choices).

How it works. A plan is compiled per (writer schema, Arrow type) and cached (LRU of
``PLAN_CACHE_SIZE``, keyed by the writer's canonical string, with references inlined when
it has any, and the Arrow type). Running it walks the plan once per field for all rows,
each field appending, in schema order, "columns" (a numpy (rows, width) byte matrix when
every row takes the same width: doubles, booleans, union branch bytes, varints of one
size), "glue" (per-row sizes and a writer of the bytes at per-row positions: varints of
varying sizes, bytes decimals) or a "blob" (an Arrow binary column taken as is: the bytes
of strings and bytes). Consecutive columns become one matrix, consecutive glue one buffer
(per-row offsets: the cumulative sum of the sizes), and every part is interleaved row by
row in one ``pyarrow.compute.binary_join_element_wise`` (a gather in C++). Nested records
flatten into the same interleave. A ``[null, T]`` union writes its branch byte, and T for
the non-null rows only (children run with an "active rows" mask: inactive rows take no
bytes and are not checked, whatever an Arrow child holds under a null parent). Arrays and
maps encode their items (entries) as rows of their own, the same way, and each parent row
takes a zero-copy slice of its items' bytes between its count and the terminator. No
Python object per row or per value.

Per-row shapes. Everything above is vectorised, at any depth (unions of records in arrays
of maps included; a recursive schema compiles to the depth of the Arrow type). One shape
is not: a string column where the schema has a record, array, map or union, i.e. a
recursive type cut to JSON text at Spark's ``recursiveFieldMaxDepth`` (``avro_arrow``'s
convention): that node parses each row's JSON and writes it with fastavro, row by row
(``avro_encode_plan.JsonNode``); ``EncodeResult.per_row`` names the plan's fields of that
kind. ``encode_per_row`` takes the per-row path for the whole array (the reference the
tests hold the vectorised path to).

Errors: ``AvroEncodeError`` (a ``ValueError``) names the field path (``a.b``, ``tags[]``
for array items, ``attrs{}`` / ``attrs{key}`` for map values and keys, ``choice.member1``
for union members; ``""`` is the top-level value) and, for a bad value, its row: on the
vectorised path the first bad row of the first field (in schema order) that has one, on
the per-row path the first bad row. Bad values: a null where the schema has no null
branch, an int out of range, an enum symbol not in the schema, a fixed of the wrong size,
a decimal beyond its precision or with more decimal places than its scale, a union struct
with several members set (or none, without a null branch), a timestamp that overflows the
schema's unit, JSON text that is not a value of its type. Arrow types the schema cannot
take raise it without a row, as does a schema field missing from the struct without a
default. Nothing is returned for a batch with a bad row.

Thread-safety: plans are immutable once built and shared; the cache is guarded by a lock.
``encode`` may run in several threads at once.
"""

from __future__ import annotations

import io
import threading
from collections import OrderedDict
from dataclasses import dataclass

import pyarrow as pa
from fastavro import schemaless_writer

from broker.schema.avro import AvroSchema, named_types
from broker.schema.avro_encode_nodes import AvroEncodeError, Node, Out, Rows, valid_mask, with_validity
from broker.schema.avro_encode_plan import compile_node

PLAN_CACHE_SIZE = 256


@dataclass(frozen=True)
class EncodeResult:
    """The encoded rows: ``payloads[i]`` is ``prefix`` + the Avro binary of row i (a
    BinaryArray; a LargeBinaryArray when the total passes 2 GiB). ``per_row``: the
    fields encoded row by row (module docstring), empty when fully vectorised."""

    payloads: pa.BinaryArray | pa.LargeBinaryArray
    per_row: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.payloads)


@dataclass(frozen=True)
class Plan:
    """A compiled encoder for one (writer schema, Arrow type)."""

    root: Node
    per_row: tuple[str, ...]


_plans: OrderedDict[tuple[str, pa.DataType], Plan] = OrderedDict()
_lock = threading.Lock()


def _writer_key(writer: AvroSchema) -> str:
    return writer.formatted("resolved") if writer.references else writer.canonical_string()


def plan(writer: AvroSchema, arrow_type: pa.DataType) -> Plan:
    """The compiled plan of ``writer`` for arrays of ``arrow_type`` (cached);
    ``AvroEncodeError`` if the schema cannot be written from that type."""
    if not isinstance(writer, AvroSchema):
        raise AvroEncodeError("", f"the writer schema must be an AvroSchema, not {type(writer).__name__}")
    key = (_writer_key(writer), arrow_type)
    with _lock:
        found = _plans.get(key)
        if found is not None:
            _plans.move_to_end(key)
            return found
    per_row: list[str] = []
    root = compile_node(writer.root, arrow_type, "", named_types(writer), per_row)
    built = Plan(root, tuple(per_row))
    with _lock:
        _plans[key] = built
        while len(_plans) > PLAN_CACHE_SIZE:
            _plans.popitem(last=False)
    return built


def _as_array(array: object) -> pa.Array:
    if isinstance(array, pa.ChunkedArray):
        return array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
    if isinstance(array, pa.Table):
        array = array.combine_chunks().to_batches()[0] if array.num_rows else \
            pa.RecordBatch.from_pylist([], schema=array.schema)
    if isinstance(array, pa.RecordBatch):
        return array.to_struct_array()
    if not isinstance(array, pa.Array):
        raise AvroEncodeError("", f"expected a pyarrow Array (or ChunkedArray, RecordBatch, Table), "
                                  f"not {type(array).__name__}")
    return array


def _binary(payloads: pa.Array) -> pa.BinaryArray | pa.LargeBinaryArray:
    if payloads.nbytes < (1 << 31) - 1 or len(payloads) == 0:
        try:
            return payloads.cast(pa.binary())
        except pa.ArrowInvalid:  # the values pass 2 GiB: large_binary it stays
            pass
    return payloads


def encode(array: pa.Array, writer: AvroSchema, *, prefix: bytes = b"", tombstones: bool = False) -> EncodeResult:
    """The Avro binary of every row of ``array`` written with ``writer``, ``prefix``
    first (e.g. Confluent's magic byte and schema id); ``AvroEncodeError`` for a row or
    a type the schema cannot take (module docstring).

    ``tombstones=True``: a null top-level row gives a null payload (a Kafka tombstone,
    no prefix either) instead of being encoded (an error unless the schema is a union
    with null)."""
    arr = _as_array(array)
    compiled = plan(writer, arr.type)
    n = len(arr)
    out = Out(n)
    live = valid_mask(arr) if tombstones else None
    if prefix:
        out.const(bytes(prefix), live)
    if n:
        compiled.root.emit(arr, live, Rows(), out)
    payloads = out.payloads()
    if live is not None:
        payloads = with_validity(payloads, live)
    return EncodeResult(_binary(payloads), compiled.per_row)


def encode_per_row(array: pa.Array, writer: AvroSchema, *, prefix: bytes = b"",
                   tombstones: bool = False) -> EncodeResult:
    """``encode``'s result computed row by row: ``array.to_pylist()``, each value converted
    to what fastavro's ``schemaless_writer`` expects (the plan's conversions, in Python:
    timestamps and dates to their integers, decimals to their bytes, union values in
    fastavro's tuple notation), then written by fastavro. The reference of the tests;
    slow. Same errors as ``encode`` (the first bad row, then the first bad field in it)."""
    arr = _as_array(array)
    compiled = plan(writer, arr.type)
    parsed = writer.parsed
    head = bytes(prefix)
    payloads: list[bytes | None] = []
    for row, value in enumerate(arr.to_pylist()):
        if value is None and tombstones:
            payloads.append(None)
            continue
        datum = compiled.root.py(value, row)
        buf = io.BytesIO()
        buf.write(head)
        try:
            schemaless_writer(buf, parsed, datum)
        except Exception as e:  # the conversions check every value: not expected
            raise AvroEncodeError("", f"fastavro cannot write the row: {e}", row) from None
        payloads.append(buf.getvalue())
    return EncodeResult(_binary(pa.array(payloads, pa.large_binary())), compiled.per_row)


__all__ = ["AvroEncodeError", "EncodeResult", "PLAN_CACHE_SIZE", "encode", "encode_per_row", "plan"]
