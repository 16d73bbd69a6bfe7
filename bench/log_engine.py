"""Benchmark: the storage engine (``broker.log``) next to the plain file operations it wraps.

Owns: measuring, in one run on one file system,

1. leader append throughput (``UnifiedLog.append_as_leader``: validation with CRC, offset
   assignment in place, roll checks, sparse indexes, producer-state bookkeeping, high
   watermark) for 16-KiB and 1-MiB batches, against a plain sequential ``os.write`` of the
   same bytes, one call per batch, to a file in the same directory. Default flush policy
   (no fsync: page cache, as Kafka's default), default segment.bytes (1 GiB).
   Goal: at least 0.7 of the plain write.
2. offset lookup (``LogSegment.translate_offset``: sparse index binary search + a short
   forward scan of batch headers) against a linear scan of batch headers from the start of
   the segment, on a segment of 100k small batches; and ``UnifiedLog.read`` end to end.
3. unclean recovery throughput (``UnifiedLog.create`` with no clean-shutdown marker and
   recovery point 0: every batch re-validated, indexes, epochs and producer state rebuilt)
   in MB/s, against a plain pass that reads the same files in 1-MiB chunks and CRCs every
   batch. Goal: at least 0.5 of it. The same for a partition of legacy magic 1 message
   sets (plain messages and gzip wrappers, as Kafka 0.10 stored them), against a read that
   checks every outer message's CRC-32 (recovery also inflates each wrapper and checks its
   inner messages, which Kafka's does not).
4. peak Python memory (tracemalloc) while recovering a 32-MiB and a 256-MiB segment: it
   must not grow with the segment (reads are chunked), plus the process's peak RSS.

Workload: batches pre-built with ``encode_batch`` (uncompressed, no producer id, random
incompressible values, 16 distinct batches reused round-robin with their base offset reset
to 0, since offsets are assigned in place), records of 1 KiB (16-KiB batches) and 16 KiB
(1-MiB batches). Each throughput figure is the best of a few repetitions, the plain and
the log runs interleaved so both see the same machine state.

Prints a table, then as its very last line one JSON object with the headline figures.
Run: ``.venv/bin/python bench/log_engine.py`` (about a minute).
"""

from __future__ import annotations

import gc
import json
import os
import platform
import random
import resource
import shutil
import struct
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import crc32c  # noqa: E402

from broker.log.config import LogConfig  # noqa: E402
from broker.log.scheduler import Scheduler  # noqa: E402
from broker.log.unified_log import UnifiedLog  # noqa: E402
from broker.record.batch import encode_batch  # noqa: E402

REPEAT = 3
POOL = 16
APPEND_BYTES = {"16k": 160 << 20, "1m": 320 << 20}
BATCH_SHAPE = {"16k": (16, 1024 - 40), "1m": (64, 16384 - 40)}  # records per batch, value size
LOOKUP_BATCHES = 100_000
LOOKUPS_INDEXED = 2_000
LOOKUPS_LINEAR = 40
MEMORY_SEGMENTS_MB = (32, 256)
_LENGTH = struct.Struct(">qi")
_CRC = struct.Struct(">I")


def settle() -> None:
    """Start each timed run from the same state: no garbage, no dirty pages being written
    back (a previous run's writeback would otherwise throttle this one's writes)."""
    gc.collect()
    os.sync()


def make_pool(kind: str) -> list[bytearray]:
    count, size = BATCH_SHAPE[kind]
    now = int(time.time() * 1000)
    rng = random.Random(kind)
    return [bytearray(encode_batch([(b"key-%d-%d" % (i, j), rng.randbytes(size), now + j) for j in range(count)]))
            for i in range(POOL)]


def open_log(directory: Path, clean: bool = True, **props) -> UnifiedLog:
    return UnifiedLog.create(directory, LogConfig.from_props(props), scheduler=Scheduler(),
                             last_shutdown_clean=clean, recovery_point=0)


def run_log_append(directory: Path, pool: list[bytearray], n: int) -> tuple[float, UnifiedLog]:
    shutil.rmtree(directory, ignore_errors=True)
    ulog = open_log(directory)
    append = ulog.append_as_leader
    zero = bytes(8)
    settle()
    t = time.perf_counter()
    for i in range(n):
        batch = pool[i % POOL]
        batch[0:8] = zero  # a fresh produce request: base offset 0
        append(batch, 0)
    elapsed = time.perf_counter() - t
    return elapsed, ulog


