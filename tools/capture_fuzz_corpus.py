"""Capture the fuzzing corpus of tests/fuzz/ from real clients (issue 19): run
confluent-kafka, kafka-python, aiokafka and kcat workloads (produce with each codec,
group consumption, admin calls) through a recording TCP proxy in front of a real broker,
and write

* ``tests/fuzz/corpus/request/<client>-<sha1>.bin``: every distinct request frame's
  payload (no size prefix), at most ``PER_CLIENT`` per client;
* ``tests/fuzz/corpus/frames/<client>-<sha1>.bin``: a chunk-size byte and the raw byte
  stream of one connection's first requests (size prefixes included);
* ``tests/fuzz/corpus/batch/<sha1>.bin``: the record batches of the captured Produce
  requests in the ``batch`` target's layout (attributes, count, records area);
* ``tests/fuzz/corpus/log_dir/<sha1>.bin``: the first KiB of real segments.

Run from the repository root: ``.venv/bin/python tools/capture_fuzz_corpus.py``.
"""

from __future__ import annotations

import hashlib
import select
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CORPUS = ROOT / "tests" / "fuzz" / "corpus"
PER_CLIENT = 60
MAX_FRAME = 64 * 1024


class RecordingProxy(threading.Thread):
    def __init__(self, target: tuple[str, int]) -> None:
        super().__init__(daemon=True)
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.frames: list[bytes] = []
        self.streams: list[bytes] = []
        self.lock = threading.Lock()

    def run(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._pair, args=(client,), daemon=True).start()

    def _pair(self, client: socket.socket) -> None:
        server = socket.create_connection(self.target)
        buf = b""
        stream = b""
        socks = [client, server]
        try:
            while True:
                r, _, _ = select.select(socks, [], [], 30)
                if not r:
                    return
                for s in r:
                    data = s.recv(65536)
                    if not data:
                        return
                    (server if s is client else client).sendall(data)
                    if s is client:
                        buf += data
                        if len(stream) < 16384:
                            stream += data
                        while len(buf) >= 4:
                            size = struct.unpack(">i", buf[:4])[0]
                            if len(buf) < 4 + size:
                                break
                            if size <= MAX_FRAME:
                                with self.lock:
                                    self.frames.append(buf[4:4 + size])
                            buf = buf[4 + size:]
        finally:
            with self.lock:
                if stream:
                    self.streams.append(stream)
            client.close()
            server.close()

    def take(self) -> tuple[list[bytes], list[bytes]]:
        with self.lock:
            frames, streams = self.frames, self.streams
            self.frames, self.streams = [], []
        return frames, streams


def workloads(bootstrap: str) -> dict[str, callable]:
    def confluent() -> None:
        import confluent_kafka
        from confluent_kafka.admin import AdminClient, NewTopic
        a = AdminClient({"bootstrap.servers": bootstrap})
        a.create_topics([NewTopic("ck", 2, 1)])["ck"].result(30)
        for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
            p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                                          "enable.idempotence": True})
            for i in range(20):
                p.produce("ck", b"value-%d" % i, key=b"k%d" % i, headers=[("h", b"v")])
            p.flush(30)
        c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "ckg",
                                      "auto.offset.reset": "earliest"})
        c.subscribe(["ck"])
        deadline = time.time() + 20
        got = 0
        while got < 100 and time.time() < deadline:
            got += len(c.consume(100, 0.5))
        c.commit()
        c.close()
        a.list_consumer_groups().result(30)

    def kafka_python() -> None:
        from kafka import KafkaConsumer, KafkaProducer
        for codec in (None, "gzip", "lz4", "zstd"):
            p = KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec)
            for i in range(20):
                p.send("kp", b"v%d" % i, key=b"k")
            p.flush()
            p.close()
        c = KafkaConsumer("kp", bootstrap_servers=bootstrap, group_id="kpg", auto_offset_reset="earliest",
                          consumer_timeout_ms=5000)
        for _ in c:
            pass
        c.close()

    def aiokafka() -> None:
        import asyncio

        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

        async def main() -> None:
            p = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type="gzip")
            await p.start()
            for i in range(20):
                await p.send_and_wait("aio", b"v%d" % i)
            await p.stop()
            c = AIOKafkaConsumer("aio", bootstrap_servers=bootstrap, group_id="aiog", auto_offset_reset="earliest")
            await c.start()
            await c.getmany(timeout_ms=3000)
            await c.commit()
            await c.stop()

        asyncio.run(main())

    def kcat() -> None:
        if not shutil.which("kcat"):
            return
        subprocess.run(["kcat", "-b", bootstrap, "-P", "-t", "kc", "-z", "lz4"], input=b"a\nb\nc\n", timeout=60)
        subprocess.run(["kcat", "-b", bootstrap, "-C", "-t", "kc", "-e", "-q"], capture_output=True, timeout=60)
        subprocess.run(["kcat", "-b", bootstrap, "-G", "kcg", "-e", "-q", "kc"], capture_output=True, timeout=60)
        subprocess.run(["kcat", "-b", bootstrap, "-L"], capture_output=True, timeout=60)

    return {"confluent": confluent, "kafka-python": kafka_python, "aiokafka": aiokafka, "kcat": kcat}


