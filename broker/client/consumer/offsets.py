"""Offset lookups and topic listing: what a reader's planner asks before it reads.

Owns, as the offset part of Kafka's ``OffsetFetcher`` and the topic part of
``KafkaConsumer.listTopics`` / ``partitionsFor``:

* ``TopicPartition`` (a NamedTuple, so plain ``(topic, partition)`` tuples work as keys)
  and ``OffsetAndTimestamp``.
* ``list_offsets(client_or_config, {tp: spec}) -> {tp: OffsetAndTimestamp | None}``:
  ListOffsets v1-v10 (v2+ for read_committed, which bounds ``LATEST`` by the last stable
  offset), one request per partition leader, all leaders at once. ``spec`` is
  ``EARLIEST`` (-2: the log start offset), ``LATEST`` (-1: the high watermark, or the LSO
  under read_committed), ``MAX_TIMESTAMP`` (-3, KIP-734: the record with the largest
  timestamp), ``EARLIEST_LOCAL`` (-4, KIP-405: the local log start offset, the first
  offset a tiered-storage broker still has on its disk; the log start offset without
  tiered storage), ``LATEST_TIERED`` (-5, KIP-1005: the highest offset copied to remote
  storage; None when nothing is, or the topic has no remote storage) or a timestamp in
  ms (the first offset whose timestamp is at or after it). A lookup with no answer (a
  timestamp past every record, an empty partition for -3) gives None, as Kafka's
  ``offsetsForTimes``. ``earliest_offsets`` / ``latest_offsets`` / ``offsets_for_times``
  are shorthands.
* Versions, as Kafka's ``ListOffsetsRequest.Builder``: the request's minimum version is
  that of the newest spec asked (-3: v7, -4: v8, -5: v9; ``SPEC_MIN_VERSIONS``), so a
  broker that does not know a spec fails the call with ``UnsupportedVersionError`` naming
  it (Kafka before 3.0 for -3, 3.5 for -4, 3.9 for -5) instead of answering something
  else; any other negative spec raises ValueError.
* ``list_topics`` (every topic with its partition count: subscribe / subscribePattern
  planning) and ``partitions_for`` (the ``PartitionInfo``s of named topics).

Retries, until the deadline (``timeout_ms``, default ``default.api.timeout.ms``):
partition errors that mean stale metadata (NOT_LEADER_OR_FOLLOWER,
LEADER_NOT_AVAILABLE, FENCED/UNKNOWN_LEADER_EPOCH, REPLICA_NOT_AVAILABLE,
KAFKA_STORAGE_ERROR, OFFSET_NOT_AVAILABLE) and lost connections refresh the metadata and
retry after an exponential backoff; an unknown topic or partition is retried for
``UNKNOWN_TOPIC_GRACE_MS`` only (a topic being created appears within that; a topic that
does not exist fails fast with UNKNOWN_TOPIC_OR_PARTITION). Other errors raise
``KafkaError.from_code`` naming the partition. A deadline raises ``KafkaTimeoutError``
chained to the last error seen.

Each function takes a ``ConsumerNetworkClient`` (reused, left open) or a config mapping /
``ConsumerConfig`` (a client is made for the call and closed after it).

Thread-safety: as the ``ConsumerNetworkClient`` used: one thread at a time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from broker.client.errors import KafkaError, NetworkError, UnsupportedVersionError
from broker.client.metadata import PartitionInfo
from broker.client.network import now_ms
from broker.protocol import ApiKey, ErrorCode, request_schema

from .client import ConsumerNetworkClient
from .config import ISOLATION_LEVELS, ConsumerConfig

# ListOffsets specs (Kafka's ListOffsetsRequest / OffsetSpec).
LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3  # KIP-734
EARLIEST_LOCAL = -4  # KIP-405: the local log start offset
LATEST_TIERED = -5  # KIP-1005: the highest offset in remote storage

LIST_OFFSETS_MIN_VERSION = 1  # v0 answers with a list of offsets and no timestamp
LIST_OFFSETS_COMMITTED_MIN_VERSION = 2  # isolation_level appears in v2
LIST_OFFSETS_MAX_VERSION = 10  # v6 flexible, v10 timeout_ms (KIP-1075)
# The first version that knows each special spec (ListOffsetsRequest.Builder's
# requireMaxTimestamp / requireEarliestLocalTimestamp / requireTieredStorageTimestamp).
SPEC_MIN_VERSIONS = {MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9}
SPEC_NAMES = {LATEST: "LATEST", EARLIEST: "EARLIEST", MAX_TIMESTAMP: "MAX_TIMESTAMP",
              EARLIEST_LOCAL: "EARLIEST_LOCAL", LATEST_TIERED: "LATEST_TIERED"}
# How long an unknown topic or partition is retried: auto-creation and a CreateTopics
# that just returned make a topic visible within a few metadata rounds; a topic that
# really does not exist should fail fast instead of waiting out the whole deadline.
UNKNOWN_TOPIC_GRACE_MS = 3000.0
INTERNAL_TOPIC_PREFIX = "__"

# Partition errors that a metadata refresh (a new leader) may cure: Kafka's
# InvalidMetadataException family plus the transient "not yet" codes.
RETRIABLE_PARTITION_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT,
})


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int  # -1 for EARLIEST / LATEST
    leader_epoch: int = -1


@contextlib.contextmanager
def consumer_client(client_or_config: Any) -> Iterator[ConsumerNetworkClient]:
    """The given ``ConsumerNetworkClient`` (left open), or one made from a config and
    closed on exit."""
    if isinstance(client_or_config, ConsumerNetworkClient):
        yield client_or_config
        return
    cfg = client_or_config if isinstance(client_or_config, ConsumerConfig) \
        else ConsumerConfig(client_or_config)
    client = ConsumerNetworkClient(cfg)
    try:
        yield client
    finally:
        client.close()


def _isolation(client: ConsumerNetworkClient, isolation_level: str | int | None) -> int:
    if isolation_level is None:
        return client.config.isolation_level
    if isinstance(isolation_level, str):
        try:
            return ISOLATION_LEVELS[isolation_level.strip().lower()]
        except KeyError:
            raise ValueError(f"isolation level {isolation_level!r}: expected one of "
                             f"{', '.join(ISOLATION_LEVELS)}") from None
    if isolation_level not in (0, 1):
        raise ValueError(f"isolation level {isolation_level!r}: expected 0 or 1")
    return int(isolation_level)


OffsetsResult = dict[TopicPartition, OffsetAndTimestamp | None]


def list_offsets(client_or_config: Any, specs: Mapping[tuple[str, int], int], *,
                 isolation_level: str | int | None = None,
                 timeout_ms: float | None = None) -> OffsetsResult:
    """The offset of each partition for its spec (see the module docstring)."""
    wanted = {TopicPartition(*tp): int(spec) for tp, spec in specs.items()}
    if not wanted:
        return {}
    for tp, spec in wanted.items():
        if spec < 0 and spec not in SPEC_NAMES:
            raise ValueError(f"ListOffsets spec {spec} of {tp}: expected a timestamp >= 0 or one of "
                             + ", ".join(f"{n} ({v})" for v, n in SPEC_NAMES.items()))
    with consumer_client(client_or_config) as client:
        return _list_offsets(client, wanted, _isolation(client, isolation_level),
                             client.deadline(timeout_ms))


def earliest_offsets(client_or_config: Any, tps: Iterable[tuple[str, int]], *,
                     timeout_ms: float | None = None) -> dict[TopicPartition, int]:
    """The log start offset of each partition."""
    out = list_offsets(client_or_config, {tp: EARLIEST for tp in tps}, timeout_ms=timeout_ms)
    return {tp: o.offset for tp, o in out.items() if o is not None}


def latest_offsets(client_or_config: Any, tps: Iterable[tuple[str, int]], *,
                   isolation_level: str | int | None = None,
                   timeout_ms: float | None = None) -> dict[TopicPartition, int]:
    """The high watermark (read_uncommitted) or last stable offset (read_committed)."""
    out = list_offsets(client_or_config, {tp: LATEST for tp in tps},
                       isolation_level=isolation_level, timeout_ms=timeout_ms)
    return {tp: o.offset for tp, o in out.items() if o is not None}


def offsets_for_times(client_or_config: Any, timestamps: Mapping[tuple[str, int], int], *,
                      isolation_level: str | int | None = None,
                      timeout_ms: float | None = None) -> OffsetsResult:
    """The first offset at or after each timestamp (None when there is none)."""
    for tp, ts in timestamps.items():
        if ts < 0:
            raise ValueError(f"timestamp {ts} of {tp} is negative")
    return list_offsets(client_or_config, timestamps, isolation_level=isolation_level,
                        timeout_ms=timeout_ms)


def _list_offsets(client: ConsumerNetworkClient, wanted: dict[TopicPartition, int],
                  isolation: int, deadline: float) -> OffsetsResult:
    md = client.metadata
    for tp in wanted:
        md.add_topic(tp.topic)
    remaining = dict(wanted)
    out: dict[TopicPartition, OffsetAndTimestamp | None] = {}
    our_min = _min_version(wanted.values(), isolation)
    unknown_since: float | None = None
    last_error: BaseException | None = None
    attempt = 0
    refreshed = False
    while remaining:
        if now_ms() >= deadline:
            raise client.deadline_error(
                f"ListOffsets for {', '.join(map(str, sorted(remaining)))} not answered "
                f"before the deadline (last error: {last_error})") from last_error
        cluster = md.fetch()
        by_node: dict[int, dict[TopicPartition, int]] = {}
        unknown: list[TopicPartition] = []
        for tp, spec in remaining.items():
            leader = cluster.leader_for(tp.topic, tp.partition)
            if leader >= 0:
                by_node.setdefault(leader, {})[tp] = spec
            else:
                err = md.fatal_error(tp.topic)
                if err is not None:
                    raise err
                unknown.append(tp)
        if unknown and not refreshed:
            client.await_metadata_update(deadline)
            refreshed = True
            continue
        retry = False
        if unknown:
            known = [tp for tp in unknown if tp.partition < cluster.partition_count(tp.topic)]
            missing = [tp for tp in unknown if tp not in known]
            if known:
                last_error = KafkaError.from_code(ErrorCode.LEADER_NOT_AVAILABLE,
                                                  ", ".join(map(str, known)))
            if missing:
                unknown_since = _check_unknown(missing, unknown_since)
                last_error = KafkaError.from_code(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                  ", ".join(map(str, missing)))
            retry = True
        futures = []
        for node, parts in by_node.items():
            try:
                if not client.await_ready(node, deadline):
                    raise NetworkError(f"cannot connect to node {node}")
                _check_version(client, node, parts, our_min)
                futures.append((parts, client.send(
                    node, ApiKey.LIST_OFFSETS, _list_offsets_request(parts, isolation),
                    our_min=our_min, our_max=LIST_OFFSETS_MAX_VERSION)))
            except NetworkError as e:
                last_error, retry = e, True
        for parts, future in futures:
            resp = client.wait(future, deadline)
            if resp.error is not None:
                last_error, retry = resp.error, True
                continue
            answered = set()
            for t in resp.body.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if tp not in parts:
                        continue
                    answered.add(tp)
                    code = p.error_code
                    if code == ErrorCode.NONE:
                        offset = p.offset
                        out[tp] = None if offset < 0 else OffsetAndTimestamp(
                            offset, p.timestamp, getattr(p, "leader_epoch", -1))
                        remaining.pop(tp, None)
                    elif code in RETRIABLE_PARTITION_ERRORS:
                        last_error, retry = KafkaError.from_code(code, f"ListOffsets {tp}"), True
                        if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                            unknown_since = _check_unknown([tp], unknown_since)
                    else:
                        raise KafkaError.from_code(code, f"ListOffsets for {tp}")
            if answered != set(parts):
                lacking = ", ".join(map(str, set(parts) - answered))
                last_error, retry = KafkaError(f"ListOffsets response lacks {lacking}"), True
        if remaining and retry:
            md.request_update()
            refreshed = False
            client.sleep(client.backoff_ms(attempt), deadline)
            attempt += 1
    return out


def _min_version(specs: Iterable[int], isolation: int) -> int:
    """The request's minimum version: that of the newest spec asked (module docstring)."""
    base = LIST_OFFSETS_COMMITTED_MIN_VERSION if isolation else LIST_OFFSETS_MIN_VERSION
    return max([base] + [SPEC_MIN_VERSIONS.get(s, base) for s in specs])


