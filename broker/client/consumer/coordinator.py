"""ConsumerCoordinator: a consumer's side of the classic group protocol (JoinGroup,
SyncGroup, Heartbeat, LeaveGroup), as the request/response logic of Kafka's
``AbstractCoordinator`` / ``ConsumerCoordinator``, without I/O.

The protocol core only: it builds request bodies (``f(version) -> Struct``, as
``ConsumerNetworkClient.send`` takes them) and interprets response bodies;
``group_driver.GroupMembership`` drives it over the network (FindCoordinator, the
heartbeat thread, rebalance listeners) for ``KafkaConsumer.subscribe``.

Owns the member's state: ``member_id`` ("" until the coordinator gives one; KIP-394's
MEMBER_ID_REQUIRED hands it over), ``generation`` (-1 outside a generation),
``protocol_name`` (the assignor the group chose), ``leader_id``, ``owned`` (the partitions
of the last assignment) and ``state`` (UNJOINED, PREPARING_REBALANCE,
COMPLETING_REBALANCE, STABLE).

A rebalance, as Kafka's consumer runs it:

1. ``on_join_prepare()`` -> the partitions to revoke before joining: all of them under
   EAGER; none under COOPERATIVE (members keep their partitions while the group
   rebalances).
2. ``join_group_request(topics)``: protocol type "consumer", one protocol per assignor in
   preference order, each with a ``ConsumerProtocolSubscription`` v3 (topics sorted,
   the assignor's user data, owned partitions, generation, rack).
3. ``handle_join_group(body, partitions_per_topic)`` -> ``JoinResult``: the leader runs
   the chosen assignor over every member's subscription (``partitions_per_topic(topics)``
   gives the partition counts) and gets the SyncGroup assignments to send; a follower
   sends none. Retry / rejoin / fatal outcomes are typed (see below).
4. ``sync_group_request(assignments)`` then ``handle_sync_group(body)`` -> ``SyncResult``
   (assigned, added, revoked, rejoin): under COOPERATIVE a member whose assignment lost
   partitions revokes them and rejoins at once (``rejoin``), so that the follow-up
   rebalance can hand them to their new owner (KIP-429).
5. While STABLE: ``heartbeat_request()`` every ``heartbeat.interval.ms`` and
   ``handle_heartbeat(body)``; ``leave_group_request(reason)`` on close.

Error codes, as Kafka's: MEMBER_ID_REQUIRED (take the member id, rejoin at once),
UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION (reset the member id / generation, rejoin),
REBALANCE_IN_PROGRESS (rejoin), COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE /
NOT_COORDINATOR (retriable: the caller looks the coordinator up again; ``RetriableGroupError``),
anything else (FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL, GROUP_MAX_SIZE_REACHED,
INVALID_SESSION_TIMEOUT, GROUP_AUTHORIZATION_FAILED, ...) raises
``KafkaError.from_code`` naming the group. Rejoin outcomes raise ``RebalanceNeeded``
from the handlers whose result would otherwise be used.

Thread-safety: none; ``GroupMembership`` guards it with its lock (its heartbeat thread
shares it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import Enum
from typing import Any, NamedTuple

from broker.client.errors import KafkaError
from broker.protocol import ApiKey, ErrorCode, request_schema

from .assignors import COOPERATIVE, EAGER, ConsumerPartitionAssignor
from .offsets import TopicPartition
from .protocol import (
    CONSUMER_PROTOCOL_TYPE,
    Assignment,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    subscription,
)

UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1

_RETRIABLE = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                        ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})


class MemberState(Enum):
    UNJOINED = "UNJOINED"
    PREPARING_REBALANCE = "PREPARING_REBALANCE"
    COMPLETING_REBALANCE = "COMPLETING_REBALANCE"
    STABLE = "STABLE"


class RebalanceNeeded(KafkaError):
    """The member must (re)join the group: send JoinGroup again."""


class RetriableGroupError(KafkaError):
    """The coordinator cannot answer now: look it up again, retry after a backoff."""


class JoinResult(NamedTuple):
    leader: bool
    assignments: dict[str, bytes]  # member id -> ConsumerProtocolAssignment (leader only)


class SyncResult(NamedTuple):
    assigned: list[TopicPartition]
    added: list[TopicPartition]
    revoked: list[TopicPartition]
    rejoin: bool  # cooperative: partitions were revoked, rejoin to let them move
    user_data: bytes | None


class ConsumerCoordinator:
    """See the module docstring."""

    def __init__(self, group_id: str, assignors: Sequence[ConsumerPartitionAssignor], *,
                 session_timeout_ms: int = 45000, rebalance_timeout_ms: int = 300000,
                 group_instance_id: str | None = None, rack_id: str | None = None) -> None:
        if not group_id:
            raise KafkaError("group.id is required for group membership",
                             ErrorCode.INVALID_GROUP_ID)
        if not assignors:
            raise ValueError("at least one partition assignor is needed")
        self.group_id = group_id
        self.assignors = list(assignors)
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.group_instance_id = group_instance_id
        self.rack_id = rack_id
        # Kafka: COOPERATIVE when every assignor supports it, else EAGER.
        self.rebalance_protocol = (COOPERATIVE if all(COOPERATIVE in a.rebalance_protocols
                                                      for a in self.assignors) else EAGER)
        self.member_id = UNKNOWN_MEMBER_ID
        self.generation = NO_GENERATION
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.state = MemberState.UNJOINED
        self.owned: list[TopicPartition] = []
        self.previous: list[TopicPartition] = []  # the last assignment (sticky user data)
        self.topics: tuple[str, ...] = ()

    # -- errors ------------------------------------------------------------------------------

    def _check(self, code: int, what: str) -> None:
        if code == ErrorCode.NONE:
            return
        msg = f"{what} of group {self.group_id}"
        if code in _RETRIABLE:
            raise RetriableGroupError(msg, code)
        if code == ErrorCode.UNKNOWN_MEMBER_ID:
            self.reset_generation(reset_member_id=True)
            raise RebalanceNeeded(msg, code)
        if code == ErrorCode.ILLEGAL_GENERATION:
            self.reset_generation(reset_member_id=False)
            raise RebalanceNeeded(msg, code)
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            self.state = MemberState.PREPARING_REBALANCE
            raise RebalanceNeeded(msg, code)
        self.state = MemberState.UNJOINED
        raise KafkaError.from_code(code, msg)

    def reset_generation(self, *, reset_member_id: bool) -> None:
        self.generation = NO_GENERATION
        if reset_member_id:
            self.member_id = UNKNOWN_MEMBER_ID
        self.state = MemberState.UNJOINED

    # -- join ------------------------------------------------------------------------------

    def on_join_prepare(self) -> list[TopicPartition]:
        """The partitions to revoke before JoinGroup (EAGER: all; COOPERATIVE: none)."""
        self.state = MemberState.PREPARING_REBALANCE
        if self.rebalance_protocol == EAGER:
            revoked, self.owned = self.owned, []
            return revoked
        return []

    def metadata(self, assignor: ConsumerPartitionAssignor) -> bytes:
        owned = [(tp.topic, tp.partition) for tp in self.owned]
        previous = [(tp.topic, tp.partition) for tp in self.previous]
        return encode_subscription(subscription(
            self.topics, user_data=assignor.subscription_user_data(self.topics, previous,
                                                                   self.generation),
            owned_partitions=owned, generation_id=self.generation, rack_id=self.rack_id))

    def join_group_request(self, topics: Iterable[str], reason: str | None = None
                           ) -> Callable[[int], Any]:
        self.topics = tuple(sorted(set(topics)))
        protocols = [(a.name, self.metadata(a)) for a in self.assignors]
        member_id, instance = self.member_id, self.group_instance_id

        def build(version: int) -> Any:
            schema = request_schema(ApiKey.JOIN_GROUP, version)
            proto = schema.structs["JoinGroupRequestProtocol"]
            return schema.cls(group_id=self.group_id, session_timeout_ms=self.session_timeout_ms,
                              rebalance_timeout_ms=self.rebalance_timeout_ms,
                              member_id=member_id, group_instance_id=instance,
                              protocol_type=CONSUMER_PROTOCOL_TYPE,
                              protocols=[proto(name=n, metadata=m) for n, m in protocols],
                              reason=reason)
        return build

    def handle_join_group(self, body: Any,
                          partitions_per_topic: Callable[[Iterable[str]], Mapping[str, int]]
                          ) -> JoinResult:
        code = body.error_code
        if code == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = body.member_id  # KIP-394: rejoin with it at once
            raise RebalanceNeeded(f"JoinGroup of group {self.group_id}: member id given",
                                  code)
        self._check(code, "JoinGroup")
        ptype = getattr(body, "protocol_type", None)
        if ptype not in (None, CONSUMER_PROTOCOL_TYPE):
            raise KafkaError(f"JoinGroup of group {self.group_id}: protocol type {ptype!r}",
                             ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        self.member_id = body.member_id
        self.generation = body.generation_id
        self.protocol_name = body.protocol_name
        self.leader_id = body.leader
        self.state = MemberState.COMPLETING_REBALANCE
        if body.leader != body.member_id or getattr(body, "skip_assignment", False):
            return JoinResult(False, {})
        assignor = next((a for a in self.assignors if a.name == body.protocol_name), None)
        if assignor is None:
            raise KafkaError(f"the group chose assignor {body.protocol_name!r}, which this "
                             "member does not have", ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        subs = {m.member_id: decode_subscription(m.metadata) for m in body.members}
        instances = {m.member_id: getattr(m, "group_instance_id", None) for m in body.members}
        topics = {t for s in subs.values() for t in s.topics}
        counts = dict(partitions_per_topic(sorted(topics)))
        result = assignor.assign(counts, subs, instances)
        return JoinResult(True, {
            m: encode_assignment(Assignment(tuple((tp.topic, tp.partition) for tp in tps)))
            for m, tps in result.items()})

    # -- sync ------------------------------------------------------------------------------

    def sync_group_request(self, assignments: Mapping[str, bytes]) -> Callable[[int], Any]:
        member_id, generation = self.member_id, self.generation
        protocol_name, instance = self.protocol_name, self.group_instance_id
        items = list(assignments.items())

        def build(version: int) -> Any:
            schema = request_schema(ApiKey.SYNC_GROUP, version)
            cls = schema.structs["SyncGroupRequestAssignment"]
            return schema.cls(group_id=self.group_id, generation_id=generation,
                              member_id=member_id, group_instance_id=instance,
                              protocol_type=CONSUMER_PROTOCOL_TYPE, protocol_name=protocol_name,
                              assignments=[cls(member_id=m, assignment=a) for m, a in items])
        return build

    def handle_sync_group(self, body: Any) -> SyncResult:
        self._check(body.error_code, "SyncGroup")
        decoded = decode_assignment(bytes(body.assignment or b""))
        assigned = [TopicPartition(t, p) for t, p in decoded.partitions]
        before = set(self.owned) if self.rebalance_protocol == COOPERATIVE else set()
        now = set(assigned)
        added = [tp for tp in assigned if tp not in before]
        revoked = [tp for tp in self.owned if tp not in now]
        self.owned = assigned
        self.previous = list(assigned)
        self.state = MemberState.STABLE
        rejoin = self.rebalance_protocol == COOPERATIVE and bool(revoked)
        return SyncResult(assigned, added, revoked, rejoin, decoded.user_data)

    # -- heartbeat and leave ---------------------------------------------------------------

    def heartbeat_request(self) -> Callable[[int], Any]:
        member_id, generation, instance = self.member_id, self.generation, self.group_instance_id

        def build(version: int) -> Any:
            return request_schema(ApiKey.HEARTBEAT, version).cls(
                group_id=self.group_id, generation_id=generation, member_id=member_id,
                group_instance_id=instance)
        return build

    def handle_heartbeat(self, body: Any) -> None:
        """None while the group is stable; ``RebalanceNeeded`` when it is rebalancing."""
        self._check(body.error_code, "Heartbeat")

    def leave_group_request(self, reason: str | None = None) -> Callable[[int], Any]:
        member_id, instance = self.member_id, self.group_instance_id
        self.reset_generation(reset_member_id=True)

        def build(version: int) -> Any:
            schema = request_schema(ApiKey.LEAVE_GROUP, version)
            if version < 3:
                return schema.cls(group_id=self.group_id, member_id=member_id)
            ident = schema.structs["MemberIdentity"]
            return schema.cls(group_id=self.group_id, members=[
                ident(member_id=member_id, group_instance_id=instance, reason=reason)])
        return build


__all__ = ["ConsumerCoordinator", "JoinResult", "MemberState", "RebalanceNeeded",
           "RetriableGroupError", "SyncResult"]
