"""``SharePartition``: the state of one topic-partition as one share group consumes it
(KIP-932; Kafka's ``SharePartition``), as a pure state machine: no I/O, no clock, no
locks of its own.

The partition's records from the share-partition start offset (SPSO, ``start_offset``)
to the end offset (SPEO, ``end_offset``: the next offset never fetched by the group) are
in flight. Each in-flight offset has a state and a delivery count:

* AVAILABLE (0): may be acquired (never delivered, released, or its lock expired);
* ACQUIRED (1): delivered to one member, locked until its acquisition lock's deadline;
* ACKNOWLEDGED (2): accepted by the member that held it (terminal);
* ARCHIVED (4): rejected, a gap (no record at that offset: compacted away, a control
  record, an aborted transaction's record), or past the delivery count limit (terminal).

The in-flight offsets are kept as *runs*: contiguous offset ranges with one state, count,
holding member and lock deadline, covering [start_offset, end_offset) with no hole and
ordered by offset. An acknowledgement of part of a run splits it; equal neighbours are
merged again, so a partition consumed batch by batch holds a handful of runs whatever its
record count. When the runs at the start are terminal the start offset moves past them
and they are dropped.

Transitions (``ack`` types are Kafka's: 0 GAP, 1 ACCEPT, 2 RELEASE, 3 REJECT, 4 RENEW):

* acquire: AVAILABLE -> ACQUIRED (delivery count + 1, holder, deadline), for the offsets
  of the batches a fetch returned (new offsets at the end extend ``end_offset``);
* ACQUIRED by the member -> ACKNOWLEDGED (ACCEPT), ARCHIVED (REJECT, GAP), AVAILABLE
  (RELEASE; ARCHIVED when the delivery count reached the limit), ACQUIRED with a new
  deadline (RENEW); an offset not ACQUIRED by that member makes the whole
  acknowledgement fail with INVALID_RECORD_STATE and change nothing;
* a lock's deadline passing, the holder leaving: ACQUIRED -> AVAILABLE (ARCHIVED at the
  delivery count limit);
* the log start offset moving past the start offset (retention, DeleteRecords): the start
  offset follows and the runs below it are dropped.

Records archived undelivered (REJECT, or the delivery count limit reached) are listed in
``dead`` for the owner's dead-letter topic (``drain_dead``).

Persistence: ``state_batches()`` is the state written to ``__share_group_state`` (Kafka's
``PersisterStateBatch``: first offset, last offset, delivery state, delivery count), with
ACQUIRED written as AVAILABLE (a lock never survives a restart, the delivery it counted
does); ``load(start, batches)`` rebuilds a partition from it (offsets between the batches
are AVAILABLE, never delivered) and ``apply_batches`` applies a delta (a ShareUpdate).

Invariants: runs cover exactly [start_offset, end_offset); no run is empty; the first run
is never terminal after ``advance()``; ACQUIRED runs have a holder and a deadline.

Thread-safety: none; the owner (``broker.server.share.manager``) holds a lock per
partition around every call.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4
STATE_NAMES = {AVAILABLE: "AVAILABLE", ACQUIRED: "ACQUIRED", ACKNOWLEDGED: "ACKNOWLEDGED", ARCHIVED: "ARCHIVED"}
TERMINAL = frozenset({ACKNOWLEDGED, ARCHIVED})

ACK_GAP, ACK_ACCEPT, ACK_RELEASE, ACK_REJECT, ACK_RENEW = 0, 1, 2, 3, 4
REJECTED, MAX_DELIVERIES = "REJECTED", "MAX_DELIVERY_ATTEMPTS_REACHED"  # why a record was archived
ACK_TYPES = frozenset({ACK_GAP, ACK_ACCEPT, ACK_RELEASE, ACK_REJECT, ACK_RENEW})


class InvalidRecordState(Exception):
    """An acknowledgement of offsets the member does not hold (INVALID_RECORD_STATE)."""


@dataclass(slots=True)
class Run:
    first: int
    last: int
    state: int
    count: int
    member: str | None = None
    deadline: int = 0

    def same(self, other: Run) -> bool:
        return (self.state == other.state and self.count == other.count and self.member == other.member
                and self.deadline == other.deadline)


@dataclass(frozen=True, slots=True)
class StateBatch:
    """One persisted range: Kafka's ``PersisterStateBatch``."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


