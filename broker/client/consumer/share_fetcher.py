"""The network side of ``KafkaShareConsumer`` (share.py): share group membership
(ShareGroupHeartbeat) and the share sessions (ShareFetch, ShareAcknowledge), as Kafka's
``ShareMembershipManager``, ``ShareHeartbeatRequestManager`` and
``ShareConsumeRequestManager`` / ``ShareSessionHandler`` do it (KIP-932).

``ShareMembership`` (the member):

* The member id is the client's (KIP-1082: a random UUID, base64url, 22 characters). It
  joins with member epoch 0 and its subscribed topic names, then heartbeats every
  ``HeartbeatIntervalMs`` the broker answered, on a daemon thread with its own connection
  (``consumer_membership._HeartbeatThread``'s loop: backoff, coordinator rediscovery).
* The assignment names partitions by topic id; the consumer's thread resolves them with
  a Metadata request (v12, which carries topic ids). A share group has no revocation
  step: the target assignment is what the member fetches from.
* UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH: it joins again at once with epoch 0 and the
  same member id. ``leave`` sends epoch -1 (the broker releases what it still holds).
* Fatal errors (GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED, INVALID_REQUEST,
  GROUP_ID_NOT_FOUND for a group of another type...) stop the heartbeats and are raised
  by the consumer's next call.

``ShareFetcher`` (one share session per leader node):

* Epochs: 0 opens the session with every assigned partition of the node; each answered
  request moves to the next epoch (after 2^31-1 comes 1); later requests add new
  partitions (``Topics``) and remove revoked ones (``ForgottenTopicsData``); -1 (a
  ShareAcknowledge on ``close``) closes it.
* Acknowledgements (offset -> type: 0 GAP, 1 ACCEPT, 2 RELEASE, 3 REJECT, 4 RENEW) wait in
  ``pending`` until the next ShareFetch to the node that delivered them (piggybacked) or
  a ShareAcknowledge (``commit``); runs of one type travel as one batch. Every outcome
  (the partition's AcknowledgeErrorCode, or the request's failure) is queued in
  ``results`` for the consumer's commit callback.
* SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH, UNKNOWN_MEMBER_ID, a lost
  connection or a timed out request: the session starts again at epoch 0 with every
  partition, and the acknowledgements of that request (and any still pending for the
  node) fail with that error, as Kafka's client does (a new session cannot carry them).
* Records: only the offsets of the AcquiredRecords ranges are delivered (the batches may
  hold more), decoded in columns by ``broker.record.columnar.iter_arrow`` (control
  batches skipped) with a ``delivery_count`` column. An acquired offset without a record
  (compacted away, a control record, an aborted transaction) is acknowledged GAP
  automatically.

Thread-safety: the member state is shared with the heartbeat thread under
``ShareMembership.lock``; the fetcher belongs to the consumer's thread.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pyarrow as pa

from broker.client.errors import (
    FatalConsumerError,
    GroupAuthorizationError,
    KafkaError,
    KafkaTimeoutError,
    NetworkError,
    TopicAuthorizationError,
)
from broker.client.network import now_ms
from broker.protocol import ApiKey, ErrorCode, request_schema
from broker.record.columnar import iter_arrow
from broker.record.errors import DecodeError

from . import group_offsets as go
from .client import ConsumerNetworkClient
from .config import ConsumerConfig
from .consumer_fetcher import ARROW_SCHEMA
from .consumer_membership import _REDISCOVER, _RETRY, ConsumerGroupMembership, _HeartbeatThread, new_member_id
from .offsets import TopicPartition

log = logging.getLogger(__name__)

HEARTBEAT_VERSIONS = (1, 1)
SHARE_FETCH_VERSIONS = (1, 2)
SHARE_ACKNOWLEDGE_VERSIONS = (1, 2)
RENEW_MIN_VERSION = 2  # RENEW acknowledgements and ShareAcquireMode
JOIN_EPOCH = 0
LEAVE_EPOCH = -1
FINAL_SESSION_EPOCH = -1
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
ACQUIRE_MODES = {"batch_optimized": 0, "record_limit": 1}
SHARE_ARROW_SCHEMA = ARROW_SCHEMA.append(pa.field("delivery_count", pa.int16(), nullable=False))

_FENCED = frozenset({ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID})
_SESSION_ERRORS = frozenset({ErrorCode.SHARE_SESSION_NOT_FOUND, ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                             ErrorCode.UNKNOWN_MEMBER_ID})
_METADATA_ERRORS = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                              ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.FENCED_LEADER_EPOCH,
                              ErrorCode.LEADER_NOT_AVAILABLE})
_FATAL: dict[int, type[KafkaError]] = {ErrorCode.GROUP_AUTHORIZATION_FAILED: GroupAuthorizationError,
                                       ErrorCode.TOPIC_AUTHORIZATION_FAILED: TopicAuthorizationError,
                                       ErrorCode.INVALID_REQUEST: FatalConsumerError}


def error_for(code: int, message: str | None, fatal: bool = False) -> KafkaError:
    """The client error of a broker error code: the fatal ones have their own types (with
    ``fatal``, every code is: a heartbeat error the member cannot go on after)."""
    cls = _FATAL.get(code, FatalConsumerError if fatal else None)
    if cls is not None:
        return cls(message or "", code)
    return KafkaError.from_code(code, message or "")


# -- membership -----------------------------------------------------------------------------

class ShareMembership:
    """See the module docstring: the member state, shared with the heartbeat thread."""

    def __init__(self, config: ConsumerConfig, client: ConsumerNetworkClient, group_id: str) -> None:
        self.config = config
        self.client = client
        self.group_id = group_id
        self.lock = threading.RLock()
        self.member_id = new_member_id()
        self.member_epoch = JOIN_EPOCH
        self.joined = False
        self.topics: frozenset[str] = frozenset()
        self.heartbeat_interval_ms = 5000.0  # until the broker says (group.share.heartbeat.interval.ms)
        self.target: frozenset[tuple[uuid.UUID, int]] | None = None
        self.fatal: KafkaError | None = None
        self.topic_names: dict[uuid.UUID, str] = {}
        self.topic_ids: dict[str, uuid.UUID] = {}
        self._hb: _ShareHeartbeatThread | None = None

    def _lookup_topic_ids(self, deadline: float) -> None:
        """Metadata (v10-12) for every topic's id, as the KIP-848 member resolves its
        assignment (it uses only the attributes both classes have)."""
        lookup: Any = ConsumerGroupMembership._lookup_topic_ids
        lookup(self, deadline)

    def subscribe(self, topics: Iterable[str]) -> None:
        with self.lock:
            self.topics = frozenset(topics)
        if self._hb is None:
            self._hb = _ShareHeartbeatThread(self)
            self._hb.start()
        self._hb.wake()

    def raise_fatal(self) -> None:
        with self.lock:
            if self.fatal is not None:
                raise self.fatal

    def rejoin(self) -> None:
        """The broker no longer knows this member (a ShareFetch said so): join again."""
        with self.lock:
            self.joined = False
            self.member_epoch = JOIN_EPOCH
        if self._hb is not None:
            self._hb.wake()

    def assignment(self, deadline: float) -> dict[TopicPartition, uuid.UUID] | None:
        """The assigned partitions with their topic ids (None before the first assignment)."""
        with self.lock:
            target = self.target
        if target is None:
            return None
        if any(tid not in self.topic_names for tid, _ in target):
            try:
                self._lookup_topic_ids(deadline)
            except (KafkaError, go._Retry) as exc:
                log.info("share group %s: topic ids not resolved yet: %s", self.group_id, exc)
        with self.lock:
            names = self.topic_names
            return {TopicPartition(names[tid], p): tid for tid, p in target if tid in names}

    def request_builder(self, member_id: str, epoch: int, topics: list[str] | None) -> Callable[[int], Any]:
        rack = self.config["client.rack"] or None

        def build(version: int) -> Any:
            return request_schema(ApiKey.SHARE_GROUP_HEARTBEAT, version).cls(
                group_id=self.group_id, member_id=member_id, member_epoch=epoch, rack_id=rack,
                subscribed_topic_names=topics)
        return build

    def handle_response(self, body: Any, sent_epoch: int) -> float:
        """Apply one heartbeat answer (heartbeat thread); returns the ms to the next one."""
        code = body.error_code
        with self.lock:
            if code == ErrorCode.NONE:
                if not self.joined:
                    log.info("share group %s: member %s joined at epoch %d", self.group_id, self.member_id,
                             body.member_epoch)
                self.member_epoch = body.member_epoch
                self.joined = True
                if body.heartbeat_interval_ms > 0:
                    self.heartbeat_interval_ms = float(body.heartbeat_interval_ms)
                if body.assignment is not None:
                    self.target = frozenset((t.topic_id, p) for t in body.assignment.topic_partitions
                                            for p in t.partitions)
                return self.heartbeat_interval_ms
            message = f"ShareGroupHeartbeat of group {self.group_id} (member {self.member_id}, epoch " \
                      f"{sent_epoch})" + (f": {body.error_message}" if body.error_message else "")
            if code in _FENCED:
                log.info("%s: error %d, joining again", message, code)
                self.joined = False
                self.member_epoch = JOIN_EPOCH
                return 0.0
            if code in _REDISCOVER:
                raise go._Retry(KafkaError.from_code(code, message), rediscover=True)
            if code in _RETRY:
                raise go._Retry(KafkaError.from_code(code, message), rediscover=False)
            self.fatal = error_for(code, message, fatal=True)
            log.error("%s: fatal error %d", message, code)
            return float("inf")

    def leave(self, deadline: float | None = None) -> None:
        """Stop the heartbeats and leave the group (epoch -1), trying until ``deadline``
        (``now_ms()`` based; default: ``request.timeout.ms`` from now)."""
        if self._hb is not None:
            self._hb.stop()
            self._hb = None
        with self.lock:
            joined, member_id = self.joined, self.member_id
            self.joined = False
            self.member_epoch = JOIN_EPOCH
            self.target = None
        if not joined:
            return
        if deadline is None:
            deadline = self.client.deadline(self.config["request.timeout.ms"])
        try:
            node = go._find_coordinator(self.client, self.group_id, deadline)
            body, _ = go._request(self.client, node, ApiKey.SHARE_GROUP_HEARTBEAT, HEARTBEAT_VERSIONS,
                                  self.request_builder(member_id, LEAVE_EPOCH, None), deadline)
            if body.error_code not in (ErrorCode.NONE, *_FENCED):
                log.info("leaving share group %s (member %s): error %d", self.group_id, member_id, body.error_code)
        except (KafkaError, go._Retry) as exc:
            log.warning("leaving share group %s failed: %s", self.group_id, exc)


class _ShareHeartbeatThread(_HeartbeatThread):
    """The KIP-848 member's heartbeat loop with ShareGroupHeartbeat as its beat."""

    def __init__(self, group: Any) -> None:
        super().__init__(group)
        self.name = f"kafkalog-share-heartbeat-{group.group_id}"

    def _beat(self, g: Any) -> float:
        with g.lock:
            if g.fatal is not None or not g.topics:
                return float("inf")
            epoch = g.member_epoch if g.joined else JOIN_EPOCH
            member_id, topics = g.member_id, sorted(g.topics)
        deadline = self.client.deadline(g.config["request.timeout.ms"])
        try:
            if self._node is None:
                self._node = go._find_coordinator(self.client, g.group_id, deadline)
            body, _ = go._request(self.client, self._node, ApiKey.SHARE_GROUP_HEARTBEAT, HEARTBEAT_VERSIONS,
                                  g.request_builder(member_id, epoch, topics), deadline)
        except KafkaError as exc:  # e.g. FindCoordinator's GROUP_AUTHORIZATION_FAILED: its own type
            if exc.code in _FATAL:
                raise error_for(exc.code, str(exc)) from exc
            raise
        return g.handle_response(body, epoch)


