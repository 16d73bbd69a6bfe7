"""Poison batches at produce (issue 13; RELIABILITY.md F5, F6, I12): every batch the broker
accepts can be read by every client.

Against a real broker subprocess, over a raw socket (Produce v8): batches with a correct
CRC but records that do not parse (uncompressed garbage; gzip, snappy, lz4 and zstd of
garbage; garbage that is not even a compressed stream; record counts that disagree with
the records; record lengths pointing past the batch; negative and overlong varints;
trailing bytes), decompression bombs (gzip and zstd of 1 GiB of zeros, and valid-looking
records whose value inflates to 256 MiB - 1 GiB), and records that break a rule (offset
deltas out of order, a null key on a compacted topic, one timestamp out of range).

Each is refused with Kafka's code (CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, INVALID_RECORD or
INVALID_TIMESTAMP with KIP-467 ``record_errors`` naming the record, and an
``error_message``), the broker's peak memory (VmHWM, reset before each case through
/proc/PID/clear_refs) grows by far less than the inflated size, the same connection then
produces a good batch, and at the end confluent-kafka, kafka-python and aiokafka consumers
read the partition to its end: exactly the good records, in order.
"""

from __future__ import annotations

import asyncio
import random
import struct
import time
import uuid
import zlib
from pathlib import Path

import lz4.frame
import pytest
import zstandard

from broker.protocol import ApiKey, ErrorCode
from broker.record import batch as rb
from broker.record.varint import encode_varint
from tests.support.broker import BrokerProcess, RawClient

pytestmark = pytest.mark.timeout(600)

NOW = int(time.time() * 1000)
GIB = 1 << 30
PEAK_SLACK_KB = 64 * 1024  # far below every inflated size here (256 MiB .. 1 GiB)
TOPIC = f"poison-{uuid.uuid4().hex[:8]}"
COMPACTED = f"poison-compacted-{uuid.uuid4().hex[:8]}"
STRICT_TS = f"poison-ts-{uuid.uuid4().hex[:8]}"


# --- building batches ----------------------------------------------------------------------


def framed(payload: bytes, count: int, codec: int = 0, ts: int = NOW) -> bytes:
    """A v2 batch around ``payload`` (already compressed with ``codec``) with a right CRC."""
    out = bytearray(rb.build_batch(payload, count=count, base_timestamp=ts, max_timestamp=ts))
    struct.pack_into(">h", out, rb.ATTRIBUTES_OFFSET, codec)
    struct.pack_into(">I", out, rb.CRC_OFFSET, rb.compute_crc(out, 0, len(out)))
    return bytes(out)


def records(n: int, tag: str) -> bytes:
    return b"".join(rb.encode_record(i, i, b"k%d" % i, f"{tag}-{i}".encode()) for i in range(n))


def record_with(offset_delta: int = 0, key_len: bytes | None = None, length: bytes | None = None,
                tail: bytes = b"") -> bytes:
    body = b"\x00" + encode_varint(0) + encode_varint(offset_delta)
    body += (key_len if key_len is not None else encode_varint(1) + b"k") + encode_varint(1) + b"v" + b"\x00"
    body += tail
    return (length if length is not None else encode_varint(len(body))) + body


def zeros_stream(compressor, total: int, prefix: bytes = b"", suffix: bytes = b"") -> bytes:
    """``prefix`` + ``total`` zero bytes + ``suffix`` through a streaming compressor object
    (``compress``/``flush``), 1 MiB at a time: the zeros are never held."""
    zero = bytes(1 << 20)
    parts = [compressor.compress(prefix)]
    for _ in range(total >> 20):
        parts.append(compressor.compress(zero))
    parts.append(compressor.compress(suffix))
    parts.append(compressor.flush())
    return b"".join(parts)