def run_plain_write(path: Path, pool: list[bytearray], n: int) -> float:
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write = os.write
        settle()
        t = time.perf_counter()
        for i in range(n):
            batch = pool[i % POOL]
            written = write(fd, batch)
            if written != len(batch):
                raise OSError("short write")
        return time.perf_counter() - t
    finally:
        os.close(fd)


def bench_append(work: Path, kind: str) -> dict:
    pool = make_pool(kind)
    n = APPEND_BYTES[kind] // len(pool[0])
    total = sum(len(pool[i % POOL]) for i in range(n))
    log_times, plain_times = [], []
    ulog = None
    for _ in range(REPEAT):
        plain_times.append(run_plain_write(work / f"plain-{kind}.bin", pool, n))
        if ulog is not None:
            ulog.close()
        elapsed, ulog = run_log_append(work / f"append{kind}-0", pool, n)
        log_times.append(elapsed)
    (work / f"plain-{kind}.bin").unlink()
    assert ulog.log_end_offset == n * BATCH_SHAPE[kind][0]
    ulog.close()
    best_log, best_plain = min(log_times), min(plain_times)
    return {"kind": kind, "batches": n, "batch_bytes": len(pool[0]), "mb": total / 1e6,
            "log_mb_s": total / best_log / 1e6, "plain_mb_s": total / best_plain / 1e6,
            "us_per_append": best_log / n * 1e6, "us_per_write": best_plain / n * 1e6,
            "ratio": best_plain / best_log, "dir": work / f"append{kind}-0"}


def bench_lookup(work: Path) -> dict:
    directory = work / "lookup-0"
    ulog = open_log(directory)
    now = int(time.time() * 1000)
    batch = bytearray(encode_batch([(b"k", b"v" * 150, now)]))
    for _ in range(LOOKUP_BATCHES):
        batch[0:8] = bytes(8)
        ulog.append_as_leader(batch, 0)
    segment = ulog.active_segment
    rng = random.Random(7)
    targets = [rng.randrange(LOOKUP_BATCHES) for _ in range(LOOKUPS_INDEXED)]
    t = time.perf_counter()
    for target in targets:
        found = segment.translate_offset(target)
        assert found.offset == target
    indexed = (time.perf_counter() - t) / len(targets)
    t = time.perf_counter()
    for target in targets[:LOOKUPS_LINEAR]:
        found = segment.log.search_for_offset_with_size(target, 0)
        assert found.offset == target
    linear = (time.perf_counter() - t) / LOOKUPS_LINEAR
    t = time.perf_counter()
    for target in targets:
        info = ulog.read(target, 65536)
        assert info.records.size_in_bytes > 0
    read = (time.perf_counter() - t) / len(targets)
    result = {"segment_mb": segment.size / 1e6, "index_entries": segment.offset_index.entries,
              "us_index": indexed * 1e6, "us_linear": linear * 1e6, "us_read": read * 1e6}
    ulog.close()
    shutil.rmtree(directory)
    return result


def read_and_crc(directory: Path) -> tuple[int, int]:
    """The reference: read every .log in 1-MiB chunks (a batch larger than a chunk in one
    read of its own) and CRC-32C every batch; nothing else."""
    total = batches = 0
    chunk = 1 << 20
    unpack_length, unpack_crc, crc = _LENGTH.unpack_from, _CRC.unpack_from, crc32c.crc32c
    for path in sorted(directory.glob("*.log")):
        fd = os.open(path, os.O_RDONLY)
        try:
            file_size = os.fstat(fd).st_size
            pos = 0
            while file_size - pos >= 61:
                buf = os.pread(fd, min(chunk, file_size - pos), pos)
                mv = memoryview(buf)
                at, end = 0, len(buf)
                while end - at >= 61:
                    size = unpack_length(buf, at)[1] + 12
                    if size > end - at:
                        break
                    if crc(mv[at + 21:at + size]) != unpack_crc(buf, at + 17)[0]:
                        raise ValueError("bad crc")
                    at += size
                    batches += 1
                if at == 0:  # one batch larger than the chunk
                    size = unpack_length(buf, 0)[1] + 12
                    buf = os.pread(fd, size, pos)
                    if crc(memoryview(buf)[21:]) != unpack_crc(buf, 17)[0]:
                        raise ValueError("bad crc")
                    at = size
                    batches += 1
                pos += at
            total += pos
        finally:
            os.close(fd)
    return total, batches


