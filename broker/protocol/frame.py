"""Size-prefixed framing: a sans-IO receive buffer and the frame encoder.

Owns the outermost layer of the protocol: every request and response is

    int32 size (big-endian, bytes that follow)  |  size bytes of header + body

``FrameDecoder`` is fed bytes as they arrive, in any chunking, and returns complete
frames. It does no I/O: the connection code owns the socket and either receives in place
(``recv_buffer()`` gives writable space, ``socket.recv_into`` fills it, ``advance(n)``
records it: the kernel's copy is the only one) or hands over received bytes (``push`` /
``feed``: one copy).

Denial-of-service invariants (h11 style):

* A size prefix that is negative or above ``max_frame_bytes`` (Kafka's
  ``socket.request.max.bytes``) raises ``InvalidFrameSizeError`` as soon as its 4 bytes
  are in, before anything is allocated for the frame; the decoder then stays failed and
  the connection must be closed (Kafka does the same).
* The receive buffer holds at most one incomplete frame plus the chunk being fed:
  ``feed`` drains every complete frame before returning. (``push`` + ``next_frame`` lets
  a caller take one frame at a time; a caller that pushes without draining, e.g. while
  the connection is muted, should stop reading the socket instead, as Kafka does.)
* Returned frames are writable memoryviews that the decoder never writes again: a frame
  is a slice of the receive chunk it arrived in (later receives only write past the
  bytes received so far, and a full chunk is replaced, not reused), or, above
  ``LARGE_FRAME`` bytes, a buffer of its own. So callers may keep zero-copy slices of a
  frame (records) for as long as they like (a kept slice keeps its chunk alive), and the
  broker may stamp offsets into produce frames in place.
* Resident memory: chunks and large frames' buffers are anonymous mappings, resident
  only where bytes landed: a client announcing a large frame and sending a few bytes
  costs a few KiB.

Thread-safety: a decoder belongs to one connection and one thread at a time.
"""

from __future__ import annotations

import mmap
import struct
import sys
from collections.abc import Iterable
from typing import Any

from broker.protocol.errors import InvalidFrameSizeError

# Kafka's socket.request.max.bytes default: the largest request the broker accepts.
DEFAULT_MAX_FRAME_BYTES = 104857600
# The int32 size prefix.
FRAME_PREFIX_BYTES = 4
# Receives land in chunks of RECV_CHUNK bytes (anonymous mappings: a connection that
# received 100 bytes holds one resident page); a receive is offered at least MIN_FREE
# bytes; a frame above LARGE_FRAME that is still arriving gets a mapping of its own size,
# filled in place. Measured with bench/broker_ingest.py: one kernel copy per
# byte instead of three (recv into a fresh bytes object, the push into the decoder's
# buffer, the frame's own copy).
RECV_CHUNK = 256 * 1024
MIN_FREE = 4096
LARGE_FRAME = 128 * 1024
MIN_MAPPED = 64 * 1024
_EMPTY = bytearray()

_SIZE = struct.Struct(">i")


