"""Any importable Python function as a simulator: ``module:function``.

The function receives a DataFrame of input rows (and, if it accepts them, the
``seeds`` array and the ``options`` dict) and returns a DataFrame (or a dict of
arrays) with one column per output; ``status``/``message`` columns are optional.
An exception inside the function fails the whole batch, so it is caught and every
row of that batch gets status ``error`` with the exception text: failures are
data, not crashes.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simcalib.errors import ConfigError
from simcalib.io import PACKAGE_ROOT
from simcalib.simulators.base import (
    STATUS_ERROR,
    check_columns,
    check_options,
    finalize,
    mask_seeds,
    register,
    seed_bits_option,
)
from simcalib.simulators.isolate import IsolatedPython

ALLOWED = {"function": None, "outputs": None, "options": None, "path": None, "isolate": False,
           "timeout": None, "seed_bits": 63}
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
                 seed_bits: int = 63) -> None:
        self.fn = fn
        self.seed_bits = seed_bits
        self.key = key
        self.outputs = outputs
        self.options = dict(options)
        params = inspect.signature(fn).parameters
        self._takes_seeds = "seeds" in params
        self._takes_options = "options" in params

    def run(self, inputs: pd.DataFrame, seeds: np.ndarray, threads: int = 1) -> pd.DataFrame:
        return finalize(self._call(inputs, seeds), self.outputs, inputs.index,
                        f"{self.key}.function")

    def _call(self, inputs: pd.DataFrame, seeds: np.ndarray) -> pd.DataFrame:
        """The function's raw result with the inputs' index, or an ``error`` row per
        input when it raises."""
        kwargs: dict[str, Any] = {}
        if self._takes_seeds:
            kwargs["seeds"] = mask_seeds(seeds, self.seed_bits)
        if self._takes_options:
            kwargs["options"] = self.options
        try:
            raw = self.fn(inputs.copy(), **kwargs)
            res = pd.DataFrame(raw)
            if len(res) != len(inputs):
                raise ValueError(f"returned {len(res)} rows for {len(inputs)} inputs")
            res.index = inputs.index
        except Exception as exc:  # failures are data
            tail = traceback.format_exc(limit=2).strip().splitlines()[-1]
            res = pd.DataFrame({"status": STATUS_ERROR, "message": f"{type(exc).__name__}: {tail}"},
                               index=inputs.index)
        return res

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


@register("python")
def build(options: Mapping[str, Any], study: Mapping[str, Any], key: str) -> Any:
    """``PythonFunction``, or with ``isolate: true`` an
    :class:`~simcalib.simulators.isolate.IsolatedPython` running every row in a
    worker process with a per-row ``timeout``."""
    check_options(options, ALLOWED, key)
    if "function" not in options:
        raise ConfigError(f"{key}.function", "required: 'package.module:function'")
    outputs = list(options.get("outputs") or study.get("outputs") or [])
    if not outputs:
        raise ConfigError(f"{key}.outputs", "list the outputs the function returns "
                          "(or give the study's 'outputs')")
    isolate = options.get("isolate", False)
    if not isinstance(isolate, bool):
        raise ConfigError(f"{key}.isolate", f"must be true or false, got {isolate!r}")
    timeout = options.get("timeout")
    if timeout is not None:
        if not isolate:
            raise ConfigError(f"{key}.timeout", "a per-row timeout needs 'isolate: true' (a "
                              "function running inside the job cannot be stopped)")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise ConfigError(f"{key}.timeout",
                              f"must be a positive number of seconds, got {timeout!r}")
    if isolate and callable(options["function"]):
        raise ConfigError(f"{key}.isolate", "an isolated function is imported in its worker "
                          "process: give it as 'package.module:function', not as an object")
    # from Python (a notebook) the function itself may be given instead of its name
    fn = (options["function"] if callable(options["function"])
          else load_callable(str(options["function"]), f"{key}.function", options.get("path")))
    fn_options = options.get("options") or {}
    bits = seed_bits_option(options, key, ALLOWED["seed_bits"])
    if isolate:
        path = options.get("path")
        return IsolatedPython(str(options["function"]),
                              str(Path(path).resolve()) if path else None, outputs,
                              fn_options, float(timeout or DEFAULT_TIMEOUT_S), key, bits)
    return PythonFunction(fn, outputs, fn_options, key, bits)
