"""The plans of the columnar Avro decoder: the small objects that decode one node of a
schema for many values at once, composed into a tree by ``avro_columnar_compile``.

Owns the plan classes and ``build_union``. ``avro_columnar`` runs a plan over a batch;
``avro_columnar_vec`` holds the reads and builders they are made of,
``avro_columnar_walk`` the skippers.

A plan decodes writer data of one node into the reader's Arrow type
(``avro_arrow.TypeMapper``) at an array of positions, one per value, all at once:
``read(ctx, pos, own) -> (values, positions after)`` (``own``: each value's record, so
that an error marks the right record); ``build(ctx, values, valid) -> pyarrow.Array``
(``valid``: the rows that are not null, None for all); ``expand(values, rows, n)`` (the
values as rows ``rows`` of ``n``, the other rows to be null: how a union branch, read for
the records that took it, becomes a column of all records).

Values are numpy arrays until ``build``: a leaf's are a tuple of arrays of one row per
value (numbers; spans (start, length, record) of bytes and strings; decimal128 words;
reader enum indices), so that the values several writer branches read into one reader
branch pool by concatenation; a record's are its row count and its fields' values; an
array's its item counts and its items' values; a union's the values of each branch with
the rows that took it (``UnionVals``).

How each node is read, for all positions at once:

* records: one field after the other (the writer's order), each for every position;
  fields the reader lacks are skipped, fields the writer lacks take the reader's default
  (a constant column);
* unions: the branch index of every position, then each branch for the positions that
  took it (``np.flatnonzero``), their end positions scattered back; the branches' values
  are laid out as the reader's union maps to Arrow (``avro_arrow.union_layout``): scattered
  into a nullable column, merged (int+long, float+double), or members of a struct;
* arrays and maps: ``walk_blocks`` finds where every item starts, then the items of all
  the arrays, flattened in order, are read by the item's plan in one call; a map's item is
  its string key then its value;
* numbers are promoted as read (``astype``), timestamps scaled to microseconds, decimals
  turned into decimal128 words, enum indices mapped to the reader's symbols, strings
  checked as UTF-8 when the column is built (the rows that are not fail their records).

``FallbackPlan``: fastavro's ``schemaless_reader`` per value, over the node's writer and
reader schemas stripped of logical types, converted by ``avro_arrow.ValueConverter``. Each
value's bytes are first checked by the vectorised skipper (structure, bounds, indices), so
that it refuses what the vectorised plans refuse. It decodes the records past
``recursive_depth`` into their JSON text, and whole records with ``vectorised=False``.

Invariants: a plan is immutable after compiling and keeps the state of a decode in its
``Context``; no plan changes the position arrays it is given.

Thread-safety: plans are shared read-only between threads.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
from fastavro import schemaless_reader

from broker.schema.avro_arrow import UnionLayout
from broker.schema.avro_columnar_vec import (
    Context,
    expand_spans,
    invalid_utf8,
    numbers,
    read_boolean,
    read_decimals,
    read_double,
    read_fixed_spans,
    read_float,
    read_int,
    read_long,
    read_spans,
    scale_timestamps,
    spans,
    validity,
    with_validity,
)
from broker.schema.avro_columnar_walk import Skipper, check_enum, check_index, walk_blocks


def _scatter(a: np.ndarray, rows: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros((n, *a.shape[1:]), a.dtype)
    out[rows] = a
    return out


def _mask(valid: np.ndarray | None) -> pa.Array | None:
    return None if valid is None or valid.all() else pa.array(~valid)


class Plan:
    """Decodes one writer node into the reader's Arrow type (module docstring)."""

    type: pa.DataType

    def read(self, ctx: Context, pos: np.ndarray, own: np.ndarray) -> tuple[Any, np.ndarray]:
        raise NotImplementedError

    def build(self, ctx: Context, vals: Any, valid: np.ndarray | None) -> pa.Array:
        raise NotImplementedError

    def expand(self, vals: Any, rows: np.ndarray, n: int) -> Any:
        raise NotImplementedError


class CountPlan(Plan):
    """Plans that read nothing: their values are a row count."""

    def expand(self, vals: Any, rows: np.ndarray, n: int) -> Any:
        return n


