"""Answers beside posterior intervals, checked from the result files alone.

Two pairings reach a reader (:mod:`simcalib.metamodel.posterior.agreement` has the
check and the wording):

* ``sequential``'s own posterior: its ``answer.csv`` carries the check already
  (computed with the posterior's density: the highest-density region);
* the design posterior (``calibration.posterior``) beside the recommended strategy's
  answer: checked here, against ``posterior_summary.csv``'s 90 % intervals and the
  ellipsoid holding 90 % of the draws of the target's netCDF (the answer's density is
  not in the files: the metamodel is needed for it).

The read-me-first page and the console's end block both call :func:`design_check`
and :func:`seq_answers`, so the two say the same thing.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from simcalib.report.sections import read_if_exists

CHECK_COLUMNS = ["target_id", "inside_90", "inside_joint_90", "outside_inputs", "why_outside"]


def seq_dir(results: Path, study: str) -> Path:
    return results / study / "calibration" / "sequential_posterior"


def design_dir(results: Path, study: str) -> Path:
    return results / study / "calibration" / "posterior"


def seq_answers(results: Path, study: str) -> pd.DataFrame | None:
    """``sequential``'s posterior answers (answer.csv), or None."""
    df = read_if_exists(seq_dir(results, study) / "answer.csv")
    if df is None or not {"target_id", "inside_90"} <= set(df.columns):
        return None
    return df


def _draws(path: Path, names: list[str]) -> np.ndarray | None:
    """The posterior draws of a target's netCDF, (n, d) in ``names`` order."""
    if not path.is_file():
        return None
    from simcalib.errors import DataError
    from simcalib.report.curves import posterior_draws

    try:
        return posterior_draws(path, names)
    except (OSError, KeyError, ValueError, DataError):
        return None


def design_check(results: Path, study: str, records: pd.DataFrame) -> pd.DataFrame | None:
    """The check of ``records`` (a strategy's answers: ``target_id``, ``x_<input>``)
    against the design posterior of the same targets, one row per target it has; None
    without a posterior."""
    from simcalib.metamodel.posterior import agreement

    post = read_if_exists(design_dir(results, study) / "posterior_summary.csv")
    if post is None or not {"target_id", "input", "q5", "q95"} <= set(post.columns):
        return None
    names = [c[2:] for c in records.columns if c.startswith("x_")]
    rows = []
    for _, rec in records.iterrows():
        tid = int(rec["target_id"])
        p = post[(post["target_id"] == tid) & post["input"].isin(names)].set_index("input")
        if p.empty or any(n not in p.index for n in names):
            continue
        x = {n: float(rec[f"x_{n}"]) for n in names}
        if not np.isfinite(list(x.values())).all():
            continue
        draws = _draws(design_dir(results, study) / "targets" / f"target_{tid}.nc", names)
        joint = (agreement.inside_ellipsoid(np.array([x[n] for n in names]), draws)
                 if draws is not None else None)
        ratio = ({n: float(p.at[n, "prior_sd_ratio"]) for n in names}
                 if "prior_sd_ratio" in p else {})
        ag = agreement.check(x, {n: (float(p.at[n, "q5"]), float(p.at[n, "q95"]))
                                 for n in names}, ratio, draws, names, joint,
                             "ellipsoid of 90 % of the draws")
        rows.append({"target_id": tid, **ag.columns()})
    return pd.DataFrame(rows, columns=CHECK_COLUMNS) if rows else None


def disagreements(check: pd.DataFrame | None) -> pd.DataFrame:
    """The rows whose answer lies outside an interval or the joint region."""
    if check is None or check.empty:
        return pd.DataFrame(columns=CHECK_COLUMNS)
    joint = check["inside_joint_90"].astype(str).str.lower()
    bad = ~_truthy(check["inside_90"]) | joint.isin(("false", "0", "0.0"))
    return check[bad]


def _truthy(col: pd.Series) -> pd.Series:
    return col.astype(str).str.strip().str.lower().isin(("true", "1", "1.0"))


def sentence(check: pd.DataFrame | None, what: str) -> str | None:
    """One line: how many answers lie inside their posterior, and for each that does
    not, why (plain words)."""
    if check is None or check.empty:
        return None
    bad = disagreements(check)
    n = len(check)
    if bad.empty:
        return (f"The answer lies inside {what}'s 90 % intervals and joint 90 % region on "
                f"all {n} target{'s' if n != 1 else ''}.")
    parts = [f"target {int(r.target_id)}: {r.why_outside}" for r in bad.itertuples()]
    return (f"The answer lies OUTSIDE {what}'s 90 % region on {len(bad)} of {n} targets. "
            + "; ".join(parts) + ".")
