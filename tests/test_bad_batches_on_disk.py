"""Batches already on disk that cannot be read (issue 13: every batch the broker accepts can
be read by every client; here, the batches it did not get to refuse).

A real log directory is written with the broker's ``UnifiedLog`` (``LogWriter``), then the
record bytes of some batches are damaged in the ``.log`` file, sizes kept, CRC-32C
recomputed (so only a record-level reader can tell): a key length of -7 in record 3, a
gzip payload of garbage, a zstd payload inflating to 80 MiB (a decompression bomb), a
records count one short (the records end before the batch end). Every reader then names
the topic-partition, the batch's offsets and what is wrong, never hangs, never holds the
bomb in memory, and per its contract fails or skips the batch and goes on with the rest:

- recovery keeps the CRC-valid batches (Kafka's LogSegment.recover) and logs what it cuts
  with the partition, position, offset and reason (RELIABILITY R1, torn tail);
- ``RangeFetcher`` (network mode's Arrow fetch) raises ``CorruptBatchError`` after the rows
  before it, or reports a ``DataLoss`` per bad batch and returns all the rest;
- ``PartitionPoller`` / ``kafkalog consume`` return the records before it, then raise /
  exit 1 naming it (Kafka's consumer: CorruptRecordException, the console consumer stops);
- ``kafkalog dump-log --deep-iteration`` prints the error in place of the batch's records,
  goes on, lists the bad batches on stderr and exits 1;
- the Spark source, direct and network mode: failOnDataLoss=true fails the query naming
  the partition and offsets; false returns every other record and logs a warning.

RELIABILITY ids: I12 (the batches the validator refuses at produce time; here already on
disk), F4 (a records count larger than the bytes: refused before allocating), F5 (the
decompression bomb: decompressed in chunks against the 64 MiB budget, no OOM), F6 (only
``DecodeError`` subclasses, here the typed ``CorruptBatchError``), F11 (no hang: a bad
batch is never fetched again and again), R1 (recovery cuts only a torn tail, logged).
"""

from __future__ import annotations

import logging
import random
import shutil
import struct
import zlib

import pytest
import zstandard

from broker.client.consumer.fetcher import RangeFetcher
from broker.client.consumer.poller import PartitionPoller
from broker.record.batch import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    RECORDS_OFFSET,
    crc32c,
    iter_batch_headers,
)
from broker.record.columnar import decode_to_arrow, iter_arrow
from broker.record.errors import CorruptBatchError
from broker.record.varint import decode_varint, decode_varlong
from spark_kafkalog.cli.main import main
from spark_kafkalog.errors import KafkaDataLossError
from spark_kafkalog.readers.direct import DirectRangeReader
from spark_kafkalog.readers.network import NetworkRangeReader
from tests.support.broker import BrokerProcess
from tests.support.spark import LogWriter

T0 = 1_700_000_000_000
TOPIC = "bad"
N_BATCHES, PER_BATCH = 8, 5
CODECS = [0, 0, 1, 3, 4, 2, 0, 0]  # per batch: none, none, gzip, lz4, zstd, snappy, none, none
BOMB_BYTES = 80 << 20  # past the decoders' 64 MiB default budget
# base offset of each damaged batch -> what the readers must say about it
BAD = {
    5: "record 3: key length -7 out of range",
    10: "record 0: record length -",  # the gzip garbage, decompressed
    20: "zstd data inflates beyond the budget of 67108864 bytes",
    30: "records end",
}
GOOD_OFFSETS = [o for o in range(N_BATCHES * PER_BATCH) if o - o % PER_BATCH not in BAD]


def _value(offset: int) -> bytes:
    return random.Random(offset).randbytes(600)  # incompressible: room for the bomb


def _fix_crc(raw: bytearray, pos: int, size: int) -> None:
    struct.pack_into(">I", raw, pos + CRC_OFFSET, crc32c(bytes(raw[pos + ATTRIBUTES_OFFSET:pos + size])))


def _key_length_at(raw: bytearray, pos: int, size: int, record: int) -> int:
    """Byte position of the key length varint of ``record`` in an uncompressed batch."""
    end = pos + size
    p = pos + RECORDS_OFFSET
    for _ in range(record):
        length, p = decode_varint(raw, p, end)
        p += length
    _, p = decode_varint(raw, p, end)  # length
    p += 1  # attributes
    _, p = decode_varlong(raw, p, end)  # timestampDelta
    _, p = decode_varint(raw, p, end)  # offsetDelta
    return p


