"""Dead-letter topics of share groups (Kafka 4.4, KIP-1191): a record a share group
archives undelivered (a consumer REJECTed it, or it reached the delivery count limit) is
written to the group's ``errors.deadletterqueue.topic.name`` when the group sets one.

Owns ``DeadLetterWriter.write(group, topic, partition, log, dead, dlq_topic, copy)``:

* the records of the ``dead`` ranges ((first offset, last offset, delivery count, reason))
  are read back from the partition's log (whole batches; offsets of the ranges that hold
  no record, such as compacted ones, are skipped);
* one record per archived record is appended (one batch per call, as the broker appends
  its own records: leader epoch, ``AppendOrigin.COORDINATOR``) to the dead-letter topic's
  partition ``partition % partitions``, so that one source partition keeps its order. The
  topic is created with the broker's defaults when it does not exist (as auto-creation
  would);
* with ``errors.deadletterqueue.copy.record.enable`` the record's key, value and headers
  are copied; without it key and value are null. Context headers follow Kafka Connect's
  dead-letter convention under the ``__dlq.errors.`` prefix: ``topic``, ``partition``,
  ``offset``, ``group.id``, ``delivery.count`` and ``disposition`` (REJECTED or
  MAX_DELIVERY_ATTEMPTS_REACHED), values as UTF-8 text.

A write that fails is logged and dropped: the records stay archived (a dead-letter topic
is a copy for inspection, never the only home of a record: the source log keeps it).

Thread-safety: stateless apart from the topic manager, which is thread-safe; appends are
serialised by the log.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from broker.log.unified_log import HIGH_WATERMARK
from broker.log.validator import AppendOrigin
from broker.record.batch import decode_batch, encode_batch

log = logging.getLogger(__name__)

HEADER_PREFIX = "__dlq.errors."
READ_BYTES = 1 << 20


class DeadLetterWriter:
    """See the module docstring. ``topics``: the broker's ``TopicManager``;
    ``leader_epoch(log)``: a log's leader epoch; ``notify(tp)``: wakes fetches."""

    def __init__(self, topics: Any, leader_epoch: Callable[[Any], int],
                 notify: Callable[[tuple[str, int]], None] | None = None) -> None:
        self.topics = topics
        self.leader_epoch = leader_epoch
        self.notify = notify or (lambda tp: None)

    def write(self, group_id: str, topic: str, partition: int, lg: Any, dead: list[tuple[int, int, int, str]],
              dlq_topic: str, copy: bool) -> int:
        """Append the dead-letter records of ``dead``; how many were written."""
        if not dead or not dlq_topic:
            return 0
        try:
            wanted = {}
            for first, last, count, reason in dead:
                for o in range(first, last + 1):
                    wanted[o] = (count, reason)
            records = []
            for rec in self._read(lg, min(wanted), max(wanted)):
                if rec.offset not in wanted:
                    continue
                count, reason = wanted[rec.offset]
                headers = [*(rec.headers if copy else ()),
                           (HEADER_PREFIX + "topic", topic.encode()),
                           (HEADER_PREFIX + "partition", str(partition).encode()),
                           (HEADER_PREFIX + "offset", str(rec.offset).encode()),
                           (HEADER_PREFIX + "group.id", group_id.encode()),
                           (HEADER_PREFIX + "delivery.count", str(count).encode()),
                           (HEADER_PREFIX + "disposition", reason.encode())]
                records.append((rec.key if copy else None, rec.value if copy else None, rec.timestamp, headers))
            if not records:
                return 0
            info = self.topics.get(dlq_topic) or self.topics.auto_create(dlq_topic)
            target = partition % max(info.partitions, 1)
            out = self.topics.get_log(dlq_topic, target)
            if out is None:
                raise RuntimeError(f"{dlq_topic}-{target} has no log")
            out.append_as_leader(encode_batch(records), leader_epoch=self.leader_epoch(out),
                                 origin=AppendOrigin.COORDINATOR)
            self.notify((dlq_topic, target))
            return len(records)
        except Exception:  # noqa: BLE001 - the records stay archived; the copy is best effort
            log.exception("share group %s: writing %d archived records of %s-%d to the dead-letter topic %s "
                          "failed", group_id, sum(b - a + 1 for a, b, _, _ in dead), topic, partition, dlq_topic)
            return 0

    @staticmethod
    def _read(lg: Any, first: int, last: int):
        """The records of [first, last] (whole batches from the one holding ``first``)."""
        offset = max(first, lg.log_start_offset)
        while offset <= last:
            info = lg.read(offset, READ_BYTES, HIGH_WATERMARK, True)
            data = info.records.read_bytes() if hasattr(info.records, "read_bytes") else bytes(info.records)
            moved = False
            for pos, header in info.records.batches():
                _h, recs = decode_batch(data, pos)
                if not header.attributes & 0x20:  # control batches carry no dead letters
                    yield from (r for r in recs if first <= r.offset <= last)
                offset = max(offset, header.next_offset)
                moved = True
            if not moved:
                return


__all__ = ["HEADER_PREFIX", "DeadLetterWriter"]
