"""Network mode: the driver plans and the executors fetch from ``kafka.bootstrap.servers``.

Owns: ``NetworkOffsetReader`` (planning's ``OffsetReader`` over a Kafka cluster: topic
listing through Metadata, log start / end offsets and offsets for timestamps through
ListOffsets) and ``NetworkRangeReader`` (the ``RangeReader`` that fetches one offset range
of one partition from its leader with ``broker.client.consumer.RangeFetcher`` and decodes
the responses column-wise into Arrow). Works against this project's broker or any Kafka
cluster: only the wire protocol is used.

Consumer settings: the source's ``kafka.*`` options are passed through as Kafka consumer
configuration (``kafka.isolation.level=read_committed`` drops aborted transactions, as
Spark's source does). Unless the user sets them, the fetcher asks for up to
``NETWORK_PARTITION_FETCH_BYTES`` per response (larger responses decode faster in
bulk; Kafka's 1 MiB default spends most of its time per response) and keeps one Fetch in
flight while it decodes the previous one.

Memory per task: at most two responses (``max.partition.fetch.bytes`` each) plus the
decoder's unit (``max_bytes_per_batch``) and the batch Spark is sending.

Data loss at read time (records deleted since planning, a log ending early, a deleted
topic) goes to ``errors.report_data_loss``: ``KafkaDataLossError`` naming the partition
and the offsets with failOnDataLoss, else a warning and the remaining rows. So does a bad
batch served by the broker (a CRC, records or compressed payload that cannot be read, or
a decompression bomb: ``RangeFetcher`` reports its offsets as a ``DataLoss`` whose reason
names the batch and what is wrong); the read then goes on after it.

An unreachable cluster (the client's ``BrokerUnreachableError``) is raised naming the
source's option, without the client's frames: ``no broker of 127.0.0.1:1 reachable
(connection refused); waited 60000 ms (kafka.default.api.timeout.ms)``.

Thread-safety: one reader per task; ``NetworkOffsetReader`` belongs to the planning
thread. Each holds one ``ConsumerNetworkClient`` (not thread-safe), closed by ``close``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from ..errors import TopicPartition, report_data_loss

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["NetworkOffsetReader", "NetworkRangeReader", "NETWORK_PARTITION_FETCH_BYTES"]

NETWORK_PARTITION_FETCH_BYTES = 8 * 1024 * 1024


@contextlib.contextmanager
def _option_names() -> Iterator[None]:
    """A ``BrokerUnreachableError`` names the source's option (``kafka.`` + the client's key)."""
    from broker.client.errors import BrokerUnreachableError

    try:
        yield
    except BrokerUnreachableError as e:
        raise e.renamed(f"kafka.{e.config}" if "." in e.config else e.config) from None


def _consumer_config(kafka_params: Mapping[str, str]) -> dict[str, str]:
    config = dict(kafka_params)
    config.setdefault("max.partition.fetch.bytes", str(NETWORK_PARTITION_FETCH_BYTES))
    config.setdefault("client.id", "kafkalog-spark")
    return config


class NetworkOffsetReader:
    """Planning's view of a Kafka cluster (``planning.OffsetReader``)."""

    def __init__(self, bootstrap_servers: str, kafka_params: Mapping[str, str]) -> None:
        from broker.client.consumer.client import ConsumerNetworkClient

        self.bootstrap_servers = bootstrap_servers
        self._client = ConsumerNetworkClient(_consumer_config(kafka_params))
        self._isolation = kafka_params.get("isolation.level")

    @property
    def client(self):
        """The ``ConsumerNetworkClient`` it asks (stitched mode's ListOffsets -4)."""
        return self._client

    def describe(self) -> str:
        return f"the Kafka cluster at {self.bootstrap_servers}"

    def topic_partitions(self, topics: Iterable[str] | None = None) -> list[TopicPartition]:
        from broker.client.consumer.offsets import list_topics, partitions_for

        if topics is not None:
            # named topics are asked for by name: one the principal may not describe raises
            # TOPIC_AUTHORIZATION_FAILED (as Spark's Kafka source fails), a missing one is left out
            with _option_names():
                found = partitions_for(self._client, topics)
            return sorted((t, p.partition) for t, parts in found.items() for p in parts)
        with _option_names():
            counts = list_topics(self._client, include_internal=True)
        return sorted((t, p) for t in counts for p in range(counts[t]))

    def earliest_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        from broker.client.consumer.offsets import earliest_offsets

        with _option_names():
            got = earliest_offsets(self._client, list(tps))
        return {(tp[0], tp[1]): off for tp, off in got.items()}

    def latest_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        from broker.client.consumer.offsets import latest_offsets

        with _option_names():
            got = latest_offsets(self._client, list(tps), isolation_level=self._isolation)
        return {(tp[0], tp[1]): off for tp, off in got.items()}

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        from broker.client.consumer.offsets import offsets_for_times

        with _option_names():
            got = offsets_for_times(self._client, dict(timestamps), isolation_level=self._isolation)
        return {(tp[0], tp[1]): (None if found is None else found.offset) for tp, found in got.items()}

    def commit_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit ``offsets`` to ``group_id`` as a simple consumer (generation -1)."""
        from broker.client.consumer.group_offsets import commit_offsets

        commit_offsets(self._client, group_id, dict(offsets))

    def close(self) -> None:
        self._client.close()


class NetworkRangeReader:
    """Fetches offset ranges of partitions (``readers.RangeReader``)."""

    def __init__(self, kafka_params: Mapping[str, str], *, include_headers: bool,
                 max_bytes_per_batch: int, fail_on_data_loss: bool) -> None:
        self.kafka_params = dict(kafka_params)
        self.include_headers = include_headers
        self.max_bytes_per_batch = max_bytes_per_batch
        self.fail_on_data_loss = fail_on_data_loss

    def read(self, topic: str, partition: int, start: int, end: int) -> Iterator[pa.RecordBatch]:
        from broker.client.consumer.fetcher import RangeFetcher

        tp = (topic, partition)
        fail = self.fail_on_data_loss

        def on_data_loss(loss) -> None:
            report_data_loss(tp, loss.start, loss.end, loss.reason, fail)

        with _option_names(), RangeFetcher(_consumer_config(self.kafka_params),
                          include_headers=self.include_headers,
                          max_bytes_per_batch=self.max_bytes_per_batch,
                          on_data_loss=on_data_loss) as fetcher:
            yield from fetcher.fetch(topic, partition, start, end)