def _gzip_garbage(size: int) -> bytes:
    """A valid gzip stream (stored blocks: 23 bytes of overhead) of ``size`` bytes whose
    content is not records."""
    c = zlib.compressobj(0, zlib.DEFLATED, 31)
    out = c.compress((b"\xff\xfe garbage " * size)[:size - 23]) + c.flush()
    assert len(out) == size
    return out


def _zstd_bomb(size: int) -> bytes:
    """A zstd frame of BOMB_BYTES zeros, padded to ``size`` bytes by a skippable frame."""
    bomb = zstandard.ZstdCompressor().compress(bytes(BOMB_BYTES))
    pad = size - len(bomb) - 8
    assert pad >= 0
    return bomb + struct.pack("<II", 0x184D2A50, pad) + bytes(pad)


def damage(log_path) -> None:
    """Damage the batches of ``BAD`` in ``log_path`` in place (sizes kept, CRCs right)."""
    raw = bytearray(log_path.read_bytes())
    for pos, h in list(iter_batch_headers(bytes(raw))):
        size = h.size_in_bytes
        payload = slice(pos + RECORDS_OFFSET, pos + size)
        if h.base_offset == 5:
            raw[_key_length_at(raw, pos, size, 3)] = 13  # zigzag(-7), one byte like the key's 3
        elif h.base_offset == 10:
            raw[payload] = _gzip_garbage(size - RECORDS_OFFSET)
        elif h.base_offset == 20:
            raw[payload] = _zstd_bomb(size - RECORDS_OFFSET)
        elif h.base_offset == 30:
            struct.pack_into(">i", raw, pos + 57, PER_BATCH - 1)  # recordsCount, one short
        else:
            continue
        _fix_crc(raw, pos, size)
    log_path.write_bytes(bytes(raw))


def write_damaged_log(root, *, segment_bytes: int = 1 << 20) -> None:
    """``TOPIC``-0: N_BATCHES batches of PER_BATCH records, those of ``BAD`` damaged."""
    w = LogWriter(root, segment_bytes=segment_bytes)
    for b in range(N_BATCHES):
        w.append(TOPIC, 0, [(b"k%02d" % (b * PER_BATCH + j), _value(b * PER_BATCH + j), T0 + b)
                            for j in range(PER_BATCH)], compression=CODECS[b])
    w.close()
    for log_path in sorted((root / f"{TOPIC}-0").glob("*.log")):
        damage(log_path)


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad-batches") / "kafka-logs"
    write_damaged_log(root)
    return root


@pytest.fixture(scope="module")
def broker(tmp_path_factory, logdir):
    """A real broker started on (a copy of) the damaged log directory: it loads it."""
    work = tmp_path_factory.mktemp("bad-broker")
    shutil.copytree(logdir, work / "kafka-logs")
    b = BrokerProcess(work).start()
    yield b
    b.stop()


def offsets_of(batches) -> list[int]:
    return [o for rb in batches for o in rb.column("offset").to_pylist()]


def assert_names_each_bad_batch(messages: list[str]) -> None:
    for base, what in BAD.items():
        found = [m for m in messages if f"offsets [{base}, {base + PER_BATCH - 1}]" in m]
        assert found and what in found[0] and f"{TOPIC}-0" in found[0], (base, messages)


# --- the record layer ---------------------------------------------------------------------


