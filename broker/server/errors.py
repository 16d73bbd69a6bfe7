"""Exceptions of the request path and their Kafka error codes.

Owns two things:

* ``error_code_for(exc)``: the one place where an exception raised while
  serving a request (the storage engine's ``broker.log.errors``, the record layer's
  ``broker.record.errors``, this package's ``ApiError``) becomes a numeric Kafka error
  code, as Kafka's ``Errors.forException``. Anything unknown becomes
  UNKNOWN_SERVER_ERROR (-1), and the caller logs it: a bug, never bad input.
* ``log_failure``: how a handler logs a partition's failure (traceback only for bugs).
* ``ApiError``: raised by the topic manager and handlers with an explicit code and
  message (INVALID_TOPIC_EXCEPTION, TOPIC_ALREADY_EXISTS, INVALID_CONFIG, ...).

Thread-safety: pure functions and immutable tables.
"""

from __future__ import annotations

import logging

from broker.log import errors as log_errors
from broker.log.remote.errors import RemoteStorageError
from broker.protocol import ErrorCode
from broker.record import errors as record_errors


class ApiError(Exception):
    """A request-level failure with its Kafka error code and a message for the client."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


# Most specific first: the first isinstance match wins.
_LOG_ERRORS: tuple[tuple[type[BaseException], ErrorCode], ...] = (
    (log_errors.LogOffsetOutOfRangeError, ErrorCode.OFFSET_OUT_OF_RANGE),
    (log_errors.RecordListTooLargeError, ErrorCode.RECORD_LIST_TOO_LARGE),
    (log_errors.RecordBatchTooLargeError, ErrorCode.MESSAGE_TOO_LARGE),
    (log_errors.InvalidRecordError, ErrorCode.INVALID_RECORD),
    (log_errors.CorruptRecordError, ErrorCode.CORRUPT_MESSAGE),
    (log_errors.UnsupportedForMessageFormatError, ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT),
    (log_errors.InvalidTimestampError, ErrorCode.INVALID_TIMESTAMP),
    (log_errors.OutOfOrderSequenceError, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
    (log_errors.InvalidProducerEpochError, ErrorCode.INVALID_PRODUCER_EPOCH),
    (log_errors.UnknownProducerIdError, ErrorCode.UNKNOWN_PRODUCER_ID),
    (log_errors.InvalidTxnStateError, ErrorCode.INVALID_TXN_STATE),
    (log_errors.TransactionCoordinatorFencedError, ErrorCode.TRANSACTION_COORDINATOR_FENCED),
    (log_errors.KafkaStorageError, ErrorCode.KAFKA_STORAGE_ERROR),
    (record_errors.RecordTooLargeError, ErrorCode.MESSAGE_TOO_LARGE),
    (record_errors.InvalidRecordError, ErrorCode.INVALID_RECORD),
    (record_errors.UnsupportedMagicError, ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT),
    (record_errors.UnsupportedCodecError, ErrorCode.CORRUPT_MESSAGE),
    (record_errors.DecodeError, ErrorCode.CORRUPT_MESSAGE),
)


def error_code_for(exc: BaseException) -> ErrorCode:
    """Kafka's error code for ``exc``; UNKNOWN_SERVER_ERROR when it is not a known one."""
    if isinstance(exc, ApiError):
        return exc.code
    for cls, code in _LOG_ERRORS:
        if isinstance(exc, cls):
            return code
    return ErrorCode.UNKNOWN_SERVER_ERROR


def is_expected(exc: BaseException) -> bool:
    """True for errors that bad input or a failed disk explain (no traceback in the log)."""
    return error_code_for(exc) is not ErrorCode.UNKNOWN_SERVER_ERROR


def log_failure(logger: logging.Logger, exc: BaseException, what: str, *args: object) -> None:
    """Log a partition's failure in a request (``what % args``): a remote storage failure
    (tiered storage's object store, answered UNKNOWN_SERVER_ERROR as in Kafka) as one
    ERROR line with the store's message; any other unexplained error with its traceback
    (a bug); errors that bad input or a failed disk explain not at all."""
    if isinstance(exc, RemoteStorageError):
        logger.error(what + ": %s", *args, exc)
    elif not is_expected(exc):
        logger.exception(what, *args)