class NullPlan(CountPlan):
    type = pa.null()

    def read(self, ctx: Context, pos: np.ndarray, own: np.ndarray) -> tuple[Any, np.ndarray]:
        return pos.size, pos

    def build(self, ctx: Context, vals: Any, valid: np.ndarray | None) -> pa.Array:
        return pa.nulls(vals)


class DefaultPlan(CountPlan):
    """A reader field the writer lacks: its default, in every row."""

    def __init__(self, type_: pa.DataType, value: Any) -> None:
        self.type = type_
        self.one = pa.array([value], type_)

    def read(self, ctx: Context, pos: np.ndarray, own: np.ndarray) -> tuple[Any, np.ndarray]:
        return pos.size, pos

    def build(self, ctx: Context, vals: Any, valid: np.ndarray | None) -> pa.Array:
        index = np.zeros(vals, np.int64)
        return self.one.take(pa.array(index, mask=None if valid is None else ~valid))


class ErrorPlan(CountPlan):
    """What cannot resolve: every record reaching it fails with ``message``."""

    def __init__(self, type_: pa.DataType, message: str) -> None:
        self.type = type_
        self.message = message

    def read(self, ctx: Context, pos: np.ndarray, own: np.ndarray) -> tuple[Any, np.ndarray]:
        ctx.fail(own, pos, self.message)
        return pos.size, ctx.lim(own).copy()

    def build(self, ctx: Context, vals: Any, valid: np.ndarray | None) -> pa.Array:
        return pa.nulls(vals, self.type)


class BuiltPlan(Plan):
    """Values already an Arrow array (a union branch merged from several writer branches)."""

    def build(self, ctx: Context, vals: Any, valid: np.ndarray | None) -> pa.Array:
        if valid is None or valid.all():
            return vals
        return vals.take(pa.array(np.arange(len(vals)), mask=~valid))

    def expand(self, vals: Any, rows: np.ndarray, n: int) -> Any:
        index = np.zeros(n, np.int64)
        index[rows] = np.arange(rows.size)
        covered = np.zeros(n, np.bool_)
        covered[rows] = True
        return vals.take(pa.array(index, mask=~covered))


BUILT = BuiltPlan()


class LeafPlan(Plan):
    """Plans whose values are a tuple of numpy arrays, one row each: plans of one
    ``key`` can pool their values (a union's branches into one reader branch)."""

    key: tuple = ()

    def expand(self, vals: Any, rows: np.ndarray, n: int) -> Any:
        return tuple(_scatter(a, rows, n) for a in vals)


class NumPlan(LeafPlan):
    """int, long, float, double (and their logical types) of the writer, promoted."""

    def __init__(self, type_: pa.DataType, writer: str, scale: int | None) -> None:
        self.type = type_
        self.writer = writer
        self.scale = scale
        if pa.types.is_floating(type_):
            self.dtype = np.dtype(np.float32 if type_.bit_width == 32 else np.float64)
        else:
            self.dtype = np.dtype(np.int32 if type_.bit_width == 32 else np.int64)
        self.key = ("num", type_)

    def read(self, ctx: Context, pos: np.ndarray, own: np.ndarray) -> tuple[Any, np.ndarray]:
        if self.writer == "int":
            values, newpos = read_int(ctx, pos, own)
        elif self.writer == "long":
            values, newpos = read_long(ctx, pos, own)
        elif self.writer == "float":
            values, newpos = read_float(ctx, pos), pos + 4
        else:
            values, newpos = read_double(ctx, pos), pos + 8
        if self.scale is not None:
            values = scale_timestamps(ctx, values, pos, own, self.scale)
        return (values.astype(self.dtype, copy=False),), newpos

    def build(self, ctx: Context, vals: Any, valid: np.ndarray | None) -> pa.Array:
        return numbers(self.type, vals[0], valid)


class BoolPlan(LeafPlan):
    type = pa.bool_()
    key = ("bool",)

    def read(self, ctx: Context, pos: np.ndarray, own: np.ndarray) -> tuple[Any, np.ndarray]:
        values, newpos = read_boolean(ctx, pos, own)
        return (values,), newpos

    def build(self, ctx: Context, vals: Any, valid: np.ndarray | None) -> pa.Array:
        return numbers(self.type, vals[0], valid)


