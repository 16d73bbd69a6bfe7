"""Coverage-guided fuzz targets (atheris; issue 19) and what each may raise.

Each target takes the fuzzer's bytes and exercises one parser of the broker the way
the broker uses it; it may raise only the errors that parser promises for bad input
(``ALLOWED[target]``). Anything else (an IndexError, a MemoryError, a hang...) is a
finding: ``tests/fuzz/run.py`` saves the input, and the bytes go into
``tests/fuzz/regressions/<target>/`` where ``tests/test_fuzz.py`` replays them forever.

* ``request``: a request frame's payload (no size prefix), as ``KafkaApis.handle``
  decodes it: header, then the body of that api key and version.
* ``frames``: bytes arriving on a connection, cut into chunks by the first byte, through
  ``FrameDecoder`` (a 1-MiB frame limit).
* ``batch``: a record batch whose header is built around the fuzzer's bytes (count, codec
  and attributes from the first bytes, the CRC computed), then validated as a produce
  (``analyze_and_validate_records``) and decoded as clients do (``decode_batch``, and the
  columnar decoder).
* ``log_dir``: the fuzzer's bytes as a partition's first segment (``.log``; a slice of
  them as its ``.index``) loaded without a clean shutdown (recovery), then read whole:
  the log loads (truncating what is torn or corrupt) or is refused with a storage error.
* ``sasl`` and ``tls``: a SASL listener's first frames through the real ``SaslGate``, and
  a TLS listener's first bytes through the socket server's handshake
  (``tests/fuzz/targets_security.py``).

Thread-safety: none needed (one fuzzing process per target).
"""

from __future__ import annotations

import shutil
import struct
import tempfile
import zlib
from pathlib import Path

from broker.log.errors import LogError
from broker.protocol.errors import ProtocolDecodeError
from broker.record.errors import RecordError
from tests.fuzz.targets_security import SASL_ALLOWED, TLS_ALLOWED, fuzz_sasl, fuzz_tls

TARGETS = ("request", "frames", "batch", "log_dir", "sasl", "tls")

ALLOWED: dict[str, tuple[type[BaseException], ...]] = {
    "request": (ProtocolDecodeError,),
    "frames": (ProtocolDecodeError,),
    "batch": (RecordError, LogError),
    "log_dir": (LogError, RecordError),
    "sasl": SASL_ALLOWED,
    "tls": TLS_ALLOWED,
}


def fuzz_request(data: bytes) -> None:
    from broker.protocol import Reader, parse_request_header
    from broker.protocol.errors import UnknownApiKeyError, UnsupportedApiVersionError
    from broker.protocol.schema import decode
    from broker.protocol.versions import request_schema

    reader = Reader(memoryview(data))
    header, _ = parse_request_header(reader)
    try:
        schema = request_schema(header.api_key, header.api_version)
    except (UnknownApiKeyError, UnsupportedApiVersionError):
        return  # the broker closes the connection
    decode(schema, header.api_version, reader)


def fuzz_frames(data: bytes) -> None:
    from broker.protocol import FrameDecoder

    decoder = FrameDecoder(1 << 20)
    if not data:
        return
    step = max(1, data[0])
    for i in range(1, len(data), step):
        decoder.push(memoryview(data[i:i + step]))
        while decoder.next_frame() is not None:
            pass


_HEADER = struct.Struct(">qiiBIhiqqqhii")  # base offset .. record count (61 bytes)


def build_batch(data: bytes) -> bytes:
    """A v2 batch: attributes/count from the first 3 bytes, records area = the rest, CRC
    right (so the fuzzer gets past it)."""
    import crc32c

    attributes = data[0] if data else 0
    count = data[1] * 256 + data[2] if len(data) > 2 else 0
    records = data[3:]
    length = _HEADER.size - 12 + len(records)
    head = bytearray(_HEADER.pack(0, length, 0, 2, 0, attributes & 0x77, max(count - 1, 0), 1_700_000_000_000,
                                  1_700_000_000_000, -1, -1, -1, count))
    body = bytes(head[21:]) + records
    struct.pack_into(">I", head, 17, crc32c.crc32c(body))
    return bytes(head[:21]) + body


def fuzz_batch(data: bytes) -> None:
    from broker.log.validator import ValidatorConfig, analyze_and_validate_records
    from broker.record.batch import decode_batch

    batch = build_batch(data)
    try:
        analyze_and_validate_records(memoryview(bytearray(batch)), ValidatorConfig(), now_ms=1_700_000_000_000)
    finally:
        try:
            for _ in decode_batch(batch):
                pass
        except RecordError:
            pass
        try:
            from broker.record.columnar.decode import iter_arrow
            for _ in iter_arrow(batch):
                pass
        except RecordError:
            pass


def fuzz_log_dir(data: bytes) -> None:
    from broker.log.config import LogConfig
    from broker.log.unified_log import UnifiedLog
    from broker.record.batch import iter_batch_headers

    root = Path(tempfile.mkdtemp(prefix="fuzz-log-"))
    try:
        part = root / "topic-0"
        part.mkdir()
        (part / "00000000000000000000.log").write_bytes(data)
        cut = zlib.crc32(data[:16]) % 64 * 8 if data else 0
        (part / "00000000000000000000.index").write_bytes(data[:cut])
        log = UnifiedLog.create(part, LogConfig.from_props({}), recovery_point=0, last_shutdown_clean=False)
        try:
            offset = log.log_start_offset
            end = log.high_watermark
            while offset < end:
                info = log.read(offset, 1 << 20)
                size = info.records.size_in_bytes
                if size == 0:
                    break
                last = None
                for _, header in iter_batch_headers(info.records.read_bytes()):
                    last = header
                if last is None:
                    break
                offset = last.base_offset + last.last_offset_delta + 1
        finally:
            log.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


FUNCTIONS = {"request": fuzz_request, "frames": fuzz_frames, "batch": fuzz_batch, "log_dir": fuzz_log_dir,
             "sasl": fuzz_sasl, "tls": fuzz_tls}


def run_one(target: str, data: bytes) -> None:
    """Run ``target`` on ``data``; raises only what is NOT allowed (a finding)."""
    try:
        FUNCTIONS[target](data)
    except ALLOWED[target]:
        pass
