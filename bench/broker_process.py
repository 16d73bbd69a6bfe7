"""Shared by the client benchmarks: this project's broker in a subprocess.

Owns ``start_broker(log_dir, overrides)`` and ``stop_broker(proc, log_dir)``. ``start_broker`` runs
``python -m broker`` on 127.0.0.1 (a free port, the given log directory, one partition per
auto-created topic), waits for its ready line and returns the process and ``host:port``; a
thread drains its output so that it never blocks on a full pipe. ``stop_broker``
terminates it (SIGKILL after 10 s) and removes the log directory. Imported by
``producer.py`` and ``consumer.py`` (run as scripts: this folder is on sys.path).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def start_broker(log_dir: str, overrides: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    extra = [a for k, v in (overrides or {}).items() for a in ("--override", f"{k}={v}")]
    proc = subprocess.Popen(
        [sys.executable, "-m", "broker", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
         "--override", f"log.dirs={log_dir}", "--override", "num.partitions=1", *extra],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 60
    assert proc.stdout is not None
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        m = re.search(r"listening on PLAINTEXT://([\d.]+:\d+)", line)
        if m:
            out = proc.stdout
            threading.Thread(target=lambda: [None for _ in out], daemon=True).start()
            return proc, m.group(1)
    proc.kill()
    raise SystemExit("the broker did not start")


def stop_broker(proc: subprocess.Popen, log_dir: str) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
    shutil.rmtree(log_dir, ignore_errors=True)
