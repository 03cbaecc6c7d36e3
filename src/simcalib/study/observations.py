"""Observed calibration targets: a CSV of measured outputs instead of simulated ones.

A study's ``targets`` (or an ``extra_targets`` entry) is either drawn and simulated
(``n``: the true inputs are known, so distance-to-truth can be measured) or read from
a file (``file``: what a user calibrating to real data has; there are no true inputs).

File layout (one row per target; docs/observed_targets.md):

* one column per study output (required, numeric, finite);
* ``target_id`` (optional; integers, unique; default 0, 1, ...);
* one column per study context (required when the study has contexts): the setting
  the observation was made in, held fixed during calibration;
* ``sd_<output>`` (optional, > 0): the observation's standard deviation.  Output j's
  term in the error becomes |S_j - z_j| / sd_j instead of |S_j - z_j| / s_j (s_j the
  metamodel's training-set sd), i.e. Delta counts misfit in observation sds;
* ``weight_<output>`` (optional, >= 0, default 1): multiplies output j's term.

So Delta = sum_j w_j |S_j(x) - z_j| / d_j with d_j = sd_j where given, else s_j; OP
minimises the same sum over the metamodel.  Any other column (a tunable input above
all: observed data has no true inputs) is an error, so a typo never silently drops an
output or a weight.

Lines whose first non-blank character is ``#`` are comments and skipped (a note on
where the data came from); a ``#`` after a value is not a comment (the value is then
not a number, and the error quotes it).

**Series** (issue 42): a study that declares ``series`` reads its observations in long
form (a file with the series' index column: one row per target and time,
:func:`simcalib.study.series.read_series_observations`), written here in the same
one-row-per-target layout with one column per point (``cases@7``, ``sd_cases@7``); a
point a target does not observe is empty (NaN) and weighs 0
(:func:`output_weights`).  A wide file (the point columns themselves, every one
given) reads as scalars do.  Each series counts as one output in Delta by default:
its points' terms are weighted 1/m (m: the points that target observes), so a
100-point curve does not outweigh nine scalars a hundred times; ``weight_<series>``
is not a column, give per-point weights as ``weight_cases@7`` in a wide file.

A relative path is taken relative to the directory Snakemake (or the CLI) runs in;
if it is not there, relative to the simcalib checkout (so the shipped example study
also runs with ``snakemake -d elsewhere``).
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simcalib.errors import ConfigError, DataError, did_you_mean
from simcalib.io import PACKAGE_ROOT, check_csv_shape

SD_PREFIX = "sd_"
WEIGHT_PREFIX = "weight_"


def target_sets(cfg: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """``{"targets": cfg.targets, name: cfg.extra_targets[name], ...}``."""
    out: dict[str, Mapping[str, Any]] = {"targets": cfg.get("targets") or {}}
    out.update((cfg.get("extra_targets") or {}).items())
    return out


def set_key(study_key: str, which: str) -> str:
    return f"{study_key}.targets" if which == "targets" else f"{study_key}.extra_targets.{which}"


def observed_file(cfg: Mapping[str, Any], which: str = "targets") -> str | None:
    """The observations file of a target set, or None when it is simulated."""
    return target_sets(cfg).get(which, {}).get("file")


def resolve(path: str | Path) -> Path:
    """A relative path under the working directory, else under the simcalib checkout."""
    p = Path(path)
    if p.is_absolute() or p.exists():
        return p
    alt = PACKAGE_ROOT / p
    return alt if alt.exists() else p


def read_observations(path: str | Path, outputs: list[str], contexts: list[str],
                      tunables: list[str], key: str = "",
                      outputs_key: str | None = None,
                      series: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Read and check an observations file; returns the targets table every later step
    reads: ``target_id``, contexts, outputs, ``sd_*``/``weight_*`` as given, ``status``
    (``ok``) and ``message``.  Raises :class:`DataError` naming the file and column, or
    a :class:`ConfigError` naming ``outputs_key`` (the study's ``outputs``, when the
    config lists them) for an output the file lacks.

    Whole-line comments (a line whose first non-blank character is ``#``) are skipped,
    and values in messages are quoted as the file writes them.  By stage: read the text,
    check the columns, convert to numbers, check the values, number the targets."""
    p = resolve(path)
    src = f"{path}" + (f" ({key})" if key else "")
    if not p.is_file():
        raise DataError(src, f"observations file not found (looked in {Path.cwd()} and "
                        f"{PACKAGE_ROOT})")
    check_csv_shape(p, src, comments=True)
    df, lines = _read_text_table(p, src)
    if series and any(s.index in df.columns for s in series.values()):
        return _read_long(p, outputs, contexts, tunables, series, src)
    _check_columns(list(df.columns), outputs, contexts, tunables, src, outputs_key)
    if df.empty:
        raise DataError(src, "no rows (need at least one target)")
    df = _to_numbers(df, lines, src)
    _check_values(df, outputs, lines, src)
    extra = [c for c in df.columns if c.startswith((SD_PREFIX, WEIGHT_PREFIX))]
    out = df[["target_id", *contexts, *outputs, *extra]].copy()
    out["status"] = "ok"
    out["message"] = ""
    return out


