"""``SharePartitionManager``: ShareFetch and ShareAcknowledge for every share group of the
broker (Kafka's ``SharePartitionManager`` with its share-session cache): the live
``SharePartition`` of each (group, topic id, partition), the share sessions, the
acquisition locks' timeouts, and the writes of the state to the share coordinator.

Share sessions (KIP-932), one per (group, member):

* ShareSessionEpoch 0 opens a session (replacing the member's earlier one) with the
  partitions of the request; acknowledgements in it are INVALID_REQUEST;
* -1 closes it after applying the request's acknowledgements; a ShareFetch then fetches
  nothing; the records the member still holds are released;
* any other epoch must be the session's next one (INVALID_SHARE_SESSION_EPOCH; no
  session: SHARE_SESSION_NOT_FOUND); the request's partitions join the session, the
  forgotten ones leave it, and the epoch moves on (ShareAcknowledge moves it too);
* at most ``group.share.max.share.sessions`` sessions (SHARE_SESSION_LIMIT_REACHED).

A share-partition is initialized on the group's first fetch of it: from its persisted
state when there is one (``ShareCoordinator.read``), else at the group's
``share.auto.offset.reset`` (``latest``, the default: the log end offset; ``earliest``:
the log start offset; ``by_duration:<ISO-8601 duration>``: the first offset at or after
now minus the duration), written as the initial state.

Fetch: acknowledgements first (each partition's outcome in AcknowledgeErrorCode), then,
for the session's partitions in a rotating order, a log read from the partition's first
AVAILABLE offset (whole batches, bounded by the request's MaxBytes, under
``share.isolation.level``: read_committed reads up to the last stable offset and archives
aborted transactions' records and control batches), and an acquisition of up to
MaxRecords records (batch-optimized; ShareAcquireMode 1 (v2): exactly MaxRecords) for
``share.record.lock.duration.ms``, bounded by ``group.share.partition.max.record.locks``
in flight. The records sent are the read's batches up to the last acquired one; the
client delivers only the acquired offsets. With nothing acquired the request waits up
to MaxWaitMs for an append to, or a release in, one of its partitions.

Persistence (``ShareCoordinator.write``): every acquisition, acknowledgement, release and
lock timeout writes the changed ranges and the start offset before it is answered. An
acquisition is written as its delivery count (the lock itself never survives a restart:
the records come back AVAILABLE), so that a restart never delivers a record again with a
count it already had and the delivery count limit holds across crashes (Kafka writes
counts only with acknowledgements and releases). A write that fails leaves the in-memory
state changed and is answered with its error code.

Dead letters: records archived undelivered (REJECTed, or at the delivery count limit)
are copied to the group's ``errors.deadletterqueue.topic.name`` when it sets one
(``dlq.py``), after the state change is written and without the partition's lock.

Lock timeouts: ``expire_locks`` (a periodic task every ``LOCK_SWEEP_MS``) releases the
ACQUIRED records whose deadline passed (ARCHIVED at the delivery count limit).

Thread-safety: one lock per share-partition around its state and its write; the sessions
and the partition map under the manager's lock (never held while a partition's is
taken the other way round: partitions are looked up, then locked).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from broker.config import parse_duration_ms
from broker.log.clock import SYSTEM_TIME, Time
from broker.log.file_records import FileSlice
from broker.log.unified_log import HIGH_WATERMARK, TXN_COMMITTED
from broker.protocol import ErrorCode
from broker.protocol.primitives import ZERO_COPY_MIN_BYTES
from broker.record.batch import NO_PRODUCER_ID
from broker.server.errors import ApiError, error_code_for
from broker.server.share.config import ShareConfig
from broker.server.share.coordinator import ShareCoordinator, StateKey
from broker.server.share.dlq import DeadLetterWriter
from broker.server.share.partition import TERMINAL, InvalidRecordState, SharePartition, StateBatch

log = logging.getLogger(__name__)

LOCK_SWEEP_MS = 100
LEAVE_GRACE_MS = 2000
FINAL_EPOCH = -1
STRICT_MODE = 1  # ShareAcquireMode 1: record-limit


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    epoch: int = 1  # the epoch the next request must carry
    partitions: dict[tuple[uuid.UUID, int], None] = field(default_factory=dict)  # ordered set
    rotation: int = 0


@dataclass
class _Live:
    """A share-partition's live state and its lock."""

    sp: SharePartition
    topic: str
    state_epoch: int
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class PartitionResult:
    """One partition of a ShareFetch answer."""

    error: int = ErrorCode.NONE
    message: str | None = None
    ack_error: int = ErrorCode.NONE
    ack_message: str | None = None
    records: Any = b""
    acquired: list[tuple[int, int, int]] = field(default_factory=list)
    leader_epoch: int = 0
    size: int = 0