def sha(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()[:16]


def batches_of(frame: bytes) -> list[bytes]:
    """The record batches inside a Produce request payload, in the batch target's layout."""
    from broker.protocol import Reader, parse_request_header
    from broker.protocol.schema import decode
    from broker.protocol.versions import request_schema
    reader = Reader(memoryview(frame))
    header, _ = parse_request_header(reader)
    if header.api_key != 0:
        return []
    body = decode(request_schema(0, header.api_version), header.api_version, reader)
    out = []
    for t in body.topic_data:
        for p in t.partition_data:
            rec = bytes(p.records or b"")
            if len(rec) >= 61:
                attributes = rec[22] & 0x77
                count = struct.unpack(">i", rec[57:61])[0]
                out.append(bytes([attributes, (count >> 8) & 0xFF, count & 0xFF]) + rec[61:])
    return out


def main() -> None:
    from tests.support.broker import BrokerProcess

    work = Path(tempfile.mkdtemp(prefix="capture-"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        broker_port = s.getsockname()[1]
    proxy = RecordingProxy(("127.0.0.1", broker_port))
    proxy.start()
    # clients are told (Metadata) to come back through the proxy, not to the broker itself
    broker = BrokerProcess(work, {"auto.create.topics.enable": "true", "group.initial.rebalance.delay.ms": "0",
                                  "listeners": f"PLAINTEXT://127.0.0.1:{broker_port}",
                                  "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"})
    broker.start()
    bootstrap = f"127.0.0.1:{proxy.port}"
    for d in ("request", "frames", "batch", "log_dir"):
        shutil.rmtree(CORPUS / d, ignore_errors=True)
        (CORPUS / d).mkdir(parents=True)
    try:
        for name, fn in workloads(bootstrap).items():
            fn()
            time.sleep(0.5)
            frames, streams = proxy.take()
            unique = {sha(f): f for f in frames}
            for h, f in list(unique.items())[:PER_CLIENT]:
                (CORPUS / "request" / f"{name}-{h}.bin").write_bytes(f)
                for b in batches_of(f):
                    (CORPUS / "batch" / f"{sha(b)}.bin").write_bytes(b[:8192])
            for s in streams[:4]:
                (CORPUS / "frames" / f"{name}-{sha(s)}.bin").write_bytes(bytes([97]) + s[:4096])
            print(f"{name}: {len(unique)} distinct requests", flush=True)
    finally:
        broker.stop()
    segments = [seg for seg in sorted(work.glob("kafka-logs/*/00000000000000000000.log")) if seg.stat().st_size]
    for seg in segments[:12]:
        data = seg.read_bytes()[:1024]
        (CORPUS / "log_dir" / f"{sha(data)}.bin").write_bytes(data)
    shutil.rmtree(work, ignore_errors=True)
    for d in sorted(CORPUS.iterdir()):
        print(d.name, len(list(d.iterdir())), "files", sum(f.stat().st_size for f in d.iterdir()), "bytes")


if __name__ == "__main__":
    main()
