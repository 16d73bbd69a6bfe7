"""Resetting a consumer group's offsets: the targets Kafka's ``kafka-consumer-groups.sh
--reset-offsets`` computes (its ``GroupOffsetsResetter``), for ``AdminClient`` and the
``kafkalog groups`` command.

Owns::

    OffsetResetSpec.to_earliest() / .to_latest() / .to_datetime(ms | datetime | text)
                   .shift_by(n) / .to_offset(n) / .to_current()
    parse_datetime("YYYY-MM-DDTHH:mm:SS.sss[zone]")          -> epoch milliseconds
    parse_topic_partitions(client, ["t", "t:0,2"])            -> [TopicPartition]
    plan_offsets_reset(client, group, partitions, spec)       -> ResetPlan(offsets, warnings)

Targets, per partition (Kafka's rules):

* to-earliest: the log start offset; to-latest: the log end offset (high watermark);
* to-datetime: the first offset whose record timestamp is at or after the time
  (ListOffsets by timestamp); none (every record is older): the log end offset, with the
  warning "Partition P from topic T is empty. Falling back to latest known offset.";
* shift-by N: the committed offset + N; a partition without a committed offset is an
  error ("Cannot shift offset for partition t-0 since there is no current committed
  offset");
* to-offset N: N; shift-by and to-offset are clamped to [log start, log end], with
  Kafka's warning ("New offset (N) is higher than latest offset for topic partition t-0.
  Value will be set to E.");
* to-current: the committed offset, or the log end for a partition without one.

Every partition must exist: otherwise ``UnknownTopicOrPartitionError``-coded
``KafkaError`` 'The partitions "t-5" do not exist'. Datetimes without a zone are UTC
(Kafka's ``Utils.getDateTime`` appends "Z"); the milliseconds may be left out.

Each function takes a ``ConsumerNetworkClient`` (reused) or a config mapping (a client for
the call). Thread-safety: as the client used: one thread at a time.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Iterable
from typing import Any, NamedTuple

from broker.client.consumer.group_offsets import list_group_offsets
from broker.client.consumer.offsets import (
    TopicPartition,
    consumer_client,
    earliest_offsets,
    latest_offsets,
    offsets_for_times,
    partitions_for,
)
from broker.client.errors import KafkaError
from broker.protocol import ErrorCode

__all__ = ["OffsetResetSpec", "ResetPlan", "parse_datetime", "parse_topic_partitions", "plan_offsets_reset"]

EARLIEST, LATEST, DATETIME, SHIFT_BY, OFFSET, CURRENT = ("earliest", "latest", "datetime", "shift-by", "offset",
                                                         "current")
DATETIME_FORMAT = "YYYY-MM-DDTHH:mm:SS.sss"
_DATETIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,3}))?"
                       r"(Z|[+-]\d{2}(?::?\d{2})?)?")


class OffsetResetSpec(NamedTuple):
    """Where to reset: ``kind`` (earliest, latest, datetime, shift-by, offset, current) and
    its ``value`` (epoch ms, the shift, the offset)."""

    kind: str
    value: int = 0

    @classmethod
    def to_earliest(cls) -> OffsetResetSpec:
        return cls(EARLIEST)

    @classmethod
    def to_latest(cls) -> OffsetResetSpec:
        return cls(LATEST)

    @classmethod
    def to_current(cls) -> OffsetResetSpec:
        return cls(CURRENT)

    @classmethod
    def to_datetime(cls, when: int | str | _dt.datetime) -> OffsetResetSpec:
        """Epoch milliseconds, a ``datetime`` (naive: UTC) or Kafka's text format."""
        if isinstance(when, _dt.datetime):
            if when.tzinfo is None:
                when = when.replace(tzinfo=_dt.UTC)
            ms = round(when.timestamp() * 1000)
        elif isinstance(when, str):
            ms = parse_datetime(when)
        else:
            ms = _integer(when, "timestamp")
        if ms < 0:
            raise ValueError(f"timestamp {ms} is before the epoch")
        return cls(DATETIME, ms)

    @classmethod
    def shift_by(cls, n: int) -> OffsetResetSpec:
        return cls(SHIFT_BY, _integer(n, "shift"))

    @classmethod
    def to_offset(cls, offset: int) -> OffsetResetSpec:
        return cls(OFFSET, _integer(offset, "offset"))


class ResetPlan(NamedTuple):
    offsets: dict[TopicPartition, int]  # the new offset of each partition, in the order given
    warnings: tuple[str, ...] = ()  # Kafka's notes: clamped offsets, empty partitions


def _integer(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"invalid {what} {value!r}: must be an integer")
    return value


def parse_datetime(text: str) -> int:
    """Epoch milliseconds of ``YYYY-MM-DDTHH:mm:SS.sss`` (Kafka's ``--to-datetime``), with
    an optional zone (``Z``, ``+hh:mm``, ``+hhmm``, ``+hh``); no zone means UTC."""
    m = _DATETIME.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"Error parsing timestamp '{text}': expected the format {DATETIME_FORMAT}, "
                         "optionally followed by a time zone (Z, +hh:mm)")
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    millis = int((m.group(7) or "0").ljust(3, "0"))
    zone = m.group(8)
    tz = _dt.UTC
    if zone and zone != "Z":
        digits = zone[1:].replace(":", "")
        offset = _dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:4] or 0))
        tz = _dt.timezone(offset if zone[0] == "+" else -offset)
    try:
        when = _dt.datetime(year, month, day, hour, minute, second, millis * 1000, tzinfo=tz)
    except ValueError as exc:
        raise ValueError(f"Error parsing timestamp '{text}': {exc}") from None
    return round(when.timestamp() * 1000)


