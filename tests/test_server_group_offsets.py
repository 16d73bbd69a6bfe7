"""Consumer-group offset storage on the broker (``broker/server/group``,
``broker/server/handlers/group.py``), at the protocol level with ``RawClient``:
FindCoordinator, OffsetCommit v2-v7, OffsetFetch v1-v5, ListGroups, DescribeGroups and
DeleteGroups with their error codes; ``__consumer_offsets`` as an internal, compacted
topic whose records decode with Kafka's key/value layout (read with a decoder driven by
``kafka-spec/group-coordinator/*.json``, independent of the broker's codec); the cache
rebuilt after a clean restart and after SIGKILL; a log holding records Kafka writes
(group metadata, every value version, records of unknown types, garbage) loaded; offset
expiration; and mutated group requests that never break the broker.
"""

from __future__ import annotations

import json
import random
import re
import struct
import threading
import uuid
from pathlib import Path

import pytest

from broker.protocol import ApiKey, ErrorCode
from broker.record.batch import encode_batch, iter_batches
from tests.support.broker import ROOT, RawClient

pytestmark = pytest.mark.timeout(180)

SPEC_DIR = ROOT / "tools" / "kafka-spec" / "group-coordinator"
OFFSETS_TOPIC = "__consumer_offsets"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def java_hash(s: str) -> int:
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def offsets_partition(group: str, partitions: int = 50) -> int:
    h = java_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def create(c: RawClient, name: str, partitions: int = 1) -> None:
    r = c.request(ApiKey.CREATE_TOPICS, 4, {"topics": [
        {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}],
        "timeout_ms": 1000})
    assert r.topics[0].error_code == 0, r


def commit(c: RawClient, group: str, offsets: dict, *, version: int = 7, generation: int = -1, member: str = "",
           instance: str | None = None, retention_ms: int = -1) -> dict:
    """offsets: {(topic, partition): offset | (offset, metadata, leader_epoch)} -> {(t, p): error code}."""
    topics: dict[str, list] = {}
    for (t, p), v in offsets.items():
        offset, metadata, epoch = v if isinstance(v, tuple) else (v, "", -1)
        topics.setdefault(t, []).append({"partition_index": p, "committed_offset": offset,
                                         "committed_leader_epoch": epoch, "committed_metadata": metadata})
    r = c.request(ApiKey.OFFSET_COMMIT, version, {
        "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member,
        "group_instance_id": instance, "retention_time_ms": retention_ms,
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
    return {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}


def fetch(c: RawClient, group: str, tps: list | None, version: int = 5):
    topics = None
    if tps is not None:
        by_topic: dict[str, list[int]] = {}
        for t, p in tps:
            by_topic.setdefault(t, []).append(p)
        topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
    return c.request(ApiKey.OFFSET_FETCH, version, {"group_id": group, "topics": topics})


def fetched(c: RawClient, group: str, tps: list | None = None, version: int = 5) -> dict:
    r = fetch(c, group, tps, version)
    assert getattr(r, "error_code", 0) == 0
    out = {}
    for t in r.topics:
        for p in t.partitions:
            assert p.error_code == 0
            out[(t.name, p.partition_index)] = (p.committed_offset, p.metadata, p.committed_leader_epoch)
    return out


def list_groups(c: RawClient) -> dict[str, str]:
    r = c.request(ApiKey.LIST_GROUPS, 2, {})
    assert r.error_code == 0
    return {g.group_id: g.protocol_type for g in r.groups}


def describe(c: RawClient, groups: list[str], version: int = 4, ops: bool = False) -> list:
    return c.request(ApiKey.DESCRIBE_GROUPS, version, {"groups": groups, "include_authorized_operations": ops}).groups


def delete_groups(c: RawClient, groups: list[str], version: int = 1) -> dict[str, int]:
    r = c.request(ApiKey.DELETE_GROUPS, version, {"groups_names": groups})
    return {x.group_id: x.error_code for x in r.results}


# --- Kafka's record layout, read from kafka-spec ---

def load_spec(name: str) -> dict:
    text = (SPEC_DIR / f"{name}.json").read_text()
    return json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.M))


