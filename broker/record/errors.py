"""Typed errors of the record layer.

Owns: the exception hierarchy raised while encoding or decoding record batches, legacy
message sets and compressed payloads. Every malformed input raises a subclass of
``DecodeError`` (never IndexError, struct.error, zlib.error, ...), so that callers (the log
validator, the fetch path, the Spark readers, fuzz tests) can catch exactly one type.

An upper layer that keeps one of these names refines the class, never redefines it:
``broker.log.errors.CorruptRecordError`` / ``InvalidRecordError`` and
``broker.client.errors.RecordTooLargeError`` subclass the classes of the same name here.

``CorruptBatchError`` is the one error a reader reports for a whole batch it cannot read
(named by its base and last offsets, and by its topic-partition once a caller knows it).

Thread-safety: plain exception classes, nothing shared.
"""

from __future__ import annotations


class RecordError(Exception):
    """Base class of every error of ``broker.record``."""


class DecodeError(RecordError, ValueError):
    """Bytes that are not a valid record batch, message set or compressed payload."""


class TruncatedError(DecodeError):
    """A length or count points past the end of the bytes that remain."""


class CorruptRecordError(DecodeError):
    """The bytes are complete but inconsistent: a CRC mismatch, a bad length, a count that
    disagrees with the records present. Kafka's CORRUPT_MESSAGE (error code 2)."""


class CorruptBatchError(CorruptRecordError):
    """One batch of a log or a fetch response that cannot be read, named by its offsets:
    its framing (base offset, length, magic) is sound, so a reader knows where the next
    batch starts and may skip this one, but its content is not (CRC mismatch, records
    that do not decode, a payload that does not decompress or inflates past its budget).

    ``base_offset`` / ``last_offset`` are the batch's (from its header), ``reason`` what is
    wrong (e.g. ``record 3: key length -7 out of range``), ``position`` its byte position
    in the buffer read (-1: unknown); ``topic`` / ``partition`` are filled in by the layer
    that knows them (``with_partition``). Kafka's consumer raises a CorruptRecordException
    (CORRUPT_MESSAGE) at such a batch."""

    def __init__(self, reason: str, *, base_offset: int, last_offset: int, position: int = -1,
                 topic: str | None = None, partition: int | None = None) -> None:
        self.reason = reason
        self.base_offset = base_offset
        self.last_offset = last_offset
        self.position = position
        self.topic = topic
        self.partition = partition
        where = "" if topic is None else f" of {topic}-{partition}"
        at = "" if position < 0 else f" (byte position {position})"
        super().__init__(f"Record batch{where} at offsets [{base_offset}, {last_offset}]{at} "
                         f"is invalid: {reason}")

    def with_partition(self, topic: str, partition: int) -> CorruptBatchError:
        """The same error naming ``topic``-``partition``."""
        return CorruptBatchError(self.reason, base_offset=self.base_offset,
                                 last_offset=self.last_offset, position=self.position,
                                 topic=topic, partition=partition)


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
