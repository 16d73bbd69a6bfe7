"""Partition assignors of the classic consumer-group protocol, as Kafka's Java clients:
``RangeAssignor`` ("range"), ``RoundRobinAssignor`` ("roundrobin"), ``StickyAssignor``
("sticky", KIP-54) and ``CooperativeStickyAssignor`` ("cooperative-sticky", KIP-429).

The group leader runs one of them over every member's ``Subscription``
(``protocol.py``)::

    assignor.assign(partitions_per_topic: {topic: partition count},
                    subscriptions: {member_id: Subscription},
                    group_instance_ids: {member_id: group.instance.id | None} = None)
        -> {member_id: [TopicPartition, ...]}

Members subscribed to nothing get an empty list; topics absent from
``partitions_per_topic`` are not assigned. ``get_assignor(name)`` builds one from a
``partition.assignment.strategy`` entry (short name or Kafka's class name).

Semantics:

* range: per topic, partitions in order split into contiguous ranges over the members
  subscribed to it, sorted as Kafka's ``MemberInfo`` (members with a group.instance.id
  first, by it; then the others by member id); the first ``count % members`` get one
  more. (Kafka 3.5's rack-aware variant, KIP-881, is not applied: no rack ids here.)
* roundrobin: every partition of every subscribed topic (topics sorted, partitions in
  order), dealt over the sorted members, skipping members not subscribed to its topic.
* sticky / cooperative-sticky (Kafka's ``AbstractStickyAssignor``): the result is
  balanced (with equal subscriptions every member gets ``floor`` or ``ceil`` of
  partitions / members; otherwise no partition could move to a member with at least two
  fewer partitions) and keeps as many previously owned partitions as balance allows.
  Previous ownership comes from each member's data: "sticky" (eager) reads
  ``StickyAssignorUserData`` from ``user_data`` (``encode_sticky_user_data``: the
  previous assignment and its generation); "cooperative-sticky" reads
  ``owned_partitions`` and ``generation_id`` (v2+; for older subscriptions a 4-byte
  generation in ``user_data``, as Kafka's). Claims from a generation older than the
  highest present are dropped; two members claiming a partition in the same generation
  both lose the claim. With equal subscriptions this is Kafka's ``constrainedAssign``
  step for step (owned partitions kept up to the quotas, the rest dealt in partition
  order to the members under quota, sorted by member id); with different subscriptions
  owned partitions are kept, the rest go one by one (partitions with the fewest eligible
  members first) to the eligible member with the fewest, and then partitions move from
  the fullest members to eligible members with at least two fewer until none can: the
  same balance criterion as Kafka's ``generalAssign``, not necessarily the same moves.
* cooperative-sticky then withholds every partition that changes owner (or had
  conflicting owners) from its new owner: the current owner sees it missing from its
  own assignment and revokes it, and the follow-up rebalance hands it over (KIP-429).

Pure functions of their input: deterministic, no I/O. Thread-safety: stateless.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping

from .offsets import TopicPartition
from .protocol import ConsumerProtocolError, Subscription, _Reader

EAGER = "EAGER"
COOPERATIVE = "COOPERATIVE"
DEFAULT_GENERATION = -1

ASSIGNOR_NAMES = {
    "range": "range", "roundrobin": "roundrobin", "sticky": "sticky",
    "cooperative-sticky": "cooperative-sticky",
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.StickyAssignor": "sticky",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}

GroupAssignment = dict[str, list[TopicPartition]]


def assignor_name(name: str) -> str:
    """The short name of a ``partition.assignment.strategy`` entry (ValueError if none)."""
    try:
        return ASSIGNOR_NAMES[name.strip()]
    except KeyError:
        raise ValueError(f"partition.assignment.strategy {name!r}: expected one of range, "
                         "roundrobin, sticky, cooperative-sticky (or Kafka's class "
                         "names)") from None


def _member_order(members: Iterable[str], group_instance_ids: Mapping[str, str | None] | None
                  ) -> list[str]:
    """Kafka's ``MemberInfo`` order: static members (by instance id) before dynamic ones
    (by member id)."""
    ids = group_instance_ids or {}

    def key(m: str) -> tuple:
        gid = ids.get(m)
        return (0, gid, m) if gid is not None else (1, m, "")
    return sorted(members, key=key)


def _all_partitions(partitions_per_topic: Mapping[str, int], topics: Iterable[str]
                    ) -> list[TopicPartition]:
    return [TopicPartition(t, p) for t in sorted(set(topics)) if t in partitions_per_topic
            for p in range(partitions_per_topic[t])]


class ConsumerPartitionAssignor:
    """The interface (Kafka's ``ConsumerPartitionAssignor``)."""

    name = ""
    rebalance_protocols: tuple[str, ...] = (EAGER,)

    def subscription_user_data(self, topics: Iterable[str],
                               owned: Iterable[tuple[str, int]] = (),
                               generation: int = DEFAULT_GENERATION) -> bytes | None:
        """What a member puts in its subscription's ``user_data``."""
        return None

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription],
               group_instance_ids: Mapping[str, str | None] | None = None) -> GroupAssignment:
        raise NotImplementedError


