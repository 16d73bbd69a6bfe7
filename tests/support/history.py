"""A Jepsen-style history of a Kafka workload and its checker (H1-H8; H1-H7 are
RELIABILITY.md's table, H8 the read-uncommitted check issue 19 names).

``History`` records operations, thread-safely, in the order they happen (each gets an
increasing index): every value a workload writes is unique (``History.value``), so a
value names one write.

* ``send(process, partition, value)`` returns an op; ``op.ok(offset)``, ``op.fail()``
  (definitely not written: an error the client reports as such, or an aborted
  transaction) or ``op.info()`` (unknown: a timeout) completes it. A transactional
  producer groups its sends with ``txn(process)`` -> ``t.send(...)``, then
  ``t.commit()`` (invoked) and ``t.committed()`` / ``t.aborted()`` / ``t.unknown()``:
  the sends of an aborted transaction become failed writes, those of a committed one ok
  writes (with the offsets their acks gave), those of an unknown one infos.
* ``poll(process, records)``: what one poll returned, ``[(partition, offset, value)]``,
  in the order the consumer returned them; ``assign(process, partitions)`` marks a
  (re)assignment of a consumer (H6 looks at polls between two of them);
  ``read_committed`` polls are marked (H8 looks at them).

``check(history, drained=True)`` returns a ``Report``: one list of anomaly descriptions
per check, empty when it passes:

* H1 inconsistent-offsets: a (partition, offset) with two different values (acks and
  polls together).
* H2 duplicate: a value at two different offsets (with idempotence, each value is one
  record).
* H3 lost-write: an acknowledged write at offset a, while some poll saw an offset b > a of
  that partition, yet no poll ever saw a's value.
* H4 unseen: acknowledged writes no poll saw (only with ``drained``: after the final
  drain, there must be none).
* H5 aborted-read (G1a): a value of a failed write (or aborted transaction) was polled.
* H6 poll-skip / nonmonotonic-poll: within one consumer and one assignment, two
  consecutive records of a partition go backwards or sideways (nonmonotonic), or jump
  over an offset that holds a known value (skip).
* H7 nonmonotonic-send: one producer's acknowledged writes to one partition, in the
  order it invoked them, do not have increasing offsets.
* H8 read-uncommitted: a read_committed poll returned a transaction's value before that
  transaction's commit was even invoked.

Share groups (KIP-932) have their own model, ``check_share(history, limit, drained)``:
a share consumer's ``deliver(process, [(partition, offset, value, delivery_count)])``
records what one poll delivered, ``acknowledge(process, [(partition, offset, kind)])``
(kind: "accept", "release", "reject") returns an op completed by ``ok()`` (the broker
confirmed it) or ``fail()`` (refused: INVALID_RECORD_STATE and the like). The checks:

* S1 acknowledged-twice: a record accepted (confirmed) twice.
* S2 redelivered-after-ack: a record delivered again after an accept or a reject of it
  was confirmed (the acknowledgement completed before the delivery's poll began).
* S3 delivery-count: one record's deliveries do not have increasing delivery counts, or
  a count is above the group's delivery count limit, or a first delivery is not 1 (with
  ``crashes``, a first delivery may be above 1: the broker counts a delivery when it
  acquires the records, and a response lost to a broker crash still counted, as in Kafka).
* S4 not-delivered (with ``drained``): an acknowledged write never delivered, or a
  record released with deliveries left never delivered again.
* S5 inconsistent-value: a delivered (partition, offset) whose value differs from what
  the producer's ack or another delivery says is there.

Thread-safety: ``History`` records under a lock; ``check`` works on a snapshot.
"""

from __future__ import annotations

import itertools
import threading
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass
class Op:
    index: int
    kind: str  # "send", "poll", "assign", "txn"
    process: str
    partition: int | None = None
    value: str | None = None
    status: str = "invoke"  # invoke, ok, fail, info
    offset: int | None = None
    records: list[tuple[int, int, str]] = field(default_factory=list)
    read_committed: bool = False
    txn: Txn | None = None
    done_index: int | None = None