def test_columnar_decoder_names_the_bad_batch_or_skips_it(logdir):
    """F4/F5/F6: the Arrow decoder yields the rows before the first bad batch, then raises
    CorruptBatchError with its offsets and reason; with on_bad_batch, every bad batch
    (the zstd bomb included, stopped at its budget) is reported and skipped."""
    data = next((logdir / f"{TOPIC}-0").glob("*.log")).read_bytes()
    got = []
    with pytest.raises(CorruptBatchError) as info:
        for rb in iter_arrow(data):
            got.extend(rb.column("offset").to_pylist())
    assert got == list(range(5))
    assert (info.value.base_offset, info.value.last_offset) == (5, 9)
    assert str(info.value).startswith("Record batch at offsets [5, 9] (byte position ")
    assert str(info.value).endswith("is invalid: record 3: key length -7 out of range")
    bad: list[CorruptBatchError] = []
    assert offsets_of(iter_arrow(data, on_bad_batch=bad.append)) == GOOD_OFFSETS
    assert [(e.base_offset, e.last_offset) for e in bad] == [(b, b + PER_BATCH - 1) for b in BAD]
    assert_names_each_bad_batch([str(e.with_partition(TOPIC, 0)) for e in bad])
    # one batch per unit too (the bad one found without the unit-wide fallback)
    bad.clear()
    assert offsets_of(iter_arrow(data, max_bytes_per_batch=1, on_bad_batch=bad.append)) == GOOD_OFFSETS
    assert len(bad) == len(BAD)
    with pytest.raises(CorruptBatchError, match=r"offsets \[5, 9\]"):
        decode_to_arrow(data)


# --- recovery -------------------------------------------------------------------------------


def test_recovery_keeps_crc_valid_batches_and_logs_what_it_cuts(tmp_path, caplog):
    """R1: recovery (no clean-shutdown marker) checks CRC, sizes and offsets only:
    the damaged but CRC-valid batches and everything after them are kept; a torn tail is
    cut and the cut is logged with the partition directory, byte position and offset."""
    from broker.log.config import LogConfig
    from broker.log.unified_log import UnifiedLog

    root = tmp_path / "kafka-logs"
    write_damaged_log(root)
    log_path = next((root / f"{TOPIC}-0").glob("*.log"))
    intact = log_path.stat().st_size
    with open(log_path, "ab") as f:
        f.write(b"\x00" * 8 + struct.pack(">i", 500) + b"torn")  # a torn tail: 16 bytes
    caplog.set_level(logging.WARNING, logger="broker.log")
    ulog = UnifiedLog.create(root / f"{TOPIC}-0", LogConfig.from_props({"segment.bytes": 1 << 20}),
                             last_shutdown_clean=False)
    try:
        assert ulog.log_end_offset == N_BATCHES * PER_BATCH
    finally:
        ulog.close()
    assert log_path.stat().st_size == intact
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any(f"/{TOPIC}-0/" in m and f"Truncated 16 bytes from byte offset {intact} " in m
               and "(the segment now ends after offset 39): a partial batch" in m
               for m in warnings), warnings
    assert any(f"corruption found in segment 0 of {TOPIC}-0: truncated 16 bytes (the log now "
               "ends at offset 40)" in m for m in warnings), warnings


# --- the network fetcher and the poller (a real broker serving the damaged log) -------------


def test_broker_loads_the_damaged_log(broker):
    """The broker starts on the damaged directory and keeps every batch (recovery does
    not decode records): the log ends where it was written."""
    from broker.client.consumer.client import ConsumerNetworkClient
    from broker.client.consumer.offsets import latest_offsets

    client = ConsumerNetworkClient({"bootstrap.servers": broker.bootstrap})
    try:
        assert list(latest_offsets(client, [(TOPIC, 0)]).values()) == [N_BATCHES * PER_BATCH]
    finally:
        client.close()


def test_fetcher_raises_corrupt_batch_error_after_the_rows_before_it(broker):
    """F6/F11: RangeFetcher yields the rows before the bad batch, then raises a
    typed error naming topic, partition, the batch's offsets and the reason; a range
    starting after it reads on (no refetch of the same offset for ever)."""
    got = []
    with RangeFetcher({"bootstrap.servers": broker.bootstrap}) as fetcher:
        with pytest.raises(CorruptBatchError) as info:
            for rb in fetcher.fetch(TOPIC, 0, 0, N_BATCHES * PER_BATCH):
                got.extend(rb.column("offset").to_pylist())
        assert got == list(range(5))
        e = info.value
        assert (e.topic, e.partition, e.base_offset, e.last_offset) == (TOPIC, 0, 5, 9)
        assert str(e).startswith(f"Record batch of {TOPIC}-0 at offsets [5, 9] ")
        assert str(e).endswith("record 3: key length -7 out of range")
        # small responses: the bomb alone in one, the fetch offset moves past each batch
        with pytest.raises(CorruptBatchError, match=r"bad-0 at offsets \[20, 24\] .*zstd data "
                           r"inflates beyond the budget of 67108864 bytes"):
            list(fetcher.fetch(TOPIC, 0, 15, 25))
        assert offsets_of(fetcher.fetch(TOPIC, 0, 35, 40)) == list(range(35, 40))


