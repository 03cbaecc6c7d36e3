"""The ``command`` simulator's builder: validate ``studies.<s>.simulator.options``
(see ``docs/command.md``) and make a :class:`~simcalib.simulators.command.CommandSimulator`.

Builders run when the config is validated, so every template, path, file name and
option fails here, before any job, with its key path.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from simcalib.errors import ConfigError
from simcalib.io import PACKAGE_ROOT
from simcalib.simulators import confine
from simcalib.simulators.base import check_options, register
from simcalib.simulators.command import (
    ALLOWED,
    DEFAULT_INPUT_NAMES,
    INPUT_FILE_ALLOWED,
    INPUT_FORMATS,
    LINK_MODES,
    PARSERS,
    RUNTIME_NAMES,
    STDOUT,
    CommandSimulator,
)
from simcalib.simulators.command_parse import KEYVALUE_SEPARATOR, WHITESPACE, Template
from simcalib.simulators.command_series import check_parser, series_columns, study_series
from simcalib.simulators.scratch import check_name


# ---------------------------------------------------------------------------
# builder
# ---------------------------------------------------------------------------
def _study_inputs(study: Mapping[str, Any]) -> tuple[list[str], frozenset[str]]:
    """Input names (parameters then contexts) and those holding integers."""
    names: list[str] = []
    integer: set[str] = set()
    for section in ("parameters", "contexts"):
        block = study.get(section) or {}
        items = block.items() if isinstance(block, Mapping) else \
            [(b.get("name"), b) if isinstance(b, Mapping) else (b, {}) for b in block]
        for name, spec in items:
            if name is None:
                continue
            names.append(str(name))
            spec = spec if isinstance(spec, Mapping) else {}
            vals = spec.get("values")
            if spec.get("integer") or (vals and all(
                    isinstance(v, int) or (isinstance(v, float) and v.is_integer())
                    for v in vals)):
                integer.add(str(name))
    return names, frozenset(integer)


def _locate(path: str | Path, root: Path) -> Path:
    """``path`` resolved against the workflow root, else against the repository
    root if it exists only there (absolute paths are returned as they are)."""
    p = Path(path).expanduser()
    if p.is_absolute():
        return p
    if not (root / p).exists() and (PACKAGE_ROOT / p).exists():
        return PACKAGE_ROOT / p
    return root / p


def _resolve_argv0(arg: str, root: Path, key: str) -> str:
    if "{" in arg:
        return arg
    if "/" in arg:
        p = _locate(arg, root)
        if not p.is_file():
            raise ConfigError(key, f"executable {arg!r} not found (looked for {p})")
        if not os.access(p, os.X_OK):
            raise ConfigError(key, f"{p} is not executable (chmod +x it, or run it through an "
                              "interpreter: ['python3', 'path/to/script.py', ...])")
        return str(p.resolve())
    if shutil.which(arg) is None:
        raise ConfigError(key, f"executable {arg!r} not found on PATH")
    return arg


def _resolve_arg(arg: str, root: Path) -> str:
    """Make a relative path argument (one with a directory part that exists under
    the workflow root) absolute, since the program runs in its scratch directory."""
    if "{" in arg or arg.startswith("-") or "/" not in arg or Path(arg).is_absolute():
        return arg
    p = _locate(arg, root)
    return str(p.resolve()) if p.exists() else arg


def _read_links(spec: Any, root: Path, key: str) -> dict[str, Path]:
    """``link_files`` as ``{name in scratch: original}``: a list of paths (each
    linked under its own name) or a mapping ``{name: path}``."""
    if spec is None:
        return {}
    if isinstance(spec, Mapping):
        items = [(str(n), f, f"{key}.{n}") for n, f in spec.items()]
    elif isinstance(spec, list):
        items = [(None, f, f"{key}.{i}") for i, f in enumerate(spec)]
    else:
        raise ConfigError(key, "must be a list of paths or a mapping {name: path}")
    links: dict[str, Path] = {}
    for name, f, where in items:
        if not isinstance(f, str | os.PathLike) or not str(f):
            raise ConfigError(where, f"must be a path, got {f!r}")
        p = _locate(str(f), root)
        if not p.exists():
            raise ConfigError(where, f"{p} does not exist")
        name = name if name is not None else p.name
        check_name(name, where, "link name", allow_dirs=False)
        if name in links:
            raise ConfigError(where, f"link name {name!r} is used twice")
        links[name] = p.resolve()
    return links


def _bool(options: Mapping[str, Any], name: str, default: bool, key: str) -> bool:
    v = options.get(name, default)
    if not isinstance(v, bool):
        raise ConfigError(f"{key}.{name}", f"must be true or false, got {v!r}")
    return v


def _parser(spec: Any, key: str) -> tuple[str, str]:
    """``parser: keyvalue`` or ``parser: {type: keyvalue, separator: "="}`` -> (type,
    key separator).  The separator is ``:`` (the default), ``=``, ``whitespace`` or any
    other short string that splits a line's key from its value."""
    if isinstance(spec, str):
        if spec not in PARSERS:
            raise ConfigError(key, f"{spec!r} is not one of {list(PARSERS)}")
        return spec, KEYVALUE_SEPARATOR
    if not isinstance(spec, Mapping):
        raise ConfigError(key, f"a parser name {list(PARSERS)} or a mapping "
                          "{type: keyvalue, separator: '='}")
    check_options(spec, {"type": None, "separator": KEYVALUE_SEPARATOR}, key)
    kind = spec.get("type")
    if kind not in PARSERS:
        raise ConfigError(f"{key}.type", f"{kind!r} is not one of {list(PARSERS)}")
    if "separator" not in spec:
        return kind, KEYVALUE_SEPARATOR
    sep = spec["separator"]
    if kind != "keyvalue":
        raise ConfigError(f"{key}.separator", f"only the keyvalue parser takes a separator, "
                          f"not {kind!r}")
    if sep == " ":
        sep = WHITESPACE
    if not isinstance(sep, str) or not sep or sep != sep.strip() and sep != WHITESPACE \
            or "\n" in sep or len(sep) > 8:
        raise ConfigError(f"{key}.separator", f"must be ':', '=', 'whitespace' or another "
                          f"short string without blanks, got {sep!r}")
    return kind, sep


