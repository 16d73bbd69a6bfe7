"""Where Avro values end, for many positions at once: the skippers of the columnar Avro
decoder, and the walk of array and map blocks.

Owns ``Skipper`` and its kinds (fixed sizes, varints, length-prefixed values, records,
arrays and maps, unions) and ``walk_blocks``. A skipper moves an array of positions, one
per value, past one writer node without producing values: ``avro_columnar_plan`` skips the
fields the reader lacks with them and finds where each item of an array starts.

Format: Avro's binary encoding. An array or a map is a series of blocks: a long count of
items (0 ends the series; a negative count -c is c items preceded by a long byte size,
which is read and not used: the items are walked), then the items; a map's item is a
string key then the value.

How: records skip field after field (runs of fixed-size fields in one step); unions read
the branch index of every position and skip each branch for the positions that took it;
``walk_blocks`` reads the next block count of every array still open in rounds, and within
a block the items in rounds (round k moves the k-th item of every array that has one;
fixed-size items are computed at once), recording where each item starts, in the order of
the arrays then the items. When only a few arrays are left with many items (a long array
in a few records), their items are skipped in plain Python (``Skipper.skip1``, checked
alike; an array it refuses goes back to the rounds, which name the problem).

Invariants: skippers check what they read as the readers do (a union or enum index out of
range, a boolean byte above 1, a varint too long, a length past the record's end) and fail
the record (``Context.fail``), moving its position to the record's end. A block count is
at most the bytes left in its record divided by an item's smallest size (``MAX_EMPTY_ITEMS``
for items of no bytes), so a walk takes at most as many rounds as its record has bytes.
Data nested more than ``MAX_NESTING`` unions and arrays deep (only a recursive type nests
without bound) fails its record.

Thread-safety: skippers are immutable once built (a recursive record's is completed while
compiling, before use) and keep the state of a decode in its ``Context``.
"""

from __future__ import annotations

import numpy as np

from broker.record.limits import INT32_MAX
from broker.schema.avro_columnar_vec import Context, read_boolean, read_int, read_long, read_spans

# Unions and arrays inside one another in data past which a record fails: more than a
# schema nests (avro.MAX_DEPTH), so only a recursive type's data reaches it
MAX_NESTING = 128
MAX_EMPTY_ITEMS = 1 << 24  # items of one block when items take no bytes (nulls, empty records)
MAX_ITEMS = INT32_MAX  # items of one array column in a batch (Arrow's int32 offsets)
# Items of the last few arrays of a walk are skipped in plain Python (~1 us an item) rather
# than one numpy round per item (~10 us a round, whatever the number of arrays): from
# SCALAR_WALK_ARRAYS arrays left down, when more than SCALAR_WALK_ITEMS rounds remain.
SCALAR_WALK_ARRAYS = 8
SCALAR_WALK_ITEMS = 16


def _nested(ctx: Context, pos: np.ndarray, own: np.ndarray) -> bool:
    """Whether data went deeper than MAX_NESTING (its records fail)."""
    if ctx.depth <= MAX_NESTING:
        return False
    ctx.fail(own, pos, f"values nested more than {MAX_NESTING} unions and arrays deep")
    return True


