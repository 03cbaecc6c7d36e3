"""config/README.md, generated from the schema (the one place keys, defaults and
their meaning are written).

    python -m simcalib.config_docs > config/README.md     # regenerate
    python -m simcalib.config_docs --check                 # exit 1 when stale

Why: a hand-written reference drifts from the schema it describes (a default changed
in one place, a key added without a line).  Here each key's row is its schema node:
the dotted path, the default the validation fills in (``(required)`` for a required
key) and its ``description``.  A section file's own ``description`` is the prose
above its table; material the schema cannot hold (the simulators' options, which
their code validates, and the observations file's columns) lives in markdown
fragments under ``schemas/doc/`` and is placed after the section it belongs to.
Rerun it after adding keys: the order is the schema files' order.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from simcalib.config import SCHEMA_DIR, _import_checks, _load_schema

ROOT = "config.schema.yaml"
#: hand-written fragments placed after a section's table (file names in schemas/doc/)
FRAGMENTS: dict[str, list[str]] = {"studies.<name>": ["observations.md",
                                                      "simulator_options.md"]}
HEADER = ("<!-- Generated from src/simcalib/schemas/*.schema.yaml by "
          "`python -m simcalib.config_docs > config/README.md`: edit the schema's "
          "`description:` lines (or schemas/doc/*.md), not this file. -->\n")


@dataclass
class Section:
    """One heading: the dotted path of its root, the schema node and its file."""

    path: str
    node: dict[str, Any]
    file: str
    rows: list[tuple[str, str, str]] = field(default_factory=list)


def _schema(name: str) -> dict[str, Any]:
    return _load_schema(SCHEMA_DIR, name)


def _resolve(node: dict[str, Any], file: str) -> tuple[dict[str, Any], str, bool]:
    """(node with its ``$ref`` followed, its file, True if the ref is another file)."""
    ref = node.get("$ref") if isinstance(node, dict) else None
    if not ref:
        return node, file, False
    target, _, pointer = ref.partition("#")
    other = bool(target) and target != file
    file = target or file
    resolved = _schema(file)
    for part in [p for p in pointer.split("/") if p]:
        resolved = resolved[part]
    extra = {k: v for k, v in node.items() if k != "$ref"}
    return {**resolved, **extra}, file, other


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _default(node: dict[str, Any], required: bool) -> str:
    if required:
        return "(required)"
    if "default" not in node:
        return ""
    text = yaml.safe_dump(node["default"], default_flow_style=True, width=10**6).strip()
    text = text.removesuffix("\n...").removesuffix("...").strip()
    return f"`{_cell(text)}`"


def _meaning(node: dict[str, Any]) -> str:
    text = _cell(node.get("description") or "")
    enum = node.get("enum")
    if enum and not all(f"{v}" in text for v in enum):
        text = (text + " " if text else "") + "(one of " + ", ".join(f"`{v}`" for v in enum) + ")"
    return text


def _walk(node: dict[str, Any], file: str, prefix: str, sec: Section,
          queue: list[Section]) -> None:
    """Rows of ``node``'s properties (nested objects flattened into dotted paths,
    maps of named entries as ``<name>``); a property in another schema file becomes
    its own section, queued."""
    required = set(node.get("required") or [])
    for name, sub in (node.get("properties") or {}).items():
        path = f"{prefix}{name}"
        res, rfile, other = _resolve(sub, file)
        if other:
            sec.rows.append((path, _default(res, name in required),
                             f"see [`{sec.path}.{path}`](#{_anchor(sec.path + '.' + path)})"
                             if sec.path else f"see [`{path}`](#{_anchor(path)})"))
            queue.append(Section(f"{sec.path}.{path}" if sec.path else path, res, rfile))
            continue
        _row_and_children(res, rfile, path, name in required, sec, queue)


def _row_and_children(res: dict[str, Any], file: str, path: str, required: bool,
                      sec: Section, queue: list[Section]) -> None:
    children = _children(res, file)
    # an object whose keys are listed below gets a row only when it says something
    if not children or res.get("description"):
        sec.rows.append((path, _default(res, required), _meaning(res)))
    for kind, child, cfile in children:
        if kind == "props":
            _walk(child, cfile, f"{path}.", sec, queue)
        else:  # a map of named entries
            res2, f2, other = _resolve(child, cfile)
            if other:
                full = f"{sec.path}.{path}.<name>" if sec.path else f"{path}.<name>"
                queue.append(Section(full, res2, f2))
                continue
            if res2.get("properties"):
                _walk(res2, f2, f"{path}.<name>.", sec, queue)


def _children(res: dict[str, Any], file: str) -> list[tuple[str, dict[str, Any], str]]:
    out: list[tuple[str, dict[str, Any], str]] = []
    if res.get("properties"):
        out.append(("props", res, file))
    add = res.get("additionalProperties")
    if isinstance(add, dict) and (add.get("$ref") or add.get("properties")):
        out.append(("map", add, file))
    return out


def _anchor(path: str) -> str:
    return "".join(c for c in path.lower().replace(" ", "-") if c.isalnum() or c in "-_")


def sections() -> Iterator[Section]:
    """Every section, in order: the top level, then each section file as it is met."""
    _import_checks()   # registered schema patches (the strategy names) apply
    root = Section("", _schema(ROOT), ROOT)
    queue: list[Section] = []
    _walk(root.node, ROOT, "", root, queue)
    yield root
    while queue:
        sec = queue.pop(0)
        nested: list[Section] = []
        if sec.node.get("properties"):
            _walk(sec.node, sec.file, "", sec, nested)
        elif isinstance(sec.node.get("additionalProperties"), dict):
            res, rfile, _ = _resolve(sec.node["additionalProperties"], sec.file)
            _walk(res, rfile, "<name>.", sec, nested)
        yield sec
        queue[:0] = nested


def _fragment(name: str) -> str:
    return (SCHEMA_DIR / "doc" / name).read_text().strip() + "\n"


def render() -> str:
    """The whole reference as markdown."""
    out = [HEADER, "# Configuration reference\n"]
    for sec in sections():
        if sec.path:
            out.append(f"## `{sec.path}`\n")
        desc = str(sec.node.get("description") or "").strip()
        if desc:
            out.append(desc + "\n")
        if sec.rows:
            out.append("| key | default | meaning |\n|---|---|---|")
            out += [f"| `{p}` | {d} | {m} |" for p, d, m in sec.rows]
            out.append("")
        for name in FRAGMENTS.get(sec.path, []):
            out.append(_fragment(name))
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m simcalib.config_docs",
                                 description="write config/README.md from the schema")
    ap.add_argument("--check", metavar="FILE", nargs="?", const="config/README.md",
                    help="exit 1 when FILE (default config/README.md) is not current")
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        current = Path(args.check).read_text() if Path(args.check).is_file() else ""
        if current != text:
            print(f"{args.check} is not current: run python -m simcalib.config_docs > "
                  f"{args.check}", file=sys.stderr)
            return 1
        return 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
