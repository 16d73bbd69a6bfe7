"""Transactional offset commits (TxnOffsetCommit): the group coordinator's side of a
transaction, kept apart from ``coordinator.py`` so that the two evolve separately.

Owns, per ``GroupCoordinator`` (state kept on it in one attribute, ``_txn_pending_offsets``:
producer id -> {(group id, topic, partition): OffsetAndMetadata}):

* ``commit_txn_offsets``: validates the group / member / generation as an OffsetCommit
  (``GroupCoordinator._validate_commit``; a request without a generation and member, as
  TxnOffsetCommit v0-v2 send, skips it as Kafka does), appends ONE transactional batch
  (the producer's id and epoch, no sequence, ``AppendOrigin.COORDINATOR``) of
  OffsetCommit records to the group's ``__consumer_offsets`` partition, and keeps the
  offsets pending: they are not visible to OffsetFetch yet. The log fences an older
  producer epoch (INVALID_PRODUCER_EPOCH -> the caller maps it).
* ``complete_txn_offsets``: called by the transaction coordinator right after it wrote
  the COMMIT or ABORT marker of ``producer_id`` to a ``__consumer_offsets`` partition: on
  COMMIT the pending offsets of the groups hashing there become the committed offsets, on
  ABORT they are dropped. After a restart the pending offsets are not in memory (loading
  drops an open transaction); they are then read back from the partition: the producer's
  transactional records between its previous control batch and the marker.

Loading needs nothing from here: ``GroupCoordinator._load_partition`` already applies a
transaction's offsets at its COMMIT marker and drops them at ABORT.

Thread-safety: under the coordinator's ``_mlock`` and the partition's lock, like its commits.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from broker.log.unified_log import LOG_END
from broker.log.validator import AppendOrigin
from broker.protocol import ErrorCode
from broker.record.batch import NO_SEQUENCE, decode_records, encode_batch, records_payload
from broker.record.entries import iter_entry_headers
from broker.server.errors import ApiError, error_code_for, is_expected
from broker.server.group.coordinator import OFFSETS_TOPIC, _utf16_length
from broker.server.group.group import GroupMetadata, OffsetAndMetadata
from broker.server.group.records import (
    OffsetCommitKey,
    OffsetCommitValue,
    RecordFormatError,
    decode_key,
    decode_offset_commit_value,
    encode_key,
    encode_offset_commit_value,
)
from broker.server.handlers import leader_epoch_of

log = logging.getLogger(__name__)

_ATTR = "_txn_pending_offsets"
_MAX_DECOMPRESSED = 256 * 1024 * 1024


def _pending(coordinator: Any) -> dict[int, dict[tuple[str, str, int], OffsetAndMetadata]]:
    return coordinator.__dict__.setdefault(_ATTR, {})


def commit_txn_offsets(coordinator: Any, group_id: str, producer_id: int, producer_epoch: int,
                       generation_id: int, member_id: str, group_instance_id: str | None,
                       offsets: Iterable[tuple[str, int, int, int, str | None]]) -> list[int]:
    """Append ``offsets`` ((topic, partition, offset, leader_epoch, metadata)) in the
    producer's transaction; one error code per entry."""
    entries = list(offsets)
    if not group_id:
        return [ErrorCode.INVALID_GROUP_ID] * len(entries)
    coordinator.ensure_offsets_topic()
    p = coordinator.partition_for(group_id)
    with coordinator._mlock, coordinator._partition_locks[p]:
        group = coordinator._groups.get(group_id)
        if generation_id >= 0 or member_id or group_instance_id is not None:
            code = coordinator._validate_commit(group, generation_id, member_id, group_instance_id)
            if code != ErrorCode.NONE:
                return [code] * len(entries)
        now = coordinator.time.milliseconds()
        results: list[int] = []
        records: list[tuple[bytes, bytes, int]] = []
        accepted: list[tuple[tuple[str, str, int], OffsetAndMetadata]] = []
        for topic, partition, offset, leader_epoch, metadata in entries:
            metadata = metadata or ""
            if _utf16_length(metadata) > coordinator.metadata_max_bytes:
                results.append(ErrorCode.OFFSET_METADATA_TOO_LARGE)
                continue
            om = OffsetAndMetadata(offset, leader_epoch if leader_epoch >= 0 else -1, metadata, now, -1)
            records.append((encode_key(OffsetCommitKey(group_id, topic, partition)),
                            encode_offset_commit_value(OffsetCommitValue(
                                om.offset, om.metadata, now, om.leader_epoch, -1)), now))
            accepted.append(((group_id, topic, partition), om))
            results.append(ErrorCode.NONE)
        if not records:
            return results
        try:
            lg = coordinator.topics.get_log(OFFSETS_TOPIC, p)
            if lg is None:
                raise ApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{OFFSETS_TOPIC}-{p} is not available")
            batch = encode_batch(records, producer_id=producer_id, producer_epoch=producer_epoch,
                                 base_sequence=NO_SEQUENCE, is_transactional=True)
            lg.append_as_leader(batch, leader_epoch=leader_epoch_of(lg), origin=AppendOrigin.COORDINATOR)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a code
            code = error_code_for(exc)
            if not is_expected(exc):
                log.exception("transactional offset commit of group %s failed", group_id)
            return [code if r == ErrorCode.NONE else r for r in results]
        if coordinator.on_append is not None:
            coordinator.on_append((OFFSETS_TOPIC, p))
        with coordinator._lock:
            pending = _pending(coordinator).setdefault(producer_id, {})
            for key, om in accepted:
                pending[key] = om
    return results


