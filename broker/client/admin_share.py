"""Share groups (KIP-932) through the admin client: Kafka's ``Admin`` share group calls
(``listGroups`` with types, ``describeShareGroups``, ``listShareGroupOffsets``,
``alterShareGroupOffsets``, ``deleteShareGroupOffsets``, ``deleteShareGroups``) for
``AdminClient`` and the ``kafkalog share-groups`` command.

Owns::

    list_groups(client, types=(), states=())            -> [GroupListing] (every type)
    describe_share_groups(client, group_ids)            -> {group: ShareGroupDescription}
    list_share_group_offsets(client, group, topics=None) -> {TopicPartition: SharePartitionOffset}
    alter_share_group_offsets(client, group, {tp: offset}) -> {TopicPartition: KafkaError | None}
    delete_share_group_offsets(client, group, topics)   -> {topic: KafkaError | None}
    delete_share_groups(client, group_ids)              -> {group: KafkaError | None}
    ShareGroupsNotSupportedError                        the broker lacks a share group API

Values (immutable): ``GroupListing(group_id, protocol_type, state, group_type)``, a
ListGroups row (``group_type`` "classic", "consumer", "share"; "" from a broker below
ListGroups v5, ``state`` "" below v4); ``ShareGroupDescription(group_id, state,
group_epoch, assignment_epoch, assignor, members, coordinator)`` with
``ShareMemberDescription(member_id, client_id, client_host, member_epoch, rack_id,
subscriptions, assignment)`` (topic names; the assignment a sorted tuple of
``TopicPartition``); ``SharePartitionOffset(start_offset, leader_epoch, lag)``: None for
what the broker answers -1 (no share state yet; lag before DescribeShareGroupOffsets v1).

Protocol: ListGroups v0-5 goes to every broker (v5 carries the types filter: a filter
against an older broker is ``UnsupportedVersionError``; v4 the states filter, applied
here below it). The others go to the group's coordinator (FindCoordinator key_type 0,
through ``broker.client.consumer.group_offsets``, which retries a moved or loading
coordinator until the deadline): ShareGroupDescribe v1, DescribeShareGroupOffsets v0-1
(one group per request), AlterShareGroupOffsets v0, DeleteShareGroupOffsets v0,
DeleteGroups v0-2.

Errors: a group that does not exist is described as ``Dead`` (as Kafka's
``DescribeShareGroupsHandler``); a group of another type raises GROUP_ID_NOT_FOUND's
typed error ("Group g is not a share group."). Group-level codes of the offsets calls
(NON_EMPTY_GROUP: the group has members; GROUP_ID_NOT_FOUND; GROUP_AUTHORIZATION_FAILED)
raise ``KafkaError.from_code``'s typed error; partition- and topic-level codes are
returned per key. Alter creates a missing group (the broker does); Delete needs it.
A broker without the API raises ``ShareGroupsNotSupportedError`` naming it.

Each function takes a ``ConsumerNetworkClient`` (reused) or a config mapping (a client
for the call) and ``timeout_ms`` (default ``default.api.timeout.ms``). Thread-safety: as
the client used: one thread at a time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from broker.client.consumer import group_offsets as _go
from broker.client.consumer.group_offsets import Coordinator, GroupsNotSupportedError
from broker.client.consumer.offsets import TopicPartition, consumer_client, partitions_for
from broker.client.errors import KafkaError, KafkaTimeoutError, UnsupportedVersionError
from broker.client.network import now_ms
from broker.protocol import ApiKey, ErrorCode, request_schema

__all__ = ["GroupListing", "ShareGroupDescription", "ShareGroupsNotSupportedError", "ShareMemberDescription",
           "SharePartitionOffset", "alter_share_group_offsets", "delete_share_group_offsets", "delete_share_groups",
           "describe_share_groups", "list_groups", "list_share_group_offsets"]

LIST_GROUPS_VERSIONS = (0, 5)  # v4: states filter, v5: types filter and group_type
SHARE_GROUP_DESCRIBE_VERSIONS = (1, 1)
DESCRIBE_OFFSETS_VERSIONS = (0, 1)  # v1: lag
ALTER_OFFSETS_VERSIONS = (0, 0)
DELETE_OFFSETS_VERSIONS = (0, 0)
SHARE_GROUP_TYPE = "share"


class ShareGroupsNotSupportedError(GroupsNotSupportedError):
    """The broker does not advertise the share group API a call needs."""


class GroupListing(NamedTuple):
    """A ListGroups row: ``group_offsets.GroupListing`` plus the group's type."""

    group_id: str
    protocol_type: str
    state: str  # "" when the broker could not tell (ListGroups below v4)
    group_type: str  # "classic", "consumer", "share"; "" below ListGroups v5