class RangeAssignor(ConsumerPartitionAssignor):
    name = "range"

    def assign(self, partitions_per_topic, subscriptions, group_instance_ids=None):
        out: GroupAssignment = {m: [] for m in subscriptions}
        by_topic: dict[str, list[str]] = {}
        for m, sub in subscriptions.items():
            for t in set(sub.topics):
                by_topic.setdefault(t, []).append(m)
        for topic in sorted(by_topic):
            count = partitions_per_topic.get(topic)
            if count is None:
                continue
            members = _member_order(by_topic[topic], group_instance_ids)
            per, extra = divmod(count, len(members))
            start = 0
            for i, m in enumerate(members):
                n = per + (1 if i < extra else 0)
                out[m].extend(TopicPartition(topic, p) for p in range(start, start + n))
                start += n
        return out


class RoundRobinAssignor(ConsumerPartitionAssignor):
    name = "roundrobin"

    def assign(self, partitions_per_topic, subscriptions, group_instance_ids=None):
        out: GroupAssignment = {m: [] for m in subscriptions}
        members = _member_order(subscriptions, group_instance_ids)
        if not members:
            return out
        topics_of = {m: set(subscriptions[m].topics) for m in members}
        all_topics = set().union(*topics_of.values())
        i = 0
        for tp in _all_partitions(partitions_per_topic, all_topics):
            while tp.topic not in topics_of[members[i % len(members)]]:
                i += 1
            out[members[i % len(members)]].append(tp)
            i += 1
        return out


# -- sticky -------------------------------------------------------------------------------

_I32 = struct.Struct(">i")


def encode_sticky_user_data(partitions: Iterable[tuple[str, int]],
                            generation: int | None = DEFAULT_GENERATION) -> bytes:
    """``StickyAssignorUserData`` v1 (v0 when ``generation`` is None): the previous
    assignment as [](topic string, partitions []int32), then the generation; no version
    prefix (Kafka writes the struct alone)."""
    by_topic: dict[str, list[int]] = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append(int(p))
    out = bytearray(_I32.pack(len(by_topic)))
    for t, ps in by_topic.items():
        b = t.encode("utf-8")
        out += struct.pack(">h", len(b)) + b + _I32.pack(len(ps))
        for p in ps:
            out += _I32.pack(p)
    if generation is not None:
        out += _I32.pack(generation)
    return bytes(out)


def decode_sticky_user_data(data: bytes) -> tuple[list[TopicPartition], int | None]:
    """(previous assignment, generation or None for v0) from ``StickyAssignorUserData``."""
    r = _Reader(data, "StickyAssignorUserData")
    tps = [TopicPartition(t, p) for t, p in r.topic_partitions()]
    generation = r.i32() if len(r.buf) - r.pos >= 4 else None
    return tps, generation


class _MemberData:
    __slots__ = ("partitions", "generation")

    def __init__(self, partitions: list[TopicPartition], generation: int | None) -> None:
        self.partitions = partitions
        self.generation = generation