def bomb_record_prefix(value_size: int) -> bytes:
    """The bytes of one record before its ``value_size``-byte value (its header count, 0,
    follows the value): a valid record whose value is all zeros."""
    body_len = 1 + 1 + 1 + 2 + len(encode_varint(value_size)) + value_size + 1
    return encode_varint(body_len) + b"\x00" + encode_varint(0) + encode_varint(0) + encode_varint(1) + b"k" \
        + encode_varint(value_size)


class Lz4Stream:
    """An LZ4 frame compressed piece by piece (``compress`` then ``flush``)."""

    def __init__(self, block_size: int = lz4.frame.BLOCKSIZE_MAX64KB, block_linked: bool = False) -> None:
        self.c = lz4.frame.LZ4FrameCompressor(block_size=block_size, block_linked=block_linked)
        self.started = False

    def compress(self, data: bytes) -> bytes:
        head = b"" if self.started else self.c.begin()
        self.started = True
        return head + self.c.compress(data)

    def flush(self) -> bytes:
        return self.c.flush()


def gzip_stream():
    return zlib.compressobj(9, zlib.DEFLATED, 31)


def zstd_stream():
    return zstandard.ZstdCompressor(level=3).compressobj()


# --- the broker and its answers --------------------------------------------------------------


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    # 2 MiB batches (the gzip bombs are ~1 MiB compressed): a decompression budget of
    # max(64 MiB, 64 x 2 MiB) = 128 MiB.
    b = BrokerProcess(tmp_path_factory.mktemp("poison"), {"message.max.bytes": str(2 << 20)}, name="poison")
    b.start()
    with RawClient(b.host, b.port, "poison-admin") as admin:
        for name, configs in ((TOPIC, []), (COMPACTED, [{"name": "cleanup.policy", "value": "compact"}]),
                              (STRICT_TS, [{"name": "message.timestamp.before.max.ms", "value": "3600000"}])):
            r = admin.request(ApiKey.CREATE_TOPICS, 4, {"topics": [{
                "name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [],
                "configs": configs}], "timeout_ms": 5000})
            assert r.topics[0].error_code == 0, r
    yield b
    b.stop()


@pytest.fixture(scope="module")
def conn(broker):
    with RawClient(broker.host, broker.port, "poison-producer", timeout=120) as c:
        yield c


def produce(conn: RawClient, batch: bytes, topic: str = TOPIC, version: int = 8):
    r = conn.request(ApiKey.PRODUCE, version, {"transactional_id": None, "acks": -1, "timeout_ms": 30000,
                                               "topic_data": [{"name": topic, "partition_data": [
                                                   {"index": 0, "records": batch}]}]})
    return r.responses[0].partition_responses[0]


def status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field}")


GOOD: dict[str, list[bytes]] = {}


def good(conn: RawClient, topic: str, tag: str) -> None:
    """Produce one good record on the same connection; remember its value."""
    values = GOOD.setdefault(topic, [])
    value = f"good-{len(values)}-{tag}".encode()
    p = produce(conn, rb.encode_batch([(b"key", value, NOW)]), topic)
    assert p.error_code == ErrorCode.NONE, p
    values.append(value)


def refused(broker, conn: RawClient, batch: bytes, code: int, topic: str = TOPIC, tag: str = "") -> object:
    """Good record, bad batch (refused with ``code``, bounded peak memory), good record."""
    good(conn, topic, tag + "-before")
    try:
        Path(f"/proc/{broker.pid}/clear_refs").write_text("5")  # resets VmHWM to the current RSS
    except OSError:
        pass
    rss_before = status_kb(broker.pid, "VmRSS")
    p = produce(conn, batch, topic)
    peak = status_kb(broker.pid, "VmHWM")
    assert p.error_code == code, (p.error_code, p.error_message)
    assert p.base_offset == -1 and p.error_message, p
    assert peak - rss_before < PEAK_SLACK_KB, f"peak memory grew by {peak - rss_before} KiB"
    good(conn, topic, tag + "-after")
    return p


# --- the cases -----------------------------------------------------------------------------------

