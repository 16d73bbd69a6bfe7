"""Shared by the Spark benchmarks: the peak RSS of Spark's Python workers.

Owns ``WorkerMemory``, a context manager that samples, every 50 ms, the resident memory of
the ``pyspark.daemon`` / worker processes (from /proc) and keeps the peak. Imported by
``spark_read.py`` and ``spark_write.py`` (run as scripts: this folder is on sys.path).
"""

from __future__ import annotations

import os
import threading


class WorkerMemory:
    """Samples the RSS of the Python worker processes (pyspark.daemon and its children)."""

    def __init__(self) -> None:
        self.peak_kb = 0
        self._stop = threading.Event()
        self._thread = None

    @staticmethod
    def _workers() -> list[int]:
        pids = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            if b"pyspark.daemon" in cmd or b"pyspark/daemon" in cmd or b"pyspark.worker" in cmd:
                pids.append(int(entry))
        return pids

    @staticmethod
    def _rss_kb(pid: int) -> int:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
        except OSError:
            pass
        return 0

    def __enter__(self):
        self.peak_kb = 0
        self._stop.clear()

        def run():
            while not self._stop.is_set():
                for pid in self._workers():
                    self.peak_kb = max(self.peak_kb, self._rss_kb(pid))
                self._stop.wait(0.05)

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
