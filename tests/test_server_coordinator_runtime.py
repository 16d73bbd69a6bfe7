"""The coordinator runtime (``broker/server/coordinator``) on its own, against real logs: an
in-process ``LogManager`` + ``TopicManager`` (the broker's own, over a temporary log
directory), so that every append and every replay goes through a real ``UnifiedLog``.

Covers the internal topic (settings from Kafka's keys, creation once, the partition count of
an existing topic, Java's hash partitioning), the writer (plain and transactional batches,
timestamps, wake-ups, the error maps), the loader (log order, transactions resolved at their
markers, open transactions, damaged batches and failing replays skipped, legacy magic 0 / 1
entries, a bounded load, a missing log), the timer, the runtime's startup, and a sketch of a
Schema-Registry-like ``_schemas`` store (JSON keys and values, one compacted partition)
written on it.
"""

from __future__ import annotations

import ast
import json
import logging
import threading
from pathlib import Path

import pytest

from broker.log import files
from broker.log.clock import MockTime
from broker.log.scheduler import Scheduler
from broker.protocol import ErrorCode
from broker.record.batch import iter_batches
from broker.record.control import ControlRecordType, encode_end_txn_marker_batch
from broker.record.legacy import encode_legacy_message_set
from broker.server.coordinator import (
    INTERNAL_TOPICS,
    CoordinatorLoader,
    CoordinatorRecord,
    CoordinatorRuntime,
    CoordinatorTimer,
    InternalTopic,
    InternalTopicSpec,
    RecordWriter,
    append_as_coordinator,
    java_string_hash,
    partition_for,
    storage_error_map,
)
from broker.server.errors import ApiError
from tests.support.storage_node import StorageNode

TOPIC = "__test_state"
SPEC = InternalTopicSpec(TOPIC, partitions_key="test.state.num.partitions",
                         replication_key="test.state.replication.factor",
                         segment_bytes_key="test.state.segment.bytes", load_buffer_key="test.state.load.buffer.size",
                         default_partitions=3, compression_codec_key="test.state.compression.codec",
                         min_isr_key="test.state.min.isr",
                         configs=(("cleanup.policy", "compact"), ("compression.type", "producer")))
# The Schema Registry's store: one compacted partition, keys and values in JSON; the topic
# name comes from kafkastore.topic (a spec is data: replace the name).
SCHEMAS_SPEC = InternalTopicSpec("_schemas", partitions_key=None, default_partitions=1,
                                 replication_key="kafkastore.topic.replication.factor",
                                 segment_bytes_key=None, load_buffer_key=None)
ERRORS = storage_error_map(ErrorCode.UNKNOWN_SERVER_ERROR)


Node = StorageNode  # the broker's storage and topic layers, in process


@pytest.fixture
def node(tmp_path):
    n = Node(tmp_path / "logs")
    yield n
    n.close()


def batches_of(lg) -> list:
    """(header, records) of every batch of ``lg`` (a read stops at a segment's end)."""
    out, offset = [], lg.log_start_offset
    while offset < lg.log_end_offset:
        out.extend(iter_batches(lg.read(offset, 1 << 24).records.read_bytes()))
        offset = out[-1][0].next_offset
    return out


def records_of(lg) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for _, batch in batches_of(lg) for r in batch]


def collect(into: list):
    def replay(record: CoordinatorRecord) -> bool:
        into.append(record)
        return record.key != b"skip"
    return replay


# --- the topic ---

def test_settings_read_kafkas_keys_and_defaults(caplog):
    s = SPEC.settings({})
    assert (s.name, s.partitions, s.replication_factor, s.segment_bytes, s.load_buffer_size, s.compression_codec) == \
        (TOPIC, 3, 1, 104857600, 5242880, 0)
    assert s.topic_configs == {"cleanup.policy": "compact", "compression.type": "producer",
                               "segment.bytes": "104857600", "min.insync.replicas": "1"}
    with caplog.at_level(logging.WARNING, logger="broker.server.coordinator.topic"):
        s = SPEC.settings({"test.state.num.partitions": "7", "test.state.segment.bytes": 1000,
                           "test.state.load.buffer.size": 99, "test.state.compression.codec": 1,
                           "test.state.min.isr": 2, "test.state.replication.factor": 3})
    assert (s.partitions, s.segment_bytes, s.load_buffer_size, s.compression_codec, s.replication_factor) == \
        (7, 1000, 99, 1, 3)
    assert s.topic_configs["segment.bytes"] == "1000" and s.topic_configs["min.insync.replicas"] == "2"
    assert "a single node keeps one replica of __test_state" in caplog.text
    schemas = SCHEMAS_SPEC.settings({"test.state.num.partitions": 9})
    assert schemas.partitions == 1 and schemas.topic_configs == {"cleanup.policy": "compact",
                                                                  "segment.bytes": "104857600"}
    assert INTERNAL_TOPICS == {"__consumer_offsets", "__transaction_state", "__share_group_state"}


