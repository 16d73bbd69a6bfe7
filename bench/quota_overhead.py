"""Benchmark: the cost of quota accounting on the produce path (issue 18's goal: at most
5 percent).

Owns: one real broker (``python -m broker`` in a subprocess, as ``broker_ingest.py``
starts it), fed by ``broker_ingest.py``'s load generator (pre-built Produce v8 requests,
16-KiB batches, 4 connections, 5 requests in flight each), alternating in the same run:

* **off**: no client quota exists (the ``quotaTypesEnabled`` fast path: nothing is
  recorded);
* **on**: a PRODUCE byte-rate and a REQUEST percentage quota for the generator's client
  id, set with AlterClientQuotas, far above what it can reach (so nothing is throttled,
  and every request pays the accounting: the request's size into the produce Rate, its
  handler thread time into the request Rate, their quota checks).

Each mode runs ``RUNS`` times (interleaved, ``os.sync`` between runs); the figures are
the medians and the spreads (min-max) of MB/s and of the broker's CPU seconds per GB,
and the ratio on/off. Ends with one JSON line. Run:
``.venv/bin/python bench/quota_overhead.py [--quick]``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker_ingest as ingest  # noqa: E402 - the sibling bench module: its generator and broker

ROOT = ingest.ROOT
RUNS = 5
KIND = "16k"


def set_quotas(host: str, port: int, on: bool) -> None:
    from broker.protocol import FrameDecoder, RequestHeader, decode_response, encode_request
    ops = [{"key": "producer_byte_rate", "value": 1e13, "remove": not on},
           {"key": "request_percentage", "value": 1e9, "remove": not on}]
    body = {"validate_only": False, "entries": [
        {"entity": [{"entity_type": "client-id", "entity_name": ingest.CLIENT_ID}], "ops": ops}]}
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(b"".join(bytes(b) for b in encode_request(RequestHeader(49, 0, 1, "bench-admin"), body)))
        decoder = FrameDecoder()
        frames: list = []
        while not frames:
            frames = decoder.feed(sock.recv(65536))
        _, response = decode_response(frames[0], 49, 0)
    if response.entries[0].error_code != 0:
        raise RuntimeError(f"AlterClientQuotas failed: {response}")


def main(quick: bool = False) -> None:
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
                set_quotas(host, port, mode == "on")
                r = worker.run(proc.pid, op="ingest", kind=KIND, host=host, port=port, bytes=volume)
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
        return {"mb_s_median": round(statistics.median(mbs), 1), "mb_s_min": round(min(mbs), 1),
                "mb_s_max": round(max(mbs), 1), "cpu_s_per_gb_median": round(statistics.median(cpu), 3),
                "cpu_s_per_gb_min": round(min(cpu), 3), "cpu_s_per_gb_max": round(max(cpu), 3)}

    off, on = summary("off"), summary("on")
    throughput_ratio = on["mb_s_median"] / off["mb_s_median"]
    cpu_overhead = on["cpu_s_per_gb_median"] / off["cpu_s_per_gb_median"] - 1
    print(f"\nquota accounting on the produce path ({KIND} batches, {runs} runs each, medians [min-max]):")
    for name, s in (("quotas off", off), ("quotas on", on)):
        print(f"  {name:11} {s['mb_s_median']:7.1f} MB/s [{s['mb_s_min']}-{s['mb_s_max']}]  "
              f"{s['cpu_s_per_gb_median']:.3f} CPU s/GB [{s['cpu_s_per_gb_min']}-{s['cpu_s_per_gb_max']}]")
    print(f"  throughput on/off {throughput_ratio:.3f}; broker CPU per GB +{cpu_overhead:.1%} "
          f"(goal: at most 5% cost)")
    print(json.dumps({"bench": "quota_overhead", "kind": KIND, "runs": runs, "quotas_off": off, "quotas_on": on,
                      "throughput_ratio_on_off": round(throughput_ratio, 3),
                      "cpu_overhead": round(cpu_overhead, 4), "goal_max_overhead": 0.05,
                      "goal_met": cpu_overhead <= 0.05 and throughput_ratio >= 0.95}))


if __name__ == "__main__":
    if "--worker" in sys.argv:
        ingest.worker()
    else:
        main(quick="--quick" in sys.argv)