class AbstractStickyAssignor(ConsumerPartitionAssignor):
    """The common part of sticky and cooperative-sticky (see the module docstring)."""

    def member_data(self, sub: Subscription) -> _MemberData:
        raise NotImplementedError

    def assign(self, partitions_per_topic, subscriptions, group_instance_ids=None):
        self.partitions_transferring_ownership: dict[TopicPartition, str] = {}
        members = sorted(subscriptions)
        out: GroupAssignment = {m: [] for m in members}
        if not members:
            return out
        topics_of = {m: set(subscriptions[m].topics) & set(partitions_per_topic)
                     for m in members}
        all_topics = set().union(*topics_of.values())
        owned, conflicts = self._previous_owners(members, subscriptions, topics_of)
        prev_owner = {tp: m for m, tps in owned.items() for tp in tps}
        equal = len({frozenset(subscriptions[m].topics) for m in members}) == 1
        if equal:
            out = self._constrained(members, owned, _all_partitions(partitions_per_topic,
                                                                   all_topics))
        else:
            out = self._general(members, owned, topics_of, partitions_per_topic)
        self.partitions_transferring_ownership = {
            tp: m for m, tps in out.items() for tp in tps
            if (tp in prev_owner and prev_owner[tp] != m) or tp in conflicts}
        return out

    def _previous_owners(self, members: list[str], subscriptions: Mapping[str, Subscription],
                         topics_of: Mapping[str, set[str]]
                         ) -> tuple[dict[str, list[TopicPartition]], set[TopicPartition]]:
        """Each member's valid previous partitions (highest generation wins; same-generation
        double claims are dropped) and the partitions claimed twice."""
        data = {m: self.member_data(subscriptions[m]) for m in members}
        gens = [d.generation for d in data.values() if d.generation is not None]
        max_gen = max(gens, default=DEFAULT_GENERATION)
        owned: dict[str, list[TopicPartition]] = {m: [] for m in members}
        owner: dict[TopicPartition, str] = {}
        conflicts: set[TopicPartition] = set()
        for m in members:
            d = data[m]
            gen = d.generation if d.generation is not None else DEFAULT_GENERATION
            if d.generation is not None and gen < max_gen:
                continue  # an older generation's claims
            if d.generation is None and max_gen > DEFAULT_GENERATION:
                continue  # no generation: valid only while no member reports one
            for tp in d.partitions:
                if tp.topic not in topics_of[m] or tp in conflicts:
                    continue
                other = owner.get(tp)
                if other is not None:
                    conflicts.add(tp)
                    owned[other].remove(tp)
                    continue
                owner[tp] = m
                owned[m].append(tp)
        return owned, conflicts

    @staticmethod
    def _constrained(members: list[str], owned: Mapping[str, list[TopicPartition]],
                     partitions: list[TopicPartition]) -> GroupAssignment:
        """Kafka's ``constrainedAssign`` (every member subscribed to the same topics)."""
        existing = set(partitions)
        n, total = len(members), len(partitions)
        min_quota, extra = divmod(total, n)
        max_quota = min_quota + (1 if extra else 0)
        expected_over = extra
        over = 0
        out: GroupAssignment = {m: [] for m in members}
        assigned: set[TopicPartition] = set()
        under: list[str] = []
        exactly: list[str] = []
        for m in members:
            mine = [tp for tp in owned.get(m, ()) if tp in existing]
            if len(mine) < min_quota:
                out[m].extend(mine)
                under.append(m)
            elif len(mine) >= max_quota and over < expected_over:
                over += 1
                if over == expected_over:
                    exactly.clear()
                out[m].extend(mine[:max_quota])
            else:
                out[m].extend(mine[:min_quota])
                if over < expected_over:
                    exactly.append(m)
            assigned.update(out[m])
        unassigned = [tp for tp in partitions if tp not in assigned]
        i = 0  # Kafka's iterator over the members under quota, restarted when exhausted
        for tp in unassigned:
            if under:
                if i >= len(under):
                    i = 0
                m, from_under = under[i], True
            elif exactly:
                m, from_under = exactly.pop(0), False
            else:
                raise AssertionError(f"sticky assignor: no member left to take {tp}")
            out[m].append(tp)
            count = len(out[m])
            if from_under and count == min_quota:
                under.pop(i)
                exactly.append(m)
                continue
            if from_under:
                i += 1
            if count == max_quota:
                over += 1
                if over == expected_over:
                    exactly.clear()
        return out

    @staticmethod
    def _general(members: list[str], owned: Mapping[str, list[TopicPartition]],
                 topics_of: Mapping[str, set[str]], partitions_per_topic: Mapping[str, int]
                 ) -> GroupAssignment:
        """Different subscriptions: keep, fill the emptiest, then balance (see above)."""
        out: GroupAssignment = {m: list(owned.get(m, ())) for m in members}
        eligible: dict[str, list[str]] = {}
        for m in members:
            for t in topics_of[m]:
                eligible.setdefault(t, []).append(m)
        holder = {tp: m for m, tps in out.items() for tp in tps}
        all_tps = _all_partitions(partitions_per_topic, eligible)
        todo = [tp for tp in all_tps if tp not in holder]
        todo.sort(key=lambda tp: (len(eligible[tp.topic]), tp.topic, tp.partition))
        for tp in todo:
            m = min(eligible[tp.topic], key=lambda c: (len(out[c]), c))
            out[m].append(tp)
            holder[tp] = m
        # Balance: move a partition from a member to an eligible member with >= 2 fewer,
        # largest gap first; each move lowers the sum of squares, so this ends.
        while True:
            best = None
            for tp in all_tps:
                src = holder[tp]
                for dst in eligible[tp.topic]:
                    gap = len(out[src]) - len(out[dst])
                    if gap >= 2 and (best is None or gap > best[0]):
                        best = (gap, tp, src, dst)
            if best is None:
                break
            _, tp, src, dst = best
            out[src].remove(tp)
            out[dst].append(tp)
            holder[tp] = dst
        return out


