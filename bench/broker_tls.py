"""Benchmark: what TLS costs the broker, plaintext vs SSL listener of the same broker process.

Owns: one broker subprocess (``python -m broker``) with a PLAINTEXT and an SSL listener
(PKCS12 key store from a throw-away CA, ``tests/support/tls.py``; TLSv1.3, OpenSSL's
default suite AES-256-GCM), one topic of ``broker_ingest.PARTITIONS`` partitions, and for
each listener, interleaved, ``REPEAT`` runs of:

1. ingest: ``broker_ingest.CONNECTIONS`` connections (one thread each, in this process)
   keep ``broker_ingest.WINDOW`` pre-built Produce v8 requests (acks=1, one 1-MiB
   uncompressed batch each, ``broker_ingest.make_frames``) in flight; MB/s of batches from
   the first send to the last response; every response's correlation id and error code
   are checked.
2. fetch: one connection per partition reads its partition from offset 0 to the high
   watermark with raw Fetch v11 requests (16 MiB per partition per request); MB/s of
   complete batches. Through TLS the broker cannot use sendfile (``Connection._send_tls``).
3. the broker's CPU seconds per GB (utime + stime from /proc) of each phase.

4. the machine's floor without a broker (``raw_floor``): loopback TCP vs TLS between two
   threads, so that the broker's ratio can be read against what TLS itself costs here.

Prints, per listener and phase, the median and the spread (min..max) of the runs, the
TLS / plaintext ratio of the medians (goal: TLS keeps at least 0.7 of plaintext at 1-MiB
batches), then as its very last line one JSON object with those figures. The load
generator shares the machine with the broker and does the client side of TLS as well, so
the ratio is the cost of TLS on both ends of one machine (a pessimistic figure).

Run: ``.venv/bin/python bench/broker_tls.py [--quick]`` (--quick: a fifth of the bytes).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import broker_ingest as bi

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

KIND = "1m"
INGEST_BYTES = 600_000_000
REPEAT = 3


def start_broker(work: Path, pki) -> tuple[subprocess.Popen, dict[str, int]]:
    from tests.support.tls import STORE_PASSWORD

    work.mkdir(parents=True, exist_ok=True)
    out = work / "broker.out"
    cmd = [sys.executable, "-m", "broker", "--override", "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
           "--override", f"log.dirs={work / 'logs'}", "--override", "ssl.keystore.type=PKCS12",
           "--override", f"ssl.keystore.location={pki.path('server.p12')}",
           "--override", f"ssl.keystore.password={STORE_PASSWORD}"]
    with open(out, "wb") as f:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=f, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline:
        text = out.read_text()
        if "listening on" in text:
            ports = {name: int(port) for name, port in
                     __import__("re").findall(r"(\w+)://127\.0\.0\.1:(\d+)", text)}
            return proc, ports
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("the broker did not start")


class _Conn(bi._ProduceConnection):
    """broker_ingest's produce connection, optionally through TLS (an SSL socket has no
    sendmsg: head and frame are joined, a client-side copy)."""

    def __init__(self, port: int, frames: list, context: ssl.SSLContext | None) -> None:
        super().__init__("127.0.0.1", port, frames)
        if context is not None:
            self.sock = context.wrap_socket(self.sock, server_hostname="localhost")


_plain_sendmsg_all = bi._sendmsg_all


def _sendall(sock, parts) -> None:
    if isinstance(sock, ssl.SSLSocket):
        sock.sendall(b"".join(parts))
    else:
        _plain_sendmsg_all(sock, parts)


bi._sendmsg_all = _sendall  # broker_ingest's connections send through this too


def ingest(port: int, frames, context, nbytes: int) -> float:
    per_request = 1 << 20
    n = max(nbytes // per_request // bi.CONNECTIONS, bi.WINDOW)
    conns = [_Conn(port, frames[c], context) for c in range(bi.CONNECTIONS)]
    bi._run_connections(conns, [bi.WARMUP_REQUESTS] * len(conns))
    start_bytes = sum(c.bytes for c in conns)
    t0 = time.perf_counter()
    bi._run_connections(conns, [n] * len(conns))
    elapsed = time.perf_counter() - t0
    moved = sum(c.bytes for c in conns) - start_bytes
    for c in conns:
        c.sock.close()
    return moved / elapsed / 1e6


def _fetch_partition(port: int, partition: int, context, out: dict) -> None:
    from broker.protocol import RequestHeader, decode_response, encode_request
    try:
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if context is not None:
            sock = context.wrap_socket(sock, server_hostname="localhost")
        buf = bytearray(2 * bi.FETCH_MAX_BYTES)
        offset = nbytes = requests = 0
        while True:
            frame = encode_request(RequestHeader(1, 11, requests, bi.CLIENT_ID), bi.fetch_body(partition, offset))
            _sendall(sock, [bytes(b) for b in frame])
            requests += 1
            view = memoryview(buf)
            have = 0
            while have < 4:
                got = sock.recv_into(view[have:4])
                if not got:
                    raise ConnectionError("closed by the server")
                have += got
            size = bi._I32.unpack_from(buf, 0)[0]
            if size > len(buf):
                buf = bytearray(size)
                view = memoryview(buf)
            have = 0
            while have < size:
                got = sock.recv_into(view[have:size])
                if not got:
                    raise ConnectionError("closed by the server")
                have += got
            _, body = decode_response(view[:size], 1, 11)
            part = body.responses[0].partitions[0]
            if part.error_code != 0:
                raise AssertionError(f"fetch error {part.error_code}")
            hw = part.high_watermark
            good, nxt = bi._walk_batches(part.records)
            del part, body, view
            nbytes += good
            if nxt < 0 or nxt >= hw:
                break
            offset = nxt
        out.update(bytes=nbytes, requests=requests)
        sock.close()
    except BaseException as exc:  # noqa: BLE001
        out["error"] = repr(exc)


def fetch(port: int, context) -> float:
    outs = [{} for _ in range(bi.PARTITIONS)]
    threads = [threading.Thread(target=_fetch_partition, args=(port, p, context, outs[p]))
               for p in range(bi.PARTITIONS)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    for o in outs:
        if "error" in o:
            raise SystemExit(f"fetch failed: {o['error']}")
    return sum(o["bytes"] for o in outs) / elapsed / 1e6


def raw_floor(pki, total: int) -> dict[str, float]:
    """The machine's floor, no broker: one thread writing ``total`` bytes in 256-KiB
    writes to another that reads them, over loopback TCP and over TLS (same contexts as
    the broker and the bench's clients); MB/s and the writer's CPU seconds per GB."""
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(pki.path("server.pem"))
    client_ctx = ssl.create_default_context(cafile=pki.path("ca.pem"))
    out = {}
    for name, tls in (("tcp", False), ("tls", True)):
        lsock = socket.create_server(("127.0.0.1", 0))
        port = lsock.getsockname()[1]

        def reader(tls=tls, port=port):
            s = socket.create_connection(("127.0.0.1", port))
            if tls:
                s = client_ctx.wrap_socket(s, server_hostname="localhost")
            buf, n = bytearray(1 << 20), 0
            while n < total:
                k = s.recv_into(buf)
                if not k:
                    break
                n += k
            s.close()

        t = threading.Thread(target=reader)
        t.start()
        conn, _ = lsock.accept()
        if tls:
            conn = server_ctx.wrap_socket(conn, server_side=True)
        data = memoryview(os.urandom(256 << 10))
        cpu0, t0 = time.thread_time(), time.perf_counter()
        for _ in range(total // data.nbytes):
            conn.sendall(data)
        cpu, wall = time.thread_time() - cpu0, time.perf_counter() - t0
        t.join()
        conn.close()
        lsock.close()
        out[f"floor_{name}_mb_s"] = round(total / wall / 1e6, 1)
        out[f"floor_{name}_writer_cpu_s_per_gb"] = round(cpu / (total / 1e9), 3)
    return out


def main(quick: bool = False) -> None:
    from tests.support.tls import make_pki

    work = Path(tempfile.mkdtemp(prefix="bench-tls-"))
    pki = make_pki(work / "pki")
    nbytes = INGEST_BYTES // (5 if quick else 1)
    context = ssl.create_default_context(cafile=pki.path("ca.pem"))
    frames = bi.make_frames(KIND)
    results: dict[str, dict[str, list[float]]] = {"PLAINTEXT": {}, "SSL": {}}
    try:
        for run in range(1 if quick else REPEAT):
            for listener in ("PLAINTEXT", "SSL"):
                proc, ports = start_broker(work / f"{listener}-{run}", pki)
                try:
                    bi.create_topic("127.0.0.1", ports["PLAINTEXT"])
                    ctx = context if listener == "SSL" else None
                    cpu0 = bi.cpu_seconds(proc.pid)
                    mbs = ingest(ports[listener], frames, ctx, nbytes)
                    cpu1 = bi.cpu_seconds(proc.pid)
                    os.sync()
                    fmbs = fetch(ports[listener], ctx)
                    cpu2 = bi.cpu_seconds(proc.pid)
                    r = results[listener]
                    r.setdefault("ingest_mb_s", []).append(mbs)
                    r.setdefault("fetch_mb_s", []).append(fmbs)
                    r.setdefault("ingest_cpu_s_per_gb", []).append((cpu1 - cpu0) / (nbytes / 1e9))
                    r.setdefault("fetch_cpu_s_per_gb", []).append((cpu2 - cpu1) / (nbytes / 1e9))
                    print(f"run {run + 1} {listener:9s} ingest {mbs:7.1f} MB/s  fetch {fmbs:7.1f} MB/s", flush=True)
                finally:
                    proc.terminate()
                    proc.wait(30)
                    shutil.rmtree(work / f"{listener}-{run}", ignore_errors=True)
        pki_floor = make_pki(Path(tempfile.mkdtemp(prefix="bench-tls-pki-")))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    summary = {}
    print(f"\n{'listener':10s} {'figure':22s} {'median':>9s}   spread")
    for listener, figures in results.items():
        for name, values in figures.items():
            med = statistics.median(values)
            summary[f"{listener.lower()}_{name}"] = round(med, 2)
            print(f"{listener:10s} {name:22s} {med:9.2f}   {min(values):.2f}..{max(values):.2f}")
    for name in ("ingest_mb_s", "fetch_mb_s"):
        ratio = summary[f"ssl_{name}"] / summary[f"plaintext_{name}"]
        summary[f"tls_ratio_{name}"] = round(ratio, 3)
        print(f"TLS / plaintext {name}: {ratio:.2f} (goal >= 0.70)")
    try:
        floor = raw_floor(pki_floor, 256 << 20)
    finally:
        shutil.rmtree(pki_floor.dir, ignore_errors=True)
    print(f"machine floor (no broker, 256-KiB writes): TCP {floor['floor_tcp_mb_s']} MB/s, "
          f"TLS {floor['floor_tls_mb_s']} MB/s (ratio {floor['floor_tls_mb_s'] / floor['floor_tcp_mb_s']:.2f}); "
          f"writer CPU {floor['floor_tcp_writer_cpu_s_per_gb']} vs {floor['floor_tls_writer_cpu_s_per_gb']} s/GB")
    summary.update(floor)
    print(json.dumps(summary))


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
