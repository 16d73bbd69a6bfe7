"""Every wait in a test waits for an outcome with a deadline, never for a fixed time.

An AST scan of every ``.py`` file under ``tests/``: a call of ``time.sleep(...)`` or
``asyncio.sleep(...)`` (however the module or ``sleep`` was imported, ``import time as
_time`` included) that is not inside a ``for``/``while`` loop of its own function is
flagged, unless it is marked deliberate. A sleep inside a loop is the interval of a
polling loop (or the pacing of a producer): such loops must be bounded by a deadline or
a count, which is reviewed, not scanned. For a plain "wait until X or fail after T" use
``tests.support.waits.wait_until``.

The marker convention: ``# scenario: <why>`` (a reason is required), either as a
trailing comment on one of the call's lines or in the block of comment lines right
above it. It is for a sleep that IS the scenario (a session that must time out, a broker
kept paused or down, a random moment for a kill, a request timing out into a black
hole) or a negative check ("sleep, then assert nothing happened"). Where the component
under test has a MockTime, advance that instead (``env.time.sleep(ms)`` and the like are
not sleeps and are not flagged: only names bound to the ``time``/``asyncio`` modules
are). The marker is the allowance: no file or line is listed here.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

TESTS = Path(__file__).resolve().parent
MODULES = {"time", "asyncio"}
MARKER = re.compile(r"#\s*scenario:\s*\S")
LOOPS = (ast.For, ast.AsyncFor, ast.While)
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _comments(source: str) -> dict[int, str]:
    """Line number -> the comment on it."""
    out: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            out[tok.start[0]] = tok.string
    return out


def _bound_in(scope: ast.AST) -> set[str]:
    """Names a function binds other than by import (its arguments and assignments):
    a local ``time = MockTime()`` is not the module."""
    names: set[str] = set()
    args = scope.args
    for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
        if a is not None:
            names.add(a.arg)
    if isinstance(scope, ast.Lambda):
        return names
    for node in ast.walk(scope):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def unmarked_sleeps(source: str) -> list[int]:
    """Line numbers of the sleeps that are neither in a loop nor marked deliberate."""
    tree = ast.parse(source)
    modules: set[str] = set()  # names bound to the time/asyncio modules
    sleeps: set[str] = set()   # names bound to their sleep functions
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname or a.name for a in node.names if a.name in MODULES}
        elif isinstance(node, ast.ImportFrom) and node.module in MODULES:
            sleeps |= {a.asname or a.name for a in node.names if a.name == "sleep"}
    if not modules and not sleeps:
        return []
    comments = _comments(source)
    lines = source.splitlines()
    found: list[int] = []

    def is_sleep(call: ast.Call, shadowed: set[str]) -> bool:
        f = call.func
        if isinstance(f, ast.Attribute) and f.attr == "sleep" and isinstance(f.value, ast.Name):
            return f.value.id in modules and f.value.id not in shadowed
        return isinstance(f, ast.Name) and f.id in sleeps and f.id not in shadowed

    def marked(call: ast.Call) -> bool:
        end = call.end_lineno or call.lineno
        if any(MARKER.search(comments.get(n, "")) for n in range(call.lineno, end + 1)):
            return True
        n = call.lineno - 1
        while n >= 1 and lines[n - 1].lstrip().startswith("#"):
            if MARKER.search(lines[n - 1]):
                return True
            n -= 1
        return False

    def visit(node: ast.AST, in_loop: bool, shadowed: set[str]) -> None:
        for child in ast.iter_child_nodes(node):
            loop, names = in_loop, shadowed
            if isinstance(child, SCOPES):
                loop, names = False, shadowed | _bound_in(child)
            elif isinstance(child, LOOPS):
                loop = True
            if isinstance(child, ast.Call) and not in_loop and is_sleep(child, shadowed) and not marked(child):
                found.append(child.lineno)
            visit(child, loop, names)

    visit(tree, False, set())
    return sorted(found)


def test_no_test_waits_for_a_fixed_time():
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        source = path.read_text()
        for line in unmarked_sleeps(source):
            offenders.append(f"{path.relative_to(TESTS.parent)}:{line}: {source.splitlines()[line - 1].strip()}")
    assert not offenders, (
        "a bare sleep waits for a fixed time: wait for the outcome with a deadline "
        "(tests.support.waits.wait_until), or, when the time passing is the scenario, "
        "mark it '# scenario: <why>':\n" + "\n".join(offenders))


def test_the_scan_flags_what_it_should():
    assert unmarked_sleeps("import time\ntime.sleep(1)\n") == [2]
    assert unmarked_sleeps("import time as _t\ndef f():\n    _t.sleep(1)\n") == [3]
    assert unmarked_sleeps("from time import sleep\nsleep(1)\n") == [2]
    assert unmarked_sleeps("import asyncio\nasync def f():\n    await asyncio.sleep(1)\n") == [3]
    assert unmarked_sleeps("import time\nidle = lambda: time.sleep(0.1)\n") == [2]
    # a loop's own sleep is a polling interval, but not a loop's inner function's
    assert unmarked_sleeps("import time\nwhile x():\n    time.sleep(0.1)\n") == []
    assert unmarked_sleeps("import time\nfor _ in r:\n    def g():\n        time.sleep(1)\n") == [4]
    # the marker, trailing or on the comment lines above; a reason is required
    assert unmarked_sleeps("import time\ntime.sleep(1)  # scenario: the session expires\n") == []
    assert unmarked_sleeps("import time\n# scenario: the session\n# expires\ntime.sleep(1)\n") == []
    assert unmarked_sleeps("import time\n# scenario: x\n\ntime.sleep(1)\n") == [4]
    assert unmarked_sleeps("import time\ntime.sleep(1)  # scenario:\n") == [2]
    assert unmarked_sleeps("import time\ntime.sleep(1)  # the session expires\n") == [2]
    # a MockTime is not the module
    assert unmarked_sleeps("env.time.sleep(1000)\n") == []
    assert unmarked_sleeps("def f():\n    time = MockTime()\n    time.sleep(1000)\n") == []
    assert unmarked_sleeps("import time\ndef f(time):\n    time.sleep(1000)\n") == []
