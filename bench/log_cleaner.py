"""Benchmark: the log cleaner (``broker.log.cleaner``) against a plain read and rewrite of
the same bytes.

Owns: measuring, in one run on one file system, the cleaning throughput (MB/s of dirty log
cleaned: the bytes of the inactive segments divided by the wall time of one
``LogCleaner.do_one_cleaning``: offset map pass, copy pass, the ``.cleaned`` segment's
indexes and fsync, the swap) of a fully dirty log of 10% and 90% duplicate keys (10%: nine
keys in ten appear once; 90%: each key appears ten times), against the reference: the same
segment files read in 1-MiB chunks, their batch headers walked (``iter_batch_headers``),
every batch written to a new file, then fsynced. That is the least any copying cleaner
does; ours must also decode every record twice (keys in pass 1, keys and values in pass
2), look every key up, and rebuild the batches that lose records.
Goal: at least 0.5 of the reference.

Workload: ``RECORDS`` records of a 16-byte key and a ``VALUE_BYTES`` random value,
``PER_BATCH`` records a batch, uncompressed, no producer id, in segments of
``SEGMENT_BYTES``; keys drawn so that the given fraction of records is superseded by a
later record of the same key, in random order. Each run cleans a fresh copy of the log
(copied outside the timing, so both sides read from the page cache), after one untimed
warm-up cleaning (the first cleaning of a process imports numpy and pyarrow, ~0.2 s); the
reference and the cleaning alternate, ``REPEAT`` runs each; the table gives the median
and the range.

Prints a table, then as its very last line one JSON object with the headline figures.
Run: ``.venv/bin/python bench/log_cleaner.py`` (about a minute); ``--quick`` for a
smaller log, ``--profile`` to print a cProfile of one cleaning of each workload (sorted by
PROFILE_SORT, cumulative by default, PROFILE_LINES lines, 25).
"""

from __future__ import annotations

import cProfile
import json
import os
import platform
import pstats
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from broker.log.cleaner.manager import CleanerConfig, LogCleaner  # noqa: E402
from broker.log.config import LogConfig  # noqa: E402
from broker.log.unified_log import UnifiedLog  # noqa: E402
from broker.record.batch import encode_batch, iter_batch_headers  # noqa: E402

REPEAT = 5
RECORDS = 400_000
VALUE_BYTES = 200
PER_BATCH = 50
SEGMENT_BYTES = 16 << 20
DUPLICATES = (0.1, 0.9)
TP = ("bench", 0)


def log_config() -> LogConfig:
    return LogConfig.from_props({"cleanup.policy": "compact", "segment.bytes": SEGMENT_BYTES,
                                 "min.cleanable.dirty.ratio": 0.01})


def build_log(directory: Path, duplicates: float, records: int) -> tuple[int, int]:
    """Write the dirty log; returns (inactive bytes, distinct keys)."""
    rng = random.Random(42)
    distinct = max(1, round(records * (1 - duplicates)))
    keys = list(range(distinct)) + [rng.randrange(distinct) for _ in range(records - distinct)]
    rng.shuffle(keys)
    values = [rng.randbytes(VALUE_BYTES) for _ in range(64)]
    log = UnifiedLog.create(directory, log_config())
    now = int(time.time() * 1000)
    for start in range(0, records, PER_BATCH):
        chunk = keys[start:start + PER_BATCH]
        log.append_as_leader(encode_batch([(b"key-%012d" % k, values[(start + i) % 64], now)
                                           for i, k in enumerate(chunk)]))
    log.roll()
    size = sum(s.size for s in log.segments[:-1])
    log.close()
    return size, distinct


def plain_rewrite(src: Path, dst: Path) -> float:
    """The reference: read the .log files in 1-MiB chunks, walk the batch headers, write
    each batch to one new file, fsync. Returns seconds."""
    t0 = time.perf_counter()
    out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for path in sorted(src.glob("*.log")):
            with open(path, "rb") as f:
                rest = b""
                while True:
                    chunk = f.read(1 << 20)
                    if not chunk:
                        break
                    buf = rest + chunk if rest else chunk
                    end = 0
                    mv = memoryview(buf)
                    for pos, header in iter_batch_headers(buf):
                        end = pos + header.size_in_bytes
                        os.write(out, mv[pos:end])
                    rest = bytes(mv[end:])
        os.fsync(out)
    finally:
        os.close(out)
    return time.perf_counter() - t0


