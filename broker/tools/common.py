"""What every console tool (every ``kafkalog`` subcommand) shares: the error type, the
``K=V`` option syntax, warnings, and the progress-bar policy.

Owns:

- ``CliError``: raise it from a subcommand's ``run()`` for bad input or a failed step. The
  dispatcher (``spark_kafkalog/cli/main.py``) prints ``kafkalog <command>: error:
  <message>`` (one line) on stderr and exits 1; it does the same for ``ValueError``
  (``ConfigError`` included) and ``OSError``, so a subcommand rarely needs to catch
  anything itself.
- ``parse_key_value``: the one ``KEY=VALUE`` syntax of ``--config``, ``--override`` and
  friends, so that every subcommand reads them alike.
- ``warn``: a non-fatal problem, one line on stderr: ``kafkalog <command>: warning: ...``.
- ``admin_config``: the admin client settings of the admin tools (topics, configs, acls,
  transactions): ``--command-config``'s properties, ``--bootstrap-server`` over them, else
  ``DEFAULT_BOOTSTRAP``, and ``DEFAULT_API_TIMEOUT_MS``.
- ``report_unreachable``: while a command waits for its first broker, one line on stderr
  as soon as every address has failed, naming the cause and the wait's bound: ``kafkalog
  consume: no broker of 127.0.0.1:1 reachable yet (connection refused); retrying until
  default.api.timeout.ms (60000 ms)...`` (from the client's ``broker.client.network``
  WARNING, which it replaces). A failure that is not retried (TLS, SASL) prints nothing
  there: the command fails with it at once, in its error line. ``unreachable_message``
  words the final error (``no broker of 127.0.0.1:1 reachable (connection refused);
  waited 60000 ms (default.api.timeout.ms)``) with the bound the command applied.
- ``progress``: a byte-count progress bar (``rich``) on stderr for long commands. It shows
  only when the work exceeds ``PROGRESS_THRESHOLD_BYTES`` and stderr is a terminal while
  stdout is not (a terminal filling with output lines already shows progress, and the bar
  would tear them); otherwise it is a silent object with the same methods, so callers
  never branch. Updates are batched (``_REFRESH_BYTES``) so that per-batch calls stay cheap.
- ``offset_progress``: the same kind of bar counting offsets of a planned read (``kafkalog
  export``: offsets read so far out of the planned total). It shows whenever stderr is a
  terminal and there is something to read; stdout does not matter, since such a command
  prints its summary only after the (transient) bar is gone. ``OffsetProgress.update``
  takes the absolute count and may be called from another thread (rich locks).

Thread-safety: none needed; a command runs on one thread (``OffsetProgress.update`` alone
may be called from a monitoring thread).
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from typing import TextIO

DEFAULT_BOOTSTRAP = "localhost:9092"
DEFAULT_API_TIMEOUT_MS = 30000

__all__ = ["CliError", "parse_key_value", "warn", "admin_config", "DEFAULT_BOOTSTRAP", "DEFAULT_API_TIMEOUT_MS",
           "report_unreachable", "unreachable_message",
           "progress", "ByteProgress",
           "PROGRESS_THRESHOLD_BYTES", "offset_progress", "OffsetProgress"]

# A command that handles less than this finishes in a few seconds: no bar.
PROGRESS_THRESHOLD_BYTES = 64 * 1024 * 1024
# Forward progress to rich at most once per this many bytes (rich takes a lock per call).
_REFRESH_BYTES = 1024 * 1024


class CliError(Exception):
    """Bad input or a failed step of a subcommand; the message is one line for the user."""



def admin_config(args, client_id: str) -> dict:
    """The admin tools' client settings (module docstring); ``args`` has ``command_config``
    and ``bootstrap_server``."""
    from broker.config import load_properties

    config: dict = dict(load_properties(args.command_config)) if args.command_config else {}
    if args.bootstrap_server:
        config["bootstrap.servers"] = args.bootstrap_server
    config.setdefault("bootstrap.servers", DEFAULT_BOOTSTRAP)
    config.setdefault("default.api.timeout.ms", DEFAULT_API_TIMEOUT_MS)
    config.setdefault("client.id", client_id)
    return config

def _ms_text(value) -> str:
    try:
        return f"{float(value):.0f}"
    except (TypeError, ValueError):
        return str(value)


class _UnreachableReport(logging.Filter):
    """On logger ``broker.client.network``: the first "no broker ... reachable yet" record
    of a client that never reached a broker becomes the command's one line; connection
    failure records (the unreachable ones, and
    those not retried, which the command raises) are not printed otherwise."""

    def __init__(self, command: str, config: str, timeout_ms, file: TextIO | None) -> None:
        super().__init__()
        self.command = command
        self.config = config
        self.timeout_ms = timeout_ms
        self.file = file
        self.reported = False

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "kafka_unreachable", None) is not None:
            # only while waiting for the first broker: a later outage is the command's to tell
            if not self.reported and not getattr(record, "kafka_ever_ready", False):
                self.reported = True
                text = record.getMessage().removesuffix("; retrying")
                if callable(self.timeout_ms):  # read once the client exists (its config was read)
                    self.timeout_ms = self.timeout_ms()
                print(f"kafkalog {self.command}: {text}; retrying until {self.config} "
                      f"({_ms_text(self.timeout_ms)} ms)...", file=self.file or sys.stderr, flush=True)
            return False
        return getattr(record, "kafka_connection_failure", None) is None


@contextlib.contextmanager
def report_unreachable(command: str, config: str, timeout_ms, file: TextIO | None = None) -> Iterator[None]:
    """While the block runs: the one "retrying" line of an unreachable cluster (module
    docstring); ``config`` and ``timeout_ms`` (a value, or a function giving it) name the
    bound of the wait."""
    logger = logging.getLogger("broker.client.network")
    report = _UnreachableReport(command, config, timeout_ms, file)
    level = logger.level
    if logger.getEffectiveLevel() > logging.WARNING:
        logger.setLevel(logging.WARNING)
    logger.addFilter(report)
    try:
        yield
    finally:
        logger.removeFilter(report)
        logger.setLevel(level)


def unreachable_message(exc: BaseException, config: str | None = None, timeout_ms=None) -> str:
    """The error line's text: a ``BrokerUnreachableError`` naming ``config`` and
    ``timeout_ms`` (the bound the command applied) when given; other errors as they are."""
    from broker.client.errors import BrokerUnreachableError

    if isinstance(exc, BrokerUnreachableError) and config is not None:
        return str(exc.renamed(config, None if timeout_ms is None else float(timeout_ms)))
    return str(exc)


def parse_key_value(item: str, option: str) -> tuple[str, str]:
    """``"k=v"`` -> ``("k", "v")``, keys and values stripped; ``CliError`` naming ``option``
    when there is no ``=`` or the key is empty."""
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise CliError(f"{option} {item!r} is not of the form KEY=VALUE")
    return key.strip(), value.strip()


def warn(command: str, message: str, file: TextIO | None = None) -> None:
    print(f"kafkalog {command}: warning: {message}", file=file or sys.stderr, flush=True)


class ByteProgress:
    """A progress bar counting bytes; ``enabled=False`` makes every method a no-op."""

    def __init__(self, total: int, description: str, *, enabled: bool,
                 file: TextIO | None = None) -> None:
        self.total = total
        self.enabled = enabled
        self._pending = 0
        self._progress = None
        self._task = None
        if enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
                TransferSpeedColumn,
            )

            console = Console(file=file or sys.stderr)
            self._progress = Progress(
                TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                TransferSpeedColumn(), TimeRemainingColumn(), console=console,
                transient=True, redirect_stdout=False, redirect_stderr=False)
            self._task = self._progress.add_task(description, total=total)

    def __enter__(self) -> ByteProgress:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *exc_info) -> None:
        if self._progress is not None:
            self._flush()
            self._progress.stop()

    def advance(self, nbytes: int) -> None:
        if self._progress is None or nbytes <= 0:
            return
        self._pending += nbytes
        if self._pending >= _REFRESH_BYTES:
            self._flush()

    def describe(self, description: str) -> None:
        """Change the text before the bar (e.g. the file being processed)."""
        if self._progress is not None:
            self._flush()
            self._progress.update(self._task, description=description)

    def _flush(self) -> None:
        if self._pending:
            self._progress.advance(self._task, self._pending)
            self._pending = 0


def progress(total_bytes: int, description: str, *, enabled: bool | None = None,
             file: TextIO | None = None) -> ByteProgress:
    """A ``ByteProgress`` for ``total_bytes`` of work, shown per the policy above unless
    ``enabled`` forces it on or off. Use it as a context manager."""
    if enabled is None:
        enabled = (total_bytes > PROGRESS_THRESHOLD_BYTES and _isatty(sys.stderr)
                   and not _isatty(sys.stdout))
    return ByteProgress(total_bytes, description, enabled=enabled, file=file)


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # replaced or closed streams
        return False


class OffsetProgress:
    """A progress bar counting offsets out of a planned total; ``enabled=False`` makes
    every method a no-op. ``update(done)`` sets the absolute count (never backwards)."""

    def __init__(self, total: int, description: str, *, enabled: bool,
                 file: TextIO | None = None) -> None:
        self.total = total
        self.enabled = enabled
        self.done = 0
        self._progress = None
        self._task = None
        if enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                Progress,
                TaskProgressColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            console = Console(file=file or sys.stderr)
            self._progress = Progress(
                TextColumn("{task.description}"), BarColumn(),
                TextColumn("{task.completed:,.0f}/{task.total:,.0f} offsets"),
                TaskProgressColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
                console=console, transient=True, redirect_stdout=False, redirect_stderr=False)
            self._task = self._progress.add_task(description, total=total)

    def __enter__(self) -> OffsetProgress:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *exc_info) -> None:
        if self._progress is not None:
            self._progress.stop()

    def update(self, done: int, total: int | None = None) -> None:
        """``done`` offsets of ``total`` (default: the planned total) are read; usable
        directly as ``kafkalog export``'s ``progress`` callback."""
        if done <= self.done and (total is None or total == self.total):
            return
        self.done = max(self.done, done)
        if total is not None:
            self.total = total
        if self._progress is not None:
            self._progress.update(self._task, completed=self.done, total=self.total)


def offset_progress(total_offsets: int, description: str, *, enabled: bool | None = None,
                    file: TextIO | None = None) -> OffsetProgress:
    """An ``OffsetProgress`` for ``total_offsets``, shown when stderr is a terminal and
    there is anything to read, unless ``enabled`` forces it on or off. Use it as a
    context manager."""
    if enabled is None:
        enabled = total_offsets > 0 and _isatty(sys.stderr)
    return OffsetProgress(total_offsets, description, enabled=enabled, file=file)