def _check_version(client: ConsumerNetworkClient, node: int, parts: dict[TopicPartition, int],
                   our_min: int) -> None:
    """UnsupportedVersionError naming the spec when the broker lacks the version it needs
    (rather than the network client's generic "no usable version")."""
    if client.client.api_version(node, ApiKey.LIST_OFFSETS, LIST_OFFSETS_MAX_VERSION, our_min) is not None:
        return
    needs = sorted({s for s in parts.values() if SPEC_MIN_VERSIONS.get(s, 0) >= our_min})
    what = ", ".join(f"{SPEC_NAMES[s]} ({s}) needs v{SPEC_MIN_VERSIONS[s]}+" for s in needs) \
        or f"v{our_min}+ needed"
    raise UnsupportedVersionError(f"node {node} does not support the ListOffsets version asked: {what}")


def _check_unknown(tps: list[TopicPartition], since: float | None) -> float:
    now = now_ms()
    if since is None:
        return now
    if now - since >= UNKNOWN_TOPIC_GRACE_MS:
        raise KafkaError.from_code(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                   ", ".join(map(str, tps)))
    return since


def _list_offsets_request(parts: dict[TopicPartition, int], isolation: int) -> Any:
    def build(version: int) -> Any:
        schema = request_schema(ApiKey.LIST_OFFSETS, version)
        topic_cls = schema.structs["ListOffsetsTopic"]
        part_cls = schema.structs["ListOffsetsPartition"]
        by_topic: dict[str, list[Any]] = {}
        for tp, spec in parts.items():
            by_topic.setdefault(tp.topic, []).append(part_cls(
                partition_index=tp.partition, current_leader_epoch=-1, timestamp=spec))
        return schema.cls(replica_id=-1, isolation_level=isolation,
                          topics=[topic_cls(name=t, partitions=ps) for t, ps in by_topic.items()])
    return build


