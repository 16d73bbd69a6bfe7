"""Producer throughput: our per-record send(), our columnar send_arrow(), confluent-kafka's
Producer and kafka-python's KafkaProducer, against this project's broker, in one run.

One broker subprocess (``python -m broker``) serves every case; each case runs in its own
Python subprocess (so that peak memory is the case's own) and writes to a fresh topic.
Settings shared by every client: linger.ms=5, compression lz4, acks=all, batch size 1 MiB
(librdkafka's default; the others are set to match). Values are 100 bytes and 1 KiB,
half random and half repeated bytes (about 2:1 under lz4), cycled from a pool of 4096.
A case sends one record and waits for it (connection and metadata warm), then times
from the first send to the end of flush() (send_arrow: to its future's result; the Arrow
column is built before the clock starts, as the Spark writer already holds one).

CPU per record, beside the rates (less sensitive than wall time to a shared machine): the
calling thread's (send/produce loop; send_arrow's encoding), the client process's (every
thread: our Sender, librdkafka's threads; to the end of close()) and the broker
process's (from /proc), over the timed part.

Prints a table, then, as its very last line, one JSON object with records/s per case,
the ratios with goals (send >= 0.5x confluent and >= 5x kafka-python;
columnar >= 2x confluent) and the peak RSS of the per-record case.

Usage: python bench/producer.py [--quick]
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time

from broker_process import start_broker, stop_broker

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

LINGER_MS = 5
BATCH_BYTES = 1024 * 1024
BUFFER_MEMORY = 32 * 1024 * 1024
CASES = (("100b", 100, 300_000), ("1k", 1024, 100_000))
CLIENTS = ("send", "columnar", "confluent", "kafka_python")


def _values(size: int, count: int = 4096) -> list[bytes]:
    import random
    rnd = random.Random(size)
    half = size // 2
    return [rnd.randbytes(half) + bytes([65 + i % 26]) * (size - half) for i in range(count)]


# -- one case, in a child process ------------------------------------------------------


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _broker_cpu(pid: int) -> float:
    """User + system CPU seconds of the broker process so far (Linux /proc)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


class _Clocks:
    """CPU clocks around the timed part: this process (every thread: the caller, our
    Sender, librdkafka's threads), the calling thread alone, and the broker process."""

    def __init__(self, broker_pid: int) -> None:
        self.pid = broker_pid

    def start(self) -> None:
        self.b0, self.p0, self.t0 = _broker_cpu(self.pid), time.process_time(), time.thread_time()

    def caller_done(self) -> None:
        self.t1 = time.thread_time()

    def stop(self, n: int) -> dict:
        p1, b1 = time.process_time(), _broker_cpu(self.pid)
        t1 = getattr(self, "t1", time.thread_time())
        return {"process_cpu_us": (p1 - self.p0) / n * 1e6, "caller_cpu_us": (t1 - self.t0) / n * 1e6,
                "broker_cpu_us": (b1 - self.b0) / n * 1e6}


def _run_case(client: str, bootstrap: str, topic: str, size: int, n: int,
              broker_pid: int = 0) -> dict:
    clocks = _Clocks(broker_pid)
    pool = _values(size)
    m = len(pool)
    base_rss = _rss_mb()
    if client in ("send", "columnar"):
        from broker.client.producer import KafkaProducer
        p = KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": LINGER_MS,
                           "compression.type": "lz4", "acks": "all", "batch.size": BATCH_BYTES,
                           "buffer.memory": BUFFER_MEMORY})
        p.send(topic, b"warm-up").get(30)
        base_rss = _rss_mb()  # after the imports (numpy, pyarrow) and the connection
        if client == "send":
            send = p.send
            clocks.start()
            t0 = time.perf_counter()
            for i in range(n):
                send(topic, pool[i % m])
            clocks.caller_done()
            p.flush()
            dt = time.perf_counter() - t0
            failed = p.metrics()["record-error-total"]
        else:
            import pyarrow as pa
            col = pa.array([pool[i % m] for i in range(n)], pa.binary())
            clocks.start()
            t0 = time.perf_counter()
            fut = p.send_arrow(topic, col)
            clocks.caller_done()
            res = fut.result(120)
            dt = time.perf_counter() - t0
            failed = n - res.records
        p.close()
    elif client == "confluent":
        from confluent_kafka import Producer
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": LINGER_MS,
                      "compression.type": "lz4", "acks": "all", "batch.size": BATCH_BYTES,
                      "queue.buffering.max.kbytes": BUFFER_MEMORY // 1024})
        p.produce(topic, b"warm-up")
        p.flush(30)
        base_rss = _rss_mb()
        errors = [0]

        def on_delivery(err, msg):
            if err is not None:
                errors[0] += 1

        produce = p.produce
        poll = p.poll
        clocks.start()
        t0 = time.perf_counter()
        for i in range(n):
            while True:
                try:
                    produce(topic, pool[i % m], on_delivery=on_delivery)
                    break
                except BufferError:
                    poll(0.001)
            if i & 1023 == 0:
                poll(0)
        clocks.caller_done()
        p.flush(120)
        dt = time.perf_counter() - t0
        failed = errors[0]
    else:
        import logging
        logging.getLogger("kafka").setLevel(logging.ERROR)
        from kafka import KafkaProducer as KP
        p = KP(bootstrap_servers=bootstrap, linger_ms=LINGER_MS, compression_type="lz4",
               acks="all", batch_size=BATCH_BYTES)
        p.send(topic, b"warm-up").get(30)
        base_rss = _rss_mb()
        send = p.send
        clocks.start()
        t0 = time.perf_counter()
        futs = [send(topic, pool[i % m]) for i in range(n)]
        clocks.caller_done()
        p.flush(120)
        dt = time.perf_counter() - t0
        failed = sum(1 for f in futs if f.failed())
        p.close()
    cpu = clocks.stop(n)  # after close(): librdkafka's threads are done too
    rss_mb = _rss_mb()
    return {"records": n, "seconds": dt, "rec_s": n / dt, "mb_s": n * size / dt / 1e6,
            "failed": failed, "peak_rss_mb": rss_mb, "rss_growth_mb": rss_mb - base_rss, **cpu}