def parse_topic_partitions(client_or_config: Any, topics: Iterable[str], *,
                           timeout_ms: float | None = None) -> list[TopicPartition]:
    """Kafka's ``--topic`` scopes: ``t`` (every partition of t, which must exist) or
    ``t:0,2`` (those partitions), in the order given, without duplicates."""
    out: list[TopicPartition] = []
    whole: list[str] = []
    for arg in topics:
        if ":" in arg:
            topic, _, parts = arg.partition(":")
            if not topic or ":" in parts:
                raise ValueError(f"Invalid topic arg '{arg}', expected topic name and partitions")
            for p in parts.split(","):
                try:
                    out.append(TopicPartition(topic, int(p)))
                except ValueError:
                    raise ValueError(f"Invalid partition '{p}' specified in topic arg '{arg}'") from None
        elif arg:
            whole.append(arg)
        else:
            raise ValueError("Invalid topic arg '': expected a topic name")
    if whole:
        found = partitions_for(client_or_config, whole, timeout_ms=timeout_ms)
        missing = [t for t in dict.fromkeys(whole) if t not in found]
        if missing:
            text = f"Topic {missing[0]} does not exist" if len(missing) == 1 \
                else f"Topics {', '.join(missing)} do not exist"
            raise KafkaError.from_code(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, text)
        for t in dict.fromkeys(whole):
            out.extend(TopicPartition(t, p.partition) for p in found[t])
    return list(dict.fromkeys(out))


def _check_partitions_exist(client: Any, tps: list[TopicPartition], timeout_ms: float | None) -> None:
    found = partitions_for(client, {tp.topic for tp in tps}, timeout_ms=timeout_ms)
    known = {(t, p.partition) for t, ps in found.items() for p in ps}
    missing = [tp for tp in tps if (tp.topic, tp.partition) not in known]
    if missing:
        raise KafkaError.from_code(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                   f'The partitions "{",".join(map(str, missing))}" do not exist')


def plan_offsets_reset(client_or_config: Any, group_id: str, partitions: Iterable[tuple[str, int]],
                       spec: OffsetResetSpec, *, timeout_ms: float | None = None) -> ResetPlan:
    """The new offset of each partition for ``spec`` (see the module docstring); commits
    nothing."""
    tps = list(dict.fromkeys(TopicPartition(*tp) for tp in partitions))
    if not tps:
        return ResetPlan({})
    with consumer_client(client_or_config) as client:
        _check_partitions_exist(client, tps, timeout_ms)
        warnings: list[str] = []
        if spec.kind == EARLIEST:
            starts = earliest_offsets(client, tps, timeout_ms=timeout_ms)
            return ResetPlan({tp: _known(starts, tp, "starting") for tp in tps})
        if spec.kind == LATEST:
            ends = latest_offsets(client, tps, timeout_ms=timeout_ms)
            return ResetPlan({tp: _known(ends, tp, "ending") for tp in tps})
        if spec.kind == DATETIME:
            found = offsets_for_times(client, {tp: spec.value for tp in tps}, timeout_ms=timeout_ms)
            empty = [tp for tp in tps if found.get(tp) is None]
            ends = latest_offsets(client, empty, timeout_ms=timeout_ms) if empty else {}
            out = {}
            for tp in tps:
                hit = found.get(tp)
                if hit is None:
                    warnings.append(f"Partition {tp.partition} from topic {tp.topic} is empty. "
                                    "Falling back to latest known offset.")
                    out[tp] = _known(ends, tp, "ending")
                else:
                    out[tp] = hit.offset
            return ResetPlan(out, tuple(warnings))
        if spec.kind in (SHIFT_BY, CURRENT):
            committed = list_group_offsets(client, group_id, timeout_ms=timeout_ms)
            if spec.kind == CURRENT:
                lacking = [tp for tp in tps if tp not in committed]
                ends = latest_offsets(client, lacking, timeout_ms=timeout_ms) if lacking else {}
                return ResetPlan({tp: committed[tp] if tp in committed else _known(ends, tp, "ending")
                                  for tp in tps})
            for tp in tps:
                if tp not in committed:
                    raise ValueError(f"Cannot shift offset for partition {tp} since there is no current "
                                     "committed offset")
            requested = {tp: committed[tp] + spec.value for tp in tps}
        elif spec.kind == OFFSET:
            requested = {tp: spec.value for tp in tps}
        else:
            raise ValueError(f"unknown offset reset kind {spec.kind!r}")
        starts = earliest_offsets(client, tps, timeout_ms=timeout_ms)
        ends = latest_offsets(client, tps, timeout_ms=timeout_ms)
        out = {}
        for tp, offset in requested.items():
            end, start = _known(ends, tp, "ending"), _known(starts, tp, "starting")
            if offset > end:
                warnings.append(f"New offset ({offset}) is higher than latest offset for topic partition {tp}. "
                                f"Value will be set to {end}.")
                offset = end
            elif offset < start:
                warnings.append(f"New offset ({offset}) is lower than earliest offset for topic partition {tp}. "
                                f"Value will be set to {start}.")
                offset = start
            out[tp] = offset
        return ResetPlan(out, tuple(warnings))


def _known(offsets: dict[TopicPartition, int], tp: TopicPartition, what: str) -> int:
    if tp not in offsets:
        raise KafkaError(f"Error getting {what} offset of topic partition: {tp}")
    return offsets[tp]
