"""The embedded "consumer" protocol: the bytes a consumer puts in JoinGroup's protocol
metadata (``ConsumerProtocolSubscription``) and the group leader puts in SyncGroup's
assignments (``ConsumerProtocolAssignment``), as Kafka's ``ConsumerProtocol``.

Owns ``Subscription`` / ``Assignment`` (immutable values) and
``encode_subscription`` / ``decode_subscription`` / ``encode_assignment`` /
``decode_assignment``, plus ``CONSUMER_PROTOCOL_TYPE`` ("consumer", JoinGroup's
protocol type).

Format (tools/kafka-spec/message/ConsumerProtocol*.json, never flexible): an int16
version, then the fields of that version, big-endian; strings are int16-length UTF-8
(-1: null), bytes int32-length (-1: null), arrays int32-count.

* Subscription v0: topics []string, user_data bytes (nullable); v1 + owned_partitions
  [](topic string, partitions []int32); v2 + generation_id int32 (default -1); v3 +
  rack_id string (nullable).
* Assignment v0-v3 (the same layout in every version): assigned_partitions
  [](topic, []int32), user_data bytes (nullable).

Decoding follows Kafka's forward compatibility rule: a version above the highest known
(3) is read as the highest known, and bytes after the known fields are ignored (a newer
member may add fields). A negative version, a truncated field or an invalid length raises
``ConsumerProtocolError``. Encoding writes the fields of the version asked for (fields
that version lacks are dropped, as Kafka's serializer does).

Thread-safety: pure functions over immutable values.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from broker.client.errors import KafkaError

CONSUMER_PROTOCOL_TYPE = "consumer"
SUBSCRIPTION_MAX_VERSION = 3
ASSIGNMENT_MAX_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class ConsumerProtocolError(KafkaError):
    """Bytes that are not a valid ConsumerProtocolSubscription / Assignment."""


class Subscription(NamedTuple):
    """A member's ConsumerProtocolSubscription."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[tuple[str, int], ...] = ()  # (topic, partition), v1+
    generation_id: int = -1  # v2+
    rack_id: str | None = None  # v3+
    version: int = SUBSCRIPTION_MAX_VERSION


class Assignment(NamedTuple):
    """A member's ConsumerProtocolAssignment."""

    partitions: tuple[tuple[str, int], ...]  # (topic, partition)
    user_data: bytes | None = None
    version: int = ASSIGNMENT_MAX_VERSION


# -- encoding -------------------------------------------------------------------------------

def _string(out: bytearray, s: str | None) -> None:
    if s is None:
        out += _I16.pack(-1)
        return
    b = s.encode("utf-8")
    if len(b) > 0x7FFF:
        raise ConsumerProtocolError(f"string of {len(b)} bytes is too long")
    out += _I16.pack(len(b))
    out += b


def _bytes(out: bytearray, b: bytes | None) -> None:
    if b is None:
        out += _I32.pack(-1)
        return
    out += _I32.pack(len(b))
    out += b


