"""A coordinator's internal topic: its definition in the broker config, its creation on
demand, and the partition a key belongs to.

Owns:

* the names of Kafka's internal topics (Kafka's ``Topic.GROUP_METADATA_TOPIC_NAME`` /
  ``TRANSACTION_STATE_TOPIC_NAME`` / ``SHARE_GROUP_STATE_TOPIC_NAME``) and ``INTERNAL_TOPICS``, the ones clients may not
  produce to, delete records of or recreate (``is_internal`` in Metadata);
* ``InternalTopicSpec``: what a coordinator's topic is, as Kafka's keys and defaults: the
  partition count key (or one partition, for a store such as the Schema Registry's
  ``_schemas``), the replication factor key (a single node keeps one replica: a larger
  value is logged and ignored), the ``segment.bytes`` key, the ``min.insync.replicas`` key,
  the load buffer key, the codec of the records the coordinator writes, and the fixed
  topic configs (``cleanup.policy``, ``compression.type``, ...). ``settings(config)`` reads
  them into an ``InternalTopicSettings`` (values, and the topic configs the topic is
  created with);
* ``InternalTopic``: the topic at run time over the broker's ``TopicManager``. Its
  partition count is the configured one until ``resolve()`` finds the topic already
  created, whose own count is then kept, as Kafka does, so that a changed setting never
  moves a key; ``ensure()`` creates it with the settings' configs when missing (a
  concurrent creation wins quietly); ``partition_for(key)`` is Kafka's
  ``Utils.abs(key.hashCode) % partitions`` over Java's ``String.hashCode`` (UTF-16 code
  units, int32 arithmetic; ``abs(Integer.MIN_VALUE)`` is 0), so a group or a transactional
  id lands on the partition Kafka would put it on, and a log written by Kafka loads here.

``TopicSource`` is what ``InternalTopic`` needs of the ``TopicManager``
(``broker.server.metadata``, which the runtime may not import: the coordinators' layer sits
below the broker that wires them), as a ``typing.Protocol``: ``get(name)``, a
``TopicDescription`` (the ``TopicInfo``) or None; ``create_topic(name, partitions,
configs)``; ``get_log(topic, partition)``, the partition's ``UnifiedLog`` or None.

Invariants: ``partition_for`` is pure and stable; the partition count changes only in
``resolve()`` (startup, before any request).

Thread-safety: ``ensure()`` serialises creations under its own lock; the rest reads
immutable values or the thread-safe ``TopicManager``.
"""

from __future__ import annotations

import logging
import struct
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from broker.protocol import ErrorCode
from broker.record.limits import INT32_MIN
from broker.server.errors import ApiError

if TYPE_CHECKING:  # pragma: no cover
    from broker.log.unified_log import UnifiedLog

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"  # Kafka's GROUP_METADATA_TOPIC_NAME
TRANSACTION_STATE_TOPIC = "__transaction_state"  # Kafka's TRANSACTION_STATE_TOPIC_NAME
SHARE_GROUP_STATE_TOPIC = "__share_group_state"  # Kafka's SHARE_GROUP_STATE_TOPIC_NAME
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_GROUP_STATE_TOPIC})

def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode()``: 31*h + c over the UTF-16 code units, int32 arithmetic."""
    data = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for unit in struct.unpack(f">{len(data) // 2}H", data):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(key.hashCode) % partitions`` (abs(MIN_VALUE) is 0)."""
    h = java_string_hash(key)
    return (0 if h == INT32_MIN else abs(h)) % num_partitions


class TopicDescription(Protocol):
    """A topic as the ``TopicManager`` describes it (its ``TopicInfo``): what the runtime reads."""

    @property
    def name(self) -> str: ...

    @property
    def partitions(self) -> int: ...


class TopicSource(Protocol):
    """The broker's topics as an ``InternalTopic`` uses them (module docstring)."""

    def get(self, name: str) -> TopicDescription | None: ...

    def create_topic(self, name: str, num_partitions: int, configs: Mapping[str, str]) -> TopicDescription: ...

    def get_log(self, topic: str, partition: int) -> UnifiedLog | None: ...


@dataclass(frozen=True)
class InternalTopicSettings:
    """An ``InternalTopicSpec`` read from one broker config."""

    name: str
    partitions: int
    replication_factor: int
    segment_bytes: int
    load_buffer_size: int
    compression_codec: int
    topic_configs: Mapping[str, str]


