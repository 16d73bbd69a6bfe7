"""Stitched mode: cold offsets straight from the object store, the hot tail from the brokers.

Owns: ``stitch`` (where each part of one offset range is read), ``StitchedOffsetReader``
(planning's ``OffsetReader`` for ``path`` + ``kafka.bootstrap.servers`` given together, and
the pieces of the planned ranges) and ``read_pieces`` (an executor task's read of a
stitched input partition). Chosen by ``ReadOptions.mode == "stitched"``.

What stitched mode is for: a topic with tiered storage (KIP-405) keeps its old segments
only in remote storage. A backfill through the brokers makes them read those segments back
from the store and send them on; here the executors read them from the store themselves
(ranged reads, the indexes, as direct mode does: ``direct.DirectRangeReader``), and only
the offsets still on the brokers' disks go over the wire (``network.NetworkRangeReader``).
``path`` names the remote storage: this project's broker's ``rsm.config.storage.uri``
(a segment counts once its manifest exists, ``broker.log.reader``) or any copy of a log
directory in Kafka's layout.

Planning: the cluster is the authority on partitions, offsets and timestamps (the steps of
``planning.plan_ranges`` run against the brokers, through ``network.NetworkOffsetReader``:
a timestamp is looked up by the brokers, which search their remote segments' time indexes).
Then each planned range [start, end) of a partition is cut at:

- ``local``, the partition's local log start offset (ListOffsets ``EARLIEST_LOCAL`` -4,
  v8+): only the offsets below it live in remote storage alone. A cluster without
  ListOffsets v8 has no tiered storage: ``local`` is then its log start offset, and
  everything is read from the brokers;
- the store's offsets of the partition, [``store_start``, ``store_end``) (its log start
  and end offsets, listed from the store when some range starts below ``local``; the
  store is not touched otherwise). A partition whose files in the store name another
  topic id than the cluster's topic (its first manifest's ``topic_id``, or
  ``partition.metadata``; Metadata v10+) is another incarnation of the topic, or
  another cluster's: it counts as absent from the store.

``stitch`` gives the pieces, in offset order, contiguous, covering [start, end) exactly:
brokers [start, a), store [a, b), brokers [b, end), empty pieces left out, where
a = clamp(store_start, start, end) and b = clamp(min(store_end, local), a, end). So the
store is read only for offsets it holds and the brokers no longer keep locally; offsets
below the store's start or between its end and ``local`` (a store missing some segments)
are fetched from the brokers, which serve their remote segments themselves. One range
never reads an offset twice nor skips one; the pieces of a range stay in one input
partition (one task), so splitting, ``kafkalog.snapshot`` and the row order are as in the
other modes.

Transactions: the store's part never returns an aborted record (the segments'
transaction indexes) and holds only decided transactions (the broker copies segments
below the last stable offset), so the brokers' part reads with
``isolation.level=read_committed`` unless ``kafka.isolation.level`` says otherwise
(``options.parse_options``).

The boundaries are taken when a range is planned. A segment tiered and deleted locally
after that is still served by the brokers (from remote storage); a remote segment deleted
by retention after that is data loss at read time, reported as in direct mode.

Thread-safety: ``StitchedOffsetReader`` belongs to the planning thread (one
``ConsumerNetworkClient``; the store is listed afresh for each ``pieces`` call); ``stitch``
is pure; ``read_pieces`` builds its readers per call.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from ..errors import TopicPartition
from ..options import ReadOptions
from .network import NetworkOffsetReader

if TYPE_CHECKING:
    import pyarrow as pa

    from ..planning import OffsetRange
    from . import RangeReader

__all__ = ["STORE", "BROKERS", "Piece", "stitch", "StitchedOffsetReader", "read_pieces"]

log = logging.getLogger("spark_kafkalog")

STORE = "store"
BROKERS = "brokers"

Piece = tuple[str, int, int]  # (STORE or BROKERS, start, end)


def stitch(start: int, end: int, store: tuple[int, int] | None, local: int) -> tuple[Piece, ...]:
    """The pieces of [start, end) (see the module docstring); ``store`` is the store's
    [start, end) of the partition, None when it has none."""
    if store is None or local <= start:
        return ((BROKERS, start, end),) if start < end else ()
    a = min(max(store[0], start), end)
    b = min(max(min(store[1], local), a), end)
    pieces = ((BROKERS, start, a), (STORE, a, b), (BROKERS, b, end))
    return tuple(p for p in pieces if p[1] < p[2])


class StitchedOffsetReader:
    """Planning's view of a cluster with its remote storage (``planning.OffsetReader``)."""

    def __init__(self, options: ReadOptions) -> None:
        self.paths = options.paths
        self.storage_options = dict(options.storage_options)
        self._network = NetworkOffsetReader(options.brokers, options.kafka_params)

    def describe(self) -> str:
        return f"{self._network.describe()} (remote storage {', '.join(self.paths)})"

    def topic_partitions(self, topics: Iterable[str] | None = None) -> list[TopicPartition]:
        return self._network.topic_partitions(topics)

    def earliest_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._network.earliest_offsets(tps)

    def latest_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._network.latest_offsets(tps)

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        return self._network.offsets_for_times(timestamps)

    def commit_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        self._network.commit_offsets(group_id, offsets)

    def local_log_start_offsets(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """Each partition's local log start offset (ListOffsets -4); the log start offset
        when the cluster has no ListOffsets v8 (then it has no tiered storage either)."""
        from broker.client.consumer.offsets import EARLIEST_LOCAL, list_offsets
        from broker.client.errors import UnsupportedVersionError

        if not tps:
            return {}
        try:
            got = list_offsets(self._network.client, {tp: EARLIEST_LOCAL for tp in tps})
        except UnsupportedVersionError:
            log.info("%s has no ListOffsets v8 (no tiered storage): every offset is fetched from "
                     "the brokers", self._network.describe())
            return self._network.earliest_offsets(tps)
        return {(tp[0], tp[1]): found.offset for tp, found in got.items() if found is not None}

    def pieces(self, ranges: Sequence[OffsetRange]) -> list[tuple[Piece, ...]]:
        """Where each of ``ranges`` is read, in order (``stitch``)."""
        from .direct import DirectOffsetReader

        tps = sorted({r.topic_partition for r in ranges if r.size > 0})
        local = self.local_log_start_offsets(tps)
        cold = sorted({r.topic_partition for r in ranges
                       if r.size > 0 and r.start < local.get(r.topic_partition, r.start)})
        store: dict[TopicPartition, tuple[int, int]] = {}
        if cold:
            reader = DirectOffsetReader(self.paths, self.storage_options)
            try:
                held = set(reader.topic_partitions(sorted({t for t, _ in cold})))
                found = self._same_topic([tp for tp in cold if tp in held], reader.topic_ids)
                starts, ends = reader.earliest_offsets(found), reader.latest_offsets(found)
                store = {tp: (starts[tp], ends[tp]) for tp in found}
            finally:
                reader.close()
            for tp in cold:
                if tp not in store:
                    log.warning("%s-%d has offsets below its local log start offset %d but %s holds "
                                "no segment of it: they are fetched from the brokers", tp[0], tp[1],
                                local[tp], ", ".join(self.paths))
        return [stitch(r.start, r.end, store.get(r.topic_partition), local.get(r.topic_partition, r.start))
                for r in ranges]

    def _same_topic(self, tps: list[TopicPartition], store_ids) -> list[TopicPartition]:
        """``tps`` whose files in the store name the cluster's topic id (or name none, or
        the cluster gives none: Metadata before v10); the others hold another incarnation
        of the topic (deleted and re-created) or another cluster's: never read them."""
        cluster = self._network.client.metadata.fetch()
        same = []
        for tp, stored in store_ids(tps).items():
            live = cluster.topic_id(tp[0])
            if stored is not None and live is not None and stored != live:
                log.warning("%s holds %s-%d of topic id %s, but the cluster's topic %s has id %s "
                            "(deleted and re-created, or another cluster): its offsets are fetched "
                            "from the brokers", ", ".join(self.paths), tp[0], tp[1], stored, tp[0], live)
                continue
            same.append(tp)
        return same

    def close(self) -> None:
        self._network.close()


def read_pieces(options: ReadOptions, topic: str, partition: int,
                pieces: Sequence[Piece]) -> Iterator[pa.RecordBatch]:
    """The rows of a stitched input partition: each piece from its source, in order."""
    from . import open_range_reader

    readers: dict[str, RangeReader] = {}
    for source, start, end in pieces:
        reader = readers.get(source)
        if reader is None:
            reader = readers[source] = open_range_reader(options, source)
        yield from reader.read(topic, partition, start, end)
