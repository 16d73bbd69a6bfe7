"""One Iceberg or Delta table export in a process of its own, for
tests/test_tables_kills.py, which SIGKILLs its process group (this interpreter and the
Spark JVM it starts) at random points of the run.

``python -m tests.support.table_export_job '<json>'``: the JSON object holds
``export_table``'s keyword arguments (``topic``, ``table``, ``fmt``,
``bootstrap_servers``, ``orphan_age_ms``, ...); with ``"streaming": true`` the export is
the streaming one (``spark_kafkalog.tables.stream.export_stream``, Trigger.AvailableNow,
with its keyword arguments: ``max_offsets_per_trigger``, ...), awaited to its end. The
session is the suite's local[2] one (``tests.support.spark.get_spark``: the repository on
the Python workers' PYTHONPATH). The job prints one JSON line: the records, files,
version, offsets after (by partition) and seconds (streaming: summed over the committed
micro-batches, with their number as ``batches``, and one ``{"batch": ...}`` line per
committed micro-batch before it).

Thread-safety: a script; one thread (the streaming query's sink prints on its own).
"""

from __future__ import annotations

import json
import sys
import time


def main(kwargs: dict) -> dict:
    from tests.support.spark import get_spark

    if kwargs.pop("streaming", False):
        return _stream(get_spark(), kwargs)
    from spark_kafkalog.tables.job import export_table

    result = export_table(get_spark(), **kwargs)
    return {"records": result.records, "files": result.files, "version": result.version,
            "next_offsets": {str(p): o for p, o in result.offsets_after.next_offsets.items()},
            "seconds": result.seconds}


def _stream(spark, kwargs: dict) -> dict:
    from spark_kafkalog.tables.stream import export_stream

    started = time.monotonic()
    batches: list = []

    def on_commit(batch) -> None:
        if batch.committed:
            batches.append(batch)
            print(json.dumps({"batch": batch.batch_id, "records": batch.records, "version": batch.version}),
                  flush=True)

    query = export_stream(spark, on_commit=on_commit, **kwargs)
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    last = batches[-1].offsets_after.next_offsets if batches else {}
    return {"records": sum(b.records for b in batches), "files": sum(b.files for b in batches),
            "version": batches[-1].version if batches else None, "batches": len(batches),
            "next_offsets": {str(p): o for p, o in last.items()}, "seconds": time.monotonic() - started}


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))), flush=True)