def clean_once(directory: Path, profile: bool = False) -> tuple[float, object]:
    log = UnifiedLog.create(directory, log_config())
    cleaner = LogCleaner(CleanerConfig(dedupe_buffer_size=256 << 20, backoff_ms=1), lambda: {TP: log})
    profiler = cProfile.Profile() if profile else None
    t0 = time.perf_counter()
    if profiler:
        profiler.enable()
    assert cleaner.do_one_cleaning()
    if profiler:
        profiler.disable()
    elapsed = time.perf_counter() - t0
    stats = cleaner._last_stats[0]
    log.close()
    if profiler:
        sort, lines = os.environ.get("PROFILE_SORT", "cumulative"), int(os.environ.get("PROFILE_LINES", "25"))
        pstats.Stats(profiler).sort_stats(sort).print_stats(lines)
    return elapsed, stats


def bench(work: Path, duplicates: float, records: int, profile: bool) -> dict:
    template = work / f"template-{duplicates}"
    dirty_bytes, distinct = build_log(template / "bench-0", duplicates, records)
    warm = work / "warm-up"  # the first cleaning of a process imports numpy and pyarrow
    shutil.copytree(template, warm)
    clean_once(warm / "bench-0")
    shutil.rmtree(warm)
    clean_s, ref_s = [], []
    stats = None
    for run in range(REPEAT):
        ref_s.append(plain_rewrite(template / "bench-0", work / "plain.out"))
        os.unlink(work / "plain.out")
        copy = work / f"run-{run}"
        shutil.copytree(template, copy)
        elapsed, stats = clean_once(copy / "bench-0")
        clean_s.append(elapsed)
        shutil.rmtree(copy)
    assert stats.messages_written == distinct, (stats.messages_written, distinct)
    if profile:
        copy = work / "profiled"
        shutil.copytree(template, copy)
        clean_once(copy / "bench-0", profile=True)
        shutil.rmtree(copy)
    shutil.rmtree(template)
    mb = dirty_bytes / 1e6
    clean_mb_s = sorted(mb / s for s in clean_s)
    ref_mb_s = sorted(mb / s for s in ref_s)
    ratios = sorted(c / r for c, r in zip((mb / s for s in clean_s), (mb / s for s in ref_s)))
    return {"duplicates": duplicates, "mb": mb, "records": records, "distinct": distinct,
            "written_mb": stats.bytes_written / 1e6,
            "clean_mb_s": statistics.median(clean_mb_s), "clean_range": (clean_mb_s[0], clean_mb_s[-1]),
            "ref_mb_s": statistics.median(ref_mb_s), "ref_range": (ref_mb_s[0], ref_mb_s[-1]),
            "ratio": statistics.median(ratios), "ratio_range": (ratios[0], ratios[-1]),
            "records_per_s": records / statistics.median(clean_s)}


def main() -> None:
    quick = "--quick" in sys.argv
    profile = "--profile" in sys.argv
    records = RECORDS // 8 if quick else RECORDS
    base = Path(os.environ.get("BENCH_DIR", tempfile.gettempdir()))
    work = Path(tempfile.mkdtemp(prefix="log-cleaner-bench-", dir=base))
    try:
        print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cpus; "
              f"files in {work}")
        print(f"{records} records of a 16-B key and a {VALUE_BYTES}-B value, {PER_BATCH} a batch, "
              f"uncompressed; {REPEAT} runs, median (range)")
        results = [bench(work, d, records, profile) for d in DUPLICATES]
        print("\nduplicates  dirty MB  kept MB  cleaner MB/s          rec/s     read+rewrite MB/s     ratio")
        for r in results:
            print(f"  {100 * r['duplicates']:>5.0f}%   {r['mb']:>8.1f} {r['written_mb']:>8.1f} "
                  f"{r['clean_mb_s']:>7.1f} ({r['clean_range'][0]:.0f}-{r['clean_range'][1]:.0f})"
                  f" {r['records_per_s']:>10.0f} {r['ref_mb_s']:>9.0f} ({r['ref_range'][0]:.0f}-"
                  f"{r['ref_range'][1]:.0f}) {r['ratio']:>7.3f} ({r['ratio_range'][0]:.3f}-"
                  f"{r['ratio_range'][1]:.3f})")
        headline = {}
        for r in results:
            tag = f"{round(100 * r['duplicates'])}pct_dup"
            headline.update({
                f"clean_mb_s_{tag}": round(r["clean_mb_s"], 1),
                f"clean_mb_s_{tag}_range": [round(x, 1) for x in r["clean_range"]],
                f"read_rewrite_mb_s_{tag}": round(r["ref_mb_s"], 1),
                f"ratio_{tag}": round(r["ratio"], 3),
                f"ratio_{tag}_range": [round(x, 3) for x in r["ratio_range"]],
                f"clean_records_per_s_{tag}": round(r["records_per_s"]),
            })
        headline["goal_ratio"] = 0.5
        print(json.dumps(headline))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
