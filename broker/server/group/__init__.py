"""The group coordinator: consumer-group offsets stored in ``__consumer_offsets``.

Modules:

    coordinator.py   GroupCoordinator: the offset cache, commits, fetches, group listing,
                     deletion and expiration, and the loading of the topic at startup
    records.py       the key and value codecs of the topic's records (Kafka's layout)

What is served is the "simple consumer group" part of Kafka's group coordinator:
standalone consumers that assign() partitions and commit offsets. Group membership
(JoinGroup, SyncGroup, Heartbeat, LeaveGroup) is not implemented and not advertised, so
a subscribe()-style consumer fails cleanly on its client side (see
``broker.server.handlers.group``).

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
