"""One Iceberg or Delta table export (``spark_kafkalog.tables.job.export_table``) in a
process of its own, for tests/test_tables_kills.py, which SIGKILLs its process group (this
interpreter and the Spark JVM it starts) at random points of the run.

``python -m tests.support.table_export_job '<json>'``: the JSON object holds
``export_table``'s keyword arguments (``topic``, ``table``, ``fmt``,
``bootstrap_servers``, ``orphan_age_ms``, ...). The session is the suite's local[2] one
(``tests.support.spark.get_spark``: the repository on the Python workers' PYTHONPATH).
The job prints one JSON line: the result's records, files, version, offsets after (by
partition) and seconds.

Thread-safety: a script; one thread.
"""

from __future__ import annotations

import json
import sys


def main(kwargs: dict) -> dict:
    from spark_kafkalog.tables.job import export_table
    from tests.support.spark import get_spark

    result = export_table(get_spark(), **kwargs)
    return {"records": result.records, "files": result.files, "version": result.version,
            "next_offsets": {str(p): o for p, o in result.offsets_after.next_offsets.items()},
            "seconds": result.seconds}


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))), flush=True)
