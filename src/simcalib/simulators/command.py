"""An external executable as a simulator: one process per input row.

This is how a study drives a simulator it cannot import, FluTE being the model
case: write the row's inputs into a file the program reads (FluTE-style
``name value`` lines, JSON, or any text from a template) and/or onto its command
line, run it in a scratch directory of its own, and read the outputs back from a
file it writes (``key: value`` lines such as FluTE's ``Summary0``, CSV or JSON).
A study's curves (``series``) come from the same file: one CSV row per time point or
JSON arrays, read into ``<series>@<point>`` columns after the scalars
(:mod:`simcalib.simulators.command_series`).

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
import json
import logging
import math
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simcalib.errors import ConfigError
from simcalib.simulators import confine, strays
from simcalib.simulators.base import (
    STATUS_ERROR,
    STATUS_INVALID,
    STATUS_MISSING,
    STATUS_NAN,
    STATUS_OK,
    STATUS_PARSE,
    STATUS_TIMEOUT,
    WARNING_PREFIX,
    finalize,
)
from simcalib.simulators.command_parse import (  # noqa: F401  (re-exported)
    KEYVALUE_SEPARATOR,
    PARSE_FUNCS,
    MissingKeyError,
    OutputParseError,
    Template,
    _clean,
    _nearest,
    describe_output,
    extract,
    parse_csv,
    parse_json,
    parse_keyvalue,
    parse_output,
)
from simcalib.simulators.command_series import (
    SeriesAbsentError,
    describe_nonfinite,
    nonfinite,
    read_curves,
)
from simcalib.simulators.scratch import LinkStage, Watchdog, inside, trap_sigterm

log = logging.getLogger(__name__)

ALLOWED: dict[str, Any] = {
    "command": None, "input_file": None, "output_file": None, "parser": "keyvalue",
    "output_map": None, "outputs": None, "timeout": 600.0, "env": None,
    "keep_failed": False, "workdir": None, "link_files": None, "max_parallel": None,
    "seed_bits": 31, "link_mode": "copy", "writable": None,
}
LINK_MODES = ("copy", "symlink")
INPUT_FILE_ALLOWED: dict[str, Any] = {
    "name": None, "format": "lines", "template": None, "template_file": None,
    "extra": None, "separator": " ",
}
INPUT_FORMATS = ("lines", "json", "template")
PARSERS = ("keyvalue", "csv", "json")
DEFAULT_INPUT_NAMES = {"lines": "config.txt", "json": "inputs.json", "template": "config.txt"}
STDOUT = "-"  # ``output_file: "-"`` parses the program's standard output
RUNTIME_NAMES = ("seed", "run_id", "root", "workdir", "input_file", "output_file")
#: literal ``command`` arguments with these suffixes are scripts (fingerprinted)
SCRIPT_SUFFIXES = frozenset({".sh", ".bash", ".py", ".r", ".jl", ".pl", ".rb", ".lua", ".m",
                             ".js", ".tcl", ".awk", ".ps1", ".bat", ".exe"})
STDOUT_LOG, STDERR_LOG = ".simcalib.stdout", ".simcalib.stderr"
KILL_GRACE_S = 2.0  # SIGTERM, then SIGKILL after this long
TAIL_CHARS = 600
# Every run starts as ``sh -c GATE_SCRIPT simcalib-run argv...``: the shell waits
# for one line on its stdin, which the batch writes after registering the new
# process group with the watchdog, then execs the program (same pid, stdin from
# /dev/null).  Without the gate, a SIGKILL between the fork and the registration
# would leave the run unsupervised.  If the batch dies first, the shell reads
# end-of-file and exits without starting the program.  Cost: one ``sh`` start
# (a few milliseconds of wall-clock time; docs/command.md, "Overhead").
GATE = ["/bin/sh", "-c", 'read _gate && exec "$@" </dev/null', "simcalib-run"]
# stderr lines of a successful run that say this are reported in its message
_DENIED = re.compile(r"permission denied|read-only|EACCES|EROFS|not permitted", re.IGNORECASE)
_WARNING_LINE = re.compile(r"\b(warn\w*|error\w*|fatal|exception|traceback|abort\w*|"
                           r"invalid|overflow|out of range|permission denied|"
                           r"read-only file system)\b", re.IGNORECASE)


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------
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


def _warning_lines(path: Path, n: int = TAIL_CHARS) -> tuple[int, str]:
    """How many stderr lines mention a warning or an error, and those lines as
    one printable line (the first ``n`` characters)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(1 << 20).decode("utf-8", errors="replace")
    except OSError:
        return 0, ""
    hits = [line for line in raw.splitlines() if _WARNING_LINE.search(line)]
    text = _clean("\n".join(hits))
    return len(hits), text if len(text) <= n else text[:n] + "..."


