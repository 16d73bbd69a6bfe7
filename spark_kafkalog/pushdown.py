"""Filter pushdown: the filters the ``kafkalog`` source takes over from Spark.

Owns: ``PushedFilters``, the constraints of the filters a pushdown reader accepts
(``readers.batch.KafkaLogPushdownReader.pushFilters``) on the columns ``topic``,
``partition``, ``offset`` and ``timestamp``: allowed and excluded topics, a partition set
and interval, an offset interval [offset_lo, offset_hi) plus an optional offset set, a
timestamp interval [ts_lo, ts_hi) in microseconds (Spark's TimestampType) plus an
optional set, and ``nothing`` for a contradiction (``IS NULL`` on a never-null column).

How they are used: on the driver, ``planning.plan_ranges`` narrows the ranges with
``allows`` (drop partitions), ``offset_bounds`` (cut each range) and
``timestamp_floor_ms`` (move each start to the first offset with a timestamp at or above
it, through the reader's time index); on the executors, ``row_mask`` keeps exactly the
rows of a decoded batch that the offset and timestamp filters want (``needs_row_filter``
says whether any such filter was taken).

What is accepted: ``IsNotNull`` / ``IsNull``; ``EqualTo``, ``EqualNullSafe`` and ``In`` on
every one of the four columns (``Not`` of them on topic and partition); the bounds
``>``, ``>=``, ``<``, ``<=`` on partition, offset and timestamp (never on topic: string
order is the column's collation, left to Spark). A filter whose literal has another type
(an offset compared with a string, a timestamp with something not a datetime) is left to
Spark; a naive datetime is taken as UTC, as pyspark converts TimestampType literals.

Invariants: every filter ``accept`` returns True for is applied exactly, by the narrowing
or by ``row_mask`` (so Spark may drop it); ``accept`` only ever tightens the constraints
(intersections, max of lower bounds, min of upper bounds), so the order the filters come
in does not matter; ``accepted`` lists the accepted filters in order. Importing this module
is cheap: Spark's filter classes are imported by ``accept`` (driver), numpy by
``row_mask`` (executors).

Thread-safety: a ``PushedFilters`` is mutated only while filters are pushed, on the
planning worker, then only read (it travels to the tasks pickled with the reader).
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.record.limits import INT64_MAX

from .errors import TopicPartition

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["PushedFilters"]


def _micros(value) -> int | None:
    """Microseconds since the epoch of a pushed timestamp literal (a datetime; a naive one
    is taken as UTC, as pyspark converts TimestampType literals)."""
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.UTC)
        delta = value - _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return None


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass
class PushedFilters:
    """The filters the source took over (``accept``), as constraints: allowed topics and
    partitions, an offset interval [offset_lo, offset_hi) plus an optional offset set,
    and a timestamp interval [ts_lo, ts_hi) in microseconds plus an optional set."""

    topics: frozenset[str] | None = None
    excluded_topics: frozenset[str] = frozenset()
    partitions: frozenset[int] | None = None
    excluded_partitions: frozenset[int] = frozenset()
    partition_lo: int = 0
    partition_hi: int = INT64_MAX
    offset_lo: int = 0
    offset_hi: int = INT64_MAX
    offset_in: frozenset[int] | None = None
    ts_lo: int | None = None     # microseconds, inclusive
    ts_hi: int | None = None     # microseconds, exclusive
    ts_in: frozenset[int] | None = None
    nothing: bool = False        # a contradiction (e.g. partition IS NULL): no rows
    accepted: list = field(default_factory=list)

    # -- accepting --

    def accept(self, flt) -> bool:
        """Take over ``flt`` (a ``pyspark.sql.datasource.Filter``) if it constrains
        topic, partition, offset or timestamp in a way applied exactly; False leaves it to
        Spark."""
        from pyspark.sql.datasource import (
            EqualNullSafe,
            EqualTo,
            GreaterThan,
            GreaterThanOrEqual,
            In,
            IsNotNull,
            IsNull,
            LessThan,
            LessThanOrEqual,
            Not,
        )
        negated = isinstance(flt, Not)
        inner = flt.child if negated else flt
        attr = getattr(inner, "attribute", None)
        if not isinstance(attr, tuple) or len(attr) != 1:
            return False
        column = attr[0]
        if column not in ("topic", "partition", "offset", "timestamp"):
            return False
        if isinstance(inner, IsNotNull) and not negated:
            self.accepted.append(flt)
            return True  # these columns are never null
        if isinstance(inner, IsNull) and not negated:
            self.nothing = True
            self.accepted.append(flt)
            return True
        equal = isinstance(inner, (EqualTo, EqualNullSafe))
        if isinstance(inner, In) or equal:
            values = tuple(inner.value) if isinstance(inner, In) else (inner.value,)
            ok = self._accept_set(column, values, negated)
        elif negated:
            return False
        elif isinstance(inner, (GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)):
            lower = isinstance(inner, (GreaterThan, GreaterThanOrEqual))
            strict = isinstance(inner, (GreaterThan, LessThan))
            ok = self._accept_bound(column, inner.value, lower, strict)
        else:
            return False
        if ok:
            self.accepted.append(flt)
        return ok

    def _accept_set(self, column: str, values: tuple, negated: bool) -> bool:
        if column == "topic":
            if not all(isinstance(v, str) for v in values):
                return False
            if negated:
                self.excluded_topics |= frozenset(values)
            else:
                self.topics = frozenset(values) if self.topics is None else self.topics & frozenset(values)
            return True
        if column in ("partition", "offset"):
            if not all(_is_int(v) for v in values):
                return False
            if negated and column == "partition":
                self.excluded_partitions |= frozenset(values)
                return True
            if negated:
                return False
            current = self.partitions if column == "partition" else self.offset_in
            chosen = frozenset(values) if current is None else current & frozenset(values)
            if column == "partition":
                self.partitions = chosen
            else:
                self.offset_in = chosen
            return True
        # timestamp
        if negated:
            return False
        micros = [_micros(v) for v in values]
        if any(m is None for m in micros):
            return False
        chosen = frozenset(micros)
        self.ts_in = chosen if self.ts_in is None else self.ts_in & chosen
        return True

    def _accept_bound(self, column: str, value, lower: bool, strict: bool) -> bool:
        if column == "topic":
            return False  # string order follows the column's collation: leave it to Spark
        if column == "timestamp":
            v = _micros(value)
            if v is None:
                return False
            if lower:
                lo = v + 1 if strict else v
                self.ts_lo = lo if self.ts_lo is None else max(self.ts_lo, lo)
            else:
                hi = v if strict else v + 1
                self.ts_hi = hi if self.ts_hi is None else min(self.ts_hi, hi)
            return True
        if not _is_int(value):
            return False
        if lower:
            lo = value + 1 if strict else value
            if column == "partition":
                self.partition_lo = max(self.partition_lo, lo)
            else:
                self.offset_lo = max(self.offset_lo, lo)
        else:
            hi = value if strict else value + 1
            if column == "partition":
                self.partition_hi = min(self.partition_hi, hi)
            else:
                self.offset_hi = min(self.offset_hi, hi)
        return True

    # -- using --

    def allows(self, tp: TopicPartition) -> bool:
        topic, partition = tp
        if self.nothing:
            return False
        if self.topics is not None and topic not in self.topics or topic in self.excluded_topics:
            return False
        if self.partitions is not None and partition not in self.partitions:
            return False
        return partition not in self.excluded_partitions and self.partition_lo <= partition < self.partition_hi

    def offset_bounds(self) -> tuple[int, int]:
        """[lo, hi) that every wanted offset is in (the offset set included)."""
        lo, hi = self.offset_lo, self.offset_hi
        if self.offset_in is not None:
            if not self.offset_in:
                return 0, 0
            lo, hi = max(lo, min(self.offset_in)), min(hi, max(self.offset_in) + 1)
        return lo, hi

    def timestamp_floor_ms(self) -> int | None:
        """The smallest record timestamp (ms) a wanted row may have, if bounded."""
        lows = []
        if self.ts_lo is not None:
            lows.append(-(-self.ts_lo // 1000))  # ceil: ts_ms * 1000 >= ts_lo
        if self.ts_in is not None and self.ts_in:
            lows.append(-(-min(self.ts_in) // 1000))
        return max(lows) if lows else None

    @property
    def needs_row_filter(self) -> bool:
        return self.offset_in is not None or self.ts_lo is not None or self.ts_hi is not None \
            or self.ts_in is not None

    def row_mask(self, decoded: pa.RecordBatch):
        """A boolean mask over a decoded batch (``broker.record.columnar`` schema) of the
        rows every accepted offset and timestamp filter keeps (ranges were already cut)."""
        import numpy as np
        offsets = decoded.column(0).to_numpy()
        mask = np.ones(len(offsets), dtype=bool)
        if self.offset_in is not None:
            mask &= np.isin(offsets, np.fromiter(self.offset_in, np.int64, len(self.offset_in)))
        if self.ts_lo is not None or self.ts_hi is not None or self.ts_in is not None:
            micros = decoded.column(1).to_numpy() * 1000
            if self.ts_lo is not None:
                mask &= micros >= self.ts_lo
            if self.ts_hi is not None:
                mask &= micros < self.ts_hi
            if self.ts_in is not None:
                mask &= np.isin(micros, np.fromiter(self.ts_in, np.int64, len(self.ts_in)))
        return mask
