"""BuiltInPartitioner (KIP-480 / KIP-794), keyed partitioning of columns, and the custom
partitioner hook."""

import random

import pyarrow as pa
import pytest

from broker.client.errors import KafkaError
from broker.client.metadata import Cluster, Node, PartitionInfo
from broker.client.producer.murmur2 import murmur2, partition_for_key, partitions_for_keys
from broker.client.producer.partitioner import BuiltInPartitioner, custom_partition


def cluster(n=3, leaderless=()):
    parts = [PartitionInfo("t", i, -1 if i in leaderless else 1) for i in range(n)]
    return Cluster([Node(1, "h", 1)], parts)


def test_sticky_until_batch_size_then_switch():
    p = BuiltInPartitioner("t", 100, random.Random(1))
    c = cluster(3)
    info = p.peek_current_partition_info(c)
    p.update_partition_info(info, 60, c, True)
    assert p.peek_current_partition_info(c) is info  # 60 < 100: stays
    p.update_partition_info(info, 60, c, True)
    assert p.is_partition_changed(info)  # 120 >= 100 and switching allowed


def test_no_switch_while_the_last_batch_is_not_full_up_to_twice_the_size():
    p = BuiltInPartitioner("t", 100, random.Random(1))
    c = cluster(3)
    info = p.peek_current_partition_info(c)
    p.update_partition_info(info, 150, c, False)
    assert not p.is_partition_changed(info)  # half-full batch: never stranded
    p.update_partition_info(info, 60, c, False)
    assert p.is_partition_changed(info)  # 210 >= 2 x 100: switch anyway


def test_uniform_choice_skips_partitions_without_leader():
    p = BuiltInPartitioner("t", 10, random.Random(7))
    c = cluster(4, leaderless={1, 3})
    assert {p.next_partition(c) for _ in range(200)} == {0, 2}


def test_adaptive_weights_follow_queue_depth():
    # The seed's example: depths 0, 3, 1 -> weights 4, 1, 3 -> CFT 4, 5, 8.
    p = BuiltInPartitioner("t", 10, random.Random(3))
    sizes = [0, 3, 1]
    p.update_partition_load_stats(sizes, [0, 1, 2], 3)
    assert p.load_stats.cumulative_frequency_table == [4, 5, 8]
    counts = {0: 0, 1: 0, 2: 0}
    for _ in range(8000):
        counts[p.next_partition(cluster(3))] += 1
    assert counts[0] / 8000 == pytest.approx(4 / 8, abs=0.03)
    assert counts[1] / 8000 == pytest.approx(1 / 8, abs=0.03)
    assert counts[2] / 8000 == pytest.approx(3 / 8, abs=0.03)


def test_equal_depths_or_single_partition_mean_uniform():
    p = BuiltInPartitioner("t", 10)
    p.update_partition_load_stats([2, 2, 2], [0, 1, 2], 3)
    assert p.load_stats is None
    p.update_partition_load_stats([5], [0], 1)
    assert p.load_stats is None
    # Excluded partitions (availability timeout) still make the stats matter.
    p.update_partition_load_stats([2, 2, 2], [0, 2, 1], 2)
    assert p.load_stats is not None and p.load_stats.partition_ids[:2] == [0, 2]


def test_partitions_for_keys_matches_the_scalar_hash():
    rnd = random.Random(5)
    keys = [rnd.randbytes(rnd.randint(0, 33)) for _ in range(500)] + [None, b"abc"]
    parts = partitions_for_keys(pa.array(keys, pa.binary()), 7)
    expected = [partition_for_key(k, 7) if k is not None else -1 for k in keys]
    assert list(parts) == expected
    assert murmur2(b"abc") == 479470107


def test_custom_partitioner_checks_its_answer():
    assert custom_partition(lambda t, k, v, n: n - 1, "t", b"k", b"v", 4) == 3
    with pytest.raises(KafkaError):
        custom_partition(lambda t, k, v, n: -1, "t", b"k", b"v", 4)
    with pytest.raises(KafkaError):
        custom_partition(lambda t, k, v, n: 4, "t", b"k", b"v", 4)
