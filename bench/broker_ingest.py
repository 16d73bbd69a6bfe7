"""Benchmark: the broker's produce and fetch paths next to a minimal server on the same machine.

Owns: measuring, in one run,

1. ingest MB/s of the real broker (``python -m broker`` in a subprocess, fresh log
   directory, one topic of ``PARTITIONS`` partitions created with CreateTopics, default
   flush policy and segment size) under a load generator that sends pre-built Produce v8
   requests (acks=1, one 16-KiB or 1-MiB batch per request; uncompressed, and lz4 and
   zstd batches of hex text, about 2:1 for zstd), against a minimal "receive, CRC-check,
   append, ack" server (``baseline_server`` below: a subprocess of this script) fed by the
   same generator over the same connections with the same bytes; for a compressed batch
   the minimal server also decompresses its records in one call (the least a broker that
   checks records must do), so that the ratio measures the broker's overhead: the
   streaming decompression and the walk of every record (``broker.record.validation``).
   Goal: at least 0.7 of the minimal server.
2. fetch MB/s: a consumer reading everything back, with raw Fetch v11 requests
   (``FETCH_MAX_BYTES`` per partition, one connection per partition), from the broker and
   from the minimal server (which answers with ``os.sendfile`` from its files, as the
   broker does); and, as a second figure, confluent-kafka's Consumer (assign() from
   offset 0, value bytes counted, time capped at ``CONFLUENT_CAP_S``) against the broker.
3. server CPU seconds per GB (utime + stime from /proc/PID/stat, sampled around each
   timed phase; the lowest of the runs) for both servers, their ratio (the broker's CPU
   efficiency: steadier than MB/s when other processes compete for the cores), and both
   servers' peak RSS (VmHWM).

The minimal server has the broker's process / thread model (one thread per connection,
in one Python process, so one GIL; TCP_NODELAY and the broker's default 100-KB socket
buffers) and does, per request: read the size-prefixed frame (into a reused buffer,
several frames per recv when they fit), find the records by a minimal parse of the known
layout (one topic, one partition), check the batch CRC-32C (``crc32c``), stamp the base
offset, ``os.write`` the batch to its partition's file (one file per partition, under a
per-partition lock, in a sibling directory of the broker's log directory: same file
system), and send a pre-encoded Produce v8 response with the correlation id, partition
and base offset patched in.

Load generator (``Worker``, a separate process, so that it competes with either server
the same way on this machine's cores): the request frames are encoded once with
``broker.protocol.encode_request`` (``POOL`` distinct batches of random, incompressible
values, times ``PARTITIONS``); each send writes a fresh 12-byte head (size, key, version,
correlation id) and the rest of the pre-built frame with one ``sendmsg``.
``CONNECTIONS`` connections, one thread each, keep ``WINDOW`` requests in flight; request
k of connection c goes to partition (c + k) mod ``PARTITIONS``. Every response's
correlation id and error code are checked at their fixed offsets, and every 64th is
fully decoded with ``decode_response``. A fixed number of bytes is sent per size
(``INGEST_BYTES``); the clock runs from the first send to the last response, after a
short warm-up on the same connections. Each figure is the best of ``REPEAT`` runs, the two
servers interleaved; ``os.sync()`` between runs so that one run's writeback does not
throttle the next. The generator's own CPU share is printed: it must stay well below a
core for the figures to be the servers'.

Prints a table, then as its very last line one JSON object with the headline figures.
Run: ``.venv/bin/python bench/broker_ingest.py [--quick] [--kinds 16k,1m,...]`` (about a minute; --quick: a
tenth of the bytes, one run each, for trying changes).

``--security-protocol SASL_SSL [--kinds 1m,16k,...] [--quick]`` runs instead
``main_sasl_ssl``: the broker alone with a PLAINTEXT and a SASL_SSL listener (SCRAM-SHA-256
over TLSv1.3, ``sasl_ssl.py``), the same generator and raw fetches through each listener
(the worker's connections TLS-handshake and authenticate first; an SSL socket has no
sendmsg, so the 12-byte head and the 1-MiB frame go as two writes), 600 MB per run, median
and spread of 3 runs, and the SASL_SSL / PLAINTEXT ratios in the last JSON line.
"""

from __future__ import annotations

import bisect
import gc
import json
import os
import platform
import random
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

TOPIC = "ingest"
CLIENT_ID = "bench-ingest"
PARTITIONS = 4
CONNECTIONS = 4
WINDOW = 5
REPEAT = 3
# A kind is a batch size, optionally with the codec of its batches ("1m-zstd").
KINDS = ("16k", "1m", "16k-lz4", "1m-lz4", "16k-zstd", "1m-zstd")
INGEST_BYTES = {"16k": 400_000_000, "1m": 1_000_000_000}
BATCH_SHAPE = {"16k": (16, 1024 - 40), "1m": (64, 16384 - 40)}  # records per batch, value size
POOL = {"16k": 16, "1m": 4}  # distinct batches per partition
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def kind_size(kind: str) -> str:
    return kind.split("-")[0]


def kind_codec(kind: str) -> int:
    return CODEC_IDS[kind.split("-")[1]] if "-" in kind else 0
