"""Typed errors of the record layer.

Owns: the exception hierarchy raised while encoding or decoding record batches, legacy
message sets and compressed payloads. Every malformed input raises a subclass of
``DecodeError`` (never IndexError, struct.error, zlib.error, ...), so that callers (the log
validator, the fetch path, the Spark readers, fuzz tests) can catch exactly one type.

Thread-safety: plain exception classes, nothing shared.
"""


class RecordError(Exception):
    """Base class of every error of ``broker.record``."""


class DecodeError(RecordError, ValueError):
    """Bytes that are not a valid record batch, message set or compressed payload."""


class TruncatedError(DecodeError):
    """A length or count points past the end of the bytes that remain."""


class CorruptRecordError(DecodeError):
    """The bytes are complete but inconsistent: a CRC mismatch, a bad length, a count that
    disagrees with the records present. Kafka's CORRUPT_MESSAGE (error code 2)."""


class InvalidRecordError(DecodeError):
    """Well-formed bytes that break a rule of the format (e.g. lastOffsetDelta + 1 !=
    records count, a negative key length below -1). Kafka's INVALID_RECORD (87).
    ``batch_index``: the index in its batch of the record at fault, when one is
    (``validation.py``; Kafka's ``RecordError``), else None."""

    batch_index: int | None = None


class UnsupportedMagicError(DecodeError):
    """A magic byte other than 0, 1 or 2."""


class UnsupportedCodecError(DecodeError):
    """A compression codec id outside 0-4 (none, gzip, snappy, lz4, zstd)."""


class DecompressionError(DecodeError):
    """A compressed payload that its codec cannot decompress."""


class RecordTooLargeError(DecodeError):
    """A payload that inflates past its size budget (``max.message.bytes``): rejected
    before it can exhaust memory. Kafka's MESSAGE_TOO_LARGE (10) / RECORD_TOO_LARGE."""


class EncodeError(RecordError, ValueError):
    """Values that cannot be encoded (e.g. a header key that is not str, a negative count)."""