class FrameDecoder:
    """Turns a byte stream into frames (payloads without their size prefix)."""

    __slots__ = ("max_frame_bytes", "_buf", "_pos", "_end", "_size", "_error", "_frame", "_have", "_large")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        if not 0 <= max_frame_bytes <= 0x7FFFFFFF:
            raise ValueError(f"max_frame_bytes {max_frame_bytes} outside 0..2**31-1")
        self.max_frame_bytes = max_frame_bytes
        self._buf: Any = _EMPTY  # the receive chunk: bytes [_pos, _end) received, not returned
        self._pos = 0
        self._end = 0
        self._size = -1  # size of the frame being received, -1 before its prefix
        self._error: InvalidFrameSizeError | None = None
        self._frame: Any = None  # a large frame's own buffer while it is being received
        self._have = 0  # bytes of _frame received
        self._large: Any = None  # the buffer of the last large frame (reused when unreferenced)

    @property
    def buffered_bytes(self) -> int:
        """Bytes received and not yet returned as part of a frame (prefixes included)."""
        buffered = self._end - self._pos + (FRAME_PREFIX_BYTES if self._size >= 0 else 0)
        return buffered + self._have if self._frame is not None else buffered

    @property
    def bytes_wanted(self) -> int:
        """Bytes still missing to complete the next frame's prefix or payload: a hint
        for sizing the next socket read."""
        if self._frame is not None:
            return self._size - self._have
        avail = self._end - self._pos
        if self._size < 0:
            return max(FRAME_PREFIX_BYTES - avail, 0)
        return max(self._size - avail, 0)

    def recv_buffer(self) -> memoryview:
        """Writable space for the next receive (``socket.recv_into``), never empty; then
        ``advance`` by the bytes written. Call ``next_frame`` until it returns None first:
        a frame of more than ``LARGE_FRAME`` bytes gets a buffer of its own here, anything
        else lands in the receive chunk (a new chunk, with the unreturned bytes moved to
        its front, when the current one is full)."""
        if self._error is not None:
            raise self._error
        frame = self._frame
        if frame is not None:
            if self._have < self._size:
                return frame[self._have:]
            # complete, not yet taken: what follows goes to the chunk
        else:
            self._parse_prefix()
            size = self._size
            avail = self._end - self._pos
            if size > LARGE_FRAME and avail < size:
                # the last large frame's buffer again when nothing holds it any more (its
                # pages are resident already), else a new one
                if self._large is None or len(self._large) < size or not _unused(self._large, 1):
                    self._large = _anonymous(max(size, LARGE_FRAME * 2))
                self._frame = frame = memoryview(self._large)[:size]
                frame[:avail] = memoryview(self._buf)[self._pos:self._end]
                self._have = avail
                self._pos = self._end  # the chunk's free space stays usable after this frame
                return frame[avail:]
        need = FRAME_PREFIX_BYTES if self._size < 0 or self._frame is not None else self._size
        if len(self._buf) - self._end < MIN_FREE or (self._frame is None and len(self._buf) - self._pos < need):
            pos, end = self._pos, self._end
            avail = end - pos
            capacity = max(RECV_CHUNK, avail + max(need, MIN_FREE))
            if len(self._buf) >= capacity and _unused(self._buf, 1):
                # no frame of this chunk is alive: the pending bytes move to its front (as
                # a reused receive buffer: resident pages, no new mapping)
                view = memoryview(self._buf)
                view[:avail] = view[pos:end]
                view.release()
            else:
                chunk = _anonymous(capacity)
                if avail:
                    memoryview(chunk)[:avail] = memoryview(self._buf)[pos:end]
                self._buf = chunk
            self._pos, self._end = 0, avail
        return memoryview(self._buf)[self._end:]

    def advance(self, n: int) -> None:
        """``n`` bytes were written at the start of the last ``recv_buffer``."""
        if self._frame is not None and self._have < self._size:
            self._have += n
        else:
            self._end += n

    def push(self, data: Any) -> None:
        """Append received bytes (copied) without extracting frames."""
        data = memoryview(data).cast("B") if type(data) is not memoryview or data.format != "B" else data
        done, total = 0, len(data)
        while done < total:
            space = self.recv_buffer()
            n = min(len(space), total - done)
            space[:n] = data[done:done + n]
            space.release()
            self.advance(n)
            done += n
        if self._error is not None:
            raise self._error

    def _parse_prefix(self) -> None:
        """Read the next frame's size prefix when its 4 bytes are in (F1 check)."""
        if self._size >= 0 or self._end - self._pos < FRAME_PREFIX_BYTES:
            return
        size = _SIZE.unpack_from(self._buf, self._pos)[0]
        if size < 0 or size > self.max_frame_bytes:
            self._error = InvalidFrameSizeError(size, self.max_frame_bytes)
            self._buf, self._pos, self._end = _EMPTY, 0, 0
            raise self._error
        self._pos += FRAME_PREFIX_BYTES
        self._size = size

    def next_frame(self) -> memoryview | None:
        """The next complete frame, or None until more bytes arrive."""
        if self._error is not None:
            raise self._error
        frame = self._frame
        if frame is not None:
            if self._have < self._size:
                return None
            self._frame, self._have, self._size = None, 0, -1
            return frame
        self._parse_prefix()
        size = self._size
        if size < 0:
            return None
        pos = self._pos
        end = pos + size
        if end > self._end:
            return None
        self._pos = end
        self._size = -1
        return memoryview(self._buf)[pos:end]

    def feed(self, data: Any) -> list[memoryview]:
        """Append ``data`` and return every frame it completes (possibly none)."""
        frames = []
        data = memoryview(data).cast("B") if type(data) is not memoryview or data.format != "B" else data
        done, total = 0, len(data)
        while True:
            while (frame := self.next_frame()) is not None:
                frames.append(frame)
            if done >= total:
                return frames
            space = self.recv_buffer()
            n = min(len(space), total - done)
            space[:n] = data[done:done + n]
            space.release()
            self.advance(n)
            done += n


def _unused(buf: Any, held: int) -> bool:
    """Whether nothing but the decoder (``held`` references) refers to ``buf``: no frame,
    no slice of one, no view is alive (every memoryview holds a reference to the object it
    views). CPython's reference count; the two further references are the parameter and
    ``getrefcount``'s own argument."""
    return sys.getrefcount(buf) <= held + 2


def _anonymous(size: int) -> Any:
    """A zero-filled writable buffer whose pages become resident only as bytes land in
    them (an anonymous mapping; a plain bytearray for small sizes and size 0)."""
    if size < MIN_MAPPED:
        return bytearray(size)
    return mmap.mmap(-1, size)


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
