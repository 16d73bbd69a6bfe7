"""``Group``: what the group coordinator and its offsets part need from any group, whatever
its protocol (Kafka's ``org.apache.kafka.coordinator.group.Group`` interface), and the
values it answers with.

Implemented by ``GroupMetadata`` (``group.py``, a classic group, which is also what a
simple group that only commits offsets is) and ``ConsumerGroup`` (``consumer_group.py``,
a KIP-848 group). The coordinator's group map (``context.GroupMap``) is typed by it; the
code that lists, describes, deletes and expires groups, and validates offset commits and
fetches, goes through it and never asks which kind a group is. The membership parts
(``membership.py``, ``consumer_membership.py``) work on their own concrete kind.

Owns:

* ``Group`` (``typing.Protocol``, runtime checkable: ``isinstance(x, Group)`` checks that
  every member below exists);
* ``GroupSummary``: one group as ListGroups / DescribeGroups show it;
* ``OffsetExpiration``: a group's answer to "which offsets may expire now, and counted
  from when" (Kafka's ``offsetExpirationCondition`` with ``isSubscribedToTopic``);
* the group type names ``GROUP_TYPE_CLASSIC`` / ``GROUP_TYPE_CONSUMER`` (ListGroups v5).

Invariants a ``Group`` keeps: ``group_id`` never changes; ``is_empty()`` is True exactly
when the group has no member (nor a pending one), i.e. when DeleteGroups may delete it;
``is_shell()`` implies ``is_empty()`` (no member and no group record: the group exists
only while it still has committed offsets); ``tombstones()`` never include offsets (the
offsets part writes those).

Thread-safety: none of its own; a group is read and changed under the coordinator's
membership lock (``context.GroupContext.mlock``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Protocol, runtime_checkable

GROUP_TYPE_CLASSIC = "classic"
GROUP_TYPE_CONSUMER = "consumer"

# (member_id, group_instance_id, client_id, client_host, metadata, assignment)
SummaryMember = tuple[str, str | None, str, str, bytes, bytes]
Record = tuple[bytes, bytes | None]  # a (key, value) record of __consumer_offsets; value None: a tombstone


@dataclass(frozen=True)
class GroupSummary:
    group_id: str
    state: str  # Kafka's name, a plain str (what DescribeGroups / ListGroups send)
    protocol_type: str
    protocol: str
    members: tuple[SummaryMember, ...] = ()
    group_type: str = GROUP_TYPE_CLASSIC  # "classic" or "consumer" (ListGroups v5)


class OffsetExpiration(NamedTuple):
    """Which committed offsets of a group may expire now: those of a topic not in
    ``subscribed``, counted from ``empty_since_ms`` (when the group became empty) when it is
    >= 0, else from each offset's commit timestamp. An offset with an explicit expire
    timestamp (OffsetCommit v2-v4) expires at it, whatever this says."""

    empty_since_ms: int
    subscribed: frozenset[str]


@runtime_checkable
class Group(Protocol):
    """One group, as the coordinator and the offsets part see it (module docstring)."""

    @property
    def group_id(self) -> str: ...

    @property
    def group_type(self) -> str:
        """``GROUP_TYPE_CLASSIC`` or ``GROUP_TYPE_CONSUMER``."""
        ...

    @property
    def has_records(self) -> bool:
        """Whether a group record (not an offset) of it is in ``__consumer_offsets``."""
        ...

    def state_name(self) -> str:
        """Kafka's name of its state (``Empty``, ``Stable``, ...)."""
        ...

    def is_empty(self) -> bool:
        """No member (nor a pending one): DeleteGroups may delete it."""
        ...

    def is_shell(self) -> bool:
        """Nothing of its own (no member, no group record): it exists only while it has
        committed offsets."""
        ...

    def topics_in_use(self) -> set[str] | None:
        """The topics its members subscribe to (OffsetDelete refuses their partitions):
        empty without members, None when unknown (members of another protocol type)."""
        ...

    def offset_expiration(self) -> OffsetExpiration | None:
        """Which of its offsets may expire now (``OffsetExpiration``); None: none may
        (a rebalancing group, subscriptions unknown)."""
        ...

    def validate_offset_commit(self, member_id: str, group_instance_id: str | None, generation_or_epoch: int,
                               transactional: bool = False) -> int:
        """The error code of an OffsetCommit (or TxnOffsetCommit) into this group."""
        ...

    def validate_offset_fetch(self, member_id: str, member_epoch: int) -> int:
        """The error code of an OffsetFetch v9+ naming a member of this group."""
        ...

    def tombstones(self) -> list[Record]:
        """The tombstones that delete the group's own records (not its offsets)."""
        ...

    def summary(self, members: bool = True) -> GroupSummary:
        """ListGroups (``members=False``) / DescribeGroups."""
        ...


__all__ = ["GROUP_TYPE_CLASSIC", "GROUP_TYPE_CONSUMER", "Group", "GroupSummary", "OffsetExpiration", "Record",
           "SummaryMember"]
