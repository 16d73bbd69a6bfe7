"""Each thing is defined once under broker/ (issue 12), checked on the source with ``ast``:

* an exception class name is defined by one module, or else every class of that name is
  a subclass of another of them (one concept, refined by an upper layer);
* the bounds of Java's int and long are assigned only in ``broker/record/limits.py``;
* the log-entry prefix struct (">qi": baseOffset, batchLength) is built only in
  ``broker/record/batch.py``; ``broker/log/index.py``'s TIME_ENTRY is the same layout for a
  different thing (timestamp, relative offset);
* raw batch-header tuples are indexed by name (``batch.H_*``), never by a number literal.
"""

from __future__ import annotations

import ast
import functools
import importlib
import itertools
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BROKER = ROOT / "broker"
BOUNDS = {-(1 << 31), (1 << 31) - 1, -(1 << 63), (1 << 63) - 1}


@functools.cache
def modules() -> list[tuple[str, ast.Module]]:
    """Every module under broker/, parsed (once per process, when a test first asks: not at
    collection, which every pytest-xdist worker runs)."""
    out = []
    for path in sorted(BROKER.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        out.append((rel, ast.parse(path.read_text(encoding="utf-8"), filename=rel)))
    return out


def _module_name(rel: str) -> str:
    name = rel[:-3].replace("/", ".")
    return name[:-len(".__init__")] if name.endswith(".__init__") else name


def _is_exception_def(node: ast.ClassDef) -> bool:
    names = [node.name] + [b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "")
                           for b in node.bases]
    return any(n.endswith(("Error", "Exception")) for n in names)


def test_an_exception_name_is_one_concept() -> None:
    defined: dict[str, list[str]] = defaultdict(list)
    for rel, tree in modules():
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and _is_exception_def(node):
                defined[node.name].append(rel)
    assert len(defined) > 40  # the walk found the hierarchies
    unrelated = []
    for name, rels in sorted(defined.items()):
        if len(rels) < 2:
            continue
        classes = [getattr(importlib.import_module(_module_name(r)), name) for r in rels]
        for (ra, a), (rb, b) in itertools.combinations(zip(rels, classes), 2):
            if not (issubclass(a, b) or issubclass(b, a)):
                unrelated.append(f"{name}: {ra} and {rb}")
    assert not unrelated, "same name, unrelated classes: " + "; ".join(unrelated)


def _int_value(node: ast.AST) -> int | None:
    """The value of a constant integer expression (literals, unary -, <<, +, -), else None."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _int_value(node.operand)
        return None if v is None else -v
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.LShift, ast.Add, ast.Sub)):
        a, b = _int_value(node.left), _int_value(node.right)
        if a is None or b is None:
            return None
        return a << b if isinstance(node.op, ast.LShift) else a + b if isinstance(node.op, ast.Add) else a - b
    return None


def _assigned_values(tree: ast.Module):
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            yield node.lineno, values


def test_int_bounds_are_defined_in_limits_only() -> None:
    found = []
    for rel, tree in modules():
        for line, values in _assigned_values(tree):
            if any(_int_value(v) in BOUNDS for v in values):
                found.append(f"{rel}:{line}")
    assert [f for f in found if not f.startswith("broker/record/limits.py:")] == []
    assert len(found) == 4
    limits = importlib.import_module("broker.record.limits")
    assert (limits.INT32_MIN, limits.INT32_MAX) == (-2**31, 2**31 - 1)
    assert (limits.INT64_MIN, limits.INT64_MAX) == (-2**63, 2**63 - 1)
    config = importlib.import_module("broker.config")
    assert config.LONG_MAX is limits.INT64_MAX and config.INT_MAX is limits.INT32_MAX


def _struct_formats(tree: ast.Module):
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "Struct" and node.args
                and isinstance(node.args[0], ast.Constant)):
            yield node.lineno, node.args[0].value


def test_log_entry_prefix_struct_is_defined_once() -> None:
    found = sorted(rel for rel, tree in modules()
                   for _, fmt in _struct_formats(tree) if fmt == ">qi")
    assert found == ["broker/log/index.py", "broker/record/batch.py"]
    batch = importlib.import_module("broker.record.batch")
    assert batch.LOG_ENTRY_PREFIX.format == ">qi" and batch.LOG_ENTRY_PREFIX.size == batch.LOG_OVERHEAD


HEADER_TUPLE_NAMES = {"header", "h", "hdr"}


@pytest.mark.parametrize("area", ["broker/log", "broker/client/consumer", "broker/record"])
def test_batch_header_tuples_are_indexed_by_name(area: str) -> None:
    found = []
    for rel, tree in modules():
        if not rel.startswith(area + "/"):
            continue
        for node in ast.walk(tree):
            if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
                    and node.value.id in HEADER_TUPLE_NAMES and _int_value(node.slice) is not None):
                found.append(f"{rel}:{node.lineno}")
    assert not found, f"batch header fields indexed by number: {found}"
