"""Tests of spark_kafkalog/cli/main.py (the dispatcher) and common.py (shared helpers):
--help and --version, one-line usage errors with exit 1, the common error path of
subcommands, the broker passthrough, K=V parsing and the progress-bar policy."""

from __future__ import annotations

import io
import sys
import types

import pytest

from broker.config import ConfigError
from spark_kafkalog.cli import common
from spark_kafkalog.cli import main as cli_main
from spark_kafkalog.cli.common import CliError, parse_key_value, progress
from spark_kafkalog.cli.main import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    return lines[0]


# --- help, version, usage errors ---

def test_top_level_help_lists_every_subcommand(capsys):
    code, out, err = run(capsys, "--help")
    assert code == 0 and err == ""
    assert out.startswith("usage: kafkalog ")
    for name in ("broker", "dump-log"):
        assert f"    {name} " in out


def test_subcommand_help(capsys):
    code, out, _ = run(capsys, "dump-log", "--help")
    assert code == 0 and out.startswith("usage: kafkalog dump-log ")
    assert "--print-data-log" in out and "kafka-dump-log.sh" in out


def test_version(capsys):
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.startswith("kafkalog ")


def test_no_command_is_one_line_and_exit_1(capsys):
    code, out, err = run(capsys)
    assert code == 1 and out == ""
    assert one_line(err) == "kafkalog: error: a command is required (see 'kafkalog --help')"


def test_unknown_command_is_one_line_and_exit_1(capsys):
    code, out, err = run(capsys, "frobnicate", "--x")
    assert code == 1 and out == ""
    line = one_line(err)
    assert line.startswith("kafkalog: error: argument <command>: invalid choice: 'frobnicate'")
    assert line.endswith("(see 'kafkalog --help')")


def test_bad_options_name_the_subcommand(capsys):
    code, _, err = run(capsys, "dump-log", "--files", "x.log", "--bogus")
    assert code == 1
    assert one_line(err) == ("kafkalog dump-log: error: unrecognized arguments: --bogus "
                             "(see 'kafkalog dump-log --help')")
    code, _, err = run(capsys, "dump-log")
    assert code == 1
    assert one_line(err).startswith("kafkalog dump-log: error: the following arguments are required: --files")
    code, _, err = run(capsys, "dump-log", "--files", "x.log", "--max-bytes", "ten")
    assert code == 1 and "--max-bytes: 'ten' is not an integer" in one_line(err)


def test_abbreviated_options_are_refused(capsys):
    code, _, err = run(capsys, "dump-log", "--fil", "x.log")
    assert code == 1 and one_line(err).startswith("kafkalog dump-log: error: ")


# --- the common error path ---

@pytest.fixture
def fake_command(monkeypatch):
    """Register a subcommand ``fake`` whose run() does what the test sets in ``behaviour``."""
    module = types.ModuleType("fake_kafkalog_cmd", "fake: a test command.\n\nMore text.")
    module.NAME = "fake"
    module.SUMMARY = "a command for tests"
    module.behaviour = lambda args: 0

    def add_arguments(parser):
        parser.add_argument("--flag", action="store_true")

    module.add_arguments = add_arguments
    module.run = lambda args: module.behaviour(args)
    monkeypatch.setitem(sys.modules, "fake_kafkalog_cmd", module)
    monkeypatch.setattr(cli_main, "SUBCOMMANDS", cli_main.SUBCOMMANDS + ("fake_kafkalog_cmd",))
    return module


def _raiser(exc: BaseException):
    def behaviour(args):
        raise exc
    return behaviour


@pytest.mark.parametrize("exc, text", [
    (CliError("bad input"), "bad input"),
    (ValueError("two\nlines"), "two lines"),
    (ConfigError("num.partitions", "x", "not a number"), "num.partitions"),
    (FileNotFoundError(2, "No such file or directory", "/nope.log"), "/nope.log: No such file or directory"),
    (PermissionError(13, "Permission denied"), "Permission denied"),
])
def test_errors_of_a_subcommand_are_one_line_and_exit_1(capsys, fake_command, exc, text):
    fake_command.behaviour = _raiser(exc)
    code, out, err = run(capsys, "fake")
    assert code == 1 and out == ""
    line = one_line(err)
    assert line.startswith("kafkalog fake: error: ") and text in line