def _read_long(p: Path, outputs: list[str], contexts: list[str], tunables: list[str],
               series: Mapping[str, Any], src: str) -> pd.DataFrame:
    """A long-form series file as the one-row-per-target table (module docstring)."""
    from simcalib.study.series import SD_PREFIX as SERIES_SD
    from simcalib.study.series import parse_column, read_series_observations

    scalars = [o for o in outputs if parse_column(o) is None]
    if scalars:
        raise DataError(src, f"a long-form file (one row per time) holds series only; the "
                        f"study also calibrates on the scalar output(s) {scalars}: observe "
                        "them in a wide file (one row per target, one column per point), or "
                        "leave them out of 'outputs'")
    with open(p, newline="") as fh:
        header = [c.strip() for c in fh.readline().split(",")]
    tun = [c for c in header if c in tunables]
    if tun:
        raise DataError(src, f"column(s) {tun} are tunable inputs of the study: an "
                        "observations file holds outputs (and contexts), never the inputs "
                        "being calibrated")
    obs = read_series_observations(p, series, contexts, src)
    wide = obs.wide(list(series))
    known = set(outputs)
    extra = [c for c in wide.columns if parse_column(c) is not None and c not in known
             and not c.startswith(SERIES_SD)]
    if extra:  # only reachable when the study's points were declared without these
        raise DataError(src, f"point(s) {extra[:5]} are not among the study's series points")
    sds = [SERIES_SD + o for o in outputs if SERIES_SD + o in wide.columns]
    out = wide.reindex(columns=["target_id", *contexts, *outputs, *sds])
    out["target_id"] = out["target_id"].astype(np.int64)
    out["status"] = "ok"
    out["message"] = ""
    return out