def test_partition_for_is_javas_hash_code():
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(1 << 31)  # abs(MIN_VALUE) is 0 in Kafka's Utils.abs
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("\U0001F600", 50) == (31 * 0xD83D + 0xDE00) % 50  # UTF-16 surrogates
    assert java_string_hash("") == 0 and partition_for("", 3) == 0


def test_the_topic_is_created_once_and_an_existing_one_keeps_its_count(tmp_path):
    node = Node(tmp_path / "logs")
    try:
        topic = InternalTopic(node.topics, SPEC.settings({}))
        assert topic.resolve() is None and not topic.exists()
        infos = []
        threads = [threading.Thread(target=lambda: infos.append(topic.ensure())) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len({i.topic_id for i in infos}) == 1 and infos[0].partitions == 3
        assert node.topics.get(TOPIC).configs == SPEC.settings({}).topic_configs
        assert topic.partition_for("group-a") == partition_for("group-a", 3)
    finally:
        node.close()
    node = Node(tmp_path / "logs")
    try:  # reconfigured to 10 partitions: the existing topic's 3 are kept, so no key moves
        topic = InternalTopic(node.topics, SPEC.settings({"test.state.num.partitions": 10}))
        assert topic.num_partitions == 10
        assert topic.resolve().partitions == 3 and topic.num_partitions == 3
        assert topic.partition_for("group-a") == partition_for("group-a", 3)
    finally:
        node.close()


# --- the writer ---

def test_writer_appends_one_batch_and_wakes_fetches(node):
    woken = []
    topic = InternalTopic(node.topics, SPEC.settings({}))
    time = MockTime()
    writer = RecordWriter(topic, errors=ERRORS, time=time, on_append=woken.append)
    writer.append(1, [(b"k1", b"v1"), (b"k2", None)], timestamp=time.milliseconds() - 5)
    info = writer.append(1, [(b"k3", b"v3")])
    assert info.first_offset == 2
    lg = topic.get_log(1)
    batches = batches_of(lg)
    assert [len(b) for _, b in batches] == [2, 1]
    assert [h.max_timestamp for h, _ in batches] == [time.milliseconds() - 5, time.milliseconds()]
    assert not batches[0][0].is_transactional
    assert records_of(lg) == [(0, b"k1", b"v1"), (1, b"k2", None), (2, b"k3", b"v3")]
    assert woken == [(TOPIC, 1), (TOPIC, 1)]


def test_writer_writes_transactional_batches(node):
    topic = InternalTopic(node.topics, SPEC.settings({}))
    writer = RecordWriter(topic, errors=ERRORS)
    writer.append(0, [(b"k", b"v")], producer_id=42, producer_epoch=3)
    header, _ = batches_of(topic.get_log(0))[0]
    assert (header.producer_id, header.producer_epoch, header.is_transactional) == (42, 3, True)
    # the log fences an older epoch of the producer: the code as the log raised it
    with pytest.raises(ApiError) as err:
        writer.append(0, [(b"k", b"v")], producer_id=42, producer_epoch=2)
    assert err.value.code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_writer_maps_append_errors(node):
    topic = InternalTopic(node.topics, SPEC.settings({}))
    writer = RecordWriter(topic, errors={**ERRORS, ErrorCode.INVALID_FETCH_SIZE: ErrorCode.NONE})
    with pytest.raises(ApiError) as err:  # a partition the topic does not have
        writer.append(5, [(b"k", b"v")])
    assert err.value.code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    big = [(b"k", b"x" * 2_000_000)]  # above max.message.bytes
    with pytest.raises(ApiError) as err:
        writer.append(0, big)
    assert err.value.code == ErrorCode.UNKNOWN_SERVER_ERROR  # MESSAGE_TOO_LARGE / RECORD_LIST_TOO_LARGE, mapped
    with pytest.raises(ApiError) as err:
        writer.append(0, big, errors={})
    assert err.value.code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE)
    offline = RecordWriter(InternalTopic(node.topics, SPEC.settings({})), errors=ERRORS)
    offline.topic.get_log = lambda p: (_ for _ in ()).throw(OSError("disk gone"))
    with pytest.raises(ApiError) as err:
        offline.append(0, [(b"k", b"v")])
    assert err.value.code == ErrorCode.UNKNOWN_SERVER_ERROR  # unexplained: logged with its traceback
    assert topic.get_log(0).log_end_offset == 0


