"""Benchmark: where the CPU of one 16-KiB Produce request goes inside the broker.

Owns: a stage-by-stage breakdown of the broker's produce path, in process (no sockets), for
the request ``bench/broker_ingest.py`` sends (Produce v8, acks=1, one uncompressed batch
of 16 records of 984-byte values, about 16 KiB). A ``KafkaBroker`` is started in this
process on a temporary log directory with one 4-partition topic; each stage is then timed
on its own, nested calls being subtracted from their callers:

- ``request parse``: ``produce_fast.parse_produce_request`` of the frame (plus the private
  copy the socket layer's receive makes);
- ``dispatch``: ``KafkaApis.handle`` minus the produce handler, the parse and the encode
  (request counting, context, quotas and metrics, response type dispatch);
- ``handler``: the Produce handler minus ``UnifiedLog.append_as_leader`` (topic and
  partition lookup, transactional check, leader epoch, watchers, byte metrics, response
  tuples);
- ``record walk``: ``validation.check_records`` (every record of the batch walked);
- ``batch checks + CRC``: ``validator.analyze_single_batch`` minus the walk;
- ``offsets + append glue``: ``append_as_leader`` minus analysis and the write: offset
  assignment, roll check, segment and index append, producer state, high watermark;
- ``pwrite``: ``os.pwrite`` of the batch to a file of the same log directory;
- ``response encode``: ``produce_fast.encode_produce_response``.

Every figure is the lowest of ``REPEAT`` runs of ``N`` calls, in CPU time
(``time.process_time``), so that other processes on the machine disturb it less than they
disturb wall-clock figures; the sum of the stages is printed next to the measured whole.
Reference, in the same run: the "minimal loop" cost of the same request, the least any
broker must do in Python (copy, one CRC-32C, one pwrite, a pre-encoded response patched),
which is what ``broker_ingest.py``'s minimal server does per request besides its socket
calls. The last line is one JSON object with every stage in microseconds.

Run: ``.venv/bin/python bench/produce_profile.py`` (about 30 s).
"""

from __future__ import annotations

import json
import os
import platform
import random
import shutil
import struct
import sys
import tempfile
import time
import timeit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from broker.log.validator import AppendOrigin, analyze_single_batch  # noqa: E402
from broker.protocol import RequestHeader, encode_request  # noqa: E402
from broker.protocol.produce_fast import ProduceResult, encode_produce_response, parse_produce_request  # noqa: E402
from broker.record.batch import encode_batch  # noqa: E402
from broker.record.validation import check_records  # noqa: E402
from broker.server.broker import KafkaBroker  # noqa: E402
from broker.server.handlers import RequestContext  # noqa: E402
from broker.server.handlers.produce import handle as produce_handle  # noqa: E402

N = 2000
REPEAT = 7
# The topic keeps at most RETAIN bytes (segments of SEGMENT bytes; old ones deleted between
# repeats): gigabytes of appends would otherwise fill the page cache with dirty pages and
# time their writeback instead of the produce path.
SEGMENT, RETAIN = 32 << 20, 64 << 20
RECORDS, VALUE_BYTES = 16, 1024 - 40  # broker_ingest.py's 16-KiB batch shape
POOL = 16


class _Conn:
    """What ``KafkaApis.handle`` reads of a connection."""
    listener = "PLAINTEXT"
    local_address = ("127.0.0.1", 9092)
    peer_address = ("127.0.0.1", 50000)
    id = "bench"
    client_software = None

    def __init__(self) -> None:
        self.seen_apis: set = set()


def cpu_us(fn, cleanup=None, n: int = N) -> float:
    """Lowest CPU time of ``fn`` over REPEAT runs of ``n`` calls, in microseconds;
    ``cleanup`` (untimed) between runs."""
    fn()
    best = float("inf")
    timer = timeit.Timer(fn, timer=time.process_time)
    for _ in range(REPEAT):
        best = min(best, timer.timeit(n))
        if cleanup is not None:
            cleanup()
    return best / n * 1e6


