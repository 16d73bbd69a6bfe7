"""Tiered storage at the log level (broker/log/remote, retention.py, the loader's log start
offset): a real ``UnifiedLog`` on disk, the ``FileSystemRemoteStorageManager`` over a
local directory (pyarrow's LocalFileSystem), the ``RemoteLogManager`` run pass by pass.
The broker-level proofs (real clients, SIGKILL crash points) are in
tests/test_tiered_storage_broker.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from broker.config import ConfigError
from broker.log.clock import MockTime
from broker.log.config import LogConfig, validate_topic_config
from broker.log.errors import LogOffsetOutOfRangeError
from broker.log.list_offsets import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    MAX_TIMESTAMP,
)
from broker.log.remote.errors import OffsetMovedToTieredStorageError
from broker.log.remote.log_manager import RemoteLogManager
from broker.log.remote.metadata import RemoteLogSegmentMetadata
from broker.log.remote.storage_manager import FileSystemRemoteStorageManager
from broker.log.scheduler import Scheduler
from broker.log.unified_log import UnifiedLog
from broker.log.validator import AppendOrigin
from broker.record.batch import decode_batch, encode_batch, iter_batch_headers
from broker.record.control import ControlRecordType, encode_end_txn_marker_batch

BASE_TS = 1_700_000_000_000


class Env:
    def __init__(self, tmp_path: Path, **props) -> None:
        self.time = MockTime()
        self.scheduler = Scheduler(self.time)
        self.dir = tmp_path / "logs" / "tiered-0"
        self.remote = tmp_path / "remote"
        defaults = {"segment.bytes": 600, "remote.storage.enable": True, "local.retention.bytes": 1,
                    "retention.ms": -1}
        defaults.update({k.replace("_", "."): v for k, v in props.items()})
        self.config = LogConfig.from_props(defaults)
        self.rsm = FileSystemRemoteStorageManager(str(self.remote))
        self.log: UnifiedLog | None = None
        self.rlm: RemoteLogManager | None = None

    def open(self, log_start_offset: int = 0, topic_id=None) -> UnifiedLog:
        self.log = UnifiedLog.create(self.dir, self.config, time=self.time, scheduler=self.scheduler,
                                     log_start_offset=log_start_offset, remote_storage_system_enable=True,
                                     topic_id=topic_id)
        self.rlm = RemoteLogManager(FileSystemRemoteStorageManager(str(self.remote)), lambda: [self.log],
                                    time=self.time)
        self.rlm.startup()
        return self.log

    def produce(self, n: int) -> None:
        for _i in range(n):
            offset = self.log.log_end_offset
            self.log.append_as_leader(encode_batch([(None, f"v{offset}".encode(), BASE_TS + offset)]))


def read_all(env: Env, start: int = 0) -> list[tuple[int, bytes]]:
    """Every record from ``start``, remote then local, as a Fetch handler would read."""
    out, offset, lg = [], start, env.log
    while offset < lg.high_watermark:
        try:
            data = lg.read(offset, 1000, "high_watermark").records.read_bytes()
        except OffsetMovedToTieredStorageError:
            data = env.rlm.read(lg, offset, 1000).records
        assert data, f"no data at {offset}"
        for pos, _ in iter_batch_headers(data):
            _, records = decode_batch(data, pos)
            out += [(r.offset, r.value) for r in records if r.offset >= offset]
        offset = out[-1][0] + 1
    return out


def test_tiering_copies_deletes_locally_and_serves_every_offset(tmp_path):
    env = Env(tmp_path)
    lg = env.open()
    env.produce(60)
    assert lg.num_segments > 4
    stats = env.rlm.run_once()
    assert stats["copied"] == len(env.rlm.remote_segments("tiered", 0)) > 3
    segments = env.rlm.remote_segments("tiered", 0)
    assert [m.base_offset for m in segments][0] == 0
    assert all(a.end_offset + 1 == b.base_offset for a, b in zip(segments, segments[1:]))
    # local retention: every copied segment is gone locally; the log start offset stays 0
    assert lg.log_start_offset == 0
    assert lg.local_log_start_offset == segments[-1].end_offset + 1 == lg.segments[0].base_offset
    with pytest.raises(OffsetMovedToTieredStorageError):
        lg.read(0, 1000)
    # the layout: Kafka's file names plus the manifest, under <topic>-<partition>/
    names = sorted(p.name for p in (env.remote / "tiered-0").iterdir())
    for m in segments:
        base = f"{m.base_offset:020d}"
        assert {base + ".log", base + ".index", base + ".timeindex", base + ".remote-segment.json",
                base + ".leader-epoch-checkpoint"} <= set(names)
        manifest = json.loads((env.remote / "tiered-0" / (base + ".remote-segment.json")).read_text())
        assert manifest["state"] == "COPY_SEGMENT_FINISHED" and manifest["base_offset"] == m.base_offset
        assert (env.remote / "tiered-0" / (base + ".log")).stat().st_size == manifest["segment_size_in_bytes"]
    assert not [n for n in names if ".tmp-" in n]
    assert read_all(env) == [(o, f"v{o}".encode()) for o in range(60)]
    assert read_all(env, 17)[0] == (17, b"v17")
    # ListOffsets
    assert lg.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP).offset == 0
    assert lg.fetch_offset_by_timestamp(EARLIEST_LOCAL_TIMESTAMP).offset == lg.local_log_start_offset
    assert lg.fetch_offset_by_timestamp(LATEST_TIERED_TIMESTAMP).offset == segments[-1].end_offset
    found = lg.fetch_offset_by_timestamp(BASE_TS + 5)
    assert (found.offset, found.timestamp) == (5, BASE_TS + 5)
    found = lg.fetch_offset_by_timestamp(BASE_TS + 59)
    assert found.offset == 59


def test_max_timestamp_is_searched_in_the_remote_segments_too(tmp_path):
    """ListOffsets -3 (KIP-734) over a tiered log: the first record with the largest
    timestamp, wherever it lives (its remote segment found by the manifests' max timestamp)."""
    env = Env(tmp_path)
    lg = env.open()

    def append(ts: int) -> int:
        offset = lg.log_end_offset
        lg.append_as_leader(encode_batch([(None, f"v{offset}".encode(), ts)]))
        return offset

    for _ in range(7):
        append(BASE_TS + lg.log_end_offset)
    newest = append(BASE_TS + 10_000)  # the largest timestamp, early in the log
    for _ in range(40):
        append(BASE_TS + lg.log_end_offset)
    env.rlm.run_once()
    segments = env.rlm.remote_segments("tiered", 0)
    assert segments[0].end_offset < lg.local_log_start_offset  # offset 7's segment is local no more
    assert newest <= segments[-1].end_offset and newest < lg.local_log_start_offset
    found = lg.fetch_offset_by_timestamp(MAX_TIMESTAMP)
    assert (found.offset, found.timestamp) == (newest, BASE_TS + 10_000)
    assert found.leader_epoch == 0
    # a later record with the same timestamp does not win (the first one does), also after
    # a restart (the remote metadata rebuilt from the manifests)
    tie = append(BASE_TS + 10_000)
    assert lg.fetch_offset_by_timestamp(MAX_TIMESTAMP).offset == newest
    lg.close()
    env.rlm.close()
    lg = env.open()
    assert lg.fetch_offset_by_timestamp(MAX_TIMESTAMP)[:2] == (newest, BASE_TS + 10_000)
    # DeleteRecords past the remote record: the local one with the same timestamp answers
    lg.maybe_increment_log_start_offset(newest + 1)
    assert lg.fetch_offset_by_timestamp(MAX_TIMESTAMP)[:2] == (tie, BASE_TS + 10_000)
    # a larger timestamp, locally, wins
    newer = append(BASE_TS + 20_000)
    assert lg.fetch_offset_by_timestamp(MAX_TIMESTAMP)[:2] == (newer, BASE_TS + 20_000)


def test_copy_only_below_the_high_watermark_and_never_the_active_segment(tmp_path):
    env = Env(tmp_path)
    lg = env.open()
    env.produce(3)
    assert env.rlm.run_once()["copied"] == 0  # one segment, the active one
    env.produce(40)
    env.rlm.run_once()
    assert lg.highest_offset_in_remote_storage < lg.segments[-1].base_offset
    assert lg.segments[-1] is lg.active_segment


def test_restart_rebuilds_the_metadata_from_the_manifests(tmp_path):
    env = Env(tmp_path)
    lg = env.open()
    env.produce(50)
    env.rlm.run_once()
    local_start = lg.local_log_start_offset
    assert local_start > 0
    lg.close()
    lg = env.open(log_start_offset=0)  # the checkpointed start, below the first local segment
    assert lg.log_start_offset == 0 and lg.local_log_start_offset == local_start
    assert lg.highest_offset_in_remote_storage == local_start - 1
    assert read_all(env) == [(o, f"v{o}".encode()) for o in range(50)]


def test_a_local_log_still_clamps_its_start_to_the_first_segment(tmp_path):
    env = Env(tmp_path, remote_storage_enable=False, local_retention_bytes=-2, retention_bytes=700)
    lg = env.open()
    env.produce(40)
    lg.delete_old_segments()
    first = lg.segments[0].base_offset
    assert lg.log_start_offset == first > 0
    lg.close()
    lg = env.open(log_start_offset=0)
    assert lg.log_start_offset == first


def test_garbage_of_a_crashed_copy_is_swept_and_the_copy_redone(tmp_path):
    env = Env(tmp_path, local_retention_bytes=-1)  # keep local copies
    lg = env.open()
    env.produce(30)
    env.rlm.run_once()
    segments = env.rlm.remote_segments("tiered", 0)
    victim = segments[-1]
    manifest = env.remote / "tiered-0" / f"{victim.base_offset:020d}.remote-segment.json"
    manifest.unlink()  # as if the copy died before its manifest
    stray = env.remote / "tiered-0" / "00000000000000099999.log.tmp-deadbeef"
    stray.write_bytes(b"partial")
    lg.close()
    lg = env.open()
    assert lg.highest_offset_in_remote_storage == victim.base_offset - 1
    assert not stray.exists() and not (env.remote / "tiered-0" / victim.log_object).exists()
    env.rlm.run_once()  # copied again: same names, same bytes
    again = env.rlm.remote_segments("tiered", 0)
    assert [(m.base_offset, m.end_offset, m.segment_size_in_bytes) for m in again] == \
        [(m.base_offset, m.end_offset, m.segment_size_in_bytes) for m in segments]
    assert (env.remote / "tiered-0" / victim.log_object).read_bytes() == \
        (env.dir / victim.log_object).read_bytes()


def test_a_deletion_cut_after_its_manifest_leaves_only_garbage(tmp_path):
    env = Env(tmp_path)
    lg = env.open()
    env.produce(30)
    env.rlm.run_once()
    first = env.rlm.remote_segments("tiered", 0)[0]
    (env.remote / "tiered-0" / f"{first.base_offset:020d}.remote-segment.json").unlink()
    lg.close()
    lg = env.open(log_start_offset=0)  # a stale checkpoint: the first segment is gone
    assert lg.log_start_offset == first.end_offset + 1
    assert not (env.remote / "tiered-0" / first.log_object).exists()
    with pytest.raises(LogOffsetOutOfRangeError):
        lg.read(0, 1000)


def test_remote_retention_advances_the_log_start_offset(tmp_path):
    env = Env(tmp_path, retention_bytes=1200, local_retention_bytes=600)
    lg = env.open()
    env.produce(60)
    stats = env.rlm.run_once()
    assert stats["deleted_remote"] > 0
    segments = env.rlm.remote_segments("tiered", 0)
    assert lg.log_start_offset == segments[0].base_offset > 0
    total = sum(m.segment_size_in_bytes for m in segments) + sum(
        s.size for s in lg.segments if s.base_offset > lg.highest_offset_in_remote_storage)
    assert total - segments[0].segment_size_in_bytes < 1200
    manifests = sorted((env.remote / "tiered-0").glob("*.remote-segment.json"))
    assert [int(p.name[:20]) for p in manifests] == [m.base_offset for m in segments]
    assert not (env.remote / "tiered-0" / f"{0:020d}.log").exists()
    with pytest.raises(LogOffsetOutOfRangeError):
        lg.read(0, 1000)
    assert read_all(env, lg.log_start_offset)[0][0] == lg.log_start_offset


def test_remote_retention_by_time(tmp_path):
    env = Env(tmp_path, retention_ms=1000, local_retention_ms=1000)
    lg = env.open()
    env.produce(40)
    env.rlm.run_once(now_ms=BASE_TS + 20 + 1000 + 1)  # offsets 0..19 are older than retention.ms
    segments = env.rlm.remote_segments("tiered", 0)
    assert all(m.max_timestamp_ms >= BASE_TS + 20 for m in segments)
    assert lg.log_start_offset > 0


def test_delete_records_below_remote_segments_deletes_them(tmp_path):
    env = Env(tmp_path)
    lg = env.open()
    env.produce(40)
    env.rlm.run_once()
    segments = env.rlm.remote_segments("tiered", 0)
    lg.maybe_increment_log_start_offset(segments[1].base_offset + 1)
    env.rlm.run_once()
    assert env.rlm.remote_segments("tiered", 0)[0].base_offset == segments[1].base_offset
    assert lg.log_start_offset == segments[1].base_offset + 1


def test_local_retention_never_deletes_an_uncopied_segment(tmp_path):
    env = Env(tmp_path)
    lg = env.open()
    env.produce(40)
    assert lg.delete_old_segments() == 0  # nothing copied yet: local.retention.bytes=1 waits
    n = lg.num_segments
    env.rlm.copy_segments(lg)
    assert lg.delete_old_segments() == n - 1


def test_partition_deletion_removes_the_remote_segments(tmp_path):
    env = Env(tmp_path)
    env.open()
    env.produce(30)
    env.rlm.run_once()
    assert any((env.remote / "tiered-0").iterdir())
    env.rlm.on_partition_deleted("tiered", 0)
    assert not (env.remote / "tiered-0").exists() or not any((env.remote / "tiered-0").iterdir())


def test_manifest_round_trip_and_bad_manifest():
    meta = RemoteLogSegmentMetadata("t", 3, "ab", 10, 19, BASE_TS, 999, {0: 10, 2: 15},
                                    ("00000000000000000010.log",), topic_id="x")
    assert RemoteLogSegmentMetadata.from_json(meta.to_json()) == meta
    assert meta.epoch_for_offset(14) == 0 and meta.epoch_for_offset(15) == 2
    with pytest.raises(ValueError, match="manifest"):
        RemoteLogSegmentMetadata.from_json(b'{"topic": "t"}')


def test_topic_config_validation():
    with pytest.raises(ConfigError, match="compacted"):
        cfg = LogConfig.from_props({"remote.storage.enable": True, "cleanup.policy": ["compact"]})
        validate_topic_config(cfg, {"remote.storage.enable", "cleanup.policy"})
    with pytest.raises(ConfigError, match="retention.ms"):
        cfg = LogConfig.from_props({"remote.storage.enable": True, "retention.ms": 1000,
                                    "local.retention.ms": 2000})
        validate_topic_config(cfg, {"remote.storage.enable", "local.retention.ms"})
    cfg = LogConfig.from_props({"remote.storage.enable": True, "retention.bytes": 1000})
    assert cfg.local_retention_bytes == 1000 and cfg.local_retention_ms == cfg.retention_ms
    validate_topic_config(cfg)


def test_kip_950_config_rules_with_kafkas_messages():
    tiered = LogConfig.from_props({"remote.storage.enable": True, "local.retention.bytes": 100,
                                   "retention.bytes": 1000})
    # remote.log.copy.disable=true: local retention -2 or equal to retention
    copy_off = {"remote.storage.enable": True, "remote.log.copy.disable": True}
    with pytest.raises(ConfigError) as err:
        validate_topic_config(LogConfig.from_props({**copy_off, "local.retention.bytes": 100, "retention.bytes": 1000}))
    assert str(err.value) == (
        "When `remote.log.copy.disable` is set to true, the `local.retention.bytes` and `retention.bytes` must "
        "be set to the identical value because there will be no more logs copied to the remote storage.")
    with pytest.raises(ConfigError, match="the `local.retention.ms` and `retention.ms` must be set to the identical"):
        validate_topic_config(LogConfig.from_props({**copy_off, "local.retention.ms": 100, "retention.ms": 1000}))
    validate_topic_config(LogConfig.from_props({**copy_off, "local.retention.bytes": 1000, "retention.bytes": 1000}))
    validate_topic_config(LogConfig.from_props(copy_off), current=tiered)
    # remote.storage.enable true -> false needs remote.log.delete.on.disable=true
    off = LogConfig.from_props({"remote.storage.enable": False})
    with pytest.raises(ConfigError) as err:
        validate_topic_config(off, current=tiered)
    assert str(err.value) == (
        "It is invalid to disable remote storage without deleting remote data. If you want to keep the remote "
        "data and turn to read only, please set `remote.storage.enable=true,remote.log.copy.disable=true`. If you "
        "want to disable remote storage and delete all remote data, please set "
        "`remote.storage.enable=false,remote.log.delete.on.disable=true`.")
    validate_topic_config(off)  # a new topic, or one that was not tiered
    validate_topic_config(off, current=LogConfig.from_props({}))
    validate_topic_config(LogConfig.from_props({"remote.storage.enable": False, "remote.log.delete.on.disable": True}),
                          current=tiered)


def test_copy_disabled_keeps_the_remote_segments_readable_and_local_retention_leaves_no_hole(tmp_path):
    """remote.log.copy.disable=true (KIP-950): no more copies; the remote segments stay
    readable and under retention; local segments go by retention.bytes, the uncopied ones
    only once no remote offset is left below them (then the log start offset moves)."""
    env = Env(tmp_path)
    lg = env.open()
    env.produce(40)
    env.rlm.run_once()
    highest = lg.highest_offset_in_remote_storage
    remote_count = len(env.rlm.remote_segments("tiered", 0))
    assert highest > 0 and lg.local_log_start_offset == highest + 1

    def reconfigure(**props) -> None:
        values = {"segment.bytes": 600, "remote.storage.enable": True, "remote.log.copy.disable": True,
                  "retention.ms": -1, **{k.replace("_", "."): v for k, v in props.items()}}
        lg.update_config(LogConfig.from_props(values))

    reconfigure(retention_bytes=-1)
    env.produce(40)
    assert env.rlm.run_once() == {"copied": 0, "deleted_local": 0, "deleted_remote": 0}
    assert lg.highest_offset_in_remote_storage == highest
    assert lg.fetch_offset_by_timestamp(LATEST_TIERED_TIMESTAMP).offset == highest
    assert read_all(env) == [(o, f"v{o}".encode()) for o in range(80)]
    # retention.bytes: the remote segments (the oldest) go first, the log start moves to the
    # local log start; only then do uncopied local segments go, moving it further
    reconfigure(retention_bytes=1200)
    first = env.rlm.run_once()
    assert first["deleted_local"] == 0 and first["deleted_remote"] == remote_count
    assert env.rlm.remote_segments("tiered", 0) == ()
    assert lg.log_start_offset == lg.local_log_start_offset == highest + 1
    assert read_all(env, lg.log_start_offset)[0] == (highest + 1, f"v{highest + 1}".encode())
    assert env.rlm.run_once()["deleted_local"] > 0
    assert lg.log_start_offset == lg.local_log_start_offset > highest + 1
    assert lg.size - lg.segments[0].size < 1200
    start = lg.log_start_offset
    assert read_all(env, start) == [(o, f"v{o}".encode()) for o in range(start, 80)]
    # copies resume when the key is cleared: from the local log start on
    reconfigure(remote_log_copy_disable=False, retention_bytes=-1)
    assert env.rlm.run_once()["copied"] > 0
    assert env.rlm.remote_segments("tiered", 0)[0].base_offset == start


def test_turning_remote_storage_off_deletes_the_remote_segments(tmp_path):
    """remote.storage.enable true -> false with remote.log.delete.on.disable=true: the log
    start offset moves to the local log start, the remote segments go; a deletion cut short
    (a crash) is completed at the next startup."""
    env = Env(tmp_path)
    lg = env.open()
    env.produce(40)
    env.rlm.run_once()
    local_start = lg.local_log_start_offset
    assert local_start > 0 and lg.log_start_offset == 0
    off = LogConfig.from_props({"segment.bytes": 600, "remote.storage.enable": False,
                                "remote.log.delete.on.disable": True})
    lg.update_config(off)
    assert not lg.remote_log_enabled
    env.rlm.on_remote_storage_disabled(lg)
    assert lg.log_start_offset == local_start and lg.highest_offset_in_remote_storage == -1
    assert env.rlm.remote_segments("tiered", 0) == ()
    assert not (env.remote / "tiered-0").exists() or not any((env.remote / "tiered-0").iterdir())
    assert lg.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP).offset == local_start
    assert lg.fetch_offset_by_timestamp(LATEST_TIERED_TIMESTAMP).offset == -1
    assert read_all(env, local_start)[0][0] == local_start
    # a crash between the config change and the deletion: the next startup deletes them
    lg.close()
    env2 = Env(tmp_path / "again")
    lg2 = env2.open()
    env2.produce(40)
    env2.rlm.run_once()
    assert any((env2.remote / "tiered-0").iterdir())
    lg2.update_config(off)  # ... and the broker dies here
    lg2.close()
    env2.config = off
    env2.open()
    assert not (env2.remote / "tiered-0").exists() or not any((env2.remote / "tiered-0").iterdir())



