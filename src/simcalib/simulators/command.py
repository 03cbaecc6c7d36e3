"""An external executable as a simulator: one process per input row.

This is how a study drives a simulator it cannot import, FluTE being the model
case: write the row's inputs into a file the program reads (FluTE-style
``name value`` lines, JSON, or any text from a template) and/or onto its command
line, run it in a scratch directory of its own, and read the outputs back from a
file it writes (``key: value`` lines such as FluTE's ``Summary0``, CSV or JSON).

Why each design choice:

* **One scratch directory per row.**  Legacy simulators write fixed file names
  (``Summary0``, ``Log0``) into their working directory; separate directories are
  what lets rows run in parallel without clobbering each other.  A directory is
  deleted after a successful run and, with ``keep_failed``, kept after a failed
  one so the user can rerun the exact command by hand.
* **Its own process group.**  A simulator is often a shell script that starts
  the real program; killing only the direct child on a timeout would leave the
  grandchild running.  Each run is started in a new session and the whole group
  is killed on timeout, after a normal exit (stray background children), and
  when the batch is interrupted.
* **Failures are data.**  A non-zero exit, a timeout, a missing or unparseable
  output file and a NaN output each become a row with a status from
  :mod:`simcalib.simulators.base` and the tail of the program's stderr in
  ``message``; :meth:`CommandSimulator.run` never raises because one run failed.
* **Templates are checked when the config is validated.**  Builders run during
  config validation, so a placeholder naming no input (``{R_0}`` for ``{R0}``)
  fails before any job starts, with the key path in the message.

Placeholders use Python's ``str.format`` syntax (``{R0}``, ``{R0:.4f}``; a literal
brace is written ``{{`` or ``}}``).  The names available are every study input
(tunable parameters and contexts), ``seed`` (the row's integer seed), ``run_id``
(the ``run_id`` column when the inputs have one, else the row's index label),
``root`` (the absolute workflow root: the working directory when the config was
built), ``workdir`` (the row's absolute scratch directory), ``input_file`` and
``output_file`` (the rendered file names).  See ``docs/command.md`` for every
option and an example study.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import re
import select
import shlex
import shutil
import signal
import string
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simcalib.errors import ConfigError
from simcalib.simulators.base import (
    STATUS_ERROR,
    STATUS_INVALID,
    STATUS_MISSING,
    STATUS_NAN,
    STATUS_OK,
    STATUS_PARSE,
    STATUS_TIMEOUT,
    check_options,
    finalize,
    register,
)

ALLOWED: dict[str, Any] = {
    "command": None, "input_file": None, "output_file": None, "parser": "keyvalue",
    "output_map": None, "outputs": None, "timeout": 600.0, "env": None,
    "keep_failed": False, "workdir": None, "link_files": None, "max_parallel": None,
}
INPUT_FILE_ALLOWED: dict[str, Any] = {
    "name": None, "format": "lines", "template": None, "template_file": None,
    "extra": None, "separator": " ",
}
INPUT_FORMATS = ("lines", "json", "template")
PARSERS = ("keyvalue", "csv", "json")
DEFAULT_INPUT_NAMES = {"lines": "config.txt", "json": "inputs.json", "template": "config.txt"}
STDOUT = "-"  # ``output_file: "-"`` parses the program's standard output
RUNTIME_NAMES = ("seed", "run_id", "root", "workdir", "input_file", "output_file")
STDOUT_LOG, STDERR_LOG = ".simcalib.stdout", ".simcalib.stderr"
KILL_GRACE_S = 2.0  # SIGTERM, then SIGKILL after this long
TAIL_CHARS = 600

_FORMATTER = string.Formatter()
_INDEXED = re.compile(r"^(.*)\[(-?\d+)\]$")
_TOKENS = re.compile(r"[\s,;]+")


# ---------------------------------------------------------------------------
# templates
# ---------------------------------------------------------------------------
# str.format's spec mini-language: [[fill]align][sign][z][#][0][width][grouping]
# [.precision][type].  Width and precision are capped: '{x:>20000000000}' would
# otherwise allocate gigabytes when the template is first rendered.
_SPEC = re.compile(r"(?:.?[<>=^])?[+\- ]?z?#?0?(?P<width>\d*)[,_]?(?:\.(?P<prec>\d+))?"
                   r"[bcdeEfFgGnosxX%]?")
MAX_FORMAT_WIDTH = 1000
MAX_FORMAT_PRECISION = 100


def _check_format_spec(spec: str, fname: str, key: str) -> None:
    m = _SPEC.fullmatch(spec)
    if m is None:
        raise ConfigError(key, f"format spec {spec!r} of '{{{fname}}}' is not a valid "
                          "str.format spec such as ':.6g', ':>8' or ':d'")
    width, prec = int(m["width"] or 0), int(m["prec"] or 0)
    if width > MAX_FORMAT_WIDTH or prec > MAX_FORMAT_PRECISION:
        raise ConfigError(key, f"format spec {spec!r} of '{{{fname}}}': width <= "
                          f"{MAX_FORMAT_WIDTH} and precision <= {MAX_FORMAT_PRECISION}")


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
            if spec:
                _check_format_spec(spec, fname, key)
            names.add(fname)
        return cls(text, frozenset(names))

    def render(self, values: Mapping[str, Any]) -> str:
        return _FORMATTER.vformat(self.text, (), values)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# output parsing
# ---------------------------------------------------------------------------
class OutputParseError(Exception):
    """An output file exists but does not hold the values we need."""


def parse_keyvalue(text: str) -> dict[str, str]:
    """``key: value`` lines (FluTE's Summary file).  Blank lines, ``#`` comments
    and lines without a colon (headers, free text) are skipped; the key is
    everything before the first colon, stripped."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith("#") or ":" not in s:
            continue
        k, v = s.split(":", 1)
        out[k.strip()] = v.strip()
    return out


def parse_csv(text: str) -> dict[str, str]:
    """A CSV table with a header; the *last* data row is used (simulators that
    write a time series usually end with the final state)."""
    rows = [r for r in csv.reader(io.StringIO(text)) if any(c.strip() for c in r)]
    if len(rows) < 2:
        raise OutputParseError("CSV output needs a header and at least one data row")
    header, last = [h.strip() for h in rows[0]], rows[-1]
    if len(last) != len(header):
        raise OutputParseError(f"CSV last row has {len(last)} fields, header has {len(header)}")
    return dict(zip(header, (c.strip() for c in last), strict=True))


def parse_json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise OutputParseError(f"not valid JSON ({exc})") from None


PARSE_FUNCS = {"keyvalue": parse_keyvalue, "csv": parse_csv, "json": parse_json}


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
    if isinstance(data, dict) and key in data:
        return _to_float(data[key], key)
    m = _INDEXED.match(key)
    if isinstance(data, dict) and m and m.group(1) in data:
        return _to_float(_index(data[m.group(1)], int(m.group(2)), m.group(1)), key)
    node = data
    for part in key.split("."):
        pm = _INDEXED.match(part)
        name, idx = (pm.group(1), int(pm.group(2))) if pm else (part, None)
        if name:
            if not isinstance(node, dict) or name not in node:
                keys = list(data)[:12] if isinstance(data, dict) else []
                raise OutputParseError(f"key '{key}' not found (file has {keys})")
            node = node[name]
        if idx is not None:
            node = _index(node, idx, key)
    return _to_float(node, key)


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------
def _clean(text: str) -> str:
    """Printable, one-line text for the ``message`` column."""
    text = "".join(c if c.isprintable() or c == "\n" else "?" for c in text)
    return " | ".join(line.strip() for line in text.strip().splitlines() if line.strip())


def _tail(path: Path, n: int = TAIL_CHARS) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 4 * n))
            raw = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    text = _clean(raw)
    return text if len(text) <= n else "..." + text[-n:]