# --- the loader ---

def marker(pid: int, commit: bool) -> bytes:
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    return encode_end_txn_marker_batch(kind, producer_id=pid, producer_epoch=0, coordinator_epoch=0, timestamp=5)


def test_loader_replays_in_log_order_and_resolves_transactions(node):
    topic = InternalTopic(node.topics, SPEC.settings({}))
    w = RecordWriter(topic, errors=ERRORS)
    w.append(0, [(b"a", b"1")])
    w.append(0, [(b"t7", b"x")], producer_id=7, producer_epoch=0)
    w.append(0, [(b"t8", b"y")], producer_id=8, producer_epoch=0)
    w.append(0, [(b"b", b"2"), (b"skip", b"?")])
    w.append(0, [(b"t9", b"open")], producer_id=9, producer_epoch=0)
    lg = topic.get_log(0)
    append_as_coordinator(lg, marker(8, commit=False))
    append_as_coordinator(lg, marker(7, commit=True))
    w.append(0, [(b"c", None)])
    seen: list[CoordinatorRecord] = []
    result = CoordinatorLoader(topic, 64).load(0, collect(seen))  # a tiny buffer: one batch per read
    assert [(r.key, r.value, r.producer_id) for r in seen] == [
        (b"a", b"1", -1), (b"b", b"2", -1), (b"skip", b"?", -1), (b"t7", b"x", 7), (b"c", None, -1)]
    assert [r.offset for r in seen] == [0, 3, 4, 1, 8]
    assert (result.replayed, result.applied, result.skipped_batches, result.complete) == (5, 4, 0, True)
    assert result.next_offset == lg.log_end_offset
    assert {pid: [(r.key, r.offset) for r in recs] for pid, recs in result.open_transactions.items()} == \
        {9: [(b"t9", 5)]}
    ended = []
    CoordinatorLoader(topic, 1 << 20).load(0, collect([]), on_transaction_end=lambda *a: ended.append(a))
    assert [(pid, committed, [r.key for r in recs]) for pid, committed, recs in ended] == \
        [(8, False, [b"t8"]), (7, True, [b"t7"])]
    bounded: list[CoordinatorRecord] = []
    result = CoordinatorLoader(topic, 1 << 20).load(0, collect(bounded), end_offset=6)
    assert [r.key for r in bounded] == [b"a", b"b", b"skip"] and result.next_offset == 6
    assert set(result.open_transactions) == {7, 8, 9}


def test_loader_skips_damaged_batches_and_failing_replays(tmp_path, caplog):
    node = Node(tmp_path / "logs")
    topic = InternalTopic(node.topics, SPEC.settings({}))
    w = RecordWriter(topic, errors=ERRORS)
    for i in range(3):
        w.append(0, [(b"k%d" % i, b"value-%d" % i)])
    node.close()
    segment = files.log_file(tmp_path / "logs" / files.partition_dir_name(TOPIC, 0), 0)
    data = bytearray(segment.read_bytes())
    data[data.index(b"value-1")] ^= 0xFF  # the second batch's CRC no longer matches (kept: clean shutdown)
    segment.write_bytes(bytes(data))
    node = Node(tmp_path / "logs")
    try:
        topic = InternalTopic(node.topics, SPEC.settings({}))
        seen: list[CoordinatorRecord] = []

        def replay(record: CoordinatorRecord) -> bool:
            if record.key == b"k0":
                raise RuntimeError("a bug in one record's replay")
            seen.append(record)
            return True

        with caplog.at_level(logging.ERROR, logger="broker.server.coordinator.loader"):
            result = CoordinatorLoader(topic, 1 << 20).load(0, replay)
        assert [r.key for r in seen] == [b"k2"]
        assert (result.replayed, result.applied, result.skipped_batches, result.complete) == (2, 1, 1, True)
        assert "skipping unreadable batch at offset 1" in caplog.text
        assert "replaying the record at offset 0 failed" in caplog.text
        missing = CoordinatorLoader(topic, 1 << 20).load(7, replay)
        assert not missing.complete and missing.replayed == 0
    finally:
        node.close()