def test_turning_remote_storage_off_deletes_in_the_background_and_retries(tmp_path, monkeypatch):
    """KIP-950 as Kafka does it: the log start offset moves and the remote segments stop
    being served at once, their deletion runs later on the manager's scheduler; a failed
    deletion is retried by the next pass, and turning remote storage back on first
    finishes it (the old segments are never adopted again)."""
    env = Env(tmp_path)
    lg = env.open()
    env.produce(40)
    env.rlm.run_once()
    rlm = env.rlm
    rlm.startup(env.scheduler)  # deletions now run as scheduler tasks (run_pending)
    local_start = lg.local_log_start_offset
    off = LogConfig.from_props({"segment.bytes": 600, "remote.storage.enable": False,
                                "remote.log.delete.on.disable": True})
    lg.update_config(off)
    rlm.on_remote_storage_disabled(lg)
    assert lg.log_start_offset == local_start and rlm.remote_segments("tiered", 0) == ()
    assert rlm.pending_deletions() == [("tiered", 0)]
    assert list((env.remote / "tiered-0").glob("*.remote-segment.json"))  # not deleted yet
    assert read_all(env, local_start)[0][0] == local_start

    def unreachable(topic, partition):
        raise OSError("the store is unreachable")

    monkeypatch.setattr(rlm.rsm, "delete_partition", unreachable)
    env.scheduler.run_pending()
    assert rlm.pending_deletions() == [("tiered", 0)]
    # turned back on while the deletion fails: nothing old is adopted
    on = LogConfig.from_props({"segment.bytes": 600, "remote.storage.enable": True, "local.retention.bytes": 1,
                               "retention.ms": -1})
    lg.update_config(on)
    rlm.run_once()
    assert rlm.remote_segments("tiered", 0) == () and lg.log_start_offset == local_start
    monkeypatch.undo()
    env.produce(20)
    rlm.run_once()
    assert rlm.pending_deletions() == []
    segments = rlm.remote_segments("tiered", 0)
    assert segments and segments[0].base_offset >= local_start  # copies of the local log only
    assert lg.log_start_offset == local_start
    assert [o for o, _ in read_all(env, local_start)] == list(range(local_start, lg.high_watermark))
    lg.close()

