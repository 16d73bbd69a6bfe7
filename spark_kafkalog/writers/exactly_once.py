"""The exactly-once sink (``kafkalog.exactlyOnce=true``): one Kafka transaction per Spark
task, written by the task and completed by the driver.

Owns:

* ``transactional_id(options, info)``: the task's transactional id,
  ``{prefix}-{writeId}-p{partition}`` for a batch write (``writeId``: 12 hex digits drawn
  on the driver by ``make_writer``, one per ``save()``) and
  ``{prefix}-{queryId}-b{batchId}-p{partition}`` for a micro-batch (``queryId``: the
  query's id, kept across restarts in its checkpoint). ``prefix``:
  ``kafkalog.transactionalIdPrefix``, default ``kafkalog-sink``. Every attempt of a task
  (a retry, a speculative copy, a replay of the micro-batch after a restart) has the same
  id, so its InitProducerId bumps the epoch: the earlier attempt is fenced and the
  coordinator aborts whatever that attempt left open.
* ``write_task_transactional``: the task body. A task with no rows opens nothing. Else:
  a transactional ``KafkaProducer``, ``init_transactions()``; in a micro-batch, the
  marker check (below); ``begin_transaction()``; the rows, as the idempotent sink sends
  them (``common._TaskWriter``); in a micro-batch, the marker joins the transaction
  (``send_offsets_to_transaction``); a flush; and the producer is closed WITHOUT ending the
  transaction (``close(0)`` after the flush: nothing is left to send, and a forced close
  skips the abort a normal close does). The commit message carries the transactional id,
  producer id and epoch. A task that fails aborts its own transaction
  (``abort_transaction``) before re-raising.
* The micro-batch marker: the transaction of micro-batch N for Spark partition p also
  commits, through AddOffsetsToTxn + TxnOffsetCommit, offset N (metadata
  ``kafkalog batch N``) for the partition ``(marker topic, 0)`` in the consumer group
  ``{prefix}-{queryId}-p{p}`` (the marker topic: the ``topic`` option, else the topic of
  the task's first row; Kafka's TxnOffsetCommit needs an existing partition). The marker
  becomes visible exactly when the rows do. Before writing, a task of micro-batch N
  fetches the group's offset (OffsetFetch; after its own InitProducerId, so no transaction
  of this id is pending): N or more means this micro-batch was committed for this
  partition before (Spark replays it because its own commit log missed it): the task
  drains its input, writes nothing and reports ``already_committed``.
* ``commit_transactions`` (the driver's ``commit``): EndTxn(commit) for every task's
  transaction (``broker.client.txn_completion.complete_transactions``); any failure
  raises ``KafkaLogCommitError`` listing them (Spark then calls ``abort``, and fails the
  job or the query).
* ``abort_transactions`` (the driver's ``abort``): EndTxn(abort) for the finished tasks'
  transactions and InitProducerId (fence) for the transactional ids of the tasks Spark
  reports as failed (None message), so that what their last attempts left open is aborted
  now rather than at ``transaction.timeout.ms``. When no task of a micro-batch finished,
  the query id (part of the ids) is read from Spark's checkpoint (``query_id_from_checkpoint``:
  the ``id`` of ``<checkpointLocation>/metadata``, on any file system pyarrow opens); if
  that fails too, what the tasks left open is aborted by the micro-batch's next attempt or
  by the timeout. Bounded by ``kafka.max.block.ms`` in all (as a Kafka producer's
  ``abortTransaction``): an unreachable cluster never holds a failed job longer. Never
  raises: outcomes are logged.

A task's ``init_transactions`` (FindCoordinator, InitProducerId) waits ``kafka.max.block.ms``;
with no broker reachable it fails with ``BrokerUnreachableError`` naming that option
(``common.sink_named_unreachable``), without the client's frames. Usually the driver's
check (``common.check_reachable``) has failed the write before any task started.

Guarantee, costs and failure modes: see the exactly-once sink in docs/spark/writing.md and
``writers/__init__.py``. In short: with a replayable source and a deterministic plan (a
replayed micro-batch gives Spark partition p the same rows), every row is visible exactly
once to read_committed readers; the driver's commit completes the tasks one by one, so a
batch write whose driver fails halfway through its commit is partly visible; a stream
recovers (the replay skips the partitions already committed and rewrites the rest).

Thread-safety: a task's body runs on its worker thread; the driver calls are independent.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from .common import (
    KafkaLogCommitMessage,
    SinkColumns,
    TaskInfo,
    WriteOptions,
    _ranges_text,
    _TaskWriter,
    _where,
    log,
    sink_named_unreachable,
)

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["transactional_id", "marker_group", "write_task_transactional", "commit_transactions",
           "abort_transactions", "KafkaLogCommitError", "MARKER_PARTITION", "query_id_from_checkpoint"]

MARKER_PARTITION = 0
# How long the driver's EndTxn(commit) calls may take in all. Its abort (EndTxn(abort), and
# InitProducerId to fence the failed tasks' ids) is bounded by kafka.max.block.ms, as a Kafka
# producer's abortTransaction: best effort, it never holds a failed job longer than that.
DRIVER_TIMEOUT_MS = 60000.0


class KafkaLogCommitError(RuntimeError):
    """The driver could not commit some tasks' transactions."""


