"""Consumer-group offsets on the client side: commit and fetch a group's committed offsets,
list, describe and delete groups (the offset part of Kafka's ``ConsumerCoordinator`` and
the group part of its ``Admin`` client). No group membership (that is
``group_driver.py``): these are the calls of a consumer that assign()s its partitions, of a
subscribed one (commits with its generation), and of ``kafka-consumer-groups``.

Owns::

    fetch_committed(client_or_config, group_id, tps)      -> {TopicPartition: offset | None}
    commit_offsets(client_or_config, group_id, {tp: offset}, metadata="",
                   generation=-1, member_id="", group_instance_id=None) -> None
    CommitFailedError                                      a member's commit after a rebalance
    list_group_offsets(client_or_config, group_id)        -> {TopicPartition: offset} (all)
    list_groups(client_or_config)                          -> [GroupListing]
    describe_groups(client_or_config, group_ids)           -> {group_id: GroupDescription}
    delete_groups(client_or_config, group_ids)             -> None
    delete_group_offsets(client_or_config, group_id, tps)  -> {TopicPartition: KafkaError | None}
    GroupsNotSupportedError                                the broker lacks the group APIs

Each takes a ``ConsumerNetworkClient`` (reused, left open) or a config mapping /
``ConsumerConfig`` (a client made for the call and closed after it), and an optional
``timeout_ms`` (default ``default.api.timeout.ms``).

Protocol: the group's coordinator is found with FindCoordinator (v0-3, key_type 0) on the
least loaded broker and reached on a connection of its own (node id
``COORDINATOR_ID_BASE - node_id``, as Kafka's client does, so that fetches on the
regular connection never delay it). Then OffsetCommit v2-8 (by default generation -1 and an empty
member id: a simple consumer), OffsetFetch v1-7 (v2+ for a null topic list), ListGroups
v0-4 (sent to every broker; below v4 the state comes from DescribeGroups),
DescribeGroups v0-5, DeleteGroups v0-2, OffsetDelete v0, each with the highest version
both sides have. A member's assignment (DescribeGroups ``member_assignment``) is decoded
as Kafka's ConsumerProtocolAssignment (v0-3: int16 version, [topic, [partition]], user
data) when the group's protocol type is ``consumer``; anything else gives no partitions.

A member's commit (generation >= 0) refused with UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION or
REBALANCE_IN_PROGRESS raises ``CommitFailedError`` (Kafka's ``CommitFailedException``).
Committing as a simple consumer (generation -1, member "") is what Kafka's
``Admin.alterConsumerGroupOffsets`` does; a coordinator whose group has active members
refuses it (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION or REBALANCE_IN_PROGRESS): that raises
the typed error with a message saying the group has active members and must be stopped.

Retries, until the deadline: COORDINATOR_LOAD_IN_PROGRESS (the same coordinator, after a
backoff), NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE / REQUEST_TIMED_OUT and lost
connections (the coordinator is looked up again), UNSTABLE_OFFSET_COMMIT; the backoff is
retry.backoff.ms doubled per attempt up to retry.backoff.max.ms. Any other error code
raises ``KafkaError.from_code`` naming the group (and partition); the deadline raises
``KafkaTimeoutError`` chained to the last error. A broker that does not advertise
FindCoordinator or the API a call needs raises ``GroupsNotSupportedError`` at once, naming
the broker. An empty group id raises INVALID_GROUP_ID without a request; a negative
offset raises ValueError.

Thread-safety: as the ``ConsumerNetworkClient`` used: one thread at a time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from broker.client.errors import BrokerUnreachableError, KafkaError, KafkaTimeoutError, NetworkError
from broker.client.network import now_ms
from broker.protocol import ApiKey, ErrorCode, request_schema
from broker.record.limits import INT32_MAX

from .client import ConsumerNetworkClient
from .offsets import TopicPartition, consumer_client
from .protocol import ConsumerProtocolError, decode_assignment

# Kafka's AbstractCoordinator: the coordinator connection's id is Integer.MAX_VALUE - id.
COORDINATOR_ID_BASE = INT32_MAX
KEY_TYPE_GROUP = 0

FIND_COORDINATOR_VERSIONS = (0, 3)  # v4+ batches keys (another body)
OFFSET_COMMIT_VERSIONS = (2, 8)  # v2 is Kafka 4's baseline; v9+ is for KIP-848 groups
OFFSET_FETCH_VERSIONS = (1, 7)  # v8+ batches groups (another body)
OFFSET_FETCH_ALL_MIN_VERSION = 2  # a null topic list (every partition of the group)
LIST_GROUPS_VERSIONS = (0, 4)  # v4 adds the group state
LIST_GROUPS_STATE_VERSION = 4
CONSUMER_GROUP_DESCRIBE_VERSIONS = (0, 1)
DESCRIBE_GROUPS_VERSIONS = (0, 5)  # v6 answers GROUP_ID_NOT_FOUND for a missing group
DELETE_GROUPS_VERSIONS = (0, 2)
OFFSET_DELETE_VERSIONS = (0, 0)
CONSUMER_PROTOCOL_TYPE = "consumer"
METADATA_VERSIONS = (1, 8)

# Group-level errors after which the coordinator is looked up again.
_REDISCOVER = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                         ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NETWORK_EXCEPTION})
# What a coordinator answers a simple (generation -1) commit to a group with members.
ACTIVE_GROUP_ERRORS = frozenset({ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION,
                                 ErrorCode.REBALANCE_IN_PROGRESS})
# Errors retried as they are (after a backoff).
# What refuses a member's commit: the group moved on (classic), or the member epoch is not
# the member's (KIP-848 groups).
MEMBER_COMMIT_ERRORS = ACTIVE_GROUP_ERRORS | {ErrorCode.STALE_MEMBER_EPOCH, ErrorCode.FENCED_MEMBER_EPOCH}
_RETRY = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.UNSTABLE_OFFSET_COMMIT})


class GroupsNotSupportedError(KafkaError):
    """The broker does not advertise the consumer-group API a call needs."""


class CommitFailedError(KafkaError):
    """A group member's commit refused because the group rebalanced (Kafka's
    ``CommitFailedException``): its partitions may now belong to another member."""


class GroupListing(NamedTuple):
    group_id: str
    protocol_type: str  # "" for a group that only stores offsets, "consumer" for a consumer group
    state: str  # "Empty", "Stable", ... ("" when the broker could not tell)


class MemberDescription(NamedTuple):
    member_id: str
    client_id: str
    client_host: str
    group_instance_id: str | None = None
    assignment: tuple[TopicPartition, ...] = ()  # decoded for "consumer" groups, sorted


class Coordinator(NamedTuple):
    """The broker coordinating a group (``id_string`` as Kafka's ``Node.idString``)."""

    node_id: int
    host: str
    port: int


class GroupDescription(NamedTuple):
    group_id: str
    state: str  # "Dead" for a group that does not exist
    protocol_type: str
    protocol: str  # the assignor ("range", ...) of a consumer group; "" otherwise
    members: tuple[MemberDescription, ...] = ()
    coordinator: Coordinator | None = None
    group_type: str = "classic"  # "consumer": a KIP-848 group (described by ConsumerGroupDescribe)


class _Retry(Exception):
    """One attempt failed with a retriable error; ``rediscover``: look the coordinator up."""

    def __init__(self, error: BaseException, rediscover: bool) -> None:
        super().__init__(str(error))
        self.error = error
        self.rediscover = rediscover


def _check_group(group_id: str) -> None:
    if not isinstance(group_id, str) or not group_id:
        raise KafkaError.from_code(ErrorCode.INVALID_GROUP_ID, f"invalid group id {group_id!r}")


def _broker_name(client: ConsumerNetworkClient, node_id: int) -> str:
    """``host:port`` of ``node_id``: from the metadata, else from its connection (a
    coordinator connection has no metadata entry, and a broker's may not be known yet
    when only its connection's ApiVersions were read)."""
    node = client.metadata.node(node_id)
    if node is None:
        conn = client.client._conns.get(node_id)
        return f"{conn.host}:{conn.port}" if conn is not None else f"node {node_id}"
    return f"{node.host}:{node.port}"


def _require(client: ConsumerNetworkClient, node_id: int, api_key: ApiKey, versions: tuple[int, int]) -> None:
    """GroupsNotSupportedError unless the (ready) node offers a version in ``versions``."""
    if client.client.api_version(node_id, api_key, versions[1], versions[0]) is not None:
        return
    rng = client.client._conns[node_id].api_versions.get(int(api_key))
    offered = "does not advertise it" if rng is None else f"offers only v{rng[0]}-{rng[1]}"
    raise GroupsNotSupportedError(
        f"the broker at {_broker_name(client, node_id)} does not support consumer groups: "
        f"{api_key.name} (API key {int(api_key)}) v{versions[0]}-{versions[1]} is needed and it {offered}")


def _request(client: ConsumerNetworkClient, node_id: int, api_key: ApiKey, versions: tuple[int, int],
             build: Any, deadline: float) -> tuple[Any, int]:
    """(response body, version) of one request; network failures raise ``_Retry``."""
    try:
        if not client.await_ready(node_id, deadline):
            raise NetworkError(f"cannot connect to {_broker_name(client, node_id)}")
        _require(client, node_id, api_key, versions)
        future = client.send(node_id, api_key, build, our_min=versions[0], our_max=versions[1])
        resp = client.wait(future, deadline)
    except NetworkError as exc:
        raise _Retry(exc, rediscover=True) from None
    if resp.error is not None:
        if resp.error.retriable:
            raise _Retry(resp.error, rediscover=True)
        raise resp.error
    return resp.body, resp.request.api_version


def _find_coordinator(client: ConsumerNetworkClient, group_id: str, deadline: float) -> int:
    """The coordinator connection's node id (one FindCoordinator round trip)."""
    node = client.least_loaded_node(deadline)

    def build(version: int) -> Any:
        return request_schema(ApiKey.FIND_COORDINATOR, version).cls(key=group_id, key_type=KEY_TYPE_GROUP)

    body, _ = _request(client, node, ApiKey.FIND_COORDINATOR, FIND_COORDINATOR_VERSIONS, build, deadline)
    code = body.error_code
    if code != ErrorCode.NONE:
        error = KafkaError.from_code(code, f"FindCoordinator for group {group_id}"
                                     + (f": {body.error_message}" if getattr(body, "error_message", None) else ""))
        if code in _REDISCOVER or code in _RETRY:
            raise _Retry(error, rediscover=True)
        raise error
    coordinator = COORDINATOR_ID_BASE - body.node_id
    client.client.add_node(coordinator, body.host, body.port)
    return coordinator


def _coordinator_node(client: ConsumerNetworkClient, coordinator: int) -> Coordinator:
    conn = client.client._conns.get(coordinator)
    host, port = (conn.host, conn.port) if conn is not None else ("", -1)
    return Coordinator(COORDINATOR_ID_BASE - coordinator, host, port)


def member_partitions(data: bytes | None) -> tuple[TopicPartition, ...]:
    """The partitions of a member's ConsumerProtocolAssignment (``protocol.decode_assignment``),
    sorted; () for empty or undecodable bytes (another protocol's assignment)."""
    try:
        assignment = decode_assignment(bytes(data or b""))
    except ConsumerProtocolError:
        return ()
    return tuple(sorted(TopicPartition(t, p) for t, p in assignment.partitions))


def _with_coordinator(client: ConsumerNetworkClient, group_id: str, deadline: float, what: str, attempt_fn: Any) -> Any:
    """Run ``attempt_fn(coordinator_node_id)`` until it returns, retrying ``_Retry``
    failures with a backoff until ``deadline``."""
    coordinator: int | None = None
    last: BaseException | None = None
    attempt = 0
    while True:
        if now_ms() >= deadline:
            raise client.deadline_error(f"{what} for group {group_id} not done before the deadline "
                                        f"(last error: {last})") from last
        try:
            if coordinator is None:
                coordinator = _find_coordinator(client, group_id, deadline)
            return attempt_fn(coordinator)
        except _Retry as retry:
            last = retry.error
            if retry.rediscover and coordinator is not None:
                client.client.disconnect(coordinator)
                coordinator = None
        except BrokerUnreachableError:
            raise
        except KafkaTimeoutError as exc:
            raise KafkaTimeoutError(f"{what} for group {group_id} not done before the deadline "
                                    f"(last error: {last or exc})") from (last or exc)
        client.sleep(client.backoff_ms(attempt), deadline)
        attempt += 1


def _check_code(code: int, message: str) -> None:
    """Raise ``_Retry`` for a retriable group error, the typed error for any other."""
    if code == ErrorCode.NONE:
        return
    error = KafkaError.from_code(code, message)
    if code in _REDISCOVER:
        raise _Retry(error, rediscover=True)
    if code in _RETRY:
        raise _Retry(error, rediscover=False)
    raise error


# --- offsets ------------------------------------------------------------------------------

def fetch_committed(client_or_config: Any, group_id: str, tps: Iterable[tuple[str, int]], *,
                    timeout_ms: float | None = None) -> dict[TopicPartition, int | None]:
    """The offset ``group_id`` committed for each partition (None: nothing committed)."""
    _check_group(group_id)
    wanted = list(dict.fromkeys(TopicPartition(*tp) for tp in tps))
    if not wanted:
        return {}
    with consumer_client(client_or_config) as client:
        deadline = client.deadline(timeout_ms)
        by_topic: dict[str, list[int]] = {}
        for tp in wanted:
            by_topic.setdefault(tp.topic, []).append(tp.partition)

        def build(version: int) -> Any:
            schema = request_schema(ApiKey.OFFSET_FETCH, version)
            topic_cls = schema.structs["OffsetFetchRequestTopic"]
            return schema.cls(group_id=group_id, require_stable=False,
                              topics=[topic_cls(name=t, partition_indexes=ps) for t, ps in by_topic.items()])

        def attempt(coordinator: int) -> dict[TopicPartition, int | None]:
            body, version = _request(client, coordinator, ApiKey.OFFSET_FETCH, OFFSET_FETCH_VERSIONS, build,
                                     deadline)
            if version >= 2:
                _check_code(body.error_code, f"OffsetFetch for group {group_id}")
            out: dict[TopicPartition, int | None] = {tp: None for tp in wanted}
            for t in body.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if tp not in out:
                        continue
                    _check_code(p.error_code, f"OffsetFetch for group {group_id}, partition {tp}")
                    out[tp] = p.committed_offset if p.committed_offset >= 0 else None
            return out

        return _with_coordinator(client, group_id, deadline, "OffsetFetch", attempt)


def list_group_offsets(client_or_config: Any, group_id: str, *,
                       timeout_ms: float | None = None) -> dict[TopicPartition, int]:
    """Every offset ``group_id`` has committed (OffsetFetch v2+ with a null topic list, as
    Kafka's ``Admin.listConsumerGroupOffsets``), sorted by partition."""
    _check_group(group_id)
    versions = (OFFSET_FETCH_ALL_MIN_VERSION, OFFSET_FETCH_VERSIONS[1])
    with consumer_client(client_or_config) as client:
        deadline = client.deadline(timeout_ms)

        def build(version: int) -> Any:
            return request_schema(ApiKey.OFFSET_FETCH, version).cls(group_id=group_id, topics=None,
                                                                    require_stable=False)

        def attempt(coordinator: int) -> dict[TopicPartition, int]:
            body, _ = _request(client, coordinator, ApiKey.OFFSET_FETCH, versions, build, deadline)
            _check_code(body.error_code, f"OffsetFetch for group {group_id}")
            out = {}
            for t in body.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    _check_code(p.error_code, f"OffsetFetch for group {group_id}, partition {tp}")
                    if p.committed_offset >= 0:
                        out[tp] = p.committed_offset
            return dict(sorted(out.items()))

        return _with_coordinator(client, group_id, deadline, "OffsetFetch", attempt)


def commit_offsets(client_or_config: Any, group_id: str, offsets: Mapping[tuple[str, int], int],
                   metadata: str = "", *, timeout_ms: float | None = None, generation: int = -1,
                   member_id: str = "", group_instance_id: str | None = None,
                   versions: tuple[int, int] = OFFSET_COMMIT_VERSIONS) -> None:
    """Commit ``offsets`` (the next offset to read, per partition) for ``group_id`` as a
    simple consumer (generation -1), or as a member (``generation``, ``member_id``,
    ``group_instance_id``: a subscribed consumer; a refusal because the group rebalanced
    raises ``CommitFailedError``), with ``metadata`` on every partition; returns once
    the coordinator has stored them all."""
    _check_group(group_id)
    commits: dict[TopicPartition, int] = {}
    for tp, offset in offsets.items():
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"invalid offset {offset!r} for {TopicPartition(*tp)}: must be an integer >= 0")
        commits[TopicPartition(*tp)] = offset
    if not commits:
        return
    with consumer_client(client_or_config) as client:
        deadline = client.deadline(timeout_ms)
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for tp, offset in commits.items():
            by_topic.setdefault(tp.topic, []).append((tp.partition, offset))

        def build(version: int) -> Any:
            schema = request_schema(ApiKey.OFFSET_COMMIT, version)
            topic_cls = schema.structs["OffsetCommitRequestTopic"]
            part_cls = schema.structs["OffsetCommitRequestPartition"]
            return schema.cls(
                group_id=group_id, generation_id_or_member_epoch=generation, member_id=member_id,
                group_instance_id=group_instance_id,
                retention_time_ms=-1,
                topics=[topic_cls(name=t, partitions=[
                    part_cls(partition_index=p, committed_offset=o, committed_leader_epoch=-1,
                             committed_metadata=metadata) for p, o in ps]) for t, ps in by_topic.items()])

        def attempt(coordinator: int) -> None:
            body, _ = _request(client, coordinator, ApiKey.OFFSET_COMMIT, versions, build, deadline)
            answered = set()
            retry: _Retry | None = None
            for t in body.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    answered.add(tp)
                    if p.error_code in MEMBER_COMMIT_ERRORS and generation >= 0:
                        raise CommitFailedError(
                            f"Commit of group {group_id} cannot be completed since the group has "
                            "already rebalanced (or is rebalancing) and assigned the partitions to "
                            f"another member (generation {generation}, member {member_id}); "
                            "poll() again to rejoin, then commit", p.error_code)
                    if p.error_code in ACTIVE_GROUP_ERRORS:
                        raise KafkaError.from_code(
                            p.error_code, f"OffsetCommit for group {group_id} refused: the group has active "
                            "members, and its offsets can only be committed by them or altered while it is "
                            "empty (stop its consumers first)")
                    try:
                        _check_code(p.error_code, f"OffsetCommit for group {group_id}, partition {tp}")
                    except _Retry as exc:
                        retry = retry or exc
            if retry is not None:
                raise retry
            missing = set(commits) - answered
            if missing:
                raise KafkaError(f"OffsetCommit for group {group_id}: the response lacks "
                                 f"{', '.join(map(str, sorted(missing)))}")

        _with_coordinator(client, group_id, deadline, "OffsetCommit", attempt)


