"""Any importable Python function as a simulator: ``module:function``.

The function receives a DataFrame of input rows (and, if it accepts them, the
``seeds`` array and the ``options`` dict) and returns a DataFrame (or a dict of
arrays) with one column per output; ``status``/``message`` columns are optional.

An exception inside the function is data, not a crash.  Why batches are retried:
the design calls the function one row at a time, but a strategy's proposals and the
Python API call it on batches, and one row that raises would otherwise fail every
row of its batch with that row's message (issue 41: 13 of 22 failed ``sequential``
runs were feasible points carrying a batch-mate's error).  So a batch that raises is
called again row by row, each row with its own seed: only the rows that raise fail,
each with its own ``Type: message``.  A function that is not row-independent (a
batch statistic) gives row-alone results for that batch; the log says it was retried.

Each call is registered with :mod:`simcalib.simulators.inflight` (the heartbeat
lines of a hang, the notice when the job dies during a run).

Series outputs (issue 42): when the study declares ``series``, the function may return
each curve as the wide columns ``cases@<t>``, a column ``cases`` of sequences or a long
frame (:func:`simcalib.study.series.from_python`); the result is turned into the wide
columns at the study's points before the usual checks.  A curve that cannot be read
(a missing point, unsorted times, a sequence of the wrong length) fails its run with
status ``parse_error`` and a message naming the key and the run.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import logging
import sys
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simcalib.errors import ConfigError, DataError
from simcalib.io import PACKAGE_ROOT
from simcalib.simulators.base import (
    STATUS_ERROR,
    STATUS_OK,
    STATUS_PARSE,
    check_columns,
    check_options,
    finalize,
    mask_seeds,
    register,
    seed_bits_option,
)
from simcalib.simulators.inflight import DEFAULT_HEARTBEAT_S, flight
from simcalib.simulators.isolate import IsolatedPython

log = logging.getLogger(__name__)

ALLOWED = {"function": None, "outputs": None, "options": None, "path": None, "isolate": False,
           "timeout": None, "seed_bits": 63, "heartbeat": DEFAULT_HEARTBEAT_S}
DEFAULT_TIMEOUT_S = 600.0


def load_callable(spec: str, key: str, path: str | None = None) -> Callable[..., Any]:
    if ":" not in spec:
        raise ConfigError(key, f"{spec!r} must look like 'package.module:function'")
    mod_name, fn_name = spec.split(":", 1)
    if path:
        # relative to the working directory, else to the checkout that ships it (the
        # shipped examples also run when Snakemake works in another directory, -d)
        rel = Path(path).expanduser()
        if not rel.is_absolute() and not rel.exists() and (PACKAGE_ROOT / rel).exists():
            rel = PACKAGE_ROOT / rel
        if not rel.is_dir():
            where = "is not a directory" if rel.exists() else (
                f"does not exist (looked in {Path.cwd()} and {PACKAGE_ROOT})")
            raise ConfigError(key.removesuffix("function") + "path",
                              f"{path!r} {where}: 'path' is the directory that holds the "
                              f"module {mod_name!r}")
        p = str(rel.resolve())
        if p not in sys.path:
            sys.path.insert(0, p)
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as exc:
        raise ConfigError(key, f"cannot import module {mod_name!r}: {exc}") from None
    fn = getattr(mod, fn_name, None)
    if not callable(fn):
        raise ConfigError(key, f"module {mod_name!r} has no callable {fn_name!r}")
    return fn


class PythonFunction:
    def __init__(self, fn: Callable[..., Any], outputs: list[str],
                 options: Mapping[str, Any], key: str = "simulator.options",
                 seed_bits: int = 63, heartbeat: float = DEFAULT_HEARTBEAT_S,
                 record: bool = True, series: Mapping[str, Any] | None = None) -> None:
        self.fn = fn
        #: the study's series (name -> SeriesSpec with points): read by from_python
        self.series = dict(series or {})
        self.record = record  # False in an isolated worker: its parent watches it
        self.seed_bits = seed_bits
        self.key = key
        self.outputs = outputs
        self.options = dict(options)
        self.heartbeat = float(heartbeat)
        params = inspect.signature(fn).parameters
        self._takes_seeds = "seeds" in params
        self._takes_options = "options" in params

    def run(self, inputs: pd.DataFrame, seeds: np.ndarray, threads: int = 1) -> pd.DataFrame:
        return finalize(self._call(inputs, seeds), self.outputs, inputs.index,
                        f"{self.key}.function")

    def _call(self, inputs: pd.DataFrame, seeds: np.ndarray) -> pd.DataFrame:
        """The function's raw result with the inputs' index; a batch that raises is
        retried row by row (only the rows that raise become ``error`` rows)."""
        seeds = np.asarray(seeds)
        with self._flight(inputs):
            try:
                return self._attempt(inputs, seeds)
            except Exception as exc:  # failures are data
                if len(inputs) == 1:
                    return _error_rows(inputs.index, exc)
                first = _describe(exc)
        log.info("%s.function raised on a batch of %d rows (%s); retrying row by row",
                 self.key, len(inputs), first)
        parts = [self._one(inputs.iloc[[i]], seeds[i:i + 1]) for i in range(len(inputs))]
        # each part finalized alone: an ok row's frame has no status column of its own
        return pd.concat([finalize(p, self.outputs, p.index, f"{self.key}.function")
                          for p in parts])

    def _one(self, row: pd.DataFrame, seed: np.ndarray) -> pd.DataFrame:
        with self._flight(row):
            try:
                return self._attempt(row, seed)
            except Exception as exc:
                return _error_rows(row.index, exc)

    def _attempt(self, inputs: pd.DataFrame, seeds: np.ndarray) -> pd.DataFrame:
        kwargs: dict[str, Any] = {}
        if self._takes_seeds:
            kwargs["seeds"] = mask_seeds(seeds, self.seed_bits)
        if self._takes_options:
            kwargs["options"] = self.options
        raw = self.fn(inputs.copy(), **kwargs)
        res = pd.DataFrame(raw)
        if self.series and _long_form(res, self.series):
            return self._wide(res, inputs.index)  # rows labelled by run, not one per run
        if len(res) != len(inputs):
            raise ValueError(f"returned {len(res)} rows for {len(inputs)} inputs")
        res.index = inputs.index
        return self._wide(res, inputs.index) if self.series else res

    def _wide(self, res: pd.DataFrame, index: pd.Index) -> pd.DataFrame:
        """Every series as its wide columns (nothing to read when no run succeeded)."""
        from simcalib.study.series import from_python

        if "status" in res and not (res["status"].astype(str) == STATUS_OK).any():
            return res.reindex(index) if not res.index.equals(index) else res
        points = {n: s.points for n, s in self.series.items()}
        return from_python(res, index, self.series, points, f"{self.key}.function")

    def _flight(self, inputs: pd.DataFrame) -> contextlib.AbstractContextManager[None]:
        return (flight(self._label(inputs), self.heartbeat) if self.record
                else contextlib.nullcontext())

    def _label(self, inputs: pd.DataFrame) -> str:
        ids = [str(i) for i in inputs.index[:6]]
        more = f" ... ({len(inputs)} runs)" if len(inputs) > 6 else ""
        return f"{self.key}.function: {inputs.index.name or 'row'} {', '.join(ids)}{more}"

    def program_files(self) -> list[Path]:
        """The function's source file (hashed into the chunk journal's fingerprint)."""
        try:
            src = inspect.getsourcefile(inspect.unwrap(self.fn))
        except TypeError:
            return []
        return [Path(src)] if src and Path(src).is_file() else []

    def probe_row(self, inputs: pd.DataFrame, seed: int) -> pd.DataFrame:
        """One row (see :func:`simcalib.simulators.probe`): a function that returns
        no column for an output raises ``ConfigError`` naming the closest column."""
        raw = self._call(inputs.iloc[:1], np.array([seed]))
        check_columns(raw, self.outputs, f"{self.key}.outputs")
        return finalize(raw, self.outputs, inputs.index[:1], f"{self.key}.function")


def _describe(exc: BaseException) -> str:
    """``'ValueError: R0=0.58 < 1.2'``: the exception's type once, then its text."""
    return traceback.format_exception_only(type(exc), exc)[-1].strip()