class SpanPlan(LeafPlan):
    """bytes and string of the writer into binary or string (checked UTF-8); values
    (starts, lengths, records)."""

    def __init__(self, type_: pa.DataType) -> None:
        self.type = type_
        self.text = pa.types.is_string(type_)
        self.key = ("span", type_)

    def read(self, ctx: Context, pos: np.ndarray, own: np.ndarray) -> tuple[Any, np.ndarray]:
        start, length, newpos = read_spans(ctx, pos, own)
        return (start, length, own), newpos

    def expand(self, vals: Any, rows: np.ndarray, n: int) -> Any:
        start, length, own = vals
        return (*expand_spans(start, length, rows, n), _scatter(own, rows, n))

    def build(self, ctx: Context, vals: Any, valid: np.ndarray | None) -> pa.Array:
        start, length, own = vals
        array = spans(ctx, pa.binary(), start, length, valid)
        if not self.text:
            return array if self.type == pa.binary() else array.cast(self.type)
        text = pa.Array.from_buffers(pa.string(), len(array), array.buffers(), offset=array.offset)
        try:
            text.validate(full=True)
            return text
        except pa.ArrowInvalid:
            pass
        bad = invalid_utf8(array)
        ctx.fail(own[bad], start[bad], "a string that is not UTF-8")
        length = np.where(bad, 0, length)  # empty, not null: a map's keys cannot be (the record is null)
        array = spans(ctx, pa.binary(), start, length, valid)
        return pa.Array.from_buffers(pa.string(), len(array), array.buffers(), offset=array.offset)


class FixedPlan(SpanPlan):
    def __init__(self, type_: pa.DataType, size: int) -> None:
        super().__init__(type_)
        self.size = size

    def read(self, ctx: Context, pos: np.ndarray, own: np.ndarray) -> tuple[Any, np.ndarray]:
        start, length, newpos = read_fixed_spans(ctx, pos, own, self.size)
        return (start, length, own), newpos


class DecimalPlan(LeafPlan):
    """bytes or fixed with the decimal logical type: values (m, 2) uint64 words."""

    def __init__(self, type_: pa.DataType, fixed: int | None) -> None:
        self.type = type_
        self.fixed = fixed
        self.key = ("decimal", type_)

    def read(self, ctx: Context, pos: np.ndarray, own: np.ndarray) -> tuple[Any, np.ndarray]:
        if self.fixed is None:
            start, length, newpos = read_spans(ctx, pos, own)
        else:
            start, length, newpos = read_fixed_spans(ctx, pos, own, self.fixed)
        return (read_decimals(ctx, start, length, own, self.type.precision),), newpos

    def build(self, ctx: Context, vals: Any, valid: np.ndarray | None) -> pa.Array:
        words = vals[0]
        return pa.Array.from_buffers(self.type, words.shape[0], [validity(valid), pa.py_buffer(words)])


class EnumPlan(LeafPlan):
    """Writer symbol indices mapped to the reader's (``table``; -1: unknown, no default)."""

    def __init__(self, name: str, symbols: list[str], table: np.ndarray, writer_symbols: list[str]) -> None:
        self.type = pa.string()
        self.symbols = pa.array(symbols, pa.string())
        self.table = table
        self.writer_symbols = writer_symbols
        self.name = name
        self.key = ("enum", name, tuple(symbols))

    def read(self, ctx: Context, pos: np.ndarray, own: np.ndarray) -> tuple[Any, np.ndarray]:
        index, newpos = read_int(ctx, pos, own)
        check_enum(ctx, index, pos, own, newpos, self.table.size)
        mapped = self.table.take(index)
        if mapped.size and mapped.min() < 0:
            idx = np.flatnonzero(mapped < 0)
            ctx.fail(own[idx], pos[idx], f"a symbol of the writer's enum the reader's {self.name} lacks, without a "
                                         "default")
            mapped[idx] = 0
        return (mapped,), newpos

    def build(self, ctx: Context, vals: Any, valid: np.ndarray | None) -> pa.Array:
        return with_validity(self.symbols.take(pa.array(vals[0])), valid)


