"""Column-wise paths between record batches and Arrow: the Spark reader's and writer's codec.

Owns: the public API of ``decode.py`` (log entries -> ``pyarrow.RecordBatch``es) and
``encode.py`` (Arrow columns -> v2 batches); ``_vec.py`` holds the vectorised varints
both use, ``_walk.py`` the decoder's walk of the records' lengths. Neither path creates
a Python object per record on its hot path (legacy magic 0/1 entries, rare and old, are
read record by record through ``legacy.py``).

Decoded schema (``arrow_schema()``), one row per record, in log order::

    offset          int64
    timestamp       int64     ms; a LogAppendTime batch's maxTimestamp for all its records
    timestamp_type  int32     0 CreateTime, 1 LogAppendTime, -1 none (magic 0)
    key, value      binary    null when the record's length is -1
    headers         list<struct<key: string, value: binary>>
                              null (not empty) for a record without headers; left out
                              when ``include_headers=False``

Thread-safety: pure functions, except ``stamp_producer_fields``, which mutates the
caller's buffer.
"""

from .decode import (
    DEFAULT_MAX_BYTES_PER_BATCH,
    DEFAULT_MAX_ROWS_PER_BATCH,
    HEADERS_TYPE,
    DecodeProgress,
    arrow_schema,
    decode_to_arrow,
    iter_arrow,
)
from .encode import DEFAULT_MAX_BATCH_BYTES, EncodedBatch, encode_from_arrow, stamp_producer_fields

__all__ = [
    "DEFAULT_MAX_BATCH_BYTES",
    "DEFAULT_MAX_BYTES_PER_BATCH",
    "DEFAULT_MAX_ROWS_PER_BATCH",
    "HEADERS_TYPE",
    "DecodeProgress",
    "EncodedBatch",
    "arrow_schema",
    "decode_to_arrow",
    "encode_from_arrow",
    "iter_arrow",
    "stamp_producer_fields",
]
