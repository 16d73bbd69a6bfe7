"""Golden vectors of the Java client's murmur2 partitioning (issue 5), and agreement
with kafka-python's implementation on random keys."""

from hypothesis import given
from hypothesis import strategies as st

from broker.client.producer.murmur2 import murmur2, partition_for_key

GOLDEN_1000 = {b"": 681, b"a": 524, b"ab": 434, b"abc": 107, b"123456789": 566, b"\x00 ": 742}  # F9


def test_golden_partitions_with_1000_partitions():
    assert {k: partition_for_key(k, 1000) for k in GOLDEN_1000} == GOLDEN_1000


def test_java_signed_results():
    # Values from Kafka's UtilsTest.testMurmur2
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971
    assert murmur2(b"abc") == 479470107


@given(st.binary(max_size=64))
def test_agrees_with_kafka_python(key):
    from kafka.partitioner.default import murmur2 as kp_murmur2
    assert murmur2(key) & 0x7FFFFFFF == kp_murmur2(key) & 0x7FFFFFFF
