"""Java-compatible murmur2, the hash of Kafka's default partitioner.

Owns: ``murmur2(data)`` exactly as ``org.apache.kafka.common.utils.Utils.murmur2`` (seed
0x9747b28c, 32-bit arithmetic with Java's signed overflow), ``to_positive`` (``& 0x7fffffff``)
and ``partition_for_key``: the partition a keyed record goes to, identical to the Java
client, librdkafka's ``murmur2_random`` and kafka-python, so that records with the same key
land on the same partition whoever produced them. ``murmur2_array`` /
``partitions_for_keys`` do the same for a whole Arrow column at once (numpy, one pass per
4-byte block of the longest key), for the producer's columnar path.

Thread-safety: pure functions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

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


def murmur2_array(keys) -> np.ndarray:
    """``murmur2`` of every element of a binary/string Arrow array, as int32 (a null key
    hashes like an empty one; callers mask nulls themselves)."""
    import numpy as np
    import pyarrow as pa

    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    if not isinstance(keys, pa.Array):
        keys = pa.array(keys, pa.binary())
    keys = keys.cast(pa.large_binary())
    n = len(keys)
    bufs = keys.buffers()
    offsets = np.frombuffer(bufs[1], np.int64)[keys.offset:keys.offset + n + 1]
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(1, np.uint8)
    if data.size == 0:
        data = np.zeros(1, np.uint8)
    starts = offsets[:-1]
    lens = offsets[1:] - starts
    if keys.null_count:
        lens = np.where(keys.is_valid().to_numpy(zero_copy_only=False), lens, 0)
    m = np.uint32(_M)
    h = (np.uint32(_SEED) ^ lens.astype(np.uint32)).astype(np.uint32)
    nblocks = lens >> 2
    for j in range(int(nblocks.max()) if n else 0):
        idx = np.flatnonzero(nblocks > j)
        base = starts[idx] + 4 * j
        k = (data[base].astype(np.uint32) | (data[base + 1].astype(np.uint32) << 8)
             | (data[base + 2].astype(np.uint32) << 16) | (data[base + 3].astype(np.uint32) << 24))
        k *= m
        k ^= k >> np.uint32(24)
        k *= m
        h[idx] = (h[idx] * m) ^ k
    rest = lens & 3
    tail = starts + (nblocks << 2)
    sel = np.flatnonzero(rest == 3)
    h[sel] ^= data[tail[sel] + 2].astype(np.uint32) << 16
    sel = np.flatnonzero(rest >= 2)
    h[sel] ^= data[tail[sel] + 1].astype(np.uint32) << 8
    sel = np.flatnonzero(rest >= 1)
    h[sel] ^= data[tail[sel]].astype(np.uint32)
    h[sel] *= m
    h ^= h >> np.uint32(13)
    h *= m
    h ^= h >> np.uint32(15)
    return h.view(np.int32)


def partitions_for_keys(keys, num_partitions: int) -> np.ndarray:
    """``partition_for_key`` of every key of an Arrow array (int64; nulls give -1)."""
    import numpy as np
    import pyarrow as pa

    h = murmur2_array(keys).astype(np.int64) & 0x7FFFFFFF
    parts = h % num_partitions
    if isinstance(keys, (pa.Array, pa.ChunkedArray)) and keys.null_count:
        valid = keys.is_valid()
        if isinstance(valid, pa.ChunkedArray):
            valid = valid.combine_chunks()
        parts = np.where(valid.to_numpy(zero_copy_only=False), parts, -1)
    return parts
