"""Coverage-guided fuzzing of the broker's parsers (tests/fuzz/, atheris; issue 19):

* every corpus input (real client requests, batches, SASL exchanges and TLS ClientHellos
  captured by tools/capture_fuzz_corpus.py, real segments) and every regression (a finding saved in
  tests/fuzz/regressions/<target>/) is replayed through its target: only the errors the
  parser promises for bad input may come out;
* a short coverage-guided run of each target (a few thousand inputs, seeded with the
  corpus) finds nothing. ``make fuzz`` runs the long version (10 minutes a target).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fuzz.targets import TARGETS, run_one

FUZZ = Path(__file__).resolve().parent / "fuzz"
ROOT = FUZZ.parent.parent
SHORT_RUNS = {"request": 4000, "frames": 4000, "batch": 3000, "log_dir": 300, "sasl": 3000, "tls": 1000}


def inputs(target: str) -> list[Path]:
    return sorted(p for d in ("corpus", "regressions") for p in (FUZZ / d / target).glob("*")
                  if p.is_file() and not p.name.startswith("."))


@pytest.mark.parametrize("target", TARGETS)
def test_corpus_and_regressions_replay(target):
    files = inputs(target)
    assert files or target == "log_dir", f"no corpus for {target}: run tools/capture_fuzz_corpus.py"
    for path in files:
        run_one(target, path.read_bytes())


@pytest.mark.parametrize("target", TARGETS)
def test_short_coverage_guided_run(target, tmp_path):
    pytest.importorskip("atheris")
    corpus = tmp_path / "corpus"
    shutil.copytree(FUZZ / "corpus" / target, corpus)
    out = subprocess.run(
        [sys.executable, "-m", "tests.fuzz.run", target, f"-runs={SHORT_RUNS[target]}", "-max_len=4096",
         f"-artifact_prefix={tmp_path}/", str(corpus)],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
        # TMPDIR: libFuzzer ends the process without atexit handlers, so a target's scratch
        # directory (tempfile.mkdtemp) must live under tmp_path to be cleaned up
        env=dict(os.environ, PYTHONPATH=str(ROOT), TMPDIR=str(tmp_path)))
    crashes = list(tmp_path.glob("crash-*")) + list(tmp_path.glob("timeout-*")) + list(tmp_path.glob("oom-*"))
    assert out.returncode == 0 and not crashes, (
        f"finding(s) {[c.name for c in crashes]}: copy them into tests/fuzz/regressions/{target}/\n"
        + out.stderr[-4000:])
