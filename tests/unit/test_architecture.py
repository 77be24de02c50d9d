"""The import rules that keep the packages legible, read statically from the source.

- nothing outside ``pgbeat.cli`` imports from it (the command line is an edge, not a library);
- the pure modules (fire times, DST, catch-up, backoff, durations, verdicts, the schedules
  file parser) import no I/O: no psycopg, no threads, no sockets, no other pgbeat module
  that does;
- no import cycles among pgbeat's modules;
- the statement modules (``pgbeat.db.sql``) import nothing from pgbeat.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

PURE = (
    "pgbeat.backoff",
    "pgbeat.job_inputs",
    "pgbeat.durations",
    "pgbeat.scheduling.schedule",
    "pgbeat.scheduling.fires",
    "pgbeat.scheduling.dst",
    "pgbeat.scheduling.catchup",
    "pgbeat.scheduling.file",
    "pgbeat.worker.verdict",
    "pgbeat.worker.timers",
    "pgbeat.limits",
    "pgbeat.scheduling.cron",
    "pgbeat.scheduling.definition",
    "pgbeat.scheduling.jitter",
    "pgbeat.ui.describe",
    "pgbeat.ui.filters",
    "pgbeat.ui.redact",
    "pgbeat.ui.settings",
    "pgbeat.ui.timefmt",
    "pgbeat.ui.timeline",
    "pgbeat.worker.settings",
    "pgbeat.observe.liveness",
    "pgbeat.worker.retention_policy",
    "pgbeat.worker.results",
    "pgbeat.flow",
    "pgbeat.ui.charts",
    "pgbeat.ui.workflow_graph",
    "pgbeat.ui.performance",
    "pgbeat.scheduling.lookback",
    "pgbeat.scheduling.timing",
    "pgbeat.scheduling.lateness",
    "pgbeat.worker.fair_steps",
    "pgbeat.worker.rests",
    "pgbeat.worker.claim_cursor",
)
# Third-party and standard modules that do I/O, block or start threads.
IO_MODULES = (
    "psycopg",
    "psycopg_pool",
    "pgserver",
    "prometheus_client",
    "socket",
    "subprocess",
    "threading",
    "asyncio",
    "signal",
    "starlette",
    "uvicorn",
)
# pgbeat modules a pure module may import (themselves pure, or plain data).
PURE_ALLOWED = (*PURE, "pgbeat.errors", "pgbeat.job")


def _module_name(path: Path) -> str:
    name = ".".join(path.relative_to(SRC).with_suffix("").parts)
    return name.removesuffix(".__init__")


@functools.cache  # read once: the tests below ask for it per import
def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted((SRC / "pgbeat").rglob("*.py"))}


def _imports(name: str, path: Path, known: set[str]) -> Iterator[str]:
    """Every module ``name`` imports, at any depth of its code (function-level too)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            # Importing pgbeat.x.y runs pgbeat.x's __init__ first: the package counts too.
            yield base
            yield from (f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known)


@functools.cache
def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: set(_imports(name, path, known)) for name, path in modules.items()}


def _is_under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_nothing_outside_the_cli_imports_it() -> None:
    offenders = [
        f"{name} imports {imported}"
        for name, imports in _graph().items()
        if not _is_under(name, "pgbeat.cli") and name != "pgbeat.__main__"
        for imported in imports
        if _is_under(imported, "pgbeat.cli")
    ]
    assert offenders == []


@pytest.mark.parametrize("module", PURE)
def test_pure_modules_import_no_io(module: str) -> None:
    imports = _graph()[module]
    io = [m for m in imports if any(_is_under(m, io) for io in IO_MODULES)]
    packages = {name for name, path in _modules().items() if path.name == "__init__.py"}
    impure = [
        m for m in imports if _is_under(m, "pgbeat") and m not in packages and m not in PURE_ALLOWED
    ]
    assert (io, impure) == ([], [])


def test_no_import_cycles() -> None:
    graph = {
        name: {m for m in imports if m in _modules() and m not in (name, "pgbeat")}
        for name, imports in _graph().items()
    }
    # A package's __init__ that imports its own submodules makes a cycle with every submodule
    # importing "from package import x". The one exception is pgbeat's own __init__, the
    # public API: it re-exports from every layer, and only edge modules (the demo, contrib)
    # import from it, as an application would.
    cycles: list[list[str]] = []
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    assert cycles == []