class ShareMemberDescription(NamedTuple):
    member_id: str
    client_id: str
    client_host: str
    member_epoch: int
    rack_id: str | None
    subscriptions: tuple[str, ...]  # topic names, sorted
    assignment: tuple[TopicPartition, ...]  # sorted


class ShareGroupDescription(NamedTuple):
    group_id: str
    state: str  # "Empty", "Stable"; "Dead" for a group that does not exist
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: tuple[ShareMemberDescription, ...] = ()
    coordinator: Coordinator | None = None


class SharePartitionOffset(NamedTuple):
    """Kafka's ``SharePartitionOffsetInfo``: None where the broker answers -1."""

    start_offset: int | None
    leader_epoch: int | None
    lag: int | None


def _optional(value: int | None) -> int | None:
    return None if value is None or value < 0 else value


def _request(client: Any, node: int, api_key: ApiKey, versions: tuple[int, int], build: Any,
             deadline: float) -> tuple[Any, int]:
    try:
        return _go._request(client, node, api_key, versions, build, deadline)
    except ShareGroupsNotSupportedError:
        raise
    except GroupsNotSupportedError as exc:
        raise ShareGroupsNotSupportedError(str(exc).replace("does not support consumer groups",
                                                            "does not support share groups")) from None


def _check_groups(group_ids: Iterable[str]) -> list[str]:
    ids = list(dict.fromkeys(group_ids))
    for gid in ids:
        _go._check_group(gid)
    return ids


# --- ListGroups ---

def list_groups(client_or_config: Any, *, types: Iterable[str] = (), states: Iterable[str] = (),
                timeout_ms: float | None = None) -> list[GroupListing]:
    """Every group of the cluster (ListGroups to each broker), sorted by id; only the
    ``types`` ("classic", "consumer", "share") and ``states`` given, when given."""
    wanted_types = [t.lower() for t in types]
    wanted_states = [s for s in states]
    with consumer_client(client_or_config) as client:
        deadline = client.deadline(timeout_ms)
        listed: dict[str, GroupListing] = {}
        for node_id, name in _go._broker_ids(client, deadline):
            def build(version: int, name: str = name) -> Any:
                if wanted_types and version < 5:
                    raise UnsupportedVersionError(f"the broker at {name} answers ListGroups up to v{version}: a "
                                                  "types filter needs v5")
                return request_schema(ApiKey.LIST_GROUPS, version).cls(states_filter=wanted_states,
                                                                       types_filter=wanted_types)

            attempt = 0
            while True:
                try:
                    body, version = _go._request(client, node_id, ApiKey.LIST_GROUPS, LIST_GROUPS_VERSIONS, build,
                                                 deadline)
                    _go._check_code(body.error_code, f"ListGroups from the broker at {name}")
                    break
                except _go._Retry as retry:
                    if now_ms() >= deadline:
                        raise KafkaTimeoutError(f"ListGroups from the broker at {name} not answered before "
                                                f"the deadline ({retry.error})") from retry.error
                client.sleep(client.backoff_ms(attempt), deadline)
                attempt += 1
            lowered = {s.lower() for s in wanted_states}
            for g in body.groups:
                state = g.group_state if version >= 4 else ""
                if version < 4 and lowered:
                    continue  # the broker cannot tell the state: not one asked for
                listed[g.group_id] = GroupListing(g.group_id, g.protocol_type, state,
                                                  g.group_type.lower() if version >= 5 else "")
        return [listed[gid] for gid in sorted(listed)]


# --- ShareGroupDescribe ---

def _assignment(assignment: Any) -> tuple[TopicPartition, ...]:
    if assignment is None:
        return ()
    return tuple(sorted(TopicPartition(t.topic_name, p) for t in assignment.topic_partitions or []
                        for p in t.partitions or []))


def describe_share_groups(client_or_config: Any, group_ids: Iterable[str], *,
                          timeout_ms: float | None = None) -> dict[str, ShareGroupDescription]:
    """State, epochs, assignor and members of each share group; a group that does not
    exist is ``Dead``, one of another type raises GROUP_ID_NOT_FOUND's error."""
    ids = _check_groups(group_ids)
    out: dict[str, ShareGroupDescription] = {}
    with consumer_client(client_or_config) as client:
        deadline = client.deadline(timeout_ms)
        for gid in ids:
            def build(version: int, gid: str = gid) -> Any:
                return request_schema(ApiKey.SHARE_GROUP_DESCRIBE, version).cls(group_ids=[gid],
                                                                                include_authorized_operations=False)

            def attempt(coordinator: int, gid: str = gid, build: Any = build) -> ShareGroupDescription:
                body, _ = _request(client, coordinator, ApiKey.SHARE_GROUP_DESCRIBE, SHARE_GROUP_DESCRIBE_VERSIONS,
                                   build, deadline)
                g = next((g for g in body.groups if g.group_id == gid), None)
                if g is None:
                    raise KafkaError(f"ShareGroupDescribe for group {gid}: the response lacks the group")
                node = _go._coordinator_node(client, coordinator)
                if g.error_code == ErrorCode.GROUP_ID_NOT_FOUND and "not a share group" not in (g.error_message or ""):
                    return ShareGroupDescription(gid, "Dead", -1, -1, "", (), node)
                _go._check_code(g.error_code, g.error_message or f"group {gid}")
                members = tuple(ShareMemberDescription(
                    m.member_id, m.client_id, m.client_host, m.member_epoch, m.rack_id,
                    tuple(sorted(m.subscribed_topic_names or ())), _assignment(m.assignment)) for m in g.members)
                return ShareGroupDescription(gid, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name,
                                             members, node)

            out[gid] = _go._with_coordinator(client, gid, deadline, "ShareGroupDescribe", attempt)
    return out


