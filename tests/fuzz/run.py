"""Run one fuzz target under atheris (coverage-guided): ``python -m tests.fuzz.run
TARGET [libFuzzer options] [CORPUS_DIR ...]``, e.g. ``-runs=2000`` for a short run or
``-max_total_time=600`` for a long one (``make fuzz``). The broker's modules are imported
instrumented; a finding is written by libFuzzer as ``crash-<sha1>`` in the working
directory (``-artifact_prefix=``): copy it into ``tests/fuzz/regressions/TARGET/``.
A target with a libFuzzer dictionary ``tests/fuzz/dicts/TARGET.dict`` gets it (``-dict=``).
"""

from __future__ import annotations

import logging
import sys
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


def main() -> None:
    logging.disable(logging.CRITICAL)  # recovery's warnings on every input are noise here
    target = sys.argv[1]
    fn = targets.FUNCTIONS[target]
    allowed = targets.ALLOWED[target]

    def one(data: bytes) -> None:
        try:
            fn(data)
        except allowed:
            pass

    args = sys.argv[2:]
    dictionary = Path(__file__).resolve().parent / "dicts" / f"{target}.dict"
    if dictionary.exists() and not any(a.startswith("-dict=") for a in args):
        args = [f"-dict={dictionary}", *args]
    atheris.Setup([sys.argv[0], *args], one)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
