"""Reading a config file strictly: JSON or YAML, as Snakemake reads it, but every
problem an error naming the file, the line and the cause.

Why: Snakemake answers an empty file, a list, a tab-indented file or a YAML tag with
one generic line ("Config file is not valid JSON or YAML") before any simcalib code
runs, and silently keeps the last of two equal keys.  ``simcalib check CONFIG`` and the
Snakefile's first step read the file again through :func:`load_yaml`, which says where
and why (docs/running.md, "Troubleshooting").
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from simcalib.errors import ConfigError


def _check_duplicate_keys(node: yaml.Node, path: str, source: str,
                          seen_nodes: set[int] | None = None) -> None:
    """Walk a composed YAML node tree; a key given twice in one mapping is an error.

    Why: PyYAML (and Snakemake's loader) keeps the last of two equal keys without a
    word, so a pasted block silently overrides settings written above it.  A node
    reached again through an alias is not walked again (``seen_nodes``): a YAML alias
    bomb (9 levels of 9 aliases) would otherwise take minutes here."""
    seen_nodes = set() if seen_nodes is None else seen_nodes
    if id(node) in seen_nodes:
        return
    seen_nodes.add(id(node))
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for knode, vnode in node.value:
            key = str(knode.value)
            if key == "<<":  # a merge key: its own mapping is checked where it is defined
                continue
            line = knode.start_mark.line + 1
            sub = f"{path}.{key}" if path else key
            if key in seen:
                raise ConfigError(sub, f"duplicate key {key!r} in {source} (lines {seen[key]} "
                                  f"and {line}); YAML would silently keep the last one")
            seen[key] = line
            _check_duplicate_keys(vnode, sub, source, seen_nodes)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _check_duplicate_keys(item, f"{path}.{i}" if path else str(i), source, seen_nodes)


def yaml_problem(exc: yaml.YAMLError, source: str) -> str:
    """``FILE, line L, column C: cause (hint)`` for a PyYAML error."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f"{source}, line {mark.line + 1}, column {mark.column + 1}" if mark else source
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    cause = f"{context} {problem}" if context and "constructor" not in str(problem) else problem
    hint = ""
    if "'\\t'" in str(problem) or "\t" in str(problem):
        hint = ("; YAML does not allow a tab character in indentation: indent with spaces "
                "only (a tab may also hide before a key)")
    elif "constructor for the tag" in str(problem):
        hint = ("; YAML tags ('!name' before a value) are not allowed in a config: write the "
                "plain value (a number, a string in quotes, a list or a mapping)")
    return f"{where}: {' '.join(str(cause).split())}{hint}"


def _json_pairs(source: str) -> Any:
    """``object_pairs_hook`` of :func:`json.loads`: a key given twice is an error."""
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in pairs:
            if k in out:
                raise ConfigError(k, f"duplicate key {k!r} in {source}; JSON readers "
                                  "silently keep the last one")
            out[k] = v
        return out
    return hook


def parse_config_text(text: str, source: str) -> Any:
    """The value a config file holds, read as Snakemake reads it (JSON first, then YAML),
    strictly; a syntax error is a ConfigError naming ``source``, line and cause."""
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text, object_pairs_hook=_json_pairs(source))
        except json.JSONDecodeError:
            pass  # Snakemake then tries YAML (a flow mapping is YAML too)
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        if node is not None:
            _check_duplicate_keys(node, "", source)
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError("", f"not valid YAML: {yaml_problem(exc, source)}") from None


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a config file (YAML or JSON) strictly: duplicate keys are a ConfigError
    naming the key path; a syntax error, an empty file or a top level that is not a
    mapping names the file (and the line)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("", f"config file not found: {path}") from None
    except (IsADirectoryError, UnicodeDecodeError) as exc:
        raise ConfigError("", f"{path}: cannot read as a text file ({exc})") from None
    data = parse_config_text(text, str(path))
    if data is None:
        raise ConfigError("", f"{path} is empty (or holds only comments): a config is a "
                          "mapping of keys, e.g. 'seed: 1'")
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else f"a {type(data).__name__}"
        raise ConfigError("", f"{path} holds {kind} at the top level, not a mapping of keys "
                          "(a config starts 'seed: 1', not '- ...'; check the first line's "
                          "indentation)")
    return data


def check_config_files(paths: Iterable[str | Path]) -> None:
    """Re-read config files that another loader (Snakemake's ``--configfile``) already
    read, with the strict loader, so duplicate keys fail there too."""
    for p in dict.fromkeys(str(x) for x in paths):
        if Path(p).is_file():
            load_yaml(p)
