"""The coordinator runtime: what every coordinator that keeps its state in an internal topic
shares (Kafka's ``coordinator-common`` module: ``CoordinatorRuntime``,
``CoordinatorLoaderImpl``, the coordinators' timers), so that a coordinator is written as
its records, its replay and its requests, on top of these parts.

Modules:

    topic.py     the internal topics' names (Kafka's ``Topic``), ``InternalTopicSpec`` (a
                 topic's settings in the broker config, with Kafka's keys and defaults),
                 ``InternalTopic`` (its partition count, creation on demand, the partition
                 of a key: ``abs(java_hashCode(key)) % partitions``)
    writer.py    ``RecordWriter``: appends a coordinator's records (one batch; plain, or
                 transactional with a producer id and epoch) as leader with
                 ``AppendOrigin.COORDINATOR`` and maps storage errors to the coordinator's
                 codes; ``append_as_coordinator`` for any log (the transaction markers)
    loader.py    ``CoordinatorLoader``: replays one partition from its log start offset to
                 its end (entries of every magic, transactions resolved at their markers,
                 damaged batches logged and skipped, never raising)
    timer.py     ``CoordinatorTimer``: one-shot timers on the coordinator's own thread,
                 periodic tasks on the broker's scheduler
    runtime.py   ``CoordinatorRuntime``: the four above for one coordinator, with the
                 per-partition write locks and the startup order (partition count, load,
                 timers)
    state.py     the state-machine idiom: ``check_transition`` over a table of valid
                 previous states, ``IllegalStateTransition`` (transactions, classic groups)

Users: the group coordinator (``broker.server.group``, ``__consumer_offsets``) and the
transaction coordinator (``broker.server.txn``, ``__transaction_state``); a share
coordinator (``__share_group_state``) and the Schema Registry's store (``_schemas``, one
partition) are written on the same parts. This package imports nothing of them.

Imports go down only: ``broker.log``, ``broker.record``, ``broker.protocol`` and
``broker.server.errors`` / ``broker.server.handlers`` (``leader_epoch_of``).
"""

from broker.server.coordinator.loader import CoordinatorLoader, CoordinatorRecord, LoadResult
from broker.server.coordinator.runtime import CoordinatorRuntime
from broker.server.coordinator.state import IllegalStateTransition, check_transition
from broker.server.coordinator.timer import CoordinatorTimer
from broker.server.coordinator.topic import (
    INTERNAL_TOPICS,
    OFFSETS_TOPIC,
    SHARE_GROUP_STATE_TOPIC,
    TRANSACTION_STATE_TOPIC,
    InternalTopic,
    InternalTopicSettings,
    InternalTopicSpec,
    java_string_hash,
    partition_for,
)
from broker.server.coordinator.writer import RecordWriter, append_as_coordinator, storage_error_map

__all__ = [
    "CoordinatorLoader", "CoordinatorRecord", "CoordinatorRuntime", "CoordinatorTimer", "INTERNAL_TOPICS",
    "IllegalStateTransition", "InternalTopic", "InternalTopicSettings", "InternalTopicSpec", "LoadResult",
    "OFFSETS_TOPIC", "RecordWriter", "SHARE_GROUP_STATE_TOPIC", "TRANSACTION_STATE_TOPIC", "append_as_coordinator",
    "check_transition", "java_string_hash", "partition_for", "storage_error_map",
]