class _Marker(NamedTuple):
    offset: int
    metadata: str


def transactional_id(options: WriteOptions, info: TaskInfo) -> str:
    """The task's transactional id (module docstring)."""
    if info.batch_id is not None:
        return f"{options.transactional_id_prefix}-{info.query_id}-b{info.batch_id}-p{info.partition}"
    if options.write_id is None:
        raise ValueError("a batch write's exactly-once options have no write id (make_writer sets it)")
    return f"{options.transactional_id_prefix}-{options.write_id}-p{info.partition}"


def marker_group(options: WriteOptions, query_id: str | None, partition: int) -> str:
    """The consumer group holding the last committed micro-batch of a Spark partition."""
    return f"{options.transactional_id_prefix}-{query_id}-p{partition}"


def _marker_topic(options: WriteOptions, columns: SinkColumns, first: pa.RecordBatch) -> str:
    if options.topic is not None:
        return options.topic
    topic = first.column(columns.topic)[0].as_py()
    if topic is None:
        raise ValueError("null topic present in the data. Use the topic option for setting a topic.")
    return topic


def _client_config(options: WriteOptions) -> dict[str, Any]:
    from broker.client.txn_completion import client_config
    return client_config(options.producer_config)


def _transaction_timeout_ms(options: WriteOptions) -> int:
    from broker.client.producer.config import ProducerConfig
    return int(ProducerConfig({**options.producer_config, "transactional.id": "-"})["transaction.timeout.ms"])


def _max_block_ms(options: WriteOptions) -> float:
    from broker.client.producer.config import ProducerConfig
    return float(ProducerConfig(dict(options.producer_config)).max_block_ms)


# -- the task ------------------------------------------------------------------------------