# --- DescribeShareGroupOffsets ---

def _by_topic(tps: Iterable[TopicPartition]) -> dict[str, list[int]]:
    topics: dict[str, list[int]] = {}
    for tp in tps:
        topics.setdefault(tp.topic, []).append(tp.partition)
    return topics


def _scope(client: Any, topics: Iterable[Any], timeout_ms: float | None) -> list[TopicPartition]:
    """Topic names (every partition) and (topic, partition) pairs, as partitions."""
    out: list[TopicPartition] = []
    names: list[str] = []
    for t in topics:
        if isinstance(t, str):
            names.append(t)
        else:
            out.append(TopicPartition(*t))
    if names:
        found = partitions_for(client, names, timeout_ms=timeout_ms)
        for name in dict.fromkeys(names):
            if name not in found:
                raise KafkaError.from_code(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist")
            out.extend(TopicPartition(name, p.partition) for p in found[name])
    return list(dict.fromkeys(out))


def list_share_group_offsets(client_or_config: Any, group_id: str, topics: Iterable[Any] | None = None, *,
                             timeout_ms: float | None = None) -> dict[TopicPartition, SharePartitionOffset]:
    """Each partition's start offset, leader epoch and lag (Kafka's
    ``Admin.listShareGroupOffsets``): ``topics`` None for every partition with share
    state, else topic names (all their partitions) or (topic, partition) pairs. A
    partition-level error raises its typed error."""
    _go._check_group(group_id)
    with consumer_client(client_or_config) as client:
        wanted = None if topics is None else _scope(client, topics, timeout_ms)
        if wanted is not None and not wanted:
            return {}
        deadline = client.deadline(timeout_ms)

        def build(version: int) -> Any:
            schema = request_schema(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, version)
            group_cls = schema.structs["DescribeShareGroupOffsetsRequestGroup"]
            topic_cls = schema.structs["DescribeShareGroupOffsetsRequestTopic"]
            return schema.cls(groups=[group_cls(group_id=group_id, topics=None if wanted is None else [
                topic_cls(topic_name=t, partitions=ps) for t, ps in _by_topic(wanted).items()])])

        def attempt(coordinator: int) -> dict[TopicPartition, SharePartitionOffset]:
            body, version = _request(client, coordinator, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
                                     DESCRIBE_OFFSETS_VERSIONS, build, deadline)
            g = next((g for g in body.groups if g.group_id == group_id), None)
            if g is None:
                raise KafkaError(f"DescribeShareGroupOffsets for group {group_id}: the response lacks the group")
            _go._check_code(g.error_code, g.error_message or f"group {group_id}")
            out: dict[TopicPartition, SharePartitionOffset] = {}
            for t in g.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.topic_name, p.partition_index)
                    if p.error_code:
                        raise KafkaError.from_code(p.error_code, p.error_message or f"DescribeShareGroupOffsets for "
                                                   f"group {group_id}, partition {tp}")
                    out[tp] = SharePartitionOffset(_optional(p.start_offset), _optional(p.leader_epoch),
                                                   _optional(p.lag) if version >= 1 else None)
            return out

        found = _go._with_coordinator(client, group_id, deadline, "DescribeShareGroupOffsets", attempt)
    if wanted is None:
        return dict(sorted(found.items()))
    return {tp: found[tp] for tp in wanted if tp in found}


# --- AlterShareGroupOffsets / DeleteShareGroupOffsets ---

