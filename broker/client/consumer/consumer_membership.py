"""ConsumerGroupMembership: ``KafkaConsumer.subscribe`` with ``group.protocol=consumer``
(KIP-848): the member's side of ConsumerGroupHeartbeat, as Kafka's
``ConsumerMembershipManager`` and ``HeartbeatRequestManager`` do it.

With this protocol the broker computes the assignment (its server-side assignor, or the
one named by ``group.remote.assignor``); the member only heartbeats and reconciles:

* **Joining:** a heartbeat with member epoch 0, the member id this client generated
  (KIP-1082: a random UUID, base64url as Kafka writes it), the subscribed topic names (or
  ``SubscribedTopicRegex`` for ``subscribe(pattern=...)`` when the broker speaks v1; with
  v0 the client matches the pattern itself and sends names), ``RebalanceTimeoutMs`` =
  ``max.poll.interval.ms``, ``group.instance.id``, ``client.rack``.
* **Heartbeats** (a daemon thread with its own connection) every
  ``HeartbeatIntervalMs`` the broker answered, and at once when the member has something
  to say (it joined, reconciled, or its subscription changed). Every heartbeat carries the
  full member state (the broker takes unchanged fields as unchanged), so a lost
  heartbeat loses nothing.
* **Reconciliation** (on the consumer's thread, in ``poll``): the assignment of a
  heartbeat answer names partitions by topic id; they are resolved to names with a
  Metadata request (v10+, which carries topic ids). Partitions owned but no longer
  assigned are revoked first (auto commit of their positions, then
  ``on_partitions_revoked``), then the new ones are added (``on_partitions_assigned``),
  and the next heartbeat acknowledges the owned set. The broker only assigns a partition
  once its previous owner acknowledged its revocation, so a partition never has two
  owners.
* **Fencing:** FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID: every owned partition is lost
  (``on_partitions_lost``, no commit) and the member rejoins with epoch 0 and the same id.
* **Leaving:** ``close`` / ``unsubscribe`` revoke (commit, listener) and send epoch -1 (a
  static member: -2, it keeps its place until its session expires). When ``poll`` is not
  called for ``max.poll.interval.ms`` the heartbeat thread leaves (epoch -1); the next
  ``poll`` finds its partitions lost and rejoins.
* **Fatal errors** (GROUP_MAX_SIZE_REACHED, UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID,
  UNSUPPORTED_ASSIGNOR, INVALID_REQUEST, INVALID_SUBSCRIPTION_REGEX, a broker without
  ConsumerGroupHeartbeat, a group of the other protocol...) stop the heartbeats and are
  raised by the next ``poll``.

Commits of a member carry its member id and member epoch (OffsetCommit v9+:
``GenerationIdOrMemberEpoch``); ``KafkaConsumer`` retries one refused with
STALE_MEMBER_EPOCH with the epoch the member has by then.

Thread-safety: the member state (epoch, ids, target and owned partitions, pending
flags) is shared with the heartbeat thread and guarded by ``lock``; listeners, commits and
the subscription state run on the consumer's thread only.
"""

from __future__ import annotations

import base64
import logging
import re
import threading
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from broker.client.errors import KafkaError, KafkaTimeoutError, NetworkError
from broker.client.network import now_ms
from broker.protocol import ApiKey, ErrorCode, request_schema

from . import group_offsets as go
from .client import ConsumerNetworkClient
from .config import ConsumerConfig
from .group_driver import GroupMembership, _call
from .offsets import TopicPartition
from .subscription_state import SubscriptionState

log = logging.getLogger(__name__)

HEARTBEAT_VERSIONS = (0, 1)
REGEX_MIN_VERSION = 1
METADATA_TOPIC_ID_VERSIONS = (10, 12)  # Metadata answers carry topic ids from v10
OFFSET_COMMIT_VERSIONS = (9, 9)  # a KIP-848 member commits with its member epoch (v9+)
LEAVE_EPOCH = -1
LEAVE_STATIC_EPOCH = -2

_FENCED = frozenset({ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID})
_REDISCOVER = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
_RETRY = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})


