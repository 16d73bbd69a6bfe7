"""Benchmark: the column-wise Avro encoder (``broker.schema.avro_encode.encode``) next to
fastavro's ``schemaless_writer`` row by row, same bytes.

Owns: measuring rows/s of encoding an Arrow StructArray (what the Spark writer hands the
codec: int64, string, float64, timestamp[us, UTC] columns) into Avro payloads, at ~100-byte
and ~1-KiB records of ten fields (an id and a count as longs, name / city / email / a
description as strings, an amount and a score as doubles, a nullable note
``["null", "string"]``, a ``timestamp-millis`` and a status enum).

The reference is what a Python writer without this codec does: ``array.to_pylist()`` then
fastavro's ``schemaless_writer`` into a BytesIO per row (confluent-kafka's
``AvroSerializer`` does the same fastavro call per row behind its framing and registry
lookups, so fastavro directly is its floor). ``fastavro`` is the whole (to_pylist and the
writes), ``fastavro_write_only`` the writes alone over the prepared dicts. Both paths
produce the same bytes (checked before timing, Confluent's 5-byte framing as ``prefix``).

Each figure is the median of ``--runs`` runs (default 5, at least 3), with the spread
(min..max). Ends with one JSON line: rows/s of each path and size, and the ratios
``ratio_vs_fastavro_100b`` / ``ratio_vs_fastavro_1k`` (encode over fastavro's whole path)
and ``ratio_vs_fastavro_write_only_*``.

Run: ``.venv/bin/python bench/avro_encode.py [--rows-100b N] [--rows-1k N] [--runs R]``
(about a minute).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
from fastavro import schemaless_writer  # noqa: E402

from broker.schema.avro import parse  # noqa: E402
from broker.schema.avro_encode import encode  # noqa: E402

SCHEMA = {
    "type": "record", "name": "Order", "namespace": "bench",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "city", "type": "string"},
        {"name": "email", "type": "string"},
        {"name": "description", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "score", "type": "double"},
        {"name": "count", "type": "long"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "created", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "status", "type": {"type": "enum", "name": "Status",
                                    "symbols": ["NEW", "PAID", "SHIPPED", "DELIVERED", "CANCELLED"]}},
    ],
}
STATUSES = ["NEW", "PAID", "SHIPPED", "DELIVERED", "CANCELLED"]
# string lengths (name, city, email, description, note) giving ~100-byte and ~1-KiB records
SHAPES = {"100b": (12, 8, 18, 12, 10), "1k": (60, 20, 40, 800, 60)}
PREFIX = b"\x00\x00\x00\x00\x01"  # Confluent's magic byte and schema id 1


def _strings(rng: np.random.Generator, n: int, mean: int) -> pa.Array:
    lengths = rng.integers(max(1, mean // 2), mean + mean // 2 + 1, n)
    alphabet = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz ABCDEFGHIJ0123456789", np.uint8)
    data = alphabet[rng.integers(0, alphabet.size, int(lengths.sum()))]
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data.tobytes())])


def make_rows(n: int, shape: str, entropy: int = 7) -> pa.StructArray:
    """The Spark writer's input: a StructArray of the DataFrame's Arrow types."""
    rng = np.random.default_rng(entropy)
    name, city, email, description, note = SHAPES[shape]
    notes = _strings(rng, n, note)
    note_valid = rng.random(n) < 0.7
    notes = pa.Array.from_buffers(pa.string(), n, [pa.py_buffer(np.packbits(note_valid, bitorder="little")),
                                                   *notes.buffers()[1:]])
    created = 1_700_000_000_000_000 + rng.integers(0, 10**12, n)
    columns = [
        pa.array(rng.integers(0, 1 << 40, n)),
        _strings(rng, n, name), _strings(rng, n, city), _strings(rng, n, email), _strings(rng, n, description),
        pa.array(rng.random(n) * 1000), pa.array(rng.normal(size=n)),
        pa.array(rng.integers(0, 100, n)),
        notes,
        pa.array(created, pa.timestamp("us", tz="UTC")),
        pa.array(np.array(STATUSES, dtype=object)[rng.integers(0, len(STATUSES), n)], pa.string()),
    ]
    names = [f["name"] for f in SCHEMA["fields"]]
    return pa.StructArray.from_arrays(columns, names)


def fastavro_rows(rows: list, parsed: object) -> list[bytes]:
    out = []
    for row in rows:
        buf = io.BytesIO()
        buf.write(PREFIX)
        schemaless_writer(buf, parsed, row)
        out.append(buf.getvalue())
    return out


def _timed(fn, runs: int) -> tuple[float, float, float]:
    """(median, min, max) seconds of ``runs`` calls."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times), max(times)


def bench(shape: str, n: int, runs: int) -> dict:
    schema = parse(json.dumps(SCHEMA))
    arr = make_rows(n, shape)
    ours = encode(arr, schema, prefix=PREFIX).payloads
    dicts = arr.to_pylist()
    theirs = fastavro_rows(dicts, schema.parsed)
    if ours.to_pylist() != theirs:
        raise SystemExit(f"{shape}: encode and fastavro disagree")
    mean_bytes = (ours.nbytes - 4 * (n + 1)) / n - len(PREFIX)
    figures = {
        "encode": _timed(lambda: encode(arr, schema, prefix=PREFIX), runs),
        "fastavro": _timed(lambda: fastavro_rows(arr.to_pylist(), schema.parsed), runs),
        "fastavro_write_only": _timed(lambda: fastavro_rows(dicts, schema.parsed), runs),
    }
    result = {"rows": n, "mean_record_bytes": round(mean_bytes, 1)}
    for name, (median, low, high) in figures.items():
        result[name] = {"rows_per_s": round(n / median), "spread_rows_per_s": [round(n / high), round(n / low)]}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows-100b", type=int, default=200_000)
    parser.add_argument("--rows-1k", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    runs = max(3, args.runs)
    results = {"100b": bench("100b", args.rows_100b, runs), "1k": bench("1k", args.rows_1k, runs)}
    print(f"{'records':>8} {'path':<22} {'rows/s (median)':>16}   spread (min..max of {runs})")
    for shape, res in results.items():
        label = f"{shape} ({res['mean_record_bytes']:.0f} B)"
        for path in ("encode", "fastavro", "fastavro_write_only"):
            low, high = res[path]["spread_rows_per_s"]
            print(f"{label:>8} {path:<22} {res[path]['rows_per_s']:>16,}   {low:,}..{high:,}")
    headline: dict = {"python": platform.python_version(), "runs": runs}
    for shape, res in results.items():
        headline[f"rows_{shape}"] = res["rows"]
        headline[f"mean_record_bytes_{shape}"] = res["mean_record_bytes"]
        for path in ("encode", "fastavro", "fastavro_write_only"):
            headline[f"{path}_rows_per_s_{shape}"] = res[path]["rows_per_s"]
            headline[f"{path}_spread_{shape}"] = res[path]["spread_rows_per_s"]
        headline[f"ratio_vs_fastavro_{shape}"] = round(res["encode"]["rows_per_s"] / res["fastavro"]["rows_per_s"], 2)
        headline[f"ratio_vs_fastavro_write_only_{shape}"] = round(
            res["encode"]["rows_per_s"] / res["fastavro_write_only"]["rows_per_s"], 2)
    print(json.dumps(headline))


if __name__ == "__main__":
    main()
