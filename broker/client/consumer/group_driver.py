"""GroupMembership: drives a ``ConsumerCoordinator`` (coordinator.py, no I/O) over the
network for ``KafkaConsumer.subscribe`` (Kafka's ``AbstractCoordinator`` loop and
heartbeat thread), and ``ConsumerRebalanceListener``.

Owns: the subscription (topics, or a compiled pattern matched against the cluster's
topics every ``metadata.max.age.ms``), the rebalance loop and the heartbeat thread.

The rebalance loop (``ensure_active``, called by ``KafkaConsumer.poll`` on the consumer's
thread) runs when the member is not in a stable generation or a rejoin was requested
(the heartbeat got REBALANCE_IN_PROGRESS / ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID, the
pattern's topics changed, a cooperative assignment revoked partitions, max.poll.interval.ms
expired):

1. ``on_join_prepare``: EAGER revokes every partition (the auto commit of their positions
   first, then ``on_partitions_revoked``); COOPERATIVE revokes nothing. A member whose
   generation was lost (UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION, a left group) calls
   ``on_partitions_lost`` instead and commits nothing.
2. FindCoordinator, then JoinGroup (its request timeout is rebalance.timeout.ms + 5 s, as
   Kafka's), again at once with the member id after MEMBER_ID_REQUIRED; the leader runs
   the assignor over a Metadata answer for every member's topics; SyncGroup.
3. The assignment: COOPERATIVE revokes the partitions it lost (commit, then
   ``on_partitions_revoked``) and rejoins if it lost any; ``on_partitions_assigned`` gets
   the added partitions (EAGER: all). New partitions start at the committed offset, else
   ``auto.offset.reset`` (``KafkaConsumer._update_positions``).

Commits of a member carry its generation and member id (``commit_fields``); a commit
refused because the group rebalanced raises ``CommitFailedError``.

The heartbeat thread (daemon, one per subscribed consumer) has its own
``ConsumerNetworkClient`` (network clients are single-threaded) and its own coordinator
connection. Every ``heartbeat.interval.ms`` of a stable generation it sends Heartbeat; an
answer asking to rejoin sets ``rejoin_needed``. When ``poll`` has not been called for
``max.poll.interval.ms`` it sends LeaveGroup (as Kafka's; a static member does not leave,
its session expires) and the next ``poll`` rejoins. ``close`` sends LeaveGroup (not for a
static member, as Kafka's consumer).

Thread-safety: the coordinator's member state is shared with the heartbeat thread and
guarded by ``lock``; everything else runs on the consumer's thread.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterable
from typing import Any

from broker.client.errors import KafkaError, KafkaTimeoutError, NetworkError
from broker.client.network import now_ms
from broker.protocol import ApiKey, ErrorCode

from . import group_offsets as go
from .assignors import COOPERATIVE, get_assignor
from .client import ConsumerNetworkClient
from .config import ConsumerConfig
from .coordinator import ConsumerCoordinator, MemberState, RebalanceNeeded, RetriableGroupError
from .offsets import TopicPartition
from .subscription_state import SubscriptionState

log = logging.getLogger(__name__)

JOIN_GROUP_VERSIONS = (0, 9)
SYNC_GROUP_VERSIONS = (0, 5)
HEARTBEAT_VERSIONS = (0, 4)
LEAVE_GROUP_VERSIONS = (0, 5)
JOIN_EXTRA_TIMEOUT_MS = 5000


class ConsumerRebalanceListener:
    """Kafka's ``ConsumerRebalanceListener``: override what you need. Called on the
    consumer's thread, from ``poll`` (and ``unsubscribe`` / ``close``)."""

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        pass

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        pass

    def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
        self.on_partitions_revoked(partitions)


def _call(listener: Any, name: str, partitions: list[TopicPartition]) -> None:
    fn = getattr(listener, name, None)
    if fn is None and name == "on_partitions_lost":
        fn = getattr(listener, "on_partitions_revoked", None)
    if fn is None:
        return
    try:
        fn(list(partitions))
    except Exception:  # noqa: BLE001 - Kafka logs a listener's failure and goes on
        log.exception("rebalance listener %s(%s) failed", name, partitions)