def _in(spec: str | None, version: int) -> bool:
    if spec is None or spec == "none":
        return False
    if spec.endswith("+"):
        return version >= int(spec[:-1])
    lo, _, hi = spec.partition("-")
    return int(lo) <= version <= int(hi or lo)


def spec_decode(fields: list, version: int, data: bytes, pos: int = 0) -> tuple[dict, int]:
    """Decode a NON-flexible version of a kafka-spec struct (the test's own reader)."""
    out = {}
    for f in fields:
        if not _in(f["versions"], version):
            continue
        t = f["type"]
        if t in ("int16", "int32", "int64"):
            fmt = {"int16": ">h", "int32": ">i", "int64": ">q"}[t]
            (out[f["name"]],) = struct.unpack_from(fmt, data, pos)
            pos += struct.calcsize(fmt)
        elif t == "string":
            (n,) = struct.unpack_from(">h", data, pos)
            pos += 2
            out[f["name"]] = None if n < 0 else data[pos:pos + n].decode()
            pos += max(n, 0)
        elif t == "bytes":
            (n,) = struct.unpack_from(">i", data, pos)
            pos += 4
            out[f["name"]] = data[pos:pos + n]
            pos += n
        elif t.startswith("[]"):  # GroupMetadataValue's members
            struct_fields = next(x for x in load_spec("GroupMetadataValue")["commonStructs"]
                                 if x["name"] == t[2:])["fields"]
            (n,) = struct.unpack_from(">i", data, pos)
            pos += 4
            items = []
            for _ in range(n):
                item, pos = spec_decode(struct_fields, version, data, pos)
                items.append(item)
            out[f["name"]] = items
        else:
            raise AssertionError(f"type {t} not needed here")
    return out, pos


def spec_encode(fields: list, version: int, values: dict) -> bytes:
    """Encode a NON-flexible version (what Kafka writes) with the test's own writer."""
    out = b""
    for f in fields:
        if not _in(f["versions"], version):
            continue
        t, v = f["type"], values[f["name"]]
        if t in ("int16", "int32", "int64"):
            out += struct.pack({"int16": ">h", "int32": ">i", "int64": ">q"}[t], v)
        elif t == "string":
            out += struct.pack(">h", -1) if v is None else struct.pack(">h", len(v.encode())) + v.encode()
        elif t == "bytes":
            out += struct.pack(">i", len(v)) + v
        elif t.startswith("[]"):
            struct_fields = next(s for s in load_spec("GroupMetadataValue")["commonStructs"]
                                 if s["name"] == t[2:])["fields"]
            out += struct.pack(">i", len(v)) + b"".join(spec_encode(struct_fields, version, m) for m in v)
    return out


def decode_offsets_record(key: bytes, value: bytes | None) -> tuple[int, dict, int | None, dict | None]:
    (key_version,) = struct.unpack_from(">h", key)
    key_spec = load_spec("OffsetCommitKey" if key_version in (0, 1) else "GroupMetadataKey")
    assert _in(key_spec["validVersions"], key_version)
    k, end = spec_decode(key_spec["fields"], key_version, key, 2)
    assert end == len(key)
    if value is None:
        return key_version, k, None, None
    (value_version,) = struct.unpack_from(">h", value)
    value_spec = load_spec("OffsetCommitValue" if key_version in (0, 1) else "GroupMetadataValue")
    assert _in(value_spec["validVersions"], value_version)
    assert not _in(value_spec["flexibleVersions"], value_version)
    v, end = spec_decode(value_spec["fields"], value_version, value, 2)
    assert end == len(value)
    return key_version, k, value_version, v


def offsets_records(log_dir: Path, partition: int) -> list:
    out = []
    for path in sorted((log_dir / f"{OFFSETS_TOPIC}-{partition}").glob("*.log")):
        for header, records in iter_batches(path.read_bytes()):
            out.extend((header, r) for r in records)
    return out


# --- tests on the shared broker ---

