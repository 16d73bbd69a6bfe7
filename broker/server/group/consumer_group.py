"""The KIP-848 consumer group: its members, epochs, target assignment and the member
reconciliation state machine (Kafka's ``ConsumerGroup``, ``ConsumerGroupMember`` and
``CurrentAssignmentBuilder``).

Model:

* ``group_epoch`` is bumped whenever what the assignor sees changes: a member joins or
  leaves, a subscription or the server assignor changes, or the partitions of a
  subscribed topic change (created, deleted, partitions added).
* ``target`` (member id -> {topic id: partitions}) is the assignor's answer for
  ``assignment_epoch``; it is recomputed as soon as ``group_epoch`` passes it (so the
  "assigning" state only lasts inside one heartbeat here).
* each member converges to its target by the state machine ``reconcile``:
  ``stable`` (epoch == assignment epoch, owns its target), ``unrevoked_partitions``
  (must first give up ``pending_revocation``; its epoch stays until the heartbeat's
  TopicPartitions no longer holds any of them), ``unreleased_partitions`` (at the new
  epoch, but waiting for partitions another member still owns or is revoking).
  INVARIANT: a partition is never in the ``assigned`` of one member while another member
  has it in ``assigned`` or ``pending_revocation`` (``owner_of`` is that map).
* group states (ConsumerGroupDescribe / ListGroups): ``Empty`` (no member), ``Assigning``
  (group epoch above the assignment epoch), ``Reconciling`` (a member not yet stable at
  the assignment epoch), ``Stable``; ``Dead`` for a group that does not exist.

Members are keyed by member id; a static member (instance id) is also in
``static_members``. A static member that left with epoch -2 stays, with epoch -2, so that
its instance id can come back and take its assignment over.

A ``ConsumerGroup`` is a ``protocol.Group`` (``group_type`` "consumer"); its committed
offsets are kept by the offsets part (``offsets.py``), not here.

Thread-safety: none; the coordinator serialises every access under its membership lock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from broker.protocol import ErrorCode
from broker.server.coordinator.topic import INTERNAL_TOPICS
from broker.server.group import consumer_records as cr
from broker.server.group.protocol import GROUP_TYPE_CONSUMER, GroupSummary, OffsetExpiration, Record

STATE_EMPTY = "Empty"
STATE_ASSIGNING = "Assigning"
STATE_RECONCILING = "Reconciling"
STATE_STABLE = "Stable"
STATE_DEAD = "Dead"

# member states (ConsumerGroupCurrentMemberAssignmentValue.State, Kafka's MemberState)
MEMBER_STABLE = 0
MEMBER_UNREVOKED_PARTITIONS = 1
MEMBER_UNRELEASED_PARTITIONS = 2
MEMBER_UNKNOWN = 3
MEMBER_STATE_NAMES = {0: "stable", 1: "unrevoked_partitions", 2: "unreleased_partitions", 3: "unknown"}

LEAVE_EPOCH = -1
LEAVE_STATIC_EPOCH = -2

Assignment = dict[Any, frozenset[int]]  # topic id (uuid.UUID) -> partitions
CONSUMER_PROTOCOL_TYPE = "consumer"


@dataclass
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = -1
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = MEMBER_STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    # not persisted: timers
    session_task: Any = None
    revocation_task: Any = None

    def owns(self) -> Assignment:
        """What the member may still hold: assigned plus pending revocation."""
        out = {t: set(ps) for t, ps in self.assigned.items()}
        for t, ps in self.pending_revocation.items():
            out.setdefault(t, set()).update(ps)
        return {t: frozenset(ps) for t, ps in out.items() if ps}


@dataclass
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: dict[str, Assignment] = field(default_factory=dict)
    # the partitions of the subscribed topics the last target was computed with:
    # topic name -> (topic id, partition count)
    subscribed_metadata: dict[str, tuple[Any, int]] = field(default_factory=dict)
    assignor: str = ""  # the assignor of the last target assignment
    # SubscribedTopicRegex -> the topic names it matched when last resolved. As in Kafka
    # (which resolves regexes asynchronously), a regex first seen in a heartbeat is
    # resolved at the group's NEXT heartbeat, so its topics come one heartbeat later.
    resolved_regexes: dict[str, frozenset[str]] = field(default_factory=dict)
    has_records: bool = False  # a ConsumerGroupMetadata record exists in the log

    # --- the Group protocol ---

    @property
    def group_type(self) -> str:
        return GROUP_TYPE_CONSUMER

    @property
    def protocol_type(self) -> str:
        return CONSUMER_PROTOCOL_TYPE

    def state_name(self) -> str:
        return self.state()

    def is_empty(self) -> bool:
        return not self.members

    def is_shell(self) -> bool:
        return not self.members and not self.has_records

    def topics_in_use(self) -> set[str] | None:
        return self.subscribed_topic_names() if self.members else set()

    def offset_expiration(self) -> OffsetExpiration:
        """The offsets of the topics no member subscribes to (all of them once it has no
        members), counted from their commit."""
        return OffsetExpiration(-1, frozenset(self.subscribed_topic_names()))

    def validate_offset_commit(self, member_id: str, group_instance_id: str | None, generation_or_epoch: int,
                               transactional: bool = False) -> int:
        """Kafka's ``ConsumerGroup.validateOffsetCommit``: a commit with a negative epoch is
        accepted only while the group has no member (admin tools, simple consumers);
        otherwise the member must exist (UNKNOWN_MEMBER_ID) and send its epoch
        (FENCED_MEMBER_EPOCH when newer, STALE_MEMBER_EPOCH when older). A TxnOffsetCommit
        is checked as into an empty classic group (generation -1 accepted, any member
        UNKNOWN_MEMBER_ID): the member epoch of a transactional commit is not checked."""
        if transactional:
            if generation_or_epoch < 0:
                return ErrorCode.NONE
            return ErrorCode.UNKNOWN_MEMBER_ID
        return self._validate_member(member_id, generation_or_epoch, for_fetch=False)

    def validate_offset_fetch(self, member_id: str, member_epoch: int) -> int:
        """Kafka's ``ConsumerGroup.validateOffsetFetch``: epoch -1 is never checked."""
        return self._validate_member(member_id, member_epoch, for_fetch=True)

    def _validate_member(self, member_id: str, member_epoch: int, for_fetch: bool) -> int:
        if for_fetch and member_epoch == -1:
            return ErrorCode.NONE
        if not for_fetch and member_epoch < 0 and not self.members:
            return ErrorCode.NONE
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch > member.member_epoch:
            return ErrorCode.FENCED_MEMBER_EPOCH
        if member_epoch < member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def tombstones(self) -> list[Record]:
        """Every member's records, then the group's (Kafka's order)."""
        out: list[Record] = []
        for member_id in sorted(self.members):
            out.extend(member_tombstones(self.group_id, member_id))
        out.extend((cr.encode_consumer_key(cr.ConsumerGroupKey(t, self.group_id)), None)
                   for t in (cr.TARGET_ASSIGNMENT_METADATA, cr.PARTITION_METADATA, cr.METADATA))
        return out

    def summary(self, members: bool = True) -> GroupSummary:
        """ListGroups; DescribeGroups never shows a consumer group (ConsumerGroupDescribe does)."""
        return GroupSummary(self.group_id, self.state(), CONSUMER_PROTOCOL_TYPE, "", group_type=GROUP_TYPE_CONSUMER)

    # --- members and assignment ---

    def state(self) -> str:
        if not self.members:
            return STATE_EMPTY
        if self.group_epoch > self.assignment_epoch:
            return STATE_ASSIGNING
        for m in self.members.values():
            if m.member_epoch == LEAVE_STATIC_EPOCH:
                continue
            if m.state != MEMBER_STABLE or m.member_epoch != self.assignment_epoch:
                return STATE_RECONCILING
        return STATE_STABLE

    def owner_of(self, exclude: str | None = None) -> dict[tuple[Any, int], str]:
        """(topic id, partition) -> the member holding it (assigned or being revoked)."""
        owners: dict[tuple[Any, int], str] = {}
        for m in self.members.values():
            if m.member_id == exclude:
                continue
            for t, ps in m.owns().items():
                for p in ps:
                    owners[(t, p)] = m.member_id
        return owners

    def add_member(self, member: ConsumerGroupMember) -> None:
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def remove_member(self, member_id: str) -> ConsumerGroupMember | None:
        member = self.members.pop(member_id, None)
        if member is not None and member.instance_id is not None and \
                self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        self.target.pop(member_id, None)
        return member

    def member_topic_names(self, member: ConsumerGroupMember) -> set[str]:
        """The names ``member`` subscribes to: listed, or matched by its resolved regex."""
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            names.update(self.resolved_regexes.get(member.subscribed_topic_regex, ()))
        return names

    def subscribed_topic_names(self, all_topics=None) -> set[str]:
        """The names any member subscribes to (regexes as last resolved)."""
        names: set[str] = set()
        for m in self.members.values():
            names.update(self.member_topic_names(m))
        return names

    def resolve_regexes(self, all_topics) -> None:
        """Resolve every regex the members use now against ``all_topics`` (and forget the
        ones no member uses any more)."""
        used = {m.subscribed_topic_regex for m in self.members.values() if m.subscribed_topic_regex}
        self.resolved_regexes = {rx: frozenset(matching_topics(rx, all_topics)) for rx in used}

    def preferred_assignor(self, default: str) -> str:
        """The server assignor most members asked for (ties by name), else ``default``."""
        counts: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor:
                counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
        if not counts:
            return default
        return max(sorted(counts), key=lambda a: counts[a])