def _child(argv: list[str]) -> None:
    client, bootstrap, topic, size, n, broker_pid = argv
    out = _run_case(client, bootstrap, topic, int(size), int(n), int(broker_pid))
    print("RESULT " + json.dumps(out), flush=True)


# -- the driver ------------------------------------------------------------------------


def main() -> None:
    quick = "--quick" in sys.argv
    log_dir = tempfile.mkdtemp(prefix="bench-producer-")
    broker, bootstrap = start_broker(log_dir)
    results: dict[str, dict[str, dict]] = {}
    try:
        for label, size, n in CASES:
            if quick:
                n //= 10
            for client in CLIENTS:
                topic = f"bench-{client}-{label}-{int(time.time() * 1000) % 100000}"
                proc = subprocess.run(
                    [sys.executable, os.path.abspath(__file__), "--child", client, bootstrap,
                     topic, str(size), str(n), str(broker.pid)],
                    cwd=ROOT, capture_output=True, text=True, timeout=600)
                line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
                if proc.returncode != 0 or not line:
                    print(f"{client} {label} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}",
                          file=sys.stderr)
                    res = {"records": n, "seconds": float("nan"), "rec_s": 0.0, "mb_s": 0.0,
                           "failed": n, "peak_rss_mb": 0.0, "rss_growth_mb": 0.0,
                           "process_cpu_us": float("nan"), "caller_cpu_us": float("nan"),
                           "broker_cpu_us": float("nan")}
                else:
                    res = json.loads(line[-1][len("RESULT "):])
                results.setdefault(label, {})[client] = res
                print(f"  {label:5s} {client:13s} {res['rec_s']:>12,.0f} rec/s "
                      f"{res['mb_s']:>8.1f} MB/s  failed={res['failed']}  "
                      f"peak RSS {res['peak_rss_mb']:.0f} MB", flush=True)
    finally:
        stop_broker(broker, log_dir)

    print()
    print(f"{'case':6s} {'client':14s} {'records/s':>12s} {'MB/s':>8s} {'peak RSS MB':>12s} "
          f"{'CPU us/record: caller':>22s} {'client process':>15s} {'broker':>7s}")
    for label, by_client in results.items():
        for client, r in by_client.items():
            print(f"{label:6s} {client:14s} {r['rec_s']:>12,.0f} {r['mb_s']:>8.1f} "
                  f"{r['peak_rss_mb']:>12.0f} {r['caller_cpu_us']:>22.2f} "
                  f"{r['process_cpu_us']:>15.2f} {r['broker_cpu_us']:>7.2f}")
    summary: dict[str, float] = {}
    for label, by_client in results.items():
        for client, r in by_client.items():
            summary[f"{client}_rec_s_{label}"] = round(r["rec_s"], 1)
            summary[f"{client}_mb_s_{label}"] = round(r["mb_s"], 2)
            for k in ("caller_cpu_us", "process_cpu_us", "broker_cpu_us"):
                summary[f"{client}_{k}_{label}"] = round(r[k], 2)
        c = by_client.get("confluent", {}).get("rec_s") or float("nan")
        k = by_client.get("kafka_python", {}).get("rec_s") or float("nan")
        s = by_client.get("send", {}).get("rec_s", 0.0)
        col = by_client.get("columnar", {}).get("rec_s", 0.0)
        summary[f"ratio_send_vs_confluent_{label}"] = round(s / c, 3)
        summary[f"ratio_send_vs_kafka_python_{label}"] = round(s / k, 3)
        summary[f"ratio_columnar_vs_confluent_{label}"] = round(col / c, 3)
    summary["peak_rss_mb_send"] = round(max(
        (by.get("send", {}).get("peak_rss_mb", 0.0) for by in results.values()), default=0.0), 1)
    # Growth of the peak over the process after imports and warm-up: the part that
    # buffer.memory bounds (plus in-flight requests and interpreter overhead).
    summary["rss_growth_mb_send"] = round(max(
        (by.get("send", {}).get("rss_growth_mb", 0.0) for by in results.values()), default=0.0), 1)
    summary["buffer_memory_mb"] = BUFFER_MEMORY / 1024 / 1024
    print(json.dumps(summary))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2:])
    else:
        main()