def test_read_committed_from_remote_gets_the_aborted_transactions(tmp_path):
    env = Env(tmp_path)
    lg = env.open()
    env.produce(5)
    first = lg.log_end_offset
    lg.append_as_leader(encode_batch([(None, b"aborted-1", BASE_TS), (None, b"aborted-2", BASE_TS)],
                                     producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True))
    env.produce(20)  # several segments while the transaction is open
    env.rlm.run_once()
    assert lg.highest_offset_in_remote_storage < first  # never copied past the last stable offset
    lg.append_as_leader(encode_end_txn_marker_batch(ControlRecordType.ABORT, producer_id=7, producer_epoch=0,
                                                    coordinator_epoch=0, timestamp=BASE_TS),
                        origin=AppendOrigin.COORDINATOR)
    env.produce(20)
    env.rlm.run_once()
    assert lg.highest_offset_in_remote_storage > first and lg.local_log_start_offset > first + 22
    result = env.rlm.read(lg, first, 1000, read_committed=True)
    assert result.aborted_transactions == [(7, first)]
    assert env.rlm.read(lg, 0, 1000).aborted_transactions is None
    assert env.rlm.read(lg, first + 2, 1000, read_committed=True).aborted_transactions == [(7, first)]


def test_remote_reads_respect_max_bytes_and_return_whole_batches(tmp_path):
    env = Env(tmp_path)
    lg = env.open()
    env.produce(40)
    env.rlm.run_once()
    one = env.rlm.read(lg, 3, 1).records  # min one message: the first batch whole
    assert [h.base_offset for _, h in iter_batch_headers(one)] == [3]
    assert env.rlm.read(lg, 3, 1, min_one_message=False).records == b""
    two = env.rlm.read(lg, 3, 2 * len(one)).records
    assert [h.base_offset for _, h in iter_batch_headers(two)] == [3, 4]
    with pytest.raises(LogOffsetOutOfRangeError):
        env.rlm.read(lg, lg.local_log_start_offset, 1000)  # not remote: served locally


