"""The read modes behind one interface, and the choice between them.

Owns: ``RangeReader`` (what an executor task needs: the decoded rows of one offset range
of one partition), the factories that pick the mode from the options: direct mode
(``direct.py``: ``path`` / ``paths`` set, the executors read the log directory's segment files),
network mode (``network.py``: ``kafka.bootstrap.servers`` set, fetches from the brokers
with the client core) or stitched mode (``stitched.py``: both set, the offsets the brokers
keep only in remote storage read from ``path``, the rest fetched), and ``read_range``, an
input partition's rows whatever the mode. Planning talks to a ``planning.OffsetReader``,
tasks to a ``RangeReader``; neither knows the mode.

Contract of a ``RangeReader.read(topic, partition, start, end)``: the records with
offsets in [start, end), in offset order, as RecordBatches of
``broker.record.columnar.arrow_schema(include_headers)``; never a control record nor a
record of an aborted transaction; offsets missing at read time, and the offsets of a
batch that cannot be read (``broker.record.errors.CorruptBatchError``: bad CRC, records
or compressed payload), are reported through ``errors.report_data_loss`` (error or
warning per failOnDataLoss; the read goes on after the bad batch); memory bounded by
the options' byte budget. Nothing an executor runs imports ``planning`` (driver-only).

Thread-safety: the factories are pure; readers are per task.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

from ..options import ReadOptions

if TYPE_CHECKING:
    import pyarrow as pa

    from ..planning import OffsetRange, OffsetReader

__all__ = ["RangeReader", "open_offset_reader", "open_range_reader", "range_pieces", "read_range",
           "brief_cluster_errors"]

_F = TypeVar("_F", bound=Callable)


class RangeReader(Protocol):
    def read(self, topic: str, partition: int, start: int, end: int) -> Iterator[pa.RecordBatch]:
        ...


def open_offset_reader(options: ReadOptions) -> OffsetReader:
    """The driver-side view of the partitions and their offsets for ``options``' mode."""
    if options.mode == "direct":
        from .direct import DirectOffsetReader
        return DirectOffsetReader(options.paths, options.storage_options,
                                  read_committed=options.kafka_params.get("isolation.level") == "read_committed")
    if options.mode == "stitched":
        from .stitched import StitchedOffsetReader
        return StitchedOffsetReader(options)
    from .network import NetworkOffsetReader
    return NetworkOffsetReader(options.brokers, options.kafka_params)


def brief_cluster_errors(method: _F) -> _F:
    """For the driver's planning calls (``partitions``, ``initialOffset``, ...): an
    unreachable cluster (``BrokerUnreachableError``, which names the source's option) or a
    TLS / SASL failure is raised again with one frame, this one, instead of the client's
    calls: pyspark prints the traceback of a planning error inside its own message. The same
    for a typed read's Schema Registry (unreachable, or refusing) and its option errors, met
    when each batch's schemas are loaded."""

    @functools.wraps(method)
    def planning(*args, **kwargs):
        from broker.client.errors import AuthenticationError, BrokerUnreachableError
        from broker.client.registry import SchemaRegistryError, SchemaRegistryUnreachableError

        from ..options import KafkaLogOptionError

        try:
            return method(*args, **kwargs)
        except (BrokerUnreachableError, AuthenticationError, SchemaRegistryUnreachableError, SchemaRegistryError,
                KafkaLogOptionError) as error:
            raise error.with_traceback(None) from None

    return planning  # type: ignore[return-value]


def range_pieces(options: ReadOptions, reader: OffsetReader, ranges: Sequence[OffsetRange]
                 ) -> Sequence[tuple | None]:
    """Stitched mode: where each planned range is read (``stitched.stitch``'s pieces);
    other modes: None for each (the mode's one reader)."""
    if options.mode != "stitched":
        return [None] * len(ranges)
    from .stitched import StitchedOffsetReader
    if not isinstance(reader, StitchedOffsetReader):  # open_offset_reader's, in stitched mode
        raise TypeError(f"stitched mode plans with a StitchedOffsetReader, not {type(reader).__name__}")
    return reader.pieces(ranges)


def read_range(options: ReadOptions, topic: str, partition: int, start: int, end: int,
               pieces: Sequence[tuple] | None = None) -> Iterator[pa.RecordBatch]:
    """The rows of one input partition: [start, end) through the mode's reader, or, in
    stitched mode, each of its ``pieces`` from its source."""
    if pieces is not None:
        from .stitched import read_pieces
        return read_pieces(options, topic, partition, pieces)
    return open_range_reader(options).read(topic, partition, start, end)


def open_range_reader(options: ReadOptions, source: str | None = None) -> RangeReader:
    """The executor-side reader of offset ranges for ``options``' mode (stitched mode:
    ``source`` ``"store"`` reads ``paths`` as direct mode does, ``"brokers"`` fetches)."""
    if options.mode == "direct" or (options.mode == "stitched" and source == "store"):
        from .direct import DirectRangeReader
        return DirectRangeReader(options.paths, include_headers=options.include_headers,
                                 max_bytes_per_batch=options.max_bytes_per_batch,
                                 fail_on_data_loss=options.fail_on_data_loss,
                                 storage_config=options.storage_options)
    from .network import NetworkRangeReader
    return NetworkRangeReader(options.kafka_params, include_headers=options.include_headers,
                              max_bytes_per_batch=options.max_bytes_per_batch,
                              fail_on_data_loss=options.fail_on_data_loss)
