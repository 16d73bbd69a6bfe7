"""What every ``kafkalog`` subcommand shares: the error type, the ``K=V`` option syntax,
warnings, and the progress-bar policy.

Owns:

- ``CliError``: raise it from a subcommand's ``run()`` for bad input or a failed step. The
  dispatcher (``main.py``) prints ``kafkalog <command>: error: <message>`` (one line) on
  stderr and exits 1; it does the same for ``ValueError`` (``ConfigError`` included) and
  ``OSError``, so a subcommand rarely needs to catch anything itself.
- ``parse_key_value``: the one ``KEY=VALUE`` syntax of ``--config``, ``--override`` and
  friends, so that every subcommand reads them alike.
- ``warn``: a non-fatal problem, one line on stderr: ``kafkalog <command>: warning: ...``.
- ``progress``: a byte-count progress bar (``rich``) on stderr for long commands. It shows
  only when the work exceeds ``PROGRESS_THRESHOLD_BYTES`` and stderr is a terminal while
  stdout is not (a terminal filling with output lines already shows progress, and the bar
  would tear them); otherwise it is a silent object with the same methods, so callers
  never branch. Updates are batched (``_REFRESH_BYTES``) so that per-batch calls stay cheap.

Thread-safety: none needed; a command runs on one thread.
"""

from __future__ import annotations

import sys
from typing import TextIO

__all__ = ["CliError", "parse_key_value", "warn", "progress", "ByteProgress",
           "PROGRESS_THRESHOLD_BYTES"]

# A command that handles less than this finishes in a few seconds: no bar.
PROGRESS_THRESHOLD_BYTES = 64 * 1024 * 1024
# Forward progress to rich at most once per this many bytes (rich takes a lock per call).
_REFRESH_BYTES = 1024 * 1024


class CliError(Exception):
    """Bad input or a failed step of a subcommand; the message is one line for the user."""


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
            from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn,
                                       TimeRemainingColumn, TransferSpeedColumn)

            console = Console(file=file or sys.stderr)
            self._progress = Progress(
                TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                TransferSpeedColumn(), TimeRemainingColumn(), console=console,
                transient=True, redirect_stdout=False, redirect_stderr=False)
            self._task = self._progress.add_task(description, total=total)

    def __enter__(self) -> "ByteProgress":
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
