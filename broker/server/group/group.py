"""``GroupMetadata``: one consumer group of the classic protocol (Kafka's ``GroupMetadata``
/ ``ClassicGroup``): its membership state machine, and its answers to the ``Group``
protocol (``protocol.py``).

States (``ClassicGroupState``, Kafka's ``ClassicGroupState``) and the transitions the
coordinator makes::

    Empty               no members (a simple group that only commits offsets, or a group
                        whose members all left or expired); offsets kept until retention
        -> PreparingRebalance   a member joins
    PreparingRebalance  a rebalance is collecting JoinGroups: it completes when every
                        known member has rejoined (and no member id handed out with
                        MEMBER_ID_REQUIRED is still pending), or when the rebalance
                        timeout (the members' largest) passes; the first rebalance of an
                        Empty group waits group.initial.rebalance.delay.ms more, extended
                        while new members keep arriving (up to the rebalance timeout)
        -> CompletingRebalance  the join completed with members (generation + 1)
        -> Empty                the join completed with no member left (generation + 1)
    CompletingRebalance the members got their JoinGroup answers; waiting for the leader's
                        SyncGroup with the assignment
        -> Stable               the leader's assignment was stored in __consumer_offsets
        -> PreparingRebalance   a member joined, left, changed its protocols or expired
    Stable              every member has its assignment
        -> PreparingRebalance   a member joined, left, changed its protocols or expired
    Dead                the group was deleted (never kept in the coordinator's cache; what
                        DescribeGroups answers for an unknown group)

``VALID_PREVIOUS`` is that table as Kafka's ``validPreviousStates`` (Dead may be entered
from every state); ``GroupMetadata.transition_to`` refuses anything else with
``IllegalStateTransition`` (``broker.server.coordinator.state``: a coordinator bug, never
bad input). The coordinator changes ``state`` only that way, or with ``restore_state`` when
loading (a replayed record sets the state it implies; not a transition). The states are
``str``s with Kafka's names; what goes on the wire is ``str(state)`` (the encoder takes
exact ``str``s only).

Invariants: ``leader_id`` is a member's id whenever there are members (the first member to
join, then the first remaining one when it leaves); ``protocol`` is supported by every
member once the generation completed; ``static_members`` maps each static member's
instance id to its current member id; ``pending_members`` are the member ids handed out
with MEMBER_ID_REQUIRED (JoinGroup v4+) that have not joined yet.

A ``GroupMetadata`` is a ``protocol.Group`` (``group_type`` "classic"): a simple group
that only commits offsets (``protocol_type`` None) is one too. Its committed offsets are
not here: the offsets part (``offsets.py``) keeps them by group id.

Thread-safety: none of its own; the coordinator changes groups under its membership lock.
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from broker.protocol import ErrorCode
from broker.protocol.errors import ProtocolDecodeError
from broker.protocol.primitives import Reader
from broker.server.coordinator.state import check_transition
from broker.server.group.member import Member
from broker.server.group.protocol import (
    GROUP_TYPE_CLASSIC,
    GroupSummary,
    OffsetExpiration,
    Record,
    SummaryMember,
)
from broker.server.group.records import GroupMetadataKey, encode_key


class ClassicGroupState(enum.StrEnum):
    """A classic group's state; the value is Kafka's name (DescribeGroups, ListGroups)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"  # what DescribeGroups answers for a group that does not exist


STATE_EMPTY = ClassicGroupState.EMPTY
STATE_PREPARING_REBALANCE = ClassicGroupState.PREPARING_REBALANCE
STATE_COMPLETING_REBALANCE = ClassicGroupState.COMPLETING_REBALANCE
STATE_STABLE = ClassicGroupState.STABLE
STATE_DEAD = ClassicGroupState.DEAD
_ALL_STATES = frozenset(ClassicGroupState)
VALID_PREVIOUS: dict[ClassicGroupState, frozenset[ClassicGroupState]] = {
    STATE_EMPTY: frozenset({STATE_PREPARING_REBALANCE}),
    STATE_PREPARING_REBALANCE: frozenset({STATE_STABLE, STATE_COMPLETING_REBALANCE, STATE_EMPTY}),
    STATE_COMPLETING_REBALANCE: frozenset({STATE_PREPARING_REBALANCE}),
    STATE_STABLE: frozenset({STATE_COMPLETING_REBALANCE}),
    STATE_DEAD: _ALL_STATES,
}
CONSUMER_PROTOCOL_TYPE = "consumer"


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = -1  # -1: none
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1  # -1: none (OffsetCommit v2-v4 retention_time_ms sets one)