GARBAGE = random.Random(13).randbytes(2000)
CORRUPT = ErrorCode.CORRUPT_MESSAGE


def test_uncompressed_garbage_records(broker, conn):
    refused(broker, conn, framed(GARBAGE, 3), CORRUPT, tag="garbage")
    refused(broker, conn, framed(b"\x00" * 500, 3), CORRUPT, tag="zeros")


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=["gzip", "snappy", "lz4", "zstd"])
def test_compressed_garbage_records(broker, conn, codec):
    """F5/F6: a valid compressed stream of records that do not parse, and bytes that are no
    compressed stream at all, and a valid stream cut short."""
    bad = rb.build_batch(GARBAGE, count=3, compression=codec, base_timestamp=NOW, max_timestamp=NOW)
    refused(broker, conn, bad, CORRUPT, tag=f"codec{codec}-garbage")
    refused(broker, conn, framed(GARBAGE, 3, codec), CORRUPT, tag=f"codec{codec}-notastream")
    whole = rb.build_batch(records(50, "cut"), count=50, compression=codec, base_timestamp=NOW, max_timestamp=NOW)
    refused(broker, conn, framed(whole[rb.RECORDS_OFFSET:-8], 50, codec), CORRUPT, tag=f"codec{codec}-cut")


@pytest.fixture(scope="module")
def gzip_gib_zeros() -> bytes:
    return zeros_stream(gzip_stream(), GIB)


def test_f5_gzip_of_a_gib_of_zeros(broker, conn, gzip_gib_zeros):
    assert len(gzip_gib_zeros) < 2 << 20
    refused(broker, conn, framed(gzip_gib_zeros, 1, codec=1), CORRUPT, tag="gzip-gib")


def test_f5_zstd_of_a_gib_and_64_mib_of_zeros(broker, conn):
    for size in (64 << 20, GIB):
        refused(broker, conn, framed(zeros_stream(zstd_stream(), size), 1, codec=4), CORRUPT, tag=f"zstd-{size}")


@pytest.mark.parametrize("codec, size", [(4, GIB), (1, 256 << 20), (3, 256 << 20)], ids=["zstd", "gzip", "lz4"])
def test_f5_valid_records_inflating_past_the_budget(broker, conn, codec, size):
    """One well-formed record whose value is ``size`` zero bytes: walked with its value
    skipped as it streams, refused once the output passes the 128-MiB budget."""
    make = {1: gzip_stream, 3: Lz4Stream, 4: zstd_stream}[codec]
    payload = zeros_stream(make(), size, prefix=bomb_record_prefix(size), suffix=b"\x00")
    assert len(payload) < 2 << 20
    p = refused(broker, conn, framed(payload, 1, codec), ErrorCode.MESSAGE_TOO_LARGE, tag=f"bomb{codec}")
    assert "budget" in p.error_message


def test_record_count_disagrees_with_the_records(broker, conn):
    raw = records(3, "count")
    more = rb.build_batch(raw, count=4, base_timestamp=NOW, max_timestamp=NOW)
    fewer = rb.build_batch(raw, count=2, base_timestamp=NOW, max_timestamp=NOW)
    refused(broker, conn, more, CORRUPT, tag="count-more")
    refused(broker, conn, fewer, CORRUPT, tag="count-fewer")
    for codec in (1, 4):
        refused(broker, conn, rb.build_batch(raw, count=4, compression=codec, base_timestamp=NOW,
                                             max_timestamp=NOW), CORRUPT, tag=f"count-more-{codec}")
        refused(broker, conn, rb.build_batch(raw, count=2, compression=codec, base_timestamp=NOW,
                                             max_timestamp=NOW), CORRUPT, tag=f"count-fewer-{codec}")