def test_java_hash_partitioning_matches_kafka():
    from broker.server.group import partition_for
    assert java_hash("hello") == 99162322  # "hello".hashCode() in Java
    assert java_hash("polygenelubricants") == -(1 << 31)  # Integer.MIN_VALUE: Utils.abs gives 0
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("\U0001F600", 50) == (31 * 0xD83D + 0xDE00) % 50  # UTF-16 surrogates
    for g in ("", "group-1", "é-grüppe", "x" * 300):
        assert partition_for(g, 7) == offsets_partition(g, 7)


def test_find_coordinator(kafka_broker, raw_client):
    c = raw_client()
    for version in (0, 1, 2):
        r = c.request(ApiKey.FIND_COORDINATOR, version, {"key": unique("g"), "key_type": 0})
        assert (r.error_code, r.node_id, r.host, r.port) == (0, 1, kafka_broker.host, kafka_broker.port)
    txn = c.request(ApiKey.FIND_COORDINATOR, 2, {"key": "my-txn", "key_type": 1})  # the transaction coordinator
    assert (txn.error_code, txn.node_id, txn.port) == (0, 1, kafka_broker.port)
    bad = c.request(ApiKey.FIND_COORDINATOR, 1, {"key": "g", "key_type": 7})
    assert bad.error_code == ErrorCode.INVALID_REQUEST


def test_commit_and_fetch_at_every_version(raw_client):
    c = raw_client()
    topic = unique("go-versions")
    create(c, topic, 3)
    for cv in range(2, 8):
        group = unique(f"g{cv}")
        codes = commit(c, group, {(topic, 0): (10 + cv, f"meta-{cv}", 4), (topic, 2): (20, None, -1)}, version=cv)
        assert codes == {(topic, 0): 0, (topic, 2): 0}
        for fv in range(1, 6):
            got = fetched(c, group, [(topic, 0), (topic, 1), (topic, 2)], version=fv)
            epoch = 4 if cv >= 6 and fv >= 5 else -1  # sent from v6, returned from v5
            assert got == {(topic, 0): (10 + cv, f"meta-{cv}", epoch), (topic, 1): (-1, "", -1),
                           (topic, 2): (20, "", -1)}
        for fv in range(2, 6):  # null topics: every committed partition
            assert set(fetched(c, group, None, version=fv)) == {(topic, 0), (topic, 2)}
    group = unique("g-update")
    commit(c, group, {(topic, 1): 5})
    commit(c, group, {(topic, 1): 3})  # a commit replaces, even going backwards
    assert fetched(c, group, [(topic, 1)])[(topic, 1)][0] == 3