def write_task_transactional(options: WriteOptions, columns: SinkColumns, batches: Iterator[pa.RecordBatch],
                             *, streaming: bool, info: TaskInfo | None = None) -> KafkaLogCommitMessage:
    """The exactly-once task body (module docstring); ``info`` defaults to the current
    Spark task's."""
    start = time.monotonic()
    info = info or TaskInfo.current(streaming)
    it = iter(batches)
    first = next((b for b in it if b.num_rows), None)
    if first is None:  # no rows: no transaction
        return KafkaLogCommitMessage(spark_partition=info.partition, attempt=info.attempt, ranges=(),
                                     records=0, bytes=0, batch_id=info.batch_id, query_id=info.query_id,
                                     seconds=round(time.monotonic() - start, 3))
    txn_id = transactional_id(options, info)
    task = _TaskWriter(options, columns, info, overrides={"transactional.id": txn_id})
    producer = task.producer
    began = False
    try:
        producer.init_transactions()  # fences earlier attempts, aborting what they left open
        marker = None
        if info.batch_id is not None:
            from broker.client.consumer.group_offsets import fetch_committed
            marker = (_marker_topic(options, columns, first), MARKER_PARTITION)
            group = marker_group(options, info.query_id, info.partition)
            committed = fetch_committed(_client_config(options), group, [marker])
            done = next(iter(committed.values()))
            if done is not None and done >= info.batch_id:
                for _ in it:  # Spark's input is consumed, not written
                    pass
                producer.close()
                log.info(f"kafkalog sink: Spark partition {info.partition} attempt {info.attempt}"
                         f"{_where(info.batch_id, info.query_id)}: already committed (group {group} "
                         f"is at micro-batch {done}); nothing written")
                return KafkaLogCommitMessage(
                    spark_partition=info.partition, attempt=info.attempt, ranges=(), records=0, bytes=0,
                    batch_id=info.batch_id, query_id=info.query_id, transactional_id=txn_id,
                    already_committed=True, seconds=round(time.monotonic() - start, 3))
        producer.begin_transaction()
        began = True
        task.write_batch(first)
        for batch in it:
            task.write_batch(batch)
        if marker is not None and info.batch_id is not None:  # marker: a micro-batch's
            producer.send_offsets_to_transaction(
                {marker: _Marker(info.batch_id, f"kafkalog batch {info.batch_id}")}, group)
        task.finish()
    except BaseException as e:
        _abort_own(producer, began)
        note = (f"kafkalog sink: Spark partition {info.partition} attempt {info.attempt}"
                f"{_where(info.batch_id, info.query_id)} failed; its transaction {txn_id} is aborted "
                f"(exactly-once: none of its {task.ranges.records} acknowledged records become visible "
                "to read_committed readers)")
        unreachable = sink_named_unreachable(e)
        if unreachable is not None:  # named by the sink's option, without the client's frames
            e = unreachable
        log.warning(f"{note}: {type(e).__name__}: {e}")
        try:
            e.add_note(note)
        except (AttributeError, TypeError):
            pass
        if unreachable is not None:
            raise e from None
        raise
    message = task.message(time.monotonic() - start)
    producer.close(0)  # the transaction stays open: the driver commits or aborts it
    message = dataclasses.replace(message, transactional_id=txn_id)
    log.info(f"kafkalog sink: Spark partition {info.partition} attempt {info.attempt}"
             f"{_where(info.batch_id, info.query_id)} wrote {message.records} records, "
             f"{message.bytes} bytes in {message.seconds:.3f} s in transaction {txn_id} (producer id "
             f"{message.producer_id} epoch {message.producer_epoch}), left for the driver to commit: "
             f"{_ranges_text(message.ranges)}")
    return message


def _abort_own(producer: Any, began: bool) -> None:
    """Best effort: abort the task's transaction (a fenced producer cannot: the newer
    attempt's InitProducerId has aborted it already)."""
    try:
        if began:
            producer.abort_transaction(timeout=10.0)
    except BaseException:  # noqa: BLE001 (the task's own error is what is raised)
        pass
    try:
        producer.close(0)
    except BaseException:  # noqa: BLE001
        pass


# -- the driver ----------------------------------------------------------------------------

def _open(messages: Sequence[KafkaLogCommitMessage | None]) -> list[KafkaLogCommitMessage]:
    return [m for m in messages if m is not None and m.transactional_id and not m.already_committed]


def commit_transactions(options: WriteOptions, messages: Sequence[KafkaLogCommitMessage | None],
                        batch_id: int | None = None) -> str:
    """EndTxn(commit) for each task's transaction; the summary line, or
    ``KafkaLogCommitError``."""
    from broker.client.txn_completion import ResumedTransaction, complete_transactions

    msgs = [m for m in messages if m is not None]
    todo = _open(msgs)
    results = complete_transactions(
        _client_config(options),
        [ResumedTransaction(m.transactional_id, m.producer_id, m.producer_epoch) for m in todo
         if m.transactional_id],  # every one of todo (_open); narrows the type
        commit=True, timeout_ms=DRIVER_TIMEOUT_MS)
    failed = {k: e for k, e in results.items() if e is not None}
    query_id = next((m.query_id for m in msgs if m.query_id), None)
    where = _where(batch_id, query_id)
    if failed:
        done = len(results) - len(failed)
        raise KafkaLogCommitError(
            f"kafkalog exactly-once commit{where} failed for {len(failed)} of {len(results)} task "
            f"transactions ({done} committed, visible to read_committed readers): "
            + "; ".join(f"{k}: {e}" for k, e in sorted(failed.items())))
    skipped = sum(1 for m in msgs if m.already_committed)
    records = sum(m.records for m in todo)
    parts = sorted({(r.topic, r.partition) for m in todo for r in m.ranges})
    line = (f"kafkalog write committed{where}: {len(todo)} transactions, {records} records, "
            f"{sum(m.bytes for m in todo)} bytes, {len(parts)} partitions, {len(msgs)} tasks (exactly-once)")
    if skipped:
        line += f"; {skipped} task(s) found their transaction of this micro-batch committed before"
    return line


