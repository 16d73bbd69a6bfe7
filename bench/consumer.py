"""Consumer throughput: our KafkaConsumer's per-record poll() and columnar poll_arrow(),
confluent-kafka's Consumer and kafka-python's KafkaConsumer, against this project's
broker, in one run.

One broker subprocess (``python -m broker``) serves every case. For each value size
(100 bytes and 1 KiB; half random and half repeated bytes, cycled from a pool of 4096),
one single-partition topic is produced once by confluent-kafka (lz4, linger.ms 5, 1 MiB
batches) and read by every client. Each case runs in its own Python subprocess: it
assign()s the partition from offset 0 and times from the assign to the last of the
topic's records (connection and metadata included, the same for every client). Every
client touches each value (its length) as an application would; the columnar case
touches the value column's buffers once per batch (what pandas / Arrow compute do). Fetch
settings are each client's defaults; max.poll.records / max_records 500 (Kafka's).
confluent-kafka reads with consume(num_messages=500), its fastest Python path.
(Its defaults hold it down on small records: librdkafka stops fetching once
queued.min.messages are queued and waits fetch.queue.backoff.ms, 1 s, before fetching
again; the README gives its figure with that backoff off.)

Each topic is read ``--runs`` times (default 3) by every client, the clients' order
rotating from run to run. Prints each result, a table of the median and range (min-max)
of records/s, the ratios with goals (columnar >= 2x confluent-kafka;
per-record >= 5x kafka-python) computed within each run, with their median and range,
then, as its very last line, one JSON object with all those figures.

Usage: python bench/consumer.py [--quick] [--runs N]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from broker_process import start_broker, stop_broker

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

CASES = (("100b", 100, 1_000_000), ("1k", 1024, 300_000))
CLIENTS = ("poll", "columnar", "confluent", "kafka_python")
MAX_POLL_RECORDS = 500


def _values(size: int, count: int = 4096) -> list[bytes]:
    import random
    rnd = random.Random(size)
    half = size // 2
    return [rnd.randbytes(half) + bytes([65 + i % 26]) * (size - half) for i in range(count)]


def _produce(bootstrap: str, topic: str, size: int, n: int) -> None:
    from confluent_kafka import Producer
    pool = _values(size)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "compression.type": "lz4",
                  "batch.size": 1 << 20, "acks": "all"})
    for i in range(n):
        while True:
            try:
                p.produce(topic, value=pool[i % len(pool)], partition=0)
                break
            except BufferError:
                p.poll(0.05)
        if i % 10000 == 0:
            p.poll(0)
    assert p.flush(120) == 0, "records not delivered"


# -- one case, in a child process ------------------------------------------------------


def _run_case(client: str, bootstrap: str, topic: str, n: int) -> dict:
    got = nbytes = 0
    # Imports before the clock (pyarrow's alone takes a few hundred ms).
    if client in ("poll", "columnar"):
        import broker.client.consumer.consumer  # noqa: F401
    elif client == "confluent":
        import confluent_kafka  # noqa: F401
    else:
        import kafka  # noqa: F401
    t0 = time.perf_counter()
    if client in ("poll", "columnar"):
        from broker.client.consumer import KafkaConsumer, TopicPartition
        c = KafkaConsumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest",
                           "max.poll.records": MAX_POLL_RECORDS})
        c.assign([TopicPartition(topic, 0)])
        if client == "poll":
            while got < n:
                for r in c.poll(1000):
                    nbytes += len(r.value)
                    got += 1
        else:
            while got < n:
                for rb in c.poll_arrow(1000).values():
                    values = rb.column(4)
                    nbytes += values.buffers()[2].size if values.buffers()[2] else 0
                    got += rb.num_rows
        c.close()
    elif client == "confluent":
        from confluent_kafka import Consumer, TopicPartition
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench",
                      "enable.auto.commit": False})
        c.assign([TopicPartition(topic, 0, 0)])
        while got < n:
            for m in c.consume(num_messages=MAX_POLL_RECORDS, timeout=1.0):
                if m.error():
                    raise SystemExit(str(m.error()))
                nbytes += len(m.value())
                got += 1
        c.close()
    else:
        from kafka import KafkaConsumer, TopicPartition
        c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                          auto_offset_reset="earliest", max_poll_records=MAX_POLL_RECORDS)
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        while got < n:
            for records in c.poll(timeout_ms=1000, max_records=MAX_POLL_RECORDS).values():
                for r in records:
                    nbytes += len(r.value)
                    got += 1
        c.close()
    seconds = time.perf_counter() - t0
    return {"records": got, "seconds": seconds, "rec_s": got / seconds,
            "mb_s": nbytes / seconds / 1e6}


def _child(argv: list[str]) -> None:
    client, bootstrap, topic, n = argv
    print("RESULT " + json.dumps(_run_case(client, bootstrap, topic, int(n))), flush=True)


# -- the driver ------------------------------------------------------------------------


def _run_child(client: str, bootstrap: str, topic: str, n: int, label: str) -> dict:
    proc = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", client, bootstrap, topic,
         str(n)], cwd=ROOT, capture_output=True, text=True, timeout=900)
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    if proc.returncode != 0 or not line:
        print(f"{client} {label} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}",
              file=sys.stderr)
        return {"records": 0, "seconds": float("nan"), "rec_s": 0.0, "mb_s": 0.0}
    return json.loads(line[-1][len("RESULT "):])


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def main() -> None:
    quick = "--quick" in sys.argv
    runs = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 3
    log_dir = tempfile.mkdtemp(prefix="bench-consumer-")
    broker, bootstrap = start_broker(log_dir)
    # results[label][client]: one result per run
    results: dict[str, dict[str, list[dict]]] = {}
    try:
        topics = {}
        for label, size, n in CASES:
            if quick:
                n //= 10
            topic = f"bench-consume-{label}-{int(time.time() * 1000) % 100000}"
            _produce(bootstrap, topic, size, n)
            topics[label] = (topic, n)
        for run in range(runs):
            print(f"run {run + 1}/{runs}", flush=True)
            for label, _size, _n in CASES:
                topic, n = topics[label]
                # Rotate the order of the clients from run to run, so that none always
                # runs first (or last) while other work shares the machine.
                order = CLIENTS[run % len(CLIENTS):] + CLIENTS[:run % len(CLIENTS)]
                for client in order:
                    res = _run_child(client, bootstrap, topic, n, label)
                    results.setdefault(label, {}).setdefault(client, []).append(res)
                    print(f"  {label:5s} {client:13s} {res['rec_s']:>12,.0f} rec/s "
                          f"{res['mb_s']:>8.1f} MB/s", flush=True)
    finally:
        stop_broker(broker, log_dir)

    summary: dict[str, object] = {"runs": runs}
    print()
    print(f"median (min-max) of {runs} runs")
    print(f"{'case':6s} {'client':14s} {'records/s':>12s} {'min':>12s} {'max':>12s} {'MB/s':>8s}")
    for label, by_client in results.items():
        for client, rs in by_client.items():
            rates = [r["rec_s"] for r in rs]
            print(f"{label:6s} {client:14s} {_median(rates):>12,.0f} {min(rates):>12,.0f} "
                  f"{max(rates):>12,.0f} {_median([r['mb_s'] for r in rs]):>8.1f}")
            summary[f"{client}_rec_s_{label}"] = round(_median(rates), 1)
            summary[f"{client}_rec_s_{label}_range"] = [round(min(rates), 1),
                                                       round(max(rates), 1)]
    # Ratios within each run (both figures measured minutes apart on the same broker),
    # then their median and range over the runs.
    goals = {"columnar_vs_confluent": 2.0, "poll_vs_kafka_python": 5.0}
    pairs = {"columnar_vs_confluent": ("columnar", "confluent"),
             "poll_vs_kafka_python": ("poll", "kafka_python"),
             "poll_vs_confluent": ("poll", "confluent")}
    print()
    for label, by_client in results.items():
        for name, (a, b) in pairs.items():
            rs = [_ratio(x["rec_s"], y["rec_s"]) for x, y in zip(by_client[a], by_client[b])]
            med = _median(rs)
            summary[f"ratio_{name}_{label}"] = round(med, 3)
            summary[f"ratio_{name}_{label}_range"] = [round(min(rs), 3), round(max(rs), 3)]
            goal = goals.get(name)
            verdict = "" if goal is None else (f" goal >= {goal}: "
                                               + ("met" if med >= goal else "NOT met"))
            print(f"{label:6s} {name:24s} {med:6.2f} ({min(rs):.2f}-{max(rs):.2f}){verdict}")
            if goal is not None:
                summary[f"goal_{name}_{label}_met"] = med >= goal
    print(json.dumps(summary))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2:])
    else:
        main()