def complete_txn_offsets(coordinator: Any, partition: int, producer_id: int, commit: bool,
                         marker_offset: int) -> int:
    """Apply (commit) or drop (abort) the producer's pending offsets of the groups in
    ``__consumer_offsets``-``partition``, whose marker is at ``marker_offset``. Returns the
    number of offsets made visible."""
    with coordinator._mlock, coordinator._partition_locks[partition]:
        with coordinator._lock:
            mine = _pending(coordinator).get(producer_id)
            found = None
            if mine is not None:
                found = {k: v for k, v in mine.items() if coordinator.partition_for(k[0]) == partition}
                for k in found:
                    del mine[k]
                if not mine:
                    del _pending(coordinator)[producer_id]
        if not commit:
            return 0
        if found is None:  # not in memory: written before a restart
            found = _read_open_txn(coordinator, partition, producer_id, marker_offset)
        with coordinator._lock:
            for (group_id, topic, p), om in found.items():
                group = coordinator._groups.get(group_id)
                if group is None:
                    group = coordinator._groups[group_id] = GroupMetadata(group_id)
                group.offsets[(topic, p)] = om
        return len(found)


def _read_open_txn(coordinator: Any, partition: int, producer_id: int, marker_offset: int
                   ) -> dict[tuple[str, str, int], OffsetAndMetadata]:
    """The producer's transactional offset records before ``marker_offset`` and after its
    previous control batch, read from the log."""
    lg = coordinator.topics.get_log(OFFSETS_TOPIC, partition)
    found: dict[tuple[str, str, int], OffsetAndMetadata] = {}
    if lg is None:
        return found
    offset = lg.log_start_offset
    while offset < marker_offset:
        data = lg.read(offset, coordinator.load_buffer_size, LOG_END, min_one_message=True).records.read_bytes()
        next_offset = offset
        for pos, header in iter_entry_headers(data):  # legacy entries: no producer, skipped
            next_offset = header.next_offset
            if header.base_offset >= marker_offset:
                next_offset = marker_offset
                break
            if header.producer_id != producer_id:
                continue
            if header.is_control:
                found.clear()
                continue
            if not header.is_transactional:
                continue
            try:
                for rec in decode_records(records_payload(data, pos, header, _MAX_DECOMPRESSED), header):
                    key = decode_key(rec.key)
                    if isinstance(key, OffsetCommitKey) and rec.value is not None:
                        v = decode_offset_commit_value(rec.value)
                        found[(key.group, key.topic, key.partition)] = OffsetAndMetadata(
                            v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp)
            except (RecordFormatError, ValueError) as exc:
                log.warning("%s-%d: skipping an unreadable transactional offset batch: %s",
                            OFFSETS_TOPIC, partition, exc)
        if next_offset <= offset:
            break
        offset = next_offset
    return found
