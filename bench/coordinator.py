"""Coordinator throughput: the group and transaction coordinators' request paths against a
real broker subprocess (``python -m broker``).

Three cases, each timed on its own connection after a warm-up:

* ``join_sync``: JoinGroup + SyncGroup rounds of a classic group with one member (v5 / v3,
  protocol type "consumer"): the member rejoins, which as the group's leader starts a
  rebalance that completes at once, then sends its SyncGroup with the assignment (the
  generation's group record is appended to ``__consumer_offsets``). Rounds/s.
* ``offset_commit``: OffsetCommit v8 requests of a simple group (generation -1), one
  partition each, every one an append to ``__consumer_offsets``. Requests/s.
* ``end_txn``: confluent-kafka's transactional producer: begin, produce one record, commit
  (AddPartitionsToTxn, Produce, EndTxn, its markers and the ``__transaction_state``
  records). Transactions/s.

Each case gives two figures: its rate (wall clock, client included) and the broker
process's CPU time per operation (``/proc/<pid>/stat`` user + system time of all its threads
across the timed loop), which a machine shared with other work disturbs much less than
the rate. ``--runs`` times (default 3) each case on a fresh broker; prints each run, a
table of the median and range (min-max) of every figure, and, as its very last line, one
JSON object of those figures.

The broker under test is the one whose source root is ``KAFKALOG_BROKER_ROOT`` (default:
this checkout), so that a copy of an earlier commit can be measured with this script:
``KAFKALOG_BROKER_ROOT=/tmp/base PYTHONPATH=/tmp/base python bench/coordinator.py``.

Usage: python bench/coordinator.py [--runs N] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import time

import broker_process

BROKER_ROOT = os.path.abspath(os.environ.get("KAFKALOG_BROKER_ROOT", broker_process.ROOT))
sys.path.insert(0, BROKER_ROOT)
broker_process.ROOT = BROKER_ROOT  # start_broker runs `python -m broker` from there

from broker.protocol import ApiKey, ErrorCode, FrameDecoder, RequestHeader, decode_response, encode_request  # noqa: E402

TOPIC = "bench-coordinator"
CASES = (("join_sync", "rounds/s"), ("join_sync_cpu_us", "broker us/round"),
         ("offset_commit", "requests/s"), ("offset_commit_cpu_us", "broker us/request"),
         ("end_txn", "transactions/s"), ("end_txn_cpu_us", "broker us/txn"))


class Connection:
    """One blocking connection speaking the wire protocol."""

    def __init__(self, bootstrap: str, client_id: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client_id = client_id
        self.decoder = FrameDecoder()
        self.frames: list = []
        self.correlation_id = 0

    def request(self, api_key: int, version: int, body: dict):
        self.correlation_id += 1
        header = RequestHeader(api_key, version, self.correlation_id, self.client_id)
        self.sock.sendall(b"".join(bytes(b) for b in encode_request(header, body)))
        while not self.frames:
            data = self.sock.recv(1 << 20)
            if not data:
                raise ConnectionError("connection closed by the broker")
            self.frames.extend(self.decoder.feed(data))
        return decode_response(self.frames.pop(0), api_key, version)[1]

    def close(self) -> None:
        self.sock.close()


def _check(code: int, what: str) -> None:
    if code != ErrorCode.NONE:
        raise SystemExit(f"{what}: error {ErrorCode(code).name}")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (all its threads) so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rate(step, count: int, warmup: int, pid: int) -> tuple[float, float]:
    """``step(i)`` ``warmup`` times, then ``count`` times timed: (steps per second, the
    broker's CPU microseconds per step)."""
    for i in range(warmup):
        step(i)
    cpu = _cpu_seconds(pid)
    start = time.perf_counter()
    for i in range(count):
        step(i)
    elapsed = time.perf_counter() - start
    return count / elapsed, (_cpu_seconds(pid) - cpu) * 1e6 / count


def _subscription(topic: str) -> bytes:
    name = topic.encode()
    return b"\x00\x00" + (1).to_bytes(4, "big") + len(name).to_bytes(2, "big") + name + b"\xff\xff\xff\xff"


def bench_join_sync(bootstrap: str, pid: int, rounds: int) -> tuple[float, float]:
    c = Connection(bootstrap, "bench-member")
    group = f"bench-join-{time.time_ns()}"
    protocols = [{"name": "range", "metadata": _subscription(TOPIC)}]

    def join(member: str):
        return c.request(ApiKey.JOIN_GROUP, 5, {
            "group_id": group, "session_timeout_ms": 30000, "rebalance_timeout_ms": 30000, "member_id": member,
            "group_instance_id": None, "protocol_type": "consumer", "protocols": protocols})

    def round_trip(_: int) -> None:
        r = join(member)
        _check(r.error_code, "JoinGroup")
        s = c.request(ApiKey.SYNC_GROUP, 3, {
            "group_id": group, "generation_id": r.generation_id, "member_id": member, "group_instance_id": None,
            "assignments": [{"member_id": member, "assignment": b"\x00\x00\x00\x00\x00\x00"}]})
        _check(s.error_code, "SyncGroup")

    first = join("")
    if first.error_code != ErrorCode.MEMBER_ID_REQUIRED:
        raise SystemExit(f"JoinGroup: expected MEMBER_ID_REQUIRED, got {first.error_code}")
    member = first.member_id
    round_trip(0)  # the first generation (waits group.initial.rebalance.delay.ms)
    figures = _rate(round_trip, rounds, min(20, rounds), pid)
    c.close()
    return figures


def bench_offset_commit(bootstrap: str, pid: int, requests: int) -> tuple[float, float]:
    c = Connection(bootstrap, "bench-committer")
    group = f"bench-commit-{time.time_ns()}"

    def commit(offset: int) -> None:
        r = c.request(ApiKey.OFFSET_COMMIT, 8, {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": offset,
                                                        "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
        _check(r.topics[0].partitions[0].error_code, "OffsetCommit")

    figures = _rate(commit, requests, min(100, requests), pid)
    c.close()
    return figures


def bench_end_txn(bootstrap: str, pid: int, transactions: int) -> tuple[float, float]:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-txn-{time.time_ns()}",
                  "linger.ms": 0, "enable.idempotence": True})
    p.init_transactions(30)

    def one(i: int) -> None:
        p.begin_transaction()
        p.produce(TOPIC, value=b"v%d" % i, partition=0)
        p.commit_transaction(30)

    figures = _rate(one, transactions, min(20, transactions), pid)
    p.flush(10)
    return figures


def run_once(sizes: dict[str, int]) -> dict[str, float]:
    log_dir = tempfile.mkdtemp(prefix="bench-coordinator-")
    proc, bootstrap = broker_process.start_broker(log_dir)
    try:
        c = Connection(bootstrap, "bench-admin")
        r = c.request(ApiKey.CREATE_TOPICS, 4, {"topics": [{
            "name": TOPIC, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
            "timeout_ms": 10000, "validate_only": False})
        _check(r.topics[0].error_code, "CreateTopics")
        c.close()
        out = {}
        for name, bench in (("join_sync", bench_join_sync), ("offset_commit", bench_offset_commit),
                            ("end_txn", bench_end_txn)):
            out[name], out[name + "_cpu_us"] = bench(bootstrap, proc.pid, sizes[name])
        return out
    finally:
        broker_process.stop_broker(proc, log_dir)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a smoke test)")
    args = parser.parse_args()
    sizes = {"join_sync": 2000, "offset_commit": 10000, "end_txn": 1000}
    if args.quick:
        sizes = {k: v // 10 for k, v in sizes.items()}
    print(f"broker source: {BROKER_ROOT}")
    runs = []
    for i in range(args.runs):
        figures = run_once(sizes)
        runs.append(figures)
        print(f"run {i + 1}: " + ", ".join(f"{k} {v:.1f}" for k, v in figures.items()), flush=True)
    summary = {}
    print(f"\n{'case':<21} {'unit':<18} {'median':>10} {'min':>10} {'max':>10}")
    for name, unit in CASES:
        values = [r[name] for r in runs]
        summary[name] = {"unit": unit, "median": round(statistics.median(values), 1),
                         "min": round(min(values), 1), "max": round(max(values), 1)}
        s = summary[name]
        print(f"{name:<21} {unit:<18} {s['median']:>10.1f} {s['min']:>10.1f} {s['max']:>10.1f}")
    print(json.dumps({"broker_root": BROKER_ROOT, "runs": args.runs, "sizes": sizes, "figures": summary}))


if __name__ == "__main__":
    main()