@register("command")
def build(options: Mapping[str, Any], study: Mapping[str, Any], key: str) -> CommandSimulator:
    """Validate ``options`` (see ``docs/command.md``) and build the simulator: the
    command, the outputs and where they are read from, the input file, how runs are
    run (timeout, environment, scratch, links, seeds), how they are confined."""
    check_options(options, ALLOWED, key)
    root = Path.cwd()
    input_names, integer_names = _study_inputs(study)
    clash = sorted(set(input_names) & set(RUNTIME_NAMES))
    if clash:
        raise ConfigError(f"{key}.command", f"study input(s) {clash} clash with the reserved "
                          f"placeholder names {list(RUNTIME_NAMES)}; rename them")
    known_all = [*input_names, *RUNTIME_NAMES]
    known_names = [n for n in known_all if n not in ("input_file", "output_file", "workdir")]
    argv = _read_command(options.get("command"), root, known_all, f"{key}.command")
    series = study_series(study, key)
    outputs, file_keys = _read_outputs(options, study, key, series)
    parser, key_sep = _parser(options.get("parser", ALLOWED["parser"]), f"{key}.parser")
    check_parser(parser, series, key)
    out_file, out_tpl = _read_output_file(options.get("output_file"), known_names, key)
    inp = _read_input_file(options.get("input_file"), root, input_names, known_names,
                           known_all, f"{key}.input_file")
    run = _read_run_options(options, root, known_all, key)
    _check_link_names(run["link_files"], inp.get("input_name"), out_file, key)
    mode, writable = _read_confinement(study, options, root, key)
    sim = CommandSimulator(
        argv=argv, outputs=outputs, file_keys=file_keys, parser=parser, output_file=out_tpl,
        key_separator=key_sep, input_names=input_names, integer_names=integer_names,
        root=root, key=key, confine=mode, writable=writable, series=series, **inp, **run)
    _dry_render(sim, key)
    return sim


def _read_command(cmd: Any, root: Path, known_all: list[str], key: str) -> list[Template]:
    """``command``: a list (or a shell-like string) of argument templates; the
    executable found, relative path arguments made absolute."""
    if isinstance(cmd, str):
        cmd = shlex.split(cmd)
    if not isinstance(cmd, list) or not cmd or not all(isinstance(a, str | int | float)
                                                        for a in cmd):
        raise ConfigError(key, "required: a list of argument strings, e.g. "
                          "['python3', 'sim.py', '{input_file}']")
    cmd = [str(a) for a in cmd]
    cmd[0] = _resolve_argv0(cmd[0], root, f"{key}.0")
    cmd = [cmd[0], *(_resolve_arg(a, root) for a in cmd[1:])]
    return [Template.compile(a, known_all, f"{key}.{i}") for i, a in enumerate(cmd)]