def query_id_from_checkpoint(location: str | None) -> str | None:
    """The query id Spark keeps in ``<location>/metadata`` (StreamMetadata, one JSON line
    ``{"id": ...}``); None when it cannot be read. Local paths and ``file:`` URIs directly,
    other schemes (s3, hdfs, gs, abfs ...) through pyarrow's file systems."""
    import json
    import urllib.parse

    if not location:
        return None
    path = location.rstrip("/") + "/metadata"
    try:
        if path.startswith("file:") or "://" not in path:
            local = urllib.parse.urlparse(path).path if path.startswith("file:") else path
            with open(local, encoding="utf-8") as f:
                text = f.read()
        else:
            from pyarrow import fs as pafs

            filesystem, inner = pafs.FileSystem.from_uri(path)
            with filesystem.open_input_stream(inner) as f:
                text = f.read().decode("utf-8")
        value = json.loads(text.splitlines()[0]).get("id")
        return str(value) if value else None
    except Exception:  # noqa: BLE001 - best effort: the caller falls back to the timeout
        return None


def abort_transactions(options: WriteOptions, messages: Sequence[KafkaLogCommitMessage | None],
                       batch_id: int | None = None) -> str:
    """Abort the finished tasks' transactions and fence the failed tasks' ids; the summary
    line (never raises)."""
    from broker.client.txn_completion import ResumedTransaction, complete_transactions, fence_transactional_ids

    done = [m for m in messages if m is not None]
    todo = _open(done)
    query_id = next((m.query_id for m in done if m.query_id), None)
    failed_parts = [i for i, m in enumerate(messages) if m is None]
    if query_id is None and batch_id is not None and failed_parts:
        query_id = query_id_from_checkpoint(options.checkpoint_location)
    fence: list[str] = []
    for p in failed_parts:
        info = TaskInfo(partition=p, batch_id=batch_id, query_id=query_id)
        if batch_id is None or query_id is not None:
            fence.append(transactional_id(options, info))
    problems: list[str] = []
    try:
        bound_ms, started = _max_block_ms(options), time.monotonic()  # one bound for both calls
        aborted = complete_transactions(
            _client_config(options),
            [ResumedTransaction(m.transactional_id, m.producer_id, m.producer_epoch) for m in todo
             if m.transactional_id],  # every one of todo (_open); narrows the type
            commit=False, timeout_ms=bound_ms, timeout_config="kafka.max.block.ms")
        problems += [f"{k}: {e}" for k, e in aborted.items() if e is not None]
        left_ms = bound_ms if not todo else max(0.0, bound_ms - (time.monotonic() - started) * 1000.0 // 1)
        fenced = fence_transactional_ids(_client_config(options), fence, _transaction_timeout_ms(options),
                                         timeout_ms=left_ms, timeout_config="kafka.max.block.ms")
        problems += [f"{k}: {e}" for k, e in fenced.items() if not isinstance(e, tuple)]
    except Exception as e:  # noqa: BLE001 (abort must not hide the job's own failure)
        problems.append(str(e))
    line = (f"kafkalog write aborted{_where(batch_id, query_id)}: {len(failed_parts)} of {len(messages)} "
            f"tasks failed (tasks {failed_parts}); {len(todo)} finished task transaction(s) aborted, "
            f"{len(fence)} failed task transactional id(s) fenced (exactly-once: nothing of this write "
            "becomes visible to read_committed readers)")
    if batch_id is not None and query_id is None and failed_parts:
        line += ("; the query id is unknown (no task finished, and the checkpoint's metadata could not be "
                 "read): what the failed tasks left open is aborted by the micro-batch's next attempt or by "
                 "transaction.timeout.ms")
    if problems:
        line += "; could not abort: " + "; ".join(problems)
    return line