class RecordPlan(Plan):
    """``steps`` in the writer's field order: (reader fields it feeds, as (index,
    plan)) or a skipper / a fixed byte count; ``defaults``: reader fields no writer field
    feeds (defaults, or errors)."""

    def __init__(self, type_: pa.DataType, plans: list[Plan], steps: list[tuple[list[int], Skipper | int | None]],
                 defaults: list[int]) -> None:
        self.type = type_
        self.fields = list(type_)
        self.plans = plans
        self.steps = steps
        self.defaults = defaults

    def read(self, ctx: Context, pos: np.ndarray, own: np.ndarray) -> tuple[Any, np.ndarray]:
        vals: list[Any] = [None] * len(self.plans)
        m = pos.size
        for targets, skip in self.steps:
            if targets:
                after = None
                for j in targets:
                    vals[j], q = self.plans[j].read(ctx, pos, own)
                    after = q if after is None else after
                assert after is not None
                pos = after
            elif isinstance(skip, int):
                pos = pos + skip
            elif skip is not None:
                pos = skip.skip(ctx, pos, own)
        for j in self.defaults:
            vals[j], pos = self.plans[j].read(ctx, pos, own)
        return (m, vals), pos

    def build(self, ctx: Context, vals: Any, valid: np.ndarray | None) -> pa.Array:
        n, children_vals = vals
        if not self.plans:
            return pa.StructArray.from_buffers(self.type, n, [validity(valid)], children=[])
        children = [plan.build(ctx, v, None) for plan, v in zip(self.plans, children_vals)]
        return pa.StructArray.from_arrays(children, fields=self.fields, mask=_mask(valid))

    def expand(self, vals: Any, rows: np.ndarray, n: int) -> Any:
        return n, [plan.expand(v, rows, n) for plan, v in zip(self.plans, vals[1])]


class ListPlan(Plan):
    """An array (or a map: ``item`` is an ``EntryPlan``); values (counts, item values)."""

    def __init__(self, type_: pa.DataType, item: Plan, skipper: Skipper, is_map: bool) -> None:
        self.type = type_
        self.item = item
        self.skipper = skipper
        self.is_map = is_map

    def read(self, ctx: Context, pos: np.ndarray, own: np.ndarray) -> tuple[Any, np.ndarray]:
        counts, starts, item_own, end = walk_blocks(ctx, pos, own, self.skipper, True)
        assert starts is not None and item_own is not None
        items, _ = self.item.read(ctx, starts, item_own)
        return (counts, items), end

    def build(self, ctx: Context, vals: Any, valid: np.ndarray | None) -> pa.Array:
        counts, items = vals
        offsets = np.zeros(counts.size + 1, np.int32)
        np.cumsum(counts, out=offsets[1:])
        offsets_array = pa.array(offsets)
        if self.is_map:
            assert isinstance(self.item, EntryPlan)
            keys, values = self.item.build_pair(ctx, items)
            return pa.MapArray.from_arrays(offsets_array, keys, values, type=self.type, mask=_mask(valid))
        built = self.item.build(ctx, items, None)
        return pa.ListArray.from_arrays(offsets_array, built, type=self.type, mask=_mask(valid))

    def expand(self, vals: Any, rows: np.ndarray, n: int) -> Any:
        counts, items = vals
        return _scatter(counts, rows, n), items


class EntryPlan(Plan):
    """A map's entry: the string key, then the value."""

    def __init__(self, value: Plan) -> None:
        self.key = SpanPlan(pa.string())
        self.value = value

    def read(self, ctx: Context, pos: np.ndarray, own: np.ndarray) -> tuple[Any, np.ndarray]:
        keys, pos = self.key.read(ctx, pos, own)
        values, pos = self.value.read(ctx, pos, own)
        return (keys, values), pos

    def build_pair(self, ctx: Context, vals: Any) -> tuple[pa.Array, pa.Array]:
        keys, values = vals
        return self.key.build(ctx, keys, None), self.value.build(ctx, values, None)


class UnionVals:
    """A union's values: ``n`` rows; ``parts[slot]``: (rows or None for all, plan,
    values) per writer branch read into that slot. Rows in no part are null."""

    __slots__ = ("n", "parts")

    def __init__(self, n: int, parts: list[list[tuple[np.ndarray | None, Plan, Any]]]) -> None:
        self.n = n
        self.parts = parts


