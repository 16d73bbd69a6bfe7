"""Transactions through the admin client (KIP-664): Kafka's Java admin values for
transactions, and the request builders and response parsers of ListTransactions (66),
DescribeTransactions (65), DescribeProducers (61), WriteTxnMarkers (27) and
FindCoordinator (10) for a transactional id, for ``AdminClient.list_transactions`` /
``describe_transactions`` / ``describe_producers`` / ``abort_transaction`` and
``kafkalog transactions``.

Owns the values of ``org.apache.kafka.clients.admin`` in Python spelling (immutable):

* ``TransactionListing(transactional_id, producer_id, state)``: one ListTransactions row;
  ``state`` is the coordinator's name (``Empty``, ``Ongoing``, ``PrepareCommit``,
  ``PrepareAbort``, ``CompleteCommit``, ``CompleteAbort``, ``Dead``, ``PrepareEpochFence``).
* ``TransactionDescription(coordinator_id, state, producer_id, producer_epoch,
  transaction_timeout_ms, transaction_start_time_ms, topic_partitions)``: start time None
  when no transaction runs (the broker sends -1); ``topic_partitions`` a sorted tuple of
  ``TopicPartition``, the partitions of the running transaction.
* ``ProducerState(producer_id, producer_epoch, last_sequence, last_timestamp,
  coordinator_epoch, current_transaction_start_offset)``: what a partition leader knows of
  one producer; ``coordinator_epoch`` and ``current_transaction_start_offset`` None where
  the broker sends -1 (no marker seen yet / no open transaction).
* ``AbortTransactionSpec(topic_partition, producer_id, producer_epoch, coordinator_epoch)``:
  what ``abort_transaction`` writes an ABORT marker for.

Routing (done by ``AdminClient``): ListTransactions goes to every broker (each lists the
transactions it coordinates); DescribeTransactions to each id's coordinator, found with
FindCoordinator key_type 1 (TRANSACTION, v1-3: v0 knows only groups, v4+ batches keys);
DescribeProducers and WriteTxnMarkers to each partition's leader (``leader_routes``, from a
Metadata response) or to a given broker (``broker_routes``); ``group_by`` batches keys per
node. A route is a node id or the error ``Outcome`` that stands for one. ``RETRIABLE``
names the codes after which a key is routed and sent again until the deadline;
``key_text`` names a key in error messages.

Versions: ListTransactions v1 adds the duration filter (a filter against a v0-only broker
is ``UnsupportedVersionError``, as Kafka's request builder); WriteTxnMarkers v1 is flexible.

Thread-safety: immutable values and pure functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from broker.client.consumer.offsets import TopicPartition
from broker.client.errors import UnsupportedVersionError
from broker.protocol import ApiKey, ErrorCode, request_schema

KEY_TYPE_TRANSACTION = 1
FIND_COORDINATOR_VERSIONS = (1, 3)
# Answers after which a key is routed again (coordinator moved or loading, leader moved).
RETRIABLE = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
                       ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                       ErrorCode.LEADER_NOT_AVAILABLE})

Outcome = tuple[int, "str | None", Any]  # (error code, message, value), as admin_types.Outcome


class TransactionListing(NamedTuple):
    transactional_id: str
    producer_id: int
    state: str


class TransactionDescription(NamedTuple):
    coordinator_id: int
    state: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_time_ms: int | None
    topic_partitions: tuple[TopicPartition, ...]


class ProducerState(NamedTuple):
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int | None
    current_transaction_start_offset: int | None


class AbortTransactionSpec(NamedTuple):
    topic_partition: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int


def _optional(value: int) -> int | None:
    return None if value is None or value < 0 else value


# --- FindCoordinator (key_type TRANSACTION) ---

def build_find_coordinator(version: int, transactional_id: str) -> Any:
    return request_schema(ApiKey.FIND_COORDINATOR, version).cls(key=transactional_id,
                                                                key_type=KEY_TYPE_TRANSACTION)


def parse_find_coordinator(body: Any) -> tuple[int, str | None, tuple[int, str, int]]:
    """(code, message, (node id, host, port))."""
    return body.error_code, getattr(body, "error_message", None), (body.node_id, body.host, body.port)


# --- ListTransactions ---

def build_list(version: int, states: Iterable[str], producer_ids: Iterable[int], duration_filter_ms: int) -> Any:
    if duration_filter_ms >= 0 and version < 1:
        raise UnsupportedVersionError("a duration filter needs ListTransactions v1 (the broker has only v0)")
    return request_schema(ApiKey.LIST_TRANSACTIONS, version).cls(
        state_filters=list(states), producer_id_filters=[int(p) for p in producer_ids],
        duration_filter=int(duration_filter_ms))


def parse_list(body: Any) -> tuple[int, list[str], list[TransactionListing]]:
    """(error code, the state filters the broker did not know, the listings)."""
    return (body.error_code, list(body.unknown_state_filters or []),
            [TransactionListing(t.transactional_id, t.producer_id, t.transaction_state)
             for t in body.transaction_states or []])


# --- DescribeTransactions ---

def build_describe(version: int, transactional_ids: list[str]) -> Any:
    return request_schema(ApiKey.DESCRIBE_TRANSACTIONS, version).cls(transactional_ids=list(transactional_ids))


def parse_describe(body: Any, coordinator_id: int) -> dict[str, Outcome]:
    out: dict[str, Outcome] = {}
    for s in body.transaction_states or []:
        if s.error_code:
            out[s.transactional_id] = (s.error_code, None, None)
            continue
        partitions = tuple(sorted(TopicPartition(t.topic, p) for t in s.topics or [] for p in t.partitions))
        out[s.transactional_id] = (ErrorCode.NONE, None, TransactionDescription(
            coordinator_id, s.transaction_state, s.producer_id, s.producer_epoch, s.transaction_timeout_ms,
            _optional(s.transaction_start_time_ms), partitions))
    return out


def key_text(key: Any) -> str:
    """How an error names its key: ``partition t-0`` or ``transactional id 'x'``."""
    if isinstance(key, tuple):
        return f"partition {key[0]}-{key[1]}"
    return f"transactional id {key!r}"


# --- DescribeProducers ---

def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    topics: dict[str, list[int]] = {}
    for tp in partitions:
        topics.setdefault(tp.topic, []).append(tp.partition)
    return topics


def build_describe_producers(version: int, partitions: list[TopicPartition]) -> Any:
    schema = request_schema(ApiKey.DESCRIBE_PRODUCERS, version)
    topic = schema.structs["TopicRequest"]
    return schema.cls(topics=[topic(name=t, partition_indexes=ps) for t, ps in _by_topic(partitions).items()])


def parse_describe_producers(body: Any, node_id: int = -1) -> dict[TopicPartition, Outcome]:
    out: dict[TopicPartition, Outcome] = {}
    for t in body.topics or []:
        for p in t.partitions or []:
            producers = [ProducerState(s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp,
                                       _optional(s.coordinator_epoch), _optional(s.current_txn_start_offset))
                         for s in p.active_producers or []]
            out[TopicPartition(t.name, p.partition_index)] = (p.error_code, p.error_message,
                                                               None if p.error_code else producers)
    return out


# --- WriteTxnMarkers (abort_transaction) ---

def build_abort(version: int, specs: list[AbortTransactionSpec]) -> Any:
    schema = request_schema(ApiKey.WRITE_TXN_MARKERS, version)
    marker, topic = schema.structs["WritableTxnMarker"], schema.structs["WritableTxnMarkerTopic"]
    return schema.cls(markers=[
        marker(producer_id=s.producer_id, producer_epoch=s.producer_epoch, transaction_result=False,
               coordinator_epoch=s.coordinator_epoch,
               topics=[topic(name=s.topic_partition.topic, partition_indexes=[s.topic_partition.partition])])
        for s in specs])


def parse_abort(body: Any, node_id: int = -1) -> dict[TopicPartition, Outcome]:
    """Per partition of the markers (one spec per partition): its code."""
    return {TopicPartition(t.name, p.partition_index): (p.error_code, None, None)
            for m in body.markers or [] for t in m.topics or [] for p in t.partitions or []}


def abort_spec(topic_partition: tuple[str, int], producer_id: int, producer_epoch: int,
               coordinator_epoch: int) -> AbortTransactionSpec:
    """Kafka's ``AbortTransactionSpec``, with its checks; a negative coordinator epoch (a
    producer that never saw a marker) becomes 0, as kafka-transactions.sh does."""
    tp = TopicPartition(*topic_partition)
    if producer_id < 0:
        raise ValueError(f"producer id {producer_id} must not be negative")
    if not 0 <= producer_epoch <= 32767:
        raise ValueError(f"producer epoch {producer_epoch} must be within 0..32767")
    return AbortTransactionSpec(tp, int(producer_id), int(producer_epoch), max(0, int(coordinator_epoch)))


def leader_routes(metadata: Any, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | Outcome]:
    """Each partition's leader in a Metadata response, or the error ``Outcome`` that
    stands for it (an unknown topic or partition; LEADER_NOT_AVAILABLE, retriable)."""
    topics = {t.name: t for t in metadata.topics}
    routes: dict[TopicPartition, int | Outcome] = {}
    for tp in partitions:
        t = topics.get(tp.topic)
        if t is not None and t.error_code:
            text = (f"Topic '{tp.topic}' does not exist." if t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    else f"topic '{tp.topic}'")
            routes[tp] = (t.error_code, text, None)
            continue
        p = None if t is None else next((p for p in t.partitions if p.partition_index == tp.partition), None)
        if p is None:
            routes[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {tp.topic}-{tp.partition}", None)
        elif p.leader_id < 0:
            routes[tp] = (ErrorCode.LEADER_NOT_AVAILABLE, f"partition {tp.topic}-{tp.partition}", None)
        else:
            routes[tp] = p.leader_id
    return routes


def broker_routes(metadata: Any, broker_id: int, keys: Iterable[Any]) -> dict[Any, int | Outcome]:
    """Every key to ``broker_id``, or BROKER_NOT_AVAILABLE when the Metadata response does
    not list that broker."""
    known = sorted(b.node_id for b in metadata.brokers)
    if broker_id in known:
        return dict.fromkeys(keys, broker_id)
    error = (ErrorCode.BROKER_NOT_AVAILABLE, f"broker {broker_id} is not in the cluster (brokers: {known})", None)
    return dict.fromkeys(keys, error)


def group_by(keys: Iterable[Any], route: Mapping[Any, int]) -> dict[int, list[Any]]:
    """node id -> its keys (in the order given)."""
    out: dict[int, list[Any]] = {}
    for k in keys:
        out.setdefault(route[k], []).append(k)
    return out


__all__ = ["AbortTransactionSpec", "FIND_COORDINATOR_VERSIONS", "KEY_TYPE_TRANSACTION", "ProducerState",
           "RETRIABLE", "TransactionDescription", "TransactionListing", "abort_spec", "broker_routes", "build_abort",
           "build_describe", "build_describe_producers", "build_find_coordinator", "build_list",
           "group_by", "key_text", "leader_routes", "parse_abort", "parse_describe", "parse_describe_producers",
           "parse_find_coordinator", "parse_list"]
