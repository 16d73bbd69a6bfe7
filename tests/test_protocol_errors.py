"""broker.protocol.errors: the decode error hierarchy and Kafka's error code table,
cross-checked against kafka-python's kafka/errors.py."""

from __future__ import annotations

import inspect

import pytest

from broker.protocol import errors
from broker.protocol.errors import ErrorCode

kafka_errors = pytest.importorskip("kafka.errors")

# kafka-python spells a few codes differently (older Kafka names or its own).
KAFKA_PYTHON_NAMES = {
    ErrorCode.UNKNOWN_SERVER_ERROR: "UNKNOWN",
    ErrorCode.NONE: "NO_ERROR",
    ErrorCode.NOT_LEADER_OR_FOLLOWER: "NOT_LEADER_FOR_PARTITION",
    ErrorCode.MESSAGE_TOO_LARGE: "MESSAGE_SIZE_TOO_LARGE",
    ErrorCode.INVALID_TOPIC_EXCEPTION: "INVALID_TOPIC",
    ErrorCode.INVALID_REPLICA_ASSIGNMENT: "INVALID_REPLICATION_ASSIGNMENT",
}
# Java's CorruptRecordException extends RetriableException; kafka-python says otherwise.
KAFKA_PYTHON_RETRIABLE_DIFFERS = {ErrorCode.CORRUPT_MESSAGE}


def kafka_python_table() -> dict[int, tuple[str, bool]]:
    table = {}
    for _, cls in inspect.getmembers(kafka_errors, inspect.isclass):
        if issubclass(cls, kafka_errors.BrokerResponseError) and cls.errno is not None:
            table.setdefault(cls.errno, (cls.message, cls.retriable))
    return table


def test_codes_names_and_retriable_match_kafka_python() -> None:
    theirs = kafka_python_table()
    common = [code for code in ErrorCode if int(code) in theirs]
    assert len(common) >= 128  # -1 .. 127 at least
    for code in common:
        name, retriable = theirs[int(code)]
        assert KAFKA_PYTHON_NAMES.get(code, code.name) == name, code
        if code in KAFKA_PYTHON_RETRIABLE_DIFFERS:
            assert code.retriable and not retriable
        else:
            assert code.retriable == retriable, code
    assert set(theirs) <= {int(c) for c in ErrorCode}


def test_every_code_up_to_120_is_defined() -> None:
    assert {int(c) for c in ErrorCode} >= set(range(-1, 121))


@pytest.mark.parametrize(
    ("code", "value", "retriable"),
    [
        (ErrorCode.NONE, 0, False),
        (ErrorCode.UNKNOWN_SERVER_ERROR, -1, False),
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 3, True),
        (ErrorCode.NOT_LEADER_OR_FOLLOWER, 6, True),
        (ErrorCode.REQUEST_TIMED_OUT, 7, True),
        (ErrorCode.INVALID_REQUIRED_ACKS, 21, False),
        (ErrorCode.UNSUPPORTED_VERSION, 35, False),
        (ErrorCode.INVALID_REQUEST, 42, False),
        (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, 45, False),
        (ErrorCode.KAFKA_STORAGE_ERROR, 56, True),
        (ErrorCode.UNKNOWN_PRODUCER_ID, 59, False),
        (ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, 76, False),
        (ErrorCode.INVALID_RECORD, 87, False),
        (ErrorCode.TRANSACTION_ABORTABLE, 120, False),
    ],
)
def test_well_known_codes(code: ErrorCode, value: int, retriable: bool) -> None:
    assert int(code) == value
    assert code.retriable is retriable


def test_lookup_maps_unknown_codes_to_unknown_server_error() -> None:
    assert ErrorCode.lookup(3) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert ErrorCode.lookup(31000) is ErrorCode.UNKNOWN_SERVER_ERROR


def test_decode_errors_form_one_hierarchy() -> None:
    for cls in (
        errors.TruncatedFrameError,
        errors.InvalidFrameSizeError,
        errors.UnsupportedApiVersionError,
        errors.UnknownApiKeyError,
        errors.InvalidValueError,
    ):
        assert issubclass(cls, errors.ProtocolDecodeError)
    assert issubclass(errors.ProtocolDecodeError, ValueError)
    assert not issubclass(errors.ProtocolEncodeError, errors.ProtocolDecodeError)
    e = errors.UnsupportedApiVersionError(18, 9)
    assert (e.api_key, e.api_version) == (18, 9)
    e2 = errors.InvalidFrameSizeError(-1, 100)
    assert (e2.size, e2.max_bytes) == (-1, 100)