class Skipper:
    """Moves positions past one writer node. ``fixed``: its constant size, if any;
    ``pure``: skipping it reads nothing (a constant size and nothing to check; a boolean
    or a union of fixed-size branches has a size but must be checked); ``min_size``: the
    fewest bytes a value takes."""

    fixed: int | None = None
    pure = False
    min_size: int = 1

    def skip(self, ctx: Context, pos: np.ndarray, own: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def skip1(self, data: memoryview, p: int, lim: int, depth: int) -> int:
        """The position after one value at ``p``, in plain Python (the items of the few
        long arrays left in a walk); ``Invalid`` for anything the vectorised skip would
        refuse (the walk then goes back to it, for its message)."""
        raise NotImplementedError


class SkipFixed(Skipper):
    pure = True

    def __init__(self, size: int) -> None:
        self.fixed = self.min_size = self.size = size

    def skip(self, ctx: Context, pos: np.ndarray, own: np.ndarray) -> np.ndarray:
        return pos + self.size

    def skip1(self, data: memoryview, p: int, lim: int, depth: int) -> int:
        p += self.size
        if p > lim:
            raise Invalid
        return p


class SkipBoolean(Skipper):
    fixed = 1

    def skip(self, ctx: Context, pos: np.ndarray, own: np.ndarray) -> np.ndarray:
        return read_boolean(ctx, pos, own)[1]

    def skip1(self, data: memoryview, p: int, lim: int, depth: int) -> int:
        if p >= lim or data[p] > 1:
            raise Invalid
        return p + 1


class SkipVarint(Skipper):
    """An int, long or enum (``symbols``: the index must be below it)."""

    def __init__(self, int32: bool, symbols: int | None = None) -> None:
        self.int32 = int32
        self.symbols = symbols

    def skip(self, ctx: Context, pos: np.ndarray, own: np.ndarray) -> np.ndarray:
        if self.symbols is None:
            return (read_int if self.int32 else read_long)(ctx, pos, own)[1]
        index, newpos = read_int(ctx, pos, own)
        check_enum(ctx, index, pos, own, newpos, self.symbols)
        return newpos

    def skip1(self, data: memoryview, p: int, lim: int, depth: int) -> int:
        value, p = varint1(data, p, lim, self.int32)
        if self.symbols is not None and not 0 <= value < self.symbols:
            raise Invalid
        return p


class SkipBytes(Skipper):
    def skip(self, ctx: Context, pos: np.ndarray, own: np.ndarray) -> np.ndarray:
        return read_spans(ctx, pos, own)[2]

    def skip1(self, data: memoryview, p: int, lim: int, depth: int) -> int:
        length, p = varint1(data, p, lim, False)
        if length < 0 or length > lim - p:
            raise Invalid
        return p + length


class SkipRecord(Skipper):
    """Fields one after the other; runs of fixed-size fields in one step. Filled after
    creation (``set_fields``) so that a recursive record can refer to itself."""

    def __init__(self) -> None:
        self.steps: list[Skipper | int] = []
        self.fixed = None
        self.min_size = 0

    def set_fields(self, fields: list[Skipper]) -> None:
        steps: list[Skipper | int] = []
        for f in fields:
            if f.pure and f.fixed is not None:
                if steps and isinstance(steps[-1], int):
                    steps[-1] += f.fixed
                else:
                    steps.append(f.fixed)
            else:
                steps.append(f)
        self.steps = steps
        self.min_size = sum(f.min_size for f in fields)
        sizes = [f.fixed for f in fields]
        self.fixed = sum(s for s in sizes if s is not None) if None not in sizes else None
        self.pure = all(isinstance(s, int) for s in steps)

    def skip(self, ctx: Context, pos: np.ndarray, own: np.ndarray) -> np.ndarray:
        for step in self.steps:
            pos = pos + step if isinstance(step, int) else step.skip(ctx, pos, own)
        return pos

    def skip1(self, data: memoryview, p: int, lim: int, depth: int) -> int:
        for step in self.steps:
            p = p + step if isinstance(step, int) else step.skip1(data, p, lim, depth)
        if p > lim:
            raise Invalid
        return p


class SkipList(Skipper):
    """An array (or a map: its item skipper reads the key then the value)."""

    def __init__(self, item: Skipper) -> None:
        self.item = item

    def skip(self, ctx: Context, pos: np.ndarray, own: np.ndarray) -> np.ndarray:
        return walk_blocks(ctx, pos, own, self.item, False)[3]

    def skip1(self, data: memoryview, p: int, lim: int, depth: int) -> int:
        if depth >= MAX_NESTING:
            raise Invalid
        item = self.item
        while True:
            count, p = varint1(data, p, lim, False)
            if count == 0:
                return p
            if count < 0:
                _, p = varint1(data, p, lim, False)
                count = -count
            if count > (MAX_EMPTY_ITEMS if item.fixed == 0 else (lim - p) // max(item.min_size, 1)):
                raise Invalid
            if item.pure and item.fixed is not None:
                p += count * item.fixed
            else:
                for _ in range(count):
                    p = item.skip1(data, p, lim, depth + 1)


class SkipUnion(Skipper):
    def __init__(self, branches: list[Skipper]) -> None:
        self.branches = branches
        self.min_size = 1 + min((b.min_size for b in branches), default=0)
        sizes = {b.fixed for b in branches}
        only = sizes.pop() if len(sizes) == 1 else None
        self.fixed = 1 + only if only is not None and len(branches) <= 64 else None  # a 1-byte index

    def skip(self, ctx: Context, pos: np.ndarray, own: np.ndarray) -> np.ndarray:
        index, newpos = read_int(ctx, pos, own)
        check_index(ctx, index, pos, own, newpos, len(self.branches))
        ctx.depth += 1
        try:
            if _nested(ctx, pos, own):
                return ctx.lim(own).copy()
            for b, branch in enumerate(self.branches):
                if branch.fixed == 0:
                    continue
                rows = np.flatnonzero(index == b)
                if rows.size == index.size:
                    newpos = branch.skip(ctx, newpos, own)
                elif rows.size:
                    newpos[rows] = branch.skip(ctx, newpos[rows], own[rows])
        finally:
            ctx.depth -= 1
        return newpos

    def skip1(self, data: memoryview, p: int, lim: int, depth: int) -> int:
        if depth >= MAX_NESTING:
            raise Invalid
        index, p = varint1(data, p, lim, True)
        if not 0 <= index < len(self.branches):
            raise Invalid
        return self.branches[index].skip1(data, p, lim, depth + 1)


class Invalid(Exception):
    """A value the plain-Python skip cannot take (``Skipper.skip1``)."""


def varint1(data: memoryview, p: int, lim: int, int32: bool) -> tuple[int, int]:
    """One zigzag varint at ``p``, checked as the vectorised readers check it."""
    z = shift = 0
    for size in range(1, 11):
        if p >= lim:
            raise Invalid
        b = data[p]
        p += 1
        z |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            if (int32 and (size > 5 or z > 0xFFFFFFFF)) or (size == 10 and b > 1):
                raise Invalid
            return (z >> 1) ^ -(z & 1), p
    raise Invalid


def check_index(ctx: Context, index: np.ndarray, pos: np.ndarray, own: np.ndarray, newpos: np.ndarray,
                 count: int) -> None:
    bad = (index < 0) | (index >= count)
    if bad.any():
        idx = np.flatnonzero(bad)
        ctx.fail(own[idx], pos[idx], f"a union branch index out of range (the union has {count} branches)")
        newpos[idx] = ctx.lim(own)[idx]
        index[idx] = -1


def check_enum(ctx: Context, index: np.ndarray, pos: np.ndarray, own: np.ndarray, newpos: np.ndarray,
                count: int) -> None:
    bad = (index < 0) | (index >= count)
    if bad.any():
        idx = np.flatnonzero(bad)
        ctx.fail(own[idx], pos[idx], f"an enum index out of range (the enum has {count} symbols)")
        newpos[idx] = ctx.lim(own)[idx]
        index[idx] = 0


def walk_blocks(ctx: Context, pos: np.ndarray, own: np.ndarray, item: Skipper,
                record: bool) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None, np.ndarray]:
    """The blocks of arrays (or maps) at ``pos``: (items per array, the start of every
    item in order (array by array), the record of every item, the positions after the
    arrays); with ``record`` False only the counts and the positions."""
    m = pos.size
    counts = np.zeros(m, np.int64)
    end = pos.copy()
    lim = ctx.lim(own)
    chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (array, item number, start)
    active = np.arange(m)
    ctx.depth += 1
    try:
        if _nested(ctx, pos, own):
            return counts, np.zeros(0, np.int64), np.zeros(0, np.int64), lim.copy()
        while active.size:
            a_own = own[active]
            count, q = read_long(ctx, end[active], a_own)
            neg = np.flatnonzero(count < 0)
            if neg.size:  # a negative count: its absolute value, then the block's size in bytes
                q[neg] = read_long(ctx, q[neg], a_own[neg])[1]
                count[neg] = -count[neg]
            room = lim[active] - q
            if item.min_size == 0 and item.fixed == 0:
                over = (count < 0) | (count > MAX_EMPTY_ITEMS)
            else:
                over = (count < 0) | (count > room // max(item.min_size, 1))
            if over.any():
                idx = np.flatnonzero(over)
                ctx.fail(a_own[idx], q[idx], "an array or map block count larger than the record can hold")
                count[idx] = 0
                q[idx] = lim[active][idx]
            end[active] = q
            open_ = count > 0
            if not open_.all():
                active, count, q = active[open_], count[open_], q[open_]
            if not active.size:
                break
            base = counts[active]
            if item.fixed is not None:
                if record or not item.pure:
                    total = int(count.sum())
                    k = np.arange(total) - np.repeat(np.cumsum(count) - count, count)
                    starts = np.repeat(q, count) + k * item.fixed
                    if not item.pure:  # sizes known, contents still checked
                        item_own = np.repeat(own[active], count)
                        wrong = item.skip(ctx, starts, item_own) != starts + item.fixed
                        if wrong.any():  # a union index written in more than one byte
                            ctx.fail(item_own[wrong], starts[wrong], "a value longer than its type's size")
                    if record:
                        chunks.append((np.repeat(active, count), np.repeat(base, count) + k, starts))
                end[active] = q + count * item.fixed
            else:
                live = np.arange(active.size)
                r = 0
                cur = q
                while live.size:
                    if live.size <= SCALAR_WALK_ARRAYS and int(count[live].max()) - r > SCALAR_WALK_ITEMS:
                        live = _walk_scalar(ctx, active, live, count, cur, base, r, own, lim, item, chunks, record)
                        if not live.size:
                            break
                    rows = active[live]
                    starts = cur[live]
                    if record:
                        chunks.append((rows, base[live] + r, starts))
                    cur[live] = item.skip(ctx, starts, own[rows])
                    r += 1
                    live = live[count[live] > r]
                end[active] = cur
            counts[active] += count
    finally:
        ctx.depth -= 1
    if not record:
        return counts, None, None, end
    total = int(counts.sum())
    if total > MAX_ITEMS:
        raise ValueError(f"an array or map column of {total} items in one batch (Arrow's limit is {MAX_ITEMS}): "
                         "decode fewer records at a time")
    if len(chunks) == 1 and chunks[0][0].size == total:
        rows, _, starts = chunks[0]
        if rows.size < 2 or (rows[1:] >= rows[:-1]).all():
            return counts, starts, own[rows], end
    first = np.cumsum(counts) - counts
    flat = np.empty(total, np.int64)
    flat_own = np.empty(total, np.int64)
    for rows, number, starts in chunks:
        at = first[rows] + number
        flat[at] = starts
        flat_own[at] = own[rows]
    return counts, flat, flat_own, end


def _walk_scalar(ctx: Context, active: np.ndarray, live: np.ndarray, count: np.ndarray, cur: np.ndarray,
                 base: np.ndarray, r: int, own: np.ndarray, lim: np.ndarray, item: Skipper,
                 chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray]], record: bool) -> np.ndarray:
    """The items left (from item ``r`` on) of the few arrays ``live`` of a block, skipped
    in plain Python; returns the arrays it could not walk (a value ``skip1`` refused: the
    vectorised rounds walk them and say why)."""
    data = ctx.data.data  # a memoryview: its items are ints
    left = []
    for a in live.tolist():
        row = int(active[a])
        p, stop, n = int(cur[a]), int(lim[row]), int(count[a]) - r
        starts = [0] * n
        try:
            for i in range(n):
                starts[i] = p
                p = item.skip1(data, p, stop, ctx.depth)
        except (Invalid, IndexError):
            left.append(a)
            continue
        cur[a] = p
        if record:
            chunks.append((np.full(n, row), base[a] + r + np.arange(n), np.array(starts, np.int64)))
    return np.array(left, np.int64)



__all__ = ["MAX_EMPTY_ITEMS", "MAX_ITEMS", "MAX_NESTING", "SkipBoolean", "SkipBytes", "SkipFixed", "SkipList",
           "SkipRecord", "SkipUnion", "SkipVarint", "Skipper", "check_enum", "check_index", "varint1", "walk_blocks"]