# --- groups -------------------------------------------------------------------------------

def _broker_ids(client: ConsumerNetworkClient, deadline: float) -> list[tuple[int, str]]:
    """Every broker of the cluster (a Metadata request for no topic)."""
    attempt = 0
    while True:
        node = client.least_loaded_node(deadline)

        def build(version: int) -> Any:
            return request_schema(ApiKey.METADATA, version).cls(topics=[], allow_auto_topic_creation=False)

        try:
            body, _ = _request(client, node, ApiKey.METADATA, METADATA_VERSIONS, build, deadline)
            for b in body.brokers:  # reachable even before the client's metadata knows them
                client.client.add_node(b.node_id, b.host, b.port)
            return [(b.node_id, f"{b.host}:{b.port}") for b in body.brokers]
        except _Retry as retry:
            if now_ms() >= deadline:
                raise client.deadline_error(f"Metadata not answered before the deadline ({retry.error})") \
                    from retry.error
        client.sleep(client.backoff_ms(attempt), deadline)
        attempt += 1


def list_groups(client_or_config: Any, *, timeout_ms: float | None = None) -> list[GroupListing]:
    """Every group of the cluster (ListGroups to each broker), sorted by id."""
    with consumer_client(client_or_config) as client:
        deadline = client.deadline(timeout_ms)
        listed: dict[str, GroupListing] = {}
        for node_id, name in _broker_ids(client, deadline):
            def build(version: int) -> Any:
                return request_schema(ApiKey.LIST_GROUPS, version).cls(states_filter=[])

            attempt = 0
            while True:
                try:
                    body, version = _request(client, node_id, ApiKey.LIST_GROUPS, LIST_GROUPS_VERSIONS, build,
                                             deadline)
                    _check_code(body.error_code, f"ListGroups from the broker at {name}")
                    break
                except _Retry as retry:
                    if now_ms() >= deadline:
                        raise KafkaTimeoutError(f"ListGroups from the broker at {name} not answered before "
                                                f"the deadline ({retry.error})") from retry.error
                client.sleep(client.backoff_ms(attempt), deadline)
                attempt += 1
            for g in body.groups:
                state = g.group_state if version >= LIST_GROUPS_STATE_VERSION else ""
                listed[g.group_id] = GroupListing(g.group_id, g.protocol_type, state)
        stateless = [gid for gid, g in listed.items() if not g.state]
        if stateless:
            described = _describe(client, stateless, deadline)
            for gid in stateless:
                listed[gid] = listed[gid]._replace(state=described[gid].state)
        return [listed[gid] for gid in sorted(listed)]


