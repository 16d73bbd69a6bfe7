"""Exceptions of the client core (producer, consumer, later admin).

Owns the exception hierarchy a client user sees, named after Kafka's client exceptions:

    KafkaError                      base; ``.code`` is the broker ``ErrorCode`` when there is one
      KafkaTimeoutError             TimeoutException: metadata wait, delivery.timeout.ms, flush
        BufferExhaustedError        BufferExhaustedException: no buffer.memory within max.block.ms
        BrokerUnreachableError      no broker of bootstrap.servers could be connected to within
                                    a wait's bound: names the addresses, the last connection
                                    failure's cause, the time waited and the config bounding it
      RecordTooLargeError           RecordTooLargeException: a record over max.request.size or
                                    buffer.memory (never sent); also a
                                    ``broker.record.errors.RecordTooLargeError`` (one
                                    concept in both layers: MESSAGE_TOO_LARGE)
      IllegalStateError             IllegalStateException: flush() from a callback, send() after
                                    close()
      ProducerClosedError           the producer was closed (force) with the record unsent
      NetworkError                  NetworkException: the connection dropped with the request
                                    in flight (retriable)
      RequestTimedOutError          request.timeout.ms passed without a response (retriable)
      UnsupportedVersionError       the broker does not support an API version we need
      AuthenticationError           AuthenticationException (not retriable)
        SslAuthenticationError      SslAuthenticationException: the TLS handshake failed
        SaslAuthenticationError     SaslAuthenticationException: SASL authentication failed
      FatalConsumerError            a consumer error no retry can fix (the share consumer's
                                    GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED,
                                    INVALID_REQUEST): close the consumer; ``code`` says which
        GroupAuthorizationError     GroupAuthorizationException: no READ on the group
        TopicAuthorizationError     TopicAuthorizationException: no READ / DESCRIBE on a topic
      DataLossError                 records a reader was asked for are gone (retention,
                                    DeleteRecords, a truncated log, a deleted topic);
                                    names the partition and the lost offsets
        OffsetOutOfRangeError       OFFSET_OUT_OF_RANGE: the fetch offset is outside the
                                    partition's [log start, high watermark]

``KafkaError.from_code(code, message)`` builds the error for a broker error code, with
``.retriable`` following ``ErrorCode.retriable``.

Thread-safety: immutable exception classes.
"""

from __future__ import annotations

from broker.protocol.errors import ErrorCode
from broker.record import errors as record_errors


class KafkaError(Exception):
    """A client-side error; ``code`` is the broker's error code when one applies."""

    code: ErrorCode | None = None
    retriable: bool = False

    def __init__(self, message: str = "", code: ErrorCode | int | None = None,
                 retriable: bool | None = None) -> None:
        if code is not None:
            self.code = ErrorCode.lookup(int(code))
            self.retriable = self.code.retriable
        if retriable is not None:
            self.retriable = retriable
        if not message and self.code is not None:
            message = self.code.name
        elif self.code is not None:
            message = f"{self.code.name}: {message}"
        super().__init__(message)

    @classmethod
    def from_code(cls, code: int, message: str = "") -> KafkaError:
        return _BY_CODE.get(code, KafkaError)(message, code)


class KafkaTimeoutError(KafkaError):
    """Kafka's TimeoutException (retriable in Kafka's sense; the client gave up)."""

    retriable = True


class BufferExhaustedError(KafkaTimeoutError):
    """No memory could be allocated from ``buffer.memory`` within ``max.block.ms``."""


class BrokerUnreachableError(KafkaTimeoutError):
    """No broker could be connected to before a wait's bound passed: ``servers`` (the
    bootstrap addresses), ``cause`` (the last connection failure: ``connection refused``,
    ``unknown host``, a timeout...), ``waited_ms`` and ``config``, the setting (or option)
    that bounds the wait (``max.block.ms``, ``default.api.timeout.ms``...). Its message:
    ``no broker of HOST:PORT reachable (CAUSE); waited N ms (CONFIG)``. ``renamed`` gives
    the same error naming another setting (``kafka.max.block.ms`` for Spark's option)."""

    def __init__(self, servers: str, cause: str, waited_ms: float, config: str) -> None:
        self.servers = servers
        self.cause = cause
        self.waited_ms = waited_ms
        self.config = config
        waited = f"{waited_ms:.0f}" if waited_ms == int(waited_ms) else f"{waited_ms:g}"
        super().__init__(f"no broker of {servers} reachable ({cause}); waited {waited} ms ({config})")

    def renamed(self, config: str, waited_ms: float | None = None) -> BrokerUnreachableError:
        return BrokerUnreachableError(self.servers, self.cause,
                                      self.waited_ms if waited_ms is None else waited_ms, config)

    def __reduce__(self):  # picklable (Spark ships task errors between processes)
        return (BrokerUnreachableError, (self.servers, self.cause, self.waited_ms, self.config))


class RecordTooLargeError(KafkaError, record_errors.RecordTooLargeError):
    """A record (or the broker's MESSAGE_TOO_LARGE on a single-record batch). Also the
    record layer's ``RecordTooLargeError`` (a ``DecodeError``, so a ``ValueError``)."""