def alter_share_group_offsets(client_or_config: Any, group_id: str, offsets: Mapping[Any, int], *,
                              timeout_ms: float | None = None) -> dict[TopicPartition, KafkaError | None]:
    """Set each partition's start offset (the group must have no member; a missing group
    is created). Group-level errors raise; each partition's error (None: done) is
    returned."""
    _go._check_group(group_id)
    wanted = {TopicPartition(*tp): o for tp, o in offsets.items()}
    for tp, offset in wanted.items():
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"invalid start offset {offset!r} for {tp}: must be an integer >= 0")
    if not wanted:
        return {}
    with consumer_client(client_or_config) as client:
        deadline = client.deadline(timeout_ms)

        def build(version: int) -> Any:
            schema = request_schema(ApiKey.ALTER_SHARE_GROUP_OFFSETS, version)
            topic_cls = schema.structs["AlterShareGroupOffsetsRequestTopic"]
            part_cls = schema.structs["AlterShareGroupOffsetsRequestPartition"]
            return schema.cls(group_id=group_id, topics=[
                topic_cls(topic_name=t, partitions=[
                    part_cls(partition_index=p, start_offset=wanted[TopicPartition(t, p)]) for p in ps])
                for t, ps in _by_topic(wanted).items()])

        def attempt(coordinator: int) -> dict[TopicPartition, KafkaError | None]:
            body, _ = _request(client, coordinator, ApiKey.ALTER_SHARE_GROUP_OFFSETS, ALTER_OFFSETS_VERSIONS, build,
                               deadline)
            _go._check_code(body.error_code, body.error_message or f"AlterShareGroupOffsets for group {group_id}")
            out: dict[TopicPartition, KafkaError | None] = {}
            for t in body.responses:
                for p in t.partitions:
                    tp = TopicPartition(t.topic_name, p.partition_index)
                    out[tp] = None if p.error_code == ErrorCode.NONE else KafkaError.from_code(
                        p.error_code, p.error_message or f"AlterShareGroupOffsets for group {group_id}, partition {tp}")
            missing = [tp for tp in wanted if tp not in out]
            if missing:
                raise KafkaError(f"AlterShareGroupOffsets for group {group_id}: the response lacks "
                                 f"{', '.join(map(str, missing))}")
            return {tp: out[tp] for tp in wanted}

        return _go._with_coordinator(client, group_id, deadline, "AlterShareGroupOffsets", attempt)


def delete_share_group_offsets(client_or_config: Any, group_id: str, topics: Iterable[str], *,
                               timeout_ms: float | None = None) -> dict[str, KafkaError | None]:
    """Drop the share state of every partition of ``topics`` (the group must exist and
    have no member): each topic's error (None: done)."""
    _go._check_group(group_id)
    names = list(dict.fromkeys(topics))
    for name in names:
        if not isinstance(name, str) or not name:
            raise ValueError(f"invalid topic name {name!r}")
    if not names:
        return {}
    with consumer_client(client_or_config) as client:
        deadline = client.deadline(timeout_ms)

        def build(version: int) -> Any:
            schema = request_schema(ApiKey.DELETE_SHARE_GROUP_OFFSETS, version)
            topic_cls = schema.structs["DeleteShareGroupOffsetsRequestTopic"]
            return schema.cls(group_id=group_id, topics=[topic_cls(topic_name=t) for t in names])

        def attempt(coordinator: int) -> dict[str, KafkaError | None]:
            body, _ = _request(client, coordinator, ApiKey.DELETE_SHARE_GROUP_OFFSETS, DELETE_OFFSETS_VERSIONS, build,
                               deadline)
            _go._check_code(body.error_code, body.error_message or f"DeleteShareGroupOffsets for group {group_id}")
            out: dict[str, KafkaError | None] = {
                t.topic_name: None if t.error_code == ErrorCode.NONE else KafkaError.from_code(
                    t.error_code, t.error_message or f"DeleteShareGroupOffsets for group {group_id}, "
                                                     f"topic {t.topic_name}")
                for t in body.responses}
            missing = [t for t in names if t not in out]
            if missing:
                raise KafkaError(f"DeleteShareGroupOffsets for group {group_id}: the response lacks "
                                 f"{', '.join(missing)}")
            return {t: out[t] for t in names}

        return _go._with_coordinator(client, group_id, deadline, "DeleteShareGroupOffsets", attempt)


# --- DeleteGroups ---

def delete_share_groups(client_or_config: Any, group_ids: Iterable[str], *,
                        timeout_ms: float | None = None) -> dict[str, KafkaError | None]:
    """DeleteGroups for each group: its error (None: deleted; NON_EMPTY_GROUP for one
    with members, GROUP_ID_NOT_FOUND for one that does not exist)."""
    ids = _check_groups(group_ids)
    out: dict[str, KafkaError | None] = {}
    with consumer_client(client_or_config) as client:
        for gid in ids:
            try:
                _go.delete_groups(client, [gid], timeout_ms=timeout_ms)
                out[gid] = None
            except GroupsNotSupportedError:
                raise
            except KafkaTimeoutError:
                raise
            except KafkaError as exc:
                out[gid] = exc
    return out
