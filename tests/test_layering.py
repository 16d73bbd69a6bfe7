"""The layers of docs/DESIGN.md, enforced: which package may import which, one test a rule.

The import graph is read from the source with ``ast`` (every ``import`` and ``from ...
import`` of a module, the ones inside functions too: a lazy import is still an arrow), so
a rule fails on the line that breaks it, whether or not that line has run. The layers,
top to bottom (arrows point down only)::

    spark_kafkalog
    broker.tools
    broker.client            broker.server   (its coordinator runtime below group/, txn/, registry/)
    broker.protocol          broker.log
    broker.schema            broker.record

Also checked: the graph of the project's modules has no cycle, and the one arrow from
``spark_kafkalog`` into ``broker.tools`` is the ``kafkalog`` dispatcher's.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("broker", "spark_kafkalog")
# The `kafkalog` entry point (spark_kafkalog/cli: the dispatcher and its Spark subcommand,
# export, which shares the tools' error and progress helpers) dispatches every subcommand:
# the Spark-free ones from broker.tools, export from spark_kafkalog. It is the only part of
# spark_kafkalog that may import broker.tools.
DISPATCHER = "spark_kafkalog.cli"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[_module_name(path)] = path
    found["pyspark_kafkalog"] = ROOT / "pyspark_kafkalog.py"
    return found


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


@cache
def imports() -> dict[str, set[tuple[str, int]]]:
    """module -> {(imported module, line)}; ``from a import b`` counts ``a.b`` when that
    is a module of the project, else ``a``."""
    known = modules()
    graph: dict[str, set[tuple[str, int]]] = {}
    for name, path in known.items():
        tree = ast.parse(path.read_text(), str(path))
        edges = graph.setdefault(name, set())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                edges.update((alias.name, node.lineno) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                target = _resolve(name, path.name == "__init__.py", node)
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    edges.add((sub if sub in known else target, node.lineno))
    return graph


def _within(module: str, package: str | None) -> bool:
    return package is not None and (module == package or module.startswith(package + "."))


def violations(importer: str, forbidden: tuple[str, ...], allowed: str | None = None) -> list[str]:
    """Every import by a module of package ``importer`` (but not of ``allowed``) of a
    module of one of the ``forbidden`` packages, as ``file:line: imports module``."""
    bad = []
    for module, edges in imports().items():
        if not _within(module, importer) or _within(module, allowed):
            continue
        for target, line in sorted(edges):
            if any(_within(target, f) for f in forbidden):
                bad.append(f"{modules()[module].relative_to(ROOT)}:{line}: imports {target}")
    return bad


def test_the_graph_is_read() -> None:
    graph = imports()
    assert "broker.record.batch" in graph and "spark_kafkalog.source" in graph
    assert any(t.startswith("broker.record") for t, _ in graph["broker.log.segment"])


def test_record_imports_nothing_of_the_project() -> None:
    assert violations("broker.record", ("broker.log", "broker.protocol", "broker.server",
                                        "broker.client", "broker.tools", "broker.config",
                                        "spark_kafkalog")) == []


def test_schema_formats_are_sans_io_below_everything_but_record() -> None:
    assert violations("broker.schema", ("broker.log", "broker.protocol", "broker.server", "broker.client",
                                        "broker.tools", "broker.config", "spark_kafkalog")) == []


def test_the_schema_registry_is_written_on_the_runtime_and_the_schema_formats() -> None:
    used = {t for m, edges in imports().items() if _within(m, "broker.server.registry") for t, _ in edges}
    assert any(_within(t, RUNTIME) for t in used) and any(_within(t, "broker.schema") for t in used)
    assert violations("broker.server.registry", ("broker.server.group", "broker.server.txn",
                                                 "broker.server.broker", "broker.server.apis")) == []


def test_protocol_knows_nothing_of_files_sockets_or_clients() -> None:
    assert violations("broker.protocol", ("broker.log", "broker.server", "broker.client",
                                          "broker.tools", "spark_kafkalog")) == []


def test_log_never_imports_protocol_or_server() -> None:
    assert violations("broker.log", ("broker.protocol", "broker.server", "broker.client",
                                     "broker.tools", "spark_kafkalog")) == []


def test_client_never_imports_log_or_server() -> None:
    assert violations("broker.client", ("broker.log", "broker.server", "broker.tools",
                                        "spark_kafkalog")) == []


def test_server_never_imports_client_or_tools() -> None:
    assert violations("broker.server", ("broker.client", "broker.tools", "spark_kafkalog")) == []


# What the coordinator runtime (broker/server/coordinator) may import: the layers below the
# server, and the server's shared error mapping and request-types package.
RUNTIME = "broker.server.coordinator"
RUNTIME_MAY_IMPORT = ("broker.log", "broker.record", "broker.protocol", "broker.server.errors",
                      "broker.server.handlers", RUNTIME)


def test_coordinator_runtime_imports_nothing_of_the_coordinators() -> None:
    assert violations(RUNTIME, ("broker.server.group", "broker.server.txn", "broker.server.broker",
                                "broker.server.apis")) == []
    bad = []
    for module, edges in imports().items():
        if not _within(module, RUNTIME):
            continue
        for target, line in sorted(edges):
            if target.startswith("broker.") and not any(_within(target, a) for a in RUNTIME_MAY_IMPORT):
                bad.append(f"{modules()[module].relative_to(ROOT)}:{line}: imports {target}")
            if _within(target, "broker.server.handlers") and target != "broker.server.handlers":
                bad.append(f"{modules()[module].relative_to(ROOT)}:{line}: imports the handler {target}")
    assert bad == []


def test_the_coordinators_are_written_on_the_runtime_and_not_on_each_other() -> None:
    for package in ("broker.server.group", "broker.server.txn"):
        used = {t for m, edges in imports().items() if _within(m, package) for t, _ in edges}
        assert any(_within(t, RUNTIME) for t in used), f"{package} does not use the coordinator runtime"
    # the transaction coordinator reaches the group coordinator through the object it is given
    assert violations("broker.server.txn", ("broker.server.group",)) == []
    assert violations("broker.server.group", ("broker.server.txn",)) == []


def test_tools_never_import_spark_kafkalog() -> None:
    assert violations("broker.tools", ("spark_kafkalog", "pyspark_kafkalog")) == []


def test_nothing_under_broker_imports_pyspark() -> None:
    assert violations("broker", ("pyspark", "py4j", "spark_kafkalog", "pyspark_kafkalog")) == []


def test_spark_kafkalog_reaches_tools_and_server_only_through_the_dispatcher() -> None:
    assert violations("spark_kafkalog", ("broker.__main__", "broker.server", "broker.tools"),
                      allowed=DISPATCHER) == []


def test_the_import_graph_has_no_cycle() -> None:
    known = modules()
    graph = {m: sorted({t for t, _ in edges if t in known and t != m}) for m, edges in imports().items()}
    # A package's __init__ that re-exports its submodules, and a submodule importing a
    # sibling through the package, is the ordinary shape of a package: not a cycle. So an
    # arrow from a module into one of its own parent packages is left out.
    for m in graph:
        graph[m] = [t for t in graph[m] if not m.startswith(t + ".")]
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in graph.get(m, ()):
            if state.get(t) == 1:
                cycles.append(stack[stack.index(t):] + [t])
            elif t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    assert cycles == [], "\n".join(" -> ".join(c) for c in cycles)