def test_loader_reads_legacy_entries(tmp_path):
    """An old Kafka's partition: magic 0 and magic 1 message sets (plain and a gzip
    wrapper), then v2 batches appended by this broker."""
    node = Node(tmp_path / "logs")
    InternalTopic(node.topics, SPEC.settings({})).ensure()
    node.close()
    part = tmp_path / "logs" / files.partition_dir_name(TOPIC, 0)
    for f in part.iterdir():
        if f.suffix in (".index", ".timeindex", ".snapshot"):
            f.unlink()
    legacy = (encode_legacy_message_set([(b"m0", b"zero")], magic=0)
              + encode_legacy_message_set([(b"m1", b"one", 10), (b"m2", b"two", 11)], magic=1, base_offset=1)
              + encode_legacy_message_set([(b"m3", b"three", 12), (b"m4", None, 13)], magic=1, codec=1,
                                          base_offset=3))
    files.log_file(part, 0).write_bytes(legacy)
    (tmp_path / "logs" / files.CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)  # recovery rebuilds the indexes
    node = Node(tmp_path / "logs")
    try:
        topic = InternalTopic(node.topics, SPEC.settings({}))
        assert topic.get_log(0).log_end_offset == 5
        RecordWriter(topic, errors=ERRORS).append(0, [(b"v2", b"new")])
        seen: list[CoordinatorRecord] = []
        result = CoordinatorLoader(topic, 1 << 20).load(0, collect(seen))
        assert [(r.offset, r.key, r.value) for r in seen] == [
            (0, b"m0", b"zero"), (1, b"m1", b"one"), (2, b"m2", b"two"), (3, b"m3", b"three"), (4, b"m4", None),
            (5, b"v2", b"new")]
        assert result.complete and result.skipped_batches == 0
    finally:
        node.close()


# --- the timer ---

def test_timer_runs_one_shot_timers_on_its_thread_and_periodic_tasks_on_the_scheduler():
    time = MockTime()
    shared = Scheduler(time)
    timer = CoordinatorTimer(time, shared, thread_name="test-coordinator-timer")
    timer.startup()
    try:
        fired = threading.Event()
        names = []
        timer.schedule_once("once", lambda: (names.append(threading.current_thread().name), fired.set()), 0)
        assert fired.wait(10) and names == ["test-coordinator-timer"]
        runs = []
        start = time.milliseconds()
        assert timer.schedule_periodic("tick", lambda: runs.append(time.milliseconds() - start), 100) is not None
        assert timer.schedule_periodic("never", lambda: runs.append(-1), 0) is None
        for _ in range(3):
            time.sleep(100)
            shared.run_pending()
        assert runs == [100, 200, 300]
    finally:
        timer.shutdown()
    time.sleep(100)
    shared.run_pending()
    assert runs == [100, 200, 300]  # cancelled by shutdown
    timer.shutdown()  # idempotent
    bare = CoordinatorTimer(time)
    assert bare.schedule_periodic("tick", lambda: None, 100) is None
    with pytest.raises(RuntimeError):
        bare.schedule_once("once", lambda: None, 0)


# --- the runtime ---

def test_runtime_startup_adopts_the_topic_and_loads_every_partition(tmp_path):
    node = Node(tmp_path / "logs")
    try:
        rt = CoordinatorRuntime(SPEC, node.topics, {}, append_errors=ERRORS)
        with pytest.raises(ApiError) as err:
            rt.check_loaded()
        assert err.value.code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        assert rt.startup(collect([])) == [] and rt.loaded  # no topic yet: nothing to load
        for key in ("alpha", "beta", "gamma", "delta"):
            p = rt.partition_for(key)
            with rt.partition_lock(p):
                rt.append(p, [(key.encode(), b"v")])
        rt.shutdown()
    finally:
        node.close()
    node = Node(tmp_path / "logs")
    try:
        rt = CoordinatorRuntime(SPEC, node.topics, {"test.state.num.partitions": 5}, append_errors=ERRORS)
        seen: list[CoordinatorRecord] = []
        results = rt.startup(collect(seen))
        assert rt.num_partitions == 3 and [r.partition for r in results] == [0, 1, 2]
        assert sorted(r.key for r in seen) == [b"alpha", b"beta", b"delta", b"gamma"]
        assert all(r.partition == partition_for(r.key.decode(), 3) for r in seen)
        rt.check_loaded()
        rt.shutdown()
    finally:
        node.close()


