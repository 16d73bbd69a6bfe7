"""Sender: the producer's one I/O thread (ready -> drain -> ProduceRequest -> complete).

Owns, as Kafka's ``Sender``:

* The loop ``run_once``: idempotence housekeeping first (InitProducerId when there is no
  producer id, resolving unresolved sequences, the local epoch bump), or for a
  transactional producer its next transactional request (``transactional.py``), then
  ``send_producer_data`` and ``NetworkClient.poll``.
* ``send_producer_data``: ``accumulator.ready`` -> keep the nodes the client can send to
  (connecting the others; nodes still throttled wait) -> ``accumulator.drain`` up to
  ``max.request.size`` -> track the drained batches for ``delivery.timeout.ms`` (muting
  their partitions when ``max.in.flight.requests.per.connection`` is 1) -> fail expired
  batches, queued and in flight -> one ProduceRequest per node.
* ``complete_batch``, the seed's error table: success; MESSAGE_TOO_LARGE on a
  multi-record batch -> split and requeue without charging a retry; retriable (or
  idempotence-recoverable per ``TransactionManager.can_retry``) within ``retries`` and
  ``delivery.timeout.ms`` -> requeue with exponential backoff; DUPLICATE_SEQUENCE_NUMBER
  -> success with an unknown offset; anything else -> fail the batch's records. Metadata
  errors ask for a refresh. Disconnects count as NETWORK_EXCEPTION and request timeouts
  as REQUEST_TIMED_OUT: retried with the same sequence (I8, I9).
* Buffer lifetime (I13): a batch's buffer goes back to the pool only once no request
  holding its bytes is in flight, even when the batch itself expired earlier.
* Shutdown: ``initiate_close`` lets the loop finish what is queued and in flight (a
  transactional producer's open transaction is aborted first); ``force_close`` fails
  everything left.

Callbacks of user records run on this thread, in completion order (which is send order
within a partition).

Thread-safety: all state here is the Sender thread's; ``wakeup``, ``initiate_close`` and
``force_close`` may be called from any thread.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from broker.client.errors import (
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    ProducerClosedError,
    RecordTooLargeError,
    UnsupportedVersionError,
)
from broker.client.network import NetworkClient, now_ms
from broker.client.producer.batch import ProducerBatch
from broker.client.producer.transactional import maybe_send_transactional_request
from broker.protocol import ApiKey, ErrorCode, request_schema

log = logging.getLogger(__name__)

PRODUCE_MIN_VERSION = 3  # RecordBatch v2; Kafka 4 serves nothing older
PRODUCE_MAX_VERSION = 11
PRODUCE_TV2_VERSION = 12  # a transaction of transaction version 2 (KIP-890 part 2) needs exactly v12
PRODUCE_ZSTD_MIN_VERSION = 7
INIT_PRODUCER_ID_MAX_VERSION = 4

# Errors after which the leader information is probably stale (InvalidMetadataException).
_METADATA_ERRORS = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NETWORK_EXCEPTION,
})


class Sender(threading.Thread):
    """See the module docstring."""

    def __init__(self, *, client: NetworkClient, metadata: Any, accumulator: Any, config: Any,
                 transaction_manager: Any = None, metrics: dict[str, float] | None = None,
                 name: str = "kafka-producer-network-thread") -> None:
        super().__init__(name=name, daemon=True)
        self.client = client
        self.metadata = metadata
        self.acc = accumulator
        self.tm = transaction_manager
        self.acks = config.acks
        self.retries = config.retries
        self.max_request_size = config.max_request_size
        self.request_timeout_ms = config.request_timeout_ms
        self.retry_backoff_ms = config.retry_backoff_ms
        self.delivery_timeout_ms = config.delivery_timeout_ms
        self.guarantee_order = config.max_in_flight == 1
        self.codec = self.acc.codec
        self.metrics = metrics if metrics is not None else {}
        for k in ("record-retry-total", "record-error-total", "batch-split-total",
                  "request-total", "produce-throttle-time-max", "batch-expired-total",
                  "record-success-total"):
            self.metrics.setdefault(k, 0)
        self.running = True
        self.forced = False
        self._in_flight: dict[tuple[str, int], list[ProducerBatch]] = {}
        self._init_backoff_until = 0.0
        self.fatal_error: BaseException | None = None
        self.on_fatal: Any = None  # called (on this thread) when a fatal error is set

    # -- thread control ------------------------------------------------------------------

    def wakeup(self) -> None:
        self.client.wakeup()

    def initiate_close(self) -> None:
        self.acc.close()
        self.running = False
        self.wakeup()

    def force_close(self) -> None:
        self.forced = True
        self.initiate_close()

    def run(self) -> None:
        try:
            while self.running:
                self._run_once_safely()
            tm = self.tm
            if tm is not None and tm.is_transactional and not self.forced:
                tm.abort_on_close()  # an open transaction is aborted, as Kafka's Sender does
            # Finish what was accepted: queued batches, requests in flight, the abort's EndTxn.
            while not self.forced and (self.acc.has_undrained() or self.acc.has_incomplete()
                                       or self.client.has_in_flight_requests()
                                       or (tm is not None and tm.is_transactional and tm.has_pending_requests())):
                if self.fatal_error is not None:
                    break
                self._run_once_safely()
        finally:
            try:
                self.client.close()  # in-flight requests complete with errors here
            finally:
                self.acc.abort_incomplete_batches(
                    self.fatal_error or ProducerClosedError("producer closed before delivery"))
                self.metadata.close()

    def _run_once_safely(self) -> None:
        try:
            self.run_once()
        except Exception:  # never let one bad iteration kill the I/O thread
            log.exception("uncaught error in the producer's network thread")

    def run_once(self, now: float | None = None) -> None:
        now = now_ms() if now is None else now
        tm = self.tm
        if tm is not None and tm.is_transactional:
            if tm.fatal_error is not None and self.fatal_error is None:
                self._set_fatal(tm.fatal_error)
            tm.maybe_resolve_sequences()
            if maybe_send_transactional_request(self, now):
                return
        elif tm is not None:
            if self.fatal_error is not None:
                self.acc.abort_undrained_batches(self.fatal_error)
            tm.maybe_resolve_sequences()
            if tm.bump_epoch_if_needed():
                pass  # the epoch ran out: a new producer id is fetched below
            if not tm.has_producer_id():
                timeout = self._maybe_init_producer_id(now)
                self.client.poll(timeout, now)
                self._check_authentication()
                return
        timeout = self.send_producer_data(now)
        self.client.poll(timeout, now)
        self._check_authentication()

    def _check_authentication(self) -> None:
        auth_error = self.client.take_authentication_error()
        if auth_error is not None:  # SASL failed: fail what waits rather than retry forever
            self.acc.abort_undrained_batches(auth_error)

    # -- idempotence: InitProducerId -----------------------------------------------------

    def _maybe_init_producer_id(self, now: float) -> float:
        tm = self.tm
        if not tm.needs_producer_id():
            return self.request_timeout_ms
        if now < self._init_backoff_until:
            return self._init_backoff_until - now
        if not self.acc.has_incomplete() and not self.acc.has_undrained():
            return 100.0 if self.running else 0.0  # nothing to send yet: fetch lazily
        node = self.client.least_loaded_node(now, self.metadata)
        if node is None:
            return self.client.reconnect_backoff_ms
        if not self.client.ready(node, now):
            return min(self.client.poll_delay_ms(node.id, now), self.retry_backoff_ms)
        version = self.client.api_version(node.id, ApiKey.INIT_PRODUCER_ID,
                                          INIT_PRODUCER_ID_MAX_VERSION)
        if version is None:
            self._set_fatal(UnsupportedVersionError(
                "the broker does not support InitProducerId: disable enable.idempotence"))
            return 0.0
        body = request_schema(ApiKey.INIT_PRODUCER_ID, version).cls(
            transactional_id=None, transaction_timeout_ms=60000)
        tm.init_started()
        self.client.send(node.id, ApiKey.INIT_PRODUCER_ID, body, version=version,
                         callback=self._on_init_producer_id, now_ms=now)
        return self.request_timeout_ms

    def _on_init_producer_id(self, resp: Any) -> None:
        tm = self.tm
        body = resp.body
        if resp.error is not None or body is None:
            tm.init_failed()
            self._init_backoff_until = resp.received_ms + self.retry_backoff_ms
            return
        code = ErrorCode.lookup(body.error_code)
        if code != ErrorCode.NONE:
            tm.init_failed()
            if code.retriable:
                self._init_backoff_until = resp.received_ms + self.retry_backoff_ms
            else:
                self._set_fatal(KafkaError.from_code(code, "InitProducerId"))
            return
        tm.set_producer_id_and_epoch(body.producer_id, body.producer_epoch)
        tm.after_new_producer_id()

    def _set_fatal(self, error: BaseException) -> None:
        self.fatal_error = error
        if self.on_fatal is not None:
            self.on_fatal()
        if self.tm is not None:
            self.tm.fatal_error = error
        self.acc.abort_undrained_batches(error)

    # -- one round of produce ------------------------------------------------------------

    def send_producer_data(self, now: float) -> float:
        acc = self.acc
        client = self.client
        cluster = self.metadata.fetch()
        result = acc.ready(cluster, now)
        if result.unknown_leader_topics:
            for t in result.unknown_leader_topics:
                self.metadata.add_topic(t)
            self.metadata.request_update()
        ready_nodes = []
        not_ready_timeout = float("inf")
        for node_id in result.ready_nodes:
            node = cluster.node(node_id)
            if client.ready(node if node is not None else node_id, now):
                acc.update_node_latency_stats(node_id, now, True)
                ready_nodes.append(node_id)
            else:
                acc.update_node_latency_stats(node_id, now, False)
                not_ready_timeout = min(not_ready_timeout, client.poll_delay_ms(node_id, now))
        self._expire(now)  # before draining: an expired batch never gets a sequence
        drained = acc.drain(cluster, ready_nodes, self.max_request_size, now) if ready_nodes else {}
        for batches in drained.values():
            for b in batches:
                tp = (b.topic, b.partition)
                self._in_flight.setdefault(tp, []).append(b)
                if self.guarantee_order:
                    acc.muted.add(tp)
        for node_id, batches in drained.items():
            self._send_produce_request(node_id, batches, now)
        timeout = min(result.next_ready_check_delay_ms, not_ready_timeout,
                      acc.next_batch_expiry_ms - now, self._next_in_flight_expiry(now))
        if drained:
            timeout = 0.0
        return max(timeout, 0.0)

    def _next_in_flight_expiry(self, now: float) -> float:
        t = float("inf")
        for batches in self._in_flight.values():
            if batches:
                t = min(t, batches[0].created_ms + self.delivery_timeout_ms - now)
        return t

    def _expire(self, now: float) -> None:
        expired = self.acc.expired_batches(now)
        for tp, batches in list(self._in_flight.items()):
            keep = []
            for b in batches:
                if b.has_reached_delivery_timeout(self.delivery_timeout_ms, now) and not b.is_done():
                    expired.append(b)
                else:
                    keep.append(b)
            if keep:
                self._in_flight[tp] = keep
            else:
                del self._in_flight[tp]
        for b in expired:
            had_sequence = b.has_sequence() and b.drained_ms > 0
            self.metrics["batch-expired-total"] += 1
            self._fail_batch(b, KafkaTimeoutError(
                f"expiring {b.record_count} record(s) for {b.topic}-{b.partition}: "
                f"{now - b.created_ms:.0f} ms passed since batch creation "
                f"(delivery.timeout.ms={self.delivery_timeout_ms})"), adjust_sequences=False)
            if self.tm is not None and had_sequence:
                self.tm.mark_sequence_unresolved(b)  # its fate on the broker is unknown

    def _send_produce_request(self, node_id: int, batches: list[ProducerBatch], now: float) -> None:
        client = self.client
        min_version = PRODUCE_ZSTD_MIN_VERSION if self.codec == 4 else PRODUCE_MIN_VERSION
        max_version = PRODUCE_MAX_VERSION
        if self.tm is not None and self.tm.transaction_v2:
            min_version = max_version = PRODUCE_TV2_VERSION
        version = client.api_version(node_id, ApiKey.PRODUCE, max_version, min_version)
        if version is None:
            err = UnsupportedVersionError(f"node {node_id} supports no Produce version in "
                                          f"{min_version}..{max_version}")
            for b in batches:
                self._remove_in_flight(b)
                self._fail_batch(b, err, adjust_sequences=True)
            return
        schema = request_schema(ApiKey.PRODUCE, version)
        topic_cls = schema.structs["TopicProduceData"]
        part_cls = schema.structs["PartitionProduceData"]
        by_topic: dict[str, list[Any]] = {}
        by_tp: dict[tuple[str, int], ProducerBatch] = {}
        for b in batches:
            by_topic.setdefault(b.topic, []).append(part_cls(index=b.partition, records=b.payload))
            by_tp[(b.topic, b.partition)] = b
            b.in_flight = True
        txn_id = self.tm.transactional_id if self.tm is not None and self.tm.is_transactional else None
        body = schema.cls(transactional_id=txn_id, acks=self.acks, timeout_ms=self.request_timeout_ms,
                          topic_data=[topic_cls(name=t, partition_data=ps)
                                      for t, ps in by_topic.items()])
        self.metrics["request-total"] += 1
        try:
            client.send(node_id, ApiKey.PRODUCE, body, version=version,
                        expect_response=self.acks != 0, now_ms=now, context=by_tp,
                        callback=self._handle_produce_response)
        except KafkaError as e:  # the connection went away between ready() and now
            for b in batches:
                b.in_flight = False
                self._complete_batch(b, ErrorCode.NETWORK_EXCEPTION, -1, -1, -1, now, str(e))

    # -- responses -----------------------------------------------------------------------

    def _handle_produce_response(self, resp: Any) -> None:
        by_tp: dict[tuple[str, int], ProducerBatch] = resp.request.context
        now = resp.received_ms
        for b in by_tp.values():
            b.in_flight = False
        if resp.error is not None:
            code = ErrorCode.REQUEST_TIMED_OUT if resp.timed_out else ErrorCode.NETWORK_EXCEPTION
            for b in by_tp.values():
                self._complete_batch(b, code, -1, -1, -1, now, str(resp.error))
            return
        body = resp.body
        if body is None:  # acks=0: done once written, offsets unknown
            for b in by_tp.values():
                self._complete_batch(b, ErrorCode.NONE, -1, -1, -1, now, None)
            return
        throttle = getattr(body, "throttle_time_ms", 0) or 0
        if throttle > self.metrics["produce-throttle-time-max"]:
            self.metrics["produce-throttle-time-max"] = throttle
        for t in body.responses:
            for p in t.partition_responses:
                b = by_tp.pop((t.name, p.index), None)
                if b is None:
                    continue
                self._complete_batch(b, ErrorCode.lookup(p.error_code), p.base_offset,
                                     getattr(p, "log_append_time_ms", -1),
                                     getattr(p, "log_start_offset", -1), now,
                                     getattr(p, "error_message", None))
        for b in by_tp.values():  # partitions the broker did not answer for
            self._complete_batch(b, ErrorCode.NETWORK_EXCEPTION, -1, -1, -1, now,
                                 "no answer for the partition in the response")

    def _complete_batch(self, batch: ProducerBatch, code: ErrorCode, base_offset: int,
                        log_append_time: int, log_start_offset: int, now: float,
                        message: str | None) -> None:
        tm = self.tm
        tp = (batch.topic, batch.partition)
        if batch.is_done():
            # Expired (or aborted) while in flight: the broker's answer still tells the
            # idempotence state what happened; the records were already completed.
            if tm is not None:
                if code in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
                    tm.handle_completed_batch(batch, base_offset)
                else:
                    tm.remove_in_flight_batch(batch)
            if code == ErrorCode.NONE:
                batch.complete(base_offset, log_append_time)  # logged as a late success
            self._finish(batch)
        elif code == ErrorCode.MESSAGE_TOO_LARGE and batch.record_count > 1:
            log.warning("splitting a batch of %d records for %s-%d rejected as too large",
                        batch.record_count, batch.topic, batch.partition)
            self._remove_in_flight(batch)
            if tm is not None:
                tm.remove_in_flight_batch(batch)
            self.acc.split_and_reenqueue(batch, now)
            self.metrics["batch-split-total"] += 1
            batch.release_buffer()
        elif code != ErrorCode.NONE:
            if self._can_retry(batch, code, log_start_offset, now):
                log.debug("retrying %r after %s (attempt %d)", batch, code.name, batch.attempts + 1)
                self._remove_in_flight(batch)
                self.acc.reenqueue(batch, now)
                self.metrics["record-retry-total"] += batch.record_count
            elif code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
                self._complete_success(batch, base_offset if base_offset >= 0 else -1, -1)
            else:
                if code == ErrorCode.MESSAGE_TOO_LARGE:
                    err: KafkaError = RecordTooLargeError(message or "", code)
                else:
                    err = KafkaError.from_code(code, message or f"{batch.topic}-{batch.partition}")
                self._remove_in_flight(batch)
                self._fail_batch(batch, err, adjust_sequences=True)
            if code in _METADATA_ERRORS:
                self.metadata.request_update()
        else:
            self._complete_success(batch, base_offset, log_append_time)
        if self.guarantee_order:
            self.acc.unmute(tp)

    def _can_retry(self, batch: ProducerBatch, code: ErrorCode, log_start_offset: int,
                   now: float) -> bool:
        if batch.has_reached_delivery_timeout(self.delivery_timeout_ms, now):
            return False
        if batch.attempts >= self.retries or batch.is_done() or self.fatal_error is not None:
            return False
        if self.tm is not None and batch.has_sequence():
            return self.tm.can_retry(code, batch, log_start_offset)
        return code.retriable

    def _complete_success(self, batch: ProducerBatch, base_offset: int, log_append_time: int) -> None:
        if self.tm is not None:
            self.tm.handle_completed_batch(batch, base_offset)
        self._remove_in_flight(batch)
        if batch.complete(base_offset, log_append_time):
            self.metrics["record-success-total"] += batch.record_count
        self._finish(batch)

    def _fail_batch(self, batch: ProducerBatch, error: BaseException, adjust_sequences: bool) -> None:
        if self.tm is not None:
            self.tm.handle_failed_batch(batch, error, adjust_sequences)
        if batch.fail(error):
            self.metrics["record-error-total"] += batch.record_count
        self._finish(batch)

    def _finish(self, batch: ProducerBatch) -> None:
        self.acc.remove_incomplete(batch)
        batch.release_buffer()  # deferred while a request still holds the bytes (I13)

    def _remove_in_flight(self, batch: ProducerBatch) -> None:
        tp = (batch.topic, batch.partition)
        lst = self._in_flight.get(tp)
        if lst is not None:
            try:
                lst.remove(batch)
            except ValueError:
                pass
            if not lst:
                del self._in_flight[tp]

    def in_flight_batches(self) -> list[ProducerBatch]:
        return [b for lst in self._in_flight.values() for b in lst]


__all__ = ["Sender", "IllegalStateError"]