@pytest.mark.parametrize("partition_bytes", [1 << 20, 1])
def test_fetcher_with_on_data_loss_skips_each_bad_batch(broker, partition_bytes):
    """F11: with on_data_loss (failOnDataLoss=false) each bad batch is one DataLoss of its
    offsets inside the range and every other record is returned, whether the bad batches
    share a response with good ones or come one per response."""
    losses = []
    with RangeFetcher({"bootstrap.servers": broker.bootstrap}, on_data_loss=losses.append,
                      max_partition_fetch_bytes=partition_bytes) as fetcher:
        assert offsets_of(fetcher.fetch(TOPIC, 0, 7, N_BATCHES * PER_BATCH)) == \
            [o for o in GOOD_OFFSETS if o >= 7]
    assert [(x.start, x.end) for x in losses] == [(7, 10), (10, 15), (20, 25), (30, 35)]
    assert_names_each_bad_batch([x.reason for x in losses])


def test_poller_returns_the_records_before_then_raises_until_seek(broker):
    """F6/F11, as Kafka's consumer (CorruptRecordException): the records before the bad batch, then an
    error naming it on every poll (the position stays), until seek() moves past it."""
    with PartitionPoller({"bootstrap.servers": broker.bootstrap}) as poller:
        poller.assign({(TOPIC, 0): 0})
        got = []
        while len(got) < 5:
            got.extend(r.offset for r in poller.poll(10_000))
        assert got == list(range(5))
        for _ in range(2):
            with pytest.raises(CorruptBatchError, match=r"^Record batch of bad-0 at offsets "
                               r"\[5, 9\] .*record 3: key length -7 out of range$"):
                poller.poll(10_000)
            assert poller.position((TOPIC, 0)) == 5
        poller.seek((TOPIC, 0), 10)
        with pytest.raises(CorruptBatchError, match=r"offsets \[10, 14\]"):
            poller.poll(10_000)
        poller.seek((TOPIC, 0), 15)
        got = []
        while len(got) < 5:
            got.extend(r.offset for r in poller.poll(10_000))
        assert got == list(range(15, 20))
        with pytest.raises(CorruptBatchError, match=r"offsets \[20, 24\] .*zstd data inflates"):
            poller.poll(10_000)


@pytest.mark.parametrize("arrow", [False, True], ids=["poll", "poll_arrow"])
def test_kafka_consumer_returns_the_records_before_then_raises_until_seek(broker, arrow):
    """KafkaConsumer, both poll modes, as the poller: the records before the bad batch, then
    the error on every poll with the position at the batch, until seek() moves past it."""
    from broker.client.consumer import KafkaConsumer

    def offsets(c):
        if arrow:
            return [o for rb in c.poll_arrow(10_000).values()
                    for o in rb.column("offset").to_pylist()]
        return [r.offset for r in c.poll(10_000)]

    with KafkaConsumer({"bootstrap.servers": broker.bootstrap,
                        "auto.offset.reset": "earliest"}) as c:
        c.assign([(TOPIC, 0)])
        got = []
        while len(got) < 5:
            got.extend(offsets(c))
        assert got == list(range(5))
        for _ in range(2):
            with pytest.raises(CorruptBatchError, match=r"^Record batch of bad-0 at offsets "
                               r"\[5, 9\] .*record 3: key length -7 out of range$"):
                offsets(c)
            assert c.position((TOPIC, 0)) == 5
        c.seek((TOPIC, 0), 15)
        got = []
        while len(got) < 5:
            got.extend(offsets(c))
        assert got == list(range(15, 20))
        with pytest.raises(CorruptBatchError, match=r"offsets \[20, 24\] .*zstd data inflates"):
            offsets(c)


