"""notebooks/explore.ipynb runs end to end, so that the tutorial never rots.

Covers: the notebook executed top to bottom by nbclient in a real IPython kernel running
this interpreter (the project's venv: the kernel spec is written for the test, so no
machine-wide Jupyter setup is relied upon), in notebooks/ as its working directory, with
the real embedded broker (with its Schema Registry), producer, consumer and Spark in local
mode. Checks: no cell failed; the kernel ran this interpreter; the five figures were drawn
(five PNG outputs); the printed totals agree (records read by Spark = records produced; the
lag consumer read what was produced while it ran; network mode = direct mode); the typed
Avro section (a typed write with ``valueFormat=avro`` that registers the value schema, a
typed read back) read as many rows as it wrote, every one with the registered schema's id,
and kept the one value that is not Avro aside in ``_corrupt_value``; the broker stopped
cleanly. The committed notebook must carry no outputs (it is executed here, in
memory, and never written back).

A failed cell must not leave the notebook's broker running (it runs in a session of its
own, so it outlives a killed kernel): whatever happens, the same kernel then runs
``CLEANUP``, which closes the producer and stops Spark and the broker if the notebook
created them.

Takes about 65 s on an otherwise idle 2-core machine (Spark's start-up and its first
Python data source job are most of it), about twice that when other Spark jobs run.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell

REPO = Path(__file__).resolve().parent.parent
NOTEBOOK = REPO / "notebooks" / "explore.ipynb"
KERNEL_NAME = "spark-kafkalog-test"
CELL_TIMEOUT_S = 300
CLEANUP = """
for _name, _stop in (("producer", "close"), ("spark", "stop"), ("broker", "stop")):
    if _name in globals():
        try:
            getattr(globals()[_name], _stop)()
        except Exception as _exc:
            print(f"cleanup: {_name}.{_stop}(): {_exc!r}")
"""


def execute_notebook(nb, workdir: Path, kernel_name: str) -> None:
    """Run every cell of ``nb`` in a fresh kernel (outputs land in ``nb``), then
    ``CLEANUP`` in the same kernel, also after a failed cell; raises the first failure
    (``CellExecutionError`` carries the cell's traceback)."""
    client = NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name=kernel_name,
                            resources={"metadata": {"path": str(workdir)}})
    with client.setup_kernel():
        try:
            for index, cell in enumerate(nb.cells):
                client.execute_cell(cell, index)
        finally:
            try:
                client.execute_cell(new_code_cell(CLEANUP), len(nb.cells))
            except Exception as exc:  # a dead or stuck kernel: report, keep the first error
                print(f"notebook cleanup failed: {exc!r}", file=sys.stderr)


def _stdout(nb) -> str:
    """Everything the notebook's cells printed to stdout, in cell order."""
    return "".join(out.get("text", "") for cell in nb.cells if cell.cell_type == "code"
                   for out in cell.get("outputs", [])
                   if out.output_type == "stream" and out.name == "stdout")


def _one_int(pattern: str, text: str) -> int:
    found = re.findall(pattern, text, re.MULTILINE)
    assert len(found) == 1, f"expected one line matching {pattern!r}, found {found}"
    return int(found[0])


def test_committed_notebook_is_clean() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    assert code_cells
    assert all(not c.outputs and c.execution_count is None for c in code_cells), \
        "commit notebooks/explore.ipynb without outputs"


@pytest.mark.timeout(900)
def test_explore_notebook_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A kernel spec of our own: the kernel runs exactly this interpreter (the venv's).
    spec_dir = tmp_path / "jupyter" / "kernels" / KERNEL_NAME
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "spark-kafkalog (test)", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))  # no user profile/startup
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel's inline backend draws
    # Spark's Python workers run this interpreter and see the repository (as in
    # tests/support/spark.py), whatever kind of editable install the venv has.
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    paths = [str(REPO)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(dict.fromkeys(paths)))

    nb = nbformat.read(NOTEBOOK, as_version=4)
    try:
        execute_notebook(nb, NOTEBOOK.parent, KERNEL_NAME)
    finally:
        nbformat.write(nb, tmp_path / "explore.executed.ipynb")  # for a look after a failure

    errors = [out for cell in nb.cells if cell.cell_type == "code"
              for out in cell.outputs if out.output_type == "error"]
    assert not errors
    text = _stdout(nb)

    kernel_python = re.search(r"^kernel python: (.+)$", text, re.MULTILINE).group(1)
    assert os.path.realpath(kernel_python) == os.path.realpath(sys.executable)

    images = [out for cell in nb.cells if cell.cell_type == "code" for out in cell.outputs
              if out.output_type == "display_data" and "image/png" in out.get("data", {})]
    assert len(images) == 5, f"expected 5 plots, got {len(images)}"

    produced = _one_int(r"^records produced: (\d+) ", text)
    read = _one_int(r"^records read: (\d+)$", text)
    assert produced > 0 and read == produced
    per_partition = re.search(r"^records per partition: (\{.*\})$", text, re.MULTILINE).group(1)
    counts = [int(n) for n in re.findall(r": (\d+)", per_partition)]
    assert len(counts) == 4 and sum(counts) == read

    lag = re.search(r"^consumer read: (\d+) of (\d+) produced meanwhile$", text, re.MULTILINE)
    assert lag is not None and int(lag.group(1)) == int(lag.group(2)) > 0
    assert "network mode identical to direct mode: True" in text

    avro_written = _one_int(r"^avro rows written: (\d+)$", text)
    avro_read = _one_int(r"^avro rows read: (\d+)$", text)
    assert avro_written > 0 and avro_read == avro_written
    registered = re.search(r"^registered: subject readings-value, version 1, schema id (\d+)$",
                           text, re.MULTILINE)
    assert registered is not None
    assert f"valueSchemaId of the rows read: [{registered.group(1)}]" in text
    assert _one_int(r"^records kept aside in _corrupt_value: (\d+)$", text) == 1
    assert re.search(r"^broker exit code: 0 - log dir removed: True$", text, re.MULTILINE)