def new_member_id() -> str:
    """A random member id as Kafka's clients make them (Uuid.toString: base64url, no padding)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class ConsumerGroupMembership:
    """See the module docstring. The same surface as ``group_driver.GroupMembership``."""

    def __init__(self, config: ConsumerConfig, client: ConsumerNetworkClient,
                 state: SubscriptionState, group_id: str,
                 commit: Callable[[dict[TopicPartition, int]], None],
                 drop_buffered: Callable[[set[TopicPartition]], None]) -> None:
        self.config = config
        self.client = client
        self.state = state
        self.commit = commit
        self.drop_buffered = drop_buffered
        self.group_id = group_id
        self.group_instance_id: str | None = config["group.instance.id"] or None
        self.lock = threading.RLock()
        self.listener: Any = None
        self.topics: frozenset[str] = frozenset()
        self.pattern: re.Pattern[str] | None = None
        # -- member state, under lock --
        self.member_id = new_member_id()
        self.member_epoch = 0
        self.heartbeat_interval_ms = float(config["heartbeat.interval.ms"])
        self.target: frozenset[tuple[uuid.UUID, int]] | None = None  # last assignment received
        self.owned: frozenset[TopicPartition] = frozenset()  # reconciled and acknowledged
        self.fenced = False  # partitions lost: released on the consumer thread, then rejoin
        self.left = False  # left (poll timeout): rejoin on the next poll
        self.fatal: KafkaError | None = None
        self.joined = False  # a heartbeat answer gave this member an epoch
        self.last_poll = now_ms()
        # topic id <-> name, from Metadata v10+ (under lock)
        self.topic_names: dict[uuid.UUID, str] = {}
        self.topic_ids: dict[str, uuid.UUID] = {}
        self._next_pattern_check = 0.0
        self._hb: _HeartbeatThread | None = None

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
        with self.lock:
            self.topics = new
        self.state.subscribe(new, pattern=pattern is not None)
        for t in new:
            self.client.metadata.add_topic(t)
        if self._hb is None:
            self._hb = _HeartbeatThread(self)
            self._hb.start()
        self._hb.wake()

    # The same as the classic driver's (they use only attributes both classes have):
    # the pattern's topics from a Metadata answer, and releasing partitions (commit then
    # on_partitions_revoked, or on_partitions_lost; then out of the assignment).
    _matching_topics = GroupMembership._matching_topics
    _release = GroupMembership._revoke

    def commit_fields(self) -> dict[str, Any]:
        """generation (the member epoch) / member_id / group_instance_id / the versions of
        this member's commits."""
        with self.lock:
            return {"generation": self.member_epoch if self.joined else -1,
                    "member_id": self.member_id if self.joined else "",
                    "group_instance_id": self.group_instance_id,
                    "versions": OFFSET_COMMIT_VERSIONS}

    def request_rejoin(self) -> None:
        """A commit was refused: the heartbeats will tell (fencing or a new epoch)."""
        if self._hb is not None:
            self._hb.wake()

    def poll_step_ms(self) -> float:
        """How long ``poll`` fetches before coming back to ``ensure_active``: short while
        an assignment is pending, so that reconciliation is not held up by a long poll."""
        with self.lock:
            settled = self.joined and not self.fenced and not self.left and self._reconciled()
        return self.heartbeat_interval_ms if settled else 100.0

    def _reconciled(self) -> bool:
        if self.target is None:
            return True
        return self.owned == self._resolve(self.target)[0]

    def poll_timer_expired(self) -> bool:
        return now_ms() - self.last_poll > self.config["max.poll.interval.ms"]

    # -- the consumer's side: reconciliation -----------------------------------------------

    def ensure_active(self, deadline: float) -> None:
        """Raise a fatal error; release lost partitions; reconcile towards the last
        assignment (see the module docstring). Never waits for the broker."""
        self.last_poll = now_ms()
        with self.lock:
            if self.fatal is not None:
                raise self.fatal
            left, fenced = self.left, self.fenced
        if left or fenced:
            with self.lock:
                lost = sorted(self.owned)
            self._release(lost, lost=True)
            with self.lock:
                self.owned = frozenset()
                self.target = None
                self.member_epoch = 0
                self.joined = False
                self.left = self.fenced = False
            if self._hb is not None:
                self._hb.wake()
        if self.pattern is not None and now_ms() >= self._next_pattern_check:
            try:
                found = self._matching_topics(deadline)
            except KafkaTimeoutError:
                found = self.topics
            if found != self.topics:
                with self.lock:
                    self.topics = found
                self.state.subscription = found
                for t in found:
                    self.client.metadata.add_topic(t)
                if self._hb is not None:
                    self._hb.wake()
        self._reconcile(deadline)

    def _resolve(self, target: frozenset[tuple[uuid.UUID, int]]) -> tuple[frozenset[TopicPartition], bool]:
        """(the target's partitions with known topic names, whether every id was known)."""
        names = self.topic_names
        out = frozenset(TopicPartition(names[tid], p) for tid, p in target if tid in names)
        return out, len(out) == len(target)

    def _reconcile(self, deadline: float) -> None:
        with self.lock:
            target, owned = self.target, self.owned
            if target is None:
                return
            wanted, complete = self._resolve(target)
        if not complete:
            self._lookup_topic_ids(deadline)
            with self.lock:
                wanted, complete = self._resolve(target)
        if wanted == owned:
            return
        revoked = sorted(owned - wanted)
        self._release(revoked, lost=False)
        added = sorted(wanted - owned)
        with self.lock:
            if self.target is not target or self.fenced or self.left:
                # the broker said something newer meanwhile: the next poll goes on from there
                self.owned = frozenset(owned - set(revoked))
                keep = set(self.owned)
                added = []
            else:
                self.owned = wanted
                keep = set(wanted)
        self.state.assign_from_subscribed(sorted(keep))
        self.drop_buffered(keep)
        if added:
            log.info("group %s: member %s epoch %d assigned %s", self.group_id, self.member_id,
                     self.member_epoch, added)
            _call(self.listener, "on_partitions_assigned", added)
        if self._hb is not None:
            self._hb.wake()  # acknowledge the new owned set at once

    def _lookup_topic_ids(self, deadline: float, client: ConsumerNetworkClient | None = None) -> None:
        """Learn the ids of every topic (Metadata v10+ for all topics: the assignment may
        name a topic this member has not seen yet, e.g. one a regex just matched)."""
        client = client or self.client

        def build(version: int) -> Any:
            return request_schema(ApiKey.METADATA, version).cls(topics=None, allow_auto_topic_creation=False)

        node = client.least_loaded_node(deadline)
        body, _ = go._request(client, node, ApiKey.METADATA, METADATA_TOPIC_ID_VERSIONS, build, deadline)
        with self.lock:
            for t in body.topics:
                if t.error_code == ErrorCode.NONE and t.topic_id.int != 0:
                    self.topic_names[t.topic_id] = t.name
                    self.topic_ids[t.name] = t.topic_id

    # -- leaving ---------------------------------------------------------------------------

    def leave(self, reason: str, *, revoke: bool = True) -> None:
        with self.lock:
            owned = sorted(self.owned)
            self.owned = frozenset()
            self.target = None
            joined = self.joined
            epoch = LEAVE_STATIC_EPOCH if self.group_instance_id is not None else LEAVE_EPOCH
            member_id = self.member_id
        if revoke:
            self._release(owned, lost=False)
        if not joined:
            return
        timeout = self.config["request.timeout.ms"]
        deadline = self.client.deadline(timeout)
        try:
            node = go._find_coordinator(self.client, self.group_id, deadline)
            body, _ = go._request(self.client, node, ApiKey.CONSUMER_GROUP_HEARTBEAT, HEARTBEAT_VERSIONS,
                                  self._request_builder(member_id, epoch, leaving=True), deadline)
            if body.error_code not in (ErrorCode.NONE, *_FENCED):
                log.info("leaving group %s (member %s): error %d", self.group_id, member_id, body.error_code)
        except (KafkaError, go._Retry) as exc:
            log.warning("leaving group %s failed: %s", self.group_id, exc)
        with self.lock:
            self.joined = False
            self.member_epoch = 0
        log.info("group %s: member %s left (%s)", self.group_id, member_id, reason)

    def close(self, reason: str = "the consumer is closing") -> None:
        if self._hb is not None:
            self._hb.stop()
            self._hb = None
        self.leave(reason)

    def unsubscribe(self) -> None:
        self.close("the consumer unsubscribed")
        self.topics = frozenset()
        self.pattern = None

    # -- requests --------------------------------------------------------------------------

    def _request_builder(self, member_id: str, epoch: int, *, leaving: bool = False) -> Callable[[int], Any]:
        """The build(version) of one ConsumerGroupHeartbeat with the full member state."""
        with self.lock:
            topics = sorted(self.topics)
            pattern = self.pattern.pattern if self.pattern is not None else None
            owned: dict[uuid.UUID, list[int]] = {}
            for tp in self.owned:
                tid = self.topic_ids.get(tp.topic)
                if tid is not None:
                    owned.setdefault(tid, []).append(tp.partition)
        config = self.config

        def build(version: int) -> Any:
            schema = request_schema(ApiKey.CONSUMER_GROUP_HEARTBEAT, version)
            tp_cls = schema.structs["TopicPartitions"]
            use_regex = pattern is not None and version >= REGEX_MIN_VERSION
            return schema.cls(
                group_id=self.group_id, member_id=member_id, member_epoch=epoch,
                instance_id=self.group_instance_id, rack_id=config["client.rack"] or None,
                rebalance_timeout_ms=-1 if leaving else config["max.poll.interval.ms"],
                subscribed_topic_names=None if leaving or use_regex else topics,
                subscribed_topic_regex=pattern if use_regex and not leaving else None,
                server_assignor=None if leaving else (config["group.remote.assignor"] or None),
                topic_partitions=None if leaving else [
                    tp_cls(topic_id=tid, partitions=sorted(ps)) for tid, ps in sorted(owned.items())])
        return build

    def handle_response(self, body: Any, sent_epoch: int) -> float:
        """Apply one heartbeat answer (heartbeat thread); returns the ms to the next one."""
        code = body.error_code
        with self.lock:
            if code == ErrorCode.NONE:
                if body.member_id:
                    self.member_id = body.member_id
                self.member_epoch = body.member_epoch
                self.heartbeat_interval_ms = float(body.heartbeat_interval_ms)
                if not self.joined:
                    log.info("group %s: member %s joined at epoch %d", self.group_id, self.member_id,
                             body.member_epoch)
                self.joined = True
                if body.assignment is not None:
                    self.target = frozenset((t.topic_id, p) for t in body.assignment.topic_partitions
                                            for p in t.partitions)
                return self.heartbeat_interval_ms
            message = f"ConsumerGroupHeartbeat of group {self.group_id} (member {self.member_id}, epoch " \
                      f"{sent_epoch})" + (f": {body.error_message}" if body.error_message else "")
            if code in _FENCED:
                log.info("%s: fenced (error %d); partitions lost, rejoining", message, code)
                self.fenced = True
                self.joined = False
                return 0.0
            if code in _REDISCOVER:
                raise go._Retry(KafkaError.from_code(code, message), rediscover=True)
            if code in _RETRY:
                raise go._Retry(KafkaError.from_code(code, message), rediscover=False)
            self.fatal = KafkaError.from_code(code, message)
            log.error("%s: fatal error %d", message, code)
            return float("inf")