def describe_groups(client_or_config: Any, group_ids: Iterable[str], *,
                    timeout_ms: float | None = None) -> dict[str, GroupDescription]:
    """State, protocol type, protocol and members of each group (a group that does not
    exist is described as ``Dead``, as Kafka does)."""
    ids = list(dict.fromkeys(group_ids))
    for gid in ids:
        _check_group(gid)
    if not ids:
        return {}
    with consumer_client(client_or_config) as client:
        return _describe(client, ids, client.deadline(timeout_ms))


def _describe(client: ConsumerNetworkClient, ids: list[str], deadline: float) -> dict[str, GroupDescription]:
    out: dict[str, GroupDescription] = {}
    for gid in ids:
        def build(version: int, gid: str = gid) -> Any:
            return request_schema(ApiKey.DESCRIBE_GROUPS, version).cls(groups=[gid],
                                                                       include_authorized_operations=False)

        def attempt(coordinator: int, gid: str = gid, build: Any = build) -> GroupDescription:
            described = _describe_consumer_group(client, coordinator, gid, deadline)
            if described is not None:
                return described
            body, _ = _request(client, coordinator, ApiKey.DESCRIBE_GROUPS, DESCRIBE_GROUPS_VERSIONS, build,
                               deadline)
            for g in body.groups:
                if g.group_id != gid:
                    continue
                if g.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
                    return GroupDescription(gid, "Dead", "", "")
                _check_code(g.error_code, f"DescribeGroups for group {gid}")
                consumer = g.protocol_type == CONSUMER_PROTOCOL_TYPE
                members = tuple(MemberDescription(
                    m.member_id, m.client_id, m.client_host, getattr(m, "group_instance_id", None),
                    member_partitions(m.member_assignment) if consumer else ()) for m in g.members)
                return GroupDescription(gid, g.group_state, g.protocol_type, g.protocol_data, members,
                                        _coordinator_node(client, coordinator))
            raise KafkaError(f"DescribeGroups for group {gid}: the response lacks the group")

        out[gid] = _with_coordinator(client, gid, deadline, "DescribeGroups", attempt)
    return out


