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
    "median_predicted_error": "median predicted Δ, metamodel ({delta})",
    "mean_predicted_error": "mean predicted Δ, metamodel ({delta})",
    "predicted_error": "predicted Δ, metamodel ({delta})",
    "median_distance": "median distance to the true inputs (unit cube)",
    "distance": "distance to the true inputs (unit cube)",
    "mean_seconds": "mean seconds per target",
    "seconds": "seconds",
    "op_unproven": "OP solves not proven optimal",
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
    "r_hat": "R-hat (≤ 1.01)",
    "ess_bulk": "bulk ESS (≥ 400)",
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
    "rhat_max": "worst R-hat (≤ 1.01)",
    "ess_bulk_min": "smallest bulk ESS (≥ 400)",
    "unconverged": "unconverged runs",
    "lower95": "2.5 % quantile",
    "upper95": "97.5 % quantile",
    # sweep
    "proximity": "proximity R",
    "q25_error": "25 % quantile of Δ ({delta})",
    "q75_error": "75 % quantile of Δ ({delta})",
    "best": "best",
}

#: what Δ is divided by, short, for column headers
SHORT_UNITS = {"training sd of each output": "training sds"}


def short_unit(unit: str) -> str:
    """``training sd of each output`` -> ``training sds``; measurement sds likewise."""
    if unit in SHORT_UNITS:
        return SHORT_UNITS[unit]
    if unit.startswith("measurement sd"):
        return "measurement sds"
    return "sds"


def display(df: pd.DataFrame, unit: str = "training sd of each output") -> pd.DataFrame:
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
