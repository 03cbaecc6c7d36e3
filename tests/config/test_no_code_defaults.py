"""Defaults live in the schema only (DESIGN.md, "Settings built once"): no
``.get("<schema key>", <literal>)`` in the library.

A literal fallback beside a schema key is a second default that can drift from the
schema's (the HiGHS backend read ``sub_mip`` with ``True`` while the schema said
``false``).  The scan is syntactic (an AST walk over src/simcalib): a call
``.get(<string constant>, <literal other than None>)`` whose key is a property name
anywhere in the schema files.  Files being rewritten elsewhere keep their present
count in ALLOWED; the count may only go down (lower it when you remove one)."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

SRC = Path(__file__).resolve().parents[2] / "src" / "simcalib"

#: file (relative to src/simcalib) -> literal fallbacks it may still hold (issue 40:
#: these files are being rewritten into settings objects; the numbers only go down)
ALLOWED: dict[str, int] = {
    "bayes/metrics.py": 2,
    "bayes/posterior.py": 1,
    "commands/bayes.py": 2,
    "metamodel/checks.py": 10,
    "metamodel/ensemble.py": 1,
    "metamodel/model.py": 1,
    "metamodel/strategies/ledger.py": 1,
    "metamodel/strategies/score.py": 1,
    "simulators/epidemic_adapter.py": 2,
    "simulators/layer.py": 1,
    "simulators/rosenbrock.py": 2,
    "study/checks.py": 7,
    "study/noise.py": 6,
    "study/simulation.py": 3,
    "study/space.py": 2,
}


def _property_names(node: Any, out: set[str]) -> set[str]:
    if isinstance(node, dict):
        props = node.get("properties")
        if isinstance(props, dict):
            out.update(str(k) for k in props)
        for v in node.values():
            _property_names(v, out)
    elif isinstance(node, list):
        for v in node:
            _property_names(v, out)
    return out


def schema_keys() -> set[str]:
    keys: set[str] = set()
    for path in sorted((SRC / "schemas").glob("*.schema.yaml")):
        _property_names(yaml.safe_load(path.read_text()), keys)
    return keys


def _is_literal(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return node.value is not None
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.operand, ast.Constant)
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return all(_is_literal(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and _is_literal(k) and _is_literal(v)
                   for k, v in zip(node.keys, node.values, strict=True))
    return False


def fallbacks(source: str, keys: set[str]) -> list[tuple[int, str]]:
    """(line, key) of every ``.get("<key>", <literal>)`` in ``source``."""
    hits = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "get" and len(node.args) == 2):
            key, default = node.args
            if (isinstance(key, ast.Constant) and isinstance(key.value, str)
                    and key.value in keys and _is_literal(default)):
                hits.append((node.lineno, key.value))
    return hits


def test_the_scan_sees_a_literal_fallback_and_nothing_else():
    keys = {"time_limit", "obbt"}
    src = ("a = s.get('time_limit', 60.0)\nb = s.get('obbt', {})\nc = s.get('time_limit')\n"
           "d = s.get('time_limit', None)\ne = s.get('other', 1)\nf = s['time_limit']\n"
           "g = s.get('time_limit', x)\nh = s.get('obbt', {'enabled': True})\n")
    assert fallbacks(src, keys) == [(1, "time_limit"), (2, "obbt"), (8, "obbt")]
    assert {"time_limit", "sub_mip", "epochs", "budget"} <= schema_keys()


def test_no_new_literal_fallback_for_a_schema_key():
    keys = schema_keys()
    found: Counter[str] = Counter()
    where: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        for line, key in fallbacks(path.read_text(), keys):
            found[rel] += 1
            where.setdefault(rel, []).append(f"{rel}:{line} .get({key!r}, ...)")
    over = {f: n for f, n in found.items() if n > ALLOWED.get(f, 0)}
    assert not over, ("a default belongs in the schema (read the validated, defaulted "
                      "section or its settings object): "
                      + "; ".join(h for f in over for h in where[f]))
    # an allowance above the present count would let a new fallback in unnoticed
    stale = {f: (n, found.get(f, 0)) for f, n in ALLOWED.items() if found.get(f, 0) < n}
    assert not stale, f"lower ALLOWED to the present counts: {stale}"