WARMUP_REQUESTS = 2 * WINDOW  # per connection, before the clock starts
FETCH_MAX_BYTES = 16 << 20  # partition_max_bytes of the raw fetches (max_bytes 4x that)
CONFLUENT_CAP_S = 60.0
SAMPLE_EVERY = 64  # responses fully decoded by the generator
SOCKET_BUFFER_BYTES = 102400  # the broker's socket.{send,receive}.buffer.bytes defaults
TLS_DIRECT_MIN = 64 * 1024  # through TLS, parts this large are written as they are, smaller ones joined
READY_RE = re.compile(r"started \(kafkalog\) listening on PLAINTEXT://([^ ,]+):(\d+)[ ,]")

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_HEAD = struct.Struct(">ihhi")  # frame size, api_key, api_version, correlation id
_BATCH_HEAD = struct.Struct(">qi")  # base offset, batch length
CLK_TCK = os.sysconf("SC_CLK_TCK")


# --- process statistics ------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), from /proc/PID/stat."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def settle() -> None:
    gc.collect()
    os.sync()


# --- wire layouts (one topic, one partition per request) -----------------------------
#
# Produce v8 request frame, after the int32 size prefix:
#   api_key i16 | api_version i16 | correlation_id i32 | client_id string
#   | transactional_id nullable string | acks i16 | timeout_ms i32
#   | [topic_data] i32 count | name string | [partition_data] i32 count
#   | index i32 | records: i32 length + bytes
# Produce v8 response frame, size prefix included (L = len(TOPIC)):
#   0 size | 4 correlation_id | 8 count | 12 name (2 + L) | 14+L count | 18+L index
#   | 22+L error_code i16 | 24+L base_offset i64 | 32+L log_append_time_ms i64
#   | 40+L log_start_offset i64 | 48+L record_errors count | 52+L error_message (-1)
#   | 54+L throttle_time_ms            (58 + L bytes)
# Fetch v11 request frame, after the size prefix and the header:
#   replica_id i32 | max_wait_ms i32 | min_bytes i32 | max_bytes i32 | isolation i8
#   | session_id i32 | session_epoch i32 | count i32 | topic string | count i32
#   | partition i32 | current_leader_epoch i32 | fetch_offset i64 | log_start_offset i64
#   | partition_max_bytes i32 | forgotten count i32 | rack_id string
# Fetch v11 response frame, size prefix included:
#   0 size | 4 correlation_id | 8 throttle | 12 error_code | 14 session_id | 18 count
#   | 22 topic (2 + L) | 24+L count | 28+L partition_index | 32+L error_code
#   | 34+L high_watermark | 42+L last_stable_offset | 50+L log_start_offset
#   | 58+L aborted_transactions (-1) | 62+L preferred_read_replica | 66+L records length
#   | 70+L records
L = len(TOPIC)
PRODUCE_RESPONSE_BYTES = 58 + L
FETCH_RESPONSE_HEAD_BYTES = 70 + L


