"""Benchmark: the cost of quota accounting on the produce path (the goal: at most
5 percent of the broker's CPU per GB).

Owns two measurements, quotas off vs on in the same run:

* **whole broker** (the default): one real broker (``python -m broker`` in a
  subprocess, as ``broker_ingest.py`` starts it), fed by ``broker_ingest.py``'s load
  generator (pre-built Produce v8 requests, 16-KiB batches, 4 connections, 5 requests in
  flight each), alternating in the same run:

  - **off**: no client quota exists (the ``quotaTypesEnabled`` fast path: nothing is
    recorded);
  - **on**: a PRODUCE byte-rate and a REQUEST percentage quota for the generator's client
    id, set with AlterClientQuotas, far above what it can reach (so nothing is
    throttled, and every request pays the accounting: the request's size into the
    produce Rate, its handler thread time into the request Rate, their quota checks).

  Each mode runs ``RUNS`` times, in pairs (off/on, then on/off, ...; ``os.sync`` between
  runs); the figures are the medians and the spreads (min-max) of MB/s and of the
  broker's CPU seconds per GB (all its threads, from /proc), the ratio of the medians, and
  the median of the per-pair ratios (each pair ran back to back, so a slow drift of the
  machine's load cancels out of it). ``--aa`` runs the same with quotas off in both
  modes: the noise floor, i.e. what "overhead" the bench reports for no difference at all.

* **in process** (``--in-process``): the broker's own request handler
  (``KafkaApis.handle``, the path a connection thread runs, without the socket) called
  directly on the same 16-KiB Produce requests, in alternating blocks of ``BLOCK``
  requests with quotas off and on (the quotas are switched between blocks), timed with
  the thread's own CPU clock: the median CPU microseconds per request of each mode, and
  their difference, the accounting's cost per request. Other processes' load slows both
  modes alike within a block pair, so this figure is far steadier than the whole-broker
  one on a shared machine; dividing it by the whole broker's CPU per request (from the
  default mode) gives the share of the broker's CPU it costs.

Ends with one JSON line. Run:
``.venv/bin/python bench/quota_overhead.py [--quick] [--aa] [--connections N] [--in-process]``
(``--connections``: the generator's connections, 4 by default).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker_ingest as ingest  # noqa: E402 - the sibling bench module: its generator and broker

ROOT = ingest.ROOT
RUNS = 5
KIND = "16k"
BLOCK = 400  # in-process requests per block
BLOCKS = 40  # in-process blocks per mode


def quota_entries(on: bool) -> list[dict]:
    return [{"key": "producer_byte_rate", "value": 1e13, "remove": not on},
            {"key": "request_percentage", "value": 1e9, "remove": not on}]


def set_quotas(host: str, port: int, on: bool) -> None:
    from broker.protocol import FrameDecoder, RequestHeader, decode_response, encode_request
    body = {"validate_only": False, "entries": [
        {"entity": [{"entity_type": "client-id", "entity_name": ingest.CLIENT_ID}], "ops": quota_entries(on)}]}
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(b"".join(bytes(b) for b in encode_request(RequestHeader(49, 0, 1, "bench-admin"), body)))
        decoder = FrameDecoder()
        frames: list = []
        while not frames:
            frames = decoder.feed(sock.recv(65536))
        _, response = decode_response(frames[0], 49, 0)
    if response.entries[0].error_code != 0:
        raise RuntimeError(f"AlterClientQuotas failed: {response}")


def main(quick: bool = False, aa: bool = False, connections: int = ingest.CONNECTIONS) -> dict:
    work = Path(tempfile.mkdtemp(prefix="bench-quota-"))
    runs = 2 if quick else RUNS
    volume = ingest.INGEST_BYTES[KIND] // (10 if quick else 2)
    proc, host, port = ingest.start_broker(work)
    worker = ingest.Worker()
    results: dict[str, list[dict]] = {"off": [], "on": []}
    try:
        ingest.create_topic(host, port)
        for i in range(runs):
            for mode in (("off", "on") if i % 2 == 0 else ("on", "off")):
                set_quotas(host, port, mode == "on" and not aa)
                r = worker.run(proc.pid, op="ingest", kind=KIND, host=host, port=port, bytes=volume,
                               connections=connections)
                results[mode].append(r)
                print(f"run {i + 1} {mode:3}: {ingest.mb_s(r):7.1f} MB/s, {ingest.cpu_per_gb(r):5.2f} CPU s/GB, "
                      f"generator CPU {r['gen_cpu'] / r['elapsed']:.0%}", flush=True)
    finally:
        worker.close()
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(work, ignore_errors=True)

    def summary(mode: str) -> dict:
        mbs = [ingest.mb_s(r) for r in results[mode]]
        cpu = [ingest.cpu_per_gb(r) for r in results[mode]]
        per_request = [r["server_cpu"] / r["requests"] * 1e6 for r in results[mode]]
        return {"mb_s_median": round(statistics.median(mbs), 1), "mb_s_min": round(min(mbs), 1),
                "mb_s_max": round(max(mbs), 1), "cpu_s_per_gb_median": round(statistics.median(cpu), 3),
                "cpu_s_per_gb_min": round(min(cpu), 3), "cpu_s_per_gb_max": round(max(cpu), 3),
                "cpu_us_per_request_median": round(statistics.median(per_request), 1)}

    off, on = summary("off"), summary("on")
    throughput_ratio = on["mb_s_median"] / off["mb_s_median"]
    cpu_overhead = on["cpu_s_per_gb_median"] / off["cpu_s_per_gb_median"] - 1
    pairs = [ingest.cpu_per_gb(b) / ingest.cpu_per_gb(a) - 1 for a, b in zip(results["off"], results["on"])]
    pair_overhead = statistics.median(pairs)
    label = "A/A (quotas off in both modes: the noise floor)" if aa else "quota accounting on the produce path"
    print(f"\n{label} ({KIND} batches, {connections} connections, {runs} runs each, medians [min-max]):")
    for name, s in (("quotas off", off), ("quotas on" if not aa else "off again", on)):
        print(f"  {name:11} {s['mb_s_median']:7.1f} MB/s [{s['mb_s_min']}-{s['mb_s_max']}]  "
              f"{s['cpu_s_per_gb_median']:.3f} CPU s/GB [{s['cpu_s_per_gb_min']}-{s['cpu_s_per_gb_max']}]  "
              f"{s['cpu_us_per_request_median']} CPU us/request")
    print(f"  throughput on/off {throughput_ratio:.3f}; broker CPU per GB {cpu_overhead:+.1%} (ratio of medians), "
          f"{pair_overhead:+.1%} (median of the pairs: {', '.join(f'{p:+.1%}' for p in pairs)}) "
          f"(goal: at most 5% cost)")
    out = {"bench": "quota_overhead", "mode": "aa" if aa else "whole_broker", "kind": KIND, "runs": runs,
           "connections": connections,
           "quotas_off": off, "quotas_on": on, "throughput_ratio_on_off": round(throughput_ratio, 3),
           "cpu_overhead": round(cpu_overhead, 4), "cpu_overhead_pairs": [round(p, 4) for p in pairs],
           "cpu_overhead_pair_median": round(pair_overhead, 4), "goal_max_overhead": 0.05,
           "goal_met": pair_overhead <= 0.05 and throughput_ratio >= 0.95}
    print(json.dumps(out))
    return out


class _Connection:
    """What ``KafkaApis.handle`` reads of a connection."""

    id = "bench-1"
    listener = "PLAINTEXT"
    local_address = ("127.0.0.1", 9092)
    peer_address = ("127.0.0.1", 50000)
    principal = None
    client_software = None

    def __init__(self) -> None:
        self.seen_apis: set = set()

    def throttle_callback(self):  # nothing is throttled: the quotas are far above the load
        raise AssertionError("the bench's quotas must not throttle")


def in_process(quick: bool = False) -> dict:
    from broker.server.broker import KafkaBroker
    blocks = BLOCKS // 4 if quick else BLOCKS
    work = Path(tempfile.mkdtemp(prefix="bench-quota-inproc-"))
    broker = KafkaBroker({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(work / "logs"),
                          "log.retention.ms": "-1", "log.segment.bytes": str(1 << 30)})
    broker.start()
    try:
        broker.topics.create_topic(ingest.TOPIC, ingest.PARTITIONS, {})
        frames = [bytes(head_and_rest) for head_and_rest in _frames()]
        conn = _Connection()
        handle = broker.apis.handle
        views = [memoryview(f) for f in frames]

        def set_mode(on: bool) -> None:
            broker.quotas.apply({"client-id": ingest.CLIENT_ID}, {e["key"]: (e["value"] if on else None)
                                                                 for e in quota_entries(True)})

        def block(k: int) -> float:
            t0 = time.thread_time_ns()
            for i in range(k, k + BLOCK):
                handle(conn, views[i % len(views)])
            return (time.thread_time_ns() - t0) / BLOCK / 1000

        for on in (False, True):  # warm-up
            set_mode(on)
            block(0)
        per = {"off": [], "on": []}
        for b in range(blocks):
            for mode in (("off", "on") if b % 2 == 0 else ("on", "off")):
                set_mode(mode == "on")
                per[mode].append(block(b * BLOCK))
    finally:
        broker.shutdown()
        shutil.rmtree(work, ignore_errors=True)
    off, on = statistics.median(per["off"]), statistics.median(per["on"])
    diffs = [b - a for a, b in zip(per["off"], per["on"])]
    cost = statistics.median(diffs)
    floor_off, floor_on = min(per["off"]), min(per["on"])  # the least disturbed block of each mode
    print(f"in process: KafkaApis.handle on {KIND} Produce requests, {blocks} blocks of {BLOCK} per mode "
          f"(thread CPU, medians):")
    print(f"  quotas off {off:.1f} us/request, quotas on {on:.1f} us/request; the accounting "
          f"{cost:.2f} us/request (median of the block pairs; quartiles "
          f"{statistics.quantiles(diffs, n=4)[0]:.2f}..{statistics.quantiles(diffs, n=4)[2]:.2f})")
    print(f"  fastest blocks: off {floor_off:.1f}, on {floor_on:.1f} us/request: {floor_on - floor_off:.2f} us/request")
    out = {"bench": "quota_overhead", "mode": "in_process", "kind": KIND, "blocks": blocks, "block": BLOCK,
           "handler_us_per_request_off": round(off, 2), "handler_us_per_request_on": round(on, 2),
           "accounting_us_per_request": round(cost, 2),
           "handler_us_per_request_off_min": round(floor_off, 2), "handler_us_per_request_on_min": round(floor_on, 2),
           "accounting_share_of_handler": round(cost / off, 4)}
    print(json.dumps(out))
    return out


def _frames() -> list[bytes]:
    """The generator's Produce v8 requests (one 16-KiB batch each), whole frames without
    the size prefix (what the socket server hands ``KafkaApis.handle``)."""
    out = []
    for conn_frames in ingest.make_frames(KIND)[:1]:
        for rest, _ in conn_frames:
            head = ingest._HEAD.pack(0, 0, 8, 0)[4:]  # api_key, api_version, correlation id
            out.append(head + bytes(rest))
    return out


if __name__ == "__main__":
    if "--worker" in sys.argv:
        ingest.worker()
    elif "--in-process" in sys.argv:
        in_process(quick="--quick" in sys.argv)
    else:
        n = sys.argv[sys.argv.index("--connections") + 1] if "--connections" in sys.argv else ingest.CONNECTIONS
        main(quick="--quick" in sys.argv, aa="--aa" in sys.argv, connections=int(n))