def _error_rows(index: pd.Index, exc: BaseException) -> pd.DataFrame:
    """A raising row: ``error``; a result whose curve cannot be read: ``parse_error``."""
    if isinstance(exc, DataError):
        return pd.DataFrame({"status": STATUS_PARSE, "message": str(exc)}, index=index)
    return pd.DataFrame({"status": STATUS_ERROR, "message": _describe(exc)}, index=index)


def _long_form(res: pd.DataFrame, series: Mapping[str, Any]) -> bool:
    """Whether a result is a long frame (it holds a series' index column)."""
    return any(s.index in res.columns for s in series.values())


def _outputs(options: Mapping[str, Any], study: Mapping[str, Any], series: Mapping[str, Any],
             key: str) -> list[str]:
    """The function's outputs: the scalars listed, then every series' point columns."""
    outputs = list(options.get("outputs") or study.get("outputs") or [])
    if not series:
        return outputs
    from simcalib.study.series_study import series_outputs

    if options.get("isolate") is True:
        raise ConfigError(f"{key}.isolate", "series outputs are not read from an isolated "
                          "function yet: drop 'isolate' (or return the curve as scalar "
                          "columns)")
    return [*(o for o in outputs if o not in series), *series_outputs(series)]


def _series(study: Mapping[str, Any], key: str) -> dict[str, Any]:
    """The study's series (points resolved by the study: simulator_cfg)."""
    if not study.get("series"):
        return {}
    from simcalib.study.series_study import declared_series

    return declared_series(study, key.rsplit(".", 2)[0])


