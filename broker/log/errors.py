"""Errors of the storage engine.

Owns: the exceptions ``broker.log`` raises. The server maps each to a Kafka error code
(named beside each class) without the log layer knowing anything of the protocol.

One name, one concept across the layers: ``CorruptRecordError`` and ``InvalidRecordError``
here are the log's kinds of ``broker.record.errors``' classes of the same name (so an
``except`` of the record layer's class, or of ``DecodeError``, also catches the log's);
``LogOffsetOutOfRangeError`` is named apart from the client's ``OffsetOutOfRangeError``
(a ``DataLossError``: the layers share no base below them for it).

Thread-safety: plain exception classes.
"""

from broker.record import errors as record_errors


class LogError(Exception):
    """Base class of the storage engine's errors."""


class KafkaStorageError(LogError):
    """An I/O error took a log directory offline (KAFKA_STORAGE_ERROR, 56). Nothing more is
    written to that directory until the broker restarts."""


class CorruptIndexError(LogError):
    """An index file fails its sanity check; the loader rebuilds it from the log."""


class LogOffsetOutOfRangeError(LogError):
    """A read below the log start offset or above the log end offset (OFFSET_OUT_OF_RANGE, 1)."""


class RecordBatchTooLargeError(LogError):
    """A batch larger than max.message.bytes (MESSAGE_TOO_LARGE, 10; Kafka's
    RecordTooLargeException)."""


class RecordListTooLargeError(RecordBatchTooLargeError):
    """The records of one append larger than the log's segment size, so no segment could
    hold them (RECORD_LIST_TOO_LARGE, 18; Kafka's RecordBatchTooLargeException from
    ``UnifiedLog.append``)."""


class InvalidRecordError(LogError, record_errors.InvalidRecordError):
    """A batch that breaks a rule of the log (INVALID_RECORD, 87): a control batch from a
    client, lastOffsetDelta + 1 != records count, a producer id with a negative sequence..."""

    # (index of the record in its batch, message), when the validator names the records
    # at fault (set on the instance; absent otherwise)
    record_errors: list[tuple[int, str]]


class CorruptRecordError(LogError, record_errors.CorruptRecordError):
    """A batch whose CRC or sizes are wrong (CORRUPT_MESSAGE, 2)."""


class UnsupportedForMessageFormatError(LogError):
    """A magic other than 2 on append (UNSUPPORTED_FOR_MESSAGE_FORMAT, 43)."""


class InvalidTimestampError(LogError):
    """A timestamp outside message.timestamp.*.max.ms (INVALID_TIMESTAMP, 32)."""

    record_errors: list[tuple[int, str]]  # as InvalidRecordError's


class OutOfOrderSequenceError(LogError):
    """A producer sequence that does not follow the last one (OUT_OF_ORDER_SEQUENCE_NUMBER, 45)."""


class InvalidProducerEpochError(LogError):
    """A producer epoch older than the one the log knows (INVALID_PRODUCER_EPOCH, 47)."""


class UnknownProducerIdError(LogError):
    """A producer whose state has been removed (UNKNOWN_PRODUCER_ID, 59)."""


class OffsetOverflowError(LogError):
    """A batch whose offsets cannot be stored relative to the segment's base offset (R16)."""


class CorruptSnapshotError(LogError):
    """A producer-state snapshot that fails its CRC or layout checks; the loader deletes it
    and falls back to the previous one (R9, R10)."""


class InvalidTxnStateError(LogError):
    """A non-transactional batch from a producer with an open transaction (INVALID_TXN_STATE, 48)."""


class TransactionCoordinatorFencedError(LogError):
    """A transaction marker from an older coordinator epoch (TRANSACTION_COORDINATOR_FENCED, 52)."""


class InvalidOffsetError(LogError, ValueError):
    """An index append whose offset does not follow the last entry (Kafka's
    InvalidOffsetException)."""


class IndexFullError(LogError):
    """An append to an index with no free slot; the caller should have rolled the segment
    (``LogSegment.should_roll`` checks ``is_full()``)."""