def member_tombstones(group_id: str, member_id: str) -> list[Record]:
    """A member's tombstones in Kafka's order: current assignment, target assignment, then
    member metadata."""
    return [(cr.encode_consumer_key(cr.ConsumerGroupKey(t, group_id, member_id)), None)
            for t in (cr.CURRENT_MEMBER_ASSIGNMENT, cr.TARGET_ASSIGNMENT_MEMBER, cr.MEMBER_METADATA)]


def compile_regex(pattern: str) -> re.Pattern:
    """SubscribedTopicRegex: Kafka uses RE2/J; Python's ``re`` is used here (the common
    syntax is the same; RE2-only constructs may be refused). ``re.error`` if invalid."""
    return re.compile(pattern)


def matching_topics(pattern: str, all_topics) -> set[str]:
    """The topics ``pattern`` matches whole; never an internal topic (as Kafka)."""
    try:
        rx = compile_regex(pattern)
    except re.error:
        return set()
    return {t for t in all_topics if t not in INTERNAL_TOPICS and rx.fullmatch(t)}


def _normalise(a: dict[Any, set[int]] | Assignment) -> Assignment:
    return {t: frozenset(ps) for t, ps in a.items() if ps}


def _minus(a: Assignment, b: Assignment) -> Assignment:
    return _normalise({t: set(ps) - set(b.get(t, ())) for t, ps in a.items()})