def _describe_consumer_group(client: ConsumerNetworkClient, coordinator: int, gid: str,
                             deadline: float) -> GroupDescription | None:
    """A KIP-848 group described by ConsumerGroupDescribe, as Kafka's admin client does
    first; None when the coordinator does not offer it or ``gid`` is not such a group
    (GROUP_ID_NOT_FOUND: a classic group, or none; DescribeGroups tells which)."""
    try:
        if not client.await_ready(coordinator, deadline):
            raise NetworkError(f"cannot connect to {_broker_name(client, coordinator)}")
    except NetworkError as exc:
        raise _Retry(exc, rediscover=True) from None
    if client.client.api_version(coordinator, ApiKey.CONSUMER_GROUP_DESCRIBE, CONSUMER_GROUP_DESCRIBE_VERSIONS[1],
                                 CONSUMER_GROUP_DESCRIBE_VERSIONS[0]) is None:
        return None

    def build(version: int) -> Any:
        return request_schema(ApiKey.CONSUMER_GROUP_DESCRIBE, version).cls(group_ids=[gid],
                                                                           include_authorized_operations=False)

    body, _ = _request(client, coordinator, ApiKey.CONSUMER_GROUP_DESCRIBE, CONSUMER_GROUP_DESCRIBE_VERSIONS,
                       build, deadline)
    for g in body.groups:
        if g.group_id != gid:
            continue
        if g.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
            return None
        _check_code(g.error_code, f"ConsumerGroupDescribe for group {gid}")
        members = tuple(MemberDescription(
            m.member_id, m.client_id, m.client_host, m.instance_id,
            tuple(sorted(TopicPartition(t.topic_name, p) for t in m.assignment.topic_partitions
                         for p in t.partitions))) for m in g.members)
        return GroupDescription(gid, g.group_state, CONSUMER_PROTOCOL_TYPE, g.assignor_name, members,
                                _coordinator_node(client, coordinator), "consumer")
    raise KafkaError(f"ConsumerGroupDescribe for group {gid}: the response lacks the group")