def test_lengths_past_the_batch_and_bad_varints(broker, conn):
    cases = {
        "length-past-batch": record_with(length=encode_varint(10_000)),
        "length-negative": record_with(length=encode_varint(-20)),
        "key-length-past-record": record_with(key_len=encode_varint(500) + b"k"),
        "key-length-negative": record_with(key_len=encode_varint(-5) + b"k"),
        "varint-overlong": record_with(key_len=b"\xff\xff\xff\xff\xff\x01"),
        "varint-overflow": record_with(key_len=b"\xff\xff\xff\xff\x7f"),
        "header-count-negative": record_with(tail=b"")[:-1] + encode_varint(-3),
        "trailing-bytes": record_with() + b"\x00\x00",
    }
    for name, raw in cases.items():
        refused(broker, conn, framed(raw, 1), CORRUPT, tag=name)
        refused(broker, conn, rb.build_batch(raw, count=1, compression=4, base_timestamp=NOW, max_timestamp=NOW),
                CORRUPT, tag=name + "-zstd")


def test_offset_deltas_out_of_order_name_the_record(broker, conn):
    raw = record_with(0) + record_with(5) + record_with(2)
    for codec in (0, 3):
        p = refused(broker, conn, rb.build_batch(raw, count=3, compression=codec, base_timestamp=NOW,
                                                 max_timestamp=NOW), ErrorCode.INVALID_RECORD, tag="deltas")
        assert [(e.batch_index, "offset delta" in e.batch_index_error_message) for e in p.record_errors] == [(1, True)]


def test_null_key_on_a_compacted_topic(broker, conn):
    batch = rb.encode_batch([(b"a", b"1", NOW), (None, b"2", NOW), (b"c", b"3", NOW), (None, b"4", NOW)],
                            compression=2)
    p = refused(broker, conn, batch, ErrorCode.INVALID_RECORD, topic=COMPACTED, tag="nullkey")
    assert [e.batch_index for e in p.record_errors] == [1, 3]
    assert all("key" in e.batch_index_error_message for e in p.record_errors)


def test_one_record_timestamp_out_of_range(broker, conn):
    """The header's base and max timestamps are in range; record 1 is two days old."""
    raw = (rb.encode_record(0, 0, b"a", b"1") + rb.encode_record(1, -2 * 86_400_000, b"b", b"2")
           + rb.encode_record(2, 5, b"c", b"3"))
    batch = rb.build_batch(raw, count=3, base_timestamp=NOW, max_timestamp=NOW + 5, compression=4)
    p = refused(broker, conn, batch, ErrorCode.INVALID_TIMESTAMP, topic=STRICT_TS, tag="ts")
    assert [e.batch_index for e in p.record_errors] == [1]


# --- afterwards: every client reads every partition to its end ------------------------------------


def _confluent(broker, topic: str, n: int) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "poison-ck", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < n and time.monotonic() < deadline:
            for m in c.consume(1000, 0.5):
                assert m.error() is None, m.error()
                got.append(m.value())
        return got
    finally:
        c.close()


def _kafka_python(broker, topic: str, n: int) -> list[bytes]:
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < n and time.monotonic() < deadline:
            for recs in c.poll(500).values():
                got.extend(r.value for r in recs)
        return got
    finally:
        c.close()


def _aiokafka(broker, topic: str, n: int) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> list[bytes]:
        c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
        await c.start()
        try:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            got: list[bytes] = []
            deadline = time.monotonic() + 60
            while len(got) < n and time.monotonic() < deadline:
                for recs in (await c.getmany(timeout_ms=500)).values():
                    got.extend(r.value for r in recs)
            return got
        finally:
            await c.stop()

    return asyncio.run(run())


@pytest.mark.parametrize("client", [_confluent, _kafka_python, _aiokafka],
                         ids=["confluent", "kafka-python", "aiokafka"])
def test_every_client_reads_every_partition_to_its_end(broker, conn, client):
    assert GOOD.get(TOPIC), "run with the cases above"
    for topic, values in GOOD.items():
        assert client(broker, topic, len(values)) == values, topic
    assert "Traceback" not in broker.stderr_text()