class SchemaStore:
    """A sketch of the Schema Registry's store written on the runtime: JSON keys and values
    in one compacted partition; the latest value of a key wins, a tombstone removes it."""

    def __init__(self, topics, config) -> None:
        self.runtime = CoordinatorRuntime(SCHEMAS_SPEC, topics, config, append_errors=ERRORS)
        self.schemas: dict[tuple[str, int], dict] = {}

    def startup(self) -> None:
        self.runtime.startup(self._replay)

    def _replay(self, record: CoordinatorRecord) -> bool:
        key = json.loads(record.key)
        if key.get("keytype") != "SCHEMA":
            return False
        if record.value is None:
            self.schemas.pop((key["subject"], key["version"]), None)
        else:
            self.schemas[(key["subject"], key["version"])] = json.loads(record.value)
        return True

    def register(self, subject: str, version: int, schema: str | None) -> None:
        key = json.dumps({"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1}).encode()
        value = None if schema is None else json.dumps({"subject": subject, "version": version,
                                                        "schema": schema}).encode()
        with self.runtime.partition_lock(0):
            self.runtime.append(0, [(key, value)])
            self._replay(CoordinatorRecord(0, -1, -1, key, value))


def test_a_schemas_store_is_written_on_the_runtime(tmp_path):
    node = Node(tmp_path / "logs")
    try:
        store = SchemaStore(node.topics, {})
        store.startup()
        store.register("orders-value", 1, '"string"')
        store.register("orders-value", 2, '"long"')
        store.register("users-value", 1, '"int"')
        store.register("orders-value", 1, None)
        info = node.topics.get("_schemas")
        assert info.partitions == 1 and info.configs["cleanup.policy"] == "compact"
    finally:
        node.close()
    node = Node(tmp_path / "logs")
    try:
        store = SchemaStore(node.topics, {})
        store.startup()
        assert store.schemas == {("orders-value", 2): {"subject": "orders-value", "version": 2, "schema": '"long"'},
                                 ("users-value", 1): {"subject": "users-value", "version": 1, "schema": '"int"'}}
    finally:
        node.close()


# --- the state-machine idiom ---

def test_state_machines_move_only_through_checked_transitions():
    from broker.server.coordinator.state import IllegalStateTransition, check_transition
    from broker.server.group.group import VALID_PREVIOUS, ClassicGroupState, GroupMetadata
    from broker.server.txn.state import IllegalStateTransition as TxnIllegalStateTransition

    assert TxnIllegalStateTransition is IllegalStateTransition  # one concept for every coordinator
    table = {"b": {"a"}, "a": {"b"}}
    check_transition("thing", "a", "b", table)
    with pytest.raises(IllegalStateTransition, match="thing: b -> b is not a valid transition"):
        check_transition("thing", "b", "b", table)
    S = ClassicGroupState
    g = GroupMetadata("g")
    assert g.state == S.EMPTY == "Empty"  # Kafka's names, as DescribeGroups answers them
    for state in (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.STABLE, S.PREPARING_REBALANCE, S.EMPTY):
        g.transition_to(state)
        assert g.state is state
    with pytest.raises(IllegalStateTransition, match="group g: Empty -> Stable"):
        g.transition_to(S.STABLE)
    g.restore_state(S.STABLE)  # loading: not a transition
    assert g.state is S.STABLE
    assert VALID_PREVIOUS[S.DEAD] == frozenset(S) and VALID_PREVIOUS[S.STABLE] == {S.COMPLETING_REBALANCE}
    assert type(str(S.STABLE)) is str  # what the wire encoder takes
    # the classic group's users change its state only through the state machine
    root = Path(__file__).resolve().parents[1] / "broker" / "server" / "group"
    for name in ("membership.py", "coordinator.py"):
        tree = ast.parse((root / name).read_text())
        assigned = [node.lineno for node in ast.walk(tree) if isinstance(node, (ast.Assign, ast.AugAssign))
                    for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
                    for t in (target.elts if isinstance(target, ast.Tuple) else [target])
                    if isinstance(t, ast.Attribute) and t.attr == "state"]
        assert assigned == [], f"{name}: a group's state set directly at lines {assigned}"
