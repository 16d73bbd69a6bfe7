"""Size-prefixed framing: a sans-IO receive buffer and the frame encoder.

Owns the outermost layer of the protocol: every request and response is

    int32 size (big-endian, bytes that follow)  |  size bytes of header + body

``FrameDecoder`` is fed bytes as they arrive, in any chunking, and returns complete
frames. It does no I/O: the connection code owns the socket and calls ``feed``.

Denial-of-service invariants (h11 style):

* A size prefix that is negative or above ``max_frame_bytes`` (Kafka's
  ``socket.request.max.bytes``) raises ``InvalidFrameSizeError`` as soon as its 4 bytes
  are in, before anything is allocated for the frame; the decoder then stays failed and
  the connection must be closed (Kafka does the same).
* The receive buffer holds at most one incomplete frame plus the chunk being fed:
  ``feed`` drains every complete frame before returning. (``push`` + ``next_frame`` lets
  a caller take one frame at a time; a caller that pushes without draining, e.g. while
  the connection is muted, should stop reading the socket instead, as Kafka does.)
* Returned frames never alias the receive buffer: each is a memoryview over its own
  bytes (a frame ending exactly at the end of the buffer takes the buffer over without a
  copy, which is the common case for large Produce requests), so callers may keep
  zero-copy slices of a frame (records) for as long as they like.

Thread-safety: a decoder belongs to one connection and one thread at a time.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Any

from broker.protocol.errors import InvalidFrameSizeError

# Kafka's socket.request.max.bytes default: the largest request the broker accepts.
DEFAULT_MAX_FRAME_BYTES = 104857600
# The int32 size prefix.
FRAME_PREFIX_BYTES = 4

_SIZE = struct.Struct(">i")


class FrameDecoder:
    """Turns a byte stream into frames (payloads without their size prefix)."""

    __slots__ = ("max_frame_bytes", "_buf", "_pos", "_size", "_error")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        if not 0 <= max_frame_bytes <= 0x7FFFFFFF:
            raise ValueError(f"max_frame_bytes {max_frame_bytes} outside 0..2**31-1")
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._pos = 0  # start of the unconsumed bytes in _buf
        self._size = -1  # size of the frame being received, -1 before its prefix
        self._error: InvalidFrameSizeError | None = None

    @property
    def buffered_bytes(self) -> int:
        """Bytes received and not yet returned as part of a frame (prefixes included)."""
        return len(self._buf) - self._pos + (FRAME_PREFIX_BYTES if self._size >= 0 else 0)

    @property
    def bytes_wanted(self) -> int:
        """Bytes still missing to complete the next frame's prefix or payload: a hint
        for sizing the next socket read."""
        avail = len(self._buf) - self._pos
        if self._size < 0:
            return max(FRAME_PREFIX_BYTES - avail, 0)
        return max(self._size - avail, 0)

    def push(self, data: Any) -> None:
        """Append received bytes without extracting frames."""
        if self._error is not None:
            raise self._error
        if self._pos:
            del self._buf[: self._pos]  # O(1) amortized at the front of a bytearray
            self._pos = 0
        self._buf += data

    def next_frame(self) -> memoryview | None:
        """The next complete frame, or None until more bytes arrive."""
        if self._error is not None:
            raise self._error
        buf = self._buf
        pos = self._pos
        avail = len(buf) - pos
        size = self._size
        if size < 0:
            if avail < FRAME_PREFIX_BYTES:
                return None
            size = _SIZE.unpack_from(buf, pos)[0]
            if size < 0 or size > self.max_frame_bytes:
                self._error = InvalidFrameSizeError(size, self.max_frame_bytes)
                self._buf = bytearray()
                self._pos = 0
                raise self._error
            pos += FRAME_PREFIX_BYTES
            avail -= FRAME_PREFIX_BYTES
            self._pos = pos
            self._size = size
        if avail < size:
            return None
        end = pos + size
        if end == len(buf) and size > 0:
            # The frame is the tail of the buffer: hand the buffer over, start a new one.
            frame = memoryview(buf)[pos:end]
            self._buf = bytearray()
            self._pos = 0
        else:
            frame = memoryview(buf[pos:end])  # one copy into the frame's own bytearray
            self._pos = end
        self._size = -1
        return frame

    def feed(self, data: Any) -> list[memoryview]:
        """Append ``data`` and return every frame it completes (possibly none)."""
        self.push(data)
        frames = []
        while True:
            frame = self.next_frame()
            if frame is None:
                return frames
            frames.append(frame)


def _nbytes(part: Any) -> int:
    return part.nbytes if type(part) is memoryview else len(part)


def frame_buffers(payload_parts: Iterable[Any]) -> list[Any]:
    """The size prefix followed by the parts, uncopied (for ``socket.sendmsg``)."""
    parts = list(payload_parts)
    size = sum(_nbytes(p) for p in parts)
    if size > 0x7FFFFFFF:
        raise ValueError(f"frame of {size} bytes does not fit an int32 size prefix")
    return [_SIZE.pack(size), *parts]


def encode_frame(payload_parts: Iterable[Any]) -> bytes:
    """One frame as bytes: int32 size + the concatenated parts."""
    return b"".join(frame_buffers(payload_parts))
