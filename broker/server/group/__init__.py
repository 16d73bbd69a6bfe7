"""The group coordinator: consumer-group offsets stored in ``__consumer_offsets``.

Modules:

    coordinator.py   GroupCoordinator: the group cache, commits, fetches, group listing,
                     description, deletion and expiration, the group records, and the
                     replay of the topic's records at startup (over the coordinator runtime,
                     ``broker.server.coordinator``: topic, writer, loader, timers)
    txn_offsets.py   TransactionalOffsets: TxnOffsetCommit and the pending offsets of open
                     transactions, completed at the transaction's marker
    membership.py    the classic membership protocol (JoinGroup, SyncGroup, Heartbeat,
                     LeaveGroup), rebalances and their timers, sessions, static members
    group.py         GroupMetadata: one group, its state machine and protocol selection
    member.py        Member (one member of a group) and Waiter (a delayed answer)
    records.py       the key and value codecs of the topic's records (Kafka's layout)
    consumer_membership.py  the KIP-848 consumer group protocol (ConsumerGroupHeartbeat,
                     ConsumerGroupDescribe, member epochs of commits, timers, records)
    consumer_group.py       ConsumerGroup / ConsumerGroupMember and the reconciliation
    assignors.py     the server-side assignors ("uniform", "range")
    consumer_records.py     the ConsumerGroup* record codecs (key types 3-8)

Every kind of consumer is served: standalone consumers that assign() partitions and
commit offsets (generation -1), subscribe()-style consumers of the classic group
protocol, and KIP-848 consumers (group.protocol=consumer).

Imports go down only (``broker.protocol``, ``broker.log``, ``broker.record``,
``broker.server.coordinator``, and ``broker.server.errors`` / ``broker.server.handlers``
for the shared request types).
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
