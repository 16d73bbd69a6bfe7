"""Produce's fast codec: the broker's hot request parsed and answered without the generic
schema machinery.

Owns ``parse_produce_request`` (a whole Produce v3-v12 request frame, header included, to
a ``RequestHeader`` and a ``ProduceRequestData``), ``from_struct`` (the generic decoder's
``ProduceRequest`` to the same form), ``ProduceResult`` (what the broker's Produce handler
answers) and ``encode_produce_response`` (a ``ProduceResult`` to a whole response frame).
Every produce request the broker serves goes through here (the generic
``schema.decode`` / ``encode`` cost about a sixth of the CPU of a 16-KiB produce).

Wire layout (Kafka's ProduceRequest.json / ProduceResponse.json; the generic codecs in
``messages/produce.py`` are the reference):

* request header v1 (v3-v8) / v2 (v9+): int16 api_key, int16 api_version, int32
  correlation_id, int16-length nullable client_id, then (v2) tagged fields;
* body: transactional_id (nullable string), int16 acks, int32 timeout_ms, topic_data
  [name string, partition_data [int32 index, records (nullable bytes)]]; from v9 strings,
  bytes and arrays are compact (uvarint length + 1) and every struct ends with tagged
  fields;
* response header v0 / v1 (v9+: + tagged fields); body responses [name,
  partition_responses [int32 index, int16 error_code, int64 base_offset, int64
  log_append_time_ms, int64 log_start_offset (v5+), record_errors [int32 batch_index,
  nullable string message] (v8+), nullable string error_message (v8+)]], int32
  throttle_time_ms. The response's tagged fields (CurrentLeader, NodeEndpoints: leader
  changes, which a single broker never has) are written empty, as the generic encoder
  writes them at their defaults.

Invariants (checked byte for byte against the generic codecs by tests, property tests
included): ``parse_produce_request`` returns exactly what the generic decoder would give
(records are memoryview slices of the frame: nothing copied), or None for anything it does
not take on, so that the generic path decides: any tagged field present, a malformed or
truncated frame, a string that is not UTF-8, more than ``MAX_REQUEST_ELEMENTS`` elements.
It never raises. ``encode_produce_response`` writes the same bytes as the generic encoder
of the equivalent ``ProduceResponse``.

Thread-safety: pure functions; ``ProduceResult`` belongs to the request's thread.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from broker.protocol.header import RequestHeader
from broker.protocol.primitives import MAX_LENGTH, MAX_REQUEST_ELEMENTS, MAX_STRING_BYTES

__all__ = ["MAX_VERSION", "MIN_VERSION", "ProduceRequestData", "ProduceResult", "encode_produce_response",
           "from_struct", "parse_produce_request"]

MIN_VERSION = 3  # transactional_id (v3) on: the versions the broker serves
MAX_VERSION = 12
FIRST_FLEXIBLE = 9

_HEAD = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")
_PARTITION = struct.Struct(">ihqq")  # index, error_code, base_offset, log_append_time_ms
_PARTITION_V5 = struct.Struct(">ihqqq")  # + log_start_offset
_PARTITION_V5_EMPTY_ERRORS = struct.Struct(">ihqqqih")  # v8: + record_errors [] + error_message null
_SIZE_CORRELATION = struct.Struct(">ii")


class ProduceRequestData(NamedTuple):
    """A Produce request body: ``topic_data`` is a list of (topic name, [(partition index,
    records memoryview or None), ...])."""
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topic_data: list


class ProduceResult:
    """A Produce response body: ``responses`` is a list of (topic name, [partition tuple,
    ...]) with partition tuples (index, error_code, base_offset, log_append_time_ms,
    log_start_offset, record_errors, error_message), record_errors a list of (batch_index,
    message) pairs. ``throttle_time_ms`` is settable (quotas raise it after the handler)."""

    __slots__ = ("responses", "throttle_time_ms")

    def __init__(self, responses: list, throttle_time_ms: int = 0) -> None:
        self.responses = responses
        self.throttle_time_ms = throttle_time_ms


class _Refused(Exception):
    """Internal: the fast parser declines; the generic decoder decides."""


def _uvarint(buf: Any, pos: int) -> tuple[int, int]:
    """An unsigned int32 varint at ``pos`` of more than one byte: (value, position after)."""
    value = 0
    shift = 0
    for i in range(pos, pos + 5):
        b = buf[i]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            if value > 0xFFFFFFFF:
                raise _Refused
            return value, i + 1
        shift += 7
    raise _Refused


def _uvarint_at(buf: Any, pos: int) -> tuple[int, int]:
    """The unsigned varint at ``pos`` (a compact length or count) and the position after
    it; one byte, the common case, without the loop."""
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    return _uvarint(buf, pos)


def parse_produce_request(frame: Any) -> tuple[RequestHeader, ProduceRequestData] | None:
    """The header and body of the Produce request ``frame`` (without its size prefix), or
    None when the generic decoder must decide (module docstring). Never raises."""
    try:
        return _parse(frame)
    except (_Refused, struct.error, IndexError, UnicodeDecodeError):
        return None


def _parse(buf: Any) -> tuple[RequestHeader, ProduceRequestData] | None:
    end = len(buf)
    key, version, correlation_id, n = _HEAD.unpack_from(buf, 0)
    if key != 0 or not MIN_VERSION <= version <= MAX_VERSION:
        return None
    pos = 10
    if n < 0:
        client_id = None
    else:
        if pos + n > end:
            return None
        client_id = str(buf[pos:pos + n], "utf-8")
        pos += n
    if version >= FIRST_FLEXIBLE:
        if buf[pos]:  # header tagged fields
            return None
        pos += 1
        n, pos = _uvarint_at(buf, pos)
        if n == 0:
            transactional_id = None
        else:
            n -= 1
            if n > MAX_STRING_BYTES or pos + n > end:
                return None
            transactional_id = str(buf[pos:pos + n], "utf-8")
            pos += n
        acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(buf, pos)
        pos += 6
        count, pos = _uvarint_at(buf, pos)
        count -= 1  # compact array: N + 1 (0: null, refused by the generic decoder)
        if count < 0 or count * 3 > end - pos:
            return None
        elements = count
        topics = []
        for _ in range(count):
            n, pos = _uvarint_at(buf, pos)
            n -= 1
            if n < 0 or n > MAX_STRING_BYTES or pos + n > end:
                return None
            name = str(buf[pos:pos + n], "utf-8")
            pos += n
            parts, pos = _uvarint_at(buf, pos)
            parts -= 1
            if parts < 0 or parts * 6 > end - pos:
                return None
            elements += parts
            if elements > MAX_REQUEST_ELEMENTS:
                return None
            partitions = []
            for _ in range(parts):
                index = _I32.unpack_from(buf, pos)[0]
                pos += 4
                n, pos = _uvarint_at(buf, pos)
                if n == 0:
                    records = None
                else:
                    n -= 1
                    if n > MAX_LENGTH or pos + n > end:
                        return None
                    records = buf[pos:pos + n]
                    pos += n
                if buf[pos]:  # partition tagged fields
                    return None
                pos += 1
                partitions.append((index, records))
            if buf[pos]:  # topic tagged fields
                return None
            pos += 1
            topics.append((name, partitions))
        if buf[pos]:  # body tagged fields
            return None
    else:
        n = _I16.unpack_from(buf, pos)[0]
        pos += 2
        if n < 0:
            transactional_id = None
        else:
            if pos + n > end:
                return None
            transactional_id = str(buf[pos:pos + n], "utf-8")
            pos += n
        acks, timeout_ms, count = _ACKS_TIMEOUT_COUNT.unpack_from(buf, pos)
        pos += 10
        if count < 0 or count * 6 > end - pos:
            return None
        elements = count
        topics = []
        for _ in range(count):
            n = _I16.unpack_from(buf, pos)[0]
            pos += 2
            if n < 0 or pos + n > end:
                return None
            name = str(buf[pos:pos + n], "utf-8")
            pos += n
            parts = _I32.unpack_from(buf, pos)[0]
            pos += 4
            if parts < 0 or parts * 8 > end - pos:
                return None
            elements += parts
            if elements > MAX_REQUEST_ELEMENTS:
                return None
            partitions = []
            for _ in range(parts):
                index, n = _INDEX_LENGTH.unpack_from(buf, pos)
                pos += 8
                if n < 0:
                    records = None
                else:
                    if pos + n > end:
                        return None
                    records = buf[pos:pos + n]
                    pos += n
                partitions.append((index, records))
            topics.append((name, partitions))
    header = RequestHeader(0, version, correlation_id, client_id, 2 if version >= FIRST_FLEXIBLE else 1)
    return header, ProduceRequestData(transactional_id, acks, timeout_ms, topics)


_ACKS_TIMEOUT_COUNT = struct.Struct(">hii")
_INDEX_LENGTH = struct.Struct(">ii")


def from_struct(body: Any) -> ProduceRequestData:
    """The generic decoder's ``ProduceRequest`` in this module's form."""
    return ProduceRequestData(body.transactional_id, body.acks, body.timeout_ms,
                              [(t.name, [(p.index, p.records) for p in t.partition_data]) for t in body.topic_data])


# --- the response -------------------------------------------------------------------


def _uvarint_bytes(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _string(text: str | None, flexible: bool) -> bytes:
    if text is None:
        return b"\x00" if flexible else b"\xff\xff"
    data = text.encode()
    return (_uvarint_bytes(len(data) + 1) if flexible else _I16.pack(len(data))) + data


def _count(n: int, flexible: bool) -> bytes:
    return _uvarint_bytes(n + 1) if flexible else _I32.pack(n)


def encode_produce_response(correlation_id: int, version: int, result: ProduceResult) -> list[Any]:
    """The whole response frame (size prefix included, as ``codec.encode_response``) of
    ``result`` answering a Produce v3-v12 request."""
    flexible = version >= FIRST_FLEXIBLE
    out = bytearray(8)  # size and correlation id, packed last
    if flexible:
        out.append(0)  # response header tagged fields
    responses = result.responses
    out += _count(len(responses), flexible)
    v5 = version >= 5
    v8 = version >= 8
    for name, partitions in responses:
        out += _string(name, flexible)
        out += _count(len(partitions), flexible)
        for index, code, base_offset, append_time, start_offset, record_errors, message in partitions:
            if v8 and not flexible and not record_errors and message is None:
                out += _PARTITION_V5_EMPTY_ERRORS.pack(index, code, base_offset, append_time, start_offset, 0, -1)
                continue
            if v5:
                out += _PARTITION_V5.pack(index, code, base_offset, append_time, start_offset)
            else:
                out += _PARTITION.pack(index, code, base_offset, append_time)
            if v8:
                out += _count(len(record_errors), flexible)
                for batch_index, error in record_errors:
                    out += _I32.pack(batch_index)
                    out += _string(error, flexible)
                    if flexible:
                        out.append(0)
                out += _string(message, flexible)
            if flexible:
                out.append(0)  # partition tagged fields (CurrentLeader at its default: absent)
        if flexible:
            out.append(0)  # topic tagged fields
    out += _I32.pack(result.throttle_time_ms)
    if flexible:
        out.append(0)  # body tagged fields (NodeEndpoints empty: absent)
    _SIZE_CORRELATION.pack_into(out, 0, len(out) - 4, correlation_id)
    return [out]