def delete_groups(client_or_config: Any, group_ids: Iterable[str], *, timeout_ms: float | None = None) -> None:
    """Delete each group and its committed offsets. Every group is tried; one failure
    raises its typed error (e.g. GROUP_ID_NOT_FOUND), several one ``KafkaError`` naming
    each failed group."""
    ids = list(dict.fromkeys(group_ids))
    for gid in ids:
        _check_group(gid)
    if not ids:
        return
    failures: list[tuple[str, KafkaError]] = []
    with consumer_client(client_or_config) as client:
        deadline = client.deadline(timeout_ms)
        for gid in ids:
            def build(version: int, gid: str = gid) -> Any:
                return request_schema(ApiKey.DELETE_GROUPS, version).cls(groups_names=[gid])

            def attempt(coordinator: int, gid: str = gid, build: Any = build) -> None:
                body, _ = _request(client, coordinator, ApiKey.DELETE_GROUPS, DELETE_GROUPS_VERSIONS, build,
                                   deadline)
                for r in body.results:
                    if r.group_id == gid:
                        _check_code(r.error_code, f"group {gid}")
                        return
                raise KafkaError(f"DeleteGroups for group {gid}: the response lacks the group")

            try:
                _with_coordinator(client, gid, deadline, "DeleteGroups", attempt)
            except GroupsNotSupportedError:
                raise
            except KafkaError as exc:
                failures.append((gid, exc))
    if len(failures) == 1:
        raise failures[0][1]
    if failures:
        raise KafkaError(f"deleting {len(failures)} groups failed: " + "; ".join(str(exc) for _, exc in failures))