def test_commit_validation_errors(raw_client):
    c = raw_client()
    topic = unique("go-errors")
    create(c, topic, 2)
    group = unique("g")
    codes = commit(c, group, {(topic, 0): 1, (topic, 2): 1, ("no-such-topic-" + group, 0): 1})
    assert codes == {(topic, 0): 0, (topic, 2): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                     ("no-such-topic-" + group, 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert fetched(c, group, None) == {(topic, 0): (1, "", -1)}  # the valid partition was committed
    assert set(commit(c, "", {(topic, 0): 1}).values()) == {ErrorCode.INVALID_GROUP_ID}
    # a generation from a membership this broker never granted
    fresh = unique("g-none")
    assert commit(c, fresh, {(topic, 0): 1}, generation=3, member="m-1") == {(topic, 0): ErrorCode.ILLEGAL_GENERATION}
    assert fetched(c, fresh, None) == {}
    assert commit(c, group, {(topic, 0): 2}, generation=3, member="m-1") == {(topic, 0): ErrorCode.UNKNOWN_MEMBER_ID}
    assert commit(c, group, {(topic, 0): 2}, generation=0, member="") == {(topic, 0): ErrorCode.UNKNOWN_MEMBER_ID}
    assert commit(c, group, {(topic, 0): 2}, generation=1, instance="static-1") == \
        {(topic, 0): ErrorCode.UNKNOWN_MEMBER_ID}
    # generation -1 with a member id: accepted while the group is empty, as in Kafka
    assert commit(c, group, {(topic, 0): 3}, generation=-1, member="stray") == {(topic, 0): 0}
    # offset.metadata.max.bytes (4096, counted in UTF-16 units): only that partition fails
    codes = commit(c, group, {(topic, 0): (7, "x" * 4097, -1), (topic, 1): (8, "é" * 4096, -1)})
    assert codes == {(topic, 0): ErrorCode.OFFSET_METADATA_TOO_LARGE, (topic, 1): 0}
    assert fetched(c, group, None) == {(topic, 0): (3, "", -1), (topic, 1): (8, "é" * 4096, -1)}
    assert commit(c, group, {}) == {}


def test_offset_fetch_group_errors(raw_client):
    c = raw_client()
    r = fetch(c, "", [("t", 0), ("t", 1)], version=1)  # v1: no top-level code, per partition
    assert [(p.partition_index, p.error_code, p.committed_offset) for p in r.topics[0].partitions] == \
        [(0, ErrorCode.INVALID_GROUP_ID, -1), (1, ErrorCode.INVALID_GROUP_ID, -1)]
    for v in (2, 5):
        r = fetch(c, "", [("t", 0)], version=v)
        assert r.error_code == ErrorCode.INVALID_GROUP_ID and r.topics == []
    assert fetched(c, unique("never"), [("whatever", 3)]) == {("whatever", 3): (-1, "", -1)}
    assert fetched(c, unique("never"), None) == {}


def test_list_describe_and_delete_groups(raw_client):
    c = raw_client()
    topic = unique("go-admin")
    create(c, topic, 2)
    a, b, ghost = unique("ga"), unique("gb"), unique("ghost")
    commit(c, a, {(topic, 0): 1, (topic, 1): 2})
    commit(c, b, {(topic, 0): 5})
    listed = list_groups(c)
    assert listed[a] == "" and listed[b] == "" and ghost not in listed
    for version in range(0, 5):
        got = {g.group_id: g for g in describe(c, [a, ghost], version)}
        assert (got[a].error_code, got[a].group_state, got[a].protocol_type, got[a].members) == (0, "Empty", "", [])
        assert (got[ghost].error_code, got[ghost].group_state) == (0, "Dead")
    assert describe(c, [a], 3, ops=True)[0].authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)
    assert describe(c, [a], 3)[0].authorized_operations == -(1 << 31)
    assert describe(c, [""])[0].error_code == ErrorCode.INVALID_GROUP_ID
    assert delete_groups(c, [a, ghost, ""], version=0) == {
        a: 0, ghost: ErrorCode.GROUP_ID_NOT_FOUND, "": ErrorCode.INVALID_GROUP_ID}
    assert fetched(c, a, None) == {}
    assert fetched(c, b, None) == {(topic, 0): (5, "", -1)}
    assert a not in list_groups(c) and b in list_groups(c)
    assert describe(c, [a])[0].group_state == "Dead"
    assert delete_groups(c, [a]) == {a: ErrorCode.GROUP_ID_NOT_FOUND}
    commit(c, a, {(topic, 1): 9})  # a deleted group can start over
    assert fetched(c, a, None) == {(topic, 1): (9, "", -1)}


def test_consumer_offsets_is_internal_compacted_and_kafka_formatted(kafka_broker, raw_client):
    c = raw_client()
    topic = unique("go-format")
    create(c, topic, 2)
    group = unique("g-format")
    commit(c, group, {(topic, 0): (42, "m1", 7), (topic, 1): (43, "", -1)})
    commit(c, group, {(topic, 1): 44}, version=3, retention_ms=3_600_000)  # an explicit retention: value v1
    assert delete_groups(c, [group]) == {group: 0}
    md = c.request(ApiKey.METADATA, 8, {"topics": None, "allow_auto_topic_creation": False,
                                        "include_topic_authorized_operations": False})
    internal = {t.name: t for t in md.topics if t.is_internal}
    # __transaction_state too once a transactional producer of the session has used the broker
    assert set(internal) - {"__transaction_state"} == {OFFSETS_TOPIC} and len(internal[OFFSETS_TOPIC].partitions) == 50
    assert not any(t.is_internal for t in md.topics if t.name == topic)
    cfg = c.request(ApiKey.DESCRIBE_CONFIGS, 1, {"resources": [
        {"resource_type": 2, "resource_name": OFFSETS_TOPIC, "configuration_keys": None}], "include_synonyms": False})
    values = {e.name: e.value for e in cfg.results[0].configs}
    assert values["cleanup.policy"] == "compact" and values["segment.bytes"] == "104857600"
    # The records, read from the segment files with a reader built from kafka-spec.
    mine = [(h, r) for h, r in offsets_records(Path(kafka_broker.log_dir), offsets_partition(group))
            if group.encode() in r.key]
    decoded = [decode_offsets_record(r.key, r.value) for _, r in mine]
    assert [(kv, k.get("topic"), k.get("partition"), vv) for kv, k, vv, _ in decoded] == [
        (1, topic, 0, 3), (1, topic, 1, 3),  # first commit: OffsetCommitKey v1, OffsetCommitValue v3
        (1, topic, 1, 1),  # with an expire timestamp Kafka writes value v1
        (1, topic, 0, None), (1, topic, 1, None), (2, None, None, None)]  # DeleteGroups: tombstones
    assert all(k["group"] == group for _, k, _, _ in decoded)
    v0, v1, v2 = decoded[0][3], decoded[1][3], decoded[2][3]
    assert (v0["offset"], v0["leaderEpoch"], v0["metadata"]) == (42, 7, "m1")
    assert (v1["offset"], v1["leaderEpoch"], v1["metadata"]) == (43, -1, "")
    assert v0["commitTimestamp"] > 1_600_000_000_000
    assert v2["offset"] == 44 and v2["expireTimestamp"] - v2["commitTimestamp"] == 3_600_000
    headers = [h for h, _ in mine]
    assert headers[0] is headers[1]  # one commit, one batch: all-or-nothing
    assert all(h.producer_id == -1 and not h.is_transactional for h in headers)


def test_mutated_group_requests_never_break_the_broker(kafka_broker, raw_client):
    topic = unique("go-fuzz")
    c = raw_client()
    create(c, topic, 1)
    group = unique("g-fuzz")
    commit(c, group, {(topic, 0): 5})
    from broker.protocol import RequestHeader, encode_request

    def frame(key: int, version: int, body: dict) -> bytes:
        data = b"".join(bytes(b) for b in encode_request(RequestHeader(key, version, 9, "fuzz"), body))
        return data[4:]

    valid = [
        frame(ApiKey.OFFSET_COMMIT, 7, {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                                        "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                                            {"partition_index": 0, "committed_offset": 6,
                                             "committed_leader_epoch": -1, "committed_metadata": "abc"}]}]}),
        frame(ApiKey.OFFSET_FETCH, 5, {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}),
        frame(ApiKey.FIND_COORDINATOR, 2, {"key": group, "key_type": 0}),
        frame(ApiKey.DESCRIBE_GROUPS, 4, {"groups": [group], "include_authorized_operations": True}),
        frame(ApiKey.LIST_GROUPS, 2, {}),
        frame(ApiKey.DELETE_GROUPS, 1, {"groups_names": [unique("g-none")]}),
    ]
    rng = random.Random(4321)
    conn = RawClient(kafka_broker.host, kafka_broker.port, "fuzz", timeout=5)
    answered = closed = 0
    try:
        for _ in range(300):
            data = bytearray(rng.choice(valid))
            for _ in range(rng.randint(1, 3)):
                data[rng.randrange(10, len(data))] = rng.getrandbits(8)
            if rng.random() < 0.2:
                data = data[:rng.randrange(8, len(data))]
            conn.send_raw(struct.pack(">i", len(data)) + bytes(data))
            try:
                conn.recv_frame()
                answered += 1
            except (ConnectionError, OSError):
                closed += 1
                conn.close()
                conn = RawClient(kafka_broker.host, kafka_broker.port, "fuzz", timeout=5)
    finally:
        conn.close()
    assert answered and closed and kafka_broker.alive()
    assert fetch(raw_client(), group, [(topic, 0)]).error_code == 0
    assert "Traceback" not in kafka_broker.stderr_text()


