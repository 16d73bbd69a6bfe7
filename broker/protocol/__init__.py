"""Kafka's wire protocol, sans-IO: framing, headers, message schemas and error codes.

Layers, bottom up (each module's docstring states its wire format and invariants):

    primitives.py   Reader / Writer for every primitive type (bounded, zero-copy records)
    schema.py       Field / Message tables and their compiled decode / encode
    messages/       the tables, one module per API, generated from Kafka's JSON schemas
                    by tools/gen_protocol_schemas.py (committed; never edited by hand)
    api_keys.py     ApiKey enum and every API's version ranges (generated)
    versions.py     what the broker advertises; schema and header-version lookups
    header.py       request / response headers
    frame.py        int32 size-prefixed frames: FrameDecoder, encode_frame
    codec.py        whole requests and responses (header + body + frame)
    errors.py       decode error hierarchy and Kafka's ErrorCode enum

Typical server use::

    decoder = FrameDecoder(max_frame_bytes)
    for frame in decoder.feed(data):
        request = decode_request(frame)          # Request(header, body)
        ...
        sock.sendmsg(encode_response(request.header, response_body))

This package knows nothing of sockets or files (it imports neither ``broker.log``,
``broker.server`` nor ``broker.client``); the JSON schemas are not read at run time.
"""

from broker.protocol.api_keys import ApiKey
from broker.protocol.codec import (
    Request,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from broker.protocol.errors import (
    ErrorCode,
    InvalidFrameSizeError,
    InvalidValueError,
    ProtocolDecodeError,
    ProtocolEncodeError,
    ProtocolError,
    TooManyElementsError,
    TruncatedFrameError,
    UnknownApiKeyError,
    UnsupportedApiVersionError,
)
from broker.protocol.frame import DEFAULT_MAX_FRAME_BYTES, FrameDecoder, encode_frame, frame_buffers
from broker.protocol.header import RequestHeader, ResponseHeader, parse_request_header
from broker.protocol.primitives import Reader, Writer
from broker.protocol.schema import Field, Message, Struct, decode, decode_bytes, encode, encode_bytes
from broker.protocol.versions import (
    ADVERTISED,
    SASL_ADVERTISED,
    advertised_apis,
    request_header_version,
    request_schema,
    response_header_version,
    response_schema,
)

__all__ = [
    "ADVERTISED", "ApiKey", "DEFAULT_MAX_FRAME_BYTES", "ErrorCode", "Field", "FrameDecoder",
    "InvalidFrameSizeError", "InvalidValueError", "TooManyElementsError", "Message", "ProtocolDecodeError",
    "ProtocolEncodeError", "ProtocolError", "Reader", "Request", "RequestHeader",
    "ResponseHeader", "SASL_ADVERTISED", "Struct", "TruncatedFrameError",
    "UnknownApiKeyError", "UnsupportedApiVersionError", "Writer", "advertised_apis", "decode",
    "decode_bytes", "decode_request", "decode_response", "encode", "encode_bytes",
    "encode_frame", "encode_request", "encode_response", "frame_buffers",
    "parse_request_header", "request_header_version", "request_schema",
    "response_header_version", "response_schema",
]
