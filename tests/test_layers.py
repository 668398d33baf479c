"""The service's layers, read from the source: the repository (`service/store/`) holds every
SQL statement, the API and the dashboard read the service's parts and never the scheduler's
loop, and no two modules of `service/` import each other, directly or around a circle.

Imports are read from the syntax tree, those inside functions included: a late import is
still a dependency, only a hidden one."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "andreas"
SQL_BUILDERS = {"select", "update", "delete", "insert", "func", "text"}


def modules(package: str) -> dict[str, Path]:
    """Dotted module name -> file, of every module under `package` (e.g. "service")."""
    out = {}
    for path in sorted((SRC / package).rglob("*.py")):
        parts = ("andreas",) + path.relative_to(SRC).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports(name: str, path: Path) -> list[tuple[str, list[str]]]:
    """(module imported, names taken from it) for every import statement of a module."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((target, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found.extend((a.name, []) for a in node.names)
    return found


def dependencies(package: str) -> dict[str, set[str]]:
    """Module -> the modules of `package` it imports (a module, or a name that is one)."""
    mods = modules(package)
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        deps = set()
        for target, names in imports(name, path):
            for candidate in [target] + [f"{target}.{n}" for n in names]:
                if candidate in mods and candidate != name:
                    deps.add(candidate)
        graph[name] = deps
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_circles_finds_a_circle_and_only_circles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_in_the_service():
    assert circles(dependencies("service")) == []


@pytest.mark.parametrize("package", ["service", "ui"])
def test_sql_is_written_only_in_the_store(package):
    """No module outside `service/store/` (and the migrations, which are SQL by nature) builds
    a statement: a query has one home, where a newcomer and an index review find it."""
    offenders = []
    for name, path in modules(package).items():
        if ".store" in name or ".migrations" in name:
            continue
        for target, names in imports(name, path):
            if target.startswith("sqlalchemy") and SQL_BUILDERS & set(names):
                offenders.append(f"{name}: {sorted(SQL_BUILDERS & set(names))}")
            if "select" in names:
                offenders.append(f"{name}: select from {target}")
    assert offenders == []


def test_the_api_and_the_dashboard_read_the_parts_not_the_loop():
    """Routes, pages and what they call see `Services` (the plan board, the costs, the store);
    only the assembly (api.py, services.py) knows the scheduler."""
    allowed = {"andreas.service.api", "andreas.service.services", "andreas.service.app"}
    users = []
    for package in ("service", "ui"):
        for name, path in modules(package).items():
            if name in allowed or name == "andreas.service.scheduler":
                continue
            if any(t == "andreas.service.scheduler" or
                   (t == "andreas.service" and "scheduler" in names)
                   for t, names in imports(name, path)):
                users.append(name)
    assert users == []


def test_the_store_imports_nothing_above_it():
    """The repository depends on the tables, the states and the folders' checks only."""
    below = {"andreas.service.db", "andreas.service.states", "andreas.service.folders",
             "andreas.service.group_commit"}
    graph = dependencies("service")
    above = {name: sorted(d for d in deps if not d.startswith("andreas.service.store")
                          and d not in below)
             for name, deps in graph.items() if name.startswith("andreas.service.store")}
    assert {name: deps for name, deps in above.items() if deps} == {}


def test_no_import_circle_in_the_policies():
    """The planning context builds its own arrays (planning.pack) and the orders are
    orderings.py's functions of it: the compiled kernel imports nothing of the policies."""
    assert circles(dependencies("policies")) == []
    assert not {d for d in dependencies("policies")["andreas.policies.search.kernel"]
                if d.startswith("andreas.")}


def test_the_search_and_the_steps_know_no_policy():
    """The search (policies/search/) and the steps (policies/steps/) are parts a policy is
    built from: neither imports a policy module, and the search knows no step."""
    graph = dependencies("policies")
    policies = {"andreas.policies.greedy", "andreas.policies.improved",
                "andreas.policies.baselines", "andreas.policies"}
    upward = {name: sorted(d for d in deps if d in policies
                           or (name.startswith("andreas.policies.search")
                               and d.startswith("andreas.policies.steps")))
              for name, deps in graph.items()
              if name.startswith(("andreas.policies.search", "andreas.policies.steps"))}
    assert {name: deps for name, deps in upward.items() if deps} == {}