# --- fresh brokers: restarts, a log written by Kafka, expiration ---

def test_offsets_survive_clean_restart_and_sigkill(broker_factory):
    broker = broker_factory({"offsets.topic.num.partitions": "4"})
    topic = unique("go-restart")
    groups = [unique(f"g{i}") for i in range(6)]
    with RawClient(broker.host, broker.port) as c:
        create(c, topic, 2)
        for i, g in enumerate(groups):
            commit(c, g, {(topic, 0): (100 + i, f"m{i}", 1), (topic, 1): 200 + i})
        assert delete_groups(c, [groups[5]]) == {groups[5]: 0}
        commit(c, groups[0], {(topic, 1): 0})  # a later commit wins over an earlier one
    expected = {g: {(topic, 0): (100 + i, f"m{i}", 1), (topic, 1): (200 + i, "", -1)} for i, g in enumerate(groups)}
    expected[groups[0]][(topic, 1)] = (0, "", -1)
    expected[groups[5]] = {}
    broker.restart()
    with RawClient(broker.host, broker.port) as c:
        assert {g: fetched(c, g, None) for g in groups} == expected
        assert set(list_groups(c)) == set(groups[:5])
        # concurrent commits to one partition of one group: the cache must end as the log does
        hot = groups[1]

        def worker(n: int) -> None:
            with RawClient(broker.host, broker.port) as w:
                for k in range(25):
                    assert commit(w, hot, {(topic, 0): n * 1000 + k}) == {(topic, 0): 0}

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        before = fetched(c, hot, None)
        commit(c, groups[2], {(topic, 0): 77})
        expected[groups[2]][(topic, 0)] = (77, "", -1)
    broker.kill()  # SIGKILL: no clean shutdown, the default flush policy (nothing fsynced)
    broker.start()
    with RawClient(broker.host, broker.port) as c:
        assert fetched(c, hot, None) == before
        assert fetched(c, groups[2], None) == expected[groups[2]]
        assert fetched(c, groups[5], None) == {}
    assert "Traceback" not in broker.stderr_text()