class UnionPlan(Plan):
    """A writer union: ``branches[b]`` = (reader slot or -1 for null, plan, error
    message or None); laid out as the reader's union (``layout``)."""

    def __init__(self, type_: pa.DataType, layout: UnionLayout,
                 branches: list[tuple[int, Plan | None, str | None]]) -> None:
        self.type = type_
        self.layout = layout
        self.branches = branches
        self.slots = max(len(layout.slot_nodes), 1)

    def read(self, ctx: Context, pos: np.ndarray, own: np.ndarray) -> tuple[Any, np.ndarray]:
        m = pos.size
        index, newpos = read_int(ctx, pos, own)
        check_index(ctx, index, pos, own, newpos, len(self.branches))
        parts: list[list[tuple[np.ndarray | None, Plan, Any]]] = [[] for _ in range(self.slots)]
        for b, (slot, plan, error) in enumerate(self.branches):
            sel = index == b
            count = int(np.count_nonzero(sel))
            if count == 0:
                continue
            rows = None if count == m else np.flatnonzero(sel)
            p = newpos if rows is None else newpos[rows]
            o = own if rows is None else own[rows]
            if error is not None:
                ctx.fail(o, p, error)
                q = ctx.lim(o).copy()
            elif plan is None:
                continue
            else:
                values, q = plan.read(ctx, p, o)
                if slot >= 0:
                    parts[slot].append((rows, plan, values))
            if rows is None:
                newpos = q
            else:
                newpos[rows] = q
        return UnionVals(m, parts), newpos

    def build(self, ctx: Context, vals: Any, valid: np.ndarray | None) -> pa.Array:
        return build_union(ctx, self.type, self.layout, vals, valid)

    def expand(self, vals: Any, rows: np.ndarray, n: int) -> Any:
        return UnionVals(n, [[(rows if r is None else rows[r], plan, v) for r, plan, v in part]
                             for part in vals.parts])


class ReaderUnionPlan(UnionPlan):
    """A reader union against a writer that is not one: every value in one ``slot``."""

    def __init__(self, type_: pa.DataType, layout: UnionLayout, slot: int, plan: Plan | None) -> None:
        super().__init__(type_, layout, [])
        self.slot = slot
        self.plan = plan

    def read(self, ctx: Context, pos: np.ndarray, own: np.ndarray) -> tuple[Any, np.ndarray]:
        parts: list[list[tuple[np.ndarray | None, Plan, Any]]] = [[] for _ in range(self.slots)]
        if self.plan is None:
            return UnionVals(pos.size, parts), pos
        values, newpos = self.plan.read(ctx, pos, own)
        parts[self.slot].append((None, self.plan, values))
        return UnionVals(pos.size, parts), newpos


def _merge(ctx: Context, sources: list[tuple[np.ndarray | None, Plan, Any]],
           n: int) -> tuple[Plan, Any, np.ndarray | None]:
    """The values of one slot from its sources, as rows of ``n``: (plan to build them
    with, values, rows covered (None: all))."""
    if len(sources) == 1:
        rows, plan, vals = sources[0]
        if rows is None:
            return plan, vals, None
        covered = np.zeros(n, np.bool_)
        covered[rows] = True
        return plan, plan.expand(vals, rows, n), covered
    covered = np.zeros(n, np.bool_)
    all_rows = []
    for rows, _, _ in sources:
        assert rows is not None
        covered[rows] = True
        all_rows.append(rows)
    first = sources[0][1]
    if isinstance(first, LeafPlan) and all(isinstance(p, LeafPlan) and p.key == first.key for _, p, _ in sources):
        joined = np.concatenate(all_rows)
        order = np.argsort(joined, kind="stable")
        width = len(sources[0][2])
        vals = tuple(np.concatenate([v[k] for _, _, v in sources])[order] for k in range(width))
        return first, first.expand(vals, joined[order], n), covered
    if all(isinstance(p, CountPlan) for _, p, _ in sources):
        return first, n, covered
    arrays = [plan.build(ctx, vals, None) for _, plan, vals in sources]
    index = np.zeros(n, np.int64)
    at = 0
    for rows in all_rows:
        index[rows] = np.arange(at, at + rows.size)
        at += rows.size
    joined_array = pa.concat_arrays(arrays).take(pa.array(index, mask=~covered))
    return BUILT, joined_array, covered