def produce_body(partition: int, batch) -> dict:
    return {"transactional_id": None, "acks": 1, "timeout_ms": 30000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": partition, "records": batch}]}]}


def fetch_body(partition: int, offset: int) -> dict:
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 4 * FETCH_MAX_BYTES,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": TOPIC, "partitions": [
                {"partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                 "log_start_offset": -1, "partition_max_bytes": FETCH_MAX_BYTES}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def produce_response_template() -> bytes:
    from broker.protocol import RequestHeader, encode_response
    body = {"responses": [{"name": TOPIC, "partition_responses": [
        {"index": 0, "error_code": 0, "base_offset": 0, "log_append_time_ms": -1, "log_start_offset": 0,
         "record_errors": [], "error_message": None}]}], "throttle_time_ms": 0}
    out = b"".join(bytes(b) for b in encode_response(RequestHeader(0, 8, 0, CLIENT_ID), body))
    assert len(out) == PRODUCE_RESPONSE_BYTES, len(out)
    return out


def fetch_response_template() -> bytes:
    from broker.protocol import RequestHeader, encode_response
    body = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [{"topic": TOPIC, "partitions": [
        {"partition_index": 0, "error_code": 0, "high_watermark": 0, "last_stable_offset": 0,
         "log_start_offset": 0, "aborted_transactions": None, "preferred_read_replica": -1,
         "records": b""}]}]}
    out = b"".join(bytes(b) for b in encode_response(RequestHeader(1, 11, 0, CLIENT_ID), body))
    assert len(out) == FETCH_RESPONSE_HEAD_BYTES, len(out)
    return out


# --- the minimal server ---------------------------------------------------------------


class _Partition:
    __slots__ = ("lock", "fd", "read_fd", "next_offset", "position", "bases", "positions")

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.lock = threading.Lock()
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.read_fd = os.open(path, os.O_RDONLY)
        self.next_offset = 0
        self.position = 0
        self.bases: list[int] = []  # base offset of every batch, for fetch lookups
        self.positions: list[int] = []


def baseline_server(directory: str) -> None:
    """Receive, CRC-check (decompress a compressed batch's records), append, ack (and a
    sendfile Fetch), one thread per connection."""
    import crc32c
    import lz4.frame
    import zstandard
    crc = crc32c.crc32c
    zstd_local = threading.local()

    def zstd_decompress(data) -> bytes:
        dctx = getattr(zstd_local, "dctx", None)
        if dctx is None:
            dctx = zstd_local.dctx = zstandard.ZstdDecompressor()
        return dctx.decompressobj().decompress(data)

    decompress = {3: lz4.frame.decompress, 4: zstd_decompress}
    parts = [_Partition(Path(directory) / f"{TOPIC}-{p}" / "00000000000000000000.log")
             for p in range(PARTITIONS)]
    produce_template = produce_response_template()
    fetch_template = fetch_response_template()
    i16, i32, u32, i64 = _I16.unpack_from, _I32.unpack_from, _U32.unpack_from, _I64.unpack_from
    pack_i16, pack_i32, pack_i64 = _I16.pack_into, _I32.pack_into, _I64.pack_into
    write = os.write

    def produce(sock, frame, cid: int, pos: int) -> None:
        pos += 2 + max(i16(frame, pos)[0], 0)  # transactional_id
        pos += 2 + 4 + 4  # acks, timeout_ms, topic count (1)
        pos += 2 + i16(frame, pos)[0] + 4  # topic name, partition count (1)
        index = i32(frame, pos)[0]
        size = i32(frame, pos + 4)[0]
        records = frame[pos + 8:pos + 8 + size]
        part = parts[index]
        if size < 61 or crc(records[21:]) != u32(records, 17)[0]:
            error, base = 2, -1  # CORRUPT_MESSAGE
        else:
            codec = records[22] & 7
            if codec:  # decompress the records, as a broker must at least do to check them
                decompress[codec](records[61:])
            error = 0
            with part.lock:
                base = part.next_offset
                pack_i64(records, 0, base)
                part.next_offset = base + i32(records, 23)[0] + 1  # last offset delta
                written = write(part.fd, records)
                if written != size:
                    raise OSError("short write")
                part.bases.append(base)
                part.positions.append(part.position)
                part.position += size
        out = bytearray(produce_template)
        pack_i32(out, 4, cid)
        pack_i32(out, 18 + L, index)
        pack_i16(out, 22 + L, error)
        pack_i64(out, 24 + L, base)
        sock.sendall(out)

    def fetch(sock, frame, cid: int, pos: int) -> None:
        pos += 4 + 4 + 4 + 4 + 1 + 4 + 4 + 4  # up to the topic count (1)
        pos += 2 + i16(frame, pos)[0] + 4  # topic name, partition count (1)
        index = i32(frame, pos)[0]
        offset = i64(frame, pos + 8)[0]
        limit = i32(frame, pos + 24)[0]
        part = parts[index]
        with part.lock:
            hw, end = part.next_offset, part.position
            i = bisect.bisect_right(part.bases, offset) - 1
            start = part.positions[i] if i >= 0 and offset < hw else end
            first_end = part.positions[i + 1] if 0 <= i < len(part.positions) - 1 else end
        count = max(min(end - start, limit), first_end - start) if start < end else 0
        out = bytearray(fetch_template)
        pack_i32(out, 0, len(out) - 4 + count)
        pack_i32(out, 4, cid)
        pack_i32(out, 28 + L, index)
        pack_i64(out, 34 + L, hw)
        pack_i64(out, 42 + L, hw)
        pack_i32(out, 66 + L, count)
        sock.sendall(out)
        fd = sock.fileno()
        while count > 0:
            sent = os.sendfile(fd, part.read_fd, start, count)
            if sent == 0:
                raise OSError("file ended early")
            start += sent
            count -= sent

    def handle(sock, frame) -> None:
        api_key, version, cid = i16(frame, 0)[0], i16(frame, 2)[0], i32(frame, 4)[0]
        pos = 8 + 2 + max(i16(frame, 8)[0], 0)  # client_id
        if api_key == 0 and version == 8:
            produce(sock, frame, cid, pos)
        elif api_key == 1 and version == 11:
            fetch(sock, frame, cid, pos)
        else:
            raise ValueError(f"unexpected api {api_key} v{version}")

    def serve(sock: socket.socket) -> None:
        chunk = 1 << 20
        buf = bytearray(chunk)
        view = memoryview(buf)
        big = bytearray()
        start = end = 0
        try:
            while True:
                avail = end - start
                if avail >= 4:
                    total = 4 + i32(buf, start)[0]
                    if avail >= total:
                        handle(sock, view[start + 4:start + total])
                        start += total
                        continue
                    if total > chunk:  # a frame larger than the buffer: read it whole into its own
                        size = total - 4
                        if len(big) < size:
                            big = bytearray(size)
                        bview = memoryview(big)
                        have = avail - 4
                        bview[:have] = view[start + 4:end]
                        while have < size:
                            n = sock.recv_into(bview[have:size])
                            if not n:
                                return
                            have += n
                        handle(sock, bview[:size])
                        del bview
                        start = end = 0
                        continue
                    if start + total > chunk:  # move the partial frame to the front
                        view[:avail] = view[start:end]
                        start, end = 0, avail
                elif avail == 0:
                    start = end = 0
                elif start + 4 > chunk:
                    view[:avail] = view[start:end]
                    start, end = 0, avail
                n = sock.recv_into(view[end:])
                if not n:
                    return
                end += n
        except OSError:
            pass
        finally:
            sock.close()

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    print(f"port {listener.getsockname()[1]}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    while True:
        client, _ = listener.accept()
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKET_BUFFER_BYTES)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_BUFFER_BYTES)
        threading.Thread(target=serve, args=(client,), daemon=True).start()


