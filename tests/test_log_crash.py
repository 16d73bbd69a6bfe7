"""Process-level crash loop (R14 at the storage level, E2 "fsync before ack"): a child
process appends single-record batches to a log with flush.messages=1 through a
``LogManager`` and prints each acknowledged offset and value; the parent SIGKILLs it at a
random moment, restarts the log (unclean: no clean-shutdown marker) and checks that

- every acknowledged record is present at its offset with its value,
- offsets are contiguous from 0 and every batch's CRC is valid,
- the log end offset is past the last acknowledged offset,
- the next append continues right after the log end offset.

Every other iteration the parent's own check ends with a clean shutdown, so restarts
alternate between clean and unclean ones. Seeded RNG; about 20 iterations, bounded in
time.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

from broker.log.config import LogConfig
from broker.log.manager import LogManager
from broker.log.scheduler import Scheduler
from broker.record.batch import decode_batch, encode_batch, ensure_valid, iter_batch_headers

REPO = Path(__file__).resolve().parents[1]
ITERATIONS = 20
CONFIG = {"flush.messages": 1, "segment.bytes": 3000, "index.interval.bytes": 256}

CHILD = rf"""
import sys, time
from broker.log.config import LogConfig
from broker.log.manager import LogManager
from broker.log.scheduler import Scheduler
from broker.record.batch import encode_batch

log_dir, tag = sys.argv[1], sys.argv[2]
config = LogConfig.from_props({CONFIG!r})
manager = LogManager([log_dir], config, scheduler=Scheduler(), initial_task_delay_ms=0,
                     retention_check_interval_ms=50, flush_recovery_offset_checkpoint_ms=20)
manager.startup()
log = manager.get_or_create_log("crash", 0)
print("ready", log.log_end_offset, flush=True)
i = 0
while True:
    value = ("%s-%d" % (tag, i)).encode()
    info = log.append_as_leader(encode_batch([(None, value, int(time.time() * 1000))]))
    sys.stdout.write("%d %s\n" % (info.first_offset, value.decode()))
    sys.stdout.flush()
    i += 1
    if i % 25 == 0:
        manager.run_pending()  # roll flushes, checkpoints, delayed deletes
"""


def read_log(log) -> dict[int, bytes]:
    """offset -> value of every record, checking CRCs and contiguity."""
    out = {}
    expected = 0
    for seg in log.segments:
        data = seg.log.path.read_bytes()
        for pos, header in iter_batch_headers(data):
            ensure_valid(data, pos)
            assert header.base_offset == expected, (seg, header.base_offset, expected)
            for record in decode_batch(data, pos)[1]:
                out[record.offset] = record.value
            expected = header.next_offset
    assert expected == log.log_end_offset
    return out


def test_r14_sigkill_loop_keeps_every_acknowledged_record(tmp_path):
    rng = random.Random(14)
    log_dir = tmp_path / "data"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    acked: dict[int, bytes] = {}
    deadline = time.monotonic() + 60
    next_offset = 0
    for iteration in range(ITERATIONS):
        if time.monotonic() > deadline:
            break
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(log_dir), f"it{iteration}"],
                                 stdout=subprocess.PIPE, env=env, cwd=REPO)
        try:
            ready = child.stdout.readline().split()
            assert ready and ready[0] == b"ready", ready
            assert int(ready[1]) == next_offset
            time.sleep(rng.uniform(0.01, 0.3))  # scenario: the kill comes at a random moment
        finally:
            child.kill()
            output = child.stdout.read()
            child.wait()
        lines = output.split(b"\n")
        for line in lines[:-1]:  # the last piece may be a line cut by the kill: not acked
            offset, value = line.split(b" ", 1)
            acked[int(offset)] = value
        manager = LogManager([log_dir], LogConfig.from_props(CONFIG), scheduler=Scheduler(),
                             initial_task_delay_ms=0)
        manager.startup()
        log = manager.get_log("crash", 0)
        stored = read_log(log)
        assert all(stored.get(o) == v for o, v in acked.items()), f"iteration {iteration}: lost data"
        assert log.log_end_offset >= max(acked, default=-1) + 1
        value = b"parent-%d" % iteration
        info = log.append_as_leader(encode_batch([(None, value, int(time.time() * 1000))]))
        assert info.first_offset == len(stored)
        acked[info.first_offset] = value
        next_offset = info.first_offset + 1
        if iteration % 2:
            manager.shutdown()
        else:
            for lg in manager.all_logs():
                lg.close_handlers()
    print(f"acked {len(acked)} records, {log.num_segments} segments")
    assert len(acked) > 2 * ITERATIONS
