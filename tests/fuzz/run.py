"""Run one fuzz target under atheris (coverage-guided): ``python -m tests.fuzz.run
TARGET [libFuzzer options] [CORPUS_DIR ...]``, e.g. ``-runs=2000`` for a short run or
``-max_total_time=600`` for a long one (``make fuzz``). The broker's modules are imported
instrumented; a finding is written by libFuzzer as ``crash-<sha1>`` in the working
directory (``-artifact_prefix=``): copy it into ``tests/fuzz/regressions/TARGET/``.
A target with a libFuzzer dictionary ``tests/fuzz/dicts/TARGET.dict`` gets it (``-dict=``).

``python -m tests.fuzz.run --each PLAN.json`` runs several targets after ONE instrumented
import (most of a short run's cost: ~8 s, against ~1 s for a few thousand inputs): the
plan is a JSON list of ``{"target", "args", "log", "tmpdir"}``; each target runs in a
forked child (libFuzzer ends its process when the run ends), one after the other, with
its standard error in ``log`` and its scratch files under ``tmpdir``. The parent prints
one JSON object, each target's exit status (0: nothing found), and exits 0.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import sys
import tempfile
import traceback
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["broker"]):
    # everything the targets reach, imported here so that it is instrumented
    import broker.log.config  # noqa: F401
    import broker.log.unified_log  # noqa: F401
    import broker.log.validator  # noqa: F401
    import broker.protocol  # noqa: F401
    import broker.protocol.schema  # noqa: F401
    import broker.protocol.scram  # noqa: F401
    import broker.protocol.versions  # noqa: F401
    import broker.record.batch  # noqa: F401
    import broker.record.columnar.decode  # noqa: F401
    import broker.record.validation  # noqa: F401
    import broker.server.security.jwks  # noqa: F401
    import broker.server.security.oauthbearer  # noqa: F401
    import broker.server.security.plain  # noqa: F401
    import broker.server.security.sasl  # noqa: F401
    import broker.server.security.scram  # noqa: F401
    import broker.server.socket_server  # noqa: F401
    import broker.server.ssl_context  # noqa: F401
    from tests.fuzz import targets


def fuzz(target: str, args: list[str]) -> None:
    """Run ``target`` under libFuzzer with ``args``; does not return."""
    logging.disable(logging.CRITICAL)  # recovery's warnings on every input are noise here
    fn = targets.FUNCTIONS[target]
    allowed = targets.ALLOWED[target]

    def one(data: bytes) -> None:
        try:
            fn(data)
        except allowed:
            pass

    dictionary = Path(__file__).resolve().parent / "dicts" / f"{target}.dict"
    if dictionary.exists() and not any(a.startswith("-dict=") for a in args):
        args = [f"-dict={dictionary}", *args]
    atheris.Setup([sys.argv[0], *args], one)
    atheris.Fuzz()


def fuzz_each(plan_path: str) -> None:
    """The ``--each`` mode (module docstring)."""
    statuses: dict[str, int] = {}
    for step in json.loads(Path(plan_path).read_text()):
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                log = os.open(step["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(log, 1)
                os.dup2(log, 2)
                os.environ["TMPDIR"] = tempfile.tempdir = step["tmpdir"]
                fuzz(step["target"], list(step["args"]))
            except SystemExit as exc:  # atheris' way out of an uncaught exception in the target
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException:  # noqa: BLE001 - reported in the child's log, as its status
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                # the C library's exit, as the single-target mode's interpreter exit ends in:
                # libFuzzer's exit handler writes the input that made the target exit
                # (crash-*); the child never returns into the parent's loop
                ctypes.CDLL(None).exit(code)
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        statuses[step["target"]] = os.waitstatus_to_exitcode(status)
    print(json.dumps(statuses))


def main() -> None:
    if sys.argv[1] == "--each":
        fuzz_each(sys.argv[2])
    else:
        fuzz(sys.argv[1], sys.argv[2:])


if __name__ == "__main__":
    main()