def _read_outputs(options: Mapping[str, Any], study: Mapping[str, Any], key: str,
                  series: Mapping[str, Any]) -> tuple[list[str], dict[str, str]]:
    """The outputs (the scalars, then every series' point columns) and, through
    ``output_map``, the file key each scalar is read from (a series is read from the
    column or array of its own name)."""
    outputs = list(options.get("outputs") or study.get("outputs") or [])
    if not outputs and not series:
        raise ConfigError(f"{key}.outputs", "list the outputs the command produces "
                          "(or give the study's 'outputs', or declare its 'series')")
    if len(set(outputs)) != len(outputs):
        raise ConfigError(f"{key}.outputs", f"duplicate names in {outputs}")
    clash = sorted(set(outputs) & set(series))
    if clash:
        raise ConfigError(f"{key}.outputs", f"{clash} are declared as series (a curve, "
                          "studies.<s>.series); list only the scalar outputs here")
    omap = options.get("output_map") or {}
    if not isinstance(omap, Mapping):
        raise ConfigError(f"{key}.output_map", "must map output-file keys to output names")
    file_keys = {o: o for o in outputs}
    seen: dict[str, str] = {}
    for fkey, oname in omap.items():
        if oname in series:
            raise ConfigError(f"{key}.output_map.{fkey}",
                              f"maps to series {oname!r}: a series is read from the column "
                              f"(CSV) or array (JSON) of its own name; rename it in the "
                              "program's output or the study's series")
        if oname not in outputs:
            raise ConfigError(f"{key}.output_map.{fkey}",
                              f"maps to {oname!r}, which is not an output; outputs: {outputs}")
        if oname in seen:
            raise ConfigError(f"{key}.output_map.{fkey}",
                              f"output {oname!r} is already read from key {seen[oname]!r}")
        seen[oname] = str(fkey)
        file_keys[oname] = str(fkey)
    return [*outputs, *series_columns(series)], file_keys


def _read_output_file(out_file: Any, known_names: list[str],
                      key: str) -> tuple[str, Template | None]:
    if not isinstance(out_file, str) or not out_file:
        raise ConfigError(f"{key}.output_file", "required: the file the program writes its "
                          "outputs to (relative to its scratch directory), or '-' for stdout")
    if out_file == STDOUT:
        return out_file, None
    check_name(out_file, f"{key}.output_file", "output file")
    return out_file, Template.compile(out_file, [*known_names, "input_file"],
                                      f"{key}.output_file")


def _read_input_file(spec: Any, root: Path, input_names: list[str], known_names: list[str],
                     known_all: list[str], ikey: str) -> dict[str, Any]:
    """``input_file`` as the simulator's ``input_*`` and ``separator`` fields."""
    if spec is None:
        return {}
    if not isinstance(spec, Mapping):
        raise ConfigError(ikey, "must be a mapping with 'name', 'format', ...")
    check_options(spec, INPUT_FILE_ALLOWED, ikey)
    in_format = spec.get("format", "lines")
    if in_format not in INPUT_FORMATS:
        raise ConfigError(f"{ikey}.format", f"{in_format!r} is not one of {list(INPUT_FORMATS)}")
    raw_name = str(spec.get("name") or DEFAULT_INPUT_NAMES[in_format])
    check_name(raw_name, f"{ikey}.name", "input file name")
    raw_extra = spec.get("extra") or {}
    if not isinstance(raw_extra, Mapping):
        raise ConfigError(f"{ikey}.extra", "must map names to values")
    extra: dict[str, Any] = {}
    for k, v in raw_extra.items():
        if k in input_names:
            raise ConfigError(f"{ikey}.extra.{k}", "is a study input; it is written already")
        extra[str(k)] = (Template.compile(v, known_all, f"{ikey}.extra.{k}")
                         if isinstance(v, str) else v)
    return {"input_name": Template.compile(raw_name, known_names, f"{ikey}.name"),
            "input_format": in_format,
            "input_template": _read_template(spec, in_format, root, known_all, ikey),
            "input_extra": extra, "separator": str(spec.get("separator", " "))}


def _read_template(spec: Mapping[str, Any], in_format: str, root: Path,
                   known_all: list[str], ikey: str) -> Template | None:
    """``template`` (inline) or ``template_file`` (a path), for format ``template`` only."""
    has_t, has_tf = spec.get("template") is not None, spec.get("template_file") is not None
    if in_format != "template":
        if has_t or has_tf:
            raise ConfigError(f"{ikey}.template", f"only used with format 'template', not "
                              f"{in_format!r}")
        return None
    if has_t == has_tf:
        raise ConfigError(f"{ikey}.template", "format 'template' needs exactly one of "
                          "'template' (inline text) or 'template_file' (a path)")
    if not has_tf:
        return Template.compile(str(spec["template"]), known_all, f"{ikey}.template")
    tpath = _locate(str(spec["template_file"]), root)
    try:
        text = tpath.read_text()
    except OSError as exc:
        raise ConfigError(f"{ikey}.template_file", f"cannot read {tpath}: {exc}") from None
    return Template.compile(text, known_all, f"{ikey}.template_file ({tpath})")


