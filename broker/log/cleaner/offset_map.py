"""``SkimpyOffsetMap``: key -> the latest offset seen for it, in bounded memory (Kafka's),
filled and read a window of records at a time with numpy.

Owns: the map pass 1 of a cleaning fills over the dirty section of a log and pass 2
consults (a record is kept only if its offset is >= the map's offset for its key), and the
128-bit key hash (``hash_keys``) it is keyed by.

Memory, as Kafka's (the table; the deferred records are below): Kafka stores (MD5
digest, offset) pairs in a fixed byte buffer of ``log.cleaner.dedupe.buffer.size /
log.cleaner.threads`` bytes: ``slots = memory // (hash_size + 8)``, and a cleaning stops
filling it at ``max_entries = slots * load_factor`` entries
(``log.cleaner.io.buffer.load.factor``, 0.9). Here the buffer is an
open-addressing table, a numpy int64 array of one row a slot (hash high half, hash low
half, offset + 1; 0 = an empty slot; a probe reads one cache line): 24 bytes a slot, at
most ``slots`` slots, so the table never exceeds ``memory``. It starts small and grows
fourfold (rehashing, vectorised) while it is more than half full and below ``slots``, so a
cleaning of a few keys does not touch (nor page in) the whole buffer; while it grows, the
previous table (at most a quarter of ``slots``) is held too. Linear probing from
``hash_high * capacity >> 64``; with the table at ``slots`` the load is at most the load
factor, as Kafka's.

The hash (``hash_keys``): each key is cut into little-endian 64-bit words (the last one
zero-padded); word j is mixed with a per-position key, ``m_j = mix(w_j ^ K_j)`` (``mix``:
a bijective 64-bit finalizer, murmur3's ``fmix64`` for the high half and splitmix64's for
the low half), the ``m_j`` are summed mod 2^64, and the sum is mixed with the key's length.
(Keys all of one length, as fixed-size keys, take a shorter path to the same hash: the
words of each position gathered as one array, ``_hash_equal_lengths``.)
The two halves use independent random seeds drawn per map (``os.urandom``; the hashes are
never stored nor shown, so no one outside can aim keys at a collision). Two keys are the
same entry when both halves are equal, as Kafka takes two keys of equal MD5 for one key.
Collision probability: modelling each half as an independent random function, two given
distinct keys collide with probability 2^-128; a cleaning that looks m records up in a
map of n entries confuses two keys with probability at most n * m * 2^-128 (below 2^-64
for n = m = 2^32), against MD5's 2^-128 per pair in Kafka. Every key (empty keys
included) is hashed, whatever its length; a null key is never put (the cleaner drops it).

``put_records(hashes, offsets)`` puts a window of records in offset order, as a loop of
per-record puts would, stopping before the first record of a new key that would make the
map hold more than ``max_entries`` keys (Kafka's ``is_full``): the cleaning then ends at
``latest_offset + 1`` and the next cleaning starts from there.

Three forms, one after the other (``mode``): while at most ``defer_limit`` records were put
(<= ``max_entries``: every key fits, nothing can be refused), they are only kept, in arrays
of (hash high half, low half, offset), 24 bytes a record ("deferred"; ``reserve`` sizes
them for the records a cleaning announces). The first read settles them ("sorted"): a
sort of the high halves (a value sort with each record's index in the low bits, several
times faster than an argsort; ``_order_by_high_half``); each run of one high half is one
key and its last record
(offsets increase) its latest offset; the keys sorted by high half answer ``get_records``
by binary search (plus a check of the low half), and the latest records, in offset order,
are ``sorted_offsets`` without a sort. Equal high halves of different keys (about 2^-64 a
pair) make the settling build the table instead. A put past ``defer_limit`` records, or
after a read, moves the keys into the table ("table", below) and goes on there as before,
so where a full map stops is the same. Memory of the deferred form: settling holds, at its
peak, about 48 bytes a record (the records' offsets and low halves, the order, the sorted
halves, and the sorted form being built, each array freed once used; a few bytes of masks):
``SETTLE_BYTES_PER_RECORD`` = 48 a record, so ``defer_limit = min(max_entries, memory //
48)`` keeps it within ``memory``; ``reserved_bytes`` is what a caller must leave to the map
(48 a record announced, or the table's bytes when more are announced). At a move to the
table, the settled keys (24 bytes each, at most half of ``memory``) are held beside the
new table while they are inserted (with equal high halves of different keys, the sorted
records, 24 bytes each). ``is_latest`` (pass 2) keeps the sorted offsets (8 bytes an
entry, the sorted form's own) and a bitmap of at most 8 bytes an entry; beside a table,
both are held besides its ``memory``.

Invariants: the table never holds more than ``slots`` entries (``OffsetMapFullError``
otherwise); ``latest_offset`` is the largest offset put since ``clear`` (-1 when none);
offsets put are increasing across calls (a record's offset is above every offset put
before it), so the last offset put for a key is its latest; the deferred form never holds
more than ``defer_limit`` records; the sorted form's high halves are distinct.

Thread-safety: none; each cleaner thread owns its map. numpy is imported on first use (by
the first cleaning, not with the broker).
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["SkimpyOffsetMap", "OffsetMapFullError", "HASH_SIZE", "BYTES_PER_ENTRY", "hash_keys",
           "dedupe_last"]

HASH_SIZE = 16  # 128 bits, as Kafka's MD5
BYTES_PER_ENTRY = HASH_SIZE + 8  # hash + int64 offset
INITIAL_CAPACITY = 1 << 14  # slots of a new table (384 KiB), grown fourfold past half full
GROW_LOAD = 0.5  # a table below ``slots`` grows once more than this fraction is used
# bytes a deferred record may take at the peak of settling: its hash halves and offset (24),
# the sort's order (8), the sorted halves (16)
SETTLE_BYTES_PER_RECORD = 48
_DEFER, _SORTED, _TABLE = "deferred", "sorted", "table"

# 64-bit finalizers: (multiplier 1, multiplier 2, shift 1, shift 2, shift 3)
_FMIX64 = (0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53, 33, 33, 33)  # murmur3
_SPLITMIX64 = (0xBF58476D1CE4E5B9, 0x94D049BB133111EB, 30, 27, 31)  # splitmix64 (Stafford 13)
_GOLDEN = 0x9E3779B97F4A7C15


def _mix(x, mixer) -> Any:
    """``mixer`` applied to every element of ``x`` (a uint64 array, changed in place)."""
    import numpy as np
    m1, m2, s1, s2, s3 = mixer
    x ^= x >> np.uint64(s1)
    x *= np.uint64(m1)
    x ^= x >> np.uint64(s2)
    x *= np.uint64(m2)
    x ^= x >> np.uint64(s3)
    return x


def _words(data, pos, rem) -> Any:
    """The little-endian uint64 at every byte position ``pos`` of ``data`` (uint8 array),
    keeping its first ``rem`` (1..8) bytes, zeros above; never reads past ``data``."""
    import numpy as np
    if data.size < 8:
        data = np.concatenate([data, np.zeros(8 - data.size, np.uint8)])
    # element i of ``every`` is the 8 bytes at byte i (overlapping, unaligned view)
    every = np.ndarray((data.size - 7,), "<u8", buffer=data, strides=(1,))
    last = data.size - 8
    at = np.minimum(pos, last)
    w = every[at]
    tail = pos > last  # a word reaching the end of ``data``: read the last 8 bytes, shift
    if tail.any():
        w[tail] >>= ((pos[tail] - last) * 8).astype(np.uint64)
    short = rem < 8
    if short.any():
        w[short] &= (np.uint64(1) << (rem[short] * 8).astype(np.uint64)) - np.uint64(1)
    return w


def hash_keys(data, starts, lengths, seeds: tuple[int, int, int, int]) -> tuple[Any, Any]:
    """(high, low) uint64 halves of the 128-bit hash of every key ``data[starts[i]:
    starts[i] + lengths[i]]`` (``data``: uint8 array; ``lengths`` >= 0). See the module
    docstring; ``seeds``: (word seed, length seed) of the high half, then of the low."""
    import numpy as np
    starts = np.asarray(starts, np.int64)
    lengths = np.asarray(lengths, np.int64)
    n = lengths.size
    if n and lengths.min() == lengths.max():
        return _hash_equal_lengths(data, starts, int(lengths[0]), seeds)
    return _hash_any_lengths(data, starts, lengths, seeds)


def _hash_equal_lengths(data, starts, length: int, seeds: tuple[int, int, int, int]) -> tuple[Any, Any]:
    """``hash_keys`` of keys all of ``length`` bytes (fixed-size keys, the common case): the
    words of each key position j are one array (a gather at ``starts + 8 j``), summed
    column by column: the same hash without the per-word bookkeeping of the general path."""
    import numpy as np
    n = starts.size
    nw = (length + 7) >> 3
    step = np.arange(0, 8 * nw, 8, dtype=np.int64)[:, None]
    pos = starts[None, :] + step  # (word index, key)
    if data.size < 8 or (nw and int(starts.max()) + 8 * nw > data.size):  # a word past the end
        rem = np.broadcast_to(length - step, (nw, n))
        words = _words(data, pos.reshape(-1), rem.reshape(-1)).reshape(nw, n)
    else:
        every = np.ndarray((data.size - 7,), "<u8", buffer=data, strides=(1,))
        words = every[pos]  # (fancy indexing: ``take`` is slow on this strided view)
        if length & 7:
            words[-1] &= np.uint64((1 << ((length & 7) * 8)) - 1)
    halves = []
    for mixer, word_seed, len_seed in ((_FMIX64, seeds[0], seeds[1]), (_SPLITMIX64, seeds[2], seeds[3])):
        acc = np.zeros(n, np.uint64)
        if nw:
            pos_keys = _mix(np.arange(nw, dtype=np.uint64) * np.uint64(_GOLDEN) + np.uint64(word_seed), mixer)
            m = _mix(words ^ pos_keys[:, None], mixer)
            for j in range(nw):
                acc += m[j]
        acc ^= _mix(np.array([length], np.uint64) ^ np.uint64(len_seed), mixer)
        halves.append(_mix(acc, mixer))
    return halves[0], halves[1]


def _hash_any_lengths(data, starts, lengths, seeds: tuple[int, int, int, int]) -> tuple[Any, Any]:
    """``hash_keys`` of keys of any lengths."""
    import numpy as np
    n = lengths.size
    nw = (lengths + 7) >> 3
    total = int(nw.sum())
    ends = np.cumsum(nw)
    first = ends - nw
    key_of = np.repeat(np.arange(n), nw)
    j = np.arange(total) - first[key_of]  # word index within its key
    off = j * 8
    words = _words(data, starts[key_of] + off, lengths[key_of] - off) if total else np.empty(0, np.uint64)
    nonempty = nw > 0
    halves = []
    last = ends[nonempty] - 1
    before = first[nonempty] - 1
    for mixer, word_seed, len_seed in ((_FMIX64, seeds[0], seeds[1]), (_SPLITMIX64, seeds[2], seeds[3])):
        acc = np.zeros(n, np.uint64)
        if total:
            maxw = int(nw.max())
            pos_keys = _mix(np.arange(maxw, dtype=np.uint64) * np.uint64(_GOLDEN) + np.uint64(word_seed), mixer)
            m = _mix(words ^ pos_keys.take(j), mixer)
            # per key, the sum of its words' m (mod 2^64): differences of a running sum
            run = np.cumsum(m, dtype=np.uint64)
            sums = run.take(last)
            sums -= np.where(before >= 0, run.take(before, mode="clip"), np.uint64(0))
            acc[nonempty] = sums
        length_key = _mix(lengths.astype(np.uint64) ^ np.uint64(len_seed), mixer)
        halves.append(_mix(acc ^ length_key, mixer))
    return halves[0], halves[1]


def dedupe_last(hi, lo) -> tuple[Any, Any]:
    """The distinct keys of (``hi``, ``lo``): (index of each one's first occurrence, index
    of its last), both in order of first occurrence."""
    import numpy as np
    n = hi.size
    if n == 0:
        empty = np.empty(0, np.int64)
        return empty, empty
    order = np.argsort(hi)
    shi, slo = hi[order], lo[order]
    if n > 1 and ((shi[1:] == shi[:-1]) & (slo[1:] != slo[:-1])).any():
        # equal high halves of different keys (about 2^-64 a pair): sort by both halves
        order = np.lexsort((lo, hi))
        shi, slo = hi[order], lo[order]
    new = np.empty(n, bool)
    new[0] = True
    new[1:] = (shi[1:] != shi[:-1]) | (slo[1:] != slo[:-1])
    starts = np.flatnonzero(new)
    firsts = np.minimum.reduceat(order, starts)
    lasts = np.maximum.reduceat(order, starts)
    by_first = np.argsort(firsts)
    return firsts[by_first], lasts[by_first]


def _order_by_high_half(hi) -> tuple[Any, Any]:
    """(order, ``hi[order]``): the indexes of ``hi`` sorted by value, equal values in
    increasing index. Sorts values, not indexes (numpy's value sort is several times faster
    than its argsort): each high half with its low bits replaced by its index, so the
    index rides along; when that made the order wrong (two values differing only in those
    low bits: ``hi[order]`` not sorted, about n^2 / 2^(65 - log2 n)), a stable argsort."""
    import numpy as np
    n = hi.size
    bits = max(1, (n - 1).bit_length())
    if bits < 64:
        shift = np.uint64(bits)
        order = np.arange(n, dtype=np.int64)
        packed = hi >> shift
        packed <<= shift
        packed |= order.view(np.uint64)
        packed.sort()
        np.bitwise_and(packed, np.uint64((1 << bits) - 1), out=order.view(np.uint64))
        del packed
        shi = hi[order]
        if n < 2 or not (shi[1:] < shi[:-1]).any():
            return order, shi
        del order, shi
    order = np.argsort(hi, kind="stable")
    return order, hi[order]


class OffsetMapFullError(Exception):
    """A put of a new key into a map that already holds ``slots`` entries."""


class SkimpyOffsetMap:
    def __init__(self, memory: int, load_factor: float = 0.9) -> None:
        if memory < BYTES_PER_ENTRY:
            raise ValueError(f"offset map memory {memory} is below one entry ({BYTES_PER_ENTRY} bytes)")
        if not 0 < load_factor <= 1:
            raise ValueError(f"load factor {load_factor} must be in (0, 1]")
        self.memory = memory
        self.slots = memory // BYTES_PER_ENTRY
        self.max_entries = max(1, int(self.slots * load_factor))
        seeds = os.urandom(32)
        self.seeds = tuple(int.from_bytes(seeds[i:i + 8], "little") for i in range(0, 32, 8))
        self._capacity = 0
        # one row a slot (hash high half, low half, offset + 1; 0: an empty slot), int64:
        # a probe reads one cache line
        self._table: Any = None
        self._size = 0
        self.latest_offset = -1
        self.lookups = 0
        self.puts = 0
        # the deferred records (the sorted form's path): preallocated arrays, filled to
        # ``_pending_n``; the settled form: the distinct keys sorted by high half, each
        # one's latest offset, and those offsets sorted
        self.defer_limit = min(self.max_entries, memory // SETTLE_BYTES_PER_RECORD)
        self._mode = _DEFER
        self._planned = 0  # entries announced by ``reserve``
        self._pending: Any = None
        self._pending_n = 0
        self._keys: Any = None
        self._latest_sorted: Any = None
        self._membership: Any = None  # (state, sorted offsets, bitmap or None): ``is_latest``

    # --- the table ---

    def _allocate(self, capacity: int) -> None:
        import numpy as np
        self._capacity = capacity
        self._size = 0
        self._table = np.zeros((capacity, 3), np.int64)

    def _reserve(self, entries: int) -> None:
        """Grow the table so that ``entries`` keys keep it at most half full (or at
        ``slots``)."""
        import numpy as np
        cap = self._capacity
        if cap == self.slots or (cap and entries <= cap * GROW_LOAD):
            return
        new = max(cap, min(self.slots, INITIAL_CAPACITY))
        while new < self.slots and entries > new * GROW_LOAD:
            new = min(self.slots, new * 4)
        if new == cap:
            return
        if cap == 0 or self._size == 0:
            self._allocate(new)
            return
        rows = self._table[self._table[:, 2] > 0]
        self._allocate(new)
        self._insert(rows[:, 0].view(np.uint64), rows[:, 1].view(np.uint64), rows[:, 2])

    def reserve(self, entries: int) -> None:
        """Announce at most ``entries`` records to come (a bound the caller knows: the
        offsets of a dirty section). While the map defers, the records' arrays are sized
        for ``min(entries, defer_limit)`` at once (pages are touched only as they fill) and
        a table, if one is needed later, for ``min(entries, max_entries)`` keys; with a
        table, it is sized now, grown once, not a step at a time with a rehash each."""
        entries = min(entries, self.max_entries)
        self._planned = max(self._planned, entries)
        if self._mode == _TABLE:
            self._reserve(entries)
        elif self._mode == _DEFER and self._pending_n == 0:
            self._grow_pending(min(entries, self.defer_limit))

    @property
    def reserved_bytes(self) -> int:
        """The most memory the map may hold for the records announced (``reserve``) while it
        defers: ``SETTLE_BYTES_PER_RECORD`` a record, what settling needs at its peak;
        past ``defer_limit`` records, or with a table, the table's bytes for them (as
        ``table_bytes`` once the table exists). The caller's room is ``memory`` less this."""
        if self._mode == _DEFER and self._planned <= self.defer_limit:
            return max(self._planned, self._pending_n) * SETTLE_BYTES_PER_RECORD
        if self._mode == _SORTED:  # the keys (24 bytes each) and their offsets sorted (8)
            return self._size * (BYTES_PER_ENTRY + 8)
        return max(self.table_bytes, self._capacity_for(self._planned) * BYTES_PER_ENTRY)

    def _capacity_for(self, entries: int) -> int:
        """The table's capacity ``_reserve`` gives an empty table for ``entries`` keys."""
        new = min(self.slots, INITIAL_CAPACITY)
        while new < self.slots and entries > new * GROW_LOAD:
            new = min(self.slots, new * 4)
        return new

    def _home(self, hi) -> Any:
        """Each hash's first slot: ``hi * capacity / 2^64`` (Lemire's multiply-shift range
        reduction, on the top 32 bits), or ``hi % capacity`` past 2^32 slots."""
        import numpy as np
        cap = self._capacity
        if cap < 1 << 32:
            return ((hi >> np.uint64(32)) * np.uint64(cap) >> np.uint64(32)).astype(np.int64)
        return (hi % np.uint64(cap)).astype(np.int64)

    def _find(self, hi, lo) -> Any:
        """Slot of every key of (``hi``, ``lo``) in the table, -1 when absent."""
        import numpy as np
        out = np.full(hi.size, -1, np.int64)
        if self._capacity == 0 or self._size == 0 or hi.size == 0:
            return out
        cap = self._capacity
        table = self._table
        idx = np.arange(hi.size)
        pos = self._home(hi)
        qhi, qlo = hi.view(np.int64), lo.view(np.int64)
        for _ in range(cap):  # a full table (load factor 1) ends after every slot
            rows = table.take(pos, axis=0)
            occupied = rows[:, 2] != 0
            same = occupied & (rows[:, 0] == qhi) & (rows[:, 1] == qlo)
            out[idx[same]] = pos[same]
            go_on = occupied & ~same
            if not go_on.any():
                break
            idx, qhi, qlo = idx[go_on], qhi[go_on], qlo[go_on]
            pos = pos[go_on] + 1
            pos[pos == cap] = 0
        return out

    def _insert(self, hi, lo, stored) -> None:
        """Put the keys (``stored``: offset + 1 each; a key may come more than once, its
        largest offset wins); the caller reserved room for every new one.

        Probing in rounds, every pending key one slot a round: a key found gets the
        larger offset (``maximum.at``, so repeats of a key in one round agree), a key at
        an empty slot claims it (one claimant wins; the others retry the same slot next
        round: it may be the same key), any other key moves to the next slot. Keys of one
        hash walk the same slots in step, so a key never gets two slots."""
        import numpy as np
        cap = self._capacity
        table = self._table
        flat = table.reshape(-1)
        idx = np.arange(hi.size)
        pos = self._home(hi)
        qhi, qlo, qst = hi.view(np.int64), lo.view(np.int64), stored
        rounds = 0
        while idx.size:
            rounds += 1
            if rounds > 2 * cap + 2:  # a key visits each slot at most twice (a lost claim)
                raise OffsetMapFullError(f"offset map full ({cap} slots)")
            rows = table.take(pos, axis=0)
            occupied = rows[:, 2] != 0
            same = occupied & (rows[:, 0] == qhi) & (rows[:, 1] == qlo)
            if same.any():
                np.maximum.at(flat, pos[same] * 3 + 2, qst[same])
            moving = occupied & ~same
            stay = np.zeros(idx.size, bool)
            empty = ~occupied
            if empty.any():
                pe, ie = pos[empty], idx[empty]
                flat.put(pe * 3 + 2, -1 - ie)  # claims; one per slot stays
                won = flat.take(pe * 3 + 2) == -1 - ie
                pw3 = pe[won] * 3
                ew = np.flatnonzero(empty)[won]
                flat.put(pw3, qhi[ew])
                flat.put(pw3 + 1, qlo[ew])
                flat.put(pw3 + 2, qst[ew])
                self._size += int(pw3.size)
                stay[empty] = ~won
            go_on = moving | stay
            if not go_on.any():
                break
            pos = pos + moving
            pos[pos == cap] = 0
            idx, pos, qhi, qlo, qst = idx[go_on], pos[go_on], qhi[go_on], qlo[go_on], qst[go_on]

    # --- the deferred records and their sorted form ---

    def _grow_pending(self, n: int) -> None:
        """Room for ``n`` deferred records (the arrays: key hash high half, low half, offset)."""
        import numpy as np
        old = self._pending
        if old is not None and old[0].size >= n:
            return
        arrays = (np.empty(n, np.uint64), np.empty(n, np.uint64), np.empty(n, np.int64))
        if old is not None and self._pending_n:
            k = self._pending_n
            for new, prev in zip(arrays, old):
                new[:k] = prev[:k]
        self._pending = arrays

    def _defer(self, hi, lo, offsets) -> None:
        n, k = int(offsets.size), self._pending_n
        if self._pending is None or self._pending[0].size < k + n:
            cap = self._pending[0].size if self._pending is not None else 0
            self._grow_pending(min(self.defer_limit, max(k + n, 2 * cap, INITIAL_CAPACITY)))
        ph, pl, po = self._pending
        ph[k:k + n] = hi
        pl[k:k + n] = lo
        po[k:k + n] = offsets
        self._pending_n = k + n

    def _settle(self) -> None:
        """The deferred records as the sorted form (``_SORTED``): sort the records by hash
        high half, equal ones in record order (``_order_by_high_half``); each run of one
        high half is one key, its last record its latest offset (offsets increase). Equal
        high halves of different keys (about 2^-64 a pair) go to the table instead (every
        record inserted, the latest of each key wins), so the sorted form's high halves are
        distinct and a lookup is one binary search. Memory at the peak: the records' offsets
        and low halves, the order and the sorted halves, a few bytes of masks a record, and
        what the sorted form keeps (within ``SETTLE_BYTES_PER_RECORD``)."""
        import numpy as np
        if self._mode != _DEFER:
            return
        n = self._pending_n
        if n == 0:
            empty = np.empty(0, np.int64)
            self._keys = (empty.view(np.uint64), empty.view(np.uint64), empty)
            self._latest_sorted = empty
            self._pending, self._pending_n, self._size, self._mode = None, 0, 0, _SORTED
            return
        hi, lo, off = (a[:n] for a in self._pending)
        self._pending, self._pending_n = None, 0
        order, shi = _order_by_high_half(hi)
        del hi
        slo = lo[order]
        del lo
        first = np.empty(n, bool)  # the first record of each key, in sorted order
        first[0] = True
        np.not_equal(shi[1:], shi[:-1], out=first[1:])
        if not (first[1:] | (slo[1:] == slo[:-1])).all():  # one high half, two low halves
            del first
            self._mode = _TABLE
            self._capacity = self._size = 0
            self._reserve(max(self._planned, min(n, self.max_entries)))
            self._insert(shi, slo, off[order] + 1)
            return
        last = np.empty(n, bool)  # the last (latest) record of each key
        last[:-1] = first[1:]
        last[-1] = True
        khi = shi[first]
        del shi
        klo = slo[first]
        del slo, first
        lasts = order[last]
        del order, last
        koff = off[lasts]
        latest = np.zeros(n, bool)
        latest[lasts] = True
        del lasts
        self._keys = (khi, klo, koff)
        self._latest_sorted = off[latest]  # increasing, as the offsets put
        self._size = int(khi.size)
        self._mode = _SORTED

    def _to_table(self) -> None:
        """Leave the deferred or sorted form for the table (a put past ``defer_limit``
        records, or after the map was read): its keys, each with its latest offset, are
        inserted into a table sized for them or for what ``reserve`` announced."""
        if self._mode == _DEFER:
            self._settle()
        if self._mode != _SORTED:
            return
        khi, klo, koff = self._keys
        self._keys = self._latest_sorted = None
        self._mode = _TABLE
        self._capacity = self._size = 0
        self._table = None
        self._reserve(max(self._planned, khi.size))
        if khi.size:
            self._insert(khi, klo, koff + 1)

    # --- records in bulk ---

    def hash(self, data, starts, lengths) -> tuple[Any, Any]:
        """``hash_keys`` with this map's seeds."""
        s = self.seeds
        return hash_keys(data, starts, lengths, (s[0], s[1], s[2], s[3]))

    def put_records(self, hi, lo, offsets) -> int:
        """Put the records (key hashes ``hi``/``lo``, increasing ``offsets``, numpy) in
        order, as many per-record puts would, stopping before the first record of a new
        key once the map holds ``max_entries`` keys. Returns how many records were put
        (all of them unless the map filled)."""
        n = int(offsets.size)
        if n == 0:
            return 0
        if self._mode == _DEFER and self._pending_n + n <= self.defer_limit:
            # at most defer_limit <= max_entries records: every key fits, none is refused
            self._defer(hi, lo, offsets)
            self.puts += n
            self.latest_offset = max(self.latest_offset, int(offsets[n - 1]))
            return n
        self._to_table()
        put = n
        if self._size + n > self.max_entries:  # it may fill: find where, in record order
            firsts, _ = dedupe_last(hi, lo)
            new_firsts = firsts[self._find(hi[firsts], lo[firsts]) < 0]
            room = self.max_entries - self._size
            if new_firsts.size > room:
                put = int(new_firsts[max(room, 0)])  # the first record of the key that does not fit
                if put == 0:
                    return 0
                hi, lo, offsets = hi[:put], lo[:put], offsets[:put]
            self._reserve(self._size + min(put, int(new_firsts.size)))
        else:
            self._reserve(self._size + n)
        self._insert(hi, lo, offsets + 1)
        self.puts += put
        self.latest_offset = max(self.latest_offset, int(offsets[put - 1]))
        return put

    def get_records(self, hi, lo) -> Any:
        """The map's offset for every key hash (-1 when absent), numpy int64."""
        import numpy as np
        self.lookups += int(hi.size)
        self._settle()
        if self._mode == _SORTED:
            khi, klo, koff = self._keys
            if khi.size == 0:
                return np.full(hi.size, -1, np.int64)
            at = np.minimum(np.searchsorted(khi, hi), khi.size - 1)
            return np.where((khi.take(at) == hi) & (klo.take(at) == lo), koff.take(at), -1)
        slot = self._find(hi, lo)
        out = np.full(hi.size, -1, np.int64)
        found = slot >= 0
        out[found] = self._table[slot[found], 2] - 1
        return out

    def sorted_offsets(self) -> Any:
        """Every offset of the map, sorted (numpy int64): pass 2's test of "latest of its
        key" in the dirty section, where offsets are unique."""
        import numpy as np
        self._settle()
        if self._mode == _SORTED:
            return self._latest_sorted
        if self._size == 0:
            return np.empty(0, np.int64)
        off = self._table[:, 2]
        return np.sort(off[off > 0] - 1)

    def is_latest(self, offsets) -> Any:
        """Per offset of ``offsets`` (numpy int64): it is one of the map's offsets, the
        latest of its key (pass 2's test in the dirty section, where offsets are unique).
        A lookup in a bitmap of the map's offsets over their span when that span is at most
        8 offsets an entry (the bitmap then takes no more bytes than ``sorted_offsets``),
        else a binary search in ``sorted_offsets``; both are built once per state of the
        map (its puts and form)."""
        import numpy as np
        state = (self.puts, self._mode)
        if self._membership is None or self._membership[0] != state:
            latest = self.sorted_offsets()
            bitmap = None
            if latest.size and int(latest[-1]) - int(latest[0]) < 8 * latest.size:
                bitmap = np.zeros(int(latest[-1]) - int(latest[0]) + 1, bool)
                bitmap[latest - latest[0]] = True
            self._membership = (state, latest, bitmap)
        _, latest, bitmap = self._membership
        if latest.size == 0:
            return np.zeros(offsets.size, bool)
        if bitmap is None:
            found = np.minimum(np.searchsorted(latest, offsets), latest.size - 1)
            return latest[found] == offsets
        at = offsets - latest[0]
        inside = np.clip(at, 0, bitmap.size - 1)
        out = bitmap[inside]
        out &= at == inside
        return out

    # --- one key at a time (tests, tools) ---

    def _hash_one(self, key: bytes) -> tuple[Any, Any]:
        import numpy as np
        data = np.frombuffer(key, np.uint8) if key else np.zeros(0, np.uint8)
        return self.hash(data, np.zeros(1, np.int64), np.array([len(key)], np.int64))

    def put(self, key: bytes, offset: int) -> None:
        import numpy as np
        self._to_table()
        hi, lo = self._hash_one(key)
        if self._find(hi, lo)[0] < 0:
            if self._size >= self.slots:
                raise OffsetMapFullError(f"offset map full ({self.slots} entries)")
            self._reserve(self._size + 1)
        self._insert(hi, lo, np.array([offset + 1], np.int64))
        self.puts += 1
        self.latest_offset = max(self.latest_offset, offset)

    def get(self, key: bytes) -> int:
        """The latest offset put for ``key``; -1 when absent."""
        hi, lo = self._hash_one(key)
        return int(self.get_records(hi, lo)[0])

    def contains(self, key: bytes) -> bool:
        return self.get(key) >= 0

    def is_full(self) -> bool:
        """True once the map holds ``max_entries`` keys: a cleaning stops filling it."""
        return self.size >= self.max_entries

    def clear(self) -> None:
        """Empty the map (and give back a grown table: the next cleaning grows its own)."""
        self._capacity = 0
        self._table = None
        self._size = 0
        self.latest_offset = -1
        self.lookups = self.puts = 0
        self._mode = _DEFER
        self._planned = self._pending_n = 0
        self._pending = self._keys = self._latest_sorted = self._membership = None

    @property
    def capacity(self) -> int:
        """Slots of the table now (at most ``slots``)."""
        return self._capacity

    @property
    def table_bytes(self) -> int:
        """Bytes of the table now (24 a slot; at most ``memory``)."""
        return self._capacity * BYTES_PER_ENTRY

    @property
    def size(self) -> int:
        """Distinct keys held (settles the deferred records)."""
        self._settle()
        return self._size

    def __len__(self) -> int:
        return self.size

    @property
    def utilization(self) -> float:
        return self.size / self.slots

    @property
    def mode(self) -> str:
        """"deferred" (records kept, not yet sorted), "sorted" or "table"."""
        return self._mode

    def __repr__(self) -> str:
        return (f"SkimpyOffsetMap(mode={self._mode}, entries={self.size}, slots={self.slots}, "
                f"latest_offset={self.latest_offset})")
