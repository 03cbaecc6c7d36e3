"""The library's layers point one way: no import cycle among simcalib's modules,
counting imports deferred into functions (a deferred import that only hides a cycle is
still a cycle: the two modules cannot be understood, tested or moved apart).

The one exception: a worker process's entry point (``worker_main``) importing the
user's function through the module that builds workers in the parent."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
PKG = SRC / "simcalib"
WORKER_ENTRY = "worker_main"   # runs in a worker process only


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def import_graph() -> dict[str, set[str]]:
    """module -> the simcalib modules it imports anywhere in its body (module level,
    functions, TYPE_CHECKING blocks excluded: they never run)."""
    modules = {_module_name(p): p for p in PKG.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    for mod, path in modules.items():
        tree = ast.parse(path.read_text())
        skip: set[int] = set()
        for node in ast.walk(tree):   # `if TYPE_CHECKING:` blocks are for type checkers only
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                skip.update(id(n) for b in node.body for n in ast.walk(b))
            if isinstance(node, ast.FunctionDef) and node.name == WORKER_ENTRY:
                skip.update(id(n) for n in ast.walk(node))
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    pkg = mod if is_pkg else mod.rpartition(".")[0]
                    for _ in range(node.level - 1):
                        pkg = pkg.rpartition(".")[0]
                    base = f"{pkg}.{base}" if base else pkg
                # `from pkg import sub` imports the submodule sub
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                           for a in node.names]
            for t in targets:
                if t.startswith("simcalib"):
                    r = resolve(t)
                    if r and r != mod:
                        graph[mod].add(r)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    found = cycles(import_graph())
    assert found == [], "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_checker_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_test_module_imports_another_test_module():
    """Shared fixtures live in conftest.py or tests/fixtures/ (issue 40): a test module
    imported by another runs its module-level code twice and couples two files' tests;
    benchmarks import fixtures, never tests."""
    root = SRC.parent
    offenders = []
    for path in [*root.joinpath("tests").rglob("*.py"), *root.joinpath("benchmarks").glob("*.py")]:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            offenders += [f"{path.relative_to(root)}: {n}" for n in names
                          if n.split(".")[-1].startswith("test_") or ".test_" in n]
    assert not offenders, offenders


#: the folders test modules live in, by package (issue 40); a new folder is added here
TEST_FOLDERS = {"bayes", "metamodel", "strategies", "study", "simulators", "multisource",
                "report", "workflow", "config", "project"}


def test_test_modules_are_grouped_in_folders_by_package():
    """A reader finds a package's tests in one folder: no test module at the top of
    tests/, none in a folder outside the agreed list (fixtures and configs hold none)."""
    tests = SRC.parent / "tests"
    misplaced = [str(p.relative_to(tests)) for p in tests.rglob("test_*.py")
                 if p.parent == tests or p.relative_to(tests).parts[0] not in TEST_FOLDERS]
    assert not misplaced, f"test modules outside tests/<package>/: {misplaced}"
    assert {p.parent.name for p in tests.glob("*/test_*.py")} == TEST_FOLDERS
