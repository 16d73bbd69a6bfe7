"""Whole requests and responses: header + body, in and out of frames.

Owns the glue the server and the client call per message, built from the lower layers
(``header``, ``versions``, ``schema``, ``frame``):

* server side: ``decode_request(frame) -> Request`` and
  ``encode_response(header, body, version=None) -> list of buffers`` (a whole frame,
  size prefix included, ready for ``socket.sendmsg``);
* client side: ``encode_request(header, body) -> list of buffers`` and
  ``decode_response(frame, api_key, api_version) -> (ResponseHeader, body)``.

Errors: ``decode_request`` raises ``UnknownApiKeyError`` / ``UnsupportedApiVersionError``
for a key or version without a schema, and other ``ProtocolDecodeError`` subclasses for
malformed bytes. When the 8-byte header prefix was readable the exception carries it as
``exc.header`` (``RequestHeader``) so the server can still answer (ApiVersions with
UNSUPPORTED_VERSION) or log the client before closing the connection.

Thread-safety: pure functions.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from broker.protocol.errors import ProtocolDecodeError
from broker.protocol.frame import frame_buffers
from broker.protocol.header import (
    RequestHeader,
    ResponseHeader,
    encode_request_header,
    encode_response_header,
    parse_request_header,
    parse_response_header,
)
from broker.protocol.primitives import Reader, Writer
from broker.protocol.schema import decode, encode
from broker.protocol.versions import request_schema, response_schema


class Request(NamedTuple):
    header: RequestHeader
    body: Any  # a Struct of request_schema(api_key, api_version).cls


def decode_request(frame: Any) -> Request:
    """Parse one request frame (without its size prefix). Trailing bytes are ignored."""
    reader = Reader(frame)
    header, _ = parse_request_header(reader)
    try:
        message = request_schema(header.api_key, header.api_version)
        body = decode(message, header.api_version, reader)
    except ProtocolDecodeError as e:
        e.header = header  # type: ignore[attr-defined]
        raise
    return Request(header, body)


def encode_response(header: RequestHeader, body: Any, version: int | None = None) -> list[Any]:
    """A response frame to ``header``'s request: size prefix, response header, body.

    ``version`` overrides the body version (ApiVersions answers an unsupported version
    with a v0 body); the response header version follows the request's API version.
    """
    api_version = header.api_version if version is None else version
    writer = Writer()
    encode_response_header(writer, header.correlation_id, header.api_key, header.api_version)
    encode(response_schema(header.api_key, api_version), api_version, body, writer)
    return frame_buffers(writer.buffers())


def encode_request(header: RequestHeader, body: Any) -> list[Any]:
    """A request frame: size prefix, request header, body (client side)."""
    writer = Writer()
    encode_request_header(writer, header)
    encode(request_schema(header.api_key, header.api_version), header.api_version, body, writer)
    return frame_buffers(writer.buffers())


def decode_response(frame: Any, api_key: int, api_version: int) -> tuple[ResponseHeader, Any]:
    """Parse one response frame to a request of ``api_key`` / ``api_version``."""
    reader = Reader(frame)
    header, _ = parse_response_header(reader, api_key, api_version)
    body = decode(response_schema(api_key, api_version), api_version, reader)
    return header, body
