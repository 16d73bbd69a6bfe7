"""The group coordinator's composition (``broker/server/group``): the ``Group`` protocol both
kinds of group implement, ``GroupConfig`` read from a server config, the parts' isolation
(no mixins, no part reading another object's private state), and the coordinator's API
over a classic, a KIP-848 and a simple group side by side, against real logs (an
in-process ``LogManager`` + ``TopicManager``), through a restart.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from broker.config import ConfigError
from broker.protocol import ErrorCode
from broker.server.config import server_config
from broker.server.errors import ApiError
from broker.server.group import GroupCoordinator
from broker.server.group import consumer_records as cr
from broker.server.group.config import GroupConfig
from broker.server.group.consumer_group import ConsumerGroup, ConsumerGroupMember
from broker.server.group.group import (
    STATE_COMPLETING_REBALANCE,
    STATE_PREPARING_REBALANCE,
    STATE_STABLE,
    GroupMetadata,
)
from broker.server.group.member import Member
from broker.server.group.protocol import Group, GroupSummary, OffsetExpiration
from broker.server.group.records import GroupMetadataKey, decode_key
from tests.support.storage_node import StorageNode

GROUP_DIR = Path(__file__).resolve().parents[1] / "broker" / "server" / "group"


# --- the Group protocol ---

def _subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0 naming ``topics``."""
    out = b"\x00\x00" + len(topics).to_bytes(4, "big")
    for t in topics:
        out += len(t).to_bytes(2, "big") + t.encode()
    return out + b"\xff\xff\xff\xff"  # null user data


def test_both_kinds_of_group_are_groups():
    classic, consumer = GroupMetadata("c1"), ConsumerGroup("k1")
    for g in (classic, consumer):
        assert isinstance(g, Group)
        assert g.is_empty() and g.is_shell() and not g.has_records
        assert g.topics_in_use() == set()
    assert not isinstance(object(), Group) and not isinstance(Member("m", None, "c", "h", 1, 1, "consumer", []), Group)
    assert (classic.group_type, consumer.group_type) == ("classic", "consumer")
    assert classic.state_name() == consumer.state_name() == "Empty"
    assert type(classic.state_name()) is str  # what the wire encoder takes
    assert classic.summary(members=False) == GroupSummary("c1", "Empty", "", "", (), "classic")
    assert consumer.summary() == GroupSummary("k1", "Empty", "consumer", "", (), "consumer")
    # a group record, or a member, makes a group more than its offsets
    classic.has_metadata_record = True
    consumer.has_records = True
    assert classic.has_records and consumer.has_records and not classic.is_shell() and not consumer.is_shell()
    assert [decode_key(k) for k, v in classic.tombstones()] == [GroupMetadataKey("c1")]
    assert all(v is None for _, v in classic.tombstones() + consumer.tombstones())
    assert [cr.decode_consumer_key(k).type for k, _ in consumer.tombstones()] == [
        cr.TARGET_ASSIGNMENT_METADATA, cr.PARTITION_METADATA, cr.METADATA]