class GroupMembership:
    """See the module docstring."""

    def __init__(self, config: ConsumerConfig, client: ConsumerNetworkClient,
                 state: SubscriptionState, group_id: str,
                 commit: Callable[[dict[TopicPartition, int]], None],
                 drop_buffered: Callable[[set[TopicPartition]], None]) -> None:
        self.config = config
        self.client = client
        self.state = state
        self.commit = commit  # auto commit of positions before revocation
        self.drop_buffered = drop_buffered
        self.lock = threading.RLock()
        self.coordinator = ConsumerCoordinator(
            group_id, [get_assignor(s) for s in config["partition.assignment.strategy"]],
            session_timeout_ms=config["session.timeout.ms"],
            rebalance_timeout_ms=config["max.poll.interval.ms"],
            group_instance_id=config["group.instance.id"] or None,
            rack_id=config["client.rack"] or None)
        self.group_id = group_id
        self.listener: Any = None
        self.topics: frozenset[str] = frozenset()
        self.pattern: re.Pattern[str] | None = None
        self.rejoin_needed = True
        self.lost = False  # the generation was lost: partitions are lost, not revoked
        self.last_poll = now_ms()
        self._next_pattern_check = 0.0
        self._node: int | None = None
        self._hb: _Heartbeat | None = None

    # -- subscription ----------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str] | None, pattern: str | None, listener: Any) -> None:
        self.listener = listener
        if pattern is not None:
            self.pattern = re.compile(pattern)
            self._next_pattern_check = 0.0
            topics = self._matching_topics(self.client.deadline())
        else:
            self.pattern = None
        new = frozenset(topics or ())
        if new != self.topics:
            self.rejoin_needed = True
        self.topics = new
        self.state.subscribe(new, pattern=pattern is not None)
        for t in new:
            self.client.metadata.add_topic(t)
        if self._hb is None:
            self._hb = _Heartbeat(self)
            self._hb.start()

    def _matching_topics(self, deadline: float) -> frozenset[str]:
        body = self.client.describe_topics(None, deadline)
        assert self.pattern is not None
        self._next_pattern_check = now_ms() + self.config["metadata.max.age.ms"]
        return frozenset(t.name for t in body.topics if t.error_code == ErrorCode.NONE
                         and not getattr(t, "is_internal", False)
                         and self.pattern.fullmatch(t.name))

    def commit_fields(self) -> dict[str, Any]:
        """generation / member_id / group_instance_id of this member's commits."""
        with self.lock:
            c = self.coordinator
            return {"generation": c.generation, "member_id": c.member_id,
                    "group_instance_id": c.group_instance_id}

    def request_rejoin(self) -> None:
        with self.lock:
            self.rejoin_needed = True
            if self.coordinator.generation < 0 and self.coordinator.owned:
                self.lost = True

    # -- the rebalance loop ----------------------------------------------------------------

    def ensure_active(self, deadline: float) -> None:
        """Rejoin if needed (see the module docstring); returns in a stable generation."""
        self.last_poll = now_ms()
        if self.pattern is not None and now_ms() >= self._next_pattern_check:
            try:
                found = self._matching_topics(deadline)
            except KafkaTimeoutError:
                found = self.topics
            if found != self.topics:
                self.topics = found
                self.state.subscription = found
                with self.lock:
                    self.rejoin_needed = True
        attempt = 0
        while True:
            with self.lock:
                stable = (self.coordinator.state == MemberState.STABLE
                          and not self.rejoin_needed)
            if stable:
                return
            try:
                self._rebalance(deadline)
            except (RetriableGroupError, NetworkError, go._Retry) as exc:
                log.info("group %s: %s; looking the coordinator up again", self.group_id, exc)
                self._drop_coordinator()
                if now_ms() >= deadline:
                    raise KafkaTimeoutError(f"joining group {self.group_id} not done before "
                                            f"the deadline (last error: {exc})") from None
                self.client.sleep(self.client.backoff_ms(attempt), deadline)
                attempt += 1

    def _drop_coordinator(self) -> None:
        if self._node is not None:
            self.client.client.disconnect(self._node)
            self._node = None

    def _coordinator_node(self, deadline: float) -> int:
        if self._node is None:
            self._node = go._find_coordinator(self.client, self.group_id, deadline)
        return self._node

    def _revoke(self, partitions: list[TopicPartition], lost: bool) -> None:
        if not partitions:
            return
        if not lost:
            positions = {tp: o for tp, o in self.state.all_consumed().items() if tp in partitions}
            if positions:
                self.commit(positions)
            _call(self.listener, "on_partitions_revoked", partitions)
        else:
            _call(self.listener, "on_partitions_lost", partitions)
        gone = set(partitions)
        keep = [tp for tp in self.state.assigned_partitions() if tp not in gone]
        self.state.assign_from_subscribed(keep)
        self.drop_buffered(set(keep))

    def _rebalance(self, deadline: float) -> None:
        c = self.coordinator
        with self.lock:
            lost, self.lost = self.lost, False
            if lost:
                owned, c.owned = list(c.owned), []
                revoked: list[TopicPartition] = []
            else:
                owned = []
                revoked = c.on_join_prepare()
            self.rejoin_needed = False
        self._revoke(owned, lost=True)
        self._revoke(revoked, lost=False)
        node = self._coordinator_node(deadline)
        join_timeout = c.rebalance_timeout_ms + JOIN_EXTRA_TIMEOUT_MS
        while True:  # JoinGroup until the member id is settled
            with self.lock:
                c.state = MemberState.PREPARING_REBALANCE
                build = c.join_group_request(self.topics)
            body = self._send(node, ApiKey.JOIN_GROUP, JOIN_GROUP_VERSIONS, build,
                              max(deadline, now_ms() + join_timeout), join_timeout)
            try:
                with self.lock:
                    join = c.handle_join_group(body, self._partition_counts)
            except RebalanceNeeded as exc:
                if exc.code == ErrorCode.MEMBER_ID_REQUIRED:
                    continue
                self._lost_if_reset()
                with self.lock:
                    self.rejoin_needed = True
                return
            break
        with self.lock:
            build = c.sync_group_request(join.assignments)
        body = self._send(node, ApiKey.SYNC_GROUP, SYNC_GROUP_VERSIONS, build,
                          max(deadline, now_ms() + join_timeout), join_timeout)
        try:
            with self.lock:
                result = c.handle_sync_group(body)
        except RebalanceNeeded:
            self._lost_if_reset()
            with self.lock:
                self.rejoin_needed = True
            return
        log.info("group %s generation %d: member %s assigned %s", self.group_id,
                 c.generation, c.member_id, result.assigned)
        if c.rebalance_protocol == COOPERATIVE:
            self._revoke(result.revoked, lost=False)
        self.state.assign_from_subscribed(result.assigned)
        self.drop_buffered(set(result.assigned))
        _call(self.listener, "on_partitions_assigned",
              result.added if c.rebalance_protocol == COOPERATIVE else result.assigned)
        if result.rejoin:
            with self.lock:
                self.rejoin_needed = True

    def _lost_if_reset(self) -> None:
        """After UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION (generation reset) the partitions
        this member still holds (cooperative) are lost."""
        with self.lock:
            if self.coordinator.generation < 0 and self.coordinator.owned:
                self.lost = True

    def _partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        names = sorted(set(topics))
        if not names:
            return {}
        body = self.client.describe_topics(names, self.client.deadline())
        return {t.name: len(t.partitions) for t in body.topics
                if t.error_code == ErrorCode.NONE and t.partitions}

    def _send(self, node: int, api_key: ApiKey, versions: tuple[int, int], build: Any,
              deadline: float, timeout_ms: float) -> Any:
        client = self.client
        if not client.await_ready(node, deadline):
            raise NetworkError(f"cannot connect to the coordinator of group {self.group_id}")
        future = client.send(node, api_key, build, our_min=versions[0], our_max=versions[1],
                             timeout_ms=timeout_ms)
        resp = client.wait(future, deadline)
        if resp.error is not None:
            if resp.error.retriable:
                raise NetworkError(str(resp.error))
            raise resp.error
        return resp.body

    # -- leaving ---------------------------------------------------------------------------

    def poll_timer_expired(self) -> bool:
        return now_ms() - self.last_poll > self.config["max.poll.interval.ms"]

    def leave(self, reason: str, *, revoke: bool = True) -> None:
        """Revoke (commit, listener), then LeaveGroup; a static member only revokes."""
        c = self.coordinator
        with self.lock:
            owned, c.owned = list(c.owned), []
            member_id, joined = c.member_id, c.generation >= 0 or bool(c.member_id)
        if revoke:
            self._revoke(owned, lost=False)
        with self.lock:
            if not joined or c.group_instance_id is not None:
                c.reset_generation(reset_member_id=c.group_instance_id is None)
                self.rejoin_needed = True
                return
            build = c.leave_group_request(reason)
            self.rejoin_needed = True
        try:
            node = self._coordinator_node(self.client.deadline(self.config["request.timeout.ms"]))
            body = self._send(node, ApiKey.LEAVE_GROUP, LEAVE_GROUP_VERSIONS, build,
                              self.client.deadline(self.config["request.timeout.ms"]),
                              self.config["request.timeout.ms"])
            if body.error_code != ErrorCode.NONE:
                log.info("LeaveGroup of %s (member %s): error %d", self.group_id, member_id,
                         body.error_code)
        except (KafkaError, go._Retry) as exc:
            log.warning("LeaveGroup of group %s failed: %s", self.group_id, exc)

    def close(self, reason: str = "the consumer is closing") -> None:
        if self._hb is not None:
            self._hb.stop()
            self._hb = None
        self.leave(reason)

    def unsubscribe(self) -> None:
        self.close("the consumer unsubscribed")
        self.topics = frozenset()
        self.pattern = None


