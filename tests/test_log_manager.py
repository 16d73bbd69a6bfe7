"""Tests of broker/log/manager.py and broker/log/scheduler.py: the per-directory files
(meta.properties, checkpoints, the clean-shutdown marker), create/delete of partition
logs, startup after a clean or an unclean stop (R7), the background tasks driven by a
MockTime, topic config changes, and an offline log directory."""

from __future__ import annotations

import errno
import os
import uuid
from pathlib import Path

import pytest

from broker.config import load_properties
from broker.log import files
from broker.log.clock import MockTime
from broker.log.config import LogConfig
from broker.log.errors import KafkaStorageError
from broker.log.manager import InconsistentClusterIdError, LogManager
from broker.log.scheduler import KafkaScheduler, Scheduler
from broker.record.batch import decode_batch, encode_batch, iter_batch_headers


def config(**props) -> LogConfig:
    return LogConfig.from_props({k.replace("_", "."): v for k, v in props.items()})


class Env:
    def __init__(self, tmp_path: Path, n_dirs: int = 1, **props) -> None:
        self.time = MockTime()
        self.dirs = [tmp_path / f"data{i}" for i in range(n_dirs)]
        self.config = config(**props)

    def manager(self, **kw) -> LogManager:
        kw.setdefault("scheduler", Scheduler(self.time))
        kw.setdefault("initial_task_delay_ms", 0)
        manager = LogManager(self.dirs, self.config, time=self.time, **kw)
        manager.startup()
        return manager

    def batch(self, value: bytes, ts: int | None = None) -> bytes:
        return encode_batch([(None, value, self.time.milliseconds() if ts is None else ts)])


def values(log) -> list[bytes]:
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).records.read_bytes()
        for pos, header in iter_batch_headers(data):
            out.extend(r.value for r in decode_batch(data, pos)[1])
            offset = header.next_offset
    return out


def test_meta_properties_are_written_once_and_checked(tmp_path):
    env = Env(tmp_path)
    m = env.manager(node_id=3, cluster_id="cluster-A")
    props = load_properties(env.dirs[0] / files.META_PROPERTIES_FILE)
    assert props["version"] == "1" and props["node.id"] == "3" and props["cluster.id"] == "cluster-A"
    directory_id = props["directory.id"]
    assert len(files.decode_topic_id(directory_id).bytes) == 16
    m.shutdown()
    m = env.manager(node_id=3)  # cluster.id read back from the directory
    assert m.cluster_id == "cluster-A" and m.directory_id(env.dirs[0]) == directory_id
    m.shutdown()
    with pytest.raises(InconsistentClusterIdError):
        env.manager(node_id=3, cluster_id="cluster-B")


def test_create_logs_partition_metadata_and_balancing(tmp_path):
    env = Env(tmp_path, n_dirs=2)
    m = env.manager()
    topic_id = uuid.uuid4()
    logs = [m.get_or_create_log("orders", p, topic_id=topic_id) for p in range(4)]
    assert {Path(lg.parent_dir) for lg in logs} == {d.absolute() for d in env.dirs}
    for p, lg in enumerate(logs):
        assert lg.dir.name == f"orders-{p}"
        assert files.read_partition_metadata(lg.dir) == topic_id
        assert (lg.dir / files.partition_dir_name("orders", p)).exists() is False
    assert m.get_or_create_log("orders", 0) is logs[0]
    assert m.get_log("orders", 0) is logs[0] and m.get_log("orders", 9) is None
    with pytest.raises(ValueError):
        m.get_or_create_log("orders", 0, topic_id=uuid.uuid4())
    for bad in ("../escape", "a/b", "", ".", "..", "x" * 250):
        with pytest.raises(ValueError):
            m.get_or_create_log(bad, 0)
    m.shutdown()