def test_classic_group_answers_through_the_protocol():
    g = GroupMetadata("c")
    g.add(Member("m-1", "i-1", "cl", "h", 1000, 6000, "consumer", [("range", _subscription("a", "b"))]))
    assert not g.is_empty() and not g.is_shell()
    g.transition_to(STATE_PREPARING_REBALANCE)
    # an anonymous commit into a group with members; a member of another generation
    assert g.validate_offset_commit("", None, -1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert g.validate_offset_commit("m-1", "i-2", 0) == ErrorCode.UNKNOWN_MEMBER_ID
    assert g.validate_offset_commit("m-2", "i-1", 0) == ErrorCode.FENCED_INSTANCE_ID
    assert g.validate_offset_commit("m-1", None, 3) == ErrorCode.ILLEGAL_GENERATION
    assert g.validate_offset_fetch("anyone", 99) == ErrorCode.NONE  # classic groups ignore the member
    assert g.offset_expiration() is None  # rebalancing: nothing expires
    g.transition_to(STATE_COMPLETING_REBALANCE)
    g.generation, g.protocol, g.protocol_type = 1, "range", "consumer"
    assert g.validate_offset_commit("m-1", None, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    g.transition_to(STATE_STABLE)
    assert g.validate_offset_commit("m-1", None, 1) == ErrorCode.NONE
    assert g.state_name() == "Stable" and g.topics_in_use() == {"a", "b"}
    assert g.offset_expiration() == OffsetExpiration(-1, frozenset({"a", "b"}))  # KIP-496: from each commit
    assert g.summary().members == (("m-1", "i-1", "cl", "h", _subscription("a", "b"), b""),)
    g.protocol_type = "other"  # subscriptions unknown: OffsetDelete refuses, nothing expires
    assert g.topics_in_use() is None and g.offset_expiration() is None
    empty = GroupMetadata("e", protocol_type="consumer", current_state_timestamp=1234)
    assert empty.offset_expiration() == OffsetExpiration(1234, frozenset())  # from becoming empty
    assert GroupMetadata("simple").offset_expiration() == OffsetExpiration(-1, frozenset())


def test_consumer_group_answers_through_the_protocol():
    g = ConsumerGroup("k")
    assert g.validate_offset_commit("", None, -1) == ErrorCode.NONE  # an admin tool into an empty group
    g.add_member(ConsumerGroupMember("m", subscribed_topic_names=("t",), member_epoch=5))
    assert not g.is_empty() and not g.is_shell() and g.topics_in_use() == {"t"}
    assert g.validate_offset_commit("", None, -1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert g.validate_offset_commit("m", None, 6) == ErrorCode.FENCED_MEMBER_EPOCH
    assert g.validate_offset_commit("m", None, 4) == ErrorCode.STALE_MEMBER_EPOCH
    assert g.validate_offset_commit("m", None, 5) == ErrorCode.NONE
    assert g.validate_offset_fetch("x", -1) == ErrorCode.NONE and g.validate_offset_fetch("x", 5) == \
        ErrorCode.UNKNOWN_MEMBER_ID
    assert g.offset_expiration() == OffsetExpiration(-1, frozenset({"t"}))
    assert g.state_name() == g.state() == "Reconciling"
    types = [cr.decode_consumer_key(k).type for k, _ in g.tombstones()]
    assert types[:3] == [cr.CURRENT_MEMBER_ASSIGNMENT, cr.TARGET_ASSIGNMENT_MEMBER, cr.MEMBER_METADATA]


# --- GroupConfig ---

def test_group_config_from_a_server_config():
    assert GroupConfig.from_config({}) == GroupConfig()
    raw = {"group.min.session.timeout.ms": "100", "group.consumer.assignors": "range, uniform",
           "offsets.retention.minutes": "2", "offset.metadata.max.bytes": "10",
           "group.coordinator.rebalance.protocols": "classic", "log.dirs": "/elsewhere"}
    cfg = GroupConfig.from_config(raw)
    assert (cfg.min_session_timeout_ms, cfg.consumer_assignors, cfg.offsets_retention_ms,
            cfg.offset_metadata_max_bytes, cfg.rebalance_protocols) == (100, ("range", "uniform"), 120_000, 10,
                                                                        ("classic",))
    assert cfg.max_session_timeout_ms == 1800000 and cfg.consumer_heartbeat_interval_ms == 5000  # defaults
    assert GroupConfig.from_config(server_config(raw)) == cfg  # parsed or raw: the same object
    with pytest.raises(AttributeError):
        cfg.max_group_size = 3  # type: ignore[misc]  # frozen
    for key, bad in (("group.max.size", "0"), ("group.consumer.assignors", "bogus"),
                     ("group.min.session.timeout.ms", "soon")):
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")) as err:
            GroupConfig.from_config({key: bad})
        assert err.value.key == key


# --- the parts' isolation ---

def _modules() -> dict[str, ast.Module]:
    return {p.name: ast.parse(p.read_text()) for p in sorted(GROUP_DIR.glob("*.py"))}


def test_no_mixins_and_no_private_state_across_parts():
    """Every class reads only the private attributes it sets or defines itself, and no
    module reads a private attribute of another object (``other._x``)."""
    problems = []
    for name, tree in _modules().items():
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            bases = {ast.unparse(b) for b in cls.bases}
            assert bases <= {"Protocol", "NamedTuple", "enum.StrEnum", "ValueError"}, (name, cls.name, bases)
            own = {n.name for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
            own |= {t.target.id for t in cls.body if isinstance(t, ast.AnnAssign) and isinstance(t.target, ast.Name)}
            for node in ast.walk(cls):
                targets = node.targets if isinstance(node, ast.Assign) else \
                    [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
                for target in targets:
                    for t in (target.elts if isinstance(target, ast.Tuple) else [target]):
                        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                            own.add(t.attr)
            for node in ast.walk(cls):
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                        node.value.id == "self" and node.attr.startswith("_") and not node.attr.startswith("__") \
                        and node.attr not in own:
                    problems.append(f"{name}:{node.lineno} {cls.name} reads self.{node.attr}, set elsewhere")
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__") \
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                problems.append(f"{name}:{node.lineno} reads {ast.unparse(node)}")
    assert problems == []


def test_the_coordinator_is_composed_of_its_parts():
    from broker.server.group.consumer_membership import ConsumerGroups
    from broker.server.group.membership import ClassicGroups
    from broker.server.group.offsets import GroupOffsets
    from broker.server.group.txn_offsets import TransactionalOffsets

    assert GroupCoordinator.__bases__ == (object,)  # composed, not mixed in
    for part in (ConsumerGroups, ClassicGroups, GroupOffsets, TransactionalOffsets):
        assert part.__bases__ == (object,)
        assert "GroupCoordinator" not in part.__init__.__annotations__.values()  # a context, not the whole


# --- the coordinator's API, with both kinds of group ---

class Node(StorageNode):
    """The broker's storage and topic layers, in process."""

    def __init__(self, log_dir: Path) -> None:
        super().__init__(log_dir, **{"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3"})

    def coordinator(self) -> GroupCoordinator:
        gc = GroupCoordinator(self.topics, self.config)
        gc.startup()
        return gc


def _states(gc: GroupCoordinator) -> dict[str, tuple[str, str, str]]:
    return {s.group_id: (s.state, s.protocol_type, s.group_type) for s in gc.list_groups()}


def test_classic_consumer_and_simple_groups_side_by_side(tmp_path):
    node = Node(tmp_path / "logs")
    try:
        node.topics.create_topic("t", 2, {})
        gc = node.coordinator()
        try:
            # a classic group: one member joins (no initial delay) and the leader syncs
            join = gc.join_group("classic", "", None, False, "cl", "/h", 5000, 10000, "consumer",
                                 [("range", _subscription("t"))])
            assert join.error == ErrorCode.NONE and join.leader == join.member_id and join.generation == 1
            sync = gc.sync_group("classic", 1, join.member_id, None, "consumer", "range", [(join.member_id, b"A")])
            assert (sync.error, sync.assignment) == (ErrorCode.NONE, b"A")
            # a KIP-848 group: one member joins with the topic
            hb = gc.consumer_group_heartbeat("kip848", "", 0, None, None, 5000, ["t"], None, None, None, "k", "/h")
            assert hb.error == ErrorCode.NONE and hb.member_id and hb.member_epoch == 1
            assert isinstance(gc.group("classic"), GroupMetadata) and isinstance(gc.group("kip848"), ConsumerGroup)
            # commits: by the classic member, by the KIP-848 member (its epoch), by a simple consumer
            assert gc.commit_offsets("classic", 1, join.member_id, None, [("t", 0, 10, -1, "c")]) == [0]
            assert gc.commit_offsets("classic", 7, join.member_id, None, [("t", 0, 11, -1, "")]) == [
                ErrorCode.ILLEGAL_GENERATION]
            assert gc.commit_offsets("kip848", 1, hb.member_id, None, [("t", 1, 20, 3, "k")]) == [0]
            assert gc.commit_offsets("kip848", 0, hb.member_id, None, [("t", 1, 21, 3, "")]) == [
                ErrorCode.STALE_MEMBER_EPOCH]
            assert gc.commit_offsets("simple", -1, "", None, [("t", 0, 30, -1, None), ("t", 1, 31, -1, None)]) == \
                [0, 0]
            assert _states(gc) == {"classic": ("Stable", "consumer", "classic"),
                                   "kip848": ("Stable", "consumer", "consumer"),
                                   "simple": ("Empty", "", "classic")}
            assert gc.describe_group("classic").members[0][0] == join.member_id
            assert gc.describe_group("kip848").state == "Dead"  # DescribeGroups describes classic groups only
            assert gc.describe_consumer_group("classic")[0] == ErrorCode.GROUP_ID_NOT_FOUND
            assert gc.describe_consumer_group("kip848")[2] is gc.group("kip848")
            assert gc.fetch_offsets("classic", [("t", 0), ("t", 1)])[("t", 0)].offset == 10
            assert gc.fetch_offsets("kip848", None)[("t", 1)].leader_epoch == 3
            with pytest.raises(ApiError) as err:
                gc.fetch_offsets("kip848", None, "nobody", 1)
            assert err.value.code == ErrorCode.UNKNOWN_MEMBER_ID
            # members' topics are protected from OffsetDelete; groups with members from DeleteGroups
            assert gc.delete_offsets("kip848", [("t", 1)]) == {("t", 1): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC}
            for gid in ("classic", "kip848"):
                with pytest.raises(ApiError) as err:
                    gc.delete_group(gid)
                assert err.value.code == ErrorCode.NON_EMPTY_GROUP
            # the members leave; the groups are empty and may be deleted
            assert gc.leave_group("classic", [(join.member_id, None)]) == [ErrorCode.NONE]
            left = gc.consumer_group_heartbeat("kip848", hb.member_id, -1, None, None, -1, None, None, None, None)
            assert left.error == ErrorCode.NONE
            assert _states(gc)["classic"][0] == "Empty" and _states(gc)["kip848"][0] == "Empty"
            gc.delete_group("classic")
            gc.delete_group("kip848")
            assert _states(gc) == {"simple": ("Empty", "", "classic")}
            assert gc.fetch_offsets("classic", None) == {} and gc.fetch_offsets("kip848", None) == {}
            assert gc.delete_offsets("simple", [("t", 1)]) == {("t", 1): ErrorCode.NONE}
            # a new KIP-848 group, left Stable, to come back after a restart
            hb2 = gc.consumer_group_heartbeat("kip848-2", "", 0, None, None, 5000, ["t"], None, None, None)
            assert gc.commit_offsets("kip848-2", hb2.member_epoch, hb2.member_id, None, [("t", 0, 5, -1, "")]) == [0]
        finally:
            gc.shutdown()
        gc = node.coordinator()  # the same log, replayed
        try:
            assert _states(gc) == {"simple": ("Empty", "", "classic"), "kip848-2": ("Stable", "consumer", "consumer")}
            assert {tp: om.offset for tp, om in gc.fetch_offsets("simple", None).items()} == {("t", 0): 30}
            assert gc.fetch_offsets("kip848-2", [("t", 0)])[("t", 0)].offset == 5
            # expiration through the protocol: the simple group's offset and then the group go;
            # the KIP-848 group's subscribed topic stays
            assert gc.delete_expired_offsets(now_ms=2**62) == 1
            assert gc.group("simple") is None and set(_states(gc)) == {"kip848-2"}
        finally:
            gc.shutdown()
    finally:
        node.close()


def test_group_config_is_what_the_coordinator_reads(tmp_path):
    node = Node(tmp_path / "logs")
    try:
        with pytest.raises(ConfigError, match="group.max.size"):
            GroupCoordinator(node.topics, {**node.config, "group.max.size": "0"})
        gc = GroupCoordinator(node.topics, {**node.config, "group.min.session.timeout.ms": "20000",
                                            "offset.metadata.max.bytes": "3"})
        gc.startup()
        try:
            assert gc.config.min_session_timeout_ms == 20000
            join = gc.join_group("g", "", None, False, "cl", "/h", 5000, 10000, "consumer", [("range", b"")])
            assert join.error == ErrorCode.INVALID_SESSION_TIMEOUT
            node.topics.create_topic("u", 1, {})
            assert gc.commit_offsets("g", -1, "", None, [("u", 0, 1, -1, "abcd"), ("u", 0, 1, -1, "abc")]) == [
                ErrorCode.OFFSET_METADATA_TOO_LARGE, ErrorCode.NONE]
        finally:
            gc.shutdown()
    finally:
        node.close()