class IllegalStateError(KafkaError):
    """A call that is not allowed in the current state (e.g. ``flush()`` in a callback)."""


class ProducerClosedError(KafkaError):
    """The producer was closed (forcibly) before the record was delivered."""


class NetworkError(KafkaError):
    """The connection to the broker failed with the request in flight."""

    retriable = True

    def __init__(self, message: str = "") -> None:
        super().__init__(message, ErrorCode.NETWORK_EXCEPTION)


class RequestTimedOutError(KafkaError):
    """``request.timeout.ms`` passed without a response; the connection was closed."""

    retriable = True

    def __init__(self, message: str = "") -> None:
        super().__init__(message, ErrorCode.REQUEST_TIMED_OUT)


class AuthenticationError(KafkaError):
    """AuthenticationException: the broker and the client could not authenticate each
    other; not retriable (the configuration must change)."""

    retriable = False


class SslAuthenticationError(AuthenticationError):
    """SslAuthenticationException: the TLS handshake failed (a server certificate from an
    untrusted CA, a host name it does not name, a client certificate the broker refused,
    no common protocol or cipher)."""


class UnsupportedVersionError(KafkaError):
    def __init__(self, message: str = "") -> None:
        super().__init__(message, ErrorCode.UNSUPPORTED_VERSION)


class FatalConsumerError(KafkaError):
    """A consumer error no retry can fix (the configuration, the ACLs or the client must
    change): raised by every later call until the consumer is closed. ``code`` is the
    broker's error (INVALID_REQUEST, or the subclasses' codes)."""

    retriable = False


class GroupAuthorizationError(FatalConsumerError):
    """Kafka's GroupAuthorizationException: GROUP_AUTHORIZATION_FAILED."""


class TopicAuthorizationError(FatalConsumerError):
    """Kafka's TopicAuthorizationException: TOPIC_AUTHORIZATION_FAILED."""


class DataLossError(KafkaError):
    """Offsets ``[lost_start, lost_end)`` of ``topic``-``partition``, inside the range
    ``[start_offset, end_offset)`` a reader was asked for, no longer exist."""

    def __init__(self, message: str, *, topic: str, partition: int, start_offset: int,
                 end_offset: int, lost_start: int, lost_end: int,
                 code: ErrorCode | int | None = None) -> None:
        self.topic = topic
        self.partition = partition
        self.start_offset = start_offset
        self.end_offset = end_offset
        self.lost_start = lost_start
        self.lost_end = lost_end
        super().__init__(message, code, retriable=False)


class OffsetOutOfRangeError(DataLossError):
    """The broker answered OFFSET_OUT_OF_RANGE; ``log_start_offset`` and
    ``high_watermark`` are the partition's bounds at that time (-1 when unknown)."""

    def __init__(self, message: str, *, topic: str, partition: int, start_offset: int,
                 end_offset: int, lost_start: int, lost_end: int, fetch_offset: int,
                 log_start_offset: int = -1, high_watermark: int = -1) -> None:
        self.fetch_offset = fetch_offset
        self.log_start_offset = log_start_offset
        self.high_watermark = high_watermark
        super().__init__(message, topic=topic, partition=partition, start_offset=start_offset,
                         end_offset=end_offset, lost_start=lost_start, lost_end=lost_end,
                         code=ErrorCode.OFFSET_OUT_OF_RANGE)


class ProducerFencedError(KafkaError):
    """Kafka's ProducerFencedException: another producer with the same transactional.id
    (or the coordinator, after a transaction timeout) took a newer epoch. Fatal: the
    producer can only be closed."""

    def __init__(self, message: str = "", code: ErrorCode | int | None = ErrorCode.PRODUCER_FENCED) -> None:
        super().__init__(message, code)


class TransactionAbortedError(KafkaError):
    """Kafka's TransactionAbortedException: the record was still queued when the
    transaction was aborted (or failed), so it was never sent."""


class TransactionAbortableError(KafkaError):
    """The transaction hit an error it cannot commit past (a record failed, the
    coordinator refused a partition...): ``abort_transaction()`` and start again. The
    error that caused it is ``__cause__`` (Kafka raises that error itself, the producer
    being in its ABORTABLE_ERROR state)."""


_BY_CODE: dict[int, type[KafkaError]] = {
    ErrorCode.MESSAGE_TOO_LARGE: RecordTooLargeError,
    ErrorCode.REQUEST_TIMED_OUT: KafkaError,
    ErrorCode.PRODUCER_FENCED: ProducerFencedError,
}


class SaslAuthenticationError(AuthenticationError):
    """SASL authentication failed (Kafka's ``SaslAuthenticationException``): not retriable.
    Raised by ``broker.client.sasl`` / ``oauthbearer``; the producer, consumer and admin
    client surface it. The message is the broker's (never a password)."""

    retriable = False

    def __init__(self, message: str = "", code: int = ErrorCode.SASL_AUTHENTICATION_FAILED) -> None:
        super().__init__(message, code, retriable=False)