def _kill_group(proc: subprocess.Popen, grace: float = KILL_GRACE_S) -> None:
    """SIGTERM the run's process group, then SIGKILL whatever is left."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)


def _wait_or_kill(proc: subprocess.Popen, timeout: float) -> bool:
    """Wait for ``proc`` up to ``timeout`` seconds; on expiry kill its process group
    (SIGTERM, then SIGKILL after a grace period) and return True.

    ``Popen.wait(timeout=...)`` polls with sleeps of up to 50 ms, a large share of
    a short run; a pidfd (Linux >= 5.3) wakes up the moment the program exits.
    Elsewhere a timer thread enforces the timeout around a blocking wait."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        fd = -1
    if fd >= 0:
        try:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            deadline = time.monotonic() + timeout
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or poller.poll(min(left * 1000, 2**31 - 1)):
                    break
        finally:
            os.close(fd)
        if proc.poll() is not None:
            return False
        _kill_group(proc)
        return True
    fired = threading.Event()

    def on_timeout() -> None:
        fired.set()
        _kill_group(proc)

    timer = threading.Timer(timeout, on_timeout)
    timer.daemon = True
    timer.start()
    proc.wait()
    timer.cancel()
    return fired.is_set()


def _render_number(value: Any, integer: bool) -> Any:
    """Inputs as placeholder values: integer inputs (and integral values of integer
    dtype) as ``int`` so ``responsedelay 7`` is written, not ``7.0``."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and integer and value.is_integer():
        return int(value)
    return value


def _is_finite(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return True  # non-numeric values (strings) are passed through as they are


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)[:40] or "run"


def _exit_text(rc: int) -> str:
    if rc < 0:
        try:
            return f"killed by signal {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit status {rc}"


# ---------------------------------------------------------------------------
# the simulator
# ---------------------------------------------------------------------------
@dataclass
class CommandSimulator:
    """Runs ``argv`` once per row; see the module docstring."""

    argv: list[Template]
    outputs: list[str]
    file_keys: dict[str, str]  # output name -> key in the output file
    parser: str = "keyvalue"
    output_file: Template | None = None  # None: parse stdout
    input_name: Template | None = None
    input_format: str | None = None
    input_template: Template | None = None
    input_extra: dict[str, Any] = field(default_factory=dict)
    separator: str = " "
    input_names: list[str] = field(default_factory=list)
    integer_names: frozenset[str] = frozenset()
    timeout: float = 600.0
    env: dict[str, Template] = field(default_factory=dict)
    keep_failed: bool = False
    workdir: Path | None = None
    link_files: list[Path] = field(default_factory=list)
    max_parallel: int | None = None
    root: Path = field(default_factory=Path.cwd)

    def __post_init__(self) -> None:
        self._stopping = False
        self._live: set[subprocess.Popen] = set()
        self._lock = threading.Lock()

    # ---- batch -------------------------------------------------------------
    def run(self, inputs: pd.DataFrame, seeds: np.ndarray, threads: int = 1) -> pd.DataFrame:
        seeds = np.asarray(seeds)
        if len(seeds) != len(inputs):
            raise ValueError(f"{len(seeds)} seeds for {len(inputs)} rows")
        names = self.input_names or [c for c in inputs.columns if c != "run_id"]
        missing = [n for n in names if n not in inputs.columns]
        has_run_id = "run_id" in inputs.columns
        rows = []
        for pos, (label, row) in enumerate(inputs.iterrows()):
            values = {n: _render_number(row[n], n in self.integer_names
                                        or pd.api.types.is_integer_dtype(inputs[n].dtype))
                      for n in names if n in inputs.columns}
            run_id = row["run_id"] if has_run_id else label
            rows.append((values, int(seeds[pos]), _render_number(run_id, True)))

        def one(args: tuple[dict[str, Any], int, Any]) -> dict[str, Any]:
            if missing:
                return {"status": STATUS_ERROR, "message": f"input column(s) missing: {missing}"}
            try:
                return self.run_one(*args)
            except Exception as exc:  # e.g. an unwritable workdir: still data, not a crash
                return {"status": STATUS_ERROR, "message": f"{type(exc).__name__}: {exc}"}

        n = len(rows) or 1
        workers = max(1, min(int(threads or 1), self.max_parallel or n, n))
        restore = self._trap_sigterm()
        self._stopping = False
        pool = (ThreadPoolExecutor(max_workers=workers, thread_name_prefix="simcalib-command")
                if workers > 1 else None)
        try:
            results = list(pool.map(one, rows)) if pool else [one(r) for r in rows]
        except BaseException:
            # interrupted (Ctrl-C, SIGTERM): kill every running program before
            # waiting for the worker threads, and start no new ones
            self._kill_all()
            if pool:
                pool.shutdown(wait=True, cancel_futures=True)
            raise
        finally:
            restore()
            if pool:
                pool.shutdown(wait=True)
        res = pd.DataFrame(results, index=inputs.index)
        return finalize(res, self.outputs, inputs.index)

    def _trap_sigterm(self) -> Any:
        """While a batch runs in the main thread, turn SIGTERM (a cancelled cluster
        job, Snakemake stopping) into SystemExit so the ``except`` above kills the
        runs' process groups; they live in their own sessions and would not get
        the signal otherwise."""
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous = signal.getsignal(signal.SIGTERM)
        if previous not in (signal.SIG_DFL, None):
            return lambda: None  # someone else handles it; leave theirs alone

        def handler(signum: int, frame: Any) -> None:
            raise SystemExit(128 + signum)

        signal.signal(signal.SIGTERM, handler)
        return lambda: signal.signal(signal.SIGTERM, previous)

    def _kill_all(self) -> None:
        with self._lock:
            self._stopping = True
            live = list(self._live)
        for proc in live:
            _kill_group(proc, grace=0.5)

    # ---- one row -----------------------------------------------------------
    def run_one(self, inputs: Mapping[str, Any], seed: int, run_id: Any = 0) -> dict[str, Any]:
        """Run one row; returns ``{output: value, ..., status, message}``."""
        bad = [k for k, v in inputs.items() if not _is_finite(v)]
        if bad:
            return {"status": STATUS_INVALID, "message": f"non-finite input(s): {bad}"}
        base = self.workdir or Path(tempfile.gettempdir())
        base.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f"simcalib-{_safe_name(str(run_id))}-", dir=base))
        result = self._run_in(scratch, dict(inputs), seed, run_id)
        if result["status"] == STATUS_OK or not self.keep_failed:
            shutil.rmtree(scratch, ignore_errors=True)
        else:
            result["message"] = f"{result['message']} [scratch kept: {scratch}]"
        return result

    def _run_in(self, scratch: Path, inputs: dict[str, Any], seed: int,
                run_id: Any) -> dict[str, Any]:
        values: dict[str, Any] = {**inputs, "seed": seed, "run_id": run_id,
                                  "root": str(self.root), "workdir": str(scratch)}
        try:
            in_name = self.input_name.render(values) if self.input_name else ""
            values["input_file"] = in_name
            out_name = self.output_file.render(values) if self.output_file else STDOUT
            values["output_file"] = out_name
            if self.input_name is not None:
                (scratch / in_name).write_text(self._input_text(inputs, values))
            argv = [t.render(values) for t in self.argv]
            env = {**os.environ, **{k: t.render(values) for k, t in self.env.items()}}
        except (ValueError, TypeError, KeyError, IndexError, OSError) as exc:
            return {"status": STATUS_ERROR,
                    "message": f"could not prepare the run: {type(exc).__name__}: {exc}"}
        for src in self.link_files:
            with contextlib.suppress(FileExistsError):
                (scratch / src.name).symlink_to(src)

        out_log, err_log = scratch / STDOUT_LOG, scratch / STDERR_LOG
        if self._stopping:
            return {"status": STATUS_ERROR, "message": "batch interrupted"}
        try:
            with open(out_log, "wb") as fo, open(err_log, "wb") as fe:
                proc = subprocess.Popen(argv, cwd=scratch, env=env, stdin=subprocess.DEVNULL,
                                        stdout=fo, stderr=fe, start_new_session=True)
        except OSError as exc:
            return {"status": STATUS_ERROR, "message": f"cannot start {argv[0]!r}: {exc}"}
        with self._lock:  # either _kill_all sees this run, or this run sees _stopping
            self._live.add(proc)
            stopping = self._stopping
        if stopping:
            _kill_group(proc, grace=0.5)
        try:
            timed_out = _wait_or_kill(proc, self.timeout)
        finally:
            # stray background children of a finished run die with it
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            with self._lock:
                self._live.discard(proc)
        rc = proc.returncode

        def fail(status: str, what: str) -> dict[str, Any]:
            tail = _tail(err_log)
            where = "stderr" if tail else "stdout"
            tail = tail or _tail(out_log)
            return {"status": status, "message": f"{what}; {where}: {tail}" if tail else what}

        if timed_out:
            return fail(STATUS_TIMEOUT, f"timed out after {self.timeout:g} s (process group "
                        "killed)")
        if rc != 0:
            return fail(STATUS_ERROR, _exit_text(rc))
        out_path = out_log if out_name == STDOUT else scratch / out_name
        if not out_path.is_file():
            return fail(STATUS_MISSING, f"output file {out_name!r} not written")
        try:
            text = out_path.read_text(errors="replace")
            data = PARSE_FUNCS[self.parser](text)
            vals = {o: extract(data, self.file_keys[o]) for o in self.outputs}
        except OutputParseError as exc:
            return fail(STATUS_PARSE, f"{out_name}: {exc}")
        bad = [o for o, v in vals.items() if not math.isfinite(v)]
        if bad:
            return {**vals, **fail(STATUS_NAN, f"non-finite output(s): {bad}")}
        return {**vals, "status": STATUS_OK, "message": ""}

    def _input_text(self, inputs: Mapping[str, Any], values: Mapping[str, Any]) -> str:
        if self.input_format == "template":
            assert self.input_template is not None
            return self.input_template.render(values)
        as_json = self.input_format == "json"
        extra = {k: _render_extra(v, values, as_json) for k, v in self.input_extra.items()}
        if as_json:
            doc = {**inputs, **extra}
            return json.dumps(doc, indent=1, default=float) + "\n"
        lines = [f"{k}{self.separator}{v}" for k, v in {**inputs, **extra}.items()]
        return "\n".join(lines) + "\n"


def _render_extra(value: Any, values: Mapping[str, Any], as_json: bool) -> Any:
    """An ``extra`` entry's value; in JSON a string that is exactly one placeholder
    (``"{seed}"``) keeps the value's type, so the seed is written as a number."""
    if not isinstance(value, Template):
        return value
    m = re.fullmatch(r"\{(\w+)\}", value.text)
    if as_json and m:
        return values[m.group(1)]
    return value.render(values)


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