def _grouped(tps: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in tps:
        by_topic.setdefault(topic, []).append(int(partition))
    return by_topic


def _topic_partitions(out: bytearray, tps: Iterable[tuple[str, int]]) -> None:
    by_topic = _grouped(tps)
    out += _I32.pack(len(by_topic))
    for topic, parts in by_topic.items():
        _string(out, topic)
        out += _I32.pack(len(parts))
        for p in parts:
            out += _I32.pack(p)


def encode_subscription(sub: Subscription, version: int | None = None) -> bytes:
    """The bytes of ``sub`` at ``version`` (default ``sub.version``)."""
    v = sub.version if version is None else version
    if not 0 <= v <= SUBSCRIPTION_MAX_VERSION:
        raise ConsumerProtocolError(f"ConsumerProtocolSubscription version {v} is not 0-3")
    out = bytearray(_I16.pack(v))
    out += _I32.pack(len(sub.topics))
    for t in sub.topics:
        _string(out, t)
    _bytes(out, sub.user_data)
    if v >= 1:
        _topic_partitions(out, sub.owned_partitions)
    if v >= 2:
        out += _I32.pack(sub.generation_id)
    if v >= 3:
        _string(out, sub.rack_id)
    return bytes(out)


def encode_assignment(assignment: Assignment, version: int | None = None) -> bytes:
    """The bytes of ``assignment`` at ``version`` (default ``assignment.version``)."""
    v = assignment.version if version is None else version
    if not 0 <= v <= ASSIGNMENT_MAX_VERSION:
        raise ConsumerProtocolError(f"ConsumerProtocolAssignment version {v} is not 0-3")
    out = bytearray(_I16.pack(v))
    _topic_partitions(out, assignment.partitions)
    _bytes(out, assignment.user_data)
    return bytes(out)


# -- decoding -------------------------------------------------------------------------------

class _Reader:
    __slots__ = ("buf", "pos", "what")

    def __init__(self, buf: bytes, what: str) -> None:
        self.buf = memoryview(buf)
        self.pos = 0
        self.what = what

    def _need(self, n: int) -> None:
        if self.pos + n > len(self.buf):
            raise ConsumerProtocolError(f"{self.what} truncated at byte {self.pos} "
                                        f"(needs {n} more of {len(self.buf)})")

    def i16(self) -> int:
        self._need(2)
        v = _I16.unpack_from(self.buf, self.pos)[0]
        self.pos += 2
        return v

    def i32(self) -> int:
        self._need(4)
        v = _I32.unpack_from(self.buf, self.pos)[0]
        self.pos += 4
        return v

    def string(self, nullable: bool = False) -> str | None:
        n = self.i16()
        if n < 0:
            if nullable and n == -1:
                return None
            raise ConsumerProtocolError(f"{self.what}: string length {n} at byte {self.pos - 2}")
        self._need(n)
        try:
            s = bytes(self.buf[self.pos:self.pos + n]).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ConsumerProtocolError(f"{self.what}: invalid UTF-8 string: {e}") from None
        self.pos += n
        return s

    def bytes_(self) -> bytes | None:
        n = self.i32()
        if n < 0:
            if n == -1:
                return None
            raise ConsumerProtocolError(f"{self.what}: bytes length {n} at byte {self.pos - 4}")
        self._need(n)
        b = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return b

    def count(self) -> int:
        n = self.i32()
        # Each element takes at least 2 bytes: a count past the data is corrupt.
        if n < -1 or n > len(self.buf) - self.pos:
            raise ConsumerProtocolError(f"{self.what}: array length {n} at byte {self.pos - 4}")
        return max(n, 0)

    def topic_partitions(self) -> tuple[tuple[str, int], ...]:
        out = []
        for _ in range(self.count()):
            topic = self.string()
            for _ in range(self.count()):
                out.append((topic, self.i32()))
        return tuple(out)


def decode_subscription(data: bytes) -> Subscription:
    """A ``Subscription`` from JoinGroup metadata bytes (see the module docstring)."""
    r = _Reader(data, "ConsumerProtocolSubscription")
    version = r.i16()
    if version < 0:
        raise ConsumerProtocolError(f"ConsumerProtocolSubscription version {version}")
    v = min(version, SUBSCRIPTION_MAX_VERSION)
    topics = tuple(r.string() for _ in range(r.count()))
    user_data = r.bytes_()
    owned = r.topic_partitions() if v >= 1 else ()
    generation = r.i32() if v >= 2 else -1
    rack = r.string(nullable=True) if v >= 3 else None
    return Subscription(topics, user_data, owned, generation, rack, version)  # type: ignore[arg-type]


def decode_assignment(data: bytes) -> Assignment:
    """An ``Assignment`` from SyncGroup assignment bytes. Empty bytes (what the broker
    sends a member when the leader gave it nothing) decode as an empty assignment."""
    if not data:
        return Assignment((), None, 0)
    r = _Reader(data, "ConsumerProtocolAssignment")
    version = r.i16()
    if version < 0:
        raise ConsumerProtocolError(f"ConsumerProtocolAssignment version {version}")
    partitions = r.topic_partitions()
    user_data = r.bytes_()
    return Assignment(partitions, user_data, version)


def subscription(topics: Iterable[str], *, user_data: bytes | None = None,
                 owned_partitions: Iterable[tuple[str, int]] = (), generation_id: int = -1,
                 rack_id: str | None = None, version: int = SUBSCRIPTION_MAX_VERSION
                 ) -> Subscription:
    """A ``Subscription`` with sorted topics (Kafka sends them sorted)."""
    return Subscription(tuple(sorted(set(topics))), user_data,
                        tuple((t, int(p)) for t, p in owned_partitions), generation_id, rack_id,
                        version)


def assignment(partitions: Iterable[tuple[str, int]] | Mapping[str, Iterable[int]], *,
               user_data: bytes | None = None, version: int = ASSIGNMENT_MAX_VERSION
               ) -> Assignment:
    """An ``Assignment`` from (topic, partition) pairs or ``{topic: [partitions]}``."""
    if isinstance(partitions, Mapping):
        tps = tuple((t, int(p)) for t, ps in partitions.items() for p in ps)
    else:
        tps = tuple((t, int(p)) for t, p in partitions)
    return Assignment(tps, user_data, version)


__all__ = ["ASSIGNMENT_MAX_VERSION", "Assignment", "CONSUMER_PROTOCOL_TYPE",
           "ConsumerProtocolError", "SUBSCRIPTION_MAX_VERSION", "Subscription", "assignment",
           "decode_assignment", "decode_subscription", "encode_assignment",
           "encode_subscription", "subscription"]