def main() -> None:
    import crc32c
    work = tempfile.mkdtemp(prefix="bench-produce-profile-")
    broker = KafkaBroker({"log.dirs": os.path.join(work, "logs"), "listeners": "PLAINTEXT://127.0.0.1:0"})
    broker.start()
    try:
        broker.topics.create_topic("ingest", 4, {"segment.bytes": str(SEGMENT), "retention.bytes": str(RETAIN)})
        rng = random.Random(20)
        now = int(time.time() * 1000)
        batches = [encode_batch([(b"key-%d-%d" % (i, j), rng.randbytes(VALUE_BYTES), now + j)
                                 for j in range(RECORDS)]) for i in range(POOL)]
        frames = []
        for i, batch in enumerate(batches):
            body = {"transactional_id": None, "acks": 1, "timeout_ms": 30000,
                    "topic_data": [{"name": "ingest", "partition_data": [{"index": 0, "records": batch}]}]}
            frames.append(b"".join(bytes(p) for p in encode_request(RequestHeader(0, 8, i, "bench"), body))[4:])
        conn = _Conn()
        state = broker.apis.state
        log = broker.topics.get_log("ingest", 0)
        vconfig = log._validator_config
        k = [0]

        def next_frame() -> memoryview:
            k[0] += 1
            return memoryview(bytearray(frames[k[0] % POOL]))

        def next_batch() -> memoryview:
            k[0] += 1
            return memoryview(bytearray(batches[k[0] % POOL]))

        header, body = parse_produce_request(next_frame())
        ctx = RequestContext(header, "PLAINTEXT", conn.local_address, conn.peer_address, conn.id)
        result = ProduceResult([("ingest", [(0, 0, 12345, -1, 0, [], None)])], 0)
        fd = os.open(os.path.join(work, "logs", "plain.bin"), os.O_WRONLY | os.O_CREAT, 0o644)
        position = [0]

        def pwrite() -> None:
            batch = batches[k[0] % POOL]
            k[0] += 1
            os.pwrite(fd, batch, position[0])
            position[0] = (position[0] + len(batch)) % (256 << 20)

        response = bytearray(encode_produce_response(0, 8, result)[0])
        offset_field = len(response) - 4 - 8 * 3 - 2 - 4 - 2  # ..base_offset, append time, start, errors
        minimal_header = struct.Struct(">qi")

        def minimal() -> None:  # what broker_ingest.py's minimal server does between its socket calls
            frame = next_frame()
            records = frame[len(frame) - len(batches[k[0] % POOL]):]
            if crc32c.crc32c(records[21:]) != struct.unpack_from(">I", records, 17)[0]:
                raise AssertionError("crc")
            minimal_header.pack_into(records, 0, position[0], len(records) - 12)
            os.pwrite(fd, records, position[0])
            position[0] = (position[0] + len(records)) % (256 << 20)
            struct.pack_into(">q", response, offset_field, position[0])

        def trim() -> None:
            log.delete_old_segments()

        whole = cpu_us(lambda: broker.apis.handle(conn, next_frame()), trim)
        parse = cpu_us(lambda: parse_produce_request(next_frame()))
        handler = cpu_us(lambda: produce_handle(state, ctx, parse_produce_request(next_frame())[1]), trim) - parse
        append = cpu_us(lambda: log.append_as_leader(next_batch(), leader_epoch=0), trim)
        analyze = cpu_us(lambda: analyze_single_batch(next_batch(), vconfig, now, AppendOrigin.CLIENT))
        walk = cpu_us(lambda: check_records(batches[0], 61, len(batches[0]), 0, RECORDS, 1 << 30))
        write = cpu_us(pwrite)
        encode = cpu_us(lambda: encode_produce_response(7, 8, result))
        minimal_us = cpu_us(minimal)
        os.close(fd)
        stages = {
            "request_parse": parse,
            "dispatch": whole - handler - parse - encode,
            "handler": handler - append,
            "record_walk": walk,
            "batch_checks_crc": analyze - walk,
            "offsets_append_glue": append - analyze - write,
            "pwrite": write,
            "response_encode": encode,
        }
    finally:
        broker.shutdown()
        shutil.rmtree(work, ignore_errors=True)
    print(f"python {platform.python_version()}, crc32c {crc32c.__version__}; one Produce v8 request of "
          f"{len(frames[0])} bytes ({RECORDS} records of {VALUE_BYTES} B), CPU us, lowest of {REPEAT} x {N}")
    for name, us in stages.items():
        print(f"  {name:<22} {us:7.2f} us  {us / whole:5.0%}")
    print(f"  {'whole request':<22} {whole:7.2f} us  (dispatch is the rest: whole minus the other stages)")
    print(f"  minimal loop (copy, CRC, pwrite, patched response): {minimal_us:.2f} us  "
          f"-> ratio {minimal_us / whole:.2f}")
    print(json.dumps({**{f"{k}_us": round(v, 2) for k, v in stages.items()}, "whole_us": round(whole, 2),
                      "minimal_us": round(minimal_us, 2), "ratio": round(minimal_us / whole, 2)}))


if __name__ == "__main__":
    main()
