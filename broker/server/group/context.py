"""What the group coordinator's parts share, handed to each of them explicitly: the group map
(``GroupMap``) and ``GroupContext`` (configuration, runtime, clock, topics, the membership
lock, the group map).

Owns:

* ``GroupMap``: group id -> ``protocol.Group`` (a classic ``GroupMetadata`` or a KIP-848
  ``ConsumerGroup``). A group is in the map while it has members, a group record or
  committed offsets; the offsets part keeps the offsets themselves and tells the map
  whether a group still has some (``has_offsets``), so that ``drop_if_unused`` and
  ``forget`` never drop a group whose offsets are still served.
* ``GroupContext``: the frozen bundle each part receives (``config``: ``GroupConfig``;
  ``runtime``: the ``CoordinatorRuntime`` of ``__consumer_offsets``; ``time``;
  ``topics``: the broker's topic manager; ``mlock``; ``groups``), with ``append``, a
  group's records appended to its partition under that partition's lock.

Locks, in the order they are taken (every part keeps it):

1. ``GroupContext.mlock`` (an RLock): serialises every change of membership state and of
   the group map's contents, timers and expiration included;
2. ``runtime.partition_lock(p)``: the append-then-cache-update of the groups hashing to
   partition ``p`` (the cache always ends in log order);
3. leaf locks, held for short moments and never nested in one another: ``GroupMap``'s
   (the map's structure), the offsets cache's (``offsets.OffsetCache``), the pending
   transactional offsets' (``txn_offsets.TransactionalOffsets``).

Thread-safety: ``GroupMap`` reads (``get``, ``values``) are safe from any thread and
return what is there at that moment; writes take its lock, and the coordinator makes them
under ``mlock`` (loading, which runs before any request, excepted).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from broker.log.clock import Time
from broker.server.coordinator import CoordinatorRuntime
from broker.server.group.config import GroupConfig
from broker.server.group.consumer_group import ConsumerGroup
from broker.server.group.group import GroupMetadata
from broker.server.group.protocol import Group, Record


class TopicLookup(Protocol):
    """What the group coordinator reads of the broker's ``TopicManager``."""

    def topics(self) -> Iterable[str]: ...

    def get(self, name: str) -> Any: ...  # a TopicInfo (``topic_id``, ``partitions``) or None


class GroupMap:
    """group id -> ``Group`` (module docstring). ``has_offsets(group_id)``: whether the
    offsets part still holds committed offsets of the group."""

    def __init__(self, has_offsets: Callable[[str], bool]) -> None:
        self._groups: dict[str, Group] = {}
        self._lock = threading.Lock()
        self._has_offsets = has_offsets

    def __len__(self) -> int:
        return len(self._groups)

    def __contains__(self, group_id: object) -> bool:
        return group_id in self._groups

    def get(self, group_id: str) -> Group | None:
        return self._groups.get(group_id)

    def classic(self, group_id: str) -> GroupMetadata | None:
        """The group if it is a classic (or simple) group."""
        group = self._groups.get(group_id)
        return group if isinstance(group, GroupMetadata) else None

    def consumer(self, group_id: str) -> ConsumerGroup | None:
        """The group if it is a KIP-848 consumer group."""
        group = self._groups.get(group_id)
        return group if isinstance(group, ConsumerGroup) else None

    def values(self) -> list[Group]:
        with self._lock:
            return list(self._groups.values())

    def classic_groups(self) -> list[GroupMetadata]:
        with self._lock:
            return [g for g in self._groups.values() if isinstance(g, GroupMetadata)]

    def consumer_groups(self) -> list[ConsumerGroup]:
        with self._lock:
            return [g for g in self._groups.values() if isinstance(g, ConsumerGroup)]

    def ids(self) -> list[str]:
        with self._lock:
            return list(self._groups)

    def put(self, group: Group) -> None:
        with self._lock:
            self._groups[group.group_id] = group

    def simple(self, group_id: str) -> Group:
        """The group, created as a simple (classic, empty) group if it does not exist."""
        with self._lock:
            group = self._groups.get(group_id)
            if group is None:
                group = self._groups[group_id] = GroupMetadata(group_id)
            return group

    def remove(self, group_id: str, group: Group | None = None) -> None:
        """Remove ``group_id`` (only if it is still ``group``, when given)."""
        with self._lock:
            if group is None or self._groups.get(group_id) is group:
                self._groups.pop(group_id, None)

    def drop_if_unused(self, group: Group) -> None:
        """Remove ``group`` when it holds nothing any more: no member, no record, no offset."""
        if group.is_shell() and not self._has_offsets(group.group_id):
            self.remove(group.group_id, group)

    def forget(self, group: Group) -> None:
        """``group``'s own state is gone: a simple group takes its place while its offsets
        remain, otherwise the id disappears."""
        with self._lock:
            if self._groups.get(group.group_id) is not group:
                return
            if self._has_offsets(group.group_id):
                self._groups[group.group_id] = GroupMetadata(group.group_id)
            else:
                del self._groups[group.group_id]


@dataclass(frozen=True)
class GroupContext:
    """What every part of the group coordinator receives (module docstring)."""

    config: GroupConfig
    runtime: CoordinatorRuntime
    time: Time
    topics: TopicLookup
    mlock: threading.RLock
    groups: GroupMap

    def partition_for(self, group_id: str) -> int:
        return self.runtime.partition_for(group_id)

    def append(self, group_id: str, records: list[Record]) -> None:
        """Append ``records`` as one batch to the group's partition, under its lock
        (raises ApiError)."""
        p = self.runtime.partition_for(group_id)
        with self.runtime.partition_lock(p):
            self.runtime.append(p, records)


__all__ = ["GroupContext", "GroupMap", "TopicLookup"]
