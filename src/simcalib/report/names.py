"""Human-readable column names, with units, for the report's tables.

The CSV files keep their snake_case names (scripts read them); the pages a person
reads show what a column is and in which unit.  ``{delta}`` in a name is replaced by
what Δ is divided by in that study (:func:`simcalib.study.observations.delta_unit`).
"""

from __future__ import annotations

import pandas as pd

COLUMNS: dict[str, str] = {
    # calibration strategies (summary.csv, per-target records)
    "strategy": "strategy",
    "target_id": "target",
    "median_error": "median Δ ({delta})",
    "mean_error": "mean Δ ({delta})",
    "error": "Δ ({delta})",
    "rescored_error": "re-scored Δ, fresh runs ({delta})",
    "median_rescored_error": "median re-scored Δ ({delta})",
    "mean_rescored_error": "mean re-scored Δ ({delta})",
    "reduction_vs_rs": "mean Δ reduction vs rs (fraction)",
    "median_reduction_vs_rs": "median Δ reduction vs rs (fraction)",
    "runs": "simulator runs per target",
    "targets": "targets",
    "failed_targets": "failed targets",
    "failed_runs": "failed runs",
    "failed_target_ids": "failed target ids",
    "compared_targets": "targets every strategy calibrated",
    "mean_error_compared": "mean Δ on those targets ({delta})",
    "median_error_compared": "median Δ on those targets ({delta})",
    "metamodel_min_test_r2": "metamodel's worst test R²",
    "metamodel_ok": "metamodel trusted",
    "anchor_kind": "anchor",
    "true": "true value",
    "median_predicted_error": "median predicted Δ, metamodel ({delta})",
    "mean_predicted_error": "mean predicted Δ, metamodel ({delta})",
    "predicted_error": "predicted Δ, metamodel ({delta})",
    "median_distance": "median distance to the true inputs (unit cube)",
    "distance": "distance to the true inputs (unit cube)",
    "mean_seconds": "mean seconds per target",
    "seconds": "seconds",
    "op_unproven": "OP solves not proven optimal",
    "op_time_limited": "OP solves stopped by the time limit (load-dependent)",
    "paper_median_error": "paper's median Δ (FluTE, 50 targets)",
    # OP
    "rank": "rank",
    "status": "status",
    "objective": "MILP objective (predicted Δ)",
    "bound": "MILP bound",
    "gap": "optimality gap",
    "nodes": "B&B nodes",
    "backend": "solver",
    "flag": "trust flag",
    # posterior of a metamodel study
    "input": "input",
    "mean": "posterior mean",
    "sd": "posterior sd",
    "q5": "5 % quantile",
    "q50": "median",
    "q95": "95 % quantile",
    "r_hat": "R-hat",
    "ess_bulk": "bulk ESS",
    "converged": "converged",
    "prior_sd_ratio": "posterior sd / prior sd",
    "identified": "pinned down by the data",
    # Bayes tables
    "method": "method",
    "parameter": "parameter",
    "bias": "bias",
    "rmse": "RMSE",
    "coverage": "95 % coverage",
    "width": "95 % interval width",
    "replications": "replications",
    "rhat_max": "worst R-hat",
    "ess_bulk_min": "smallest bulk ESS",
    "unconverged": "unconverged runs",
    "lower95": "2.5 % quantile",
    "upper95": "97.5 % quantile",
    # sweep
    "proximity": "proximity R",
    "q25_error": "25 % quantile of Δ ({delta})",
    "q75_error": "75 % quantile of Δ ({delta})",
    "best": "best",
}

def short_unit(unit: str) -> str:
    """What Δ is divided by, short, for column headers: ``training sds`` (``unit``
    empty or the training sd), ``measurement sds``, or ``measurement/training sds``
    (sd_ columns for some outputs only; :func:`simcalib.study.observations.delta_unit`)."""
    if not unit or unit.startswith("training sd"):
        return "training sds"
    if unit.startswith("measurement sd"):
        return "measurement sds"
    return "measurement/training sds"


def display(df: pd.DataFrame, unit: str = "") -> pd.DataFrame:
    """``df`` with its known columns renamed for people; unknown columns keep their
    names, ``paper_<x>`` becomes "paper's <x>", ``x_<input>`` the input's name."""
    delta = short_unit(unit)
    names = {}
    for c in df.columns:
        c = str(c)
        if c in COLUMNS:
            names[c] = COLUMNS[c].format(delta=delta)
        elif c.startswith("paper_") and c[6:] in COLUMNS:
            names[c] = "paper's " + COLUMNS[c[6:]].format(delta=delta)
        elif c.startswith("x_"):
            names[c] = c[2:]
    return df.rename(columns=names)