def delete_group_offsets(client_or_config: Any, group_id: str, tps: Iterable[tuple[str, int]], *,
                         timeout_ms: float | None = None) -> dict[TopicPartition, KafkaError | None]:
    """Delete the committed offsets of ``tps`` from ``group_id`` (OffsetDelete v0, Kafka's
    ``Admin.deleteConsumerGroupOffsets``): each partition's error (None: deleted, or there
    was nothing to delete). A group-level error raises its typed error (GROUP_ID_NOT_FOUND,
    NON_EMPTY_GROUP, ...); a broker that does not serve OffsetDelete raises
    ``GroupsNotSupportedError`` naming it."""
    _check_group(group_id)
    wanted = list(dict.fromkeys(TopicPartition(*tp) for tp in tps))
    if not wanted:
        return {}
    by_topic: dict[str, list[int]] = {}
    for tp in wanted:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    with consumer_client(client_or_config) as client:
        deadline = client.deadline(timeout_ms)

        def build(version: int) -> Any:
            schema = request_schema(ApiKey.OFFSET_DELETE, version)
            topic_cls = schema.structs["OffsetDeleteRequestTopic"]
            part_cls = schema.structs["OffsetDeleteRequestPartition"]
            return schema.cls(group_id=group_id, topics=[
                topic_cls(name=t, partitions=[part_cls(partition_index=p) for p in ps])
                for t, ps in by_topic.items()])

        def attempt(coordinator: int) -> dict[TopicPartition, KafkaError | None]:
            body, _ = _request(client, coordinator, ApiKey.OFFSET_DELETE, OFFSET_DELETE_VERSIONS, build, deadline)
            _check_code(body.error_code, f"OffsetDelete for group {group_id}")
            out: dict[TopicPartition, KafkaError | None] = {}
            for t in body.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if p.error_code == ErrorCode.NONE:
                        out[tp] = None
                    else:
                        out[tp] = KafkaError.from_code(p.error_code, f"OffsetDelete for group {group_id}, "
                                                                     f"partition {tp}")
            missing = [tp for tp in wanted if tp not in out]
            if missing:
                raise KafkaError(f"OffsetDelete for group {group_id}: the response lacks "
                                 f"{', '.join(map(str, missing))}")
            return {tp: out[tp] for tp in wanted}

        return _with_coordinator(client, group_id, deadline, "OffsetDelete", attempt)


__all__ = ["ACTIVE_GROUP_ERRORS", "Coordinator", "GroupDescription", "GroupListing", "GroupsNotSupportedError",
           "MemberDescription", "commit_offsets", "delete_group_offsets", "member_partitions", "delete_groups",
           "describe_groups", "fetch_committed", "list_group_offsets", "list_groups"]
