"""The simulator protocol and its registry.

A simulator takes a batch of input rows (a DataFrame whose columns are the study's
tunable and context inputs) and one seed per row, and returns a DataFrame with the
same index: one column per output, plus ``status`` (``ok`` or a failure kind) and
``message``.  Failures are data, never exceptions: a crashed, hung or NaN-returning
run becomes a row with a status, and downstream stages use only ``ok`` rows.

Simulators are looked up by ``type`` in :data:`REGISTRY`; each entry is a builder
``(options, study) -> Simulator`` that validates its options and raises
:class:`~simcalib.errors.ConfigError` with the key path on bad ones.

Optional parts of the protocol: ``probe_row(inputs, seed)`` (one run that raises
``ConfigError`` when an output can never be read; see :mod:`.probe`) and
``extra_columns`` (result columns beyond the outputs, such as the ``<output>_sd``
of replicates; see :func:`result_columns`).  ``simulator.replicates`` and
``simulator.derived_outputs`` wrap any simulator in :class:`.layer.SharedLayer`.
An ``ok`` row's message starting with :data:`WARNING_PREFIX` marks a successful
run that warned (:func:`count_warnings`).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd

from simcalib.errors import ConfigError

# Failure kinds a row's ``status`` can take.
STATUS_OK = "ok"
STATUS_NAN = "nan_output"
STATUS_ERROR = "error"
STATUS_TIMEOUT = "timeout"
STATUS_MISSING = "missing_output"
STATUS_PARSE = "parse_error"
STATUS_INVALID = "invalid_input"
STATUSES = (STATUS_OK, STATUS_NAN, STATUS_ERROR, STATUS_TIMEOUT, STATUS_MISSING, STATUS_PARSE,
            STATUS_INVALID)

# An ``ok`` row whose ``message`` starts with this prefix ran to completion but
# said something worth reading (a command's stderr lines mentioning a warning or
# an error).  Summaries count them with :func:`count_warnings`.
WARNING_PREFIX = "warning: "


def count_warnings(frame: pd.DataFrame) -> int:
    """Rows with status ``ok`` whose message carries :data:`WARNING_PREFIX`: the
    successful runs that printed warnings (e.g. a seed the program rejected)."""
    if "message" not in frame or "status" not in frame or frame.empty:
        return 0
    msg = frame["message"].fillna("").astype(str)
    return int(((frame["status"] == STATUS_OK) & msg.str.startswith(WARNING_PREFIX)).sum())


@runtime_checkable
class Simulator(Protocol):
    """What every simulator provides."""

    outputs: list[str]

    def run(self, inputs: pd.DataFrame, seeds: np.ndarray, threads: int = 1) -> pd.DataFrame:
        """Simulate every row of ``inputs``; see the module docstring for the result."""
        ...


Builder = Callable[[Mapping[str, Any], Mapping[str, Any], str], Simulator]
REGISTRY: dict[str, Builder] = {}


def register(name: str) -> Callable[[Builder], Builder]:
    """Decorator registering a simulator builder under ``name``."""

    def deco(fn: Builder) -> Builder:
        REGISTRY[name] = fn
        return fn

    return deco


def finalize(result: pd.DataFrame, outputs: Sequence[str], index: pd.Index,
             key: str = "simulator") -> pd.DataFrame:
    """Normalise a simulator's raw result: every output column present and float,
    ``status``/``message`` present, and non-finite outputs of an ``ok`` row turned
    into a ``nan_output`` status row (a NaN must never pass as data).

    A status outside :data:`STATUSES` is a broken simulator contract (a user's
    function returning ``"failed"``), not a failure kind downstream stages know how
    to count, so it raises :class:`ConfigError` naming ``key``."""
    # built in one go: a simulator with hundreds of outputs (tension_fe) would
    # fragment a frame grown column by column
    out = pd.DataFrame({name: (pd.to_numeric(result[name], errors="coerce") if name in result
                               else pd.Series(np.nan, index=index, dtype=float))
                        for name in outputs}, index=index)
    status = (result["status"].astype(str) if "status" in result
              else pd.Series(STATUS_OK, index=index))
    message = (result["message"].fillna("").astype(str) if "message" in result
               else pd.Series("", index=index))
    unknown = sorted(set(status) - set(STATUSES))
    if unknown:
        raise ConfigError(key, f"the simulator returned unknown status(es) {unknown}; a row's "
                          f"status must be one of {list(STATUSES)}")
    vals = out[list(outputs)].to_numpy(dtype=float) if outputs else np.zeros((len(index), 0))
    ok = (status == STATUS_OK).to_numpy()
    absent = [o for o in outputs if o not in result]
    if absent and ok.any():
        # a column the function never returns is a contract error, not a NaN per row
        # (the status stops a chunk at its first run: simulation.SETUP_FAILURES)
        cols = [str(c) for c in result.columns if c not in ("status", "message")]
        hints = [f"did you mean {close[0]!r} for {o!r}?" for o in absent
                 if (close := difflib.get_close_matches(o, cols, n=1))]
        message = message.where(~ok, f"missing output(s) {absent} (the simulator returned "
                                f"columns {cols}" + ("; " + " ".join(hints) if hints else "")
                                + ")")
        status = status.where(~ok, STATUS_MISSING)
        ok = np.zeros_like(ok)
    bad = ok & ~np.isfinite(vals).all(axis=1)
    if bad.any():
        for i in np.flatnonzero(bad):
            message.iloc[i] = _bad_values(result, outputs, vals[i], i)
        status = status.where(~bad, STATUS_NAN)
    return out.assign(status=status.to_numpy(), message=message.to_numpy())


def _bad_values(result: pd.DataFrame, outputs: Sequence[str], vals: np.ndarray, i: int) -> str:
    """Row ``i``'s message: a value that is not a number at all is "non-numeric"
    (with the value), NaN or inf "non-finite".  Numeric strings ("1.0") are read as
    numbers (a command's outputs are text)."""
    names = [str(o) for o, v in zip(outputs, vals, strict=True) if not np.isfinite(v)]
    raw = {o: result[o].iloc[i] for o in names if o in result}
    text = {o: v for o, v in raw.items() if isinstance(v, (str, bytes)) and
            pd.isna(pd.to_numeric(pd.Series([v]), errors="coerce").iloc[0])}
    nonfinite = [o for o in names if o not in text]
    parts = []
    if text:
        parts.append("non-numeric output(s): " + ", ".join(f"{o}={v!r}" for o, v in text.items()))
    if nonfinite:
        parts.append(f"non-finite output(s): {nonfinite}")
    return "; ".join(parts)


def seed_bits_option(options: Mapping[str, Any], key: str, default: int) -> int:
    """The ``seed_bits`` option (1-63): a program that reads its seed into a 32-bit
    integer needs ``seed_bits: 31``; validated here for every simulator type."""
    bits = options.get("seed_bits", default)
    if isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= 63:
        raise ConfigError(f"{key}.seed_bits", f"must be an integer from 1 to 63 (seeds are then "
                          f"in [0, 2^seed_bits - 1]), got {bits!r}")
    return bits


def mask_seeds(seeds: Any, bits: int) -> np.ndarray:
    """The low ``bits`` bits of each seed (63: the seeds as they are)."""
    arr = np.asarray(seeds, dtype=np.int64)
    return arr if bits >= 63 else arr & np.int64((1 << bits) - 1)


def check_options(options: Mapping[str, Any], allowed: Mapping[str, Any], key: str) -> None:
    """Reject unknown option keys, naming the key path and the allowed keys."""
    for k in options:
        if k not in allowed:
            close = difflib.get_close_matches(k, list(allowed), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ConfigError(f"{key}.{k}", f"unknown option{hint}; allowed: {sorted(allowed)}")


def check_columns(raw: pd.DataFrame, outputs: list[str], key: str) -> None:
    """Raise ``ConfigError`` when a function's successful result lacks an output."""
    if "status" in raw and (raw["status"].astype(str) != "ok").all():
        return  # it failed; the row says why
    cols = [str(c) for c in raw.columns if c not in ("status", "message")]
    for o in outputs:
        if o not in raw.columns:
            close = difflib.get_close_matches(o, cols, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ConfigError(key, f"the probe run's result has no column for output {o!r}"
                              f"{hint}; it returned {cols}")


def study_outputs(study: Mapping[str, Any], sim: Simulator) -> list[str]:
    """The outputs a study calibrates on: ``outputs`` from config, else all."""
    return list(study.get("outputs") or sim.outputs)


def result_columns(sim: Simulator, outputs: Sequence[str]) -> list[str]:
    """The columns of ``sim.run``'s result a dataset keeps for ``outputs``: each
    output, its ``<output>_sd`` spread when the simulator runs replicates, then
    ``status`` and ``message``."""
    extra = set(getattr(sim, "extra_columns", ()) or ())
    sds = [f"{o}_sd" for o in outputs if f"{o}_sd" in extra]
    return [*outputs, *sds, "status", "message"]
