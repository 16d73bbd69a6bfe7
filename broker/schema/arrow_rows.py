"""Python rows to one Arrow array, a row that does not fit the type set aside as bad.

Owns ``DecodeResult`` (what a per-record decoder hands back: the array, a boolean mask of
bad rows, and why each is bad), ``UnfitValueError`` (a value of another kind than the
reader's type) and ``rows_to_array``, the last step of the Protobuf and
JSON decoders (``protobuf_arrow``, ``json_arrow``): their records are parsed one by one
into Python values, then built into Arrow in one call. When that call fails (a value out
of the type's range: an integer above int64, a map with a null key), the rows are tried
one at a time, the ones that fail become null and bad, and the array is built from the
others: one bad record never costs the batch.

Invariants: ``rows_to_array(rows, t, ...)`` returns an array of type ``t`` and length
``len(rows)``; a row that is None is null and never marked bad. Sans-IO; pyarrow and numpy.

Thread-safety: pure functions (``rows``, ``bad`` and ``errors`` are the caller's and are
updated in place).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

_BUILD_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError, TypeError,
                 ValueError)


class UnfitValueError(ValueError):
    """A decoded value that does not fit the reader's type (a string for a number, a map
    read as a list): the decoders' reason for a bad row."""


@dataclass
class DecodeResult:
    """``array`` (the reader's type; bad and null rows null), ``bad`` (True where a record
    could not be decoded) and ``errors`` (row index -> why)."""

    array: pa.Array
    bad: np.ndarray
    errors: dict[int, str] = field(default_factory=dict)


def rows_to_array(rows: list[Any], typ: pa.DataType, bad: np.ndarray, errors: dict[int, str]) -> pa.Array:
    """``pa.array(rows, type=typ)``; rows that do not fit are set to None, marked in ``bad``
    and explained in ``errors`` (module docstring)."""
    try:
        return pa.array(rows, type=typ)
    except _BUILD_ERRORS:
        pass
    for i, row in enumerate(rows):
        if row is None:
            continue
        try:
            pa.array([row], type=typ)
        except _BUILD_ERRORS as exc:
            rows[i] = None
            bad[i] = True
            errors[i] = f"a value does not fit the reader's type: {exc}"
    return pa.array(rows, type=typ)


__all__ = ["DecodeResult", "UnfitValueError", "rows_to_array"]
