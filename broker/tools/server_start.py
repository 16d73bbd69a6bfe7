"""kafkalog broker [CONFIG] [--override KEY=VALUE ...]: run the broker in the foreground.

Owns only the hand-over: every argument after ``broker`` goes untouched to
``broker.__main__.main`` (the same as ``python -m broker`` and ``kafkalog-broker``), which
parses its own options, prints its own ``--help`` and returns the exit code. If the broker
cannot be imported, one line ``kafkalog broker: error: ...`` and exit 1.
"""

from __future__ import annotations

from .common import CliError

NAME = "broker"
SUMMARY = "run the broker in the foreground (like kafka-server-start.sh; same as python -m broker)"
PASSTHROUGH = True


def run_argv(argv: list[str]) -> int:
    try:
        from broker.__main__ import main as broker_main
    except ImportError as exc:
        raise CliError(f"the broker is not available: {exc}") from exc
    try:
        return broker_main(list(argv))
    except ImportError as exc:  # a module the broker loads lazily at startup
        raise CliError(f"the broker cannot start: {exc}") from exc
