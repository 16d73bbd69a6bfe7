"""Share groups against consumer groups: records/s of two share consumers (KIP-932) and of
a two-member consumer group, on the same four-partition topic of the same broker, in the
same run.

Setup: one broker (``python -m broker``, ``broker_process.start_broker``), one topic of
four partitions holding ``--records`` records of ``--size`` bytes (produced once with
confluent-kafka, lz4-free, batches of 500). Then, alternating, ``--runs`` times each:

* ``consumer_group``: two confluent-kafka ``Consumer`` members of a new group
  (``auto.offset.reset=earliest``, classic protocol, auto commit), each in its own thread,
  read until together they have every record;
* ``share_group``: two confluent-kafka ``ShareConsumer`` members of a new share group
  (``share.auto.offset.reset=earliest`` set as a GROUP config; implicit acknowledgement:
  every poll accepts the previous one, ``commit_sync`` at the end), until together they
  have every record.

A run's figure is records / wall-clock seconds from the members' start to the last record,
joins included for both (the broker runs with ``group.initial.rebalance.delay.ms=0``, so a
classic group is assigned as soon as both members joined; a share group's members fetch
once their first heartbeat is answered). Timing from the first record instead would credit
the consumer group with the records its members prefetched while the timer was off. Prints each run, the median and
range of each figure, and as its very last line one JSON object with the medians, the
ranges and ``ratio_share_vs_group`` (share / consumer group; the goal is >= 0.5).

Usage: python bench/share_consumer.py [--runs N] [--records N] [--size BYTES] [--quick]
(default: 3 runs of 1,000,000 records of 100 bytes)
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
import uuid

import broker_process
from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

PARTITIONS = 4
MEMBERS = 2


def produce(bootstrap: str, topic: str, records: int, size: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS)])[topic].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 500,
                  "queue.buffering.max.messages": 1_000_000})
    value = b"x" * size
    for i in range(records):
        while True:
            try:
                p.produce(topic, value=value, partition=i % PARTITIONS)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(120) == 0


def _run_members(make, count_batch, records: int) -> float:
    """Start ``MEMBERS`` threads polling with ``make()`` consumers until ``records`` are
    seen together; records/s."""
    seen = [0] * MEMBERS
    done = threading.Event()
    ready = threading.Barrier(MEMBERS + 1)
    ends: list[float] = []
    firsts: list[float] = []

    def member(i: int) -> None:
        c = make()
        ready.wait()
        try:
            while not done.is_set():
                n = count_batch(c)
                if n and not firsts:
                    firsts.append(time.perf_counter())
                seen[i] += n
                if sum(seen) >= records:
                    ends.append(time.perf_counter())
                    done.set()
        finally:
            try:
                if isinstance(c, ShareConsumer):
                    c.commit_sync()
            finally:
                c.close()

    threads = [threading.Thread(target=member, args=(i,)) for i in range(MEMBERS)]
    for t in threads:
        t.start()
    ready.wait()
    start = time.perf_counter()
    for t in threads:
        t.join(600)
    if sum(seen) < records:
        raise RuntimeError(f"only {sum(seen)} of {records} records consumed")
    return records / (min(ends) - start)


def consumer_group(bootstrap: str, topic: str, records: int) -> float:
    group = f"bench-cg-{uuid.uuid4().hex[:6]}"

    def make() -> Consumer:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                      "enable.auto.commit": True})
        c.subscribe([topic])
        return c

    def batch(c: Consumer) -> int:
        return sum(1 for m in c.consume(500, 0.2) if m.error() is None)

    return _run_members(make, batch, records)


def share_group(bootstrap: str, topic: str, records: int) -> float:
    group = f"bench-sg-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    for f in admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, group,
                                                             incremental_configs=[entry])]).values():
        f.result(30)

    def make() -> ShareConsumer:
        c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
        c.subscribe([topic])
        return c

    def batch(c: ShareConsumer) -> int:
        return sum(1 for m in c.poll(0.2) if m.error() is None)

    return _run_members(make, batch, records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="one run of 100,000 records")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.records = 1, 100_000
    log_dir = tempfile.mkdtemp(prefix="bench-share-")
    # no initial rebalance delay: a classic group's join is not the figure
    proc, bootstrap = broker_process.start_broker(log_dir, {"group.initial.rebalance.delay.ms": "0"})
    results: dict[str, list[float]] = {"consumer_group": [], "share_group": []}
    try:
        topic = "bench-share"
        produce(bootstrap, topic, args.records, args.size)
        for run in range(args.runs):
            for name, fn in (("consumer_group", consumer_group), ("share_group", share_group)):
                rate = fn(bootstrap, topic, args.records)
                results[name].append(rate)
                print(f"run {run + 1} {name}: {rate:,.0f} records/s", flush=True)
    finally:
        broker_process.stop_broker(proc, log_dir)
    medians = {k: statistics.median(v) for k, v in results.items()}
    print("\n| figure | median | range | runs |\n|---|---|---|---|")
    for k, v in results.items():
        print(f"| {k} records/s | {medians[k]:,.0f} | {min(v):,.0f}-{max(v):,.0f} | {len(v)} |")
    ratios = [s / g for s, g in zip(results["share_group"], results["consumer_group"], strict=True)]
    print(json.dumps({
        "records": args.records, "size": args.size, "partitions": PARTITIONS, "members": MEMBERS,
        "consumer_group_rps": round(medians["consumer_group"]), "share_group_rps": round(medians["share_group"]),
        "consumer_group_range": [round(min(results["consumer_group"])), round(max(results["consumer_group"]))],
        "share_group_range": [round(min(results["share_group"])), round(max(results["share_group"]))],
        "ratio_share_vs_group": round(medians["share_group"] / medians["consumer_group"], 3),
        "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)], "goal": 0.5}))


if __name__ == "__main__":
    main()
