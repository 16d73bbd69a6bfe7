"""InitProducerId (key 22), v0-v4, and the producer-id allocator behind it.

Wire behaviour (Kafka's ``TransactionCoordinator.handleInitProducerId``): a request
without a transactional id (idempotent producers) always gets a NEW producer id with
epoch 0; any producer_id / producer_epoch it carries (v3+, KIP-360) is ignored, exactly
as Kafka does for non-transactional producers, so a producer that lost its sequence
state simply starts over under a fresh id. A request WITH a transactional id goes
to the transaction coordinator (``broker.server.handlers.txn.handle_init_producer_id``: epoch
bump, fencing, INVALID_TRANSACTION_TIMEOUT; PRODUCER_FENCED from v4, INVALID_PRODUCER_EPOCH
before). A storage failure while reserving ids answers KAFKA_STORAGE_ERROR (56), retriable.
Authorization (Kafka's): an idempotent producer needs IDEMPOTENT_WRITE on the CLUSTER or
WRITE on some topic (CLUSTER_AUTHORIZATION_FAILED).

``ProducerIdManager``: ids are handed out from blocks of ``BLOCK_SIZE`` (Kafka's
``ProducerIdsBlock``); the end of the current block is persisted BEFORE any id of it is
returned, so ids never repeat across restarts, clean or not (a crash only skips the rest
of a block). File ``kafkalog-producer-ids.json`` in every online log directory, written
atomically (temp file, fsync, rename, fsync dir)::

    {"version": 1, "next_block_start": 3000}

At startup the largest value found in any directory wins (a directory that was offline
holds an older one).

Thread-safety: ``generate`` holds a lock; the file write happens under it once per block.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path

from broker.log import files
from broker.log.errors import KafkaStorageError
from broker.protocol import ErrorCode
from broker.protocol.messages.init_producer_id import INIT_PRODUCER_ID_RESPONSE
from broker.record.limits import INT64_MAX
from broker.server.errors import error_code_for, is_expected
from broker.server.handlers import RequestContext, ServerState
from broker.server.handlers.authz import AclOperation, ResourceType, allowed_any, cluster_allowed

log = logging.getLogger(__name__)

InitProducerIdResponse = INIT_PRODUCER_ID_RESPONSE.cls

PRODUCER_IDS_FILE = "kafkalog-producer-ids.json"
FILE_VERSION = 1
BLOCK_SIZE = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
MAX_PRODUCER_ID = INT64_MAX


class ProducerIdManager:
    """Never-repeating producer ids (persistence and invariants in the module doc)."""

    def __init__(self, log_dirs: list[Path], live_dirs: Callable[[], list[Path]]) -> None:
        self.log_dirs = [Path(d) for d in log_dirs]
        self._live_dirs = live_dirs
        self._lock = threading.Lock()
        self._next = 0
        self._block_end = 0  # exclusive; ids below it are reserved on disk

    def load(self) -> None:
        start = 0
        for d in self.log_dirs:
            path = d / PRODUCER_IDS_FILE
            if not path.exists():
                continue
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                if data.get("version") != FILE_VERSION:
                    raise ValueError(f"unknown version {data.get('version')!r}")
                start = max(start, int(data["next_block_start"]))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                # An unreadable copy is ignored; were all unreadable, ids could repeat, so
                # that case is refused rather than guessed.
                log.error("unreadable producer id file %s: %s", path, exc)
                raise KafkaStorageError(f"unreadable producer id file {path}: {exc}") from exc
        self._next = self._block_end = start

    def _reserve(self, end: int) -> None:
        data = json.dumps({"version": FILE_VERSION, "next_block_start": end}).encode("ascii")
        written = 0
        for d in self._live_dirs():
            try:
                files.atomic_write(Path(d) / PRODUCER_IDS_FILE, data)
                written += 1
            except OSError as exc:
                log.error("could not write %s in %s: %s", PRODUCER_IDS_FILE, d, exc)
        if not written:
            raise KafkaStorageError("no log directory could record the producer id block")

    def generate(self) -> int:
        with self._lock:
            if self._next >= self._block_end:
                end = self._next + BLOCK_SIZE
                if end > MAX_PRODUCER_ID:
                    raise KafkaStorageError("producer ids exhausted")
                self._reserve(end)
                self._block_end = end
            pid = self._next
            self._next += 1
            return pid


def handle(state: ServerState, ctx: RequestContext, body) -> object:
    if body.transactional_id is not None:  # served by handlers.txn.handle_init_producer_id
        return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.NOT_COORDINATOR,
                                      producer_id=-1, producer_epoch=-1)
    if state.authorizer is not None and not (
            cluster_allowed(state, ctx, AclOperation.IDEMPOTENT_WRITE, audit=False)
            or allowed_any(state, ctx, AclOperation.WRITE, ResourceType.TOPIC)):
        # Kafka: an idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic
        return error_response(state, ctx, body, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    try:
        pid = state.producer_ids.generate()
    except Exception as exc:  # noqa: BLE001 - answered with its code
        if not is_expected(exc):
            log.exception("InitProducerId failed")
        return error_response(state, ctx, body, error_code_for(exc))
    return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, producer_id=pid,
                                  producer_epoch=0)


def error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return InitProducerIdResponse(throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1)