def test_loads_a_log_written_by_kafka(broker_factory):
    """Records as a Kafka broker writes them (encoded here from kafka-spec, not with the
    broker's codec): a consumer group's GroupMetadataValue v3, OffsetCommitValue v0/v1/v3
    and a flexible v4 with a tagged field, a transactional commit and an aborted one, a
    record of a KIP-848 type and an unreadable one; loaded at startup, the unknown and
    unreadable skipped."""
    broker = broker_factory({"offsets.topic.num.partitions": "1"})
    with RawClient(broker.host, broker.port) as c:
        create(c, "orders", 4)
        commit(c, "warmup", {("orders", 0): 1})  # creates __consumer_offsets-0
    broker.stop()

    def ok(group: str, topic: str, partition: int) -> bytes:
        return struct.pack(">h", 1) + spec_encode(load_spec("OffsetCommitKey")["fields"], 1,
                                                  {"group": group, "topic": topic, "partition": partition})

    def ov(version: int, offset: int, metadata: str = "") -> bytes:
        return struct.pack(">h", version) + spec_encode(load_spec("OffsetCommitValue")["fields"], version, {
            "offset": offset, "leaderEpoch": 3, "metadata": metadata, "commitTimestamp": 1_700_000_000_000,
            "expireTimestamp": 4_000_000_000_000})

    gm_key = struct.pack(">h", 2) + spec_encode(load_spec("GroupMetadataKey")["fields"], 2, {"group": "kgroup"})
    gm_value = struct.pack(">h", 3) + spec_encode(load_spec("GroupMetadataValue")["fields"], 3, {
        "protocolType": "consumer", "generation": 5, "protocol": "range", "leader": "member-1",
        "currentStateTimestamp": 1_700_000_000_000, "members": [{
            "memberId": "member-1", "groupInstanceId": None, "clientId": "c1", "clientHost": "/10.0.0.1",
            "rebalanceTimeout": 300000, "sessionTimeout": 45000, "subscription": b"\x00\x01",
            "assignment": b"\x00\x02"}]})
    # OffsetCommitValue v4 (flexible): offset, leaderEpoch, compact string, commitTimestamp, one tagged field
    flexible = struct.pack(">hqi", 4, 13, 9) + bytes([len("flex") + 1]) + b"flex" + struct.pack(">q", 1) \
        + b"\x01\x05\x02zz"
    ts = 1_700_000_000_000
    batches = [
        encode_batch([(gm_key, gm_value, ts), (ok("kgroup", "orders", 0), ov(3, 10, "a"), ts),
                      (ok("kgroup", "orders", 1), ov(1, 11), ts), (ok("kgroup", "orders", 2), ov(0, 12), ts),
                      (ok("kgroup", "orders", 3), flexible, ts)]),
        encode_batch([(struct.pack(">h", 3) + b"\x00\x06kgroup", b"\x00\x00future", ts),  # ConsumerGroupMetadata
                      (b"\x00", b"garbage", ts),  # an unreadable key
                      (ok("kgroup", "orders", 2), b"\x00\x03\x00", ts)]),  # an unreadable value
        encode_batch([(ok("txn-group", "orders", 0), ov(3, 50), ts)], producer_id=7, producer_epoch=0,
                     base_sequence=0, is_transactional=True),
        encode_batch([(ok("aborted", "orders", 0), ov(3, 60), ts)], producer_id=8, producer_epoch=0,
                     base_sequence=0, is_transactional=True),
    ]
    from broker.log.manager import LogManager
    from broker.log.validator import AppendOrigin
    from broker.record.control import ControlRecordType, encode_end_txn_marker_batch
    from broker.server.config import server_config

    manager = LogManager.from_server_config(server_config({"log.dirs": str(broker.log_dir)}))
    manager.startup()
    try:
        lg = manager.get_log(OFFSETS_TOPIC, 0)
        for batch in batches:
            lg.append_as_leader(batch, origin=AppendOrigin.COORDINATOR)
        for kind, pid in ((ControlRecordType.COMMIT, 7), (ControlRecordType.ABORT, 8)):
            lg.append_as_leader(encode_end_txn_marker_batch(kind, producer_id=pid, producer_epoch=0,
                                                            coordinator_epoch=0, timestamp=ts),
                                origin=AppendOrigin.COORDINATOR)
    finally:
        manager.shutdown()
    broker.start()
    with RawClient(broker.host, broker.port) as c:
        tps = [("orders", p) for p in range(4)]
        assert fetched(c, "kgroup", tps) == {("orders", 0): (10, "a", 3), ("orders", 1): (11, "", -1),
                                             ("orders", 2): (12, "", -1), ("orders", 3): (13, "flex", 9)}
        assert fetched(c, "txn-group", None) == {("orders", 0): (50, "", 3)}
        assert fetched(c, "aborted", None) == {}
        groups = list_groups(c)
        assert groups["kgroup"] == "consumer" and groups["warmup"] == "" and "aborted" not in groups
        d = describe(c, ["kgroup"])[0]
        # loaded as Kafka does: Stable with its member (until that member's session expires)
        assert (d.group_state, d.protocol_type, d.protocol_data) == ("Stable", "consumer", "range")
        assert [(m.member_id, m.client_id, m.client_host, bytes(m.member_metadata), bytes(m.member_assignment))
                for m in d.members] == [("member-1", "c1", "/10.0.0.1", b"\x00\x01", b"\x00\x02")]
    assert "Traceback" not in broker.stderr_text()
    assert "skipping an unreadable record" in broker.stderr_text()