class SharePartition:
    """The in-flight state of one share-partition (module docstring)."""

    def __init__(self, start_offset: int, delivery_count_limit: int = 5) -> None:
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.delivery_count_limit = delivery_count_limit
        self.runs: list[Run] = []
        self._firsts: list[int] = []  # runs' first offsets, for bisect (rebuilt on change)
        # (first, last, delivery count, reason) of the records archived undelivered since the
        # owner last drained it: REJECTED, or MAX_DELIVERY_ATTEMPTS_REACHED (the dead-letter
        # topic's candidates; gaps and skipped batches are not)
        self.dead: list[tuple[int, int, int, str]] = []

    # --- reading ---

    def _reindex(self) -> None:
        self._firsts = [r.first for r in self.runs]

    def in_flight(self) -> int:
        """Offsets in flight (end_offset - start_offset)."""
        return self.end_offset - self.start_offset

    def next_fetch_offset(self) -> int:
        """The first AVAILABLE offset, else the end offset: where the next read starts."""
        for r in self.runs:
            if r.state == AVAILABLE:
                return r.first
        return self.end_offset

    def has_available(self) -> bool:
        return any(r.state == AVAILABLE for r in self.runs)

    def state_of(self, offset: int) -> tuple[int, int]:
        """(state, delivery count) of ``offset``; AVAILABLE 0 at or past the end offset,
        ACKNOWLEDGED below the start offset (it was consumed)."""
        if offset < self.start_offset:
            return ACKNOWLEDGED, 0
        if offset >= self.end_offset:
            return AVAILABLE, 0
        r = self.runs[bisect_right(self._firsts, offset) - 1]
        return r.state, r.count

    def acquired_by(self, member: str) -> int:
        return sum(r.last - r.first + 1 for r in self.runs if r.state == ACQUIRED and r.member == member)

    def earliest_deadline(self) -> int | None:
        deadlines = [r.deadline for r in self.runs if r.state == ACQUIRED]
        return min(deadlines) if deadlines else None

    # --- changing ---

    def _set(self, first: int, last: int, **changes) -> None:
        """Set fields of every offset in [first, last] (within the runs), splitting runs
        at the edges; neighbours are merged afterwards by ``_merge``."""
        runs = self.runs
        i = bisect_right(self._firsts, first) - 1
        out = runs[:max(i, 0)]
        for r in runs[max(i, 0):]:
            if r.last < first or r.first > last:
                out.append(r)
                continue
            if r.first < first:
                out.append(Run(r.first, first - 1, r.state, r.count, r.member, r.deadline))
            mid = Run(max(r.first, first), min(r.last, last), r.state, r.count, r.member, r.deadline)
            for k, v in changes.items():
                setattr(mid, k, v)
            out.append(mid)
            if r.last > last:
                out.append(Run(last + 1, r.last, r.state, r.count, r.member, r.deadline))
        self.runs = out
        self._merge()

    def _merge(self) -> None:
        merged: list[Run] = []
        for r in self.runs:
            if merged and merged[-1].same(r) and merged[-1].last + 1 == r.first:
                merged[-1].last = r.last
            else:
                merged.append(r)
        self.runs = merged
        self._reindex()

    def _release_run(self, r: Run) -> None:
        r.state = ARCHIVED if r.count >= self.delivery_count_limit else AVAILABLE
        if r.state == ARCHIVED:
            self.dead.append((r.first, r.last, r.count, MAX_DELIVERIES))
        r.member = None
        r.deadline = 0

    def advance(self) -> bool:
        """Drop the terminal runs at the start and move the start offset past them; True
        when the start offset moved."""
        n = 0
        for r in self.runs:
            if r.state not in TERMINAL:
                break
            n += 1
        if not n:
            return False
        self.start_offset = self.runs[n - 1].last + 1
        del self.runs[:n]
        self._reindex()
        return True

    def move_start(self, log_start_offset: int) -> bool:
        """The log's start offset moved past the start offset: follow it (the records
        below are gone). True when something changed."""
        if log_start_offset <= self.start_offset:
            return False
        self.start_offset = log_start_offset
        if self.end_offset < log_start_offset:
            self.end_offset = log_start_offset
        kept = []
        for r in self.runs:
            if r.last < log_start_offset:
                continue
            if r.first < log_start_offset:
                r = Run(log_start_offset, r.last, r.state, r.count, r.member, r.deadline)
            kept.append(r)
        self.runs = kept
        self._reindex()
        self.advance()
        return True

    def reset(self, offset: int) -> None:
        """Start over at ``offset`` (AlterShareGroupOffsets, a new initialization)."""
        self.start_offset = self.end_offset = offset
        self.runs = []
        self._firsts = []

    def acquire(self, member: str, batches: Iterable[tuple[int, int, bool]], max_records: int,
                deadline: int, *, strict: bool = False, max_in_flight: int | None = None
                ) -> list[tuple[int, int, int]]:
        """Acquire for ``member`` the AVAILABLE offsets of ``batches`` ((base offset, last
        offset, skip), in offset order, as a read returned them) until ``max_records`` are
        acquired: a whole batch at a time (Kafka's batch-optimized mode: the last batch
        may exceed the count), or exactly ``max_records`` when ``strict`` (record-limit
        mode). The offsets of a skipped batch (a control batch, an aborted transaction's
        records under read_committed) become ARCHIVED, never delivered. New
        offsets past ``end_offset`` join the in-flight window while it is below
        ``max_in_flight`` (a batch started is taken whole). The acquired ranges as (first
        offset, last offset, delivery count)."""
        acquired: list[tuple[int, int, int]] = []
        taken = 0
        for base, last, skip in batches:
            if taken >= max_records:
                break
            if last < self.start_offset:
                continue
            base = max(base, self.start_offset)
            if base > self.end_offset:  # a hole in the log (compaction): the offsets between are gaps
                self._extend(self.end_offset, base - 1, ARCHIVED)
            if last >= self.end_offset:
                if max_in_flight is not None and self.end_offset - self.start_offset >= max_in_flight:
                    break
                self._extend(self.end_offset, last, AVAILABLE)
            if skip:
                self._archive_available(base, last)
                continue
            hi = last
            for r in list(self.runs[max(bisect_right(self._firsts, base) - 1, 0):]):
                if r.first > hi:
                    break
                if r.state != AVAILABLE or r.last < base:
                    continue
                a, b = max(r.first, base), min(r.last, hi)
                if strict:
                    b = min(b, a + (max_records - taken) - 1)
                count = r.count + 1
                self._set(a, b, state=ACQUIRED, count=count, member=member, deadline=deadline)
                if acquired and acquired[-1][1] + 1 == a and acquired[-1][2] == count:
                    acquired[-1] = (acquired[-1][0], b, count)
                else:
                    acquired.append((a, b, count))
                taken += b - a + 1
                if strict and taken >= max_records:
                    break
        return acquired

    def _extend(self, first: int, last: int, state: int) -> None:
        if last < first:
            return
        run = Run(first, last, state, 0)
        if self.runs and self.runs[-1].same(run):
            self.runs[-1].last = last
        else:
            self.runs.append(run)
            self._firsts.append(first)
        self.end_offset = last + 1

    def _archive_available(self, first: int, last: int) -> None:
        for r in list(self.runs):
            if r.state == AVAILABLE and r.last >= first and r.first <= last:
                self._set(max(r.first, first), min(r.last, last), state=ARCHIVED)

    def drain_dead(self) -> list[tuple[int, int, int, str]]:
        """The records archived undelivered since the last call (``dead``), emptied."""
        out, self.dead = self.dead, []
        return out

    def acknowledge(self, member: str, first: int, last: int, types: Sequence[int], deadline: int = 0
                    ) -> list[StateBatch]:
        """Apply one acknowledgement batch of ``member``: ``types`` has one type for the
        whole range or one per offset. Raises ``InvalidRecordState`` (nothing changed)
        when an offset is not ACQUIRED by ``member``, ``ValueError`` for a malformed
        batch. The changed ranges, as persisted."""
        n = last - first + 1
        if n <= 0 or not types or (len(types) != 1 and len(types) != n) or any(t not in ACK_TYPES for t in types):
            raise ValueError(f"malformed acknowledgement batch [{first}, {last}] with {len(types)} types")
        if first < self.start_offset or last >= self.end_offset:
            raise InvalidRecordState(f"offsets [{first}, {last}] are not in flight "
                                     f"([{self.start_offset}, {self.end_offset}))")
        for r in self.runs[bisect_right(self._firsts, first) - 1:]:
            if r.first > last:
                break
            if r.state != ACQUIRED or r.member != member:
                # a GAP for an offset already archived (a control record's) is harmless
                if r.state == ARCHIVED and all(t == ACK_GAP for t in types):
                    continue
                raise InvalidRecordState(
                    f"offsets [{max(r.first, first)}, {min(r.last, last)}] are {STATE_NAMES[r.state]}"
                    + ("" if r.state != ACQUIRED else " by another member"))
        if len(types) == 1:
            segments = [(first, last, types[0])]
        else:
            segments = []
            for i, t in enumerate(types):
                o = first + i
                if segments and segments[-1][2] == t and segments[-1][1] + 1 == o:
                    segments[-1] = (segments[-1][0], o, t)
                else:
                    segments.append((o, o, t))
        for a, b, t in segments:
            if t == ACK_ACCEPT:
                self._set(a, b, state=ACKNOWLEDGED, member=None, deadline=0)
            elif t in (ACK_REJECT, ACK_GAP):
                if t == ACK_REJECT:
                    self.dead.extend((max(r.first, a), min(r.last, b), r.count, REJECTED) for r in self.runs
                                     if r.last >= a and r.first <= b and r.state == ACQUIRED)
                self._set(a, b, state=ARCHIVED, member=None, deadline=0)
            elif t == ACK_RENEW:
                self._set(a, b, deadline=deadline)
            else:  # RELEASE
                for r in list(self.runs):
                    if r.last >= a and r.first <= b and r.state == ACQUIRED:
                        lo, hi = max(r.first, a), min(r.last, b)
                        final = ARCHIVED if r.count >= self.delivery_count_limit else AVAILABLE
                        if final == ARCHIVED:
                            self.dead.append((lo, hi, r.count, MAX_DELIVERIES))
                        self._set(lo, hi, state=final, member=None, deadline=0)
        return self.batches_in(first, last)

    def release(self, member: str | None = None, now: int | None = None) -> list[StateBatch]:
        """Release the ACQUIRED offsets of ``member`` (every member when None) whose lock
        expired at ``now`` (any deadline when None); the changed ranges."""
        changed: list[tuple[int, int]] = []
        for r in self.runs:
            if r.state != ACQUIRED:
                continue
            if member is not None and r.member != member:
                continue
            if now is not None and r.deadline > now:
                continue
            self._release_run(r)
            changed.append((r.first, r.last))
        if not changed:
            return []
        self._merge()
        out: list[StateBatch] = []
        for a, b in changed:
            out.extend(self.batches_in(a, b))
        return out

    # --- persistence ---

    def batches_in(self, first: int, last: int) -> list[StateBatch]:
        out = []
        for r in self.runs:
            if r.last < first or r.first > last:
                continue
            state = AVAILABLE if r.state == ACQUIRED else r.state
            out.append(StateBatch(max(r.first, first), min(r.last, last), state, r.count))
        return out

    def state_batches(self) -> list[StateBatch]:
        """The whole in-flight state as persisted (ACQUIRED as AVAILABLE), neighbours with
        the same persisted state merged; never-delivered AVAILABLE offsets are left out."""
        out: list[StateBatch] = []
        for r in self.runs:
            state = AVAILABLE if r.state == ACQUIRED else r.state
            if state == AVAILABLE and r.count == 0:
                continue
            if out and out[-1].last_offset + 1 == r.first and out[-1].delivery_state == state \
                    and out[-1].delivery_count == r.count:
                out[-1] = StateBatch(out[-1].first_offset, r.last, state, r.count)
            else:
                out.append(StateBatch(r.first, r.last, state, r.count))
        return out

    def load(self, start_offset: int, batches: Iterable[StateBatch]) -> None:
        """Rebuild from persisted state (a ShareSnapshot)."""
        self.reset(start_offset)
        self.apply_batches(start_offset, batches)

    def apply_batches(self, start_offset: int, batches: Iterable[StateBatch]) -> None:
        """Apply persisted changes (a ShareUpdate): the batches' states and counts over
        their ranges, then the start offset (ACQUIRED read back as AVAILABLE)."""
        if start_offset > self.start_offset:
            self.move_start(start_offset)
        for b in sorted(batches, key=lambda x: x.first_offset):
            first, last = max(b.first_offset, self.start_offset), b.last_offset
            if last < first:
                continue
            state = AVAILABLE if b.delivery_state == ACQUIRED else b.delivery_state
            if state not in STATE_NAMES:
                continue
            if last >= self.end_offset:
                self._extend(self.end_offset, last, AVAILABLE)
            self._set(first, last, state=state, count=b.delivery_count, member=None, deadline=0)
        self.advance()


__all__ = [
    "ACKNOWLEDGED", "ACK_ACCEPT", "ACK_GAP", "ACK_RELEASE", "ACK_REJECT", "ACK_RENEW", "ACK_TYPES", "ACQUIRED",
    "ARCHIVED", "AVAILABLE", "MAX_DELIVERIES", "REJECTED", "InvalidRecordState", "Run", "SharePartition",
    "StateBatch",
]
