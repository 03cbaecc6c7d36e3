"""Which strategy's answer a study recommends: one rule for the read-me-first page and
the console's end block (its own module so both can import it without a cycle)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd


def recommended(summary: pd.DataFrame) -> tuple[str, str] | None:
    """(strategy, why): the smallest median re-scored Δ when the strategies were
    re-scored on fresh runs (a stochastic simulator), else the smallest median Δ;
    a strategy that failed on every target is never recommended."""
    col = ("median_rescored_error" if "median_rescored_error" in summary
           and summary["median_rescored_error"].notna().any() else "median_error")
    ok = summary[np.isfinite(pd.to_numeric(summary[col], errors="coerce"))]
    if "failed_targets" in ok and "targets" in ok:
        ok = ok[ok["failed_targets"] < ok["targets"]]
    if ok.empty:
        return None
    best = ok.loc[pd.to_numeric(ok[col]).idxmin()]
    what = "median re-scored Δ (fresh runs)" if col == "median_rescored_error" else "median Δ"
    return str(best["strategy"]), f"the smallest {what} of the strategies, {best[col]:.4g}"


def study_pick(cal: Path) -> tuple[pd.DataFrame, tuple[str, str] | None] | None:
    """A study's calibration folder's ``summary.csv`` and :func:`recommended` on it:
    None without a summary (no calibration), ``(summary, None)`` when no strategy
    calibrated any target."""
    from simcalib.report.sections import read_if_exists

    summ = read_if_exists(cal / "summary.csv")
    if summ is None or "strategy" not in summ:
        return None
    return summ, recommended(summ)


__all__ = ["recommended", "study_pick"]