class _Heartbeat(threading.Thread):
    """The heartbeat thread (see the module docstring)."""

    def __init__(self, group: GroupMembership) -> None:
        super().__init__(name=f"kafkalog-heartbeat-{group.group_id}", daemon=True)
        self.group = group
        self._stop_event = threading.Event()
        self.client = ConsumerNetworkClient(group.config)
        self._node: int | None = None

    def stop(self) -> None:
        self._stop_event.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join()
        self.client.close()

    def run(self) -> None:
        g = self.group
        interval = g.config["heartbeat.interval.ms"]
        while not self._stop_event.wait(interval / 1000.0):
            try:
                self._beat(g)
            except Exception as exc:  # noqa: BLE001 - the next beat retries
                log.info("heartbeat of group %s failed: %s", g.group_id, exc)
                if self._node is not None:
                    self.client.client.disconnect(self._node)
                    self._node = None

    def _beat(self, g: GroupMembership) -> None:
        c = g.coordinator
        with g.lock:
            if c.state != MemberState.STABLE or g.rejoin_needed:
                return
            if g.poll_timer_expired():
                log.warning("group %s: poll() not called for max.poll.interval.ms (%d ms): "
                            "leaving the group", g.group_id, g.config["max.poll.interval.ms"])
                self._leave_expired(g)
                return
            generation = c.generation
            build = c.heartbeat_request()
        timeout = g.config["request.timeout.ms"]
        deadline = self.client.deadline(timeout)
        if self._node is None:
            self._node = go._find_coordinator(self.client, g.group_id, deadline)
        body, _ = go._request(self.client, self._node, ApiKey.HEARTBEAT, HEARTBEAT_VERSIONS,
                              build, deadline)
        with g.lock:
            if c.generation != generation or c.state != MemberState.STABLE:
                return
            try:
                c.handle_heartbeat(body)
            except RebalanceNeeded:
                g.rejoin_needed = True
                if c.generation < 0:
                    g.lost = True
            except RetriableGroupError:
                self.client.client.disconnect(self._node)
                self._node = None

    def _leave_expired(self, g: GroupMembership) -> None:
        """Called with ``g.lock`` held: leave (the partitions are lost to this member)."""
        c = g.coordinator
        g.lost = bool(c.owned)
        g.rejoin_needed = True
        if c.group_instance_id is not None:
            return
        build = c.leave_group_request("consumer poll timeout has expired")
        deadline = self.client.deadline(g.config["request.timeout.ms"])
        if self._node is None:
            self._node = go._find_coordinator(self.client, g.group_id, deadline)
        go._request(self.client, self._node, ApiKey.LEAVE_GROUP, LEAVE_GROUP_VERSIONS, build,
                    deadline)


__all__ = ["ConsumerRebalanceListener", "GroupMembership"]
