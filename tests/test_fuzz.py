"""Coverage-guided fuzzing of the broker's parsers (tests/fuzz/, atheris):

* every corpus input (real client requests, batches, SASL exchanges and TLS ClientHellos
  captured by tools/capture_fuzz_corpus.py, real segments) and every regression (a finding saved in
  tests/fuzz/regressions/<target>/) is replayed through its target: only the errors the
  parser promises for bad input may come out;
* a short coverage-guided run of each target (a few thousand inputs, seeded with the
  corpus) finds nothing; the six runs share one instrumented import of the broker
  (``tests.fuzz.run --each``), which costs far more than their inputs. ``make fuzz`` runs
  the long version (10 minutes a target).
"""

from __future__ import annotations

import json
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


@pytest.fixture(scope="module")
def short_runs(tmp_path_factory) -> dict[str, tuple[int, Path]]:
    """One short coverage-guided run of every target, after one instrumented import
    (``tests.fuzz.run --each``): each target's (exit status, working directory)."""
    pytest.importorskip("atheris")
    root = tmp_path_factory.mktemp("fuzz")
    plan = []
    for target in TARGETS:
        work = root / target
        (work / "tmp").mkdir(parents=True)
        shutil.copytree(FUZZ / "corpus" / target, work / "corpus")
        plan.append({"target": target, "log": str(work / "log"), "tmpdir": str(work / "tmp"),
                     "args": [f"-runs={SHORT_RUNS[target]}", "-max_len=4096", f"-artifact_prefix={work}/",
                              str(work / "corpus")]})
    (root / "plan.json").write_text(json.dumps(plan))
    out = subprocess.run(
        [sys.executable, "-m", "tests.fuzz.run", "--each", str(root / "plan.json")],
        capture_output=True, text=True, timeout=900, cwd=ROOT,
        # TMPDIR: libFuzzer ends the process without atexit handlers, so a target's scratch
        # directory (tempfile.mkdtemp) must live under the run's own directory
        env=dict(os.environ, PYTHONPATH=str(ROOT), TMPDIR=str(root)))
    assert out.returncode == 0, out.stderr[-4000:]
    statuses = json.loads(out.stdout.strip().splitlines()[-1])
    return {target: (statuses[target], root / target) for target in TARGETS}


@pytest.mark.parametrize("target", TARGETS)
def test_short_coverage_guided_run(target, short_runs):
    status, work = short_runs[target]
    crashes = list(work.glob("crash-*")) + list(work.glob("timeout-*")) + list(work.glob("oom-*"))
    log = (work / "log").read_text(errors="replace")
    assert status == 0 and not crashes, (
        f"status {status}, finding(s) {[c.name for c in crashes]}: copy them into tests/fuzz/regressions/{target}/\n"
        + log[-4000:])
    assert "Done" in log and "INITED" in log, log[-4000:]  # the run reached its end, over the seeded corpus
