"""An embedded broker for notebooks, tests and the main job: ``with EmbeddedBroker() as b:``.

Owns: ``EmbeddedBroker``, which runs this project's broker (``python -m broker``) in a
child process on localhost, waits until it accepts connections, and stops it again.

Why a child process and not a thread: the broker then has its own interpreter (no GIL
shared with the producer or Spark's driver in the caller), a crash of one never takes
the other down, and the log directory it leaves behind is exactly what a standalone
broker would have written (a clean shutdown writes the checkpoints and the clean-shutdown
marker).

Behaviour:

* ``EmbeddedBroker(log_dir=None, port=0, overrides={...})``: ``log_dir=None`` uses a
  temporary directory that ``stop()`` removes; a given ``log_dir`` (e.g. ``./data/kafka-logs``)
  is kept, so the next broker on it finds its topics and records. ``port=0`` binds a free
  port; ``bootstrap_servers`` tells which (``"127.0.0.1:40123"``). ``overrides`` are
  server.properties keys (Kafka's names), applied after ``config_file`` if one is given.
* ``log_dir`` and ``log_file`` are plain ``str`` paths, so they go as they are wherever
  Spark or a Kafka tool takes a path (``spark.read.format("kafkalog").load(broker.log_dir)``:
  pyspark's ``load()`` refuses a ``pathlib.Path``); ``log_path`` is the same directory as a
  ``pathlib.Path`` for file work (``broker.log_path / "clicks-0"``).
* The broker serves its Schema Registry too (Confluent's REST API over ``_schemas``):
  ``schema_registry_url`` tells where (``"http://127.0.0.1:40125"``; ``registry_port``
  picks the port, 0 a free one). ``schema_registry=False`` runs the broker without it.
* The broker's stdout and stderr go to ``log_file`` (``broker.log`` beside the log
  directory): the ready line, then its log. A broker that exits before it is ready, or is
  not ready within ``startup_timeout`` seconds, raises ``EmbeddedBrokerError`` with the
  tail of that file.
* The child runs in its own session: Ctrl-C in a terminal interrupts the caller only,
  which then stops the broker in order (``__exit__`` / ``stop()``: SIGTERM, a clean
  shutdown, SIGKILL after ``shutdown_timeout``). An interpreter that exits without
  calling ``stop()`` still stops the broker (``atexit``).

Thread-safety: start/stop from one thread; the properties may be read from any thread.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

__all__ = ["EmbeddedBroker", "EmbeddedBrokerError", "READY_RE", "REGISTRY_RE"]

# The line ``python -m broker`` prints once every listener accepts connections.
READY_RE = re.compile(r"started \(kafkalog\) listening on PLAINTEXT://([^ ]+):(\d+) ")
# ... and, with the Schema Registry on, its URLs at the end of the same line
REGISTRY_RE = re.compile(r" schema\.registry=(https?://[^ ,\s]+)")


class EmbeddedBrokerError(RuntimeError):
    """The embedded broker failed to start (the message ends with its log's tail)."""


class EmbeddedBroker:
    """This project's broker in a child process on localhost (see module docstring)."""

    def __init__(self, log_dir: str | os.PathLike | None = None, *, host: str = "127.0.0.1",
                 port: int = 0, overrides: Mapping[str, object] | None = None,
                 config_file: str | os.PathLike | None = None, startup_timeout: float = 60.0,
                 shutdown_timeout: float = 30.0, schema_registry: bool = True, registry_port: int = 0) -> None:
        self._temp_dir: str | None = None
        if log_dir is None:
            self._temp_dir = tempfile.mkdtemp(prefix="kafkalog-embedded-")
            log_dir = Path(self._temp_dir) / "kafka-logs"
        self.log_path = Path(log_dir).resolve()
        # str, not Path: what pyspark's load() and the command line take as they are
        self.log_dir: str = str(self.log_path)
        self.log_file: str = str(self.log_path.parent / "broker.log")
        self.config_file: str | None = os.fspath(config_file) if config_file is not None else None
        self.overrides: dict[str, str] = {
            "listeners": f"PLAINTEXT://{host}:{int(port)}",
            "log.dirs": self.log_dir,
        }
        if schema_registry:
            self.overrides["schema.registry.listeners"] = f"http://{host}:{int(registry_port)}"
        self.overrides.update({str(k): str(v) for k, v in (overrides or {}).items()})
        self.startup_timeout = startup_timeout
        self.shutdown_timeout = shutdown_timeout
        self.host = host
        self.port: int | None = None
        self.schema_registry_url: str | None = None  # set once started with the registry
        self._proc: subprocess.Popen | None = None

    # --- lifecycle ---

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "broker"]
        if self.config_file is not None:
            cmd.append(self.config_file)
        for key, value in self.overrides.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd

    def start(self) -> EmbeddedBroker:
        """Start the broker and wait until it accepts connections; returns self."""
        if self.is_alive():
            return self
        self.log_path.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab") as out:
            start_at = out.tell()
            self._proc = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, start_new_session=True)
        atexit.register(self.stop)
        deadline = time.monotonic() + self.startup_timeout
        while True:
            text = self._log_text(start_at)
            match = READY_RE.search(text)
            if match:
                self.host, self.port = match.group(1), int(match.group(2))
                registry = REGISTRY_RE.search(text[match.start():])
                self.schema_registry_url = registry.group(1) if registry else None
                return self
            if self._proc.poll() is not None:
                code = self._proc.returncode
                self._proc = None
                raise EmbeddedBrokerError(f"the broker exited with code {code} before it was "
                                          f"ready; {self.log_file}:\n{text[-3000:]}")
            if time.monotonic() > deadline:
                self.kill()
                raise EmbeddedBrokerError(f"the broker was not ready after {self.startup_timeout:.0f} s; "
                                          f"{self.log_file}:\n{text[-3000:]}")
            time.sleep(0.05)

    def stop(self) -> int | None:
        """Clean shutdown (SIGTERM, then SIGKILL after ``shutdown_timeout``); removes a
        temporary log directory. Returns the broker's exit code (None if not running)."""
        code = None
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(self.shutdown_timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            code = proc.returncode
        atexit.unregister(self.stop)
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None
        return code

    def kill(self) -> None:
        """SIGKILL: a crash; the next start on the same log directory recovers the logs."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def restart(self) -> EmbeddedBroker:
        """Stop cleanly and start again on the same log directory (and the same port)."""
        temp, self._temp_dir = self._temp_dir, None  # keep a temporary directory's data
        self.stop()
        self._temp_dir = temp
        if self.port:
            self.overrides["listeners"] = f"PLAINTEXT://{self.host}:{self.port}"
        if self.schema_registry_url and "schema.registry.listeners" in self.overrides:
            self.overrides["schema.registry.listeners"] = self.schema_registry_url
        return self.start()

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # --- state ---

    def is_alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` of the running broker (what ``kafka.bootstrap.servers`` takes)."""
        if self.port is None:
            raise EmbeddedBrokerError("the embedded broker has not been started")
        return f"{self.host}:{self.port}"

    def _log_text(self, start_at: int = 0) -> str:
        try:
            with open(self.log_file, "rb") as f:
                f.seek(start_at)
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def __repr__(self) -> str:
        state = f"running on {self.bootstrap_servers}" if self.is_alive() else "stopped"
        return f"EmbeddedBroker({state}, log_dir={self.log_dir!r})"
