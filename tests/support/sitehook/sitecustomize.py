"""The suite's Spark Python processes import the installed pyspark, not Spark's zip of it.

Owns: one change to ``sys.path`` at the start of every interpreter the suite starts (a
``sitecustomize`` that ``tests/conftest.py`` puts first on PYTHONPATH, which every process
of the suite inherits). Spark puts its own copy of pyspark first on the PYTHONPATH of every
Python process it starts (each Spark Python daemon and worker, and the driver of every
``spark-submit`` of a script): ``<pyspark>/python/lib/pyspark.zip``,
``py4j-*-src.zip`` and the ``spark-core`` jar. Python imports a zip's modules from source
(zipimport neither reads nor writes a bytecode cache), so each of those processes compiled
pyspark's modules again: ``import pyspark.sql`` plus the worker modules cost 1.75 s of CPU
from the zip and 0.55 s from the installed package; about 400 such processes ran in one run
of the suite. pyspark's ``setup_spark_files`` also re-reads every zip on the path
(``importlib.invalidate_caches``: ~0.26 s, mostly the 6,000-entry jar) once per worker.

Here those entries are dropped when they belong to the pyspark that is installed beside
this interpreter: that package is the same release (the wheel ships the zip and the
package from one build; they differ only by the test modules the package leaves out), and
py4j is installed with it, so the same code runs, from bytecode. Entries of any other
Spark (another SPARK_HOME) are kept. Set ``KAFKALOG_TEST_SPARK_ZIPS=1`` to keep them all.

Invariant: only the entries ``<installed pyspark>/python/lib/*.zip`` and
``<installed pyspark>/jars/*.jar`` are removed, and only when the installed package
exists; nothing is imported here (it runs in every interpreter of the suite, before
``-m`` resolves its module). Shadows Debian's ``/usr/lib/python3*/sitecustomize.py`` (an
apport hook) in the suite's processes only.

Thread-safety: runs once, at interpreter start, before any thread exists.
"""

from __future__ import annotations

import os
import sys


def spark_zip_entries(path: list[str], site_dirs: list[str]) -> list[str]:
    """The entries of ``path`` that are Spark's zips and jars of a pyspark installed in one
    of ``site_dirs`` (which holds ``pyspark/__init__.py`` and ``py4j/__init__.py``)."""
    drop = []
    for site in site_dirs:
        pkg = os.path.join(site, "pyspark")
        if not (os.path.isfile(os.path.join(pkg, "__init__.py"))
                and os.path.isfile(os.path.join(site, "py4j", "__init__.py"))):
            continue
        lib, jars = os.path.join(pkg, "python", "lib") + os.sep, os.path.join(pkg, "jars") + os.sep
        for entry in path:
            if ((entry.startswith(lib) and entry.endswith(".zip"))
                    or (entry.startswith(jars) and entry.endswith(".jar"))):
                drop.append(entry)
    return drop


def _site_dirs() -> list[str]:
    return [p for p in sys.path if os.path.basename(p) == "site-packages"]


if os.environ.get("KAFKALOG_TEST_SPARK_ZIPS") != "1":
    _drop = set(spark_zip_entries(sys.path, _site_dirs()))
    if _drop:
        sys.path[:] = [p for p in sys.path if p not in _drop]
