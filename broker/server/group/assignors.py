"""Server-side partition assignors of the KIP-848 consumer group protocol: ``uniform`` and
``range`` (Kafka's ``UniformAssignor`` and ``RangeAssignor`` of the group coordinator).

Input (``assign``): each member's subscribed topic ids, the partition count of each
subscribed topic, and the current target assignment (for stickiness). Output: member id
-> {topic id: frozenset of partitions}. Every partition of a topic that at least one
member subscribes to goes to exactly one member that subscribes to it; every member of
the input appears in the output (possibly with nothing).

* ``uniform``: balances the NUMBER of partitions per member (the counts of two members
  subscribing to the same topics differ by at most one when all subscriptions are equal),
  and is sticky: a partition stays with its current owner while the owner still
  subscribes to its topic and is under its quota. With heterogeneous subscriptions each
  unplaced partition goes to the least-loaded member subscribing to its topic (greedy,
  not Kafka's optimal heterogeneous algorithm).
* ``range``: per topic, the subscribing members sorted by member id get consecutive
  ranges (the first ``partitions % members`` one more), so members with the same
  subscription get the same partition numbers of co-partitioned topics (same partition
  counts). Not sticky (Kafka's server-side range assignor is sticky only when it keeps
  the same layout, which this one also does when members do not change).

Thread-safety: pure functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

UNIFORM = "uniform"
RANGE = "range"
ASSIGNORS = (UNIFORM, RANGE)

Assignment = dict[Any, frozenset[int]]  # topic id -> partitions


def assign(name: str, subscriptions: Mapping[str, set], partitions: Mapping[Any, int],
           current: Mapping[str, Mapping[Any, frozenset[int]]] | None = None) -> dict[str, Assignment]:
    """The target assignment of ``subscriptions`` (member id -> subscribed topic ids) over
    ``partitions`` (topic id -> partition count; topics missing here are ignored), with
    ``current`` (member id -> assignment) as the starting point for stickiness."""
    if name == UNIFORM:
        return _uniform(subscriptions, partitions, current or {})
    if name == RANGE:
        return _range(subscriptions, partitions)
    raise ValueError(f"unknown assignor {name!r}")


def _finish(members, out: dict[str, dict[Any, set[int]]]) -> dict[str, Assignment]:
    return {m: {t: frozenset(ps) for t, ps in out.get(m, {}).items() if ps} for m in members}


def _range(subscriptions: Mapping[str, set], partitions: Mapping[Any, int]) -> dict[str, Assignment]:
    out: dict[str, dict[Any, set[int]]] = {}
    for topic in sorted(partitions, key=str):
        count = partitions[topic]
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if not members or count <= 0:
            continue
        per, extra = divmod(count, len(members))
        start = 0
        for i, m in enumerate(members):
            n = per + (1 if i < extra else 0)
            if n:
                out.setdefault(m, {})[topic] = set(range(start, start + n))
            start += n
    return _finish(subscriptions, out)


def _uniform(subscriptions: Mapping[str, set], partitions: Mapping[Any, int],
             current: Mapping[str, Mapping[Any, frozenset[int]]]) -> dict[str, Assignment]:
    members = sorted(subscriptions)
    all_parts = [(t, p) for t in sorted(partitions, key=str)
                 if any(t in subscriptions[m] for m in members) for p in range(partitions[t])]
    out: dict[str, dict[Any, set[int]]] = {m: {} for m in members}
    load = dict.fromkeys(members, 0)
    if not members:
        return {}
    homogeneous = len({frozenset(s) for s in subscriptions.values()}) == 1
    if homogeneous:
        base, extra = divmod(len(all_parts), len(members))
    placed: set[tuple[Any, int]] = set()

    def quota(m: str) -> int:
        if not homogeneous:
            return len(all_parts)
        return base + (1 if extra else 0)

    # 1. stickiness: keep what each member has, up to its quota (larger owners first keep
    #    only ``base``, so that the ``extra`` slots are shared out).
    if homogeneous:
        kept_extra = 0
        for m in sorted(members, key=lambda m: -sum(len(ps) for ps in current.get(m, {}).values())):
            cap = base + (1 if kept_extra < extra else 0)
            for t, ps in sorted(current.get(m, {}).items(), key=lambda kv: str(kv[0])):
                if t not in subscriptions[m] or t not in partitions:
                    continue
                for p in sorted(ps):
                    if p < partitions[t] and (t, p) not in placed and load[m] < cap:
                        out[m].setdefault(t, set()).add(p)
                        placed.add((t, p))
                        load[m] += 1
            if load[m] > base:
                kept_extra += 1
    else:
        for m in members:
            for t, ps in current.get(m, {}).items():
                if t not in subscriptions[m] or t not in partitions:
                    continue
                for p in sorted(ps):
                    if p < partitions[t] and (t, p) not in placed:
                        out[m].setdefault(t, set()).add(p)
                        placed.add((t, p))
                        load[m] += 1
    # 2. the rest to the least-loaded subscriber.
    for t, p in all_parts:
        if (t, p) in placed:
            continue
        candidates = [m for m in members if t in subscriptions[m] and load[m] < quota(m)] or \
            [m for m in members if t in subscriptions[m]]
        m = min(candidates, key=lambda m: (load[m], m))
        out[m].setdefault(t, set()).add(p)
        placed.add((t, p))
        load[m] += 1
    if not homogeneous:
        _rebalance_heterogeneous(subscriptions, out, load)
    return _finish(members, out)


def _rebalance_heterogeneous(subscriptions: Mapping[str, set], out: dict[str, dict[Any, set[int]]],
                             load: dict[str, int]) -> None:
    """Move partitions from the most to the least loaded member that can take them, while
    that narrows the gap by more than one."""
    for _ in range(10_000):
        moved = False
        for src in sorted(load, key=lambda m: -load[m]):
            for t in sorted(out[src], key=str):
                takers = [m for m in load if t in subscriptions[m] and load[m] + 1 < load[src]]
                if not takers or not out[src][t]:
                    continue
                dst = min(takers, key=lambda m: (load[m], m))
                p = max(out[src][t])
                out[src][t].discard(p)
                out[dst].setdefault(t, set()).add(p)
                load[src] -= 1
                load[dst] += 1
                moved = True
                break
            if moved:
                break
        if not moved:
            return