# --- the worker: load generator and consumers (a subprocess) ---------------------------


def make_frames(kind: str) -> list[list[tuple[bytes, memoryview, int]]]:
    """Per connection, the cycle of (frame after its 12-byte head, batch bytes) it sends."""
    from broker.protocol import RequestHeader, encode_request
    from broker.record.batch import encode_batch
    count, size = BATCH_SHAPE[kind_size(kind)]
    codec = kind_codec(kind)
    rng = random.Random(kind)
    now = int(time.time() * 1000)
    # Compressed kinds: hex text of random bytes (about 2:1 for zstd, so that decompression
    # is real work); uncompressed ones: random bytes.
    value = (lambda: rng.randbytes(size // 2).hex().encode()) if codec else (lambda: rng.randbytes(size))
    batches = [encode_batch([(b"key-%d-%d" % (i, j), value(), now + j) for j in range(count)], compression=codec)
               for i in range(POOL[kind_size(kind)])]
    frames = {}
    for i, batch in enumerate(batches):
        for p in range(PARTITIONS):
            frame = b"".join(bytes(b) for b in encode_request(RequestHeader(0, 8, 0, CLIENT_ID),
                                                             produce_body(p, batch)))
            frames[i, p] = (memoryview(frame)[_HEAD.size:], len(batch))
    cycle = len(batches) * PARTITIONS
    return [[frames[(k // PARTITIONS) % len(batches), (c + k) % PARTITIONS] for k in range(cycle)]
            for c in range(CONNECTIONS)]


def _sendmsg_all(sock: socket.socket, parts: list) -> None:
    if isinstance(sock, ssl.SSLSocket):  # no sendmsg through TLS: small parts joined, large ones as they are
        _send_tls(sock, parts)
        return
    views = [memoryview(p) for p in parts]
    while views:
        sent = sock.sendmsg(views)
        while views and sent >= views[0].nbytes:
            sent -= views[0].nbytes
            views.pop(0)
        if views and sent:
            views[0] = views[0][sent:]


def _send_tls(sock: ssl.SSLSocket, parts: list) -> None:
    pending: list = []
    for p in parts:
        v = memoryview(p)
        if v.nbytes >= TLS_DIRECT_MIN:
            if pending:
                sock.sendall(b"".join(pending))
                pending = []
            sock.sendall(v)
        else:
            pending.append(v)
    if pending:
        sock.sendall(b"".join(pending))


def _connect(host: str, port: int, security: dict | None = None) -> socket.socket:
    """A PLAINTEXT connection, or with ``security`` (``{"cafile": ...}``) a SASL_SSL one
    (``sasl_ssl.connect``: TLS handshake, then SCRAM-SHA-256)."""
    if security:
        import sasl_ssl
        return sasl_ssl.connect(host, port, security["cafile"])
    sock = socket.create_connection((host, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


class _ProduceConnection:
    def __init__(self, host: str, port: int, frames: list, security: dict | None = None) -> None:
        self.sock = _connect(host, port, security)
        self.frames = frames
        self.cid = 0
        self.bytes = 0
        self.error: BaseException | None = None

    def run(self, n: int, start: threading.Event | None = None) -> None:
        try:
            if start is not None:
                start.wait()
            self._run(n)
        except BaseException as exc:  # noqa: BLE001 - reported by the worker
            self.error = exc

    def _run(self, n: int) -> None:
        from broker.protocol import decode_response
        sock, frames, cycle = self.sock, self.frames, len(self.frames)
        pack, unpack = _HEAD.pack, _I32.unpack_from
        err_at = 22 + L - 4  # the error code, in a response frame without its size prefix
        first = self.cid
        sent = acked = 0
        buf = bytearray()
        while acked < n:
            while sent < n and sent - acked < WINDOW:
                rest, nbytes = frames[(first + sent) % cycle]
                _sendmsg_all(sock, [pack(rest.nbytes + 8, 0, 8, first + sent), rest])
                self.bytes += nbytes
                sent += 1
            data = sock.recv(65536)
            if not data:
                raise ConnectionError("closed by the server")
            buf += data
            pos = 0
            while len(buf) - pos >= 4:
                size = unpack(buf, pos)[0]
                if len(buf) - pos - 4 < size:
                    break
                frame = memoryview(buf)[pos + 4:pos + 4 + size]
                cid = unpack(frame, 0)[0]
                if cid != first + acked:
                    raise AssertionError(f"response {cid} out of order (expected {first + acked})")
                if frame[err_at] or frame[err_at + 1]:
                    raise AssertionError(f"produce error code {_I16.unpack_from(frame, err_at)[0]}")
                if acked % SAMPLE_EVERY == 0:
                    _, body = decode_response(frame, 0, 8)
                    part = body.responses[0].partition_responses[0]
                    if part.error_code != 0 or part.base_offset < 0:
                        raise AssertionError(f"bad produce response {part}")
                del frame
                acked += 1
                pos += 4 + size
            del buf[:pos]
        self.cid = first + n


def _run_connections(conns, counts) -> None:
    start = threading.Event()
    threads = [threading.Thread(target=c.run, args=(n, start)) for c, n in zip(conns, counts)]
    for t in threads:
        t.start()
    start.set()
    for t in threads:
        t.join()
    for c in conns:
        if c.error is not None:
            raise c.error


def _walk_batches(records) -> tuple[int, int]:
    """(bytes of the complete batches, last offset + 1 or -1) of a fetched records view."""
    pos, n, nxt = 0, len(records), -1
    while pos + 12 <= n:
        base, length = _BATCH_HEAD.unpack_from(records, pos)
        end = pos + 12 + length
        if end > n:
            break
        nxt = base + _I32.unpack_from(records, pos + 23)[0] + 1
        pos = end
    return pos, nxt


def _recv_head(sock: socket.socket) -> bytes:
    if not isinstance(sock, ssl.SSLSocket):
        return sock.recv(4, socket.MSG_WAITALL)
    head = b""
    while len(head) < 4:  # through TLS: no MSG_WAITALL
        got = sock.recv(4 - len(head))
        if not got:
            raise ConnectionError("closed by the server")
        head += got
    return head


def _fetch_partition(host: str, port: int, partition: int, out: dict, security: dict | None = None,
                     max_bytes: int = 0) -> None:
    """Read ``partition`` from offset 0 to its high watermark (or, with ``max_bytes``, until
    that many bytes of complete batches have arrived)."""
    from broker.protocol import RequestHeader, decode_response, encode_request
    try:
        sock = _connect(host, port, security)
        buf = bytearray(2 * FETCH_MAX_BYTES)
        offset = nbytes = requests = 0
        while True:
            frame = encode_request(RequestHeader(1, 11, requests, CLIENT_ID), fetch_body(partition, offset))
            _sendmsg_all(sock, frame)
            requests += 1
            size = _I32.unpack(_recv_head(sock))[0]
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
            good, nxt = _walk_batches(part.records)
            del part, body, view
            nbytes += good
            if nxt < 0 or nxt >= hw or (max_bytes and nbytes >= max_bytes):
                break
            offset = nxt
        out.update(bytes=nbytes, requests=requests, high_watermark=hw)
        sock.close()
    except BaseException as exc:  # noqa: BLE001
        out["error"] = repr(exc)


def _confluent(bootstrap: str, expected_records: int, ready) -> dict:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-unused", "client.id": CLIENT_ID,
                  "enable.auto.commit": False, "fetch.max.bytes": 4 * FETCH_MAX_BYTES,
                  "max.partition.fetch.bytes": FETCH_MAX_BYTES, "fetch.wait.max.ms": 100,
                  "queued.max.messages.kbytes": 262144})
    ready()
    t0 = time.perf_counter()
    c.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    count = nbytes = 0
    deadline = t0 + CONFLUENT_CAP_S
    while count < expected_records and time.perf_counter() < deadline:
        for m in c.consume(num_messages=10000, timeout=0.5):
            if m.error() is None:
                count += 1
                nbytes += len(m.value())
    elapsed = time.perf_counter() - t0
    c.close()
    return {"records": count, "value_bytes": nbytes, "elapsed": elapsed, "capped": count < expected_records}


def worker() -> None:
    """Commands on stdin, one JSON object a line: prepare, print "ready", wait for "go",
    run, print the result as one JSON line."""
    import resource
    frames: dict[str, list] = {}
    out = sys.stdout

    def ready() -> None:
        print("ready", file=out, flush=True)
        if sys.stdin.readline().strip() != "go":
            raise SystemExit(1)

    for line in sys.stdin:
        cmd = json.loads(line)
        op = cmd["op"]
        try:
            if op == "ingest":
                kind = cmd["kind"]
                if kind not in frames:
                    frames[kind] = make_frames(kind)
                n_conns = cmd.get("connections", CONNECTIONS)
                conns = [_ProduceConnection(cmd["host"], cmd["port"], frames[kind][c % CONNECTIONS],
                                            cmd.get("security")) for c in range(n_conns)]
                _run_connections(conns, [WARMUP_REQUESTS] * n_conns)
                warm = sum(c.bytes for c in conns)
                batch_bytes = frames[kind][0][0][1]
                per_conn = cmd["bytes"] // batch_bytes // n_conns
                ready()
                r0 = resource.getrusage(resource.RUSAGE_SELF)
                t0 = time.perf_counter()
                _run_connections(conns, [per_conn] * n_conns)
                elapsed = time.perf_counter() - t0
                r1 = resource.getrusage(resource.RUSAGE_SELF)
                for c in conns:
                    c.sock.close()
                result = {"bytes": sum(c.bytes for c in conns) - warm, "requests": per_conn * n_conns,
                          "elapsed": elapsed, "batch_bytes": batch_bytes,
                          "gen_cpu": r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime}
            elif op == "fetch":
                ready()
                outs = [{} for _ in range(PARTITIONS)]
                t0 = time.perf_counter()
                threads = [threading.Thread(target=_fetch_partition, args=(
                    cmd["host"], cmd["port"], p, outs[p], cmd.get("security"), cmd.get("max_bytes", 0) // PARTITIONS))
                           for p in range(PARTITIONS)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                elapsed = time.perf_counter() - t0
                errors = [o["error"] for o in outs if "error" in o]
                if errors:
                    raise RuntimeError(errors[0])
                result = {"bytes": sum(o["bytes"] for o in outs), "requests": sum(o["requests"] for o in outs),
                          "records": sum(o["high_watermark"] for o in outs), "elapsed": elapsed}
            elif op == "confluent":
                result = _confluent(cmd["bootstrap"], cmd["records"], ready)
            else:
                raise ValueError(op)
        except BaseException as exc:  # noqa: BLE001 - reported to the driver
            result = {"error": repr(exc)}
        print(json.dumps(result), file=out, flush=True)


class Worker:
    """The driver's handle on a worker subprocess."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)

    def run(self, server_pid: int, **cmd) -> dict:
        """Run one command; returns its result with the server's CPU seconds meanwhile."""
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError(f"worker: {line or 'exited'}")
        settle()
        cpu0 = cpu_seconds(server_pid)
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        result = json.loads(self.proc.stdout.readline())
        result["server_cpu"] = cpu_seconds(server_pid) - cpu0
        if "error" in result:
            raise RuntimeError(f"worker {cmd['op']}: {result['error']}")
        return result

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(30)


# --- the driver ------------------------------------------------------------------------


def start_broker(work: Path, overrides: list[str] | None = None) -> tuple[subprocess.Popen, str, int]:
    """The broker subprocess; (process, host, port of its PLAINTEXT listener)."""
    log_dir = work / "broker-logs"
    cmd = [sys.executable, "-m", "broker", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
           "--override", f"log.dirs={log_dir}"]
    for value in overrides or ():
        cmd += ["--override", value]
    out_path, err_path = work / "broker.out", work / "broker.err"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=work, env=dict(os.environ, PYTHONPATH=ROOT))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        m = READY_RE.search(out_path.read_text())
        if m:
            return proc, m.group(1), int(m.group(2))
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"broker did not start: {err_path.read_text()[-2000:]}")


def create_topic(host: str, port: int) -> None:
    from broker.protocol import FrameDecoder, RequestHeader, decode_response, encode_request
    body = {"topics": [{"name": TOPIC, "num_partitions": PARTITIONS, "replication_factor": 1,
                        "assignments": [], "configs": []}], "timeout_ms": 10000, "validate_only": False}
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(b"".join(bytes(b) for b in encode_request(RequestHeader(19, 4, 1, CLIENT_ID), body)))
        decoder = FrameDecoder()
        frames = []
        while not frames:
            frames = decoder.feed(sock.recv(65536))
        _, response = decode_response(frames[0], 19, 4)
    if response.topics[0].error_code != 0:
        raise RuntimeError(f"CreateTopics failed: {response}")


def start_baseline(work: Path) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--baseline-server",
                             str(work / "baseline-logs")], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    line = proc.stdout.readline()
    if not line.startswith("port "):
        proc.kill()
        raise RuntimeError("baseline server did not start")
    return proc, int(line.split()[1])


def mb_s(r: dict) -> float:
    return r["bytes"] / r["elapsed"] / 1e6


def cpu_per_gb(r: dict) -> float:
    return r["server_cpu"] / (r["bytes"] / 1e9)


def main(quick: bool = False, kinds: tuple[str, ...] = KINDS) -> None:
    import crc32c
    scale, repeat = (0.1, 1) if quick else (1.0, REPEAT)
    print(f"python {platform.python_version()}, {os.cpu_count()} CPUs, crc32c {crc32c.__version__} "
          f"({'hardware' if crc32c.hardware_based else 'software'}), {CONNECTIONS} connections x "
          f"{WINDOW} in flight, {PARTITIONS} partitions, acks=1, best of {repeat}")
    load = os.getloadavg()[0]
    print(f"load average before the run: {load:.2f}"
          + ("  (other processes are busy: expect noisy figures)" if load > 0.5 else ""))
    work = Path(tempfile.mkdtemp(prefix="bench-broker-ingest-"))
    broker = baseline = worker_proc = None
    try:
        broker, host, port = start_broker(work)
        create_topic(host, port)
        baseline, base_port = start_baseline(work)
        worker_proc = Worker()
        servers = {"broker": (broker.pid, port), "baseline": (baseline.pid, base_port)}
        ingest: dict[tuple[str, str], list[dict]] = {}
        for kind in kinds:
            for rep in range(repeat):
                order = ("baseline", "broker") if rep % 2 == 0 else ("broker", "baseline")
                for name in order:
                    pid, p = servers[name]
                    r = worker_proc.run(pid, op="ingest", kind=kind, host="127.0.0.1", port=p,
                                        bytes=int(INGEST_BYTES[kind_size(kind)] * scale))
                    ingest.setdefault((name, kind), []).append(r)
                    print(f"  {kind:>8} {name:<8} run {rep + 1}: {mb_s(r):7.1f} MB/s, "
                          f"server {cpu_per_gb(r):5.2f} CPU s/GB, generator {r['gen_cpu'] / r['elapsed']:.0%} "
                          f"of a core", flush=True)
        fetch = {name: worker_proc.run(pid, op="fetch", host="127.0.0.1", port=p)
                 for name, (pid, p) in servers.items()}
        ck = worker_proc.run(broker.pid, op="confluent", bootstrap=f"{host}:{port}",
                             records=fetch["broker"]["records"])
        rss = {name: peak_rss_mb(pid) for name, (pid, _) in servers.items()}
        worker_proc.close()
    finally:
        for proc in (broker, baseline):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()
        if worker_proc is not None and worker_proc.proc.poll() is None:
            worker_proc.proc.kill()
        shutil.rmtree(work, ignore_errors=True)

    best = {key: max(runs, key=mb_s) for key, runs in ingest.items()}
    # CPU per GB, the lowest of the runs: less sensitive than MB/s to other processes
    # competing for the cores (the ratio of the two is the broker's CPU efficiency).
    cpu = {key: min(cpu_per_gb(r) for r in runs) for key, runs in ingest.items()}
    print(f"\ningest (best of {repeat})  batch B    MB  broker MB/s  minimal MB/s  ratio  broker CPU s/GB  "
          "minimal CPU s/GB  CPU ratio  generator CPU")
    for kind in kinds:
        b, m = best["broker", kind], best["baseline", kind]
        cb, cm = cpu["broker", kind], cpu["baseline", kind]
        print(f"  {kind:>8} batches {b['batch_bytes']:>8} {b['bytes'] / 1e6:5.0f}  {mb_s(b):11.1f}  {mb_s(m):12.1f}"
              f"  {mb_s(b) / mb_s(m):5.2f}  {cb:15.2f}  {cm:16.2f}  {cm / cb:9.2f}"
              f"  {b['gen_cpu'] / b['elapsed']:5.0%} / {m['gen_cpu'] / m['elapsed']:.0%}")
    fb, fm = fetch["broker"], fetch["baseline"]
    print(f"\nfetch back (Fetch v11, {FETCH_MAX_BYTES >> 20} MiB per partition, one connection per partition)")
    print(f"  broker:  {fb['bytes'] / 1e6:6.0f} MB in {fb['requests']:4d} requests  {mb_s(fb):7.1f} MB/s  "
          f"{cpu_per_gb(fb):5.2f} CPU s/GB")
    print(f"  minimal: {fm['bytes'] / 1e6:6.0f} MB in {fm['requests']:4d} requests  {mb_s(fm):7.1f} MB/s  "
          f"{cpu_per_gb(fm):5.2f} CPU s/GB")
    ck_mb_s = ck["value_bytes"] / ck["elapsed"] / 1e6
    print(f"  confluent-kafka Consumer (assign from 0) on the broker: {ck['records']} records, "
          f"{ck['value_bytes'] / 1e6:.0f} MB of values in {ck['elapsed']:.1f} s: {ck_mb_s:.1f} MB/s"
          + (" (capped)" if ck["capped"] else ""))
    print(f"\npeak RSS: broker {rss['broker']:.0f} MB, minimal server {rss['baseline']:.0f} MB")

    summary = {}
    for kind in kinds:
        b, m = best["broker", kind], best["baseline", kind]
        summary[f"ingest_mb_s_{kind}"] = round(mb_s(b), 1)
        summary[f"baseline_mb_s_{kind}"] = round(mb_s(m), 1)
        summary[f"ratio_{kind}"] = round(mb_s(b) / mb_s(m), 2)
        summary[f"cpu_s_per_gb_{kind}"] = round(cpu["broker", kind], 2)
        summary[f"baseline_cpu_s_per_gb_{kind}"] = round(cpu["baseline", kind], 2)
        summary[f"cpu_ratio_{kind}"] = round(cpu["baseline", kind] / cpu["broker", kind], 2)
    summary.update({
        "fetch_mb_s": round(mb_s(fb), 1), "baseline_fetch_mb_s": round(mb_s(fm), 1),
        "ratio_fetch": round(mb_s(fb) / mb_s(fm), 2), "fetch_cpu_s_per_gb": round(cpu_per_gb(fb), 2),
        "confluent_fetch_mb_s": round(ck_mb_s, 1), "connections": CONNECTIONS, "window": WINDOW,
        "partitions": PARTITIONS, "broker_peak_rss_mb": round(rss["broker"]),
        "baseline_peak_rss_mb": round(rss["baseline"]),
    })
    print(json.dumps(summary))


def main_sasl_ssl(quick: bool = False, kinds: tuple[str, ...] = ("1m",)) -> None:
    """``--security-protocol SASL_SSL``: the broker alone (no minimal server), one process with
    a PLAINTEXT and a SASL_SSL listener (``sasl_ssl``: SCRAM-SHA-256, PEM trust store), and
    per kind ``REPEAT`` ingest runs through each listener, then ``REPEAT`` fetches of as many
    bytes through each, the listeners interleaved; median and spread (min..max) of MB/s and
    of the broker's CPU s/GB, the SASL_SSL / PLAINTEXT ratio of the medians (goal: at least
    0.7 at 1-MiB batches), and as the last line one JSON object."""
    import statistics

    import sasl_ssl
    scale, repeat = (0.1, 1) if quick else (0.6, REPEAT)
    load = os.getloadavg()[0]
    print(f"python {platform.python_version()}, {os.cpu_count()} CPUs, {CONNECTIONS} connections x {WINDOW} "
          f"in flight, {PARTITIONS} partitions, acks=1, PLAINTEXT vs SASL_SSL ({sasl_ssl.MECHANISM}) of one "
          f"broker, {repeat} runs each; load average before the run: {load:.2f}")
    work = Path(tempfile.mkdtemp(prefix="bench-broker-ingest-sasl-ssl-"))
    broker = worker_proc = None
    runs: dict[tuple[str, str, str], list[dict]] = {}  # (listener, phase, kind) -> results
    try:
        pki = sasl_ssl.make_pki(work / "pki")
        broker, host, port = start_broker(work, sasl_ssl.broker_overrides(pki))
        ports = sasl_ssl.parse_listeners((work / "broker.out").read_text())
        create_topic(host, port)
        sasl_ssl.create_user(host, port)
        security = {"PLAINTEXT": None, "SASL_SSL": {"cafile": pki.path("ca.pem")}}
        worker_proc = Worker()
        for kind in kinds:
            nbytes = int(INGEST_BYTES[kind_size(kind)] * scale)
            for phase in ("ingest", "fetch"):
                for rep in range(repeat):
                    order = sasl_ssl.SECURITY_PROTOCOLS[::1 if rep % 2 == 0 else -1]
                    for listener in order:
                        if phase == "ingest":
                            r = worker_proc.run(broker.pid, op="ingest", kind=kind, host=host, port=ports[listener],
                                                bytes=nbytes, security=security[listener])
                        else:
                            os.sync()
                            r = worker_proc.run(broker.pid, op="fetch", host=host, port=ports[listener],
                                                max_bytes=nbytes, security=security[listener])
                        runs.setdefault((listener, phase, kind), []).append(r)
                        generator = f", generator {r['gen_cpu'] / r['elapsed']:.0%} of a core" if "gen_cpu" in r else ""
                        print(f"  {kind:>8} {phase:6} {listener:9} run {rep + 1}: {mb_s(r):7.1f} MB/s, "
                              f"broker {cpu_per_gb(r):5.2f} CPU s/GB{generator}", flush=True)
        worker_proc.close()
    finally:
        if broker is not None and broker.poll() is None:
            broker.send_signal(signal.SIGTERM)
            try:
                broker.wait(60)
            except subprocess.TimeoutExpired:
                broker.kill()
        if worker_proc is not None and worker_proc.proc.poll() is None:
            worker_proc.proc.kill()
        shutil.rmtree(work, ignore_errors=True)

    summary: dict = {"security_protocol": "SASL_SSL", "sasl_mechanism": sasl_ssl.MECHANISM, "runs": repeat}
    print(f"\n{'kind':>8} {'phase':6} {'listener':9} {'MB/s median':>11}  {'(min..max)':17} {'CPU s/GB':>8}")
    for (listener, phase, kind), results in runs.items():
        rates = [mb_s(r) for r in results]
        cpus = [cpu_per_gb(r) for r in results]
        key = f"{listener.lower()}_{phase}_{kind}"
        summary[f"{key}_mb_s"] = round(statistics.median(rates), 1)
        summary[f"{key}_mb_s_min"] = round(min(rates), 1)
        summary[f"{key}_mb_s_max"] = round(max(rates), 1)
        summary[f"{key}_cpu_s_per_gb"] = round(statistics.median(cpus), 2)
        print(f"{kind:>8} {phase:6} {listener:9} {statistics.median(rates):11.1f}  "
              f"({min(rates):.0f}..{max(rates):.0f}){'':6} {statistics.median(cpus):8.2f}")
    for kind in kinds:
        for phase in ("ingest", "fetch"):
            ratio = summary[f"sasl_ssl_{phase}_{kind}_mb_s"] / summary[f"plaintext_{phase}_{kind}_mb_s"]
            summary[f"ratio_{phase}_{kind}"] = round(ratio, 3)
            print(f"SASL_SSL / PLAINTEXT {phase} {kind}: {ratio:.2f}" + (" (goal >= 0.70)" if kind == "1m" else ""))
    print(json.dumps(summary))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker()
    elif len(sys.argv) > 2 and sys.argv[1] == "--baseline-server":
        baseline_server(sys.argv[2])
    elif "--security-protocol" in sys.argv:
        protocol = sys.argv[sys.argv.index("--security-protocol") + 1:][:1]
        if protocol == ["PLAINTEXT"]:
            main(quick="--quick" in sys.argv)
        elif protocol != ["SASL_SSL"]:
            raise SystemExit("--security-protocol: PLAINTEXT (the default run) or SASL_SSL")
        else:
            chosen = sys.argv[sys.argv.index("--kinds") + 1].split(",") if "--kinds" in sys.argv else ["1m"]
            unknown = [k for k in chosen if k not in KINDS]
            if unknown:
                raise SystemExit(f"--kinds: unknown {unknown}; one or more of {','.join(KINDS)}")
            main_sasl_ssl(quick="--quick" in sys.argv, kinds=tuple(chosen))
    else:
        chosen = sys.argv[sys.argv.index("--kinds") + 1].split(",") if "--kinds" in sys.argv else list(KINDS)
        unknown = [k for k in chosen if k not in KINDS]
        if unknown:
            raise SystemExit(f"--kinds: unknown {unknown}; one or more of {','.join(KINDS)}")
        main(quick="--quick" in sys.argv, kinds=tuple(chosen))