def test_shutdown_writes_marker_checkpoints_and_snapshots_then_restart_is_clean(tmp_path):
    env = Env(tmp_path, segment_bytes=400)
    m = env.manager()
    a = m.get_or_create_log("a", 0)
    b = m.get_or_create_log("b", 1)
    for i in range(20):
        a.append_as_leader(env.batch(b"a%d" % i))
    b.append_as_leader(env.batch(b"b0"))
    a.maybe_increment_log_start_offset(3)
    m.shutdown()
    d = env.dirs[0]
    assert (d / files.CLEAN_SHUTDOWN_FILE).exists()
    assert files.read_offset_checkpoint(d / files.RECOVERY_POINT_CHECKPOINT_FILE) == {("a", 0): 20, ("b", 1): 1}
    assert files.read_offset_checkpoint(d / files.LOG_START_OFFSET_CHECKPOINT_FILE) == {("a", 0): 3}
    assert files.read_offset_checkpoint(d / files.REPLICATION_OFFSET_CHECKPOINT_FILE) == {("a", 0): 20, ("b", 1): 1}
    assert files.producer_snapshot_file(d / "a-0", 20).exists()
    # R7: a clean restart recovers nothing and deletes the marker at once
    m = env.manager()
    assert not (d / files.CLEAN_SHUTDOWN_FILE).exists() and m.had_clean_shutdown(d)
    a, b = m.get_log("a", 0), m.get_log("b", 1)
    assert a.load_stats.recovered_segments == [] == b.load_stats.recovered_segments
    assert (a.log_start_offset, a.log_end_offset, a.high_watermark) == (3, 20, 20)
    assert values(a) == [b"a%d" % i for i in range(3, 20)]
    a.append_as_leader(env.batch(b"a20"))
    a.close_handlers()
    b.close_handlers()  # crash: no marker, no checkpoint
    m = env.manager()
    assert not m.had_clean_shutdown(d)
    a = m.get_log("a", 0)
    assert a.load_stats.recovered_segments  # unclean: recovered from the recovery point
    assert a.log_end_offset == 21 and values(a)[-1] == b"a20"
    m.shutdown()


def test_delete_log_renames_then_deletes_after_the_delay(tmp_path):
    env = Env(tmp_path, file_delete_delay_ms=10_000)
    m = env.manager()
    lg = m.get_or_create_log("gone", 0)
    lg.append_as_leader(env.batch(b"x"))
    in_flight = lg.read(0, 1000).records
    assert m.delete_log("gone", 0) is lg and m.get_log("gone", 0) is None
    renamed = [p for p in env.dirs[0].iterdir() if p.is_dir()]
    assert len(renamed) == 1 and renamed[0].name.startswith("gone-0.") and renamed[0].name.endswith("-delete")
    assert in_flight.read_bytes()  # a fetch already answered still reads its bytes
    with pytest.raises(KafkaStorageError):
        lg.append_as_leader(env.batch(b"y"))
    env.time.sleep(10_000)
    m.run_pending()
    assert not renamed[0].exists()
    assert m.delete_log("gone", 0) is None
    again = m.get_or_create_log("gone", 0)
    assert again.log_end_offset == 0
    m.shutdown()


def test_leftover_delete_directories_are_removed_at_startup(tmp_path):
    env = Env(tmp_path, file_delete_delay_ms=0)
    leftover = env.dirs[0] / "old-0.0123456789abcdef0123456789abcdef-delete"
    leftover.mkdir(parents=True)
    (leftover / "00000000000000000000.log").write_bytes(b"junk")
    (env.dirs[0] / "not-a-partition").mkdir()
    m = env.manager()
    assert m.all_logs() == []
    m.run_pending()
    assert not leftover.exists()
    m.shutdown()


def test_retention_and_checkpoint_tasks_run_on_the_scheduler(tmp_path):
    env = Env(tmp_path, segment_bytes=300, retention_ms=60_000, file_delete_delay_ms=0)
    m = env.manager(retention_check_interval_ms=1_000, flush_recovery_offset_checkpoint_ms=1_000)
    lg = m.get_or_create_log("t", 0)
    for i in range(10):
        lg.append_as_leader(env.batch(b"%d" % i))
    n = lg.num_segments
    assert n > 2
    env.time.sleep(61_000)
    lg.append_as_leader(env.batch(b"fresh"))
    m.run_pending()
    assert lg.log_start_offset == lg.segments[0].base_offset > 0
    assert lg.num_segments < n
    assert files.read_offset_checkpoint(env.dirs[0] / files.RECOVERY_POINT_CHECKPOINT_FILE)[("t", 0)] \
        == lg.recovery_point
    m.update_topic_config("t", config(segment_bytes=300, retention_ms=-1, retention_bytes=-1))
    assert lg.config.retention_ms == -1
    m.shutdown()