# -- share sessions ---------------------------------------------------------------------------

class _Session:
    """One leader's share session: the epoch the next request carries, its partitions."""

    __slots__ = ("epoch", "partitions")

    def __init__(self) -> None:
        self.epoch = 0
        self.partitions: set[tuple[uuid.UUID, int]] = set()

    def advance(self) -> None:
        self.epoch = self.epoch + 1 if 0 < self.epoch < 0x7FFFFFFF else 1

    def reset(self) -> None:
        self.epoch = 0
        self.partitions = set()


class Acquired:
    """The delivered rows of one partition from one ShareFetch answer."""

    __slots__ = ("tp", "batch", "node")

    def __init__(self, tp: TopicPartition, batch: pa.RecordBatch, node: int) -> None:
        self.tp = tp
        self.batch = batch  # SHARE_ARROW_SCHEMA
        self.node = node


AckResult = tuple[TopicPartition, list[int], "KafkaError | None"]


def ack_batches(acks: dict[int, int]) -> list[tuple[int, int, int]]:
    """(first, last, type) runs of consecutive offsets of one type."""
    out: list[tuple[int, int, int]] = []
    for offset in sorted(acks):
        kind = acks[offset]
        if out and out[-1][1] == offset - 1 and out[-1][2] == kind:
            out[-1] = (out[-1][0], offset, kind)
        else:
            out.append((offset, offset, kind))
    return out


