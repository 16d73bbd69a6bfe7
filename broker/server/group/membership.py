"""The classic groups part of the group coordinator: the membership of the classic protocol
(Kafka's ``GroupCoordinator`` for JoinGroup, SyncGroup, Heartbeat and LeaveGroup) and the
classic group record.

Owns ``ClassicGroups``: it receives the ``GroupContext`` (configuration, runtime, clock,
membership lock, group map) and keeps only its own ``closed`` flag; the classic groups it
serves are the ``GroupMetadata`` entries of the group map. It writes and replays the
``GroupMetadataValue`` of a group (v3, Kafka's layout: generation, protocol, leader, each
member's subscription and assignment): written when a generation becomes Stable (the
leader's SyncGroup), when a rebalance ends with no member (Empty, members []), and when a
static member is replaced; loaded back at startup, a group with members is Stable with
them (each gets a full session to heartbeat again, as in Kafka), otherwise Empty.

The rebalance protocol over ``GroupMetadata`` (states in ``group.py``):

* JoinGroup: a member without an id gets ``client_id-uuid``; at v4+ (``require_known_member_id``)
  it first gets MEMBER_ID_REQUIRED with that id and must rejoin with it (a pending member,
  expired after its session timeout if it never does). A join that changes nothing of a
  Stable (non-leader) or CompletingRebalance member is answered at once with the current
  generation; every other join (re)starts a rebalance and WAITS: the answer comes when the
  join phase completes (every known member rejoined and no pending member remains, or the
  rebalance timeout passed: members that did not rejoin are removed). The leader's answer
  carries every member's metadata for the selected protocol (the one all members support
  that most prefer); the others get an empty member list.
* Static members (``group_instance_id``, KIP-345): a join without member id replaces the
  instance's old member id (the old one's pending answers get FENCED_INSTANCE_ID, and a
  Stable group is not rebalanced unless the selected protocol would change); a request
  naming the instance with another member id gets FENCED_INSTANCE_ID.
* SyncGroup: followers wait for the leader's; the leader's assignment is written to
  ``__consumer_offsets`` as a GroupMetadataValue, then every member gets its part and the
  group is Stable. Errors: UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, INCONSISTENT_GROUP_PROTOCOL
  (v5 protocol type / name), REBALANCE_IN_PROGRESS (a new rebalance started). Members
  that have not sent the generation's SyncGroup a rebalance timeout after the join
  completed are removed and the group rebalances (Kafka's pending-sync timer).
* Heartbeat: extends the member's session; REBALANCE_IN_PROGRESS while the group prepares a
  rebalance (the member must rejoin). A member whose session expires (no heartbeat, join or
  sync for session.timeout.ms, while not waiting on a join or sync) is removed and the
  group rebalances.
* LeaveGroup (v3: a batch of members, by member id or instance id): removes the members and
  rebalances.
* Limits: session timeouts outside [group.min.session.timeout.ms,
  group.max.session.timeout.ms] get INVALID_SESSION_TIMEOUT; a new member beyond
  group.max.size gets GROUP_MAX_SIZE_REACHED; an empty protocol type or list, or protocols
  the members have none in common with, INCONSISTENT_GROUP_PROTOCOL.
* KIP-848 consumer groups (``consumer_membership.py``): a JoinGroup for one with members
  gets INCONSISTENT_GROUP_PROTOCOL (Kafka 4 would let the classic member join the
  consumer group; that online migration is not done here); an empty one is converted to
  a classic group (its consumer-group records become tombstones, its offsets stay, and a
  new ``GroupMetadata`` takes its place in the group map). The other classic requests find
  no classic member there (UNKNOWN_MEMBER_ID).

Timers run on the coordinator's own ``KafkaScheduler`` thread (``group-coordinator-timer``):
join completion (rebalance timeout, initial delay), pending syncs, pending members and
session expiry. A request that waits
blocks its connection's thread on a ``Waiter`` (the socket server has one thread per
connection, and Kafka too answers a connection's requests in order).

Thread-safety: every change of membership state is made under ``GroupContext.mlock`` (an
RLock, taken before the partition locks of the offsets topic, which ``GroupContext.append``
takes around a record's append); waiters are completed under it and waited on outside it.
The group map's own lock is a leaf (``context.py``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from broker.log.scheduler import ScheduledTask
from broker.protocol import ErrorCode
from broker.server.errors import ApiError
from broker.server.group.context import GroupContext
from broker.server.group.group import (
    STATE_COMPLETING_REBALANCE,
    STATE_DEAD,
    STATE_EMPTY,
    STATE_PREPARING_REBALANCE,
    STATE_STABLE,
    GroupMetadata,
)
from broker.server.group.member import Member, Waiter, new_member_id
from broker.server.group.protocol import Group
from broker.server.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    encode_group_metadata_value,
    encode_key,
)

log = logging.getLogger(__name__)

# How long past its own deadline a waiting request gives up (a safety net: the timers
# answer first).
_WAIT_SLACK_S = 30.0


@dataclass
class JoinResult:
    error: int
    member_id: str = ""
    generation: int = -1
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)  # (id, instance id, metadata)


@dataclass
class SyncResult:
    error: int
    protocol_type: str | None = None
    protocol: str | None = None
    assignment: bytes = b""


Protocols = list[tuple[str, bytes]]


class ClassicGroups:
    """The classic groups part (see the module docstring)."""

    def __init__(self, ctx: GroupContext) -> None:
        self._ctx = ctx
        self._closed = False

    # --- JoinGroup ---

    def join_group(self, group_id: str, member_id: str, group_instance_id: str | None,
                   require_known_member_id: bool, client_id: str, client_host: str,
                   rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                   protocols: list[tuple[str, bytes]]) -> JoinResult:
        """Serve one JoinGroup; blocks until the group answers it."""
        waiter = self._join(group_id, member_id, group_instance_id, require_known_member_id, client_id,
                            client_host, rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols)
        if isinstance(waiter, JoinResult):
            return waiter
        with self._ctx.mlock:  # the join phase lasts at most the group's rebalance timeout (+ delays)
            group = self._ctx.groups.classic(group_id)
            longest = max(rebalance_timeout_ms, group.rebalance_timeout_ms if group is not None else 0)
        timeout = (2 * longest + self._ctx.config.initial_rebalance_delay_ms) / 1000.0
        result = waiter.wait(timeout + _WAIT_SLACK_S)
        if result is None:
            log.warning("JoinGroup of %s in group %s was not answered in time", member_id, group_id)
            return JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member_id)
        return result

    def _join(self, group_id: str, member_id: str, instance_id: str | None, require_known: bool, client_id: str,
              client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
              protocols: Protocols) -> JoinResult | Waiter:
        if not group_id:
            return JoinResult(ErrorCode.INVALID_GROUP_ID, member_id)
        if not self._ctx.config.min_session_timeout_ms <= session_timeout_ms <= self._ctx.config.max_session_timeout_ms:
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id)
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms
        names = [name for name, _ in protocols]
        with self._ctx.mlock:
            if self._closed:
                return JoinResult(ErrorCode.NOT_COORDINATOR, member_id)
            existing = self._ctx.groups.get(group_id)
            group = self._ctx.groups.classic(group_id)
            if existing is None:
                if member_id:
                    return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
                group = GroupMetadata(group_id)
                self._ctx.groups.put(group)
            elif group is None:  # a KIP-848 consumer group
                if not existing.is_empty():
                    return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
                group = self._convert_to_classic(existing)
            if not group.supports_protocols(protocol_type, names) or len(set(names)) != len(names):
                self._drop_if_shell(group)
                return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
            if not member_id:
                if len(group.members) + len(group.pending_members) >= self._ctx.config.max_group_size and \
                        group.static_member_id(instance_id) is None:
                    self._drop_if_shell(group)
                    return JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id)
                return self._join_new_member(group, instance_id, require_known, client_id, client_host,
                                             rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols)
            return self._join_known_member(group, member_id, instance_id, client_id, client_host,
                                           rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols)

    def _join_new_member(self, group: GroupMetadata, instance_id: str | None, require_known: bool, client_id: str,
                         client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                         protocols: Protocols) -> JoinResult | Waiter:
        new_id = new_member_id(client_id)
        if instance_id is not None:
            old_id = group.static_member_id(instance_id)
            if old_id is not None:
                return self._replace_static_member(group, instance_id, old_id, new_id, client_id, client_host,
                                                   rebalance_timeout_ms, session_timeout_ms, protocols)
        elif require_known:
            task = self._ctx.runtime.timer.schedule_once(
                f"pending-member-{new_id}", lambda: self._expire_pending(group.group_id, new_id), session_timeout_ms)
            group.pending_members[new_id] = task
            log.debug("group %s: new member %s must rejoin with its id (MEMBER_ID_REQUIRED)", group.group_id, new_id)
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, new_id)
        member = Member(new_id, instance_id, client_id, client_host, rebalance_timeout_ms, session_timeout_ms,
                        protocol_type, list(protocols))
        return self._add_member_and_rebalance(group, member)

    def _join_known_member(self, group: GroupMetadata, member_id: str, instance_id: str | None, client_id: str,
                           client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                           protocols: Protocols) -> JoinResult | Waiter:
        if member_id in group.pending_members:
            group.pending_members.pop(member_id).cancel()
            member = Member(member_id, instance_id, client_id, client_host, rebalance_timeout_ms,
                            session_timeout_ms, protocol_type, list(protocols))
            return self._add_member_and_rebalance(group, member)
        if group.is_static_member_fenced(member_id, instance_id):
            return JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id)
        known = group.members.get(member_id)
        if known is None:
            return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
        member = known
        if group.state == STATE_PREPARING_REBALANCE:
            return self._update_member_and_rebalance(group, member, rebalance_timeout_ms, session_timeout_ms,
                                                     protocols)
        if group.state == STATE_COMPLETING_REBALANCE:
            if member.matches(protocols):
                return self._current_generation(group, member, leader_view=True)
            return self._update_member_and_rebalance(group, member, rebalance_timeout_ms, session_timeout_ms,
                                                     protocols)
        if group.state == STATE_STABLE:
            if group.leader != member_id and member.matches(protocols):
                self._touch(member)
                return self._current_generation(group, member, leader_view=False)
            return self._update_member_and_rebalance(group, member, rebalance_timeout_ms, session_timeout_ms,
                                                     protocols)
        return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)

    def _current_generation(self, group: GroupMetadata, member: Member, leader_view: bool) -> JoinResult:
        members = self._member_list(group) if leader_view and group.leader == member.member_id else []
        return JoinResult(ErrorCode.NONE, member.member_id, group.generation, group.protocol_type, group.protocol,
                          group.leader or "", members)

    @staticmethod
    def _member_list(group: GroupMetadata) -> list[tuple[str, str | None, bytes]]:
        protocol = group.protocol or ""  # selected once the join phase completed
        return [(m.member_id, m.group_instance_id, m.metadata(protocol)) for m in group.members.values()]

    def _replace_static_member(self, group: GroupMetadata, instance_id: str, old_id: str, new_id: str,
                               client_id: str, client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
                               protocols: Protocols) -> JoinResult | Waiter:
        old = group.members[old_id]
        fenced = JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_id)
        if old.join_waiter is not None:
            old.join_waiter.complete(fenced)
            old.join_waiter = None
        if old.sync_waiter is not None:
            old.sync_waiter.complete(SyncResult(ErrorCode.FENCED_INSTANCE_ID))
            old.sync_waiter = None
        current_leader = group.leader
        member = group.replace_static_member(instance_id, old_id, new_id)
        if old_id in group.pending_sync:
            group.pending_sync.discard(old_id)
            group.pending_sync.add(new_id)
        member.client_id, member.client_host = client_id, client_host
        member.rebalance_timeout_ms, member.session_timeout_ms = rebalance_timeout_ms, session_timeout_ms
        old_protocols = member.protocols
        member.protocols = list(protocols)
        log.info("group %s: static member %s rejoined as %s (was %s)", group.group_id, instance_id, new_id, old_id)
        if group.state == STATE_STABLE:
            if group.protocol in group.candidate_protocols() and group.select_protocol() == group.protocol:
                try:
                    self._store_group(group)
                except ApiError as exc:
                    group.replace_static_member(instance_id, new_id, old_id)
                    member.protocols = old_protocols
                    return JoinResult(exc.code, "")
                self._touch(member)
                # The old leader id: the rejoined member does not assign in a Stable group.
                return JoinResult(ErrorCode.NONE, new_id, group.generation, group.protocol_type, group.protocol,
                                  current_leader or "", [])
            waiter = member.join_waiter = Waiter()
            self._prepare_rebalance(group, f"static member {instance_id} changed its protocols")
            return waiter
        waiter = member.join_waiter = Waiter()
        if group.state == STATE_COMPLETING_REBALANCE:
            self._prepare_rebalance(group, f"static member {instance_id} rejoined during the sync phase")
        elif group.state == STATE_PREPARING_REBALANCE:
            self._try_complete_join(group)
        return waiter

    def _add_member_and_rebalance(self, group: GroupMetadata, member: Member) -> Waiter:
        waiter = member.join_waiter = Waiter()
        if group.state == STATE_PREPARING_REBALANCE and group.generation == 0:
            group.new_member_added = True
        group.add(member)
        self._touch(member)
        log.info("group %s: member %s (client %s) joined", group.group_id, member.member_id, member.client_id)
        self._maybe_prepare_rebalance(group, f"adding new member {member.member_id}")
        if group.state == STATE_PREPARING_REBALANCE:
            self._try_complete_join(group)
        return waiter

    def _update_member_and_rebalance(self, group: GroupMetadata, member: Member, rebalance_timeout_ms: int,
                                     session_timeout_ms: int, protocols: Protocols) -> Waiter:
        member.rebalance_timeout_ms, member.session_timeout_ms = rebalance_timeout_ms, session_timeout_ms
        member.protocols = list(protocols)
        if member.join_waiter is not None:  # a repeated join replaces the one waiting
            member.join_waiter.complete(JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        waiter = member.join_waiter = Waiter()
        self._touch(member)
        self._maybe_prepare_rebalance(group, f"member {member.member_id} rejoined")
        if group.state == STATE_PREPARING_REBALANCE:
            self._try_complete_join(group)
        return waiter

    # --- the join phase ---

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.state in (STATE_STABLE, STATE_COMPLETING_REBALANCE, STATE_EMPTY):
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.state == STATE_COMPLETING_REBALANCE:
            self._reset_assignments(group, ErrorCode.REBALANCE_IN_PROGRESS)
        if group.join_task is not None:
            group.join_task.cancel()
        if group.sync_task is not None:
            group.sync_task.cancel()
            group.sync_task = None
        group.pending_sync = set()
        gid = group.group_id
        if group.state == STATE_EMPTY:
            delay = min(self._ctx.config.initial_rebalance_delay_ms, max(group.rebalance_timeout_ms, 0))
            remaining = max(group.rebalance_timeout_ms - delay, 0)
            group.new_member_added = False
            group.join_task = self._schedule_initial_join(gid, delay, remaining)
        else:
            group.join_task = self._ctx.runtime.timer.schedule_once(
                f"join-{gid}", lambda: self._join_expired(gid), group.rebalance_timeout_ms)
        group.transition_to(STATE_PREPARING_REBALANCE)
        log.info("group %s: preparing to rebalance (generation %d): %s", gid, group.generation, reason)
        self._try_complete_join(group)  # e.g. the last member left: nobody to wait for

    def _schedule_initial_join(self, gid: str, delay_ms: int, remaining_ms: int) -> ScheduledTask:
        holder: list[ScheduledTask] = []

        def expire() -> None:
            with self._ctx.mlock:
                group = self._ctx.groups.classic(gid)
                if group is None or group.join_task is not holder[0] or group.state != STATE_PREPARING_REBALANCE:
                    return
                if group.new_member_added and remaining_ms > 0:
                    group.new_member_added = False
                    delay = min(self._ctx.config.initial_rebalance_delay_ms, remaining_ms)
                    group.join_task = self._schedule_initial_join(gid, delay, remaining_ms - delay)
                    return
                self._complete_join(group)

        task = self._ctx.runtime.timer.schedule_once(f"initial-join-{gid}", expire, delay_ms)
        holder.append(task)
        return task

    def _join_expired(self, gid: str) -> None:
        with self._ctx.mlock:
            group = self._ctx.groups.classic(gid)
            if group is not None and group.state == STATE_PREPARING_REBALANCE:
                self._complete_join(group)

    def _try_complete_join(self, group: GroupMetadata) -> None:
        """Complete the join phase now if every member rejoined (not during the initial delay)."""
        task = group.join_task
        if task is not None and task.name.startswith("initial-join-"):
            return
        if group.has_all_members_joined():
            self._complete_join(group)

    def _complete_join(self, group: GroupMetadata) -> None:
        if group.join_task is not None:
            group.join_task.cancel()
            group.join_task = None
        for failed in group.not_yet_rejoined():
            log.info("group %s: member %s did not rejoin in time; removing it", group.group_id, failed.member_id)
            self._remove_member(group, failed, ErrorCode.UNKNOWN_MEMBER_ID)
        now = self._ctx.time.milliseconds()
        group.generation += 1
        group.current_state_timestamp = now
        if not group.members:
            group.protocol = None
            group.transition_to(STATE_EMPTY)
            log.info("group %s: generation %d is empty", group.group_id, group.generation)
            try:
                self._store_group(group)
            except ApiError as exc:
                log.warning("group %s: storing the empty generation failed: %s", group.group_id, exc)
            self._drop_if_shell(group)
            return
        group.protocol = group.select_protocol()
        group.transition_to(STATE_COMPLETING_REBALANCE)
        self._schedule_sync_expiration(group)
        log.info("group %s: generation %d with %d members (protocol %s, leader %s)", group.group_id,
                 group.generation, len(group.members), group.protocol, group.leader)
        members = self._member_list(group)
        for member in group.members.values():
            waiter, member.join_waiter = member.join_waiter, None
            member.is_new = False
            self._touch(member)
            if waiter is not None:
                waiter.complete(JoinResult(ErrorCode.NONE, member.member_id, group.generation, group.protocol_type,
                                           group.protocol, group.leader or "",
                                           members if member.member_id == group.leader else []))

    def _schedule_sync_expiration(self, group: GroupMetadata) -> None:
        """Kafka's pending-sync timer: members that have not sent this generation's
        SyncGroup within the rebalance timeout are removed and the group rebalances (so a
        leader that never syncs cannot leave the group in CompletingRebalance)."""
        if group.sync_task is not None:
            group.sync_task.cancel()
        group.pending_sync = set(group.members)
        gid, generation = group.group_id, group.generation

        def expire() -> None:
            with self._ctx.mlock:
                g = self._ctx.groups.classic(gid)
                if g is None or g.sync_task is not task or g.generation != generation:
                    return
                g.sync_task = None
                late = [g.members[m] for m in g.pending_sync if m in g.members]
                g.pending_sync = set()
                if not late or g.state not in (STATE_COMPLETING_REBALANCE, STATE_STABLE):
                    return
                for member in late:
                    log.info("group %s: member %s did not sync generation %d in time; removing it", gid,
                             member.member_id, generation)
                    self._remove_member(g, member, ErrorCode.UNKNOWN_MEMBER_ID)
                self._prepare_rebalance(g, "members did not sync in time")

        task = self._ctx.runtime.timer.schedule_once(f"sync-{gid}", expire, group.rebalance_timeout_ms)
        group.sync_task = task

    # --- SyncGroup ---

    def sync_group(self, group_id: str, generation: int, member_id: str, group_instance_id: str | None,
                   protocol_type: str | None, protocol: str | None,
                   assignments: list[tuple[str, bytes]]) -> SyncResult:
        waiter = self._sync(group_id, generation, member_id, group_instance_id, protocol_type, protocol,
                            assignments)
        if isinstance(waiter, SyncResult):
            return waiter
        with self._ctx.mlock:
            group = self._ctx.groups.classic(group_id)
            timeout = group.rebalance_timeout_ms if group is not None else 0
        result = waiter.wait(timeout / 1000.0 + _WAIT_SLACK_S)
        return result if result is not None else SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)

    def _sync(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
              protocol_type: str | None, protocol: str | None,
              assignments: list[tuple[str, bytes]]) -> SyncResult | Waiter:
        if not group_id:
            return SyncResult(ErrorCode.INVALID_GROUP_ID)
        with self._ctx.mlock:
            if self._closed:
                return SyncResult(ErrorCode.NOT_COORDINATOR)
            group = self._ctx.groups.classic(group_id)
            if group is None:
                return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
            if group.is_static_member_fenced(member_id, instance_id):
                return SyncResult(ErrorCode.FENCED_INSTANCE_ID)
            member = group.members.get(member_id)
            if member is None:
                return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
            if generation != group.generation:
                return SyncResult(ErrorCode.ILLEGAL_GENERATION)
            group.pending_sync.discard(member_id)
            if (protocol_type is not None and protocol_type != group.protocol_type) or \
                    (protocol is not None and protocol != group.protocol):
                return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
            if group.state == STATE_PREPARING_REBALANCE:
                return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
            if group.state == STATE_STABLE:
                self._touch(member)
                return SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol, member.assignment)
            if group.state != STATE_COMPLETING_REBALANCE:
                return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
            if member.sync_waiter is not None:
                member.sync_waiter.complete(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
            waiter = member.sync_waiter = Waiter()
            self._touch(member)
            if member_id == group.leader:
                given = {}
                for mid, data in assignments:
                    given[mid] = bytes(data)
                previous = {mid: m.assignment for mid, m in group.members.items()}
                for mid, m in group.members.items():
                    m.assignment = given.get(mid, b"")
                try:
                    self._store_group(group)
                except ApiError as exc:
                    for mid, m in group.members.items():
                        m.assignment = previous[mid]
                    log.warning("group %s: storing generation %d failed: %s", group_id, group.generation, exc)
                    self._reset_assignments(group, exc.code)
                    self._prepare_rebalance(group, "storing the assignment failed")
                    return waiter
                group.transition_to(STATE_STABLE)
                log.info("group %s: generation %d is stable", group_id, group.generation)
                for m in group.members.values():
                    if m.sync_waiter is not None:
                        m.sync_waiter.complete(SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol,
                                                          m.assignment))
                        m.sync_waiter = None
            return waiter

    def _reset_assignments(self, group: GroupMetadata, error: int) -> None:
        for m in group.members.values():
            m.assignment = b""
            if m.sync_waiter is not None:
                m.sync_waiter.complete(SyncResult(error))
                m.sync_waiter = None

    # --- Heartbeat ---

    def heartbeat(self, group_id: str, generation: int, member_id: str, group_instance_id: str | None) -> int:
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        with self._ctx.mlock:
            if self._closed:
                return ErrorCode.NOT_COORDINATOR
            group = self._ctx.groups.classic(group_id)
            if group is None or group.state == STATE_EMPTY:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if group.is_static_member_fenced(member_id, group_instance_id):
                return ErrorCode.FENCED_INSTANCE_ID
            member = group.members.get(member_id)
            if member is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if generation != group.generation:
                return ErrorCode.ILLEGAL_GENERATION
            self._touch(member)
            if group.state == STATE_PREPARING_REBALANCE:
                return ErrorCode.REBALANCE_IN_PROGRESS
            return ErrorCode.NONE

    # --- LeaveGroup ---

    def leave_group(self, group_id: str, leaving: list[tuple[str, str | None]]) -> list[int]:
        """Remove each (member id, instance id); one error code each."""
        if not group_id:
            return [ErrorCode.INVALID_GROUP_ID] * len(leaving)
        with self._ctx.mlock:
            if self._closed:
                return [ErrorCode.NOT_COORDINATOR] * len(leaving)
            group = self._ctx.groups.classic(group_id)
            if group is None:
                return [ErrorCode.UNKNOWN_MEMBER_ID] * len(leaving)
            codes: list[int] = []
            for member_id, instance_id in leaving:
                if instance_id is not None:
                    current = group.static_member_id(instance_id)
                    if current is not None and member_id and member_id != current:
                        codes.append(ErrorCode.FENCED_INSTANCE_ID)
                        continue
                    if current is not None:
                        member_id = current
                if member_id in group.pending_members:
                    group.pending_members.pop(member_id).cancel()
                    codes.append(ErrorCode.NONE)
                    if group.state == STATE_PREPARING_REBALANCE:
                        self._try_complete_join(group)
                    continue
                member = group.members.get(member_id)
                if member is None:
                    codes.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                log.info("group %s: member %s left", group_id, member_id)
                self._remove_member_and_update(group, member, f"member {member_id} left")
                codes.append(ErrorCode.NONE)
            return codes

    # --- sessions ---

    def _touch(self, member: Member) -> None:
        """A sign of life: the session restarts; schedules the expiry check if none."""
        member.heartbeat_deadline_ms = self._ctx.time.milliseconds() + member.session_timeout_ms
        if member.heartbeat_task is None:
            self._schedule_session_check(member, member.session_timeout_ms)

    def _schedule_session_check(self, member: Member, delay_ms: int) -> None:
        m = member

        def check() -> None:
            with self._ctx.mlock:
                if m.heartbeat_task is not task:
                    return
                m.heartbeat_task = None
                group = self._find_group_of(m)
                if group is None:
                    return
                now = self._ctx.time.milliseconds()
                if m.awaiting_join or m.awaiting_sync or now < m.heartbeat_deadline_ms:
                    keep = max(m.heartbeat_deadline_ms - now, 0) or m.session_timeout_ms
                    self._schedule_session_check(m, keep)
                    return
                log.info("group %s: member %s's session expired (%d ms without heartbeat); removing it",
                         group.group_id, m.member_id, m.session_timeout_ms)
                self._remove_member_and_update(group, m, f"member {m.member_id}'s session expired")

        task = self._ctx.runtime.timer.schedule_once(f"heartbeat-{member.member_id}", check, delay_ms)
        member.heartbeat_task = task

    def _find_group_of(self, member: Member) -> GroupMetadata | None:
        group = self._ctx.groups.classic(member.group_id)
        return group if group is not None and group.members.get(member.member_id) is member else None

    def _expire_pending(self, gid: str, member_id: str) -> None:
        with self._ctx.mlock:
            group = self._ctx.groups.classic(gid)
            if group is None or member_id not in group.pending_members:
                return
            del group.pending_members[member_id]
            log.info("group %s: pending member %s never joined; forgetting it", gid, member_id)
            if group.state == STATE_PREPARING_REBALANCE:
                self._try_complete_join(group)
            self._drop_if_shell(group)

    def _remove_member(self, group: GroupMetadata, member: Member, error: int) -> None:
        group.remove(member.member_id)
        if member.heartbeat_task is not None:
            member.heartbeat_task.cancel()
            member.heartbeat_task = None
        if member.join_waiter is not None:
            member.join_waiter.complete(JoinResult(error, member.member_id))
            member.join_waiter = None
        if member.sync_waiter is not None:
            member.sync_waiter.complete(SyncResult(error))
            member.sync_waiter = None

    def _remove_member_and_update(self, group: GroupMetadata, member: Member, reason: str) -> None:
        self._remove_member(group, member, ErrorCode.UNKNOWN_MEMBER_ID)
        if group.state in (STATE_STABLE, STATE_COMPLETING_REBALANCE):
            self._prepare_rebalance(group, reason)
        elif group.state == STATE_PREPARING_REBALANCE:
            self._try_complete_join(group)

    def _convert_to_classic(self, other: Group) -> GroupMetadata:
        """An empty KIP-848 consumer group becomes a classic group (its records become
        tombstones; its offsets stay), as Kafka 4 does for an empty group."""
        if other.has_records:
            self._ctx.append(other.group_id, other.tombstones())
        group = GroupMetadata(other.group_id)
        self._ctx.groups.put(group)
        log.info("group %s: the empty consumer group is converted to a classic group", group.group_id)
        return group

    def _drop_if_shell(self, group: GroupMetadata) -> None:
        if group.state == STATE_EMPTY and group.join_task is None:
            self._ctx.groups.drop_if_unused(group)

    # --- the group record ---

    def _store_group(self, group: GroupMetadata) -> None:
        """Write the group's GroupMetadataValue (its generation and, when it has members,
        their subscriptions and assignments). Under ``mlock``; raises ApiError."""
        protocol = group.protocol
        members = tuple(
            MemberMetadata(m.member_id, m.client_id, m.client_host, m.session_timeout_ms, m.rebalance_timeout_ms,
                           m.group_instance_id, m.metadata(protocol) if protocol else b"", m.assignment)
            for m in group.members.values())
        value = GroupMetadataValue(group.protocol_type or "", group.generation, group.protocol,
                                   group.leader if group.members else None,
                                   group.current_state_timestamp, members)
        self._ctx.append(group.group_id,
                         [(encode_key(GroupMetadataKey(group.group_id)), encode_group_metadata_value(value))])
        group.has_metadata_record = True

    def replay(self, key: GroupMetadataKey, value: GroupMetadataValue | None) -> None:
        """Apply one loaded group record (startup, in log order; None: a tombstone). A
        record of a group that is a consumer group now replaces it (the later record wins);
        a tombstone of one leaves it alone."""
        groups = self._ctx.groups
        if value is None:
            group = groups.classic(key.group)
            if group is not None:
                group.has_metadata_record = False
                group.protocol_type, group.generation = None, 0
                group.members.clear()
                group.static_members.clear()
                group.restore_state(STATE_EMPTY)
                group.protocol, group.leader = None, None
                groups.drop_if_unused(group)
            return
        group = groups.classic(key.group)
        if group is None:
            group = GroupMetadata(key.group)
            groups.put(group)
        self._restore_group(group, value)

    @staticmethod
    def _restore_group(group: GroupMetadata, gm: GroupMetadataValue) -> None:
        """Apply a loaded GroupMetadataValue: Stable with its members, or Empty."""
        group.protocol_type = gm.protocol_type or None
        group.generation = gm.generation
        group.protocol = gm.protocol
        group.current_state_timestamp = gm.current_state_timestamp
        group.has_metadata_record = True
        group.members.clear()
        group.static_members.clear()
        group.leader = None
        for mm in gm.members:
            group.add(Member(mm.member_id, mm.group_instance_id, mm.client_id, mm.client_host,
                             mm.rebalance_timeout, mm.session_timeout, gm.protocol_type,
                             [(gm.protocol or "", bytes(mm.subscription))], bytes(mm.assignment), is_new=False))
        if gm.leader in group.members:
            group.leader = gm.leader
        group.restore_state(STATE_STABLE if group.members and gm.protocol else STATE_EMPTY)
        if group.state == STATE_EMPTY:
            group.members.clear()
            group.static_members.clear()
            group.leader = None

    # --- loading and shutdown ---

    def resume(self) -> None:
        """After loading: a Stable group's members get a full session to come back."""
        for group in self._ctx.groups.classic_groups():
            for member in group.members.values():
                self._touch(member)

    def close(self) -> None:
        """Answer every waiting request with NOT_COORDINATOR (the broker is stopping)."""
        with self._ctx.mlock:
            self._closed = True
            for group in self._ctx.groups.classic_groups():
                if group.join_task is not None:
                    group.join_task.cancel()
                for m in group.members.values():
                    if m.join_waiter is not None:
                        m.join_waiter.complete(JoinResult(ErrorCode.NOT_COORDINATOR, m.member_id))
                        m.join_waiter = None
                    if m.sync_waiter is not None:
                        m.sync_waiter.complete(SyncResult(ErrorCode.NOT_COORDINATOR))
                        m.sync_waiter = None


__all__ = ["ClassicGroups", "JoinResult", "STATE_DEAD", "SyncResult"]