def test_flush_ms_is_enforced_by_the_flusher_task(tmp_path):
    env = Env(tmp_path, flush_ms=5_000)
    m = env.manager(flush_check_ms=1_000)
    lg = m.get_or_create_log("t", 0)
    lg.append_as_leader(env.batch(b"x"))
    lg.append_as_leader(env.batch(b"y"))
    env.time.sleep(1_000)
    m.run_pending()
    assert lg.recovery_point == 0
    env.time.sleep(4_000)
    m.run_pending()
    assert lg.recovery_point == 2
    m.shutdown()


def test_an_io_error_takes_only_its_log_dir_offline(tmp_path, monkeypatch):
    env = Env(tmp_path, n_dirs=2)
    m = env.manager()
    a = m.get_or_create_log("a", 0)
    b = m.get_or_create_log("b", 0)
    assert a.parent_dir != b.parent_dir
    a.append_as_leader(env.batch(b"a0"))

    def broken(*args):
        raise OSError(errno.EIO, "Input/output error")

    with monkeypatch.context() as patch:
        patch.setattr(os, "pwrite", broken)
        with pytest.raises(KafkaStorageError):
            a.append_as_leader(env.batch(b"a1"))
    m.run_pending()
    assert m.offline_log_dirs == [Path(a.parent_dir)]
    with pytest.raises(KafkaStorageError):
        a.append_as_leader(env.batch(b"a2"))
    b.append_as_leader(env.batch(b"b0"))
    c = m.get_or_create_log("c", 0)
    assert c.parent_dir == b.parent_dir
    m.shutdown()
    assert not (Path(a.parent_dir) / files.CLEAN_SHUTDOWN_FILE).exists()
    assert (Path(b.parent_dir) / files.CLEAN_SHUTDOWN_FILE).exists()
    m = env.manager()  # the disk is back: the failed dir is recovered, nothing acked is lost
    assert values(m.get_log("a", 0)) == [b"a0"]
    assert not m.had_clean_shutdown(a.parent_dir)
    m.shutdown()


def test_scheduler_runs_due_tasks_in_order_and_survives_failures(tmp_path):
    time = MockTime()
    s = Scheduler(time)
    ran = []
    s.schedule("periodic", lambda: ran.append(("p", time.milliseconds())), delay_ms=10, period_ms=10)
    s.schedule_once("boom", lambda: 1 / 0, delay_ms=5)
    once = s.schedule_once("once", lambda: ran.append(("o", time.milliseconds())), delay_ms=15)
    assert s.run_pending() == 0
    time.sleep(15)
    assert s.run_pending() == 3 and ran == [("p", time.milliseconds()), ("o", time.milliseconds())]
    time.sleep(30)
    s.run_pending()
    assert [r for r in ran if r[0] == "p"].__len__() == 4 and once.runs == 1
    cancelled = s.schedule_once("cancelled", lambda: ran.append("x"))
    cancelled.cancel()
    s.run_pending()
    assert "x" not in ran
    s.shutdown()
    s.schedule_once("late", lambda: ran.append("late"))
    assert s.run_pending() == 0
    real = KafkaScheduler(poll_ms=50)
    real.startup()
    import threading
    done = threading.Event()
    real.schedule_once("real", done.set, delay_ms=10)
    assert done.wait(5)
    real.shutdown()


def test_from_server_config_maps_broker_keys(tmp_path):
    from broker.server.config import server_config

    server = server_config({"log.dirs": f"{tmp_path / 'a'},{tmp_path / 'b'}", "node.id": "5",
                            "log.segment.bytes": "2048", "log.retention.hours": "2",
                            "log.retention.check.interval.ms": "1000"})
    m = LogManager.from_server_config(server, scheduler=Scheduler(MockTime()))
    m.startup()
    assert m.default_config.segment_bytes == 2048 and m.default_config.retention_ms == 7_200_000
    assert m.retention_check_interval_ms == 1000 and m.node_id == 5
    assert [d.name for d in m.live_log_dirs] == ["a", "b"]
    m.shutdown()


def test_concurrent_checkpoint_writes_keep_the_directory_online(tmp_path):
    """The periodic checkpoints and the one a topic deletion writes (from a request thread)
    share ``<file>.tmp``: written at once, one ``os.replace`` used to fail and the
    directory went offline (librdkafka 0045 deleting many topics hit it)."""
    import threading

    env = Env(tmp_path)
    m = env.manager()
    for p in range(8):
        m.get_or_create_log("t", p, topic_id=uuid.uuid4() if p == 0 else None)
    errors = []

    def writer():
        try:
            for _ in range(150):
                m.checkpoint_high_watermarks()
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and m.offline_log_dirs == []
    m.shutdown()
