"""Benchmark: the columnar Avro decoder (``broker.schema.avro_columnar``) next to fastavro,
same payloads, same run.

Owns: measuring records/s of turning a batch of Avro payloads (Confluent framing already
stripped) into Arrow, three ways: ``avro_columnar.decode`` (a ``pyarrow.BinaryArray`` in,
one ``StructArray`` out, what the Spark read needs); fastavro's ``schemaless_reader`` per
record then ``pyarrow.Table.from_pylist`` (the reference: the usual way to get there from
Python); and the decoder's own row path (``vectorised=False``: fastavro per record, then
``pyarrow.array``), for scale.

Workload: a record of 10 fields, as a Kafka value typically is: a long id, three strings,
a long, two doubles, a nullable string (null every other record), a timestamp-millis and
an enum, written by fastavro's ``schemaless_writer``; ~100-byte records (200k) and ~1-KiB
records (40k, the size in the strings). Each figure is the median of ``RUNS`` runs,
interleaved (columnar, reference, row path, again), with the spread (min-max) shown; the
first call (which compiles the plan) is left out, the plan being cached across batches.

Prints a table, then as its very last line one JSON object: records/s per way and size,
and ``ratio_vs_fastavro_100b`` / ``ratio_vs_fastavro_1k`` (columnar over the reference).
Run: ``.venv/bin/python bench/avro_columnar.py`` (about a minute).
"""

from __future__ import annotations

import io
import json
import os
import platform
import random
import statistics
import string
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import fastavro  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

from broker.schema import avro  # noqa: E402
from broker.schema.avro_columnar import decode  # noqa: E402

RUNS = 5
SCHEMA = avro.parse(json.dumps({"type": "record", "name": "PageView", "namespace": "bench", "fields": [
    {"name": "id", "type": "long"},
    {"name": "user", "type": "string"},
    {"name": "page", "type": "string"},
    {"name": "score", "type": "double"},
    {"name": "visits", "type": "long"},
    {"name": "ratio", "type": "double"},
    {"name": "referrer", "type": ["null", "string"], "default": None},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "device", "type": {"type": "enum", "name": "Device", "symbols": ["DESKTOP", "MOBILE", "TABLET"]}},
    {"name": "agent", "type": "string"},
]}))
SIZES = {"100b": (100, 200_000), "1k": (1024, 40_000)}


def make_payloads(target: int, n: int) -> list[bytes]:
    rng = random.Random(target)
    letters = string.ascii_letters + string.digits
    # string bytes per record: the target minus ~35 bytes of numbers, enum and framing
    text = max(target - 35, 12)
    user_len, page_len = max(text // 8, 4), max(text // 4, 4)
    ref_len = max(text // 6, 4)
    agent_len = max(text - user_len - page_len - ref_len // 2, 4)
    start = 1_700_000_000_000
    out = []
    for i in range(n):
        row = {
            "id": i, "user": "".join(rng.choices(letters, k=user_len)),
            "page": "/" + "".join(rng.choices(letters, k=page_len - 1)),
            "score": rng.random() * 100, "visits": rng.randrange(1_000_000), "ratio": rng.random(),
            "referrer": None if i % 2 else "https://" + "".join(rng.choices(letters, k=ref_len)),
            "at": start + i * 37, "device": ("DESKTOP", "MOBILE", "TABLET")[i % 3],
            "agent": "".join(rng.choices(letters, k=agent_len)),
        }
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, SCHEMA.parsed, row)
        out.append(buf.getvalue())
    return out


def columnar(array: pa.Array) -> pa.Array:
    result = decode(array, SCHEMA)
    assert not result.bad.any()
    return result.array


def rows_path(array: pa.Array) -> pa.Array:
    return decode(array, SCHEMA, vectorised=False).array


def reference(payloads: list[bytes]) -> pa.Table:
    parsed = SCHEMA.parsed
    read = fastavro.schemaless_reader
    return pa.Table.from_pylist([read(io.BytesIO(p), parsed, None) for p in payloads])


def timed(fn, arg) -> float:
    started = time.perf_counter()
    fn(arg)
    return time.perf_counter() - started


def main() -> None:
    print(f"python {platform.python_version()}, pyarrow {pa.__version__}, numpy {np.__version__}, "
          f"fastavro {fastavro.__version__}, {os.cpu_count()} CPUs")
    results: dict[str, float | int] = {}
    table = []
    for name, (target, n) in SIZES.items():
        payloads = make_payloads(target, n)
        mean_size = sum(map(len, payloads)) / n
        array = pa.array(payloads, pa.binary())
        got, want = columnar(array), reference(payloads)  # warm up (the plan is compiled once)
        assert got.to_pylist()[:100] == want.slice(0, 100).to_pylist()
        rows_path(array.slice(0, 10))
        times: dict[str, list[float]] = {"columnar": [], "fastavro": [], "rows": []}
        for _ in range(RUNS):
            times["columnar"].append(timed(columnar, array))
            times["fastavro"].append(timed(reference, payloads))
            times["rows"].append(timed(rows_path, array))
        rates = {k: [n / t for t in v] for k, v in times.items()}
        medians = {k: statistics.median(v) for k, v in rates.items()}
        table.append((name, mean_size, n, rates, medians))
        for way, median in medians.items():
            results[f"rec_s_{way}_{name}"] = round(median)
            results[f"spread_pct_{way}_{name}"] = round(100 * (max(rates[way]) - min(rates[way])) / median, 1)
        results[f"mean_record_bytes_{name}"] = round(mean_size, 1)
        results[f"ratio_vs_fastavro_{name}"] = round(medians["columnar"] / medians["fastavro"], 1)
        results[f"ratio_rows_path_vs_fastavro_{name}"] = round(medians["rows"] / medians["fastavro"], 2)
    print()
    print(f"records/s, median of {RUNS} runs (min-max); 'fastavro': schemaless_reader per record + "
          "Table.from_pylist; 'rows': decode(vectorised=False)")
    print(f"{'size':>5} {'bytes':>6} {'records':>8} | {'columnar':>33} | {'fastavro':>29} | {'rows':>27} | ratio")
    for name, mean_size, n, rates, medians in table:
        cells = [f"{medians[k]:,.0f} ({min(rates[k]):,.0f}-{max(rates[k]):,.0f})" for k in
                 ("columnar", "fastavro", "rows")]
        print(f"{name:>5} {mean_size:>6.0f} {n:>8} | {cells[0]:>33} | {cells[1]:>29} | {cells[2]:>27} | "
              f"{medians['columnar'] / medians['fastavro']:.1f}x")
    print()
    print(json.dumps(results))


if __name__ == "__main__":
    main()
