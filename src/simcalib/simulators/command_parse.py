"""Templates and output parsing for the ``command`` simulator.

:class:`Template` is a ``str.format`` template whose placeholders are checked when
the config is validated; the parsers read a program's output file (``key: value``
lines, CSV, JSON) and :func:`extract` finds one number in it, raising
:class:`MissingKeyError` (with the file's keys and the nearest one) when a key is
not there.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from simcalib.errors import ConfigError

MAX_SPEC_NUMBER = 1000  # '{x:>20000000000}' would allocate 20 GB when rendered
_FORMATTER = string.Formatter()
_INDEXED = re.compile(r"^(.*)\[(-?\d+)\]$")
_TOKENS = re.compile(r"[\s,;]+")


def _clean(text: str) -> str:
    """Printable, one-line text for the ``message`` column."""
    text = "".join(c if c.isprintable() or c == "\n" else "?" for c in text)
    return " | ".join(line.strip() for line in text.strip().splitlines() if line.strip())



# ---------------------------------------------------------------------------
# templates
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Template:
    """A ``str.format`` template whose field names were checked at build time."""

    text: str
    names: frozenset[str]

    @classmethod
    def compile(cls, text: str, known: Sequence[str], key: str) -> Template:
        try:
            parsed = list(_FORMATTER.parse(text))
        except ValueError as exc:  # a lone '{' or '}'
            raise ConfigError(key, f"bad template {text[:60]!r}: {exc} (write a literal brace "
                              "as '{{' or '}}')") from None
        names = set()
        for _, fname, spec, _ in parsed:
            if fname is None:
                continue
            if fname == "" or fname.isdigit():
                raise ConfigError(key, "positional placeholder '{}' in template; name an input "
                                  "such as '{R0}' (a literal brace is written '{{' or '}}')")
            if fname not in known:
                import difflib

                close = difflib.get_close_matches(fname, list(known), n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                raise ConfigError(key, f"template placeholder '{{{fname}}}' names no input{hint}; "
                                  f"known: {sorted(known)}")
            if spec and "{" in spec:
                raise ConfigError(key, "nested placeholders in a format spec are not supported")
            if spec and any(int(d) > MAX_SPEC_NUMBER for d in re.findall(r"\d+", spec)):
                raise ConfigError(key, f"format spec '{{{fname}:{spec}}}': widths and precisions "
                                  f"above {MAX_SPEC_NUMBER} are not allowed")
            names.add(fname)
        return cls(text, frozenset(names))

    def render(self, values: Mapping[str, Any]) -> str:
        return _FORMATTER.vformat(self.text, (), values)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# output parsing
# ---------------------------------------------------------------------------
class OutputParseError(Exception):
    """An output file exists but does not hold the values we need."""


class MissingKeyError(OutputParseError):
    """The output file has no such key: almost always a typo in ``output_map``,
    which :func:`simcalib.simulators.probe` turns into a config error."""

    def __init__(self, key: str, available: list[str], hint: str | None) -> None:
        self.key, self.available, self.hint = key, available, hint
        self.context = ""  # the file's first lines and the expected pattern, when known
        shown = available[:12] + (["..."] if len(available) > 12 else [])
        did = f" (did you mean '{hint}'?)" if hint else ""
        has = f"the file has keys {shown}" if available else "the parser found no key"
        super().__init__(f"key '{key}' not found{did}; {has}")


def _nearest(name: str, candidates: Sequence[str]) -> str | None:
    import difflib

    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    if not close:  # case or spacing slips: 'peak time' for 'Peak time'
        low = {c.lower().replace(" ", "").replace("_", ""): c for c in candidates}
        close = [low[k] for k in difflib.get_close_matches(
            name.lower().replace(" ", "").replace("_", ""), list(low), n=1, cutoff=0.6)]
    return close[0] if close else None


#: ``parser: {type: keyvalue, separator: ...}``: what splits a line's key from its value
#: (``whitespace``: the first run of blanks).  The default is FluTE's colon.
KEYVALUE_SEPARATOR = ":"
WHITESPACE = "whitespace"
_BLANKS = re.compile(r"\s+")


def _split(line: str, separator: str) -> tuple[str, str] | None:
    if separator == WHITESPACE:
        parts = _BLANKS.split(line, maxsplit=1)
        return (parts[0], parts[1]) if len(parts) == 2 else None
    if separator not in line:
        return None
    k, v = line.split(separator, 1)
    return k, v


def parse_keyvalue(text: str, separator: str = KEYVALUE_SEPARATOR) -> dict[str, str]:
    """``key: value`` lines (FluTE's Summary file), or ``key=value`` / ``key value``
    with another ``separator``.  Blank lines, ``#`` comments and lines without the
    separator (headers, free text) are skipped; the key is everything before the
    first separator, stripped."""
    out = KeyValues()
    first: dict[str, int] = {}
    for n, line in enumerate(text.splitlines(), start=1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        kv = _split(s, separator)
        if kv is None:
            continue
        key, value = kv[0].strip(), kv[1].strip()
        if key in out and out[key] != value:
            out.repeated.setdefault(key, [first[key]]).append(n)
        first.setdefault(key, n)
        out[key] = value
    return out


class KeyValues(dict):  # type: ignore[type-arg]
    """Parsed ``key: value`` lines; ``repeated`` maps a key written more than once with
    different values to its line numbers, so reading it is an error instead of a silent
    "last one wins" (:func:`extract`)."""

    def __init__(self) -> None:
        super().__init__()
        self.repeated: dict[str, list[int]] = {}


def _no_duplicate_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads`` hook: a key given twice in one object with different values is an
    error (json keeps the last one silently)."""
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out and out[k] != v:
            raise OutputParseError(f"key {k!r} appears twice in one JSON object with "
                                   f"different values ({out[k]!r}, {v!r}); which one is meant?")
        out[k] = v
    return out


def expected_pattern(parser: str, separator: str = KEYVALUE_SEPARATOR) -> str:
    """What a parser reads, in words (for error messages)."""
    if parser == "keyvalue":
        sep = " " if separator == WHITESPACE else separator
        gap = " " if separator in (":", WHITESPACE) else ""
        return f"lines 'key{sep}{gap}value'".replace("  ", " ")
    if parser == "csv":
        return "a CSV header line, then data rows (the last one is read)"
    return "one JSON object"


def describe_output(text: str, parser: str, separator: str = KEYVALUE_SEPARATOR,
                    n_lines: int = 3) -> str:
    """The first lines of an output file and the pattern the parser expects, plus the
    separator that would read them when another one would: what a user needs to fix
    ``output_map`` or the parser settings without opening the scratch directory."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        head = "the file is empty"
    else:
        shown = " / ".join(repr(_clean(ln)[:80]) for ln in lines[:n_lines])
        more = f" (+{len(lines) - n_lines} more)" if len(lines) > n_lines else ""
        head = f"its first lines: {shown}{more}"
    out = f"{head}; expected {expected_pattern(parser, separator)}"
    if parser == "keyvalue" and lines:
        body = [ln for ln in lines if not ln.startswith("#")]
        if body and not any(_split(ln, separator) for ln in body):
            for cand in (":", "=", WHITESPACE):
                if cand != separator and all(_split(ln, cand) for ln in body):
                    out += (f" (these lines would read with parser: {{type: keyvalue, "
                            f"separator: {cand!r}}})")
                    break
    return out


def parse_csv(text: str) -> dict[str, str]:
    """A CSV table with a header; the *last* data row is used (simulators that
    write a time series usually end with the final state)."""
    reader = csv.reader(io.StringIO(text))
    rows = [(reader.line_num, r) for r in reader if any(c.strip() for c in r)]
    if len(rows) < 2:
        raise OutputParseError("CSV output needs a header and at least one data row")
    header = [h.strip() for h in rows[0][1]]
    dup = sorted({h for h in header if header.count(h) > 1})
    if dup:
        raise OutputParseError(f"CSV header line {rows[0][0]}: column(s) {dup} appear more "
                               "than once")
    for line, row in rows[1:]:  # every row, not just the last: a ragged table is malformed
        if len(row) != len(header):
            raise OutputParseError(f"CSV line {line} has {len(row)} fields, the header has "
                                   f"{len(header)}")
    return dict(zip(header, (c.strip() for c in rows[-1][1]), strict=True))


def parse_json(text: str) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_no_duplicate_pairs)
    except json.JSONDecodeError as exc:
        raise OutputParseError(f"not valid JSON ({exc})") from None


PARSE_FUNCS = {"keyvalue": parse_keyvalue, "csv": parse_csv, "json": parse_json}


def parse_output(text: str, parser: str, separator: str = KEYVALUE_SEPARATOR) -> Any:
    """Parse an output file with ``parser`` (``separator``: keyvalue only)."""
    if parser == "keyvalue":
        return parse_keyvalue(text, separator)
    return PARSE_FUNCS[parser](text)


def _to_float(raw: Any, key: str) -> float:
    if raw is None:
        return math.nan
    if isinstance(raw, bool):
        raise OutputParseError(f"value of '{key}' is a boolean, not a number")
    if isinstance(raw, int | float):
        return float(raw)
    if isinstance(raw, str):
        tokens = [t for t in _TOKENS.split(raw.strip()) if t]
        if len(tokens) == 1:
            try:
                return float(tokens[0])
            except ValueError:
                pass
        elif len(tokens) > 1:
            raise OutputParseError(f"value of '{key}' holds {len(tokens)} values; select one "
                                   f"with '{key}[i]' in output_map")
        raise OutputParseError(f"value of '{key}' is not a number: {_clean(raw)[:80]!r}")
    raise OutputParseError(f"value of '{key}' is a {type(raw).__name__}, not a number")


def _index(seq: Any, i: int, key: str) -> Any:
    if isinstance(seq, str):
        seq = [t for t in _TOKENS.split(seq.strip()) if t]
    if not isinstance(seq, list):
        raise OutputParseError(f"'{key}' cannot be indexed")
    try:
        return seq[i]
    except IndexError:
        raise OutputParseError(f"'{key}' has {len(seq)} values, no index {i}") from None


def extract(data: Any, key: str) -> float:
    """The number stored under ``key``: an exact key first; then ``key[i]`` (the
    i-th of several comma/space-separated values, as FluTE's "attack rates by
    age" lines hold); for JSON, a dotted path (``results.attack_rate``,
    ``by_age[2]``)."""
    rep = getattr(data, "repeated", {})
    m0 = _INDEXED.match(key)
    for k in (key, m0.group(1) if m0 else None):
        if k in rep:
            raise OutputParseError(f"key {k!r} is written {len(rep[k])} times with different "
                                   f"values (lines {rep[k]}); which one is meant? (fix the "
                                   "program or read another key)")
    if isinstance(data, dict) and key in data:
        return _to_float(data[key], key)
    m = _INDEXED.match(key)
    if isinstance(data, dict) and m and m.group(1) in data:
        return _to_float(_index(data[m.group(1)], int(m.group(2)), m.group(1)), key)
    node = data
    parts = key.split(".")
    for depth, part in enumerate(parts):
        pm = _INDEXED.match(part)
        name, idx = (pm.group(1), int(pm.group(2))) if pm else (part, None)
        if name:
            if not isinstance(node, dict) or name not in node:
                keys = [str(k) for k in data] if isinstance(data, dict) else []
                hint = None
                if depth == 0:
                    hint = _nearest(m.group(1) if m else key, keys)
                    if hint and m:
                        hint = f"{hint}[{m.group(2)}]"
                elif isinstance(node, dict):  # a dotted JSON path that goes astray inside
                    near = _nearest(name, [str(k) for k in node])
                    if near:
                        hint = ".".join([*parts[:depth], part.replace(name, near, 1),
                                         *parts[depth + 1:]])
                raise MissingKeyError(key, keys, hint)
            node = node[name]
        if idx is not None:
            node = _index(node, idx, key)
    return _to_float(node, key)




# ---------------------------------------------------------------------------
# series outputs (issue 42)
# ---------------------------------------------------------------------------
def read_series(text: str, parser: str, series: Mapping[str, Any], source: str
                ) -> dict[str, float]:
    """A command's curves from its output file's text, as ``{cases@7: value}`` at each
    series' points (``series``: name -> SeriesSpec with points): a ``csv`` file is one
    row per time point (the index column, one column per series; its scalar outputs
    are still read from the last row by :func:`extract`), a ``json`` object holds
    arrays (``{"day": [...], "cases": [...]}``) beside its scalar keys.  A file that
    does not hold the curves raises :class:`OutputParseError` (the run's
    ``parse_error``) with the file named, as every other parse failure does."""
    from simcalib.errors import DataError
    from simcalib.study.series import from_command_csv, from_command_json

    points = {n: s.points for n, s in series.items()}
    try:
        if parser == "csv":
            return from_command_csv(text, series, points, source)
        if parser == "json":
            return from_command_json(parse_json(text), series, points, source)
    except DataError as exc:
        raise OutputParseError(str(exc)) from None
    raise OutputParseError(f"series outputs {sorted(series)} need parser 'csv' (one row per "
                           f"time point) or 'json' (arrays), not {parser!r}")