@dataclass
class GroupMetadata:
    """One classic group in the cache (a ``protocol.Group``). ``protocol_type`` None: a
    simple group (offsets only)."""

    group_id: str
    protocol_type: str | None = None
    generation: int = 0
    protocol: str | None = None
    leader: str | None = None
    current_state_timestamp: int = -1
    has_metadata_record: bool = False
    state: ClassicGroupState = STATE_EMPTY  # changed by transition_to (restore_state when loading)
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # group_instance_id -> member_id
    pending_members: dict[str, Any] = field(default_factory=dict)  # member id -> its expiry task
    pending_sync: set[str] = field(default_factory=set)  # members yet to send this generation's SyncGroup
    sync_task: Any = None  # removes the members that never sync (the rebalance timeout after the join)
    new_member_added: bool = False
    join_task: Any = None  # the scheduled completion of the current join phase

    @property
    def leader_id(self) -> str | None:
        return self.leader

    # --- the state machine ---

    def transition_to(self, new_state: ClassicGroupState) -> None:
        check_transition(f"group {self.group_id}", self.state, new_state, VALID_PREVIOUS)
        self.state = new_state

    def restore_state(self, state: ClassicGroupState) -> None:
        """Loading: the state a replayed record implies (not a transition)."""
        self.state = state

    # --- the Group protocol ---

    @property
    def group_type(self) -> str:
        return GROUP_TYPE_CLASSIC

    @property
    def has_records(self) -> bool:
        return self.has_metadata_record

    def state_name(self) -> str:
        return str(self.state)

    def is_empty(self) -> bool:
        return self.state == STATE_EMPTY and not self.members and not self.pending_members

    def is_shell(self) -> bool:
        """No group record and no members: the group exists only through its offsets."""
        return not self.has_metadata_record and not self.members and not self.pending_members

    def topics_in_use(self) -> set[str] | None:
        if not self.members:
            return set()
        return self.subscribed_topics()

    def offset_expiration(self) -> OffsetExpiration | None:
        """Kafka's ``ClassicGroup.offsetExpirationCondition``: without members every offset,
        counted from the group becoming Empty (from each commit for a simple group); a
        Stable group of the "consumer" protocol the offsets of the topics no member
        subscribes to, counted from their commit (KIP-496); otherwise none."""
        if self.state == STATE_EMPTY and not self.members and not self.pending_members:
            since = self.current_state_timestamp if self.protocol_type and self.current_state_timestamp >= 0 else -1
            return OffsetExpiration(since, frozenset())
        if self.state == STATE_STABLE:
            subscribed = self.subscribed_topics()
            if subscribed is not None:
                return OffsetExpiration(-1, frozenset(subscribed))
        return None

    def validate_offset_commit(self, member_id: str, group_instance_id: str | None, generation_or_epoch: int,
                               transactional: bool = False) -> int:
        """Kafka's ``ClassicGroup.validateOffsetCommit`` (and ``validateMember``): an Empty
        group accepts generation -1; a commit naming a member (generation >= 0, a member id
        or an instance id) gets UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID for a member not in
        the group, ILLEGAL_GENERATION for another generation; an anonymous commit into a
        group with members UNKNOWN_MEMBER_ID; then REBALANCE_IN_PROGRESS while
        CompletingRebalance."""
        generation_id = generation_or_epoch
        if generation_id < 0 and self.state == STATE_EMPTY:
            return ErrorCode.NONE
        if generation_id >= 0 or member_id or group_instance_id is not None:
            if group_instance_id is not None:
                current = self.static_member_id(group_instance_id)
                if current is None:
                    return ErrorCode.UNKNOWN_MEMBER_ID
                if current != member_id:
                    return ErrorCode.FENCED_INSTANCE_ID
            if member_id not in self.members:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if generation_id != self.generation:
                return ErrorCode.ILLEGAL_GENERATION
        elif self.state != STATE_EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID  # only members commit into a group with members
        if self.state == STATE_COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def validate_offset_fetch(self, member_id: str, member_epoch: int) -> int:
        return ErrorCode.NONE  # classic groups ignore OffsetFetch v9's member, as Kafka

    def tombstones(self) -> list[Record]:
        return [(encode_key(GroupMetadataKey(self.group_id)), None)]

    def summary(self, members: bool = True) -> GroupSummary:
        """Kafka's ``GroupMetadata.summary``: the protocol name, the members' metadata of the
        selected protocol and their assignments only when the group is Stable."""
        protocol = self.protocol if self.state == STATE_STABLE else None
        listed: tuple[SummaryMember, ...] = ()
        if members:
            listed = tuple(
                (m.member_id, m.group_instance_id, m.client_id, m.client_host,
                 m.metadata(protocol) if protocol is not None else b"", m.assignment if protocol is not None else b"")
                for m in self.members.values())
        return GroupSummary(self.group_id, str(self.state), self.protocol_type or "", protocol or "", listed)

    # --- members ---

    def add(self, member: Member) -> None:
        member.group_id = self.group_id
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader is None or self.leader not in self.members:
            self.leader = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader == member_id:
            self.leader = next(iter(self.members), None)
        return member

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        return None if group_instance_id is None else self.static_members.get(group_instance_id)

    def is_static_member_fenced(self, member_id: str, group_instance_id: str | None) -> bool:
        """A known instance id now owned by another member id (KIP-345)."""
        current = self.static_member_id(group_instance_id)
        return current is not None and current != member_id

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if self.leader == old_id:
            self.leader = new_id
        return member

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def has_all_members_joined(self) -> bool:
        return all(m.awaiting_join for m in self.members.values()) and not self.pending_members

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    # --- protocols ---

    def candidate_protocols(self) -> set[str]:
        """The protocols every member supports."""
        counts = Counter(name for m in self.members.values() for name in set(m.protocol_names))
        return {name for name, n in counts.items() if n == len(self.members)}

    def supports_protocols(self, protocol_type: str, protocols: list[str]) -> bool:
        """Kafka's ``supportsProtocols``: an empty group takes any non-empty type and list; a
        group with members the same type and a protocol every member also supports."""
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        return protocol_type == self.protocol_type and bool(self.candidate_protocols() & set(protocols))

    def select_protocol(self) -> str:
        """The candidate protocol most members prefer (ties: the leader's preference order)."""
        candidates = self.candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        order = [name for name in self.members[self.leader].protocol_names] if self.leader in self.members else []
        return max(votes, key=lambda name: (votes[name], -order.index(name) if name in order else -len(order)))

    def subscribed_topics(self) -> set[str] | None:
        """The topics the members subscribe to (the "consumer" protocol's subscriptions of
        the selected protocol), None when unknown (another protocol type, unreadable)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            try:
                topics.update(parse_subscription_topics(m.metadata(self.protocol)))
            except (KeyError, ProtocolDecodeError):
                return None
        return topics


def parse_subscription_topics(data: bytes) -> list[str]:
    """The topics of a ConsumerProtocolSubscription (int16 version, [string] topics, ...)."""
    r = Reader(data)
    version = r.int16()
    if version < 0:
        raise ProtocolDecodeError(f"subscription version {version}")
    count = r.int32()
    r.check_count(count, 2)
    return [r.string() for _ in range(count)]


__all__ = ["CONSUMER_PROTOCOL_TYPE", "ClassicGroupState", "GroupMetadata", "OffsetAndMetadata",
           "STATE_COMPLETING_REBALANCE", "STATE_DEAD", "STATE_EMPTY", "STATE_PREPARING_REBALANCE", "STATE_STABLE",
           "VALID_PREVIOUS", "parse_subscription_topics"]
