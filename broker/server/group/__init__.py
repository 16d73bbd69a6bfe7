"""The group coordinator: classic and KIP-848 consumer groups, and their committed offsets
stored in ``__consumer_offsets``.

``GroupCoordinator`` is composed of parts, each a class owning its own state and receiving
what it needs explicitly (``GroupContext``), never reaching into another part: the offsets
part, the classic groups part, the consumer groups part and the transactional offsets.
What the coordinator and the offsets part need from a group, of either kind, is the
``Group`` protocol.

Modules:

    coordinator.py   GroupCoordinator: composes the parts, keeps the public methods the
                     request handlers call, ListGroups / DescribeGroups / DeleteGroups,
                     startup (the replay of the topic's records, each to its part) and
                     shutdown (over the coordinator runtime, ``broker.server.coordinator``:
                     topic, writer, loader, timers)
    protocol.py      Group (the protocol both kinds of group implement), GroupSummary,
                     OffsetExpiration
    context.py       GroupContext (config, runtime, clock, topics, the membership lock, the
                     group map) and GroupMap (group id -> Group); the lock order
    config.py        the group keys (define_group_keys) and GroupConfig, read once
    offsets.py       GroupOffsets and OffsetCache: commits, fetches, OffsetDelete,
                     expiration, the offsets cache
    txn_offsets.py   TransactionalOffsets: TxnOffsetCommit and the pending offsets of open
                     transactions, completed at the transaction's marker
    membership.py    ClassicGroups: the classic membership protocol (JoinGroup, SyncGroup,
                     Heartbeat, LeaveGroup), rebalances and their timers, sessions, static
                     members, the classic group record
    group.py         GroupMetadata: one classic group, its state machine and protocol
                     selection (a Group)
    member.py        Member (one member of a classic group) and Waiter (a delayed answer)
    records.py       the key and value codecs of the topic's records (Kafka's layout)
    consumer_membership.py  ConsumerGroups: the KIP-848 consumer group protocol
                     (ConsumerGroupHeartbeat, ConsumerGroupDescribe, timers, records)
    consumer_group.py       ConsumerGroup (a Group) / ConsumerGroupMember and the
                     reconciliation
    assignors.py     the server-side assignors ("uniform", "range")
    consumer_records.py     the ConsumerGroup* record codecs (key types 3-8)

Every kind of consumer is served: standalone consumers that assign() partitions and
commit offsets (generation -1), subscribe()-style consumers of the classic group
protocol, and KIP-848 consumers (group.protocol=consumer).

Imports go down only (``broker.config``, ``broker.protocol``, ``broker.log``,
``broker.record``, ``broker.server.coordinator``, and ``broker.server.errors`` /
``broker.server.handlers`` for the shared request types).

Thread-safety: the coordinator is called by every connection's thread, its timers and the
log manager's scheduler; every part takes the locks in one order (``context.py``: the
membership lock, then a partition's lock, then leaf locks).
"""

from broker.server.group.coordinator import (
    INTERNAL_TOPICS,
    OFFSETS_TOPIC,
    GroupCoordinator,
    GroupSummary,
    OffsetAndMetadata,
    partition_for,
)

__all__ = ["GroupCoordinator", "GroupSummary", "INTERNAL_TOPICS", "OFFSETS_TOPIC", "OffsetAndMetadata",
           "partition_for"]
