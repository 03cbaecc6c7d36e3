"""Observed time series from a CSV file, checked before any sampling starts.

The format is what a scientist's spreadsheet export looks like: a ``time`` column and
one column per observed state, named as the model's states.  Empty cells, ``NaN`` and
``inf`` are missing values: they are counted, reported (log and run.json) and left out
of the likelihood.  Everything else that would give a wrong or confusing answer later
is an error that names the file, the column and the rows: a missing ``time`` column,
non-numeric cells, times that are missing, unsorted or repeated, an observed column
with no value at all, a file with no observed column.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from simcalib.errors import DataError
from simcalib.io import read_csv

log = logging.getLogger(__name__)


@dataclass
class ObsData:
    """Observations ``y[time, output]`` (NaN = missing) at times ``t``."""

    t: np.ndarray
    y: np.ndarray
    outputs: list[str]


@dataclass
class DataReport:
    """What was read: rows, columns and the missing entries per column."""

    path: str
    rows: int
    outputs: list[str]
    missing: dict[str, int] = field(default_factory=dict)     # NaN or empty cells
    infinite: dict[str, int] = field(default_factory=dict)    # +-inf (treated as missing)

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "rows": self.rows, "outputs": self.outputs,
                "missing": self.missing, "infinite": self.infinite,
                "observed_entries": self.rows * len(self.outputs)
                - sum(self.missing.values()) - sum(self.infinite.values())}


def _rows(idx: np.ndarray, limit: int = 5) -> str:
    """Data rows as a user counts them in a spreadsheet (header = line 1)."""
    shown = ", ".join(str(int(i) + 2) for i in idx[:limit])
    return shown + (f" ... ({len(idx)} in all)" if len(idx) > limit else "")


def _numeric(df: pd.DataFrame, col: str, path: str) -> np.ndarray:
    values = pd.to_numeric(df[col], errors="coerce")
    bad = values.isna() & df[col].notna()
    if bad.any():
        idx = np.flatnonzero(bad.to_numpy())
        raise DataError(path, f"column {col!r} has non-numeric values "
                        f"{df[col][bad].head(3).tolist()} on line(s) {_rows(idx)}")
    return values.to_numpy(dtype=np.float64)


#: largest magnitude of an observation (on the modelled scale) or a time: the
#: likelihood sums m squared residuals and the covariances square time differences, so
#: values near float64's limit (1.8e308) overflow to inf there and every proposal
#: would be rejected (or the fit "succeed" on garbage); 1e150 leaves room for both
#: (squares of differences stay finite for up to 4e7 observed entries)
MAX_MAGNITUDE = 1e150


def check_scale(values: np.ndarray, names: list[str], source: str, hint: str) -> None:
    """A clear error naming the first column of ``values`` (rows x columns, NaN =
    missing) whose largest finite magnitude exceeds :data:`MAX_MAGNITUDE`."""
    with np.errstate(invalid="ignore"):
        big = np.nanmax(np.where(np.isfinite(values), np.abs(values), 0.0), axis=0,
                        initial=0.0)
    for name, v in zip(names, np.atleast_1d(big), strict=True):
        if v > MAX_MAGNITUDE:
            raise DataError(source, f"column {name!r} has values of magnitude {v:.3g}, "
                            f"beyond {MAX_MAGNITUDE:.0e}: squared in the likelihood they "
                            f"overflow float64; {hint}")


def read_obs(path: str | os.PathLike[str], outputs: list[str] | None = None,
             quiet: bool = False) -> tuple[ObsData, DataReport]:
    """The observations in ``path`` (``time`` + one column per observed state).

    ``outputs`` selects and orders the state columns (all non-time columns when None);
    ``quiet`` skips the warning about missing values (validation reads files twice).
    """
    path = str(path)
    df = read_csv(path)
    cols = _columns(df, outputs, path)
    t = _times(df, path)
    y = np.column_stack([_numeric(df, c, path) for c in cols])
    report = _missing(y, cols, path)
    y[~np.isfinite(y)] = np.nan
    if (report.missing or report.infinite) and not quiet:
        log.warning("%s: missing values left out of the likelihood: %s%s", path,
                    report.missing or "none", f"; infinite values (treated as missing): "
                    f"{report.infinite}" if report.infinite else "")
    return ObsData(t, y, cols), report


def _columns(df: pd.DataFrame, outputs: list[str] | None, path: str) -> list[str]:
    """The observed-state columns, in ``outputs``' order when given."""
    if "time" not in df.columns:
        raise DataError(path, f"no 'time' column; columns are {list(df.columns)} (the first "
                        "row must be a header naming 'time' and the observed states)")
    cols = [c for c in df.columns if c != "time"]
    if outputs is not None:
        missing = [o for o in outputs if o not in cols]
        if missing:
            raise DataError(path, f"observed state(s) {missing} have no column; columns "
                            f"are {cols}")
        cols = list(outputs)
    if not cols:
        raise DataError(path, "no observed-state column besides 'time'")
    if len(df) == 0:
        raise DataError(path, "no data rows")
    return cols


def _times(df: pd.DataFrame, path: str) -> np.ndarray:
    """The time column: finite, of a magnitude whose squares are finite, increasing."""
    t = _numeric(df, "time", path)
    if not np.all(np.isfinite(t)):
        raise DataError(path, f"missing or non-finite times on line(s) "
                        f"{_rows(np.flatnonzero(~np.isfinite(t)))}")
    check_scale(t[:, None], ["time"], path, "express the times in larger units")
    dt = np.diff(t)
    if np.any(dt == 0):
        raise DataError(path, f"duplicate times {np.unique(t[1:][dt == 0]).tolist()[:5]} on "
                        f"line(s) {_rows(np.flatnonzero(dt == 0) + 1)}; average or drop repeats")
    if np.any(dt < 0):
        raise DataError(path, f"times are not increasing at line(s) "
                        f"{_rows(np.flatnonzero(dt < 0) + 1)}; sort the rows by time")
    return t


def _missing(y: np.ndarray, cols: list[str], path: str) -> DataReport:
    """Missing (empty, NaN) and infinite entries per column; a column without a
    finite value is an error."""
    report = DataReport(path, y.shape[0], cols)
    for j, c in enumerate(cols):
        n_nan, n_inf = int(np.isnan(y[:, j]).sum()), int(np.isinf(y[:, j]).sum())
        if n_nan + n_inf == y.shape[0]:
            raise DataError(path, f"column {c!r} has no finite value; drop the column or "
                            "fill it")
        if n_nan:
            report.missing[c] = n_nan
        if n_inf:
            report.infinite[c] = n_inf
    return report