class Txn:
    """A transaction of one producer (see the module docstring)."""

    def __init__(self, history: History, process: str) -> None:
        self.history = history
        self.process = process
        self.sends: list[Op] = []
        self.commit_index: int | None = None
        self.outcome = "open"  # open, committed, aborted, unknown

    def send(self, partition: int, value: str) -> Op:
        op = self.history.send(self.process, partition, value)
        op.txn = self
        self.sends.append(op)
        return op

    def commit(self) -> None:
        self.commit_index = self.history._next()

    def committed(self) -> None:
        self.outcome = "committed"
        for op in self.sends:
            if op.status == "invoke":
                op.info()

    def aborted(self) -> None:
        self.outcome = "aborted"
        for op in self.sends:
            op.status = "fail"

    def unknown(self) -> None:
        self.outcome = "unknown"
        for op in self.sends:
            if op.status != "fail":
                op.status = "info"


class History:
    """The recorder (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counter = itertools.count()
        self._values = itertools.count()
        self.ops: list[Op] = []

    def _next(self) -> int:
        with self._lock:
            return next(self._counter)

    def value(self, prefix: str = "v") -> str:
        with self._lock:
            return f"{prefix}{next(self._values)}"

    def _add(self, op: Op) -> Op:
        with self._lock:
            op.index = next(self._counter)
            self.ops.append(op)
        return op

    def send(self, process: str, partition: int, value: str) -> Op:
        op = self._add(Op(0, "send", process, partition, value))
        history = self

        def ok(offset: int) -> None:
            op.status, op.offset, op.done_index = "ok", offset, history._next()

        def fail() -> None:
            op.status, op.done_index = "fail", history._next()

        def info() -> None:
            op.status, op.done_index = "info", history._next()

        op.ok, op.fail, op.info = ok, fail, info  # type: ignore[attr-defined]
        return op

    def txn(self, process: str) -> Txn:
        return Txn(self, process)

    def poll(self, process: str, records: Iterable[tuple[int, int, str]], read_committed: bool = False) -> Op:
        return self._add(Op(0, "poll", process, records=list(records), status="ok", read_committed=read_committed))

    def assign(self, process: str, partitions: Iterable[int]) -> Op:
        return self._add(Op(0, "assign", process, records=[(p, -1, "") for p in partitions], status="ok"))

    def deliver(self, process: str, records: Iterable[tuple[int, int, str, int]]) -> Op:
        """One share consumer poll: [(partition, offset, value, delivery count)]."""
        return self._add(Op(0, "deliver", process, records=list(records), status="ok"))

    def acknowledge(self, process: str, records: Iterable[tuple[int, int, str]]) -> Op:
        """Acknowledgements sent: [(partition, offset, kind)]; complete with ``ok()`` /
        ``fail()``."""
        op = self._add(Op(0, "ack", process, records=list(records)))
        history = self

        def ok() -> None:
            op.status, op.done_index = "ok", history._next()

        def fail() -> None:
            op.status, op.done_index = "fail", history._next()

        op.ok, op.fail = ok, fail  # type: ignore[attr-defined]
        return op

    def snapshot(self) -> list[Op]:
        with self._lock:
            return list(self.ops)


@dataclass
class Report:
    anomalies: dict[str, list[str]]
    sends_ok: int = 0
    values_polled: int = 0

    @property
    def valid(self) -> bool:
        return not any(self.anomalies.values())

    def summary(self) -> str:
        bad = {k: len(v) for k, v in self.anomalies.items() if v}
        return f"{self.sends_ok} acknowledged writes, {self.values_polled} values polled, anomalies: {bad or 'none'}"


CHECKS = ("H1 inconsistent-offsets", "H2 duplicate", "H3 lost-write", "H4 unseen", "H5 aborted-read",
          "H6 poll-skip/nonmonotonic-poll", "H7 nonmonotonic-send", "H8 read-uncommitted")


def check(history: History | list[Op], drained: bool = True) -> Report:
    ops = history.snapshot() if isinstance(history, History) else list(history)
    out: dict[str, list[str]] = {c: [] for c in CHECKS}
    sends = [o for o in ops if o.kind == "send"]
    polls = [o for o in ops if o.kind == "poll"]
    ok_sends = [o for o in sends if o.status == "ok" and (o.txn is None or o.txn.outcome == "committed")]
    failed_values = {o.value for o in sends if o.status == "fail"}

    # what each (partition, offset) holds, and where each value was seen
    at: dict[tuple[int, int], set[str]] = defaultdict(set)
    where: dict[str, set[tuple[int, int]]] = defaultdict(set)
    for o in ok_sends:
        at[(o.partition, o.offset)].add(o.value)
        where[o.value].add((o.partition, o.offset))
    polled_values: set[str] = set()
    max_polled: dict[int, int] = {}
    for p in polls:
        for partition, offset, value in p.records:
            at[(partition, offset)].add(value)
            where[value].add((partition, offset))
            polled_values.add(value)
            max_polled[partition] = max(max_polled.get(partition, -1), offset)

    # H1, H2
    for (partition, offset), values in sorted(at.items()):
        if len(values) > 1:
            out["H1 inconsistent-offsets"].append(f"partition {partition} offset {offset} holds {sorted(values)}")
    for value, places in sorted(where.items()):
        if len(places) > 1:
            out["H2 duplicate"].append(f"{value} at {sorted(places)}")

    # H3, H4
    for o in ok_sends:
        if o.value in polled_values:
            continue
        if max_polled.get(o.partition, -1) > o.offset:
            out["H3 lost-write"].append(f"{o.value} acknowledged at {o.partition}/{o.offset}, a later offset "
                                        f"{max_polled[o.partition]} was polled, {o.value} never")
        elif drained:
            out["H4 unseen"].append(f"{o.value} acknowledged at {o.partition}/{o.offset}, never polled")

    # H5
    for p in polls:
        for partition, offset, value in p.records:
            if value in failed_values:
                out["H5 aborted-read"].append(f"{p.process} polled {value} at {partition}/{offset}, "
                                              "a write that failed (or was aborted)")

    # H6: consecutive records of a partition within one consumer's assignment
    known = set(at)
    known_by_partition: dict[int, list[int]] = defaultdict(list)
    for partition, offset in known:
        known_by_partition[partition].append(offset)
    for offsets in known_by_partition.values():
        offsets.sort()
    last: dict[tuple[str, int], int] = {}
    for o in ops:
        if o.kind == "assign":
            for key in [k for k in last if k[0] == o.process]:
                del last[key]
        elif o.kind == "poll":
            for partition, offset, _value in o.records:
                key = (o.process, partition)
                prev = last.get(key)
                if prev is not None:
                    if offset <= prev:
                        out["H6 poll-skip/nonmonotonic-poll"].append(
                            f"{o.process} polled {partition}/{offset} after {partition}/{prev} (nonmonotonic)")
                    else:
                        skipped = _between(known_by_partition[partition], prev, offset)
                        if skipped:
                            out["H6 poll-skip/nonmonotonic-poll"].append(
                                f"{o.process} polled {partition}/{prev} then {partition}/{offset}, skipping "
                                f"known offsets {skipped[:5]}")
                last[key] = offset

    # H7
    by_producer: dict[tuple[str, int], list[Op]] = defaultdict(list)
    for o in ok_sends:
        by_producer[(o.process, o.partition)].append(o)
    for (process, partition), writes in sorted(by_producer.items()):
        writes.sort(key=lambda w: w.index)
        for a, b in itertools.pairwise(writes):
            if b.offset <= a.offset:
                out["H7 nonmonotonic-send"].append(
                    f"{process} sent {a.value} then {b.value} to partition {partition}: offsets {a.offset}, "
                    f"{b.offset}")

    # H8
    txn_of = {o.value: o.txn for o in sends if o.txn is not None}
    for p in polls:
        if not p.read_committed:
            continue
        for partition, offset, value in p.records:
            t = txn_of.get(value)
            if t is not None and (t.commit_index is None or t.commit_index > p.index):
                out["H8 read-uncommitted"].append(f"{p.process} (read_committed) polled {value} at "
                                                  f"{partition}/{offset} before its transaction's commit")
    return Report(out, len(ok_sends), len(polled_values))


def _between(sorted_offsets: list[int], low: int, high: int) -> list[int]:
    import bisect
    i = bisect.bisect_right(sorted_offsets, low)
    j = bisect.bisect_left(sorted_offsets, high)
    return sorted_offsets[i:j]


__all__ = ["CHECKS", "History", "Op", "Report", "Txn", "check"]


SHARE_CHECKS = ("S1 acknowledged-twice", "S2 redelivered-after-ack", "S3 delivery-count", "S4 not-delivered",
                "S5 inconsistent-value")


def check_share(history: History | list[Op], limit: int = 5, drained: bool = True, crashes: bool = False) -> Report:
    """The share-group model (module docstring)."""
    ops = history.snapshot() if isinstance(history, History) else list(history)
    out: dict[str, list[str]] = {c: [] for c in SHARE_CHECKS}
    sends = [o for o in ops if o.kind == "send" and o.status == "ok"]
    at: dict[tuple[int, int], str] = {(o.partition, o.offset): o.value for o in sends}
    deliveries: dict[tuple[int, int], list[tuple[int, int, str]]] = defaultdict(list)  # -> (index, count, process)
    for o in ops:
        if o.kind != "deliver":
            continue
        for partition, offset, value, count in o.records:
            key = (partition, offset)
            if at.setdefault(key, value) != value:
                out["S5 inconsistent-value"].append(f"{key} delivered {value!r}, holds {at[key]!r}")
            deliveries[key].append((o.index, count, o.process))
    closed: dict[tuple[int, int], int] = {}  # record -> done index of its first confirmed accept/reject
    accepted: dict[tuple[int, int], int] = defaultdict(int)
    released: dict[tuple[int, int], int] = {}
    for o in ops:
        if o.kind != "ack" or o.status != "ok":
            continue
        for partition, offset, kind in o.records:
            key = (partition, offset)
            if kind == "accept":
                accepted[key] += 1
                if accepted[key] == 2:
                    out["S1 acknowledged-twice"].append(f"{key} accepted twice")
            if kind in ("accept", "reject"):
                closed.setdefault(key, o.done_index if o.done_index is not None else o.index)
            elif kind == "release":
                released[key] = o.index
    for key, ds in sorted(deliveries.items()):
        ds.sort()
        counts = [c for _, c, _ in ds]
        growing = all(b > a for a, b in zip(counts, counts[1:], strict=False))
        if (counts[0] != 1 and not crashes) or not growing or max(counts) > limit:
            out["S3 delivery-count"].append(f"{key} delivered with counts {counts} (limit {limit}) to "
                                            f"{[p for _, _, p in ds]} at {[i for i, _, _ in ds]}")
        done = closed.get(key)
        if done is not None:
            late = [(i, p) for i, _, p in ds if i > done]
            if late:
                out["S2 redelivered-after-ack"].append(f"{key} delivered to {late[0][1]} after its acknowledgement")
    if drained:
        for key in sorted(at):
            if key not in deliveries and any((o.partition, o.offset) == key for o in sends):
                out["S4 not-delivered"].append(f"{key} acknowledged by the producer, never delivered")
        for key, index in sorted(released.items()):
            ds = deliveries.get(key, [])
            if key not in closed and max(c for _, c, _ in ds) < limit and not any(i > index for i, _, _ in ds):
                out["S4 not-delivered"].append(f"{key} released with deliveries left, never delivered again")
    report = Report(out, sends_ok=len(sends), values_polled=len(deliveries))
    return report
