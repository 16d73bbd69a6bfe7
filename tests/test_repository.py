"""The repository stands on its own: nothing it ships points outside it.

A fresh clone, with nothing beside it, must pass ``make test`` (``.ci/fresh-clone`` proves
it in CI). These checks name the file and line that would break it on a user's machine:
no file reads or sends readers to ``../shared`` (the steering documents beside the
project's root on the developers' machines), and no file names an absolute path of one
machine. Kafka's JSON definitions the generator and the tests use are kept in
``tools/kafka-spec`` with the Kafka commit they come from.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "tools" / "kafka-spec"
THIS = Path(__file__).resolve()

# `../shared` in any spelling, and home or workspace directories of one machine.
OUTSIDE = re.compile(r"\.\./shared\b|\bparent\s*/\s*[\"']shared[\"']|(?<![\w.])/(?:work|home|Users)/\w")


def tracked_text_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    files = []
    for name in out.decode().split("\0"):
        path = ROOT / name
        # .ci/ describes the CI machine, which does lay ../shared beside its clone
        if not name or name.startswith(".ci/") or SPEC in path.parents or path == THIS or not path.is_file():
            continue
        if path.suffix in {".py", ".md", ".toml", ".cfg", ".properties", ".conf", ".ipynb", ".sh", ".txt",
                           ".json", ".yml", ".yaml"} or path.name == "Makefile":
            files.append(path)
    return files


def test_nothing_points_outside_the_repository() -> None:
    files = tracked_text_files()
    assert any(f.name == "README.md" for f in files) and any(f.suffix == ".py" for f in files)
    hits = [f"{f.relative_to(ROOT)}:{n}: {line.strip()}"
            for f in files
            for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1)
            if OUTSIDE.search(line)]
    assert hits == []


def test_the_pattern_catches_what_it_is_for() -> None:
    for bad in ('SPEC = ROOT.parent / "shared" / "kafka-spec"', "see ../shared/DESIGN.md",
                'Path("/work/shared/kafka-spec/storage/x.json")', "/home/alice/kafka"):
        assert OUTSIDE.search(bad), bad
    for fine in ("/tmp/kafka-logs", "--checkpoint-dir /shared/checkpoints/pipeline", "tests/support/spark.py"):
        assert not OUTSIDE.search(fine), fine


def test_kafka_spec_is_kept_with_its_commit() -> None:
    readme = (SPEC / "README.md").read_text()
    assert re.search(r"\b[0-9a-f]{40}\b", readme), "tools/kafka-spec/README.md names the Kafka commit"
    for folder in ("message", "storage", "group-coordinator"):
        files = sorted((SPEC / folder).glob("*.json"))
        assert files, folder
        assert all("Licensed to the Apache Software Foundation" in f.read_text()[:400] for f in files)