class StickyAssignor(AbstractStickyAssignor):
    name = "sticky"

    def subscription_user_data(self, topics, owned=(), generation=DEFAULT_GENERATION):
        return encode_sticky_user_data(owned, generation)

    def member_data(self, sub: Subscription) -> _MemberData:
        if not sub.user_data:
            return _MemberData([], None)
        try:
            tps, gen = decode_sticky_user_data(sub.user_data)
        except ConsumerProtocolError:
            return _MemberData([], None)
        return _MemberData(tps, gen)


class CooperativeStickyAssignor(AbstractStickyAssignor):
    name = "cooperative-sticky"
    rebalance_protocols = (COOPERATIVE, EAGER)

    def subscription_user_data(self, topics, owned=(), generation=DEFAULT_GENERATION):
        # Kafka's: the generation, for members whose subscription is below v2.
        return _I32.pack(generation)

    def member_data(self, sub: Subscription) -> _MemberData:
        gen: int | None = None
        if sub.version >= 2:
            gen = sub.generation_id
        elif sub.user_data and len(sub.user_data) >= 4:
            gen = _I32.unpack_from(sub.user_data)[0]
        return _MemberData([TopicPartition(t, p) for t, p in sub.owned_partitions], gen)

    def assign(self, partitions_per_topic, subscriptions, group_instance_ids=None):
        out = super().assign(partitions_per_topic, subscriptions, group_instance_ids)
        for tp, m in self.partitions_transferring_ownership.items():
            out[m].remove(tp)
        return out


ASSIGNORS: dict[str, type[ConsumerPartitionAssignor]] = {
    "range": RangeAssignor, "roundrobin": RoundRobinAssignor, "sticky": StickyAssignor,
    "cooperative-sticky": CooperativeStickyAssignor,
}


def get_assignor(name: str) -> ConsumerPartitionAssignor:
    """An assignor for a ``partition.assignment.strategy`` entry."""
    return ASSIGNORS[assignor_name(name)]()


__all__ = ["ASSIGNORS", "AbstractStickyAssignor", "COOPERATIVE", "ConsumerPartitionAssignor",
           "CooperativeStickyAssignor", "EAGER", "RangeAssignor", "RoundRobinAssignor",
           "StickyAssignor", "assignor_name", "decode_sticky_user_data",
           "encode_sticky_user_data", "get_assignor"]