def test_producer_snapshots_of_uncopied_segments_are_kept_for_the_copy(tmp_path):
    env = Env(tmp_path)
    lg = env.open()
    env.produce(40)
    lg.flush()
    lg.delete_snapshots_after_recovery_point_checkpoint()  # the log manager's checkpoint task
    env.rlm.run_once()
    segments = env.rlm.remote_segments("tiered", 0)
    assert len(segments) > 3
    for meta in segments:
        snapshot = f"{meta.end_offset + 1:020d}.snapshot"
        assert snapshot in meta.objects and (env.remote / "tiered-0" / snapshot).is_file()


class FailingOnce(FileSystemRemoteStorageManager):
    """Fault injection: the first write of a ``.timeindex`` object fails (a store error
    in the middle of a copy, after the ``.log`` and ``.index`` objects were written)."""

    failed = False

    def _put(self, path, source):
        if path.endswith(".timeindex") and not FailingOnce.failed:
            FailingOnce.failed = True
            raise OSError("injected store error")
        super()._put(path, source)


def test_a_failed_copy_is_swept_and_redone_by_the_next_pass(tmp_path):
    env = Env(tmp_path)
    lg = env.open()
    env.rlm.rsm = env.rlm.reader.rsm = FailingOnce(str(env.remote))
    env.produce(30)
    assert env.rlm.run_once()["copied"] == 0  # the first copy failed half way
    assert (env.remote / "tiered-0" / f"{0:020d}.log").is_file()
    assert not list((env.remote / "tiered-0").glob("*.remote-segment.json"))
    assert lg.delete_old_segments() == 0  # nothing deleted locally without a manifest
    assert env.rlm.run_once()["copied"] > 0  # swept, then copied again
    assert read_all(env) == [(o, f"v{o}".encode()) for o in range(30)]