def _read_timeout(timeout: Any, isolate: bool, key: str) -> float | None:
    if timeout is None:
        return None
    if not isolate:
        raise ConfigError(f"{key}.timeout", "a per-row timeout needs 'isolate: true' (a "
                          "function running inside the job cannot be stopped)")
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ConfigError(f"{key}.timeout",
                          f"must be a positive number of seconds, got {timeout!r}")
    return float(timeout)


@register("python")
def build(options: Mapping[str, Any], study: Mapping[str, Any], key: str) -> Any:
    """``PythonFunction``, or with ``isolate: true`` an
    :class:`~simcalib.simulators.isolate.IsolatedPython` running every row in a
    worker process with a per-row ``timeout``."""
    check_options(options, ALLOWED, key)
    if "function" not in options:
        raise ConfigError(f"{key}.function", "required: 'package.module:function'")
    series = _series(study, key)
    outputs = _outputs(options, study, series, key)
    if not outputs:
        raise ConfigError(f"{key}.outputs", "list the outputs the function returns "
                          "(or give the study's 'outputs')")
    isolate = options.get("isolate", False)
    if not isinstance(isolate, bool):
        raise ConfigError(f"{key}.isolate", f"must be true or false, got {isolate!r}")
    timeout = _read_timeout(options.get("timeout"), isolate, key)
    if isolate and callable(options["function"]):
        raise ConfigError(f"{key}.isolate", "an isolated function is imported in its worker "
                          "process: give it as 'package.module:function', not as an object")
    # from Python (a notebook) the function itself may be given instead of its name
    fn = (options["function"] if callable(options["function"])
          else load_callable(str(options["function"]), f"{key}.function", options.get("path")))
    fn_options = options.get("options") or {}
    bits = seed_bits_option(options, key, ALLOWED["seed_bits"])
    beat = options.get("heartbeat", ALLOWED["heartbeat"])
    if isinstance(beat, bool) or not isinstance(beat, int | float) or beat < 0:
        raise ConfigError(f"{key}.heartbeat", "must be a number of seconds >= 0 (0: no "
                          f"heartbeat lines), got {beat!r}")
    if isolate:
        path = options.get("path")
        return IsolatedPython(str(options["function"]),
                              str(Path(path).resolve()) if path else None, outputs,
                              fn_options, float(timeout or DEFAULT_TIMEOUT_S), key, bits)
    return PythonFunction(fn, outputs, fn_options, key, bits, float(beat), series=series)
