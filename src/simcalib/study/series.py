r"""Series outputs (issue 42): a curve such as daily cases, declared, observed and read.

Representation in a simulator's result: wide columns ``<series>@<point>``
--------------------------------------------------------------------------
A series ``cases`` with points (index values) 1, 2, ..., 100 travels as the columns
``cases@1``, ``cases@2``, ..., ``cases@100`` of the one-row-per-run result frame, beside
the scalar outputs and before ``status``/``message``.  Why this one:

* every existing stage keeps one row per run: chunk CSVs, their merge (which checks
  "design inputs, then outputs, then status/message", whatever the outputs are called),
  the per-run JSON journal, the dataset CSV, the failure statuses of
  :func:`simcalib.simulators.base.finalize` (a NaN point makes the run ``nan_output``)
  and the ``<output>_sd`` of replicates (``cases@7_sd``) carry a point as they carry a
  scalar, unchanged; a long frame (one row per run and time) would break all of them;
* the column names the *index value*, not a position (``cases[6]``): a column means
  the same day in every study, whichever points a study observes, and "the simulator
  does not produce day 400" is a missing column, checked by name;
* ``@`` cannot appear in a parameter, context or output name
  (:data:`simcalib.study.names.NAME_PATTERN`), so a point column never collides with a
  user's name nor with the generated ``sd_``/``weight_``/``target_`` ... columns, and
  :func:`parse_column` splits it back without ambiguity.  The ``sd_<output>`` prefix of
  the observations applies per point unchanged: ``sd_cases@7``.

A point is written by :func:`point_label`: an integral value as an integer (``7``, not
``7.0``), any other as Python's shortest round-trip repr (``0.25``, ``1e-05``), so a
label reads back to the same float.

Declaration
-----------
A study's ``series`` key, beside its (scalar) ``outputs`` list::

    series:
      cases: {index: day}                             # points from the observations
      deaths: {index: day, points: {from: 7, to: 98, step: 7}}
      force: {index: displacement, points: [0.1, 0.2, 0.4]}
    # shorthand: series: {cases: day}

Why a separate key rather than ``outputs: {cases: {series: day}}``: ``outputs`` is a
list of column names that dozens of functions read as such (the names check, the
metamodel's output list, the strategy records); mixing mappings into it would change
all of them, while a separate key leaves every scalar study byte-for-byte as it was and
lets the integration append :meth:`SeriesSpec.columns` to the outputs where a column
list is needed.  ``points`` may be left out when the targets are observed (the points
are then the times the observations hold); simulated targets need them.

Observations (long form)
------------------------
A CSV with ``target_id`` (optional: one target 0 when absent), the index column, one
column per series, optional ``sd_<series>`` (> 0, per point) and the study's contexts
(constant within a target).  An *empty* cell of a series column means "not observed at
that time" (a series reported weekly beside a daily one); an explicit ``nan``, ``inf``
or text is an error, as are duplicate or unsorted times within a target, a time that
the series does not declare, an sd missing where its value is given, any other column.

Simulator results
-----------------
:func:`from_python` reads what a Python function returns: the wide columns themselves,
a column ``cases`` whose cells are sequences (one value per declared point, in order),
or a long frame (rows labelled by the run's index label, with the index column).
:func:`from_command_csv` / :func:`from_command_json` read a command program's file: a
CSV with one row per time point (the index column and one column per series) or JSON
arrays (``{"day": [...], "cases": [...]}``, the index array optional when the lengths
match the declared points).  Points a program produces beyond the declared ones are
ignored; a declared point it does not produce, a duplicate or unsorted time, or a
sequence whose length differs from the declared points' (between runs) is a
:class:`DataError` naming the file (or the function's key) and the run.  A NaN value
is passed on: :func:`~simcalib.simulators.base.finalize` turns the run into a
``nan_output`` row (a failed run is data, not a crash).
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simcalib.errors import ConfigError, DataError
from simcalib.study.names import check_name

#: Separates a series' name from its point in a column name.
SEP = "@"
SD_PREFIX = "sd_"


# ----------------------------------------------------------------------------- names
def point_label(t: float) -> str:
    """The canonical text of a point: ``7`` for 7.0, ``0.25``, ``1e-05`` (repr)."""
    v = float(t)
    if not math.isfinite(v):
        raise ValueError(f"a series point must be finite, got {t!r}")
    return str(int(v)) if v.is_integer() and abs(v) < 2**53 else repr(v)


def column(name: str, t: float) -> str:
    """``cases@7``: the result column of series ``name`` at point ``t``."""
    return f"{name}{SEP}{point_label(t)}"


def columns(name: str, points: Sequence[float] | np.ndarray) -> list[str]:
    return [column(name, t) for t in points]


def parse_column(col: str) -> tuple[str, float] | None:
    """``("cases", 7.0)`` for ``cases@7``; None for any other column (a scalar, a
    ``cases@7_sd`` spread, ``status``)."""
    name, sep, rest = str(col).partition(SEP)
    if not sep or not name:
        return None
    try:
        t = float(rest)
    except ValueError:
        return None
    return (name, t) if math.isfinite(t) and point_label(t) == rest else None


def series_columns(cols: Sequence[str], name: str) -> list[str]:
    """The point columns of series ``name`` among ``cols``, in their order."""
    return [c for c in cols if (p := parse_column(c)) is not None and p[0] == name]


# ----------------------------------------------------------------------------- declaration
@dataclass(frozen=True)
class SeriesSpec:
    """One declared series: its name, its index (the observations' time column) and its
    points (None: taken from the observations)."""

    name: str
    index: str
    points: tuple[float, ...] | None = None

    def columns(self, points: Sequence[float] | np.ndarray | None = None) -> list[str]:
        """The result columns at ``points`` (default: the declared points)."""
        pts = self.points if points is None else points
        if pts is None:
            raise ConfigError(f"series.{self.name}.points", "no points declared and none "
                              "given (simulated targets need the points in the declaration)")
        return columns(self.name, pts)


def check_points(points: Any, key: str) -> np.ndarray:
    """Finite, strictly increasing numbers; a :class:`ConfigError` at ``key`` naming the
    first duplicate or out-of-order point otherwise."""
    try:
        arr = np.asarray(points, dtype=float).ravel()
    except (TypeError, ValueError):
        raise ConfigError(key, f"points must be numbers, got {points!r}") from None
    if arr.size == 0:
        raise ConfigError(key, "no points (a series needs at least one)")
    if not np.isfinite(arr).all():
        raise ConfigError(key, f"non-finite point(s) {arr[~np.isfinite(arr)].tolist()}")
    step = np.diff(arr)
    if (step == 0).any():
        raise ConfigError(key, f"point {arr[1:][step == 0][0]:g} is listed twice")
    if (step < 0).any():
        i = int(np.flatnonzero(step < 0)[0])
        raise ConfigError(key, f"points must be increasing: {arr[i + 1]:g} comes after "
                          f"{arr[i]:g}")
    return arr


def _range_points(spec: Mapping[str, Any], key: str) -> np.ndarray:
    unknown = sorted(set(spec) - {"from", "to", "step"})
    if unknown or "from" not in spec or "to" not in spec:
        raise ConfigError(key, f"a range of points is {{from: a, to: b, step: s}} (step "
                          f"default 1); got keys {sorted(spec)}")
    a, b, s = (float(spec["from"]), float(spec["to"]), float(spec.get("step", 1)))
    if not s > 0 or not b >= a:
        raise ConfigError(key, f"need from <= to and step > 0, got {dict(spec)}")
    n = int(math.floor((b - a) / s + 1e-9)) + 1
    return a + s * np.arange(n)


def parse_series(decl: Mapping[str, Any] | None, key: str,
                 taken: Sequence[str] = ()) -> dict[str, SeriesSpec]:
    """The study's ``series`` mapping as :class:`SeriesSpec` s.  ``taken``: the study's
    other names (parameters, contexts, scalar outputs), which a series or index name
    must not repeat.  A :class:`ConfigError` at the exact key on anything else."""
    if decl is None:
        return {}
    if not isinstance(decl, Mapping):
        raise ConfigError(key, f"a mapping {{name: {{index: day, points: ...}}}}, got "
                          f"{type(decl).__name__}")
    out: dict[str, SeriesSpec] = {}
    for name, body in decl.items():
        k = f"{key}.{name}"
        check_name(name, k)
        if name in taken:
            raise ConfigError(k, f"{name!r} is already a parameter, context or output")
        body = {"index": body} if isinstance(body, str) else body
        if not isinstance(body, Mapping):
            raise ConfigError(k, "{index: <time column>, points: [...] or {from, to, step}}")
        unknown = sorted(set(body) - {"index", "points"})
        if unknown:
            raise ConfigError(f"{k}.{unknown[0]}", "unknown key; allowed: index, points")
        if "index" not in body:
            raise ConfigError(f"{k}.index", "required: the observations' time column "
                              "(e.g. day)")
        index = body["index"]
        check_name(index, f"{k}.index")
        if index in taken or index in decl:
            raise ConfigError(f"{k}.index", f"{index!r} is already a name of the study")
        pts = body.get("points")
        if isinstance(pts, Mapping):
            pts = _range_points(pts, f"{k}.points")
        points = None if pts is None else tuple(check_points(pts, f"{k}.points").tolist())
        out[str(name)] = SeriesSpec(str(name), str(index), points)
    return out


def check_available(points: Sequence[float] | np.ndarray,
                    available: Sequence[float] | np.ndarray, name: str, source: str) -> None:
    """Every point of ``points`` is one the simulator produces (``available``); else a
    :class:`DataError` naming ``source`` (the observations file or the config key)."""
    have = {point_label(t) for t in available}
    missing = [point_label(t) for t in points if point_label(t) not in have]
    if missing:
        shown = ", ".join(missing[:8]) + (" ..." if len(missing) > 8 else "")
        lo, hi = (point_label(min(available)), point_label(max(available))) if len(
            available) else ("-", "-")
        raise DataError(source, f"series {name!r} is observed at {len(missing)} point(s) the "
                        f"simulator does not produce ({shown}); it produces "
                        f"{len(available)} points from {lo} to {hi}")


# ----------------------------------------------------------------------------- observations
@dataclass(frozen=True)
class Curve:
    """One observed curve: strictly increasing ``points``, its ``values`` and, where the
    file gives them, per-point ``sd``."""

    points: np.ndarray
    values: np.ndarray
    sd: np.ndarray | None = None


@dataclass
class SeriesObservations:
    """Per-target observed curves: ``curves[target_id][series]``; ``contexts`` one row
    per target (``target_id`` and the study's contexts)."""

    index: str
    curves: dict[int, dict[str, Curve]]
    contexts: pd.DataFrame

    def points(self, name: str) -> np.ndarray:
        """The union of the points at which any target observes ``name``, sorted: the
        points the dataset keeps and the basis is learned on."""
        arrs = [c[name].points for c in self.curves.values() if name in c]
        return np.unique(np.concatenate(arrs)) if arrs else np.zeros(0)

    def wide(self, names: Sequence[str]) -> pd.DataFrame:
        """One row per target: ``target_id``, contexts, ``<series>@<t>`` for every point
        of :meth:`points` (NaN where that target does not observe it) and
        ``sd_<series>@<t>`` where sds are given: the layout the scalar targets table has,
        with each point as an output."""
        rows = []
        for tid, ctx in zip(self.contexts["target_id"], self.contexts.to_dict("records"),
                            strict=True):
            row: dict[str, Any] = dict(ctx)
            for name in names:
                curve = self.curves[int(tid)].get(name)
                for t in self.points(name):
                    row[column(name, t)] = np.nan
                if curve is None:
                    continue
                for j, t in enumerate(curve.points):
                    row[column(name, t)] = float(curve.values[j])
                    if curve.sd is not None:
                        row[SD_PREFIX + column(name, t)] = float(curve.sd[j])
            rows.append(row)
        return pd.DataFrame(rows)


def read_series_observations(path: str | Path, specs: Mapping[str, SeriesSpec],
                             contexts: Sequence[str] = (), key: str = "") -> SeriesObservations:
    """Read a long-form observations CSV (see the module docstring); a
    :class:`DataError` naming the file (and ``key``) on any bad input."""
    src = f"{path}" + (f" ({key})" if key else "")
    p = Path(path)
    if not p.is_file():
        raise DataError(src, "observations file not found")
    with open(p, newline="") as fh:  # pandas renames a repeated column ('cases.1')
        header = [str(c).strip() for c in next(csv.reader(fh), [])]
    dup = sorted({c for c in header if header.count(c) > 1})
    if dup:
        raise DataError(src, f"column(s) {dup} appear more than once")
    try:
        # only an empty cell is "not observed"; 'nan' stays text and is reported
        df = pd.read_csv(p, keep_default_na=False, na_values=[""], index_col=False,
                         dtype=str)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise DataError(src, f"cannot read as CSV: {exc}") from None
    return parse_series_observations(df, specs, contexts, src)


def _index_name(specs: Mapping[str, SeriesSpec], src: str) -> str:
    if not specs:
        raise DataError(src, "the study declares no series")
    idx = {s.index for s in specs.values()}
    if len(idx) > 1:
        raise DataError(src, f"the series use different index columns {sorted(idx)}; one "
                        "long-form file holds one index column")
    return idx.pop()


def _numbers(df: pd.DataFrame, col: str, src: str, allow_empty: bool) -> np.ndarray:
    """A column as floats: empty cells NaN when ``allow_empty``; any other non-number
    (nan, inf, text) a DataError naming the column and row."""
    raw = df[col]
    vals = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
    empty = raw.isna().to_numpy()
    bad = ~np.isfinite(vals) & ~(empty & allow_empty)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        what = "an empty cell" if empty[i] else repr(raw.iloc[i])
        raise DataError(src, f"column {col!r}, row {i + 1}: {what} is not a finite number "
                        f"({int(bad.sum())} such value(s) in the column)")
    return vals


def _check_columns(df: pd.DataFrame, index: str, specs: Mapping[str, SeriesSpec],
                   contexts: Sequence[str], src: str) -> None:
    cols = [str(c).strip() for c in df.columns]
    dup = sorted({c for c in cols if cols.count(c) > 1})
    if dup:
        raise DataError(src, f"column(s) {dup} appear more than once")
    allowed = {"target_id", index, *specs, *(SD_PREFIX + s for s in specs), *contexts}
    unknown = [c for c in cols if c not in allowed]
    if unknown:
        raise DataError(src, f"unknown column(s) {unknown}; allowed: target_id, the index "
                        f"{index!r}, the series {list(specs)}, sd_<series>, the contexts "
                        f"{list(contexts)}")
    missing = [c for c in [index, *specs, *contexts] if c not in cols]
    if missing:
        raise DataError(src, f"missing column(s) {missing} (long form: target_id, "
                        f"{index}, one column per series {list(specs)}, contexts)")
    if df.empty:
        raise DataError(src, "no rows (need at least one observed point)")


def _target_curve(name: str, spec: SeriesSpec, t: np.ndarray, v: np.ndarray,
                  sd: np.ndarray | None, tid: int, rows: np.ndarray, src: str) -> Curve | None:
    seen = ~np.isnan(v)
    if not seen.any():
        return None
    t, v = t[seen], v[seen]
    if sd is not None:
        sd = sd[seen]
        gap = np.isnan(sd)
        if gap.any():
            raise DataError(src, f"target {tid}, {spec.index} {point_label(t[gap][0])}: "
                            f"{name} is given without its sd_{name}")
        if (sd <= 0).any():
            raise DataError(src, f"column 'sd_{name}', target {tid}: standard deviations "
                            "must be > 0")
    if spec.points is not None:
        check_available(t, spec.points, name, src + f", target {tid}")
    return Curve(t.copy(), v.copy(), None if sd is None else sd.copy())


def _check_times(t: np.ndarray, tid: int, rows: np.ndarray, index: str, src: str) -> None:
    step = np.diff(t)
    if (step == 0).any():
        i = int(np.flatnonzero(step == 0)[0])
        raise DataError(src, f"target {tid}: {index} {point_label(t[i])} appears twice "
                        f"(rows {rows[i] + 1} and {rows[i + 1] + 1})")
    if (step < 0).any():
        i = int(np.flatnonzero(step < 0)[0])
        raise DataError(src, f"target {tid}: {index} is not sorted: {point_label(t[i + 1])} "
                        f"(row {rows[i + 1] + 1}) comes after {point_label(t[i])} "
                        f"(row {rows[i] + 1})")


def parse_series_observations(df: pd.DataFrame, specs: Mapping[str, SeriesSpec],
                              contexts: Sequence[str], src: str) -> SeriesObservations:
    """:func:`read_series_observations` on a frame of strings (or numbers)."""
    df = df.copy()
    df.columns = [str(c).strip() for c in df.columns]
    index = _index_name(specs, src)
    _check_columns(df, index, specs, contexts, src)
    times = _numbers(df, index, src, allow_empty=False)
    if "target_id" in df:
        ids = _numbers(df, "target_id", src, allow_empty=False)
        if (ids != np.round(ids)).any():
            raise DataError(src, "column 'target_id': must be integers")
    else:
        ids = np.zeros(len(df))
    vals = {s: _numbers(df, s, src, allow_empty=True) for s in specs}
    sds = {s: _numbers(df, SD_PREFIX + s, src, allow_empty=True) for s in specs
           if SD_PREFIX + s in df}
    ctx = {c: _numbers(df, c, src, allow_empty=False) for c in contexts}
    curves: dict[int, dict[str, Curve]] = {}
    ctx_rows = []
    for tid in dict.fromkeys(ids.astype(np.int64).tolist()):  # first-seen order
        rows = np.flatnonzero(ids == tid)
        _check_times(times[rows], tid, rows, index, src)
        for c in contexts:
            if np.unique(ctx[c][rows]).size > 1:
                raise DataError(src, f"target {tid}: context {c!r} changes within the target "
                                "(a target's setting is one value)")
        got = {}
        for name, spec in specs.items():
            sd = sds[name][rows] if name in sds else None
            curve = _target_curve(name, spec, times[rows], vals[name][rows], sd, tid, rows,
                                  src)
            if curve is not None:
                got[name] = curve
        if not got:
            raise DataError(src, f"target {tid}: no observed value in any series")
        curves[int(tid)] = got
        ctx_rows.append({"target_id": int(tid), **{c: float(ctx[c][rows[0]]) for c in contexts}})
    return SeriesObservations(index, curves, pd.DataFrame(ctx_rows))


# ----------------------------------------------------------------------------- results
def _curve_on_points(name: str, t: np.ndarray, v: np.ndarray, points: np.ndarray,
                     where: str, index: str) -> np.ndarray:
    """Values of one run's (t, v) at ``points``: strictly increasing t, every point
    present (extra times ignored); a DataError naming ``where`` otherwise."""
    step = np.diff(t)
    if (step <= 0).any():
        i = int(np.flatnonzero(step <= 0)[0])
        what = "appears twice" if step[i] == 0 else f"comes after {point_label(t[i])}"
        raise DataError(where, f"series {name!r}: {index} {point_label(t[i + 1])} {what} "
                        f"(times must be strictly increasing)")
    pos = np.searchsorted(t, points)
    hit = (pos < len(t)) & (t[np.minimum(pos, len(t) - 1)] == points)
    if not hit.all():
        miss = [point_label(x) for x in points[~hit]]
        raise DataError(where, f"series {name!r} has no value at {index} "
                        f"{', '.join(miss[:8])}{' ...' if len(miss) > 8 else ''} "
                        f"({len(miss)} of the {len(points)} points needed; the run gave "
                        f"{len(t)} points)")
    return np.asarray(v, dtype=float)[pos]


def _sequence_cells(result: pd.DataFrame, name: str, points: np.ndarray,
                    key: str) -> np.ndarray:
    out = np.full((len(result), len(points)), np.nan)
    first: tuple[Any, int] | None = None
    for i, (label, cell) in enumerate(result[name].items()):
        if cell is None or (np.ndim(cell) == 0 and pd.isna(cell)):
            continue  # a failed run: no curve (its status says why)
        arr = np.asarray(cell, dtype=float).ravel()
        if first is None:
            first = (label, len(arr))
        if len(arr) != len(points):
            raise DataError(key, f"series {name!r} of run {label!r} has {len(arr)} values, "
                            f"the series has {len(points)} points (run {first[0]!r} gave "
                            f"{first[1]}): series of different lengths between runs")
        out[i] = arr
    return out


def from_python(result: pd.DataFrame, index: pd.Index, specs: Mapping[str, SeriesSpec],
                points: Mapping[str, Sequence[float] | np.ndarray],
                key: str) -> pd.DataFrame:
    """A Python simulator's result with every series as wide columns at ``points``
    (one row per run, ``index`` order); other columns (scalars, status, message) kept.

    Accepted per series: the wide columns already; a column ``<series>`` of sequences
    (one value per point); or a long frame, recognised by the index column, whose rows
    are labelled with the runs' index labels.  A :class:`DataError` naming ``key`` and
    the run on a missing run or point, a duplicate or unsorted time, or sequences of
    different lengths."""
    idx_cols = {s.index for s in specs.values()}
    long = [c for c in idx_cols if c in result.columns]
    if long:
        return _from_long(result, index, specs, points, key, long[0])
    frame = result.copy()
    for name, spec in specs.items():
        pts = np.asarray(points[name], dtype=float)
        cols = columns(name, pts)
        if name in frame.columns:
            vals = _sequence_cells(frame, name, pts, key)
            frame = frame.drop(columns=[name])
            frame = pd.concat([frame, pd.DataFrame(vals, columns=cols, index=frame.index)],
                              axis=1)
            continue
        missing = [c for c in cols if c not in frame.columns]
        if missing:
            raise DataError(key, f"the result has no column {name!r} (a sequence per run), "
                            f"no long-form {spec.index!r} column and lacks the point "
                            f"column(s) {missing[:5]}{' ...' if len(missing) > 5 else ''}")
    return frame


def _from_long(result: pd.DataFrame, index: pd.Index, specs: Mapping[str, SeriesSpec],
               points: Mapping[str, Sequence[float] | np.ndarray], key: str,
               index_col: str) -> pd.DataFrame:
    labels = result.index
    absent = [lab for lab in index if lab not in set(labels)]
    if absent:
        raise DataError(key, f"the long-form result has no rows for run(s) {absent[:5]} "
                        f"(rows are labelled with the input's index labels)")
    series_names = [n for n in specs if n in result.columns]
    lacking = [n for n in specs if n not in result.columns]
    if lacking:
        raise DataError(key, f"the long-form result has no column for series {lacking}")
    other = [c for c in result.columns if c != index_col and c not in series_names]
    rows = []
    for lab in index:
        part = result.loc[[lab]]
        t = pd.to_numeric(part[index_col], errors="coerce").to_numpy(dtype=float)
        row: dict[str, Any] = {c: part[c].iloc[0] for c in other}
        for name in series_names:
            pts = np.asarray(points[name], dtype=float)
            v = pd.to_numeric(part[name], errors="coerce").to_numpy(dtype=float)
            vals = _curve_on_points(name, t, v, pts, f"{key}, run {lab!r}", index_col)
            row.update(zip(columns(name, pts), vals.tolist(), strict=True))
        rows.append(row)
    return pd.DataFrame(rows, index=index)


def from_command_csv(text: str, specs: Mapping[str, SeriesSpec],
                     points: Mapping[str, Sequence[float] | np.ndarray],
                     source: str) -> dict[str, float]:
    """A command's CSV (one row per time point: the index column, one column per
    series) as ``{column: value}`` at ``points``; a DataError naming ``source``."""
    import io

    try:
        df = pd.read_csv(io.StringIO(text), index_col=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise DataError(source, f"cannot read the series CSV: {exc}") from None
    df.columns = [str(c).strip() for c in df.columns]
    index = _index_name(specs, source)
    lacking = [c for c in [index, *specs] if c not in df.columns]
    if lacking:
        raise DataError(source, f"the series CSV lacks column(s) {lacking}; it has "
                        f"{list(df.columns)} (one row per {index}, one column per series)")
    t = pd.to_numeric(df[index], errors="coerce").to_numpy(dtype=float)
    if not np.isfinite(t).all():
        i = int(np.flatnonzero(~np.isfinite(t))[0])
        raise DataError(source, f"column {index!r}, row {i + 1}: {df[index].iloc[i]!r} is "
                        "not a finite number")
    out: dict[str, float] = {}
    for name in specs:
        pts = np.asarray(points[name], dtype=float)
        v = pd.to_numeric(df[name], errors="coerce").to_numpy(dtype=float)
        text = np.isnan(v) & df[name].notna().to_numpy() & ~df[name].astype(str).str.strip(
        ).str.lower().isin(["nan", "na", ""]).to_numpy()
        if text.any():  # NaN is a failed run's value; text is a broken file
            i = int(np.flatnonzero(text)[0])
            raise DataError(source, f"column {name!r}, row {i + 1}: {df[name].iloc[i]!r} is "
                            "not a number")
        vals = _curve_on_points(name, t, v, pts, source, index)
        out.update(zip(columns(name, pts), vals.tolist(), strict=True))
    return out


def from_command_json(text: str | Mapping[str, Any], specs: Mapping[str, SeriesSpec],
                      points: Mapping[str, Sequence[float] | np.ndarray],
                      source: str) -> dict[str, float]:
    """A command's JSON object of arrays (``{"day": [...], "cases": [...]}``; the index
    array optional when a series has exactly as many values as declared points) as
    ``{column: value}`` at ``points``; a DataError naming ``source``."""
    try:
        data = json.loads(text) if isinstance(text, str) else text
    except json.JSONDecodeError as exc:
        raise DataError(source, f"not valid JSON ({exc})") from None
    if not isinstance(data, Mapping):
        raise DataError(source, "the series JSON must be an object of arrays")
    index = _index_name(specs, source)
    t = None
    if index in data:
        t = _json_array(data[index], index, source)
    out: dict[str, float] = {}
    for name in specs:
        if name not in data:
            raise DataError(source, f"no array {name!r}; keys: {sorted(data)}")
        v = _json_array(data[name], name, source)
        pts = np.asarray(points[name], dtype=float)
        if t is None:
            if len(v) != len(pts):
                raise DataError(source, f"series {name!r} has {len(v)} values, the series "
                                f"has {len(pts)} points (give the {index!r} array to pick "
                                "points from a longer series)")
            vals = v
        else:
            if len(t) != len(v):
                raise DataError(source, f"array {name!r} has {len(v)} values, {index!r} has "
                                f"{len(t)}")
            vals = _curve_on_points(name, t, v, pts, source, index)
        out.update(zip(columns(name, pts), np.asarray(vals, dtype=float).tolist(),
                       strict=True))
    return out


def _json_array(raw: Any, name: str, source: str) -> np.ndarray:
    if not isinstance(raw, list) or any(isinstance(x, (bool, list, dict, str)) for x in raw):
        raise DataError(source, f"{name!r} must be an array of numbers")
    return np.array([np.nan if x is None else float(x) for x in raw], dtype=float)