def bench_recovery(directory: Path) -> dict:
    size = sum(p.stat().st_size for p in directory.glob("*.log"))
    ref_times, rec_times = [], []
    for _ in range(REPEAT):
        t = time.perf_counter()
        total, batches = read_and_crc(directory)
        ref_times.append(time.perf_counter() - t)
        assert total == size
        t = time.perf_counter()
        ulog = open_log(directory, clean=False)
        rec_times.append(time.perf_counter() - t)
        assert ulog.load_stats.recovered_segments and ulog.load_stats.truncated_bytes == 0
        ulog.close_handlers()
    return {"mb": size / 1e6, "batches": batches, "recovery_mb_s": size / min(rec_times) / 1e6,
            "read_crc_mb_s": size / min(ref_times) / 1e6, "ratio": min(ref_times) / min(rec_times)}


LEGACY_MB = 64


def make_legacy_dir(work: Path) -> Path:
    """A partition of LEGACY_MB MB of magic 1 message sets, as Kafka 0.10 stored them:
    alternately 16 plain 1-KiB messages and one gzip wrapper of 16 such messages
    (random values: the wrappers barely compress)."""
    from broker.record.codecs import CompressionType
    from broker.record.legacy import encode_legacy_message_set
    directory = work / "legacy-0"
    directory.mkdir()
    rng = random.Random("legacy")
    now = int(time.time() * 1000)
    parts, offset, size = [], 0, 0
    while size < LEGACY_MB << 20:
        records = [(b"key-%d" % (offset + j), rng.randbytes(1000), now + j) for j in range(16)]
        codec = CompressionType.GZIP if (offset // 16) % 2 else CompressionType.NONE
        part = encode_legacy_message_set(records, 1, codec, base_offset=offset)
        parts.append(part)
        size += len(part)
        offset += 16
    (directory / f"{0:020d}.log").write_bytes(b"".join(parts))
    return directory


def read_and_crc32_legacy(directory: Path) -> int:
    """The reference of legacy recovery: read in 1-MiB chunks and check every outer
    message's CRC-32 (what Kafka's recovery checks of a legacy entry)."""
    import zlib
    total = 0
    for path in sorted(directory.glob("*.log")):
        data = path.read_bytes()
        pos = 0
        while pos + 12 <= len(data):
            _, size = _LENGTH.unpack_from(data, pos)
            (crc,) = _CRC.unpack_from(data, pos + 12)
            if zlib.crc32(memoryview(data)[pos + 16:pos + 12 + size]) != crc:
                raise AssertionError("bad legacy CRC")
            pos += 12 + size
        total += pos
    return total


def bench_legacy_recovery(work: Path) -> dict:
    directory = make_legacy_dir(work)
    size = sum(p.stat().st_size for p in directory.glob("*.log"))
    ref_times, rec_times = [], []
    for _ in range(REPEAT):
        settle()
        t = time.perf_counter()
        assert read_and_crc32_legacy(directory) == size
        ref_times.append(time.perf_counter() - t)
        t = time.perf_counter()
        ulog = open_log(directory, clean=False)
        rec_times.append(time.perf_counter() - t)
        assert ulog.load_stats.recovered_segments and ulog.load_stats.truncated_bytes == 0
        ulog.close_handlers()
    shutil.rmtree(directory)
    return {"mb": size / 1e6, "recovery_mb_s": size / min(rec_times) / 1e6,
            "read_crc_mb_s": size / min(ref_times) / 1e6, "ratio": min(ref_times) / min(rec_times)}


def bench_memory(work: Path) -> list[dict]:
    pool = make_pool("1m")
    out = []
    for mb in MEMORY_SEGMENTS_MB:
        directory = work / f"memory{mb}-0"
        ulog = open_log(directory)
        for i in range((mb << 20) // len(pool[0])):
            batch = pool[i % POOL]
            batch[0:8] = bytes(8)
            ulog.append_as_leader(batch, 0)
        ulog.close_handlers()
        gc.collect()
        tracemalloc.start()
        ulog = open_log(directory, clean=False)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        ulog.close_handlers()
        out.append({"segment_mb": mb, "peak_mb": peak / 1e6})
        shutil.rmtree(directory)
    return out


def main() -> None:
    base = Path(os.environ.get("BENCH_DIR", tempfile.gettempdir()))
    work = Path(tempfile.mkdtemp(prefix="log-engine-bench-", dir=base))
    try:
        print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cpus; "
              f"files in {work}")
        appends = {kind: bench_append(work, kind) for kind in ("16k", "1m")}
        print(f"\nappend (best of {REPEAT})      batches  batch B   MB   log MB/s  plain MB/s  us/append  "
              "us/write  ratio")
        for r in appends.values():
            print(f"  {r['kind']:>4} batches         {r['batches']:>7} {r['batch_bytes']:>8} {r['mb']:>5.0f}"
                  f" {r['log_mb_s']:>9.0f} {r['plain_mb_s']:>11.0f} {r['us_per_append']:>10.1f}"
                  f" {r['us_per_write']:>9.1f} {r['ratio']:>6.2f}")
        recovery = {kind: bench_recovery(appends[kind]["dir"]) for kind in ("16k", "1m")}
        print("\nunclean recovery         MB     batches  recovery MB/s  read+CRC MB/s  ratio")
        for kind, r in recovery.items():
            print(f"  {kind:>4} batches      {r['mb']:>6.0f} {r['batches']:>10} {r['recovery_mb_s']:>14.0f}"
                  f" {r['read_crc_mb_s']:>14.0f} {r['ratio']:>6.2f}")
        legacy = bench_legacy_recovery(work)
        print(f"  legacy (magic 1, plain + gzip wrappers) {legacy['mb']:>5.0f} MB  recovery "
              f"{legacy['recovery_mb_s']:.0f} MB/s  read+CRC-32 {legacy['read_crc_mb_s']:.0f} MB/s  "
              f"ratio {legacy['ratio']:.2f}")
        for r in appends.values():
            shutil.rmtree(r["dir"])
        lookup = bench_lookup(work)
        print(f"\noffset lookup on a {lookup['segment_mb']:.0f}-MB segment of {LOOKUP_BATCHES} batches "
              f"({lookup['index_entries']} index entries):")
        print(f"  index + scan {lookup['us_index']:9.1f} us   linear scan {lookup['us_linear']:9.1f} us   "
              f"UnifiedLog.read (64 KiB) {lookup['us_read']:7.1f} us   "
              f"speedup {lookup['us_linear'] / lookup['us_index']:.0f}x")
        memory = bench_memory(work)
        print("\npeak Python memory during unclean recovery (tracemalloc):")
        for r in memory:
            print(f"  {r['segment_mb']:>4}-MiB segment: {r['peak_mb']:6.2f} MB")
        peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"  process peak RSS over the whole run: {peak_rss_mb:.0f} MB")
        headline = {
            "append_mb_s_16k": round(appends["16k"]["log_mb_s"], 1),
            "append_ratio_vs_plain_write_16k": round(appends["16k"]["ratio"], 3),
            "append_mb_s_1m": round(appends["1m"]["log_mb_s"], 1),
            "append_ratio_1m": round(appends["1m"]["ratio"], 3),
            "us_per_append_16k": round(appends["16k"]["us_per_append"], 1),
            "lookup_us_index": round(lookup["us_index"], 1),
            "lookup_us_linear_scan": round(lookup["us_linear"], 1),
            "recovery_mb_s": round(recovery["16k"]["recovery_mb_s"], 1),
            "recovery_ratio_vs_read_crc": round(recovery["16k"]["ratio"], 3),
            "recovery_mb_s_1m": round(recovery["1m"]["recovery_mb_s"], 1),
            "recovery_ratio_1m": round(recovery["1m"]["ratio"], 3),
            "recovery_mb_s_legacy": round(legacy["recovery_mb_s"], 1),
            "recovery_ratio_legacy_vs_read_crc32": round(legacy["ratio"], 3),
            "peak_tracemalloc_mb_recovery_32mib": round(memory[0]["peak_mb"], 2),
            "peak_tracemalloc_mb_recovery_256mib": round(memory[1]["peak_mb"], 2),
            "peak_rss_mb_process": round(peak_rss_mb, 1),
        }
        print(json.dumps(headline))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
