"""What a task of the ``kafkalog`` source reads, shared by batch, streaming and bridge reads.

Owns ``KafkaLogInputPartition`` (one offset range of one topic-partition), ``input_partitions``
(planned ranges -> input partitions, with a typed read's schemas), ``read_input_partition``
(an input partition's decoded records, whatever the mode) and ``batch_builder`` (decoded
records -> the rows Spark gets).

Thread-safety: input partitions are planned on the driver and pickled to the tasks;
nothing here is shared between tasks.
"""

from __future__ import annotations

from collections.abc import Iterator

from pyspark.sql.datasource import InputPartition

from ..options import ReadOptions

__all__ = ["KafkaLogInputPartition", "input_partitions", "read_input_partition", "batch_builder"]


class KafkaLogInputPartition(InputPartition):
    """Offsets [start, end) of ``topic``-``partition``; in stitched mode ``pieces`` says
    where each part is read (``readers.stitched.stitch``), else None; for a typed read
    ``schemas`` holds the topic's reader schemas and the catalog of writer schemas
    (``formats.registry.PartitionSchemas``), else None."""

    def __init__(self, topic: str, partition: int, start: int, end: int,
                 pieces: tuple | None = None, schemas=None) -> None:
        super().__init__((topic, partition, start, end))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end
        self.pieces = pieces
        self.schemas = schemas


def input_partitions(options: ReadOptions, reader, ranges, typed=None) -> list[InputPartition]:
    """The input partitions of planned ``ranges`` (with their stitched pieces): each a
    ``KafkaLogInputPartition``; for a typed read (``typed``: ``formats.registry.TypedRead``)
    with the schemas of its topic, loaded now."""
    from . import range_pieces

    schemas = typed.partition_schemas(r.topic for r in ranges) if typed is not None else {}
    out: list[InputPartition] = [
        KafkaLogInputPartition(r.topic, r.partition, r.start, r.end, pieces, schemas.get(r.topic))
        for r, pieces in zip(ranges, range_pieces(options, reader, ranges), strict=True)]
    return out


def read_input_partition(options: ReadOptions, partition: KafkaLogInputPartition) -> Iterator:
    """The decoded batches of one input partition, whatever the mode (with the headers too
    when a typed read may find schema ids in them)."""
    from . import read_range

    if options.formats.typed:
        from ..formats.decode import range_options

        options = range_options(options)
    return read_range(options, partition.topic, partition.partition, partition.start, partition.end,
                      getattr(partition, "pieces", None))


def batch_builder(options: ReadOptions, typed, partition: KafkaLogInputPartition):
    """What turns the partition's decoded batches into rows: ``schema.SparkBatchBuilder``,
    or ``formats.decode.TypedBatchBuilder`` for a typed read. Its ``build`` may return a
    batch without rows (DROPMALFORMED)."""
    if typed is None:
        from ..schema import SparkBatchBuilder

        return SparkBatchBuilder(partition.topic, partition.partition, options.include_headers)
    from ..formats.decode import TypedBatchBuilder

    return TypedBatchBuilder(options, typed, getattr(partition, "schemas", None), partition.topic,
                             partition.partition)
