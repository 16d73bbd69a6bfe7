"""The group coordinator: consumer-group offsets stored in ``__consumer_offsets``.

Modules:

    coordinator.py   GroupCoordinator: the group cache, commits, fetches, group listing,
                     description, deletion and expiration, the group records, and the
                     loading of the topic at startup
    membership.py    the classic membership protocol (JoinGroup, SyncGroup, Heartbeat,
                     LeaveGroup), rebalances and their timers, sessions, static members
    group.py         GroupMetadata: one group, its state machine and protocol selection
    member.py        Member (one member of a group) and Waiter (a delayed answer)
    records.py       the key and value codecs of the topic's records (Kafka's layout)

Both kinds of consumer are served: standalone consumers that assign() partitions and
commit offsets (generation -1), and subscribe()-style consumers of the classic group
protocol (KIP-848's ConsumerGroupHeartbeat is not served).

Imports go down only (``broker.protocol``, ``broker.log``, ``broker.record``, and
``broker.server.errors`` / ``broker.server.handlers`` for the shared request types).
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
