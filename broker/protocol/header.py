"""Request and response headers: their layouts per version and which version applies.

Owns the headers that precede every message body inside a frame:

    request header v0   int16 api_key, int16 api_version, int32 correlation_id
    request header v1   v0 + nullable_string client_id (int16 length, -1 = null)
    request header v2   v1 + tagged fields (client_id stays a NON-compact string, so a
                        broker can read it without knowing the API version)
    response header v0  int32 correlation_id
    response header v1  v0 + tagged fields (a single 0x00 when empty)

Which version applies is decided by ``broker.protocol.versions`` from the API key and
version: flexible API versions use request v2 / response v1, except that ApiVersions
responses always use response header v0 (KIP-511) and ControlledShutdown v0 requests
use request header v0.

``parse_request_header`` always yields api_key, api_version and correlation_id when the
first 8 bytes are present, even for unknown API keys or versions (it reads their
client_id as a v1 header, leniently), so the server can answer UNSUPPORTED_VERSION to an
ApiVersions request or close the connection.

Thread-safety: pure functions and immutable tuples.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from broker.protocol.errors import ProtocolDecodeError
from broker.protocol.primitives import Reader, Writer
from broker.protocol.versions import request_header_version, response_header_version

# api_key (2) + api_version (2) + correlation_id (4): the part every header version shares.
REQUEST_HEADER_PREFIX_BYTES = 8
_PREFIX = struct.Struct(">hhi")
RESPONSE_HEADER_V0_BYTES = 4


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None
    # 0, 1 or 2: the version read (or to write); 1 for unknown keys.
    header_version: int = 1
    # False when the API key is unknown to this codec (the body cannot be parsed).
    known_api: bool = True


class ResponseHeader(NamedTuple):
    correlation_id: int
    header_version: int = 0


def parse_request_header(buf: Any, offset: int = 0) -> tuple[RequestHeader, int]:
    """Parse the request header at ``buf[offset:]``; returns (header, body offset).

    Raises TruncatedFrameError if fewer than 8 bytes are present, and other
    ProtocolDecodeErrors for a malformed client_id or tag section of a known API; those
    carry what was read as ``exc.header`` (client_id None).
    """
    r = buf if isinstance(buf, Reader) else Reader(buf, offset)
    start = r.pos
    api_key, api_version, correlation_id = r.unpack(_PREFIX, REQUEST_HEADER_PREFIX_BYTES)
    header_version = request_header_version(api_key, api_version)
    if header_version is None:  # unknown API key: best effort, as a v1 header
        try:
            client_id = r.nullable_string()
        except ProtocolDecodeError:
            r.pos = start + REQUEST_HEADER_PREFIX_BYTES
            client_id = None
        header = RequestHeader(api_key, api_version, correlation_id, client_id, 1, False)
        return header, r.pos
    client_id = None
    try:
        if header_version >= 1:
            client_id = r.nullable_string()
        if header_version >= 2:
            r.skip_tagged_fields()  # RequestHeader defines no tags yet; skip unknown ones
    except ProtocolDecodeError as e:
        e.header = RequestHeader(api_key, api_version, correlation_id, None, header_version)  # type: ignore[attr-defined]
        raise
    header = RequestHeader(api_key, api_version, correlation_id, client_id, header_version)
    return header, r.pos


def encode_request_header(writer: Writer, header: RequestHeader) -> None:
    """Write ``header`` with the version its API key and version call for (client side)."""
    version = request_header_version(header.api_key, header.api_version)
    if version is None:
        version = header.header_version
    writer.int16(header.api_key)
    writer.int16(header.api_version)
    writer.int32(header.correlation_id)
    if version >= 1:
        writer.nullable_string(header.client_id)
    if version >= 2:
        writer.empty_tagged_fields()


def encode_response_header(writer: Writer, correlation_id: int, api_key: int, api_version: int) -> None:
    """Write the response header for a response to ``api_key`` / ``api_version``."""
    writer.int32(correlation_id)
    if response_header_version(api_key, api_version) >= 1:
        writer.empty_tagged_fields()


def parse_response_header(buf: Any, api_key: int, api_version: int, offset: int = 0) -> tuple[ResponseHeader, int]:
    """Parse a response header (client side); returns (header, body offset)."""
    r = buf if isinstance(buf, Reader) else Reader(buf, offset)
    correlation_id = r.int32()
    version = response_header_version(api_key, api_version)
    if version >= 1:
        r.skip_tagged_fields()
    return ResponseHeader(correlation_id, version), r.pos