def test_kafkalog_consume_stops_with_the_error(broker, capsysbinary):
    """``kafkalog consume``, as Kafka's console consumer: the records before the bad batch
    are printed, then one error line naming partition and offsets, exit code 1."""
    code = main(["consume", "--bootstrap-server", broker.bootstrap, "--topic", TOPIC,
                 "--from-beginning", "--print-offset", "--property", "print.value=false",
                 "--timeout-ms", "20000"])
    captured = capsysbinary.readouterr()
    out, err = captured.out.decode().splitlines(), captured.err.decode()
    assert code == 1
    assert [line.split()[0] for line in out] == [f"Offset:{o}" for o in range(5)]
    assert ("kafkalog consume: error: CorruptBatchError: Record batch of bad-0 at offsets [5, 9] (byte position "
            in err and "record 3: key length -7 out of range" in err), err
    assert "Processed a total of 5 messages" in err


# --- dump-log ---------------------------------------------------------------------------------


def test_dump_log_prints_each_error_and_goes_on(logdir, capsys):
    """``kafkalog dump-log --deep-iteration``: the bad batch's line, then the error in
    place of its records; the next batches are dumped; stderr lists the bad batches with
    their offsets and the exit code is 1 (Kafka's tool fails at such a batch)."""
    log_path = next((logdir / f"{TOPIC}-0").glob("*.log"))
    code = main(["dump-log", "--deep-iteration", "--files", str(log_path)])
    captured = capsys.readouterr()
    out, err = captured.out.splitlines(), captured.err.splitlines()
    assert code == 1
    batches = [line for line in out if line.startswith("baseOffset: ")]
    assert len(batches) == N_BATCHES and all("isvalid: true" in b for b in batches)
    errors = [line for line in out if line.startswith("| records could not be decoded: ")]
    assert len(errors) == len(BAD)
    for base, what in BAD.items():
        i = next(i for i, line in enumerate(out) if line.startswith(f"baseOffset: {base} "))
        assert out[i + 1].startswith("| records could not be decoded: ") and what in out[i + 1]
    records = [int(line.split()[2]) for line in out if line.startswith("| offset: ")]
    assert records == GOOD_OFFSETS
    assert err[0] == f"Found {len(BAD)} batches whose records could not be decoded in :{log_path}"
    assert err[1].startswith("  baseOffset: 5 lastOffset: 9 position: ")
    assert err[1].endswith(": record 3: key length -7 out of range")
    assert len(err) == 1 + len(BAD)
    # without deep iteration records are not decoded (Kafka's behaviour): exit 0
    assert main(["dump-log", "--files", str(log_path)]) == 0


# --- the Spark source's range readers, without Spark ----------------------------------------


@pytest.mark.parametrize("budget", [1 << 20, 1])
def test_direct_range_reader_fails_or_warns_and_skips(logdir, budget, caplog):
    """I12 on disk: direct mode's reader, failOnDataLoss=true: KafkaDataLossError naming
    the partition, the offsets and the reason; false: a warning per bad batch naming them,
    and every other record."""
    reader = DirectRangeReader(logdir, include_headers=True, max_bytes_per_batch=budget,
                               fail_on_data_loss=True)
    got = []
    with pytest.raises(KafkaDataLossError) as info:
        for rb in reader.read(TOPIC, 0, 0, N_BATCHES * PER_BATCH):
            got.extend(rb.column("offset").to_pylist())
    assert got == list(range(5))
    assert ("Reason: Could not read records in offset [5, 10) for topic partition bad-0: Record "
            "batch of bad-0 at offsets [5, 9]") in str(info.value)
    assert "record 3: key length -7 out of range in segment 00000000000000000000.log" in str(info.value)
    log_path = next((logdir / f"{TOPIC}-0").glob("*.log"))
    position = next(p for p, h in iter_batch_headers(log_path.read_bytes()) if h.base_offset == 5)
    assert f"at offsets [5, 9] (byte position {position}) is invalid" in str(info.value)  # in the file
    reader.fail_on_data_loss = False
    caplog.set_level(logging.WARNING, logger="spark_kafkalog")
    assert offsets_of(reader.read(TOPIC, 0, 0, N_BATCHES * PER_BATCH)) == GOOD_OFFSETS
    warnings = [r.getMessage() for r in caplog.records if r.name == "spark_kafkalog"]
    assert len(warnings) == len(BAD)
    assert_names_each_bad_batch(warnings)
    assert all("failOnDataLoss=false" in w for w in warnings)