# -- topics ------------------------------------------------------------------------------

def _retriable_topic_errors(body: Any) -> list[str]:
    return [t.name for t in body.topics
            if t.error_code not in (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            and ErrorCode.lookup(t.error_code).retriable]


def _describe(client: ConsumerNetworkClient, topics: Iterable[str] | None, deadline: float) -> Any:
    attempt = 0
    while True:
        body = client.describe_topics(topics, deadline)
        pending = _retriable_topic_errors(body)
        if not pending:
            return body
        if now_ms() >= deadline:
            raise client.deadline_error(f"topics {', '.join(pending)} not available before the "
                                        "deadline")
        client.sleep(client.backoff_ms(attempt), deadline)
        attempt += 1


def list_topics(client_or_config: Any, *, include_internal: bool = False,
                timeout_ms: float | None = None) -> dict[str, int]:
    """Every topic of the cluster with its partition count (internal ones, such as
    ``__consumer_offsets``, only with ``include_internal``)."""
    with consumer_client(client_or_config) as client:
        body = _describe(client, None, client.deadline(timeout_ms))
    out = {}
    for t in body.topics:
        if t.error_code:
            continue
        if not include_internal and (getattr(t, "is_internal", False)
                                     or t.name.startswith(INTERNAL_TOPIC_PREFIX)):
            continue
        out[t.name] = len(t.partitions)
    return dict(sorted(out.items()))


def partitions_for(client_or_config: Any, topics: Iterable[str], *,
                   timeout_ms: float | None = None) -> dict[str, list[PartitionInfo]]:
    """The partitions of each named topic, sorted by index; topics that do not exist are
    left out. Never creates topics. Other non-retriable topic errors (authorization,
    invalid name) raise."""
    names = sorted(set(topics))
    if not names:
        return {}
    with consumer_client(client_or_config) as client:
        body = _describe(client, names, client.deadline(timeout_ms))
    out: dict[str, list[PartitionInfo]] = {}
    for t in body.topics:
        if t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            continue
        if t.error_code:
            raise KafkaError.from_code(t.error_code, f"topic {t.name}")
        out[t.name] = sorted(
            (PartitionInfo(t.name, p.partition_index, p.leader_id,
                           getattr(p, "leader_epoch", -1), tuple(p.replica_nodes),
                           tuple(p.isr_nodes), p.error_code)
             for p in t.partitions), key=lambda p: p.partition)
    return out


__all__ = ["EARLIEST", "EARLIEST_LOCAL", "LATEST", "LATEST_TIERED", "MAX_TIMESTAMP", "OffsetAndTimestamp",
           "TopicPartition", "consumer_client", "earliest_offsets", "latest_offsets", "list_offsets",
           "list_topics", "offsets_for_times", "partitions_for"]
