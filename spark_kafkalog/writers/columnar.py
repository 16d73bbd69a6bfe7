"""The column-wise work of a ``kafkalog`` sink task on Arrow batches, before they reach
``KafkaProducer.send_arrow``: no Python object per row.

Owns:

* ``encode_typed_columns``: with ``valueFormat`` / ``keyFormat`` avro, protobuf or json, the
  ``value`` / ``key`` columns turned into Confluent-framed payloads (magic byte, schema id,
  payload) with the writer schemas resolved on the driver (``WriteOptions.encoding``, a
  ``formats.write_schema.TypedWrite``; the encoding is ``formats.encode``'s);
* ``BatchHeaders`` / ``BATCH_HEADER_KEYS``: the ``kafkalog.*`` headers of
  ``kafkalog.writeBatchHeaders=true`` (UTF-8 text values), appended after each row's own
  headers;
* ``binary_bytes``: the payload bytes of a binary or string column (the sink's byte count);
* ``runs``: the maximal runs of equal values of a boolean mask (rows with and without an
  explicit partition are sent in order-keeping runs).

Invariants: row order is kept everywhere (headers are merged row by row; runs are
contiguous and cover the mask); a column without a typed format is returned as it is.

Thread-safety: ``BatchHeaders`` holds only immutable Arrow arrays after construction;
everything else is a pure function. Each task builds its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # heavy imports stay inside functions (pyspark loads this in every worker)
    import pyarrow as pa

__all__ = ["BATCH_HEADER_KEYS", "BatchHeaders", "binary_bytes", "encode_typed_columns", "runs"]

# Keys of the headers added with kafkalog.writeBatchHeaders=true; values are UTF-8 text.
# (queryId, batchId) name the micro-batch (absent in a batch write), partition and attempt
# the Spark task, seq the row's position in the task's input (0-based).
BATCH_HEADER_KEYS = ("kafkalog.queryId", "kafkalog.batchId", "kafkalog.partition",
                     "kafkalog.attempt", "kafkalog.seq")


def binary_bytes(col: pa.Array) -> int:
    """Payload bytes of a binary/string column (offsets difference; nulls are 0)."""
    import pyarrow as pa
    if col is None or len(col) == 0 or pa.types.is_null(col.type):
        return 0
    if isinstance(col, pa.ChunkedArray):
        return sum(binary_bytes(c) for c in col.chunks)
    import numpy as np
    large = pa.types.is_large_binary(col.type) or pa.types.is_large_string(col.type)
    width = np.dtype(np.int64 if large else np.int32)
    offs = np.frombuffer(col.buffers()[1], width, count=len(col) + 1, offset=col.offset * width.itemsize)
    return int(offs[-1] - offs[0])


class BatchHeaders:
    """Builds the kafkalog.* header lists of the rows (see BATCH_HEADER_KEYS) and merges
    them after the rows' own headers, column-wise. ``info``: the task (``common.TaskInfo``:
    partition, attempt, and in a stream the batch id and query id)."""

    def __init__(self, info: Any) -> None:
        import pyarrow as pa
        keys, consts = [], []
        if info.batch_id is not None:
            keys += [BATCH_HEADER_KEYS[0], BATCH_HEADER_KEYS[1]]
            consts += [(info.query_id or "").encode(), str(info.batch_id).encode()]
        keys += [BATCH_HEADER_KEYS[2], BATCH_HEADER_KEYS[3], BATCH_HEADER_KEYS[4]]
        consts += [str(info.partition).encode(), str(info.attempt).encode()]
        self.k = len(keys)
        self.keys = pa.array(keys, pa.string())
        self.consts = pa.array(consts, pa.binary())
        self.type = pa.list_(pa.field("element", pa.struct([pa.field("key", pa.string()),
                                                             pa.field("value", pa.binary())])))

    def build(self, seq_start: int, n: int, user: pa.Array | None) -> pa.Array:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc
        k, nc = self.k, len(self.consts)
        seq = pc.cast(pa.array(np.arange(seq_start, seq_start + n, dtype=np.int64)), pa.string())
        values_pool = pa.concat_arrays([self.consts, seq.cast(pa.binary())])
        # Row i's own headers: index nc + i for seq, 0..nc-1 for the constants.
        per_row = np.empty((n, k), np.int64)
        per_row[:, :nc] = np.arange(nc)
        per_row[:, nc] = nc + np.arange(n)
        flat_vals = values_pool.take(pa.array(per_row.ravel()))
        flat_keys = self.keys.take(pa.array(np.tile(np.arange(k), n)))
        ours = pa.StructArray.from_arrays([flat_keys, flat_vals],
                                          fields=list(self.type.value_type))
        if user is None or user.null_count == len(user):
            offsets = pa.array(np.arange(0, n * k + 1, k, dtype=np.int32))
            return pa.ListArray.from_arrays(offsets, ours, type=self.type)
        # Merge: row i = its own headers (nulls: none), then ours.
        if isinstance(user, pa.ChunkedArray):
            user = user.combine_chunks()
        uoffs = user.offsets.to_numpy().astype(np.int64)
        valid = np.ones(n, bool) if user.null_count == 0 else user.is_valid().to_numpy(zero_copy_only=False)
        ulen = np.diff(uoffs) * valid
        total = ulen + k
        out_offs = np.zeros(n + 1, np.int64)
        np.cumsum(total, out=out_offs[1:])
        ufl = user.values.cast(self.type.value_type)
        idx = np.empty(int(out_offs[-1]), np.int64)
        row_of = np.repeat(np.arange(n), total)
        pos_in_row = np.arange(idx.size) - out_offs[:-1][row_of]
        is_user = pos_in_row < ulen[row_of]
        idx[is_user] = uoffs[:-1][row_of[is_user]] + pos_in_row[is_user]
        ours_pos = pos_in_row[~is_user] - ulen[row_of[~is_user]]
        idx[~is_user] = len(ufl) + row_of[~is_user] * k + ours_pos
        merged = pa.concat_arrays([ufl, ours]).take(pa.array(idx))
        return pa.ListArray.from_arrays(pa.array(out_offs.astype(np.int32)), merged, type=self.type)


def runs(mask: Any) -> list[tuple[int, int, bool]]:
    """Maximal runs [start, end) of equal values of a boolean numpy array."""
    import numpy as np
    n = mask.size
    if n == 0:
        return []
    change = np.flatnonzero(mask[1:] != mask[:-1]) + 1
    starts = np.concatenate(([0], change))
    ends = np.concatenate((change, [n]))
    return [(int(s), int(e), bool(mask[s])) for s, e in zip(starts, ends)]


def encode_typed_columns(values: pa.Array | None, keys: pa.Array | None,
                         encoding: Any) -> tuple[pa.Array | None, pa.Array | None]:
    """The ``value`` / ``key`` columns of a batch as ``encoding`` (``WriteOptions.encoding``,
    the writer schemas resolved on the driver) frames them; a column without a typed format,
    or absent, is returned as it is. Raises ``formats.encode``'s error naming the column and
    the row a writer schema cannot take."""
    from ..formats.encode import encode_column

    if encoding.value is not None and values is not None:
        values = encode_column(values, encoding.value)
    if encoding.key is not None and keys is not None:
        keys = encode_column(keys, encoding.key)
    return values, keys