def _intersect(a: Assignment, b: Assignment) -> Assignment:
    return _normalise({t: set(ps) & set(b.get(t, ())) for t, ps in a.items()})


def _contains_any(owned: Assignment, parts: Assignment) -> bool:
    return any(set(owned.get(t, ())) & set(ps) for t, ps in parts.items())


def reconcile(group: ConsumerGroup, member: ConsumerGroupMember,
              owned: Assignment | None) -> bool:
    """Move ``member`` towards its target (Kafka's ``CurrentAssignmentBuilder``); ``owned``
    is the heartbeat's TopicPartitions (None: not sent). Returns True when the member's
    epoch, state or assignment changed."""
    before = (member.member_epoch, member.state, member.assigned, member.pending_revocation)
    if member.state == MEMBER_UNREVOKED_PARTITIONS:
        if owned is None or _contains_any(owned, member.pending_revocation):
            return False  # still revoking
        member.pending_revocation = {}
        member.state = MEMBER_STABLE
    if member.state == MEMBER_STABLE and member.member_epoch == group.assignment_epoch:
        pass  # fall through: maybe partitions were released since (unreleased handled below)
    target = group.target.get(member.member_id, {})
    if member.member_epoch != group.assignment_epoch or member.state != MEMBER_STABLE or \
            member.assigned != _normalise(target):
        keep = _intersect(member.assigned, target)
        revoke = _minus(member.assigned, target)
        if revoke:
            member.assigned = keep
            member.pending_revocation = revoke
            member.state = MEMBER_UNREVOKED_PARTITIONS
        else:
            owners = group.owner_of(exclude=member.member_id)
            wanted = _minus(target, keep)
            granted: dict[Any, set[int]] = {t: set(ps) for t, ps in keep.items()}
            unreleased = False
            for t, ps in wanted.items():
                for p in ps:
                    if (t, p) in owners:
                        unreleased = True
                    else:
                        granted.setdefault(t, set()).add(p)
            member.assigned = _normalise(granted)
            member.pending_revocation = {}
            if member.member_epoch != group.assignment_epoch:
                member.previous_member_epoch = member.member_epoch
                member.member_epoch = group.assignment_epoch
            member.state = MEMBER_UNRELEASED_PARTITIONS if unreleased else MEMBER_STABLE
    return before != (member.member_epoch, member.state, member.assigned, member.pending_revocation)


__all__ = ["Assignment", "CONSUMER_PROTOCOL_TYPE", "ConsumerGroup", "ConsumerGroupMember", "LEAVE_EPOCH",
           "LEAVE_STATIC_EPOCH", "MEMBER_STABLE", "MEMBER_UNRELEASED_PARTITIONS", "MEMBER_UNREVOKED_PARTITIONS",
           "STATE_ASSIGNING", "STATE_DEAD", "STATE_EMPTY", "STATE_RECONCILING", "STATE_STABLE", "compile_regex",
           "matching_topics", "member_tombstones", "reconcile"]