def test_network_range_reader_fails_or_warns_and_skips(broker, caplog):
    """I12 on disk, F11: network mode's reader, as the direct one."""
    params = {"bootstrap.servers": broker.bootstrap}
    reader = NetworkRangeReader(params, include_headers=False, max_bytes_per_batch=1 << 20,
                                fail_on_data_loss=True)
    with pytest.raises(KafkaDataLossError, match=r"Could not read records in offset \[5, 10\) "
                       r"for topic partition bad-0: Record batch of bad-0 at offsets \[5, 9\]"):
        list(reader.read(TOPIC, 0, 0, N_BATCHES * PER_BATCH))
    reader.fail_on_data_loss = False
    caplog.set_level(logging.WARNING, logger="spark_kafkalog")
    assert offsets_of(reader.read(TOPIC, 0, 0, N_BATCHES * PER_BATCH)) == GOOD_OFFSETS
    warnings = [r.getMessage() for r in caplog.records if r.name == "spark_kafkalog"]
    assert len(warnings) == len(BAD)
    assert_names_each_bad_batch(warnings)


# --- the Spark source (a handful: Spark is slow) --------------------------------------------


def _read(spark, **options):
    reader = spark.read.format("kafkalog")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader


def test_spark_direct_mode_fails_or_skips(spark, logdir):
    """I12 on disk: direct mode over the damaged directory. failOnDataLoss (default true):
    the query fails naming the partition, offsets and reason; false: every other record,
    the bad batches' records absent."""
    df = _read(spark, subscribe=TOPIC).load(str(logdir))
    with pytest.raises(Exception, match=r"Could not read records in offset \[5, 10\) for topic "
                       r"partition bad-0: Record batch of bad-0 at offsets \[5, 9\] .*record 3: "
                       r"key length -7 out of range"):
        df.count()
    df = _read(spark, subscribe=TOPIC, failOnDataLoss="false").load(str(logdir))
    rows = df.select("offset", "key").collect()
    assert sorted(r.offset for r in rows) == GOOD_OFFSETS
    assert all(r.key == b"k%02d" % r.offset for r in rows)


def test_spark_network_mode_fails_or_skips(spark, broker):
    """I12 on disk, F11: network mode against a broker serving the damaged log, as direct."""
    def df(**options):
        return _read(spark, subscribe=TOPIC, **{"kafka.bootstrap.servers": broker.bootstrap},
                     **options).load()

    with pytest.raises(Exception, match=r"Could not read records in offset \[5, 10\) for topic "
                       r"partition bad-0: Record batch of bad-0 at offsets \[5, 9\]"):
        df().count()
    rows = df(failOnDataLoss="false").select("offset", "value").collect()
    assert sorted(r.offset for r in rows) == GOOD_OFFSETS
    assert all(r.value == _value(r.offset) for r in rows)


def test_columnar_decoder_names_a_bad_legacy_entry():
    """A magic 1 run with a gzip wrapper whose inner message set is garbage: the entry is
    named by its offset (a legacy wrapper's offset is its last inner offset) and skipped
    with on_bad_batch; the entries around it are read."""
    import gzip

    from broker.record.legacy import encode_legacy_message, encode_legacy_message_set

    buf = (encode_legacy_message_set([(b"a", b"1", T0)] * 3, 1)
           + encode_legacy_message(5, None, gzip.compress(b"not a message set" * 4), 1, T0, codec=1)
           + encode_legacy_message_set([(b"b", b"2", T0)] * 2, 1, base_offset=6))
    got = []
    with pytest.raises(CorruptBatchError, match=r"^Record batch at offsets \[5, 5\] \(byte position \d+\) "
                       r"is invalid: "):
        for rb in iter_arrow(buf):
            got.extend(rb.column("offset").to_pylist())
    assert got == [0, 1, 2]
    bad: list[CorruptBatchError] = []
    assert offsets_of(iter_arrow(buf, on_bad_batch=bad.append)) == [0, 1, 2, 6, 7]
    assert [(e.base_offset, e.last_offset) for e in bad] == [(5, 5)]