def _positive_int(value: Any, key: str, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(key, f"must be a positive integer{what}, got {value!r}")


def _read_run_options(options: Mapping[str, Any], root: Path, known_all: list[str],
                      key: str) -> dict[str, Any]:
    """How runs are run: timeout, environment, scratch base, links, seeds, parallelism."""
    timeout = options.get("timeout", ALLOWED["timeout"])
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ConfigError(f"{key}.timeout",
                          f"must be a positive number of seconds, got {timeout!r}")
    env_opt = options.get("env") or {}
    if not isinstance(env_opt, Mapping):
        raise ConfigError(f"{key}.env", "must map variable names to values")
    env = {str(k): Template.compile(str(v), known_all, f"{key}.env.{k}")
           for k, v in env_opt.items()}
    workdir = options.get("workdir")
    wpath = None
    if workdir is not None:
        wpath = Path(str(workdir)).expanduser()
        wpath = wpath if wpath.is_absolute() else root / wpath
    link_mode = options.get("link_mode", ALLOWED["link_mode"])
    if link_mode not in LINK_MODES:
        raise ConfigError(f"{key}.link_mode", f"{link_mode!r} is not one of {list(LINK_MODES)}")
    seed_bits = options.get("seed_bits", ALLOWED["seed_bits"])
    if isinstance(seed_bits, bool) or not isinstance(seed_bits, int) or not 1 <= seed_bits <= 63:
        raise ConfigError(f"{key}.seed_bits", f"must be an integer from 1 to 63 (seeds are then "
                          f"in [0, 2^seed_bits - 1]), got {seed_bits!r}")
    max_par = options.get("max_parallel")
    if max_par is not None:
        _positive_int(max_par, f"{key}.max_parallel", "")
    return {"timeout": float(timeout), "env": env,
            "keep_failed": _bool(options, "keep_failed", False, key), "workdir": wpath,
            "link_files": _read_links(options.get("link_files"), root, f"{key}.link_files"),
            "link_mode": link_mode, "seed_bits": seed_bits, "max_parallel": max_par}


def _check_link_names(links: Mapping[str, Path], in_name: Template | None, out_file: str,
                      key: str) -> None:
    literal = {f"{key}.input_file.name": in_name.text if in_name else None,
               f"{key}.output_file": out_file if out_file != STDOUT else None}
    for where, name in literal.items():
        if name is not None and name in links:
            raise ConfigError(where, f"{name!r} is also a link_files name; a run would write "
                              "or read the linked file instead")


def _read_confinement(study: Mapping[str, Any], options: Mapping[str, Any], root: Path,
                      key: str) -> tuple[str, list[Path]]:
    """``simulator.confine`` resolved (module :mod:`~simcalib.simulators.confine`)
    and ``options.writable``: paths a confined run may also write beneath."""
    spec = study.get("simulator") if isinstance(study.get("simulator"), Mapping) else {}
    ckey = key.removesuffix(".options") + ".confine"
    mode = confine.resolve_mode(spec.get("confine"), ckey)  # type: ignore[union-attr]
    raw = options.get("writable") or []
    if not isinstance(raw, list) or not all(isinstance(p, str) and p for p in raw):
        raise ConfigError(f"{key}.writable", "must be a list of paths (directories or files "
                          f"a confined run may write to), got {raw!r}")
    writable = []
    for p in raw:
        path = Path(p).expanduser()
        writable.append((path if path.is_absolute() else root / path).resolve())
    return mode, writable


def _dry_render(sim: CommandSimulator, key: str) -> None:
    """Render every template once with stand-in values (1 for integer inputs, 0.5
    otherwise) so that a format spec that cannot apply (``{R0:d}`` on a real
    input) fails at validation, not in every row."""
    values: dict[str, Any] = {n: (1 if n in sim.integer_names else 0.5) for n in sim.input_names}
    values.update(seed=1, run_id=0, root=str(sim.root), workdir="/tmp/x",
                  input_file="in", output_file="out")
    checks: list[tuple[str, Template | None]] = [
        (f"{key}.command.{i}", t) for i, t in enumerate(sim.argv)]
    checks += [(f"{key}.output_file", sim.output_file), (f"{key}.input_file.name", sim.input_name),
               (f"{key}.input_file.template", sim.input_template)]
    checks += [(f"{key}.input_file.extra.{k}", v) for k, v in sim.input_extra.items()
               if isinstance(v, Template)]
    checks += [(f"{key}.env.{k}", t) for k, t in sim.env.items()]
    for where, tpl in checks:
        if tpl is None:
            continue
        try:
            text = tpl.render(values)
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            raise ConfigError(where, f"template {tpl.text[:60]!r} cannot be rendered: {exc}") \
                from None
        if where in (f"{key}.output_file", f"{key}.input_file.name"):
            # what a format spec makes of a value ('{seed:/>5}' gives '////1')
            check_name(text, where, f"file name {tpl.text!r} renders as")