def test_offsets_expire_and_stay_expired(broker_factory):
    broker = broker_factory({"offsets.topic.num.partitions": "2", "offsets.retention.check.interval.ms": "200"})
    topic = unique("go-expire")
    short, kept = unique("g-short"), unique("g-kept")
    with RawClient(broker.host, broker.port) as c:
        # Metadata's auto-creation of the name goes through the coordinator (its partitions, compaction)
        md = c.request(ApiKey.METADATA, 8, {"topics": [{"name": OFFSETS_TOPIC}], "allow_auto_topic_creation": True,
                                            "include_topic_authorized_operations": False})
        assert (md.topics[0].error_code, md.topics[0].is_internal, len(md.topics[0].partitions)) == (0, True, 2)
        cfg = c.request(ApiKey.DESCRIBE_CONFIGS, 1, {"resources": [
            {"resource_type": 2, "resource_name": OFFSETS_TOPIC, "configuration_keys": ["cleanup.policy"]}],
            "include_synonyms": False})
        assert cfg.results[0].configs[0].value == "compact"
        create(c, topic, 2)
        assert commit(c, short, {(topic, 0): 5}, version=2, retention_ms=1) == {(topic, 0): 0}
        commit(c, short, {(topic, 1): 6})  # retention from offsets.retention.minutes (7 days)
        commit(c, kept, {(topic, 0): 7}, version=4, retention_ms=-1)
        for _ in range(200):  # the check runs every 200 ms
            if (topic, 0) not in fetched(c, short, None):
                break
            threading.Event().wait(0.1)
        assert fetched(c, short, None) == {(topic, 1): (6, "", -1)}
        assert fetched(c, kept, None) == {(topic, 0): (7, "", -1)}
    broker.restart()
    with RawClient(broker.host, broker.port) as c:
        assert fetched(c, short, None) == {(topic, 1): (6, "", -1)}  # the tombstone persisted
        assert fetched(c, kept, None) == {(topic, 0): (7, "", -1)}