def _dir_listing(scratch: Path, wanted: str) -> str:
    """What the program did write, for a missing output file's message."""
    try:
        names = sorted(p.name for p in scratch.iterdir()
                       if p.name not in (STDOUT_LOG, STDERR_LOG) and not p.is_symlink())
    except OSError:
        return ""
    hint = _nearest(wanted, names)
    did = f" (did you mean {hint!r}?)" if hint else ""
    return f"{did}; the scratch directory holds {names[:12]}"


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


def _confined(name: str, scratch: Path) -> None:
    """A rendered file name must stay inside the scratch directory (validation
    checks the template; this checks what placeholders put into it)."""
    p = Path(name)
    if p.is_absolute() or ".." in p.parts or not inside(scratch / p, scratch):
        raise ValueError(f"file name {name!r} leaves the scratch directory")


@dataclass
class _Prepared:
    """A run ready to start."""

    argv: list[str]
    env: dict[str, str]
    out_name: str
    token: str


@dataclass
class _Ended:
    """A run that ended: exit status, whether it timed out, what it changed outside
    its scratch directory (``confine: warn``)."""

    rc: int
    timed_out: bool
    outside: list[str]


@dataclass
class _Batch:
    """What the runs of one batch share."""

    watchdog: Watchdog
    stage: LinkStage | None = None
    error: str = ""
    since: int | None = None  # start (clock ticks): orphans after it are the batch's
    home: Path | None = None  # confine: warn: the batch's own parent of its scratch dirs


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
    key_separator: str = KEYVALUE_SEPARATOR  # keyvalue: what splits key from value
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
    link_files: dict[str, Path] = field(default_factory=dict)  # name in scratch -> original
    link_mode: str = "copy"
    max_parallel: int | None = None
    root: Path = field(default_factory=Path.cwd)
    seed_bits: int = 31
    key: str = "simulator.options"
    confine: str = "off"  # strict | warn | off (resolved: module confine)
    writable: list[Path] = field(default_factory=list)  # declared writable paths (strict)
    # the study's series (name -> SeriesSpec with points): their point columns end
    # ``outputs`` and are read from the file's rows or arrays (module command_series)
    series: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._stopping = False
        self._live: set[subprocess.Popen] = set()
        self._lock = threading.Lock()

    # ---- batch -------------------------------------------------------------
    def run(self, inputs: pd.DataFrame, seeds: np.ndarray, threads: int = 1) -> pd.DataFrame:
        rows, missing = self._prepare(inputs, seeds)
        with self._batch() as batch:
            results = self._run_rows(rows, missing, threads, batch)
        res = pd.DataFrame([{k: v for k, v in r.items() if not k.startswith("_")}
                            for r in results], index=inputs.index)
        return finalize(res, self.outputs, inputs.index, self.key)

    @contextlib.contextmanager
    def _batch(self) -> Any:
        """The per-batch resources: the watchdog that cleans up if this process
        dies, and the read-only copies of ``link_files`` (module
        :mod:`simcalib.simulators.scratch`)."""
        strays.enable_subreaper()
        batch = _Batch(Watchdog(), since=strays.now_ticks())
        try:
            if self.confine == "warn":
                self._make_home(batch)
            if self.link_files and self.link_mode == "copy":
                try:
                    batch.stage = LinkStage(self.link_files, self._base()).__enter__()
                    batch.watchdog.add_dir(batch.stage.dir)  # type: ignore[arg-type]
                except OSError as exc:
                    batch.error = f"could not copy link_files: {type(exc).__name__}: {exc}"
            yield batch
        finally:
            if batch.stage is not None:
                batch.stage.__exit__()
            batch.watchdog.close()
            if batch.home is not None:
                with contextlib.suppress(OSError):  # kept failed runs keep it
                    batch.home.rmdir()
            self._sweep_batch(batch)

    def _make_home(self, batch: _Batch) -> None:
        """Under ``confine: warn`` the batch's scratch directories share a parent of
        their own, so a run's ``../x`` lands where no other program writes and is
        reported with certainty (the shared /tmp is not listed: too busy to tell)."""
        base = self._base()
        base.mkdir(parents=True, exist_ok=True)
        batch.home = Path(tempfile.mkdtemp(prefix="simcalib-batch-", dir=base))
        batch.watchdog.add_parent(batch.home)

    def _sweep_batch(self, batch: _Batch) -> None:
        """Orphans of runs that ended while others were in flight (so could not be
        told apart) are killed when the batch ends: none outlives it."""
        with self._lock:
            left = strays.sweep(batch.since) if not self._live else []
        if left:
            log.warning("%s: runs of this batch left %d process(es) behind (re-parented to "
                        "the job: daemons, double forks or children that cleared their "
                        "environment); killed %s", self.key, len(left), left[:5])

    def _base(self) -> Path:
        return self.workdir or Path(tempfile.gettempdir())

    def _run_rows(self, rows: list[tuple], missing: list[str], threads: int,
                  batch: _Batch) -> list[dict[str, Any]]:
        def one(args: tuple[dict[str, Any], int, Any]) -> dict[str, Any]:
            if missing:
                return {"status": STATUS_ERROR, "message": f"input column(s) missing: {missing}"}
            if batch.error:
                return {"status": STATUS_ERROR, "message": batch.error}
            try:
                return self.run_one(*args, batch=batch)
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
        return results

    def _prepare(self, inputs: pd.DataFrame, seeds: Any) -> tuple[list[tuple], list[str]]:
        """One ``(placeholder values, seed, run_id)`` per row, and the input columns
        the batch lacks."""
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
        return rows, missing

    def probe_row(self, inputs: pd.DataFrame, seed: int) -> pd.DataFrame:
        """Run the first row of ``inputs`` once (see :func:`simcalib.simulators.probe`):
        an output key the file does not hold raises :class:`ConfigError` at the
        ``output_map`` entry it comes from, with the file's keys and the nearest one."""
        rows, missing = self._prepare(inputs.iloc[:1], [seed])
        if missing:
            raise ConfigError(self.key, f"the probe row lacks input column(s) {missing}")
        with self._batch() as batch:
            result = (self.run_one(*rows[0], batch=batch) if not batch.error else
                      {"status": STATUS_ERROR, "message": batch.error})
        if "_absent" in result:
            exc = result["_absent"]
            study_key = self.key.rsplit(".", 2)[0]
            raise ConfigError(f"{study_key}.series.{exc.name}", f"the probe run's output file "
                              f"does not hold this series: {exc} (a CSV needs one row per "
                              "time point with the index column and one column per series; "
                              "JSON one array per series, docs/command.md)")
        if "_missing" in result:
            output, exc = result["_missing"]
            fkey = self.file_keys[output]
            where = (f"{self.key}.output_map.{fkey}" if fkey != output
                     else f"{self.key}.output_map")
            what = (f"maps key '{fkey}' to output '{output}'" if fkey != output else
                    f"has no entry for output '{output}', so it is read from key '{output}'")
            did = f" (did you mean '{exc.hint}'?)" if exc.hint else ""
            shown = exc.available[:40] + (["..."] if len(exc.available) > 40 else [])
            keys = f"the file's keys: {shown}" if shown else "the parser found no key in it"
            context = getattr(exc, "context", "")
            raise ConfigError(where, f"the probe run's output file has no such key: "
                              f"output_map {what}{did}; {keys}"
                              + (f"; {context}" if context else ""))
        res = pd.DataFrame([{k: v for k, v in result.items() if not k.startswith("_")}],
                           index=inputs.index[:1])
        return finalize(res, self.outputs, inputs.index[:1], self.key)

    def program_files(self) -> list[Path]:
        """The files a run reads that the config does not hold: the program, the
        script arguments named literally in ``command`` (executable, or with a
        script suffix) and ``link_files``.  The chunk journal's fingerprint hashes
        them, so a fixed program reruns.  Other literal file arguments are left out:
        they may be files the runs write (a log, a counter), and hashing those would
        throw away every finished run on resume."""
        out: list[Path] = []
        for i, t in enumerate(self.argv):
            if t.names:
                continue
            p = Path(t.text)
            p = p if p.is_absolute() else self.root / p
            if p.is_file() and (i == 0 or p.suffix.lower() in SCRIPT_SUFFIXES
                                or os.access(p, os.X_OK)):
                out.append(p)
        return out + list(self.link_files.values())

    def _trap_sigterm(self) -> Any:
        return trap_sigterm()

    def cancel(self) -> None:
        """Kill every run in flight and start no new one (a chunk being interrupted)."""
        self._kill_all()

    def _kill_all(self) -> None:
        with self._lock:
            self._stopping = True
            live = list(self._live)
        for proc in live:
            _kill_group(proc, grace=0.5)

    # ---- one row -----------------------------------------------------------
    def run_one(self, inputs: Mapping[str, Any], seed: int, run_id: Any = 0,
                batch: _Batch | None = None) -> dict[str, Any]:
        """Run one row; returns ``{output: value, ..., status, message}``.

        The seed is reduced to its low ``seed_bits`` bits (31 by default), so a
        program that reads it into a 32-bit ``int`` gets the seed it was given."""
        seed = int(seed) & ((1 << self.seed_bits) - 1)
        bad = [k for k, v in inputs.items() if not _is_finite(v)]
        if bad:
            return {"status": STATUS_INVALID, "message": f"non-finite input(s): {bad}"}
        if batch is None:
            with self._batch() as own:
                return (self.run_one(inputs, seed, run_id, own) if not own.error else
                        {"status": STATUS_ERROR, "message": own.error})
        base = batch.home or self._base()
        base.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f"simcalib-{_safe_name(str(run_id))}-", dir=base))
        batch.watchdog.add_dir(scratch)
        try:
            result = self._run_in(scratch, dict(inputs), seed, run_id, batch)
        except BaseException:  # interrupted in this thread (Ctrl-C): no scratch left behind
            shutil.rmtree(scratch, ignore_errors=True)
            batch.watchdog.drop_dir(scratch)
            raise
        if result["status"] == STATUS_OK or not self.keep_failed or self._stopping:
            # an interrupted run's directory says nothing about the simulator
            shutil.rmtree(scratch, ignore_errors=True)
        else:
            if batch.stage is not None:  # the copies go with the batch: link the originals
                for name, src in self.link_files.items():
                    with contextlib.suppress(OSError):
                        (scratch / name).unlink()
                        (scratch / name).symlink_to(src)
            result["message"] = f"{result['message']} [scratch kept: {scratch}]"
        batch.watchdog.drop_dir(scratch)
        return result

    def _run_in(self, scratch: Path, inputs: dict[str, Any], seed: int,
                run_id: Any, batch: _Batch) -> dict[str, Any]:
        """One run in ``scratch``, by stage: prepare (files, argv, environment),
        dispatch (start, wait, clean up what it left), collect (read its outputs)."""
        prep = self._prepare_run(scratch, inputs, seed, run_id, batch)
        if isinstance(prep, dict):
            return prep
        if self._stopping:
            return {"status": STATUS_ERROR, "message": "batch interrupted"}
        ended = self._dispatch(scratch, prep, run_id, batch)
        if isinstance(ended, dict):
            return ended
        result = self._collect(scratch, prep, ended, batch)
        if ended.outside:
            result = self._report_outside(result, ended.outside, run_id)
        return result

    # ---- stage 1: prepare ---------------------------------------------------
    def _prepare_run(self, scratch: Path, inputs: dict[str, Any], seed: int, run_id: Any,
                     batch: _Batch) -> _Prepared | dict[str, Any]:
        """Render names, link the files, write the input file, build argv and env;
        an error row if anything cannot be done."""
        values: dict[str, Any] = {**inputs, "seed": seed, "run_id": run_id,
                                  "root": str(self.root), "workdir": str(scratch)}
        try:
            in_name = self.input_name.render(values) if self.input_name else ""
            values["input_file"] = in_name
            out_name = self.output_file.render(values) if self.output_file else STDOUT
            values["output_file"] = out_name
            for name in (in_name, out_name):
                if name and name != STDOUT:
                    _confined(name, scratch)
            self._link(scratch, batch)
            if self.input_name is not None:
                self._write_input(scratch / in_name, in_name, inputs, values)
            argv = [t.render(values) for t in self.argv]
            token = strays.new_token()  # follows children that leave the process group
            env = {**os.environ, **{k: t.render(values) for k, t in self.env.items()},
                   strays.TOKEN_VAR: token}
            if self.confine == "strict" and "TMPDIR" not in self.env:
                env["TMPDIR"] = str(scratch)  # /tmp is outside the confinement
        except (ValueError, TypeError, KeyError, IndexError, OSError) as exc:
            return {"status": STATUS_ERROR,
                    "message": f"could not prepare the run: {type(exc).__name__}: {exc}"}
        return _Prepared(argv, env, out_name, token)

    def _link(self, scratch: Path, batch: _Batch) -> None:
        if batch.stage is not None:
            batch.stage.link_into(scratch)
        else:
            for name, src in self.link_files.items():
                (scratch / name).symlink_to(src)

    def _write_input(self, path: Path, in_name: str, inputs: Mapping[str, Any],
                     values: Mapping[str, Any]) -> None:
        if path.is_symlink() or path.exists():
            raise ValueError(f"input file {in_name!r} would overwrite a linked file")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self._input_text(inputs, values))

    # ---- stage 2: dispatch --------------------------------------------------
    def _dispatch(self, scratch: Path, prep: _Prepared, run_id: Any,
                  batch: _Batch) -> _Ended | dict[str, Any]:
        """Start the program (confined where ``confine: strict``), wait for it or its
        timeout, then kill what it left: its process group, tagged processes and
        orphans re-parented to the job."""
        watched = (confine.watched_dirs(self.root, batch.home or scratch.parent)
                   if self.confine == "warn" else [])
        before = confine.snapshot(watched) if watched else {}
        try:
            proc, since, stopping = self._start(scratch, prep, batch)
        except OSError as exc:
            return {"status": STATUS_ERROR, "message": f"cannot start {prep.argv[0]!r}: {exc}"}
        with contextlib.suppress(OSError):  # open the gate
            proc.stdin.write(b"go\n")  # type: ignore[union-attr]
        with contextlib.suppress(OSError):
            proc.stdin.close()  # type: ignore[union-attr]
        if stopping:
            _kill_group(proc, grace=0.5)
        try:
            timed_out = _wait_or_kill(proc, self.timeout)
        finally:
            self._clean_up(proc, prep.token, since, run_id, batch)
        outside = confine.changes(before, confine.snapshot(watched)) if watched else []
        return _Ended(int(proc.returncode), timed_out, outside)

    def _start(self, scratch: Path, prep: _Prepared,
               batch: _Batch) -> tuple[subprocess.Popen, int | None, bool]:
        """Popen behind the gate, registered as the job's own child and with the
        watchdog before the program may start; returns the process, its start time
        (clock ticks: orphans started later are its) and whether the batch is stopping."""
        out_log, err_log = scratch / STDOUT_LOG, scratch / STDERR_LOG

        def start() -> subprocess.Popen:
            with open(out_log, "wb") as fo, open(err_log, "wb") as fe:
                return subprocess.Popen([*GATE, *prep.argv], cwd=scratch, env=prep.env,
                                        stdin=subprocess.PIPE, stdout=fo, stderr=fe,
                                        start_new_session=True)

        # the lock: a sweep never runs while a run is being started (module strays)
        with self._lock, strays.spawning() as registry:
            if self.confine == "strict":
                proc = confine.spawn_confined([scratch, *self.writable], start)
            else:
                proc = start()
            registry.add(proc.pid)
            batch.watchdog.add_group(proc.pid)
            # either _kill_all sees this run, or this run sees _stopping
            self._live.add(proc)
            stopping = self._stopping
        return proc, strays.start_ticks(proc.pid), stopping

    def _clean_up(self, proc: subprocess.Popen, token: str, since: int | None, run_id: Any,
                  batch: _Batch) -> None:
        """Kill the run's process group, the processes tagged with its token (they left
        the group: setsid, daemons) and, when no other run is in flight (so they can
        only be this run's), the orphans re-parented to the job since it started."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        strays.forget(proc.pid)
        escaped = strays.kill_tagged(token)
        if escaped:
            log.warning("%s: run %s left %d process(es) outside its process group "
                        "(a daemon or setsid child); killed %s", self.key, run_id,
                        len(escaped), escaped[:5])
        with self._lock:
            self._live.discard(proc)
            orphans = strays.sweep(since) if not self._live and since is not None else []
        if orphans:
            log.warning("%s: run %s left %d process(es) behind (re-parented to the job after "
                        "their parent ended: a daemon, a double fork or a child that cleared "
                        "its environment); killed %s", self.key, run_id, len(orphans),
                        orphans[:5])
        batch.watchdog.drop_group(proc.pid)

    # ---- stage 3: collect ---------------------------------------------------
    def _collect(self, scratch: Path, prep: _Prepared, ended: _Ended,
                 batch: _Batch) -> dict[str, Any]:
        """The run's row: its outputs, or why there are none."""
        out_log, err_log = scratch / STDOUT_LOG, scratch / STDERR_LOG
        out_name = prep.out_name

        def fail(status: str, what: str) -> dict[str, Any]:
            tail = _tail(err_log)
            where = "stderr" if tail else "stdout"
            tail = tail or _tail(out_log)
            return {"status": status, "message": f"{what}; {where}: {tail}" if tail else what}

        if ended.timed_out:
            return fail(STATUS_TIMEOUT, f"timed out after {self.timeout:g} s (process group "
                        "killed)")
        if ended.rc != 0:
            return self._blocked_hint(fail(STATUS_ERROR, _exit_text(ended.rc)))
        changed = batch.stage.check() if batch.stage is not None else []
        if changed:
            return fail(STATUS_ERROR, f"the program modified linked file(s) {changed} (read-only "
                        "copies; the originals are unchanged, the copies were made again)")
        out_path = out_log if out_name == STDOUT else scratch / out_name
        if out_name != STDOUT and out_path.exists() and not inside(out_path, scratch):
            return fail(STATUS_ERROR, f"output file {out_name!r} resolves outside the scratch "
                        f"directory (to {out_path.resolve()}); not read")
        if not out_path.is_file():
            return self._blocked_hint(fail(STATUS_MISSING, f"output file {out_name!r} not "
                                           f"written{_dir_listing(scratch, out_name)}"))
        return self._parse(out_path, out_name, fail, err_log)

    def _parse(self, out_path: Path, out_name: str, fail: Callable[[str, str], dict[str, Any]],
               err_log: Path) -> dict[str, Any]:
        vals: dict[str, float] = {}
        text = ""
        try:
            text = out_path.read_text(errors="replace")
            data = parse_output(text, self.parser, self.key_separator)
            for o, fkey in self.file_keys.items():
                vals[o] = extract(data, fkey)
        except MissingKeyError as exc:
            missing = next(o for o in self.file_keys if o not in vals)
            exc.context = describe_output(text, self.parser, self.key_separator)
            return {**fail(STATUS_PARSE, f"{out_name}: {exc}; {exc.context}"),
                    "_missing": (missing, exc)}
        except OutputParseError as exc:
            return fail(STATUS_PARSE, f"{out_name}: {exc}; "
                        f"{describe_output(text, self.parser, self.key_separator)}")
        if self.series:
            try:
                vals.update(read_curves(text, self.parser, self.series, out_name))
            except SeriesAbsentError as exc:  # the same in every run: the probe says so
                return {**vals, **fail(STATUS_PARSE, str(exc)), "_absent": exc}
            except OutputParseError as exc:  # this run's curve: its row, scalars kept
                return {**vals, **fail(STATUS_PARSE, str(exc))}
        bad = nonfinite(vals)
        if bad:
            return {**vals, **fail(STATUS_NAN, describe_nonfinite(bad, self.series))}
        n_warn, warn = _warning_lines(err_log)
        message = (f"{WARNING_PREFIX}{n_warn} stderr line(s) mention a warning or an error: "
                   f"{warn}") if n_warn else ""
        return {**vals, "status": STATUS_OK, "message": message}

    def _blocked_hint(self, result: dict[str, Any]) -> dict[str, Any]:
        """Under ``confine: strict`` a failed run whose output says "Permission denied"
        or "Read-only" most likely wrote outside its scratch directory: say so."""
        if self.confine == "strict" and _DENIED.search(result["message"]):
            result["message"] += (" [confine: strict blocks writes outside the run's scratch "
                                  "directory; declare a path in simulator.options.writable or "
                                  "set simulator.confine: warn (docs/command.md)]")
        return result

    def _report_outside(self, result: dict[str, Any], outside: list[str],
                        run_id: Any) -> dict[str, Any]:
        """``confine: warn``: what changed outside the scratch directory during the run,
        in the log and in the run's message (a warning on an ok run)."""
        what = f"written outside the scratch directory during the run: {outside}"
        log.warning("%s: run %s: %s (confine: warn reports, strict would block)", self.key,
                    run_id, what)
        msg = str(result.get("message") or "")
        if result["status"] == STATUS_OK:
            result["message"] = (f"{msg}; {what}" if msg.startswith(WARNING_PREFIX)
                                 else f"{WARNING_PREFIX}{what}" + (f"; {msg}" if msg else ""))
        else:
            result["message"] = f"{msg}; {what}" if msg else what
        return result

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
