"""The share groups part of the group coordinator (KIP-932): ShareGroupHeartbeat,
ShareGroupDescribe and the members' sessions (Kafka's
``GroupMetadataManager.shareGroupHeartbeat``).

Owns ``ShareGroups``: it receives the ``GroupContext`` and the ``ShareConfig`` and serves
the ``ShareGroup`` entries of the group map (``share_group.py``). A group id is of one
type: a ShareGroupHeartbeat for a classic group (even one that only holds committed
offsets) or a consumer group gets GROUP_ID_NOT_FOUND ("Group X is not a share group."), as
in Kafka.

Heartbeat (one request, under ``GroupContext.mlock``):

1. validation (INVALID_REQUEST): a group id, a member id (v1: the client chooses it),
   member epoch >= -1, a non-empty subscription on join (epoch 0).
2. leave (-1): the member is removed, the group epoch bumped and the share-partition
   manager told (the ``on_member_removed`` callback), which releases the records the
   member still holds (after a short grace for its closing acknowledgements, which a
   client may send on another connection at the same moment); the answer carries
   epoch -1. A member whose session expired has its records released at once.
3. join (0): GROUP_MAX_SIZE_REACHED past ``group.share.max.size``; a known member id
   joining again keeps its place.
4. otherwise the member must exist (UNKNOWN_MEMBER_ID) and send its current epoch
   (FENCED_MEMBER_EPOCH otherwise).
5. a new member, a changed subscription, or a changed partition count or topic id of a
   subscribed topic bumps the group epoch and recomputes the target assignment (the
   simple assignor); every member then takes its target at once (no revocation in a
   share group) with the new epoch, and the answer carries the assignment when the
   member joined or its assignment changed.

Sessions: ``group.share.session.timeout.ms`` after its last heartbeat a member is removed
(its records released) and the group epoch bumped; heartbeats are asked every
``group.share.heartbeat.interval.ms``. Per-group ``share.session.timeout.ms`` /
``share.heartbeat.interval.ms`` (the GROUP config resource, ``group_config(group, key)``)
win over the broker's.

Persistence: a ShareGroupMetadata record (the group epoch) whenever the epoch moves
(``share_records.py``); members are not persisted (a restarted broker answers their next
heartbeat UNKNOWN_MEMBER_ID and they join again). An append failure is logged and the
heartbeat answered with its code.

Thread-safety: every method runs under ``GroupContext.mlock`` (timers too); appends also
take the group's partition lock (``GroupContext.append``), after ``mlock``. The
``on_member_removed`` callback is called under ``mlock`` and must not call back into
the group coordinator.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from broker.protocol import ErrorCode
from broker.server.errors import ApiError
from broker.server.group import share_records as sr
from broker.server.group.context import GroupContext
from broker.server.group.protocol import Record
from broker.server.group.share_group import Assignment, ShareGroup, ShareMember
from broker.server.share.config import ShareConfig

log = logging.getLogger(__name__)

LEAVE_EPOCH = -1


@dataclass
class ShareHeartbeatResult:
    error: int
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


class ShareGroups:
    """The share groups part (module docstring). ``group_config(group_id, key)``: a
    per-group override (None when unset)."""

    def __init__(self, ctx: GroupContext, config: ShareConfig,
                 group_config: Callable[[str, str], Any] | None = None) -> None:
        self._ctx = ctx
        self.config = config
        self._closed = False
        self.group_config = group_config or (lambda group_id, key: None)
        # (group id, member id, left: True for a leave heartbeat, False for an expired session)
        self.on_member_removed: Callable[[str, str, bool], None] | None = None

    def _setting(self, group_id: str, key: str, default: int) -> int:
        value = self.group_config(group_id, key)
        return default if value is None else int(value)

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self._setting(group_id, "share.heartbeat.interval.ms", self.config.heartbeat_interval_ms)

    def session_timeout_ms(self, group_id: str) -> int:
        return self._setting(group_id, "share.session.timeout.ms", self.config.session_timeout_ms)

    # --- ShareGroupHeartbeat ---

    def heartbeat(self, group_id: str, member_id: str, member_epoch: int, rack_id: str | None,
                  subscribed_topic_names: list[str] | None, client_id: str = "",
                  client_host: str = "") -> ShareHeartbeatResult:
        if not group_id:
            return ShareHeartbeatResult(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
        if not member_id:
            return ShareHeartbeatResult(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        if member_epoch < LEAVE_EPOCH:
            return ShareHeartbeatResult(ErrorCode.INVALID_REQUEST, f"MemberEpoch is {member_epoch}, but must be "
                                        "greater than or equal to -1.")
        if member_epoch == 0 and not subscribed_topic_names:
            return ShareHeartbeatResult(ErrorCode.INVALID_REQUEST,
                                        "SubscribedTopicNames must be set in first request.")
        records: list[Record] = []
        with self._ctx.mlock:
            if self._closed:
                return ShareHeartbeatResult(ErrorCode.NOT_COORDINATOR, "the coordinator is shutting down")
            try:
                if member_epoch == LEAVE_EPOCH:
                    result = self._leave(group_id, member_id, records)
                else:
                    result = self._heartbeat(group_id, member_id, member_epoch, rack_id, subscribed_topic_names,
                                             client_id, client_host, records)
            except ApiError as exc:
                return ShareHeartbeatResult(exc.code, exc.message)
            if records:
                try:
                    self._ctx.append(group_id, records)
                except ApiError as exc:
                    log.warning("share group %s: writing its epoch failed: %s", group_id, exc)
                    return ShareHeartbeatResult(exc.code, exc.message)
        return result

    def _group_for(self, group_id: str, create: bool) -> ShareGroup:
        group = self._ctx.groups.get(group_id)
        if isinstance(group, ShareGroup):
            return group
        if group is not None:  # a classic (even only committed offsets) or consumer group
            raise ApiError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        if not create:
            raise ApiError(ErrorCode.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found.")
        sg = ShareGroup(group_id)
        self._ctx.groups.put(sg)
        return sg

    def _leave(self, group_id: str, member_id: str, records: list[Record]) -> ShareHeartbeatResult:
        sg = self._group_for(group_id, create=False)
        member = sg.members.get(member_id)
        if member is None:
            raise ApiError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
        log.info("share group %s: member %s leaves", group_id, member_id)
        self._remove(sg, member, records, left=True)
        return ShareHeartbeatResult(ErrorCode.NONE, None, member_id, LEAVE_EPOCH, self.heartbeat_interval_ms(group_id))

    def _heartbeat(self, group_id: str, member_id: str, member_epoch: int, rack_id: str | None,
                   subscribed: list[str] | None, client_id: str, client_host: str,
                   records: list[Record]) -> ShareHeartbeatResult:
        sg = self._group_for(group_id, create=member_epoch == 0)
        member = sg.members.get(member_id)
        bump = False
        if member_epoch == 0:
            if member is None:
                if len(sg.members) >= self.config.max_size:
                    raise ApiError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                   f"The share group has reached its maximum capacity of {self.config.max_size} "
                                   "members.")
                member = ShareMember(member_id)
                sg.members[member_id] = member
                bump = True
                log.info("share group %s: member %s joins (client %s, topics %s)", group_id, member_id, client_id,
                         sorted(subscribed or ()))
            joined = True
        else:
            if member is None:
                raise ApiError(ErrorCode.UNKNOWN_MEMBER_ID,
                               f"Member {member_id} is not a member of group {group_id}.")
            if member_epoch != member.member_epoch:
                raise ApiError(ErrorCode.FENCED_MEMBER_EPOCH,
                               f"The share group member has a smaller member epoch ({member_epoch}) than the one "
                               f"known by the group coordinator ({member.member_epoch}).")
            joined = False
        member.client_id, member.client_host = client_id, client_host
        if rack_id is not None:
            member.rack_id = rack_id
        if subscribed is not None and tuple(sorted(set(subscribed))) != member.subscribed_topic_names:
            member.subscribed_topic_names = tuple(sorted(set(subscribed)))
            bump = True
        metadata = self._subscribed_metadata(sg)
        if bump or metadata != sg.subscribed_metadata:
            self._bump(sg, metadata, records)
        self._touch(sg, member)
        target = sg.target.get(member_id, {})
        changed = target != member.assigned or member.member_epoch != sg.assignment_epoch
        member.assigned = target
        member.member_epoch = sg.assignment_epoch
        assignment = target if (joined or changed) else None
        return ShareHeartbeatResult(ErrorCode.NONE, None, member_id, member.member_epoch,
                                    self.heartbeat_interval_ms(group_id), assignment)

    def _bump(self, sg: ShareGroup, metadata: dict[str, tuple[Any, int]], records: list[Record]) -> None:
        sg.group_epoch += 1
        sg.compute_assignment(metadata)
        sg.has_records = True
        records.append(sr.metadata_record(sg.group_id, sg.group_epoch))

    def _subscribed_metadata(self, sg: ShareGroup) -> dict[str, tuple[Any, int]]:
        out: dict[str, tuple[Any, int]] = {}
        for name in sorted(sg.subscribed_topic_names()):
            info = self._ctx.topics.get(name)
            if info is not None:
                out[name] = (info.topic_id, info.partitions)
        return out

    def _remove(self, sg: ShareGroup, member: ShareMember, records: list[Record], left: bool = False) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
            member.session_timer = None
        sg.members.pop(member.member_id, None)
        self._bump(sg, self._subscribed_metadata(sg), records)
        if self.on_member_removed is not None:
            try:
                self.on_member_removed(sg.group_id, member.member_id, left)
            except Exception:  # noqa: BLE001 - a release failure must not break the membership change
                log.exception("share group %s: releasing the records of member %s failed", sg.group_id,
                              member.member_id)

    # --- sessions ---

    def _touch(self, sg: ShareGroup, member: ShareMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        gid, mid = sg.group_id, member.member_id
        timeout = self.session_timeout_ms(gid)

        def expire() -> None:
            with self._ctx.mlock:
                group = self._ctx.groups.get(gid)
                current = group.members.get(mid) if isinstance(group, ShareGroup) else None
                if current is None or current.session_timer is not task or not isinstance(group, ShareGroup):
                    return
                log.info("share group %s: member %s's session expired (%d ms without heartbeat); removing it",
                         gid, mid, timeout)
                records: list[Record] = []
                self._remove(group, current, records)
                try:
                    self._ctx.append(gid, records)
                except ApiError as exc:
                    log.warning("share group %s: writing the removal of member %s failed: %s", gid, mid, exc)

        task = self._ctx.runtime.timer.schedule_once(f"share-session-{mid}", expire, timeout)
        member.session_timer = task

    def close(self) -> None:
        """Refuse heartbeats from now on and stop every member's timer (shutdown)."""
        with self._ctx.mlock:
            self._closed = True
            for g in self._ctx.groups.values():
                if isinstance(g, ShareGroup):
                    for m in g.members.values():
                        if m.session_timer is not None:
                            m.session_timer.cancel()
                            m.session_timer = None

    # --- queries ---

    def is_member(self, group_id: str, member_id: str) -> bool:
        group = self._ctx.groups.get(group_id)
        return isinstance(group, ShareGroup) and member_id in group.members

    def describe(self, group_id: str) -> tuple[int, str | None, ShareGroup | None]:
        """(error code, message, a consistent view while ``mlock`` is held)."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, "the group id is empty", None
        group = self._ctx.groups.get(group_id)
        if isinstance(group, ShareGroup):
            return ErrorCode.NONE, None, group
        if group is not None:
            return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.", None
        return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None

    def ensure(self, group_id: str) -> ShareGroup:
        """The share group, created empty (and written) when missing: an admin setting a
        new group's offsets (AlterShareGroupOffsets). ApiError: GROUP_ID_NOT_FOUND for a
        group of another type, INVALID_GROUP_ID, the append's."""
        if not group_id:
            raise ApiError(ErrorCode.INVALID_GROUP_ID, "the group id is empty")
        with self._ctx.mlock:
            sg = self._group_for(group_id, create=True)
            if not sg.has_records:
                self._ctx.append(group_id, [sr.metadata_record(group_id, sg.group_epoch)])
                sg.has_records = True
            return sg

    def share_groups(self) -> list[ShareGroup]:
        return [g for g in self._ctx.groups.values() if isinstance(g, ShareGroup)]

    # --- loading ---

    def replay(self, group_id: str, value: bytes | None) -> None:
        if value is None:
            group = self._ctx.groups.get(group_id)
            if isinstance(group, ShareGroup):
                self._ctx.groups.remove(group_id, group)
            return
        epoch = sr.decode_value(value)
        group = self._ctx.groups.get(group_id)
        if not isinstance(group, ShareGroup):
            group = ShareGroup(group_id)
            self._ctx.groups.put(group)
        group.group_epoch = group.assignment_epoch = epoch
        group.has_records = True


__all__ = ["LEAVE_EPOCH", "ShareGroups", "ShareHeartbeatResult"]