def test_statement_modules_import_nothing_from_pgbeat() -> None:
    """db/sql/ is the bottom layer: statements only, so every module may import them."""
    offenders = [
        f"{name} imports {imported}"
        for name, imports in _graph().items()
        if _is_under(name, "pgbeat.db.sql")
        for imported in imports
        if _is_under(imported, "pgbeat") and not _is_under(imported, "pgbeat.db.sql")
    ]
    assert offenders == []


# The layers, lowest first: a module imports from its own layer or a lower one, never up.
LAYERS = (
    ("pgbeat.db",),
    ("pgbeat.observe",),
    ("pgbeat.jobs",),
    ("pgbeat.scheduling", "pgbeat.worker"),
    ("pgbeat.ui", "pgbeat.cli"),
)


def _layer(module: str) -> int | None:
    for height, packages in enumerate(LAYERS):
        if any(_is_under(module, package) for package in packages):
            return height
    return None


def test_no_import_from_a_lower_layer_up() -> None:
    """db -> observe -> jobs -> scheduling, worker -> ui, cli: imports point down only."""
    offenders = []
    for name, imports in _graph().items():
        height = _layer(name)
        for imported in imports:
            above = _layer(imported)
            if height is not None and above is not None and above > height:
                offenders.append(f"{name} imports {imported}")
    assert offenders == []


def test_the_rules_can_fail() -> None:
    """The checker sees a violation when one exists (a positive control)."""
    graph = _graph()
    assert "pgbeat.scheduling.schedule" in graph["pgbeat.scheduling.file"]
    assert any(_is_under(m, "psycopg") for m in graph["pgbeat.db.runner"])
    assert (
        "pgbeat.cli.common" in graph["pgbeat.cli.main"] or "pgbeat.cli" in graph["pgbeat.cli.main"]
    )


def test_every_module_that_calls_itself_pure_is_checked() -> None:
    """A module whose docstring says it is pure is held to it by the test above."""
    claims = {
        name
        for name, path in _modules().items()
        if path.name != "__init__.py"
        and re.search(r"\bpure\b", ast.get_docstring(ast.parse(path.read_text())) or "", re.I)
    }
    assert sorted(claims - set(PURE)) == []


def _statement_constants() -> set[tuple[str, str]]:
    """Every statement constant of ``pgbeat.db.sql`` (an upper-case top-level name of any
    module of the package, at any depth), as (module, name). A name may be defined by two
    modules (``JOBS_RETRY``: a run retried, and an operator's retry)."""
    found: set[tuple[str, str]] = set()
    for path in sorted((SRC / "pgbeat" / "db" / "sql").rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            target: ast.expr | None = node.target if isinstance(node, ast.AnnAssign) else None
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
            if isinstance(target, ast.Name) and re.fullmatch(r"[A-Z][A-Z0-9_]*", target.id):
                found.add((_module_name(path), target.id))
    return found


def _statements_run() -> set[tuple[str, str]]:
    """Every (module, name) that code outside ``pgbeat.db.sql`` reads as ``alias.NAME``,
    where ``alias`` is a module of ``pgbeat.db.sql`` it imported."""
    used: set[tuple[str, str]] = set()
    for name, path in _modules().items():
        if _is_under(name, "pgbeat.db.sql"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        aliases = {
            alias.asname or alias.name: f"{node.module}.{alias.name}"
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and _is_under(node.module or "", "pgbeat.db.sql")
            for alias in node.names
        }
        used |= {
            (aliases[node.value.id], node.attr)
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
        }
    return used


def test_every_statement_constant_is_used() -> None:
    """A statement nothing runs is dead code that still looks like a contract (and a
    grant to keep): each constant of every module of db/sql/ is read, through an import of
    that very module, by a module of src/ outside db/sql/."""
    constants = _statement_constants()
    assert len(constants) > 100  # the scan found the statements
    assert sorted(constants - _statements_run()) == []
