"""Compression codecs of Kafka record batches: gzip, snappy, lz4 and zstd, with size budgets.

Owns: the codec ids of the attributes field (``CompressionType``, the low 3 bits of a
batch's or a legacy message's attributes) and the two functions the rest of the record
layer calls, ``compress()`` and ``decompress()``. Each codec writes the framing Kafka's Java
client writes, and reads what Java, librdkafka and kafka-python write.

Payload formats (what sits in the records section of a compressed batch, or in the value
of a legacy wrapper message):

- gzip: RFC 1952 members (zlib with ``wbits=31``), as ``GZIPOutputStream`` writes them.
  Concatenated members are read one after the other and trailing bytes that do not start
  a member are ignored, as ``java.util.zip.GZIPInputStream`` does.
- snappy: snappy-java's xerial framing (``SnappyOutputStream``), see ``_XERIAL_HEADER``;
  or one plain raw snappy block, which librdkafka may send. Every raw block starts with
  its uncompressed length as a varint, checked against the budget before decoding.
- lz4: the LZ4 *frame* format (not a raw block), as ``KafkaLZ4BlockOutputStream`` writes
  it: independent 64 KiB blocks, no content size, no content checksum. Kafka < 0.10 wrote
  a wrong header checksum at magic 0 (KIP-57): ``legacy.py`` repairs it before calling here.
- zstd: RFC 8878 frames, usually without a content size (Java and librdkafka stream them);
  several frames, and skippable frames, are read as one output.

Invariants:

- ``decompress()`` never returns more than ``max_bytes`` bytes and never holds much more
  than ``max_bytes`` plus one chunk (``_CHUNK_MAX``) of output: a payload that inflates past
  the budget raises ``RecordTooLargeError`` as soon as its output passes it.
- ``decompress()`` raises only ``DecodeError`` subclasses on bad input:
  ``UnsupportedCodecError`` (codec id outside 0-4), ``DecompressionError`` (the library
  failed, or the payload is truncated), ``RecordTooLargeError`` (over budget).
- ``decompress_into()`` (lz4 only) writes into the caller's buffer, never past it, and
  reports any failure (no such path, no room, bad payload) as -1: the caller then calls
  ``decompress()``, which tells which. It walks the frames itself (``lz4_frames_into``:
  header, then each independent block decoded by ``LZ4_decompress_safe`` straight into
  its place, a stored block copied), about twice as fast as a frame decoder at Kafka's
  batch sizes; it reads every frame option (block and content checksums, content size,
  stored blocks, 64 KiB to 4 MiB blocks, concatenated frames) but does not *verify* the
  frame's xxh32 checksums (header, block, content): its caller, the columnar decoder,
  has checked the batch's CRC-32C, which covers every byte of the payload, or was told
  not to check. A content size that disagrees with the output, a block over the frame's
  block size, a truncated frame or a bad block fail as ``decompress()`` would. Linked
  blocks, dictionary ids and skippable frames go to cramjam's frame decoder.
- ``compress()`` raises ``UnsupportedCodecError`` for an unknown id and ``EncodeError``
  for a bad level.

- zstd contexts are lent from small process-wide pools, never kept per thread; the
  windows of running zstd decompressions share ``DECOMPRESSION_IN_FLIGHT`` bytes (a call
  waits for room; validation's snappy blocks and lz4 buffers share it): what zstd holds does not grow with
  the number of threads (connections).

Thread-safety: stateless functions apart from the zstd pools (``_ZstdContexts``, locked);
a (de)compressor object is used by one call at a time, so concurrent calls from any
number of threads are safe.
"""

from __future__ import annotations

import enum
import struct
import threading
import zlib
from collections.abc import Callable

import cramjam
import lz4.block
import lz4.frame
import zstandard

from broker.record.errors import (
    DecodeError,
    DecompressionError,
    EncodeError,
    RecordTooLargeError,
    UnsupportedCodecError,
)

__all__ = ["LZ4_UNSUPPORTED", "CompressionType", "compress", "decompress", "decompress_into",
           "lz4_frames_into"]