def test_the_tiered_prefix_reads_like_a_log_directory(tmp_path):
    """The direct-mode reader (``broker.log.reader``, what Spark's direct mode uses) reads the
    remote prefix as it reads a log directory: same offsets, same records, timestamp lookups."""
    from broker.log.reader import LogDirReader
    env = Env(tmp_path)
    lg = env.open()
    env.produce(60)
    env.rlm.run_once()
    partition = LogDirReader(env.remote).partition("tiered", 0)
    assert (partition.log_start_offset, partition.log_end_offset) == (0, lg.local_log_start_offset)
    assert partition.offset_for_timestamp(BASE_TS + 7) == 7
    records = []
    for r in partition.segment_ranges(0, partition.log_end_offset):
        data = Path(r.path).read_bytes()[r.start_position:r.end_position]
        for pos, _ in iter_batch_headers(data):
            records += [(rec.offset, rec.value) for rec in decode_batch(data, pos)[1]]
    assert records == [(o, f"v{o}".encode()) for o in range(lg.local_log_start_offset)]


def test_manifests_of_another_topic_id_are_never_served_and_are_swept(tmp_path):
    """A topic deleted and re-created with the same name, the deletion of the old remote
    segments cut short: the new incarnation (another topic id) never serves them, and its
    remote log manager deletes them (manifests first), keeping its own objects."""
    import shutil
    import uuid

    from broker.log import files
    old_id, new_id = uuid.uuid4(), uuid.uuid4()
    env = Env(tmp_path)
    lg = env.open(topic_id=old_id)
    env.produce(40)
    env.rlm.run_once()
    old_segments = env.rlm.remote_segments("tiered", 0)
    assert len(old_segments) > 2 and {m.topic_id for m in old_segments} == {files.encode_topic_id(old_id)}
    lg.close()
    env.rlm.close()
    shutil.rmtree(env.dir)  # the local log is gone, its remote segments are not
    lg = env.open(topic_id=new_id)
    assert env.rlm.remote_segments("tiered", 0) == ()
    prefix = env.remote / "tiered-0"
    assert not list(prefix.glob("*.remote-segment.json")) and not list(prefix.glob("*.log"))
    for offset in range(12):
        lg.append_as_leader(encode_batch([(None, f"new{offset}".encode(), BASE_TS + offset)]))
    assert lg.fetch_offset_by_timestamp(LATEST_TIERED_TIMESTAMP).offset == -1
    env.rlm.run_once()
    live = env.rlm.remote_segments("tiered", 0)
    assert live and {m.topic_id for m in live} == {files.encode_topic_id(new_id)}
    assert read_all(env) == [(o, f"new{o}".encode()) for o in range(12)]
    # a foreign manifest (written by hand, as a deletion cut short would leave it) that
    # shares an object name with a live segment: swept at the next start, the shared
    # object kept
    foreign = RemoteLogSegmentMetadata("tiered", 0, "f00d", 1000, 1009, BASE_TS, 10, {0: 1000},
                                       ("00000000000000001000.log", live[0].log_object),
                                       topic_id=files.encode_topic_id(old_id))
    (prefix / "00000000000000001000.log").write_bytes(b"old incarnation")
    (prefix / "00000000000000001000.remote-segment.json").write_bytes(foreign.to_json())
    lg.close()
    env.rlm.close()
    lg = env.open(topic_id=new_id)
    assert env.rlm.remote_segments("tiered", 0) == live
    assert not (prefix / "00000000000000001000.remote-segment.json").exists()
    assert not (prefix / "00000000000000001000.log").exists()
    assert (prefix / live[0].log_object).is_file()
    assert read_all(env) == [(o, f"new{o}".encode()) for o in range(12)]


def test_earliest_local_is_answered_when_every_offset_is_remote(tmp_path):
    """ListOffsets -4 when every segment is tiered and the local log is one empty active
    segment: the local log start offset equals the high watermark and is still the answer
    (the handler treats -4 as -2, not as a timestamp hidden by the visibility check)."""
    from broker.server.handlers.list_offsets import _lookup
    env = Env(tmp_path, local_retention_ms=1)
    lg = env.open()
    env.produce(30)
    lg.roll()
    env.rlm.run_once(now_ms=BASE_TS + 60_000)  # every copied segment past local.retention.ms
    assert lg.local_log_start_offset == lg.high_watermark == 30 == lg.highest_offset_in_remote_storage + 1
    assert _lookup(lg, EARLIEST_LOCAL_TIMESTAMP, False) == (30, -1, 0)
    assert _lookup(lg, EARLIEST_LOCAL_TIMESTAMP, True) == (30, -1, 0)
    assert _lookup(lg, EARLIEST_TIMESTAMP, False) == (0, -1, 0)
    assert _lookup(lg, LATEST_TIERED_TIMESTAMP, False) == (29, -1, 0)
    assert _lookup(lg, MAX_TIMESTAMP, False) == (29, BASE_TS + 29, 0)