def test_record_codec_round_trips_every_version():
    from broker.server.group import records as r

    for version in range(0, 5):
        value = r.OffsetCommitValue(12, "meta-é", 1_700_000_000_000, 3 if version >= 3 else -1,
                                    4_000_000_000_000 if version == 1 else -1)
        data = r.encode_offset_commit_value(value, version)
        assert r.decode_offset_commit_value(data) == value
        member = r.MemberMetadata("m-1", "client", "/10.0.0.1", 45000, 300000 if version >= 1 else -1,
                                  "static" if version >= 3 else None, b"\x00\x01", b"")
        gm = r.GroupMetadataValue("consumer", 7, "range", "m-1", 123 if version >= 2 else -1, (member,))
        assert r.decode_group_metadata_value(r.encode_group_metadata_value(gm, version)) == gm
    assert r.offset_commit_value_version(r.OffsetCommitValue(1)) == 3
    assert r.offset_commit_value_version(r.OffsetCommitValue(1, expire_timestamp=5)) == 1
    # a version from the future (KIP-915: only tagged fields added) is read as v4
    future = b"\x00\x07" + r.encode_offset_commit_value(r.OffsetCommitValue(5, "x", 1, 2), 4)[2:]
    assert r.decode_offset_commit_value(future) == r.OffsetCommitValue(5, "x", 1, 2)
    key = r.OffsetCommitKey("g", "t", 3)
    assert r.decode_key(r.encode_key(key)) == key and r.encode_key(key)[:2] == b"\x00\x01"
    assert r.decode_key(r.encode_key(r.GroupMetadataKey("g"))) == r.GroupMetadataKey("g")
    assert r.decode_key(b"\x00\x05anything") == r.UnknownKey(5)
    good = r.encode_offset_commit_value(r.OffsetCommitValue(1), 3)
    for bad in (b"", b"\x00", good[:-1], good + b"\x00", b"\xff\xff" + good[2:],
                b"\x00\x03" + b"\x00" * 12 + b"\xff\xfe"):
        with pytest.raises(r.RecordFormatError):
            r.decode_offset_commit_value(bad)
    for bad in (None, b"\x00", b"\x00\x01\x00\x01g", b"\xff\xff", b"\x00\x02\x00\x01g!"):
        with pytest.raises(r.RecordFormatError):
            r.decode_key(bad)
    huge = b"\x00\x03" + struct.pack(">h", 0) + struct.pack(">i", 0) + b"\xff\xff\xff\xff" + b"\x00" * 8 \
        + struct.pack(">i", 1 << 30)  # a billion members in a few bytes
    with pytest.raises(r.RecordFormatError):
        r.decode_group_metadata_value(huge)