class _HeartbeatThread(threading.Thread):
    """The heartbeat thread (see the module docstring); its own client and connection."""

    def __init__(self, group: ConsumerGroupMembership) -> None:
        super().__init__(name=f"kafkalog-heartbeat-{group.group_id}", daemon=True)
        self.group = group
        self._stop_event = threading.Event()
        self._wake = threading.Event()
        self.client = ConsumerNetworkClient(group.config)
        self._node: int | None = None
        self._attempt = 0

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stop_event.set()
        self._wake.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join()
        self.client.close()

    def run(self) -> None:
        g = self.group
        wait_ms = 0.0
        while not self._stop_event.is_set():
            self._wake.wait(max(0.0, wait_ms) / 1000.0 if wait_ms != float("inf") else None)
            self._wake.clear()
            if self._stop_event.is_set():
                return
            try:
                wait_ms = self._beat(g)
                self._attempt = 0
            except go._Retry as exc:
                log.info("heartbeat of group %s: %s", g.group_id, exc)
                if exc.rediscover:
                    self._drop_node()
                wait_ms = self.client.backoff_ms(self._attempt)
                self._attempt += 1
            except (NetworkError, KafkaTimeoutError) as exc:
                log.info("heartbeat of group %s failed: %s", g.group_id, exc)
                self._drop_node()
                wait_ms = self.client.backoff_ms(self._attempt)
                self._attempt += 1
            except KafkaError as exc:  # e.g. the broker has no ConsumerGroupHeartbeat
                with g.lock:
                    g.fatal = exc
                log.error("heartbeat of group %s: %s", g.group_id, exc)
                wait_ms = float("inf")
            except Exception:  # noqa: BLE001 - the next beat retries
                log.exception("heartbeat of group %s failed", g.group_id)
                self._drop_node()
                wait_ms = g.heartbeat_interval_ms

    def _drop_node(self) -> None:
        if self._node is not None:
            self.client.client.disconnect(self._node)
            self._node = None

    def _beat(self, g: ConsumerGroupMembership) -> float:
        with g.lock:
            if g.fatal is not None or g.fenced or g.left or not g.topics and not g.pattern:
                return float("inf")  # the consumer thread acts first, then wakes this thread
            if g.joined and g.poll_timer_expired():
                log.warning("group %s: poll() not called for max.poll.interval.ms (%d ms): leaving the group",
                            g.group_id, g.config["max.poll.interval.ms"])
                epoch = LEAVE_STATIC_EPOCH if g.group_instance_id is not None else LEAVE_EPOCH
                g.left = True
                g.joined = False
                member_id = g.member_id
                leaving = True
            else:
                epoch, member_id, leaving = g.member_epoch if g.joined else 0, g.member_id, False
        timeout = g.config["request.timeout.ms"]
        deadline = self.client.deadline(timeout)
        if g.target is not None and not g._resolve(g.target)[1]:
            g._lookup_topic_ids(deadline, self.client)
        if self._node is None:
            self._node = go._find_coordinator(self.client, g.group_id, deadline)
        build = g._request_builder(member_id, epoch, leaving=leaving)
        body, _ = go._request(self.client, self._node, ApiKey.CONSUMER_GROUP_HEARTBEAT, HEARTBEAT_VERSIONS,
                              build, deadline)
        if leaving:
            return float("inf")
        with g.lock:
            if g.left or g.fenced:
                return float("inf")
        return g.handle_response(body, epoch)


__all__ = ["ConsumerGroupMembership", "new_member_id"]