@dataclass(frozen=True)
class InternalTopicSpec:
    """A coordinator's topic in Kafka's keys (module docstring). A key left None takes its
    default without a config key (``partitions_key`` None: always ``default_partitions``)."""

    name: str
    partitions_key: str | None
    replication_key: str | None
    segment_bytes_key: str | None
    load_buffer_key: str | None
    default_partitions: int = 50
    default_replication: int = 1
    default_segment_bytes: int = 104857600
    default_load_buffer: int = 5242880
    compression_codec_key: str | None = None  # the codec of the records written; None: uncompressed
    min_isr_key: str | None = None  # min.insync.replicas of the topic, when the coordinator sets it
    default_min_isr: int = 1
    configs: tuple[tuple[str, str], ...] = (("cleanup.policy", "compact"),)  # fixed topic configs

    def settings(self, config: Mapping[str, Any]) -> InternalTopicSettings:
        def read(key: str | None, default: int) -> int:
            return default if key is None else int(config.get(key, default))

        segment_bytes = read(self.segment_bytes_key, self.default_segment_bytes)
        topic_configs = dict(self.configs)
        topic_configs["segment.bytes"] = str(segment_bytes)
        if self.min_isr_key is not None:
            topic_configs["min.insync.replicas"] = str(read(self.min_isr_key, self.default_min_isr))
        replication = read(self.replication_key, self.default_replication)
        if replication > 1:
            log.warning("%s=%d: a single node keeps one replica of %s", self.replication_key, replication,
                        self.name)
        return InternalTopicSettings(
            name=self.name, partitions=read(self.partitions_key, self.default_partitions),
            replication_factor=replication, segment_bytes=segment_bytes,
            load_buffer_size=read(self.load_buffer_key, self.default_load_buffer),
            compression_codec=read(self.compression_codec_key, 0), topic_configs=topic_configs)


class InternalTopic:
    """The topic of ``settings`` over ``topics`` (the broker's ``TopicManager``)."""

    def __init__(self, topics: TopicSource, settings: InternalTopicSettings) -> None:
        self.topics = topics
        self.settings = settings
        self.name = settings.name
        self.num_partitions = settings.partitions
        self._create_lock = threading.Lock()

    def resolve(self) -> TopicDescription | None:
        """At startup: the existing topic's ``TopicInfo`` (its partition count is kept from
        now on), or None when the topic does not exist yet."""
        info = self.topics.get(self.name)
        if info is not None and info.partitions != self.num_partitions:
            log.info("%s has %d partitions (configured: %d): using %d", self.name, info.partitions,
                     self.settings.partitions, info.partitions)
            self.num_partitions = info.partitions
        return info

    def exists(self) -> bool:
        return self.topics.get(self.name) is not None

    def ensure(self) -> TopicDescription:
        """The topic's ``TopicInfo``, created with the settings' configs if missing."""
        info = self.topics.get(self.name)
        if info is not None:
            return info
        with self._create_lock:
            info = self.topics.get(self.name)
            if info is not None:
                return info
            try:
                info = self.topics.create_topic(self.name, self.num_partitions, dict(self.settings.topic_configs))
                log.info("created %s with %d partitions", self.name, self.num_partitions)
                return info
            except ApiError as exc:
                if exc.code == ErrorCode.TOPIC_ALREADY_EXISTS:  # a concurrent creation won
                    existing = self.topics.get(self.name)
                    if existing is not None:
                        return existing
                raise

    def partition_for(self, key: str) -> int:
        return partition_for(key, self.num_partitions)

    def get_log(self, partition: int) -> UnifiedLog | None:
        """The partition's ``UnifiedLog``, or None."""
        return self.topics.get_log(self.name, partition)

    def partition_name(self, partition: int) -> str:
        return f"{self.name}-{partition}"


__all__ = ["INTERNAL_TOPICS", "InternalTopic", "InternalTopicSettings", "InternalTopicSpec", "OFFSETS_TOPIC",
           "SHARE_GROUP_STATE_TOPIC", "TRANSACTION_STATE_TOPIC", "TopicDescription", "TopicSource",
           "java_string_hash", "partition_for"]
