"""Tests of broker/tools/common.py (what every console tool shares: K=V parsing, warnings,
the progress-bar policy) and of the rule that broker/tools never imports spark_kafkalog
nor pyspark: every tool module imported in a fresh interpreter, and every import
statement of the package's source, lazy ones included."""

from __future__ import annotations

import ast
import io
import subprocess
import sys
from pathlib import Path

import pytest

import broker.tools
from broker.tools import TOOLS, common
from broker.tools.common import CliError, parse_key_value, progress

TOOLS_DIR = Path(broker.tools.__file__).resolve().parent
FORBIDDEN = ("spark_kafkalog", "pyspark", "py4j", "pyspark_kafkalog")


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


# --- layering: broker/tools never reaches up into spark_kafkalog or Spark ---

def _modules() -> list[str]:
    return sorted(f"broker.tools.{p.stem}" for p in TOOLS_DIR.glob("*.py") if p.stem != "__init__")


def test_every_tool_is_registered():
    helpers = {"broker.tools.common", "broker.tools.records_format", "broker.tools.log_dumper",
               "broker.tools.coordinator_decoders", "broker.tools.coordinator_schemas", "broker.tools.schemas_dump",
               "broker.tools.schema_serde"}
    assert set(TOOLS) == set(_modules()) - helpers


def test_importing_every_tool_module_loads_no_spark():
    code = ("import importlib, sys\n"
            f"for name in {_modules()!r}: importlib.import_module(name)\n"
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r}))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_no_import_statement_names_spark_kafkalog_or_pyspark():
    found = []
    for path in sorted(TOOLS_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            found += [f"{path.name}:{node.lineno} {n}" for n in names
                      if n.split(".")[0] in FORBIDDEN]
    assert found == []