# The repository that ships ``resources/`` (for an editable install); relative
# paths not found under the workflow root are looked up here, so the shipped
# example study also works when Snakemake runs in another directory (``-d``).
PACKAGE_ROOT = Path(__file__).resolve().parents[3]


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


def _bool(options: Mapping[str, Any], name: str, default: bool, key: str) -> bool:
    v = options.get(name, default)
    if not isinstance(v, bool):
        raise ConfigError(f"{key}.{name}", f"must be true or false, got {v!r}")
    return v


@register("command")
def build(options: Mapping[str, Any], study: Mapping[str, Any], key: str) -> CommandSimulator:
    """Validate ``options`` (see ``docs/command.md``) and build the simulator."""
    check_options(options, ALLOWED, key)
    root = Path.cwd()
    input_names, integer_names = _study_inputs(study)
    clash = sorted(set(input_names) & set(RUNTIME_NAMES))
    if clash:
        raise ConfigError(f"{key}.command", f"study input(s) {clash} clash with the reserved "
                          f"placeholder names {list(RUNTIME_NAMES)}; rename them")
    known_all = [*input_names, *RUNTIME_NAMES]
    known_names = [n for n in known_all if n not in ("input_file", "output_file", "workdir")]

    # command
    cmd = options.get("command")
    if isinstance(cmd, str):
        cmd = shlex.split(cmd)
    if not isinstance(cmd, list) or not cmd or not all(isinstance(a, str | int | float)
                                                        for a in cmd):
        raise ConfigError(f"{key}.command", "required: a list of argument strings, e.g. "
                          "['python3', 'sim.py', '{input_file}']")
    cmd = [str(a) for a in cmd]
    cmd[0] = _resolve_argv0(cmd[0], root, f"{key}.command.0")
    cmd = [cmd[0], *(_resolve_arg(a, root) for a in cmd[1:])]
    argv = [Template.compile(a, known_all, f"{key}.command.{i}") for i, a in enumerate(cmd)]

    # outputs and the file keys they come from
    outputs = list(options.get("outputs") or study.get("outputs") or [])
    if not outputs:
        raise ConfigError(f"{key}.outputs", "list the outputs the command produces "
                          "(or give the study's 'outputs')")
    if len(set(outputs)) != len(outputs):
        raise ConfigError(f"{key}.outputs", f"duplicate names in {outputs}")
    omap = options.get("output_map") or {}
    if not isinstance(omap, Mapping):
        raise ConfigError(f"{key}.output_map", "must map output-file keys to output names")
    file_keys = {o: o for o in outputs}
    seen: dict[str, str] = {}
    for fkey, oname in omap.items():
        if oname not in outputs:
            raise ConfigError(f"{key}.output_map.{fkey}",
                              f"maps to {oname!r}, which is not an output; outputs: {outputs}")
        if oname in seen:
            raise ConfigError(f"{key}.output_map.{fkey}",
                              f"output {oname!r} is already read from key {seen[oname]!r}")
        seen[oname] = str(fkey)
        file_keys[oname] = str(fkey)

    parser = options.get("parser", ALLOWED["parser"])
    if parser not in PARSERS:
        raise ConfigError(f"{key}.parser", f"{parser!r} is not one of {list(PARSERS)}")
    out_file = options.get("output_file")
    if not isinstance(out_file, str) or not out_file:
        raise ConfigError(f"{key}.output_file", "required: the file the program writes its "
                          "outputs to (relative to its scratch directory), or '-' for stdout")
    out_tpl = None if out_file == STDOUT else Template.compile(
        out_file, [*known_names, "input_file"], f"{key}.output_file")

    # input file
    in_name = in_tpl = None
    in_format: str | None = None
    extra: dict[str, Any] = {}
    separator = " "
    spec = options.get("input_file")
    if spec is not None:
        ikey = f"{key}.input_file"
        if not isinstance(spec, Mapping):
            raise ConfigError(ikey, "must be a mapping with 'name', 'format', ...")
        check_options(spec, INPUT_FILE_ALLOWED, ikey)
        in_format = spec.get("format", "lines")
        if in_format not in INPUT_FORMATS:
            raise ConfigError(f"{ikey}.format",
                              f"{in_format!r} is not one of {list(INPUT_FORMATS)}")
        in_name = Template.compile(str(spec.get("name") or DEFAULT_INPUT_NAMES[in_format]),
                                   known_names, f"{ikey}.name")
        separator = str(spec.get("separator", " "))
        has_t, has_tf = spec.get("template") is not None, spec.get("template_file") is not None
        if in_format == "template":
            if has_t == has_tf:
                raise ConfigError(f"{ikey}.template", "format 'template' needs exactly one of "
                                  "'template' (inline text) or 'template_file' (a path)")
            if has_tf:
                tpath = _locate(str(spec["template_file"]), root)
                try:
                    text = tpath.read_text()
                except OSError as exc:
                    raise ConfigError(f"{ikey}.template_file", f"cannot read {tpath}: {exc}") \
                        from None
                in_tpl = Template.compile(text, known_all, f"{ikey}.template_file ({tpath})")
            else:
                in_tpl = Template.compile(str(spec["template"]), known_all, f"{ikey}.template")
        elif has_t or has_tf:
            raise ConfigError(f"{ikey}.template", f"only used with format 'template', not "
                              f"{in_format!r}")
        raw_extra = spec.get("extra") or {}
        if not isinstance(raw_extra, Mapping):
            raise ConfigError(f"{ikey}.extra", "must map names to values")
        for k, v in raw_extra.items():
            if k in input_names:
                raise ConfigError(f"{ikey}.extra.{k}", "is a study input; it is written already")
            extra[str(k)] = (Template.compile(v, known_all, f"{ikey}.extra.{k}")
                             if isinstance(v, str) else v)

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
    links = []
    for i, f in enumerate(options.get("link_files") or []):
        p = _locate(str(f), root)
        if not p.exists():
            raise ConfigError(f"{key}.link_files.{i}", f"{p} does not exist")
        links.append(p.resolve())
    max_par = options.get("max_parallel")
    if max_par is not None and (isinstance(max_par, bool) or not isinstance(max_par, int)
                                or max_par < 1):
        raise ConfigError(f"{key}.max_parallel", f"must be a positive integer, got {max_par!r}")

    sim = CommandSimulator(
        argv=argv, outputs=outputs, file_keys=file_keys, parser=parser, output_file=out_tpl,
        input_name=in_name, input_format=in_format, input_template=in_tpl, input_extra=extra,
        separator=separator, input_names=input_names, integer_names=integer_names,
        timeout=float(timeout), env=env, keep_failed=_bool(options, "keep_failed", False, key),
        workdir=wpath, link_files=links, max_parallel=max_par, root=root)
    _dry_render(sim, key)
    return sim


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
            tpl.render(values)
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            raise ConfigError(where, f"template {tpl.text[:60]!r} cannot be rendered: {exc}") \
                from None
