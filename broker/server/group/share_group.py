"""``ShareGroup``: one KIP-932 share group as the group coordinator keeps it (Kafka's
``ShareGroup``): its members with their subscriptions and assignments, the group and
assignment epochs, and the simple assignor that computes the target assignment.

A share group has no reconciliation: a member's assignment is the target at once (a
partition may be assigned to several members; records are shared by acquisition, not by
ownership). States (Kafka's ``ShareGroup.ShareGroupState``): ``Empty`` without members,
``Stable`` with members; ``Dead`` is what a describe of a missing group answers.

The simple assignor (Kafka's ``SimpleAssignor`` in spirit): for each subscribed topic,
with M members subscribing and P partitions, slot i in range(max(M, P)) gives partition
i % P to member (i + k) % M (k, a per-topic rotation, spreads several topics' partitions
over the members), so every partition has at least one member and every member at least
one partition of each topic it subscribes to.

Share groups commit no offsets (their progress is the share-partition state of
``__share_group_state``): ``validate_offset_commit`` answers GROUP_ID_NOT_FOUND, as
Kafka's group coordinator does for a commit into a share group.

Invariants: ``assignment_epoch == group_epoch`` after ``compute_assignment``; a member's
``member_epoch`` is the assignment epoch it last received.

Thread-safety: none; read and changed under the coordinator's membership lock.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any

from broker.log.scheduler import ScheduledTask
from broker.protocol import ErrorCode
from broker.server.group.protocol import GroupSummary, OffsetExpiration, Record

GROUP_TYPE_SHARE = "share"
SHARE_PROTOCOL_TYPE = "share"
STATE_EMPTY, STATE_STABLE = "Empty", "Stable"
SIMPLE_ASSIGNOR = "simple"

Assignment = dict[Any, frozenset[int]]  # topic id -> partitions


@dataclass
class ShareMember:
    member_id: str
    member_epoch: int = 0
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    assigned: Assignment = field(default_factory=dict)
    session_timer: ScheduledTask | None = None


@dataclass
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    # (topic name -> (topic id, partitions)) the last assignment was computed from
    subscribed_metadata: dict[str, tuple[Any, int]] = field(default_factory=dict)
    has_records: bool = False  # a ShareGroupMetadata record exists in the log

    # --- the Group protocol ---

    @property
    def group_type(self) -> str:
        return GROUP_TYPE_SHARE

    def state(self) -> str:
        return STATE_STABLE if self.members else STATE_EMPTY

    def state_name(self) -> str:
        return self.state()

    def is_empty(self) -> bool:
        return not self.members

    def is_shell(self) -> bool:
        return not self.members and not self.has_records

    def topics_in_use(self) -> set[str] | None:
        return self.subscribed_topic_names()

    def offset_expiration(self) -> OffsetExpiration | None:
        return None

    def validate_offset_commit(self, member_id: str, group_instance_id: str | None, generation_or_epoch: int,
                               transactional: bool = False) -> int:
        return ErrorCode.GROUP_ID_NOT_FOUND

    def validate_offset_fetch(self, member_id: str, member_epoch: int) -> int:
        return ErrorCode.GROUP_ID_NOT_FOUND

    def tombstones(self) -> list[Record]:
        from broker.server.group import share_records as sr  # the records module imports this one
        return sr.group_tombstones(self.group_id)

    def summary(self, members: bool = True) -> GroupSummary:
        return GroupSummary(self.group_id, self.state(), SHARE_PROTOCOL_TYPE, "", group_type=GROUP_TYPE_SHARE)

    # --- members and assignment ---

    def subscribed_topic_names(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topic_names}

    def compute_assignment(self, metadata: dict[str, tuple[Any, int]]) -> None:
        """The simple assignor over ``metadata`` (topic name -> (topic id, partitions)
        of the subscribed topics that exist); sets ``target`` and the assignment epoch."""
        target: dict[str, dict[Any, set[int]]] = {m: {} for m in self.members}
        for topic in sorted(metadata):
            topic_id, partitions = metadata[topic]
            subscribers = sorted(m.member_id for m in self.members.values() if topic in m.subscribed_topic_names)
            if not subscribers or partitions <= 0:
                continue
            k = zlib.crc32(topic.encode())
            for i in range(max(len(subscribers), partitions)):
                member = subscribers[(i + k) % len(subscribers)]
                target[member].setdefault(topic_id, set()).add(i % partitions)
        self.target = {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in target.items()}
        self.subscribed_metadata = dict(metadata)
        self.assignment_epoch = self.group_epoch


__all__ = ["GROUP_TYPE_SHARE", "SHARE_PROTOCOL_TYPE", "SIMPLE_ASSIGNOR", "STATE_EMPTY", "STATE_STABLE",
           "Assignment", "ShareGroup", "ShareMember"]