class ShareError(Exception):
    """A request-level error of ShareFetch / ShareAcknowledge."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


Acks = Mapping[tuple[uuid.UUID, int], list[tuple[int, int, list[int]]]]


class SharePartitionManager:
    """See the module docstring. ``topics``: the broker's ``TopicManager``;
    ``group_config(group, key)``: a per-group override or None; ``is_member(group,
    member)``: whether the group coordinator knows the member; ``notify(tp)``: wakes the
    fetches waiting on (topic, partition)."""

    def __init__(self, topics: Any, coordinator: ShareCoordinator, config: ShareConfig, *, time: Time = SYSTEM_TIME,
                 group_config: Callable[[str, str], Any] | None = None,
                 is_member: Callable[[str, str], bool] | None = None,
                 leader_epoch: Callable[[Any], int] | None = None) -> None:
        self.topics = topics
        self.coordinator = coordinator
        self.config = config
        self.time = time
        self.group_config = group_config or (lambda group_id, key: None)
        self.is_member = is_member or (lambda group_id, member_id: True)
        self.leader_epoch = leader_epoch or (lambda lg: 0)
        self.notify: Callable[[tuple[str, int]], None] = lambda tp: None
        self.dead_letters: DeadLetterWriter | None = None  # set by the broker
        # schedule(name, fn, delay_ms): a one-shot timer (the broker's scheduler); None: at once
        self.schedule: Callable[[str, Callable[[], object], int], object] | None = None
        self._lock = threading.Lock()
        self._init_lock = threading.Lock()
        self._sessions: dict[tuple[str, str], ShareSession] = {}
        self._live: dict[StateKey, _Live] = {}
        self._names: dict[uuid.UUID, str] = {}

    # --- settings ---

    def _setting(self, group_id: str, key: str, default: Any) -> Any:
        value = self.group_config(group_id, key)
        return default if value is None else value

    def lock_duration_ms(self, group_id: str) -> int:
        return int(self._setting(group_id, "share.record.lock.duration.ms", self.config.record_lock_duration_ms))

    def _delivery_limit(self, group_id: str) -> int:
        return int(self._setting(group_id, "share.delivery.count.limit", self.config.delivery_count_limit))

    # --- topics ---

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        name = self._names.get(topic_id)
        info = self.topics.get(name) if name is not None else None
        if info is not None and info.topic_id == topic_id:
            return name
        for n, i in self.topics.topics().items():
            if i is not None:
                self._names[i.topic_id] = n
        name = self._names.get(topic_id)
        info = self.topics.get(name) if name is not None else None
        return name if info is not None and info.topic_id == topic_id else None

    # --- sessions ---

    def session(self, group_id: str, member_id: str, epoch: int, partitions: Iterable[tuple[uuid.UUID, int]],
                forgotten: Iterable[tuple[uuid.UUID, int]] = (), *, fetch: bool = True) -> ShareSession:
        """The request's session after its epoch is checked (module docstring); raises
        ``ShareError``."""
        key = (group_id, member_id)
        with self._lock:
            if epoch == 0:
                if not fetch:
                    raise ShareError(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                                     "ShareAcknowledge cannot open a share session (epoch 0)")
                if key not in self._sessions and len(self._sessions) >= self.config.max_share_sessions:
                    raise ShareError(ErrorCode.SHARE_SESSION_LIMIT_REACHED,
                                     f"the broker holds {len(self._sessions)} share sessions")
                fresh = ShareSession(group_id, member_id)
                for tp in partitions:
                    fresh.partitions[tp] = None
                self._sessions[key] = fresh
                return fresh
            s = self._sessions.get(key)
            if s is None:
                raise ShareError(ErrorCode.SHARE_SESSION_NOT_FOUND,
                                 f"no share session for member {member_id} of group {group_id}")
            if epoch == FINAL_EPOCH:
                del self._sessions[key]
                return s
            if epoch != s.epoch:
                raise ShareError(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                                 f"the share session epoch is {s.epoch}, the request carries {epoch}")
            s.epoch = s.epoch + 1 if s.epoch < 0x7FFFFFFF else 1
            for tp in partitions:
                s.partitions[tp] = None
            for tp in forgotten:
                s.partitions.pop(tp, None)
            return s

    def close_sessions(self, group_id: str, member_id: str) -> None:
        with self._lock:
            self._sessions.pop((group_id, member_id), None)

    def sessions(self) -> int:
        with self._lock:
            return len(self._sessions)

    # --- share-partitions ---

    def _get(self, group_id: str, topic_id: uuid.UUID, partition: int, create: bool = True) -> _Live:
        """The live share-partition, initialized on first use; raises ``ShareError`` /
        ``ApiError`` for a missing topic or partition or a failed write."""
        key: StateKey = (group_id, topic_id, partition)
        with self._lock:
            live = self._live.get(key)
        if live is not None:
            info = self.topics.get(live.topic)
            if info is not None and info.topic_id == topic_id:
                return live
            self._topic_gone(key)  # deleted (or deleted and created again under a new id)
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_ID, f"topic {live.topic} ({topic_id}) no longer exists")
        name = self.topic_name(topic_id)
        if name is None:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_ID, f"no topic with id {topic_id}")
        lg = self.topics.get_log(name, partition)
        if lg is None:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{name}-{partition} does not exist")
        if not create:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{name}-{partition} has no share state")
        with self._init_lock:  # one initialization per share-partition (a second would reset its state)
            with self._lock:
                live = self._live.get(key)
            if live is not None:
                return live
            return self._initialize(key, group_id, name, lg)

    def _topic_gone(self, key: StateKey) -> None:
        """The topic of ``key`` was deleted: its live state and persisted state go."""
        self.invalidate(key)
        try:
            self.coordinator.delete(key)
        except ApiError as exc:
            log.warning("share group %s: deleting the state of a deleted topic's partition failed: %s", key[0], exc)

    def _initialize(self, key: StateKey, group_id: str, name: str, lg: Any) -> _Live:
        persisted = self.coordinator.read(key)
        sp = SharePartition(0, self._delivery_limit(group_id))
        if persisted is not None:
            sp.load(persisted.start_offset, persisted.batches)
            state_epoch = persisted.state_epoch
        else:
            state_epoch = 0
            start = self.initial_offset(group_id, lg)
            sp.reset(start)
            self.coordinator.initialize(key, state_epoch, start, self.leader_epoch(lg))
        sp.move_start(lg.log_start_offset)
        with self._lock:
            live = self._live.setdefault(key, _Live(sp, name, state_epoch))
        return live

    def initial_offset(self, group_id: str, lg: Any) -> int:
        reset = str(self._setting(group_id, "share.auto.offset.reset", "latest")).strip().lower()
        if reset == "earliest":
            return lg.log_start_offset
        if reset.startswith("by_duration:"):
            since = self.time.milliseconds() - parse_duration_ms(reset[len("by_duration:"):])
            found = lg.fetch_offset_by_timestamp(since)
            return found.offset if found is not None else lg.log_end_offset
        return lg.log_end_offset

    def _bury(self, key: StateKey, live: _Live, dead: list[tuple[int, int, int, str]]) -> None:
        """Copy records archived undelivered to the group's dead-letter topic, when it has one
        (called without the partition's lock)."""
        if not dead or self.dead_letters is None:
            return
        topic = self._setting(key[0], "errors.deadletterqueue.topic.name", "")
        if not topic:
            return
        copy = bool(self._setting(key[0], "errors.deadletterqueue.copy.record.enable", False))
        lg = self.topics.get_log(live.topic, key[2])
        if lg is not None:
            self.dead_letters.write(key[0], live.topic, key[2], lg, dead, str(topic), copy)

    def _write(self, key: StateKey, live: _Live, batches: list[StateBatch]) -> None:
        lg = self.topics.get_log(live.topic, key[2])
        self.coordinator.write(key, live.state_epoch, self.leader_epoch(lg), live.sp.start_offset, batches)

    # --- acknowledgements ---

    def acknowledge(self, group_id: str, member_id: str, acks: Acks
                    ) -> dict[tuple[uuid.UUID, int], tuple[int, str | None]]:
        """Apply ``acks`` ({(topic id, partition): [(first, last, types)]}); the error code
        and message per partition."""
        out: dict[tuple[uuid.UUID, int], tuple[int, str | None]] = {}
        now = self.time.milliseconds()
        for (topic_id, partition), batches in acks.items():
            try:
                live = self._get(group_id, topic_id, partition)
                with live.lock:
                    # a lock that expired is released before anything else: the member no
                    # longer holds those records, whether or not the sweep ran yet
                    live.sp.delivery_count_limit = self._delivery_limit(group_id)
                    changed: list[StateBatch] = live.sp.release(None, now)
                    deadline = now + self.lock_duration_ms(group_id)
                    snapshot = (live.sp.start_offset, live.sp.end_offset, list(live.sp.runs), len(live.sp.dead))
                    try:
                        for first, last, types in batches:
                            changed += live.sp.acknowledge(member_id, first, last, types, deadline)
                    except (InvalidRecordState, ValueError):
                        # all or nothing per partition: restore what an earlier batch changed
                        live.sp.start_offset, live.sp.end_offset, live.sp.runs = snapshot[0], snapshot[1], snapshot[2]
                        del live.sp.dead[snapshot[3]:]
                        live.sp._reindex()
                        dead = live.sp.drain_dead()
                        if changed:  # the expired locks stay released
                            self._write((group_id, topic_id, partition), live, changed)
                            self.notify((live.topic, partition))
                        self._bury((group_id, topic_id, partition), live, dead)
                        raise
                    moved = live.sp.advance()
                    if changed or moved:
                        self._write((group_id, topic_id, partition), live, changed)
                    dead = live.sp.drain_dead()
                self._bury((group_id, topic_id, partition), live, dead)
                released = any(t == 2 for _f, _l, ts in batches for t in ts)
                if released:
                    self.notify((live.topic, partition))
                out[(topic_id, partition)] = (ErrorCode.NONE, None)
            except InvalidRecordState as exc:
                out[(topic_id, partition)] = (ErrorCode.INVALID_RECORD_STATE, str(exc))
            except ValueError as exc:
                out[(topic_id, partition)] = (ErrorCode.INVALID_REQUEST, str(exc))
            except ApiError as exc:
                out[(topic_id, partition)] = (exc.code, exc.message)
        return out

    # --- fetching ---

    def fetch_partitions(self, session: ShareSession, member_id: str, max_bytes: int, max_records: int,
                         strict: bool, isolation_committed: bool | None = None,
                         skip: frozenset = frozenset()) -> dict[tuple[uuid.UUID, int], PartitionResult]:
        """One acquisition pass over the session's partitions but ``skip`` (module
        docstring)."""
        group_id = session.group_id
        results: dict[tuple[uuid.UUID, int], PartitionResult] = {}
        tps = [tp for tp in session.partitions if tp not in skip]
        if not tps:
            return results
        start = session.rotation % len(tps)
        session.rotation += 1
        order = tps[start:] + tps[:start]
        remaining_bytes = max(max_bytes, 0)
        remaining_records = max(max_records, 1)
        if isolation_committed is None:
            level = str(self._setting(group_id, "share.isolation.level", "read_uncommitted")).strip().lower()
            isolation_committed = level == "read_committed"
        lock_ms = self.lock_duration_ms(group_id)
        max_locks = self.config.partition_max_record_locks
        first_data = True
        pending_dead: list = []
        limit = self._delivery_limit(group_id)
        for topic_id, partition in order:
            if remaining_records <= 0 or remaining_bytes <= 0:
                break
            result = PartitionResult()
            try:
                live = self._get(group_id, topic_id, partition)
                lg = self.topics.get_log(live.topic, partition)
                if lg is None:
                    raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{live.topic}-{partition} is gone")
                result.leader_epoch = self.leader_epoch(lg)
                with live.lock:
                    sp = live.sp
                    sp.delivery_count_limit = limit  # a group config change applies at once
                    expired = sp.release(None, self.time.milliseconds())
                    if sp.move_start(lg.log_start_offset) or expired:
                        self._write((group_id, topic_id, partition), live, expired)
                    dead = sp.drain_dead()
                    if dead:
                        pending_dead.append(((group_id, topic_id, partition), live, dead))
                    offset = sp.next_fetch_offset()
                    bound = lg.last_stable_offset if isolation_committed else lg.high_watermark
                    if offset >= bound or (not sp.has_available() and sp.in_flight() >= max_locks):
                        continue
                    info = lg.read(offset, remaining_bytes, TXN_COMMITTED if isolation_committed else HIGH_WATERMARK,
                                   first_data)
                    records = info.records
                    # the batch headers are read lazily: the acquisition stops at max_records,
                    # long before the end of a large read
                    headers: list = []
                    batches = _classify(records.batches(), info.aborted_transactions if isolation_committed else None,
                                        headers)
                    deadline = self.time.milliseconds() + lock_ms
                    acquired = sp.acquire(member_id, batches, remaining_records, deadline, strict=strict,
                                          max_in_flight=max_locks)
                    if not acquired:
                        if sp.advance():
                            self._write((group_id, topic_id, partition), live, [])
                        continue
                    # the delivery counts are written before the records leave: a restart never
                    # hands a record out again with a count it already had
                    self._write((group_id, topic_id, partition), live,
                                [b for a, z, _ in acquired for b in sp.batches_in(a, z)])
                    last_acquired = acquired[-1][1]
                    end = 0
                    for pos, h in headers:
                        end = pos + h.size_in_bytes
                        if h.last_offset >= last_acquired:
                            break
                    result.records = _slice(records, end)
                    result.size = end
                    result.acquired = acquired
                remaining_bytes -= end
                remaining_records -= sum(b - a + 1 for a, b, _ in acquired)
                first_data = False
            except ApiError as exc:
                result.error, result.message = exc.code, exc.message
            except Exception as exc:  # noqa: BLE001 - every failure becomes a code for the partition
                result.error, result.message = error_code_for(exc), str(exc)
                if result.error == ErrorCode.UNKNOWN_SERVER_ERROR:
                    log.exception("share fetch of %s-%d for group %s failed", topic_id, partition, group_id)
            results[(topic_id, partition)] = result
        for key, live, dead in pending_dead:
            self._bury(key, live, dead)
        return results

    # --- releases ---

    def release_member(self, group_id: str, member_id: str, left: bool = False) -> None:
        """The member left the group (``left``) or its session expired: its share session
        ends and its records come back; after a leave, ``LEAVE_GRACE_MS`` later, so that the
        final ShareAcknowledge a closing client sends beside its leave heartbeat (epoch -1,
        on its fetch connection) still finds the session and the records."""
        if left and self.schedule is not None:
            # what it acquired before leaving has a deadline up to now + the lock duration;
            # if the same member id joined again meanwhile, what it acquired since stays its
            held_until = self.time.milliseconds() + self.lock_duration_ms(group_id)

            def later() -> None:
                if not self.is_member(group_id, member_id):
                    self.release_member(group_id, member_id)
                else:
                    self._release(lambda key: key[0] == group_id, member_id, held_until)
            self.schedule(f"share-leave-{member_id}", later, LEAVE_GRACE_MS)
            return
        self.close_sessions(group_id, member_id)
        self._release(lambda key: key[0] == group_id, member_id, None)

    def release_member_session(self, group_id: str, member_id: str) -> None:
        """The member closed its share session: the records it holds come back."""
        self._release(lambda key: key[0] == group_id, member_id, None)

    def expire_locks(self) -> int:
        """Release every ACQUIRED record whose lock expired; how many ranges changed."""
        return self._release(lambda key: True, None, self.time.milliseconds())

    def _release(self, which: Callable[[StateKey], bool], member_id: str | None, now: int | None) -> int:
        with self._lock:
            lives = [(k, v) for k, v in self._live.items() if which(k)]
        n = 0
        for key, live in lives:
            with live.lock:
                deadline = live.sp.earliest_deadline()
                if deadline is None or (now is not None and deadline > now):
                    continue
                changed = live.sp.release(member_id, now)
                if not changed:
                    continue
                live.sp.advance()
                try:
                    self._write(key, live, changed)
                except ApiError as exc:
                    log.warning("share group %s: writing the release of %s-%d failed: %s", key[0], live.topic,
                                key[2], exc)
                dead = live.sp.drain_dead()
            self._bury(key, live, dead)
            n += len(changed)
            self.notify((live.topic, key[2]))
        return n

    # --- group-wide operations ---

    def forget_group(self, group_id: str) -> None:
        """The group was deleted: its sessions, live state and persisted state go."""
        with self._lock:
            for key in [k for k in self._sessions if k[0] == group_id]:
                del self._sessions[key]
            keys = [k for k in self._live if k[0] == group_id]
            for k in keys:
                del self._live[k]
        for k in set(keys) | set(self.coordinator.keys(group_id)):
            self.coordinator.delete(k)

    def invalidate(self, key: StateKey) -> None:
        """Forget the live state of ``key``: the next use reloads it from the share
        coordinator (its persisted state was written from outside: the state RPCs, an
        offset reset)."""
        with self._lock:
            self._live.pop(key, None)

    def start_offsets(self, group_id: str) -> dict[StateKey, tuple[int, int]]:
        """(start offset, delivery-complete count at or above it) of every share-partition
        of the group with state (DescribeShareGroupOffsets)."""
        out: dict[StateKey, tuple[int, int]] = {}
        for key in self.partitions_of(group_id):
            live = self.live(key)
            if live is not None:
                with live.lock:
                    done = sum(r.last - r.first + 1 for r in live.sp.runs if r.state in TERMINAL)
                    out[key] = (live.sp.start_offset, done)
                continue
            persisted = self.coordinator.read(key)
            if persisted is not None:
                done = sum(b.last_offset - b.first_offset + 1 for b in persisted.batches
                           if b.delivery_state in TERMINAL and b.last_offset >= persisted.start_offset)
                out[key] = (persisted.start_offset, done)
        return out

    def reset_offset(self, key: StateKey, offset: int, leader_epoch: int = 0) -> None:
        """AlterShareGroupOffsets: the share-partition starts over at ``offset`` with the
        next state epoch (writes from the old epoch are then fenced)."""
        old = self.coordinator.read(key)
        self.invalidate(key)
        self.coordinator.initialize(key, (old.state_epoch + 1) if old is not None else 0, offset, leader_epoch)
        self.invalidate(key)

    def delete_state(self, keys: Iterable[StateKey]) -> None:
        """DeleteShareGroupOffsets: the share-partitions start over at
        ``share.auto.offset.reset`` on their next fetch."""
        for key in keys:
            self.invalidate(key)
            self.coordinator.delete(key)
            self.invalidate(key)

    def partitions_of(self, group_id: str) -> list[StateKey]:
        with self._lock:
            live = {k for k in self._live if k[0] == group_id}
        return sorted(live | set(self.coordinator.keys(group_id)), key=lambda k: (str(k[1]), k[2]))

    def live(self, key: StateKey) -> _Live | None:
        with self._lock:
            return self._live.get(key)


def _classify(headers: Iterable, aborted: list | None, seen: list) -> Iterator[tuple[int, int, bool]]:
    """(base offset, last offset, skip) per batch of ``headers`` ((position, header)), as a
    generator that appends each header it reads to ``seen``: control batches are skipped,
    and with ``aborted`` ((producer id, first offset) of the aborted transactions the read
    overlaps) the data batches of those transactions too."""
    aborted_at = sorted(aborted or (), key=lambda a: a[1])
    ongoing: set[int] = set()
    i = 0
    for pos, h in headers:
        seen.append((pos, h))
        while i < len(aborted_at) and aborted_at[i][1] <= h.base_offset:
            ongoing.add(aborted_at[i][0])
            i += 1
        control = bool(h.attributes & 0x20)
        transactional = bool(h.attributes & 0x10)
        skip = control
        if not control and transactional and h.producer_id != NO_PRODUCER_ID and h.producer_id in ongoing:
            skip = True
        if control and h.producer_id in ongoing:
            ongoing.discard(h.producer_id)  # the abort marker ends that transaction
        yield h.base_offset, h.last_offset, skip


def _slice(records: Any, size: int) -> Any:
    """The first ``size`` bytes of a read's records (whole batches), as the response takes
    them: a ``FileSlice`` (sent with ``os.sendfile``) from ``ZERO_COPY_MIN_BYTES``, bytes
    below."""
    if isinstance(records, FileSlice):
        piece = records if size >= records.size_in_bytes else FileSlice(records._records, records.position, size)
        return piece if size >= ZERO_COPY_MIN_BYTES else piece.read_bytes()
    return records.memoryview()[:size]


__all__ = ["FINAL_EPOCH", "STRICT_MODE", "PartitionResult", "ShareError", "SharePartitionManager", "ShareSession"]
