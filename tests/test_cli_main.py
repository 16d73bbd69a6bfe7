"""Tests of spark_kafkalog/cli/main.py, the ``kafkalog`` dispatcher: --help and --version,
one-line usage errors with exit 1, the common error path of subcommands, the broker
passthrough (broker/tools/server_start.py), and the lazy loading that keeps a Spark-free
subcommand of the real console script (a subprocess under ``python -X importtime``) from
importing pyspark or the Spark jobs. The shared helpers are tests/test_tools_common.py's."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pytest

from broker.config import ConfigError
from broker.tools import TOOLS
from broker.tools.common import CliError
from spark_kafkalog.cli import main as cli_main
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
    for name in ("broker", "dump-log", "topics", "produce", "consume", "groups", "export"):
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
    assert one_line(err) == ("kafkalog dump-log: error: unrecognized option '--bogus' "
                             "(see 'kafkalog dump-log --help')")
    code, _, err = run(capsys, "dump-log")
    assert code == 1
    assert one_line(err).startswith("kafkalog dump-log: error: the following arguments are required: --files")
    code, _, err = run(capsys, "dump-log", "--files", "x.log", "--max-bytes", "ten")
    assert code == 1 and "--max-bytes: 'ten' is not an integer" in one_line(err)


def test_abbreviated_options_are_refused(capsys):
    code, _, err = run(capsys, "dump-log", "--fil", "x.log")
    assert code == 1 and one_line(err).startswith("kafkalog dump-log: error: ")


@pytest.mark.parametrize("argv, message", [
    # argparse alone would first complain that one of --create, --list... is required
    (["topics", "--creat", "--topic", "x"], "unrecognized option '--creat' (did you mean '--create'?)"),
    (["topics", "--bootstrap-server=localhost:9092", "--lst"], "unrecognized option '--lst' (did you mean '--list'?)"),
    (["dump-log", "--files", "x.log", "--deep-iteratoin"],
     "unrecognized option '--deep-iteratoin' (did you mean '--deep-iteration'?)"),
    (["groups", "--bootstrap-server", "h:1", "--describe", "--grup", "g"],
     "unrecognized option '--grup' (did you mean '--group'?)"),
    (["dump-log", "--files", "x.log", "--zzzzzz"], "unrecognized option '--zzzzzz'"),
    (["topics", "--create", "--topic", "--creat"], "unrecognized option '--creat' (did you mean '--create'?)"),
])
def test_unknown_options_are_named_with_the_closest_one(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 1 and out == ""
    assert one_line(err) == f"kafkalog {argv[0]}: error: {message} (see 'kafkalog {argv[0]} --help')"


def test_values_and_tokens_after_double_dash_are_not_options():
    from argparse import ArgumentParser
    parser = ArgumentParser(allow_abbrev=False)
    parser.add_argument("--topic")
    parser.add_argument("--files", nargs="+")
    parser.add_argument("-n", type=int)
    parser.add_argument("--flag", action="store_true")
    parser.add_argument("rest", nargs="*")
    def unknown(parser, args):
        found = cli_main.unknown_option(parser, args)
        return None if found is None else found[1]
    assert unknown(parser, ["--topic", "-x", "--flag"]) == "-x"  # argparse does not take -x as a value
    assert unknown(parser, ["--topic", "--x=1"]) == "--x"
    assert unknown(parser, ["--files", "a", "b", "-n", "-5", "--flag", "--", "--creat"]) is None
    assert unknown(parser, ["-n5", "--topic=t", "file", "-"]) is None
    assert unknown(parser, ["--flag", "--flg"]) == "--flg"


def test_unknown_options_of_a_sub_subcommand_are_named(capsys):
    """``transactions find-hanging`` has options of its own: they are options, and a
    misspelt one is named with that sub-subcommand's closest option."""
    code, out, err = run(capsys, "transactions", "--bootstrap-server", "127.0.0.1:1", "find-hanging",
                         "--broker-idd", "1")
    assert code == 1 and out == ""
    assert one_line(err) == ("kafkalog transactions find-hanging: error: unrecognized option '--broker-idd' "
                             "(did you mean '--broker-id'?) (see 'kafkalog transactions find-hanging --help')")
    parser = cli_main.build_parser(cli_main._load_subcommands(), command="transactions")
    child = parser.subcommands["transactions"]
    assert cli_main.unknown_option(child, ["--bootstrap-server", "h:1", "find-hanging", "--broker-id", "1"]) is None


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


# --- the registry and lazy loading ---

def test_registry_is_the_console_tools_then_the_spark_subcommands():
    assert cli_main.SUBCOMMANDS == TOOLS + ("spark_kafkalog.cli.export_cmd",)
    assert all(name.startswith("broker.tools.") for name in TOOLS)


def test_only_the_chosen_subcommand_gets_its_options(monkeypatch, fake_command):
    called = []
    fake_command.add_arguments = lambda parser: called.append("fake")
    main(["dump-log", "--files", "/nonexistent/0.log"])
    assert called == []
    main(["fake"])
    assert called == ["fake"]


def imported_modules(*argv: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run the ``kafkalog`` console script with ``argv`` under ``python -X importtime``;
    return the process and the names of every module it imported."""
    script = Path(sys.executable).parent / "kafkalog"
    if not script.exists():
        pytest.skip("the kafkalog console script is not installed (pip install -e .)")
    proc = subprocess.run([sys.executable, "-X", "importtime", str(script), *argv],
                          capture_output=True, text=True, timeout=120)
    names = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
             if line.startswith("import time:") and "|" in line}
    return proc, names


@pytest.mark.parametrize("argv", [
    ["--help"],
    ["topics", "--help"],
    ["produce", "--help"],
    ["consume", "--help"],
    ["groups", "--help"],
    ["dump-log", "--help"],
    ["broker", "--help"],
])
def test_spark_free_subcommands_never_import_spark(argv):
    proc, names = imported_modules(*argv)
    assert proc.returncode == 0 and "usage:" in proc.stdout, proc.stderr[-3000:]
    assert "spark_kafkalog.cli.main" in names  # the console script ran through the dispatcher
    assert not {n for n in names if n.split(".")[0] in ("pyspark", "py4j", "pyarrow")}
    assert not {n for n in names if n.startswith("spark_kafkalog.jobs")}


def test_a_real_spark_free_command_never_imports_spark(tmp_path):
    """A subcommand that runs (here dump-log of an empty segment) imports no Spark either."""
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(b"")
    proc, names = imported_modules("dump-log", "--files", str(log))
    assert proc.returncode == 0 and proc.stdout.startswith(f"Dumping {log}\n"), proc.stderr[-3000:]
    assert "broker.tools.log_dumper" in names
    assert not {n for n in names if n.split(".")[0] in ("pyspark", "py4j", "pyarrow")}
    assert not {n for n in names if n.startswith("spark_kafkalog.jobs")}


def test_export_help_lists_the_jobs_choices(capsys):
    code, out, _ = run(capsys, "export", "--help")
    assert code == 0 and "{parquet,csv,json,iceberg,delta}" in out.replace(" ", "")
