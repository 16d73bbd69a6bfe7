"""broker.client.consumer: the consumer side of the client core.

* ``config.py``: ``ConsumerConfig`` (Kafka's consumer keys and defaults).
* ``client.py``: ``ConsumerNetworkClient``, the blocking, single-threaded driver of a
  ``NetworkClient`` + ``Metadata`` (connections, request futures, metadata refreshes).
* ``offsets.py``: ``list_offsets`` (earliest / latest / max timestamp / earliest local /
  latest tiered / by timestamp, with retries), ``list_topics`` and ``partitions_for`` (planning on the Spark driver).
* ``fetcher.py``: ``RangeFetcher`` / ``fetch_arrow``, the pipelined Fetch loop that turns
  one offset range of one partition into Arrow RecordBatches, with typed data-loss
  reports (``DataLoss``, ``DataLossError``, ``OffsetOutOfRangeError``).
* ``poller.py``: ``PartitionPoller``, a follow-the-log consumer of assigned partitions
  (``kafkalog consume``): polls records one by one, optionally read_committed.
* ``group_offsets.py``: a group's committed offsets (``fetch_committed``,
  ``commit_offsets``, as a simple consumer or a member: ``CommitFailedError``) and group
  listing / description / deletion.
* ``consumer.py``: ``KafkaConsumer``, Kafka's consumer API with manual assignment
  (``assign``, ``poll`` -> ``ConsumerRecord``s, ``poll_arrow`` -> one
  ``pyarrow.RecordBatch`` per partition, commits, seek / position / pause /
  offsets_for_times, auto commit) or group membership (``subscribe``, driven by
  ``group_driver.py``: ``GroupMembership`` and ``ConsumerRebalanceListener``); built on
  ``subscription_state.py`` (``SubscriptionState``: assignment, positions, paused) and
  ``consumer_fetcher.py`` (``ConsumerFetcher``: the poller's Fetch loop with prefetch,
  decoding per record or per column on demand).
* ``assignors.py``: the group leader's partition assignors (range, roundrobin, sticky,
  cooperative-sticky) and ``StickyAssignorUserData``.
* ``protocol.py``: the embedded "consumer" protocol bytes (ConsumerProtocolSubscription /
  ConsumerProtocolAssignment v0-3) that JoinGroup / SyncGroup carry.
* ``coordinator.py``: ``ConsumerCoordinator``, the member's side of the classic group
  protocol without I/O (JoinGroup / SyncGroup / Heartbeat / LeaveGroup bodies and
  outcomes, the leader's assignment, eager and cooperative revocation).
* ``group_driver.py``: ``GroupMembership`` drives it over the network for ``subscribe``
  (rebalances from ``poll``, a heartbeat thread with its own connection).
* ``share.py``: ``KafkaShareConsumer``, Kafka's share consumer (KIP-932 share groups: acquired
  records with delivery counts, ``acknowledge`` / ``AcknowledgeType``, ``poll_arrow``), over
  ``share_fetcher.py`` (``ShareMembership``: ShareGroupHeartbeat; ``ShareFetcher``: share
  sessions, ShareFetch and ShareAcknowledge).

Like the rest of ``broker.client`` it imports ``broker.protocol`` and ``broker.record``
only. Thread-safety: every object here belongs to one thread at a time (the assignors
and protocol functions are pure), except a subscribed consumer's member state, shared
with its heartbeat thread under ``GroupMembership.lock``.
"""

from broker.client.consumer.assignors import (
    ConsumerPartitionAssignor,
    CooperativeStickyAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    get_assignor,
)
from broker.client.consumer.client import ConsumerNetworkClient
from broker.client.consumer.config import ConsumerConfig
from broker.client.consumer.coordinator import ConsumerCoordinator
from broker.client.consumer.group_offsets import (
    GroupDescription,
    GroupListing,
    GroupsNotSupportedError,
    MemberDescription,
    commit_offsets,
    delete_groups,
    describe_groups,
    fetch_committed,
    list_group_offsets,
    list_groups,
)
from broker.client.consumer.offsets import (
    EARLIEST,
    EARLIEST_LOCAL,
    LATEST,
    LATEST_TIERED,
    MAX_TIMESTAMP,
    OffsetAndTimestamp,
    TopicPartition,
    earliest_offsets,
    latest_offsets,
    list_offsets,
    list_topics,
    offsets_for_times,
    partitions_for,
)
from broker.client.consumer.protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from broker.client.errors import DataLossError, OffsetOutOfRangeError

__all__ = [
    "ConsumerConfig", "ConsumerNetworkClient", "DataLoss", "DataLossError", "EARLIEST",
    "EARLIEST_LOCAL", "FetchStats", "LATEST", "LATEST_TIERED", "MAX_TIMESTAMP", "OffsetAndTimestamp",
    "OffsetOutOfRangeError",
    "RangeFetcher", "TopicPartition", "earliest_offsets", "fetch_arrow", "latest_offsets",
    "list_offsets", "list_topics", "offsets_for_times", "partitions_for",
    "GroupDescription", "GroupListing", "GroupsNotSupportedError", "MemberDescription", "commit_offsets",
    "delete_groups", "describe_groups", "fetch_committed", "list_group_offsets", "list_groups",
    "ARROW_SCHEMA", "ConsumerRecord", "InvalidGroupIdError", "KafkaConsumer",
    "NoOffsetForPartitionError", "OffsetAndMetadata", "UnsupportedOperationError",
    "Assignment", "ConsumerPartitionAssignor", "CooperativeStickyAssignor", "RangeAssignor",
    "RoundRobinAssignor", "StickyAssignor", "Subscription", "decode_assignment",
    "decode_subscription", "encode_assignment", "encode_subscription", "get_assignor",
    "ConsumerCoordinator", "CommitFailedError", "ConsumerRebalanceListener",
    "AcknowledgeType", "KafkaShareConsumer", "ShareConsumerConfig", "ShareConsumerRecord",
]

# The fetcher decodes into Arrow (pyarrow, numpy): imported on first use, so that the
# admin client, the offsets helpers and the command line start without them.
_LAZY = {"DataLoss": "fetcher", "FetchStats": "fetcher", "RangeFetcher": "fetcher",
         "fetch_arrow": "fetcher", "ARROW_SCHEMA": "consumer", "ConsumerRecord": "poller",
         "InvalidGroupIdError": "consumer", "KafkaConsumer": "consumer",
         "NoOffsetForPartitionError": "consumer", "OffsetAndMetadata": "consumer",
         "UnsupportedOperationError": "consumer", "CommitFailedError": "group_offsets",
         "ConsumerRebalanceListener": "group_driver", "AcknowledgeType": "share",
         "KafkaShareConsumer": "share", "ShareConsumerConfig": "share", "ShareConsumerRecord": "share"}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value

