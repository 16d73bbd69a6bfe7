"""Column-wise paths between record batches and Arrow: the Spark reader's and writer's codec.

Owns: the public API of ``decode.py`` (log entries -> ``pyarrow.RecordBatch``es) and
``encode.py`` (Arrow columns -> v2 batches), loaded on first use (so ``_vec.py``, the
vectorised varints, and ``_walk.py``, the walk of the records' lengths, both of which the
log cleaner uses too, import numpy only). Neither path creates a Python object per record
on its hot path (legacy magic 0/1 entries, rare and old, are read record by record
through ``legacy.py``).

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

from __future__ import annotations

import importlib

# name -> the module defining it; imported on first use (PEP 562), so that the numpy-only
# ``_vec`` and ``_walk`` (the log cleaner's record walk) can be imported without pyarrow.
_EXPORTS = {
    "DEFAULT_MAX_BYTES_PER_BATCH": "decode",
    "DEFAULT_MAX_ROWS_PER_BATCH": "decode",
    "HEADERS_TYPE": "decode",
    "DecodeProgress": "decode",
    "arrow_schema": "decode",
    "decode_to_arrow": "decode",
    "iter_arrow": "decode",
    "DEFAULT_MAX_BATCH_BYTES": "encode",
    "EncodedBatch": "encode",
    "encode_from_arrow": "encode",
    "stamp_producer_fields": "encode",
}

__all__ = sorted(_EXPORTS, key=str.lower)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