def _and(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
    if a is None:
        return b
    return a if b is None else a & b


def build_union(ctx: Context, type_: pa.DataType, layout: UnionLayout, vals: UnionVals,
                valid: np.ndarray | None) -> pa.Array:
    n = vals.n
    if layout.kind == "null":
        return pa.nulls(n)
    if layout.kind == "single":
        if not vals.parts[0]:
            return pa.nulls(n, type_)
        plan, values, covered = _merge(ctx, vals.parts[0], n)
        return plan.build(ctx, values, _and(covered, valid))
    members = []
    any_covered = np.zeros(n, np.bool_)
    for slot, field in enumerate(type_):
        if not vals.parts[slot]:
            members.append(pa.nulls(n, field.type))
            continue
        plan, values, covered = _merge(ctx, vals.parts[slot], n)
        members.append(plan.build(ctx, values, covered))
        if covered is None:
            any_covered[:] = True
        else:
            any_covered |= covered
    return pa.StructArray.from_arrays(members, fields=list(type_), mask=_mask(_and(any_covered, valid)))


class FallbackPlan(Plan):
    """fastavro per value (module docstring): ``convert`` maps its raw value to what
    ``pyarrow.array`` takes for ``type``; the values are (a list, each one's record)."""

    def __init__(self, type_: pa.DataType, skipper: Skipper, writer: Any, reader: Any,
                 convert: Callable[[Any], Any]) -> None:
        self.type = type_
        self.skipper = skipper
        self.writer = writer
        self.reader = reader
        self.convert = convert

    def read(self, ctx: Context, pos: np.ndarray, own: np.ndarray) -> tuple[Any, np.ndarray]:
        end = self.skipper.skip(ctx, pos, own)
        values: list[Any] = [None] * pos.size
        good = np.flatnonzero((ctx.code[own] == 0) & (end <= ctx.lim(own)))
        data = ctx.data
        for i in good.tolist():
            start, stop = int(pos[i]), int(end[i])
            buffer = io.BytesIO(data[start:stop].tobytes())
            try:
                raw = schemaless_reader(buffer, self.writer, self.reader, return_named_type=True)
                if buffer.tell() != stop - start:
                    raise ValueError("fastavro read a different length than the value's")
                values[i] = self.convert(raw)
            except Exception as error:  # fastavro's errors are of many types; each fails its record only
                ctx.fail(own[i:i + 1], pos[i:i + 1], f"{type(error).__name__}: {error}"[:200])
        return (values, own), end

    def build(self, ctx: Context, vals: Any, valid: np.ndarray | None) -> pa.Array:
        values, own = vals
        if valid is not None:
            values = [v if ok else None for v, ok in zip(values, valid.tolist())]
        try:
            return pa.array(values, self.type)
        except (pa.ArrowException, ValueError, TypeError, OverflowError):
            pass
        for i, value in enumerate(values):  # the values Arrow refuses fail their records
            try:
                pa.array([value], self.type)
            except (pa.ArrowException, ValueError, TypeError, OverflowError) as error:
                ctx.fail(own[i:i + 1], ctx.start[own[i:i + 1]], f"{type(error).__name__}: {error}"[:200])
                values[i] = None
        return pa.array(values, self.type)

    def expand(self, vals: Any, rows: np.ndarray, n: int) -> Any:
        values, own = vals
        out: list[Any] = [None] * n
        for r, v in zip(rows.tolist(), values):
            out[r] = v
        full_own = np.zeros(n, np.int64)
        full_own[rows] = own
        return out, full_own


__all__ = ["BoolPlan", "DecimalPlan", "DefaultPlan", "EntryPlan", "EnumPlan", "ErrorPlan", "FallbackPlan", "FixedPlan",
           "ListPlan", "NullPlan", "NumPlan", "Plan", "ReaderUnionPlan", "RecordPlan", "SpanPlan", "UnionPlan",
           "build_union"]