def test_exit_code_comes_from_run(capsys, fake_command):
    fake_command.behaviour = lambda args: 3 if args.flag else None
    assert run(capsys, "fake", "--flag")[0] == 3
    assert run(capsys, "fake")[0] == 0
    code, out, _ = run(capsys, "fake", "--help")
    assert code == 0 and "fake: a test command." in out and "More text" not in out


def test_broken_pipe_and_interrupt(capsys, fake_command):
    fake_command.behaviour = _raiser(BrokenPipeError())
    code, _, err = run(capsys, "fake")
    assert (code, err) == (141, "")
    fake_command.behaviour = _raiser(KeyboardInterrupt())
    assert run(capsys, "fake")[0] == 130


def test_a_bug_is_not_swallowed(capsys, fake_command):
    fake_command.behaviour = _raiser(RuntimeError("bug"))
    with pytest.raises(RuntimeError):
        main(["fake"])


# --- broker passthrough ---

def test_broker_gets_its_arguments_untouched(capsys, monkeypatch):
    seen = []
    fake = types.ModuleType("broker.__main__")
    fake.main = lambda argv: seen.append(argv) or 0
    monkeypatch.setitem(sys.modules, "broker.__main__", fake)
    assert main(["broker", "conf/server.properties", "--override", "a=b", "--help"]) == 0
    assert seen == [["conf/server.properties", "--override", "a=b", "--help"]]


def test_broker_help_is_the_brokers(capsys):
    code, out, _ = run(capsys, "broker", "--help")
    assert code == 0 and "--override" in out


def test_broker_unavailable_is_one_line(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "broker.__main__", None)  # import fails
    code, _, err = run(capsys, "broker")
    assert code == 1
    assert one_line(err).startswith("kafkalog broker: error: the broker is not available: ")


# --- common.py ---

def test_parse_key_value():
    assert parse_key_value(" retention.ms = 1000 ", "--config") == ("retention.ms", "1000")
    assert parse_key_value("k=a=b", "--config") == ("k", "a=b")
    assert parse_key_value("k=", "--config") == ("k", "")
    for bad in ("novalue", "=v", " =v"):
        with pytest.raises(CliError, match="--config"):
            parse_key_value(bad, "--config")


def test_warn_is_one_line(capsys):
    common.warn("dump-log", "careful")
    assert capsys.readouterr().err == "kafkalog dump-log: warning: careful\n"


class _Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


def test_progress_policy(monkeypatch):
    big = common.PROGRESS_THRESHOLD_BYTES + 1
    monkeypatch.setattr(sys, "stderr", _Stream(tty=True))
    monkeypatch.setattr(sys, "stdout", _Stream(tty=False))
    assert progress(big, "x", file=io.StringIO()).enabled
    assert not progress(common.PROGRESS_THRESHOLD_BYTES, "x").enabled  # a short command: quiet
    monkeypatch.setattr(sys, "stdout", _Stream(tty=True))
    assert not progress(big, "x").enabled  # output lines already show progress
    monkeypatch.setattr(sys, "stderr", _Stream(tty=False))
    monkeypatch.setattr(sys, "stdout", _Stream(tty=False))
    assert not progress(big, "x").enabled


def test_progress_bar_counts_bytes():
    sink = io.StringIO()
    with progress(10 * 1024 * 1024, "dump-log", enabled=True, file=sink) as bar:
        for _ in range(10):
            bar.advance(1024 * 1024)
        bar.describe("00000000000000000000.log")
        bar.advance(1)
    task = bar._progress.tasks[0]
    assert task.completed == 10 * 1024 * 1024 + 1 and task.description == "00000000000000000000.log"
    with progress(100, "quiet", enabled=False) as quiet:
        quiet.advance(50)
        quiet.describe("x")
    assert quiet._progress is None