def _read_text_table(p: Path, src: str) -> tuple[pd.DataFrame, list[int]]:
    """Every field as the text the file holds (comment lines blanked, so pandas skips
    them as it skips blank lines), and the file line of each data row."""
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(src, f"cannot read as CSV: {exc}") from None
    kept = ["" if line.lstrip().startswith("#") else line for line in text.splitlines()]
    data_lines = [i + 1 for i, line in enumerate(kept) if line.strip()][1:]
    try:
        df = pd.read_csv(io.StringIO("\n".join(kept) + "\n"), dtype=str,
                         keep_default_na=False, na_filter=False, index_col=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise DataError(src, f"cannot read as CSV: {exc}") from None
    df.columns = [str(c).strip() for c in df.columns]
    return df, data_lines


def _check_columns(columns: list[str], outputs: list[str], contexts: list[str],
                   tunables: list[str], src: str, outputs_key: str | None) -> None:
    """Repeated, tunable, unknown and missing columns.  An output the file lacks whose
    name is close to one of its columns is most likely a typo in the config's
    ``outputs``: reported against that key, with the column it probably meant."""
    dup = sorted({c for c in columns if columns.count(c) > 1})
    if dup:
        raise DataError(src, f"column(s) {dup} appear more than once")
    tun = [c for c in columns if c in tunables]
    if tun:
        raise DataError(src, f"column(s) {tun} are tunable inputs of the study: an "
                        "observations file holds outputs (and contexts), never the inputs "
                        "being calibrated")
    _check_column_set(columns, outputs, contexts, src, outputs_key)


def _check_column_set(columns: list[str], outputs: list[str], contexts: list[str], src: str,
                      outputs_key: str | None) -> None:
    """Every output and context present, no other column than sd_/weight_/target_id."""
    allowed = {"target_id", *outputs, *contexts, *(SD_PREFIX + o for o in outputs),
               *(WEIGHT_PREFIX + o for o in outputs)}
    unknown = [c for c in columns if c not in allowed]
    absent = [o for o in outputs if o not in columns]
    if absent and outputs_key:
        i = outputs.index(absent[0])
        raise ConfigError(f"{outputs_key}[{i}]", f"output {absent[0]!r} is not a column of "
                          f"the observations file {src}" + did_you_mean(absent[0], unknown)
                          + f"; its columns: {columns}")
    if unknown:
        hints = "".join(f"; {u!r}" + did_you_mean(u, [*outputs, *contexts]) for u in unknown
                        if did_you_mean(u, [*outputs, *contexts]))
        raise DataError(src, f"unknown column(s) {unknown}; allowed: target_id, the outputs "
                        f"{outputs}, the contexts {contexts}, sd_<output>, weight_<output>"
                        + hints)
    missing = [c for c in [*outputs, *contexts] if c not in columns]
    if missing:
        what = "output" if set(missing) & set(outputs) else "context"
        raise DataError(src, f"missing {what} column(s) {missing} (the study's outputs are "
                        f"{outputs}, its contexts {contexts})")


def _to_numbers(df: pd.DataFrame, lines: list[int], src: str) -> pd.DataFrame:
    """Every column as finite floats; the first bad field is quoted as the file has it."""
    out = pd.DataFrame(index=df.index)
    for c in df.columns:
        raw = df[c].astype(str).str.strip()
        vals = pd.to_numeric(raw, errors="coerce").astype(float)
        bad = ~np.isfinite(vals.to_numpy())
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            shown = repr(raw.iloc[i]) if raw.iloc[i] else "an empty field"
            raise DataError(src, f"column {c!r}, row {i + 1} (line {lines[i]}): {shown} is "
                            f"not a finite number ({int(bad.sum())} such value(s) in the "
                            "column)")
        out[c] = vals
    return out


def _check_values(df: pd.DataFrame, outputs: list[str], lines: list[int], src: str) -> None:
    """sd > 0, weights >= 0 and not all 0 in a row, ``target_id`` unique integers
    (numbered 0, 1, ... when absent); ``df`` is completed in place."""
    for c in df.columns:
        if c.startswith(SD_PREFIX) and (df[c] <= 0).any():
            raise DataError(src, f"column {c!r}: standard deviations must be > 0")
        if c.startswith(WEIGHT_PREFIX) and (df[c] < 0).any():
            raise DataError(src, f"column {c!r}: weights must be >= 0")
    if "target_id" in df:
        ids = df["target_id"]
        if (ids != ids.round()).any() or ids.duplicated().any():
            raise DataError(src, "column 'target_id': must be unique integers")
        df["target_id"] = ids.astype(np.int64)
    else:
        df.insert(0, "target_id", np.arange(len(df), dtype=np.int64))
    w = output_weights(df, outputs, np.ones(len(outputs)))
    if (w.sum(axis=1) <= 0).any():
        i = int(np.flatnonzero(w.sum(axis=1) <= 0)[0])
        raise DataError(src, f"row {i + 1} (line {lines[i]}): every output has weight 0")


def output_weights(df: pd.DataFrame, outputs: list[str], scale: np.ndarray) -> np.ndarray:
    """Per-row multiplier of |S_j - z_j| / s_j (s_j = ``scale``): weight_j * s_j / sd_j
    (sd_j defaulting to s_j, weight_j to 1).  Shape (rows, outputs).

    An empty sd cell (NaN; a DataFrame passed to the API, since the file readers
    refuse empty fields) is an sd not given: s_j, as where the column is absent, and
    as the posterior reads it (``Target.sd_given``).  It used to weigh 0, silently
    dropping that output from Delta.

    A series' point (``cases@7``) is further weighted 1/m, m the points of that series
    the row observes, and weighs 0 where the row does not observe it (NaN value):
    each series counts as one output (module docstring)."""
    w = np.ones((len(df), len(outputs)))
    for j, o in enumerate(outputs):
        if SD_PREFIX + o in df:
            sd = df[SD_PREFIX + o].to_numpy(dtype=float)
            w[:, j] *= np.divide(scale[j], sd, out=np.ones(len(df)),
                                 where=np.isfinite(sd) & (sd > 0))
        if WEIGHT_PREFIX + o in df:
            w[:, j] *= df[WEIGHT_PREFIX + o].to_numpy(dtype=float)
    _series_weights(df, outputs, w)
    return w


def _series_weights(df: pd.DataFrame, outputs: list[str], w: np.ndarray) -> None:
    """In place: 0 at unobserved points, 1/m at the m observed points of each series."""
    from simcalib.study.series import parse_column

    groups: dict[str, list[int]] = {}
    for j, o in enumerate(outputs):
        if (p := parse_column(o)) is not None:
            groups.setdefault(p[0], []).append(j)
    for cols in groups.values():
        seen = np.ones((len(df), len(cols)), dtype=bool)
        for i, j in enumerate(cols):
            if outputs[j] in df:
                seen[:, i] = np.isfinite(df[outputs[j]].to_numpy(dtype=float))
        m = seen.sum(axis=1, keepdims=True)
        w[:, cols] *= np.where(seen, 1.0 / np.maximum(m, 1), 0.0)


TRAINING_SD = "training sd of each output"


def delta_unit(df: pd.DataFrame | None, outputs: list[str]) -> str:
    """What each output's term of Delta is divided by, in words (axis labels, table
    headers): the observations' ``sd_<output>`` where a targets table gives them for
    every output, the metamodel's training sd where it gives none, both otherwise."""
    if df is None:
        return TRAINING_SD
    given = [o for o in outputs if SD_PREFIX + o in df and df[SD_PREFIX + o].notna().any()]
    if not given:
        return TRAINING_SD
    if len(given) == len(outputs):
        return "measurement sd of each output (the observations' sd_ columns)"
    return ("observations' sd_<output> for " + ", ".join(given)
            + ", training sd for the others")


def has_truth(df: pd.DataFrame, tunables: list[str]) -> bool:
    """Whether a targets table carries the true inputs (simulated targets do)."""
    return all(c in df.columns for c in tunables)