class CompressionType(enum.IntEnum):
    """Codec ids of the attributes field (bits 0-2), as in Kafka's ``CompressionType``."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str) -> CompressionType:
        """The codec named by a ``compression.type`` config value (case-insensitive)."""
        key = name.strip().lower() if isinstance(name, str) else ""
        if key == "uncompressed":
            key = "none"
        for member in cls:
            if member.name.lower() == key:
                return member
        raise ValueError(
            f"unknown compression type {name!r}: expected one of "
            "none (or uncompressed), gzip, snappy, lz4, zstd"
        )


# Output requested by the first bounded read when the payload does not tell its size:
# 4x the input covers the usual ratios of record data in one call, and the floor keeps tiny
# payloads from looping. Later reads double up to _CHUNK_MAX, so that a huge budget is never
# reserved at once for a small payload (lz4 and zstd allocate the requested size up front).
_FIRST_CHUNK_MIN = 64 * 1024
_FIRST_CHUNK_RATIO = 4
_CHUNK_MAX = 16 * 1024 * 1024

# Library failures that mean "bad payload"; anything else is a bug and propagates.
_LIBRARY_ERRORS = (
    zlib.error,
    RuntimeError,  # lz4.frame
    lz4.block.LZ4BlockError,
    zstandard.ZstdError,
    cramjam.DecompressionError,
    struct.error,
    ValueError,
    OverflowError,
    TypeError,
)


def _too_large(max_bytes: int) -> RecordTooLargeError:  # reworded by ``decompress``
    return RecordTooLargeError(f"decompressed payload exceeds the budget of {max_bytes} bytes")


def _first_chunk(input_len: int, max_bytes: int) -> int:
    return min(max_bytes + 1, _CHUNK_MAX, max(_FIRST_CHUNK_MIN, _FIRST_CHUNK_RATIO * input_len))


def _join(chunks: list[bytes]) -> bytes:
    if len(chunks) == 1 and type(chunks[0]) is bytes:
        return chunks[0]
    return b"".join(chunks)


# --- none --------------------------------------------------------------------------------


def _none_decompress(view: memoryview, max_bytes: int) -> bytes:
    if len(view) > max_bytes:
        raise _too_large(max_bytes)
    return bytes(view)


# --- gzip --------------------------------------------------------------------------------

_GZIP_WBITS = 31  # 16 + 15: gzip header and trailer around a 32 KiB-window deflate stream
_GZIP_MAGIC = b"\x1f\x8b"


def _gzip_compress(view: memoryview, level: int | None) -> bytes:
    c = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION if level is None else level,
                         zlib.DEFLATED, _GZIP_WBITS)
    return c.compress(view) + c.flush()


def _gzip_decompress(view: memoryview, max_bytes: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    data: bytes | memoryview = view
    while True:  # one pass per gzip member
        d = zlib.decompressobj(_GZIP_WBITS)
        # zlib grows its output buffer as it goes, so asking for the whole budget is cheap.
        chunk = d.decompress(data, max_bytes + 1 - total)
        total += len(chunk)
        if total > max_bytes:
            raise _too_large(max_bytes)
        if not d.eof:  # the output fit, so the whole input was consumed: it ended early
            raise DecompressionError("gzip: truncated stream")
        chunks.append(chunk)
        data = d.unused_data
        if not data.startswith(_GZIP_MAGIC):  # GZIPInputStream ignores such trailing bytes
            return _join(chunks)


# --- snappy ------------------------------------------------------------------------------

# xerial stream (snappy-java SnappyOutputStream), all big-endian:
#   magic               8 bytes  0x82 'S' 'N' 'A' 'P' 'P' 'Y' 0x00
#   version             int32    1
#   compatible version  int32    1   (some writers put these two little-endian: not checked)
#   then blocks, each:
#     length            int32    size of the raw snappy block that follows
#     block             raw snappy: varint uncompressed length, then literals/copies
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_BLOCK_LENGTH = struct.Struct(">i")
_XERIAL_BLOCK_INPUT = 32 * 1024  # uncompressed bytes per block, snappy-java's default
_SNAPPY_MAX_LENGTH = 0xFFFFFFFF  # the preamble is a uint32
# The most a snappy element yields per byte: a 3-byte copy of 64 bytes (literals yield less
# than 1, 2-byte copies at most 11 / 2): a block's output is below 22x its elements' bytes.
_SNAPPY_MAX_RATIO = 22


def _snappy_compress(view: memoryview, level: int | None) -> bytes:
    parts: list[bytes] = [_XERIAL_HEADER.pack(_XERIAL_MAGIC, 1, 1)]
    for start in range(0, len(view), _XERIAL_BLOCK_INPUT):
        block = cramjam.snappy.compress_raw(view[start:start + _XERIAL_BLOCK_INPUT])
        parts.append(_XERIAL_BLOCK_LENGTH.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_uncompressed_length(block: memoryview) -> int:
    """The varint preamble of a raw snappy block (at most 5 bytes, a uint32)."""
    result = 0
    for i in range(min(5, len(block))):
        byte = block[i]
        result |= (byte & 0x7F) << (7 * i)
        if byte < 0x80:
            if result > _SNAPPY_MAX_LENGTH:
                break
            return result
    raise DecompressionError("snappy: bad uncompressed length preamble")


def _snappy_check_ratio(block: memoryview, length: int) -> None:
    """Refuses a preamble (within the budget) that the block cannot possibly inflate to
    (``_SNAPPY_MAX_RATIO``): the output buffer is allocated from it before decoding."""
    if length > _SNAPPY_MAX_RATIO * len(block):
        raise DecompressionError(f"snappy: an uncompressed length of {length} is impossible for "
                                 f"{len(block)} compressed bytes")


def _snappy_decompress(view: memoryview, max_bytes: int) -> bytes:
    if len(view) >= _XERIAL_HEADER.size and view[:len(_XERIAL_MAGIC)] == _XERIAL_MAGIC:
        blocks = _xerial_blocks(view, max_bytes)
    else:
        blocks = [(view, _snappy_uncompressed_length(view))]
        if blocks[0][1] > max_bytes:
            raise _too_large(max_bytes)
        _snappy_check_ratio(*blocks[0])
    total = sum(length for _, length in blocks)
    out = bytearray(total)
    target = memoryview(out)
    at = 0
    for block, length in blocks:
        written = cramjam.snappy.decompress_raw_into(block, target[at:at + length])
        if written != length:
            raise DecompressionError("snappy: block shorter than its length preamble")
        at += length
    return bytes(out)


def _xerial_blocks(view: memoryview, max_bytes: int) -> list[tuple[memoryview, int]]:
    """Splits a xerial stream into (raw block, uncompressed length); checks the budget."""
    blocks = []
    total = 0
    pos, end = _XERIAL_HEADER.size, len(view)
    while pos < end:
        if end - pos < _XERIAL_BLOCK_LENGTH.size:
            raise DecompressionError("snappy: truncated xerial block length")
        (size,) = _XERIAL_BLOCK_LENGTH.unpack_from(view, pos)
        pos += _XERIAL_BLOCK_LENGTH.size
        if size < 0 or size > end - pos:
            raise DecompressionError(f"snappy: xerial block length {size} out of bounds")
        block = view[pos:pos + size]
        pos += size
        length = _snappy_uncompressed_length(block)
        total += length
        if total > max_bytes:
            raise _too_large(max_bytes)
        _snappy_check_ratio(block, length)
        blocks.append((block, length))
    return blocks


# --- lz4 ---------------------------------------------------------------------------------


def _lz4_compress(view: memoryview, level: int | None) -> bytes:
    return lz4.frame.compress(
        view,
        compression_level=0 if level is None else level,  # 0-2 fast, 3-16 high compression
        block_size=lz4.frame.BLOCKSIZE_MAX64KB,
        block_linked=False,  # KafkaLZ4BlockInputStream only reads independent blocks
        content_checksum=False,
        store_size=False,
    )


def _lz4_decompress(view: memoryview, max_bytes: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    size = _first_chunk(len(view), max_bytes)
    data: bytes | memoryview = view
    while True:  # one pass per frame
        d = lz4.frame.LZ4FrameDecompressor()
        chunk = d.decompress(data, max_length=min(size, max_bytes + 1 - total))
        while True:
            total += len(chunk)
            if total > max_bytes:
                raise _too_large(max_bytes)
            if chunk:
                chunks.append(chunk)
            if d.eof:
                break
            if d.needs_input:
                raise DecompressionError("lz4: truncated frame")
            size = min(2 * size, _CHUNK_MAX)
            chunk = d.decompress(b"", max_length=min(size, max_bytes + 1 - total))
            if not chunk and not d.eof:
                raise DecompressionError("lz4: decompressor made no progress")
        data = d.unused_data
        if not data:
            return _join(chunks)


# The LZ4 frame format (lz4_Frame_format.md 1.6), little-endian:
#   magic            uint32   0x184D2204
#   FLG              uint8    version (bits 6-7) = 01 | block independence (5) | block
#                             checksum (4) | content size (3) | content checksum (2) |
#                             reserved 0 (1) | dictionary id (0)
#   BD               uint8    block maximum size id (bits 4-6), other bits reserved 0
#   [content size]   uint64   when FLG bit 3
#   [dictionary id]  uint32   when FLG bit 0
#   HC               uint8    (xxh32(FLG .. dictionary id) >> 8) & 0xFF
#   blocks, each:
#     size           uint32   bit 31: data stored uncompressed; 0 (the whole field): end mark
#     data           size bytes (at most the block maximum size), an LZ4 block or stored
#     [checksum]     uint32   xxh32 of data, when FLG bit 4
#   [content checksum] uint32 xxh32 of the frame's output, when FLG bit 2
# then, optionally, another frame.
_LZ4_FRAME_MAGIC = 0x184D2204
_LZ4_FLG_CHECKED = 0xE3  # version, block independence, reserved bit, dictionary id ...
_LZ4_FLG_FAST = 0x60  # ... as the fast path wants them: version 01, independent, no dict
_LZ4_FLG_BLOCK_CHECKSUM, _LZ4_FLG_CONTENT_SIZE, _LZ4_FLG_CONTENT_CHECKSUM = 0x10, 0x08, 0x04
_LZ4_BLOCK_MAX = {4 << 4: 64 << 10, 5 << 4: 256 << 10, 6 << 4: 1 << 20, 7 << 4: 4 << 20}
_LZ4_STORED = 0x80000000
LZ4_UNSUPPORTED = -2  # a frame option the fast path leaves to a frame decoder
_U32LE = struct.Struct("<I")
_I32LE = struct.Struct("<i")
_U64LE = struct.Struct("<Q")


def lz4_frames_into(src: memoryview, start: int, end: int, out: memoryview, at: int,
                    limit: int) -> int:
    """The LZ4 frames of ``src[start:end]`` decoded into ``out[at:limit]`` block by block:
    the position in ``out`` after the output; -1 when the payload is bad or its output
    does not fit; ``LZ4_UNSUPPORTED`` for linked blocks, a dictionary id, a skippable
    frame, an unknown version or block size (``decompress_into`` hands those to a frame
    decoder). ``src`` and ``out`` are 1-D byte memoryviews; nothing outside
    ``out[at:limit]`` is written. Checksums are skipped, not verified (see the module
    docstring). Never raises on bad input.

    One call per batch, on the columnar decoder's hot path: hence positions rather than
    slices, and the block decode inlined. cramjam's ``decompress_block_into``, given
    ``output_len``, decodes a block with ``LZ4_decompress_safe``, but when that fails it
    tries again reading the block's first 4 bytes as a stored uncompressed size
    (python-lz4's ``store_size``): when those bytes read as a size that fits the room, a
    bad block could decode as something else instead of failing, so python-lz4's block
    decoder (no such retry, one more copy) takes such blocks."""
    try:
        return _lz4_frames_into(src, start, end, out, at, limit)
    except _LIBRARY_ERRORS:
        return -1


def _lz4_frames_into(src: memoryview, start: int, end: int, out: memoryview, at: int,
                     limit: int) -> int:
    unpack32 = _U32LE.unpack_from
    pos = start
    while True:  # one pass per frame
        if end - pos < 7:  # magic, FLG, BD, HC
            return -1
        if unpack32(src, pos)[0] != _LZ4_FRAME_MAGIC:
            return LZ4_UNSUPPORTED if pos == start else -1
        flg = src[pos + 4]
        block_max = _LZ4_BLOCK_MAX.get(src[pos + 5], 0)
        if flg & _LZ4_FLG_CHECKED != _LZ4_FLG_FAST or not block_max:
            return LZ4_UNSUPPORTED
        pos += 6
        frame_end = -1
        if flg & _LZ4_FLG_CONTENT_SIZE:
            if end - pos < 9:
                return -1
            frame_end = at + _U64LE.unpack_from(src, pos)[0]
            pos += 8
        pos += 1  # HC
        trailer = 4 if flg & _LZ4_FLG_BLOCK_CHECKSUM else 0
        while True:  # one pass per block
            if end - pos < 4:
                return -1
            size = unpack32(src, pos)[0]
            pos += 4
            if size == 0:
                break  # end mark
            stored = size & _LZ4_STORED
            size &= ~_LZ4_STORED
            if size > block_max or size + trailer > end - pos:
                return -1
            if stored:
                if size > limit - at:
                    return -1
                out[at:at + size] = src[pos:pos + size]
                at += size
            else:
                room = min(block_max, limit - at)
                if size >= 4 and 0 <= _I32LE.unpack_from(src, pos)[0] <= room:
                    decoded = lz4.block.decompress(src[pos:pos + size], uncompressed_size=room)
                    out[at:at + len(decoded)] = decoded
                    at += len(decoded)
                else:
                    at += cramjam.lz4.decompress_block_into(src[pos:pos + size],
                                                            out[at:at + room], output_len=room)
            pos += size + trailer
        if flg & _LZ4_FLG_CONTENT_CHECKSUM:
            if end - pos < 4:
                return -1
            pos += 4
        if frame_end >= 0 and at != frame_end:
            return -1
        if pos == end:
            return at


# --- zstd --------------------------------------------------------------------------------

_ZSTD_DEFAULT_LEVEL = 3  # Kafka's default zstd level
_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE_MASK, _ZSTD_SKIPPABLE_MAGIC = 0xFFFFFFF0, 0x184D2A50
_ZSTD_BLOCK_MAX = 128 * 1024  # a block never regenerates more (RFC 8878 Block_Maximum_Size)
_ZSTD_DICT_ID_SIZES = (0, 1, 2, 4)
_ZSTD_CONTENT_SIZE_SIZES = (0, 2, 4, 8)  # flag 0 means 1 byte when Single_Segment is set


# zstandard's (de)compressor objects are reusable but not thread-safe, and building one per
# batch costs ~40% on small batches: idle ones are kept in small process-wide pools and lent
# to one caller at a time. Not one per thread: the broker runs a thread per connection, and a
# context keeps the buffers of the largest window it ever decoded (a frame may declare 128
# MiB, the library's limit), so per-thread contexts held a window per connection that had
# once sent zstd (measured: 2 idle connections that had each sent one zstd bomb with a 128
# MiB window held 269 MiB until they closed). Bounds:
# * idle: at most ZSTD_POOL_SIZE decompressors, each of which only decoded windows up to
#   ZSTD_POOLED_WINDOW_MAX (larger ones get a fresh context, dropped after the call), and
#   ZSTD_POOL_SIZE compressors per level;
# * in flight: decompressions reserve their window (the frame header's, or its content
#   size when smaller, plus two blocks) from DECOMPRESSION_IN_FLIGHT bytes shared by every
#   thread (validation's snappy blocks and lz4 buffers too); a call that does not fit waits for others to
#   finish (back-pressure on its connection), one call alone always proceeds.
ZSTD_POOL_SIZE = 4
ZSTD_POOLED_WINDOW_MAX = 8 * 1024 * 1024
DECOMPRESSION_IN_FLIGHT = 256 * 1024 * 1024


class _ZstdContexts:
    """The pools and the in-flight window budget (see above). Thread-safe."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._decompressors: list[zstandard.ZstdDecompressor] = []
        self._compressors: dict[int, list[zstandard.ZstdCompressor]] = {}
        self.in_flight = 0  # window bytes reserved by running decompressions

    def compressor(self, level: int) -> zstandard.ZstdCompressor:
        with self._cond:
            idle = self._compressors.get(level)
            if idle:
                return idle.pop()
        return zstandard.ZstdCompressor(level=level)

    def give_back_compressor(self, level: int, cctx: zstandard.ZstdCompressor) -> None:
        with self._cond:
            idle = self._compressors.setdefault(level, [])
            if len(idle) < ZSTD_POOL_SIZE:
                idle.append(cctx)

    def reserve(self, nbytes: int) -> None:
        """Wait until ``nbytes`` fit in the in-flight budget (or nothing else is in flight),
        then take them; ``release`` them after. Also used for snappy blocks, which are
        decoded whole."""
        with self._cond:
            while self.in_flight and self.in_flight + nbytes > DECOMPRESSION_IN_FLIGHT:
                self._cond.wait()
            self.in_flight += nbytes

    def release(self, nbytes: int) -> None:
        with self._cond:
            self.in_flight -= nbytes
            self._cond.notify_all()

    def lend(self, window: int) -> zstandard.ZstdDecompressor:
        """A decompressor for frames of at most ``window`` bytes of window, once that much
        of the in-flight budget is free; ``give_back`` it with the same ``window``."""
        self.reserve(window + 2 * _ZSTD_BLOCK_MAX)
        with self._cond:
            if window <= ZSTD_POOLED_WINDOW_MAX and self._decompressors:
                return self._decompressors.pop()
        return zstandard.ZstdDecompressor()

    def give_back(self, window: int, dctx: zstandard.ZstdDecompressor) -> None:
        with self._cond:
            if window <= ZSTD_POOLED_WINDOW_MAX and len(self._decompressors) < ZSTD_POOL_SIZE:
                self._decompressors.append(dctx)
        self.release(window + 2 * _ZSTD_BLOCK_MAX)


_zstd_contexts = _ZstdContexts()


def _zstd_compress(view: memoryview, level: int | None) -> bytes:
    level = _ZSTD_DEFAULT_LEVEL if level is None else level
    cctx = _zstd_contexts.compressor(level)
    out = cctx.compress(view)
    _zstd_contexts.give_back_compressor(level, cctx)  # not after a failure: its state is unknown
    return out


def _zstd_output_bound(view: memoryview) -> int:
    """An upper bound of the decompressed size (``_zstd_scan``)."""
    return _zstd_scan(view)[0]


def _zstd_scan(view: memoryview) -> tuple[int, int]:
    """Walks frame and block headers without decoding (RFC 8878, little-endian):

      frame      magic uint32 | descriptor uint8 | [window uint8] | [dict id 1/2/4]
                 | [content size 1/2/4/8] | blocks... | [checksum uint32]
      block      header uint24: bit 0 last, bits 1-2 type (raw, RLE, compressed,
                 reserved), bits 3-23 size | content (size bytes; 1 byte for RLE)
      skippable  magic 0x184D2A5? uint32 | size uint32 | size bytes

      window     exponent (bits 3-7), mantissa (bits 0-2): (1 << 10 + e) * (1 + m / 8)

    Proves that every frame is complete (the streaming decoder stops silently at a cut)
    and returns (an upper bound of the decompressed size, the largest buffer a frame makes
    a streaming decoder hold: its window, or its content size when that is smaller)."""
    end = len(view)
    if end == 0:
        raise DecompressionError("zstd: empty payload")
    pos = bound = window = 0
    while pos < end:
        if end - pos < 8:  # the smallest frame or skippable header
            raise DecompressionError("zstd: truncated frame header")
        magic = int.from_bytes(view[pos:pos + 4], "little")
        if magic & _ZSTD_SKIPPABLE_MASK == _ZSTD_SKIPPABLE_MAGIC:
            pos += 8 + int.from_bytes(view[pos + 4:pos + 8], "little")
            continue
        if magic != _ZSTD_MAGIC:
            raise DecompressionError("zstd: unknown frame magic")
        descriptor = view[pos + 4]
        single_segment = descriptor >> 5 & 1
        frame_window = -1
        if not single_segment:
            exponent, mantissa = view[pos + 5] >> 3, view[pos + 5] & 7
            frame_window = (1 << 10 + exponent) + ((1 << 10 + exponent) >> 3) * mantissa
        size_len = _ZSTD_CONTENT_SIZE_SIZES[descriptor >> 6] or single_segment
        pos += 5 + (1 - single_segment) + _ZSTD_DICT_ID_SIZES[descriptor & 3] + size_len
        content_size = -1
        if size_len and pos <= end:
            content_size = int.from_bytes(view[pos - size_len:pos], "little")
            content_size += 256 if size_len == 2 else 0
        frame_bound = 0
        last = 0
        while not last:
            if end - pos < 3:
                raise DecompressionError("zstd: truncated block header")
            header = view[pos] | view[pos + 1] << 8 | view[pos + 2] << 16
            last, block_type, size = header & 1, header >> 1 & 3, header >> 3
            if block_type == 3:
                raise DecompressionError("zstd: reserved block type")
            frame_bound += _ZSTD_BLOCK_MAX if block_type == 2 else size
            pos += 3 + (1 if block_type == 1 else size)
        pos += 4 * (descriptor >> 2 & 1)  # content checksum
        bound += frame_bound if content_size < 0 else min(frame_bound, content_size)
        if content_size >= 0 and (frame_window < 0 or content_size < frame_window):
            frame_window = content_size
        window = max(window, frame_window)
    if pos > end:
        raise DecompressionError("zstd: truncated frame")
    return bound, window


def _zstd_decompress(view: memoryview, max_bytes: int) -> bytes:
    bound, window = _zstd_scan(view)
    dctx = _zstd_contexts.lend(window)
    try:
        reader = dctx.stream_reader(view, read_across_frames=True)
        chunks: list[bytes] = []
        total = 0
        size = min(max_bytes + 1, _CHUNK_MAX, max(bound, 1))
        while True:
            chunk = reader.read(min(size, max_bytes + 1 - total))
            if not chunk:
                return _join(chunks)
            total += len(chunk)
            if total > max_bytes:
                raise _too_large(max_bytes)
            chunks.append(chunk)
            size = min(2 * size, _CHUNK_MAX)
    finally:
        reader = None  # the reader holds the context
        _zstd_contexts.give_back(window, dctx)


# --- dispatch ----------------------------------------------------------------------------

_COMPRESSORS: dict[int, Callable[[memoryview, int | None], bytes]] = {
    CompressionType.GZIP: _gzip_compress,
    CompressionType.SNAPPY: _snappy_compress,
    CompressionType.LZ4: _lz4_compress,
    CompressionType.ZSTD: _zstd_compress,
}
_DECOMPRESSORS: dict[int, Callable[[memoryview, int], bytes]] = {
    CompressionType.NONE: _none_decompress,
    CompressionType.GZIP: _gzip_decompress,
    CompressionType.SNAPPY: _snappy_decompress,
    CompressionType.LZ4: _lz4_decompress,
    CompressionType.ZSTD: _zstd_decompress,
}


def _codec_name(codec: int) -> str:
    return CompressionType(codec).name.lower()


def _byte_view(data: bytes | bytearray | memoryview) -> memoryview:
    view = memoryview(data)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def compress(codec: int, data: bytes | memoryview, level: int | None = None) -> bytes:
    """``data`` compressed with ``codec`` (a ``CompressionType`` or its id) at ``level``
    (``None``: gzip 6, lz4 fast, zstd 3; ignored by snappy). ``NONE`` returns a copy."""
    if codec == CompressionType.NONE:
        return bytes(data)
    try:
        compressor = _COMPRESSORS[codec]
    except (KeyError, TypeError):
        raise UnsupportedCodecError(f"unknown compression codec id {codec!r}") from None
    try:
        return compressor(_byte_view(data), level)
    except (zlib.error, RuntimeError, zstandard.ZstdError, cramjam.CompressionError,
            ValueError, OverflowError) as exc:
        raise EncodeError(f"{_codec_name(codec)}: cannot compress: {exc}") from exc


def decompress_into(codec: int, data: bytes | memoryview, out) -> int:
    """``data`` decompressed into ``out`` (a writable buffer, e.g. a numpy uint8 slice):
    the bytes written, or -1 when ``codec`` has no such path (only lz4 has), the output
    does not fit in ``out`` or the payload is bad. Never raises on bad input. The frame's
    own checksums are not verified (see the module docstring)."""
    if codec != CompressionType.LZ4:
        return -1
    try:
        view = _byte_view(data)
        target = _byte_view(out)
        written = lz4_frames_into(view, 0, len(view), target, 0, len(target))
        if written == LZ4_UNSUPPORTED:
            written = cramjam.lz4.decompress_into(view, out)
        return written
    except _LIBRARY_ERRORS:
        return -1


def decompress(codec: int, data: bytes | memoryview, max_bytes: int) -> bytes:
    """``data`` decompressed with ``codec``; at most ``max_bytes`` bytes of output, else
    ``RecordTooLargeError``. Raises only ``DecodeError`` subclasses on bad input."""
    if max_bytes < 0:
        raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
    try:
        decompressor = _DECOMPRESSORS[codec]
    except (KeyError, TypeError):
        raise UnsupportedCodecError(f"unknown compression codec id {codec!r}") from None
    try:
        return decompressor(_byte_view(data), max_bytes)
    except RecordTooLargeError:  # name the codec: "zstd data inflates beyond the budget ..."
        raise RecordTooLargeError(f"{_codec_name(codec)} data inflates beyond the budget of "
                                  f"{max_bytes} bytes") from None
    except DecodeError:
        raise
    except _LIBRARY_ERRORS as exc:
        message = str(exc)[:200]
        raise DecompressionError(f"{_codec_name(codec)}: {message}") from exc
