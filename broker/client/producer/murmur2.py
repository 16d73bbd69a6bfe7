"""Java-compatible murmur2, the hash of Kafka's default partitioner.

Owns: ``murmur2(data)`` exactly as ``org.apache.kafka.common.utils.Utils.murmur2`` (seed
0x9747b28c, 32-bit arithmetic with Java's signed overflow), ``to_positive`` (``& 0x7fffffff``)
and ``partition_for_key``: the partition a keyed record goes to, identical to the Java
client, librdkafka's ``murmur2_random`` and kafka-python, so that records with the same key
land on the same partition whoever produced them.

Thread-safety: pure functions.
"""

from __future__ import annotations

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """The 32-bit murmur2 hash of ``data`` as a signed Java int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    n4 = length & ~3
    mv = memoryview(data)
    for i in range(0, n4, 4):
        k = mv[i] | (mv[i + 1] << 8) | (mv[i + 2] << 16) | (mv[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length & 3
    if rest == 3:
        h ^= mv[n4 + 2] << 16
    if rest >= 2:
        h ^= mv[n4 + 1] << 8
    if rest >= 1:
        h ^= mv[n4]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(n: int) -> int:
    return n & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """Kafka's ``BuiltInPartitioner.partitionForKey``."""
    return to_positive(murmur2(key)) % num_partitions