class ShareFetcher:
    """See the module docstring. ``fetch(assigned, member_id, timeout_ms)`` ->
    ``[Acquired]``; ``commit(member_id, deadline, final)`` -> ``[AckResult]``."""

    def __init__(self, client: ConsumerNetworkClient, group_id: str, *, max_records: int,
                 acquire_mode: str, membership: ShareMembership) -> None:
        self.client = client
        self.config = client.config
        self.group_id = group_id
        self.max_records = max_records
        self.acquire_mode = ACQUIRE_MODES[acquire_mode]
        self.membership = membership
        self.sessions: dict[int, _Session] = {}
        self.pending: dict[TopicPartition, dict[int, int]] = {}  # offset -> acknowledge type
        self.node_of: dict[TopicPartition, int] = {}  # the node that delivered the partition's records
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.results: list[AckResult] = []
        self.verify_crc = bool(self.config["check.crcs"])
        self.sent = 0  # ShareFetch requests of the last fetch (0: no leader known yet, nothing to send)

    # -- acknowledgements -------------------------------------------------------------------

    def add_ack(self, tp: TopicPartition, offset: int, kind: int) -> None:
        self.pending.setdefault(tp, {})[offset] = kind

    def _take_acks(self, node: int) -> dict[TopicPartition, dict[int, int]]:
        taken = {tp: acks for tp, acks in self.pending.items() if acks and self.node_of.get(tp) == node}
        for tp in taken:
            del self.pending[tp]
        return taken

    def _fail(self, acks: dict[TopicPartition, dict[int, int]], error: KafkaError | None) -> None:
        for tp, offsets in acks.items():
            self.results.append((tp, sorted(o for o, k in offsets.items() if k != GAP), error))

    def _reset(self, node: int, error: KafkaError) -> None:
        """Start the node's session again at epoch 0; what it still had to acknowledge fails."""
        session = self.sessions.get(node)
        if session is not None:
            session.reset()
        self._fail(self._take_acks(node), error)

    def _topic_entries(self, acks: dict[TopicPartition, dict[int, int]], added: Iterable[tuple[uuid.UUID, int]],
                       schema: Any, topic_struct: str, partition_struct: str) -> list[Any]:
        batch_cls = schema.structs["AcknowledgementBatch"]
        parts: dict[uuid.UUID, dict[int, list[Any]]] = {}
        for tid, p in added:
            parts.setdefault(tid, {}).setdefault(p, [])
        for tp, offsets in acks.items():
            tid = self.topic_ids[tp.topic]
            parts.setdefault(tid, {})[tp.partition] = [
                batch_cls(first_offset=a, last_offset=b, acknowledge_types=[k]) for a, b, k in ack_batches(offsets)]
        topic_cls, part_cls = schema.structs[topic_struct], schema.structs[partition_struct]
        extra = {"partition_max_bytes": self.config["max.partition.fetch.bytes"]} \
            if partition_struct == "FetchPartition" else {}
        return [topic_cls(topic_id=tid, partitions=[part_cls(partition_index=p, acknowledgement_batches=b, **extra)
                                                    for p, b in sorted(ps.items())])
                for tid, ps in parts.items()]

    @staticmethod
    def _renewing(acks: dict[TopicPartition, dict[int, int]]) -> bool:
        return any(k == RENEW for offsets in acks.values() for k in offsets.values())

    def _ack_outcomes(self, acks: dict[TopicPartition, dict[int, int]], body: Any, fetch: bool) -> None:
        """The AcknowledgeErrorCode (ShareFetch) or ErrorCode (ShareAcknowledge) of each
        acknowledged partition of an answered request."""
        codes: dict[tuple[uuid.UUID, int], tuple[int, str | None]] = {}
        for t in body.responses:
            for p in t.partitions:
                codes[(t.topic_id, p.partition_index)] = \
                    (p.acknowledge_error_code, p.acknowledge_error_message) if fetch \
                    else (p.error_code, p.error_message)
        for tp, offsets in acks.items():
            code, message = codes.get((self.topic_ids[tp.topic], tp.partition), (ErrorCode.NONE, None))
            error = None if code == ErrorCode.NONE else error_for(
                code, f"acknowledgement of {tp.topic}-{tp.partition}" + (f": {message}" if message else ""))
            self._fail({tp: offsets}, error)

    def _send(self, node: int, api_key: ApiKey, versions: tuple[int, int], build: Any, deadline: float,
              renew: bool) -> Any:
        """One request to ``node``; None when the connection failed or the answer did not come."""
        client = self.client
        try:
            if not client.await_ready(node, deadline):
                return None
            if renew and (client.client.api_version(node, api_key, versions[1], RENEW_MIN_VERSION) is None):
                raise KafkaError("RENEW acknowledgements need ShareFetch / ShareAcknowledge v2",
                                 ErrorCode.UNSUPPORTED_VERSION)
            return client.send(node, api_key, build, our_min=RENEW_MIN_VERSION if renew else versions[0],
                               our_max=versions[1])
        except (NetworkError, KafkaTimeoutError) as exc:
            log.info("share group %s: node %d not reachable: %s", self.group_id, node, exc)
            return None

    def _answer(self, node: int, future: Any, deadline: float) -> Any:
        if future is None:
            return None
        try:
            resp = self.client.wait(future, deadline)
        except KafkaTimeoutError:
            self.client.client.disconnect(node)  # the answer would come for an epoch we gave up on
            return None
        if resp.error is not None:
            log.info("share group %s: request to node %d failed: %s", self.group_id, node, resp.error)
            return None
        return resp.body

    # -- ShareFetch ---------------------------------------------------------------------------

    def fetch(self, assigned: dict[TopicPartition, uuid.UUID], member_id: str, timeout_ms: float) -> list[Acquired]:
        """One ShareFetch per leader of ``assigned`` (and per node with acknowledgements or
        partitions to forget), waiting at most ``timeout_ms`` (``fetch.max.wait.ms``) for
        records."""
        client = self.client
        md = client.metadata
        for tp, tid in assigned.items():
            self.topic_ids[tp.topic] = tid
        cluster = md.fetch()
        wanted: dict[int, set[tuple[uuid.UUID, int]]] = {}
        for tp, tid in assigned.items():
            leader = cluster.leader_for(tp.topic, tp.partition)
            if leader < 0:
                md.add_topic(tp.topic)
                md.request_update()
                continue
            wanted.setdefault(leader, set()).add((tid, tp.partition))
        nodes = set(wanted) | {self.node_of[tp] for tp, acks in self.pending.items() if acks and tp in self.node_of}
        nodes |= {n for n, s in self.sessions.items() if s.partitions}
        max_wait = int(max(0.0, min(float(self.config["fetch.max.wait.ms"]), timeout_ms)))
        deadline = now_ms() + max_wait + float(self.config["request.timeout.ms"])
        flights = []
        for node in sorted(nodes):
            session = self.sessions.setdefault(node, _Session())
            want = wanted.get(node, set())
            if session.epoch == 0:
                self._fail(self._take_acks(node), KafkaError(
                    "the share session was reset before these acknowledgements were sent",
                    ErrorCode.SHARE_SESSION_NOT_FOUND))
                if not want:
                    continue
                acks: dict[TopicPartition, dict[int, int]] = {}
                added, forgotten = sorted(want, key=str), []
            else:
                acks = self._take_acks(node)
                added = sorted(want - session.partitions, key=str)
                forgotten = sorted(session.partitions - want, key=str)
            build = self._fetch_builder(member_id, session.epoch, max_wait if want else 0, acks, added, forgotten)
            future = self._send(node, ApiKey.SHARE_FETCH, SHARE_FETCH_VERSIONS, build, deadline, self._renewing(acks))
            flights.append((node, session, future, acks, want))
        self.sent = len(flights)
        out: list[Acquired] = []
        for node, session, future, acks, want in flights:
            body = self._answer(node, future, deadline)
            if body is None:
                session.reset()
                self._fail(acks, NetworkError(f"ShareFetch to node {node} not answered"))
                self._fail(self._take_acks(node), NetworkError(f"ShareFetch to node {node} not answered"))
                continue
            if body.error_code != ErrorCode.NONE:
                error = error_for(body.error_code, f"ShareFetch of group {self.group_id} to node {node}"
                                  + (f": {body.error_message}" if body.error_message else ""))
                self._fail(acks, error)
                self._reset(node, error)
                if body.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                    self.membership.rejoin()
                elif body.error_code in _FATAL:
                    raise error
                elif body.error_code not in _SESSION_ERRORS:
                    log.warning("%s", error)
                continue
            session.partitions = set(want)
            session.advance()
            self._ack_outcomes(acks, body, True)
            out.extend(self._records_of(node, body))
        return out

    def _fetch_builder(self, member_id: str, epoch: int, max_wait: int, acks: dict[TopicPartition, dict[int, int]],
                       added: list[tuple[uuid.UUID, int]], forgotten: list[tuple[uuid.UUID, int]]) -> Any:
        cfg = self.config
        renew = self._renewing(acks)

        def build(version: int) -> Any:
            schema = request_schema(ApiKey.SHARE_FETCH, version)
            forgot: dict[uuid.UUID, list[int]] = {}
            for tid, p in forgotten:
                forgot.setdefault(tid, []).append(p)
            return schema.cls(
                group_id=self.group_id, member_id=member_id, share_session_epoch=epoch, max_wait_ms=max_wait,
                min_bytes=cfg["fetch.min.bytes"], max_bytes=cfg["fetch.max.bytes"], max_records=self.max_records,
                batch_size=self.max_records, share_acquire_mode=self.acquire_mode, is_renew_ack=renew,
                topics=self._topic_entries(acks, added, schema, "FetchTopic", "FetchPartition"),
                forgotten_topics_data=[schema.structs["ForgottenTopic"](topic_id=t, partitions=sorted(ps))
                                       for t, ps in forgot.items()])
        return build

    def _records_of(self, node: int, body: Any) -> list[Acquired]:
        names = {tid: name for name, tid in self.topic_ids.items()}
        out = []
        for t in body.responses:
            name = names.get(t.topic_id)
            for p in t.partitions:
                if name is None:
                    continue
                tp = TopicPartition(name, p.partition_index)
                if p.error_code != ErrorCode.NONE:
                    error = error_for(p.error_code, f"ShareFetch of {tp.topic}-{tp.partition}"
                                      + (f": {p.error_message}" if p.error_message else ""))
                    if p.error_code in _FATAL:
                        raise error
                    if p.error_code in _METADATA_ERRORS:
                        self.client.metadata.add_topic(name)
                        self.client.metadata.request_update()
                    log.info("%s", error)
                    continue
                if not p.acquired_records:
                    continue
                self.node_of[tp] = node
                rb = self._acquired(tp, p.records, p.acquired_records)
                if rb.num_rows:
                    out.append(Acquired(tp, rb, node))
        return out

    def _acquired(self, tp: TopicPartition, records: Any, acquired: list[Any]) -> pa.RecordBatch:
        """The rows of the acquired offsets, with their delivery counts; GAP for acquired
        offsets without a record; a batch that cannot be decoded is rejected whole (Kafka's
        client does the same with a corrupt record)."""
        ranges = sorted((a.first_offset, a.last_offset, a.delivery_count) for a in acquired)
        firsts = np.array([r[0] for r in ranges], np.int64)
        lasts = np.array([r[1] for r in ranges], np.int64)
        counts = np.array([r[2] for r in ranges], np.int16)
        try:
            batches = list(iter_arrow(memoryview(records or b""), int(firsts[0]), int(lasts[-1]) + 1,
                                      max_rows_per_batch=1 << 30, verify_crc=self.verify_crc,
                                      include_headers=True)) if records else []
        except DecodeError as exc:
            log.error("share group %s: records of %s-%d cannot be decoded, rejecting offsets %s: %s",
                      self.group_id, tp.topic, tp.partition, [(a, b) for a, b, _ in ranges], exc)
            for a, b, _ in ranges:
                for o in range(a, b + 1):
                    self.add_ack(tp, o, REJECT)
            return pa.RecordBatch.from_pylist([], schema=SHARE_ARROW_SCHEMA)
        rb = (batches[0] if len(batches) == 1 else pa.concat_batches(batches)) if batches \
            else pa.RecordBatch.from_pylist([], schema=ARROW_SCHEMA)
        offsets = rb.column(0).to_numpy()
        idx = np.searchsorted(firsts, offsets, side="right") - 1
        keep = (idx >= 0) & (offsets <= lasts[np.clip(idx, 0, None)])
        if not keep.all():
            rb = rb.filter(pa.array(keep))
            idx = idx[keep]
            offsets = offsets[keep]
        rb = rb.append_column(SHARE_ARROW_SCHEMA.field("delivery_count"), pa.array(counts[idx], pa.int16()))
        if len(offsets) != int((lasts - firsts + 1).sum()):
            present = set(offsets.tolist())
            for a, b, _ in ranges:
                for o in range(a, b + 1):
                    if o not in present:
                        self.add_ack(tp, o, GAP)
        return rb

    # -- ShareAcknowledge -----------------------------------------------------------------------

    def commit(self, member_id: str, deadline: float, final: bool = False) -> list[AckResult]:
        """Send the pending acknowledgements (ShareAcknowledge per node); with ``final``,
        epoch -1 to every open session (closing it). Returns the outcomes of this call (they
        are also queued in ``results``)."""
        start = len(self.results)
        nodes = {self.node_of[tp] for tp, acks in self.pending.items() if acks and tp in self.node_of}
        if final:
            nodes |= {n for n, s in self.sessions.items() if s.epoch != 0}
        flights = []
        for node in sorted(nodes):
            session = self.sessions.setdefault(node, _Session())
            if session.epoch == 0:
                self._reset(node, KafkaError("no share session to acknowledge in", ErrorCode.SHARE_SESSION_NOT_FOUND))
                continue
            acks = self._take_acks(node)
            epoch = FINAL_SESSION_EPOCH if final else session.epoch
            renew = self._renewing(acks)

            def build(version: int, acks: dict = acks, epoch: int = epoch, renew: bool = renew) -> Any:
                schema = request_schema(ApiKey.SHARE_ACKNOWLEDGE, version)
                return schema.cls(group_id=self.group_id, member_id=member_id, share_session_epoch=epoch,
                                  is_renew_ack=renew, topics=self._topic_entries(
                                      acks, (), schema, "AcknowledgeTopic", "AcknowledgePartition"))
            future = self._send(node, ApiKey.SHARE_ACKNOWLEDGE, SHARE_ACKNOWLEDGE_VERSIONS, build, deadline, renew)
            flights.append((node, session, future, acks))
        for node, session, future, acks in flights:
            body = self._answer(node, future, deadline)
            if body is None:
                session.reset()
                self._fail(acks, NetworkError(f"ShareAcknowledge to node {node} not answered"))
                continue
            if body.error_code != ErrorCode.NONE:
                error = error_for(body.error_code, f"ShareAcknowledge of group {self.group_id} to node {node}"
                                  + (f": {body.error_message}" if body.error_message else ""))
                self._fail(acks, error)
                self._reset(node, error)
                if body.error_code in _FATAL and not final:
                    raise error
                continue
            if final:
                session.reset()
            else:
                session.advance()
            self._ack_outcomes(acks, body, False)
        return self.results[start:]

    def take_results(self) -> list[AckResult]:
        out, self.results = self.results, []
        return out


__all__ = ["ACCEPT", "GAP", "REJECT", "RELEASE", "RENEW", "SHARE_ARROW_SCHEMA", "Acquired", "ShareFetcher",
           "ShareMembership", "ack_batches", "error_for"]
