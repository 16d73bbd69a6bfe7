"""The embedded consumer protocol (broker/client/consumer/protocol.py): golden bytes from
kafka-python's ConsumerProtocolSubscription / ConsumerProtocolAssignment, both ways."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment as KAssignment
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as KSubscription

from broker.client.consumer.protocol import (
    Assignment,
    ConsumerProtocolError,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

topics_st = st.lists(st.text(min_size=1, max_size=12), max_size=4, unique=True)
tp_map_st = st.dictionaries(st.text(min_size=1, max_size=8),
                            st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=5, unique=True),
                            max_size=4)
user_data_st = st.one_of(st.none(), st.binary(max_size=20))


def _pairs(m):
    return tuple((t, p) for t, ps in m.items() for p in ps)


def _kafka_sub(version, topics, user_data, owned, generation, rack):
    fields = dict(version=version, topics=topics, user_data=user_data)
    if version >= 1:
        fields["owned_partitions"] = [(t, ps) for t, ps in owned.items()]
    if version >= 2:
        fields["generation_id"] = generation
    if version >= 3:
        fields["rack_id"] = rack
    return KSubscription(**fields).encode()


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 3), topics_st, user_data_st, tp_map_st, st.integers(-1, 2**31 - 1),
       st.one_of(st.none(), st.text(max_size=8)))
def test_subscription_matches_kafka_python(version, topics, user_data, owned, generation, rack):
    sub = Subscription(tuple(topics), user_data, _pairs(owned), generation, rack, version)
    ours = encode_subscription(sub)
    theirs = _kafka_sub(version, topics, user_data, owned, generation, rack)
    assert ours == theirs
    back = decode_subscription(theirs)
    assert back.topics == tuple(topics)
    assert back.user_data == user_data
    assert back.version == version
    if version >= 1:
        assert back.owned_partitions == _pairs(owned)
    if version >= 2:
        assert back.generation_id == generation
    if version >= 3:
        assert back.rack_id == rack
    decoded = KSubscription.decode(ours)
    assert list(decoded.topics) == topics


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 3), tp_map_st, user_data_st)
def test_assignment_matches_kafka_python(version, parts, user_data):
    ours = encode_assignment(Assignment(_pairs(parts), user_data, version))
    theirs = KAssignment(version=version, assigned_partitions=list(parts.items()),
                         user_data=user_data).encode()
    assert ours == theirs
    back = decode_assignment(theirs)
    assert back == Assignment(_pairs(parts), user_data, version)


def test_golden_bytes():
    sub = Subscription(("a", "b"), b"x", (("a", 0), ("a", 1)), 5, "r1", 3)
    assert encode_subscription(sub) == (
        b"\x00\x03\x00\x00\x00\x02\x00\x01a\x00\x01b\x00\x00\x00\x01x\x00\x00\x00\x01\x00\x01a"
        b"\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x05\x00\x02r1")
    # v0 drops the later fields
    assert encode_subscription(sub, 0) == b"\x00\x00\x00\x00\x00\x02\x00\x01a\x00\x01b\x00\x00\x00\x01x"


def test_newer_version_and_trailing_bytes_are_read_as_v3():
    data = encode_subscription(Subscription(("t",), None, (("t", 2),), 7, None, 3))
    newer = b"\x00\x09" + data[2:] + b"\x00\x00\x00\x2a"  # v9 with a field we do not know
    sub = decode_subscription(newer)
    assert (sub.topics, sub.owned_partitions, sub.generation_id, sub.version) == \
        (("t",), (("t", 2),), 7, 9)


def test_empty_assignment_bytes():
    assert decode_assignment(b"").partitions == ()


@pytest.mark.parametrize("data", [
    b"\xff\xff", b"\x00\x00\x00\x00\x00\x01\x00\x05ab", b"\x00\x00\x7f\xff\xff\xff",
    b"\x00\x01\x00\x00\x00\x00\xff\xff\xff\xfe",
])
def test_bad_subscription_bytes(data):
    with pytest.raises(ConsumerProtocolError):
        decode_subscription(data)


def test_bad_version_to_encode():
    with pytest.raises(ConsumerProtocolError):
        encode_subscription(Subscription(("t",)), 4)
