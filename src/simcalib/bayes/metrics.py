"""Replication metrics (paper section 4.1.4) and the tables beside the paper's numbers.

Parameters, per method and parameter over R replications (posterior mean m_r, 95%
equal-tailed interval [lo_r, hi_r], truth theta*_r):
bias = mean_r(m_r - theta*_r); rmse = sqrt(mean_r((m_r - theta*_r)^2));
coverage = fraction of r with lo_r <= theta*_r <= hi_r; width = mean_r(hi_r - lo_r).

Output (the predicted process A z + delta against the true process xi on the dense
grid): per replication the time- and output-averaged squared error of the pointwise
posterior mean (its root), mean error, pointwise 95% coverage and band width; then the
mean over replications.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from simcalib.bayes import paper

PARAM_COLUMNS = ["method", "parameter", "bias", "rmse", "coverage", "width", "replications",
                 "rhat_max", "ess_bulk_min"]
OUTPUT_COLUMNS = ["method", "rmse", "bias", "coverage", "width", "replications"]


def parameter_metrics(per_rep: pd.DataFrame) -> pd.DataFrame:
    """``per_rep``: one row per (method, rep, parameter) with truth, mean, q2.5, q97.5,
    r_hat, ess_bulk."""
    rows = []
    for (method, param), g in per_rep.groupby(["method", "parameter"], sort=False):
        err = g["mean"] - g["truth"]
        covered = (g["q2.5"] <= g["truth"]) & (g["truth"] <= g["q97.5"])
        rows.append({"method": method, "parameter": param, "bias": err.mean(),
                     "rmse": float(np.sqrt(np.mean(err**2))),
                     "coverage": float(covered.mean()),
                     "width": float((g["q97.5"] - g["q2.5"]).mean()), "replications": len(g),
                     "rhat_max": float(g["r_hat"].max()),
                     "ess_bulk_min": float(g["ess_bulk"].min())})
    return pd.DataFrame(rows, columns=PARAM_COLUMNS)


def output_metrics_one(pred: pd.DataFrame, dense: pd.DataFrame) -> dict[str, float]:
    """One replication: ``pred`` from :func:`simcalib.bayes.predict.predictive`,
    ``dense`` with columns time, output, xi (the true process)."""
    key_p = pred.assign(tk=pred["time"].round(9))
    key_d = dense.assign(tk=dense["time"].round(9))[["tk", "output", "xi"]]
    m = key_p.merge(key_d, on=["tk", "output"], how="inner")
    if m.empty:
        raise ValueError("predictive grid and true-process grid do not overlap")
    err = m["xi_mean"] - m["xi"]
    return {"rmse": float(np.sqrt(np.mean(err**2))), "bias": float(err.mean()),
            "coverage": float(((m["xi_lo"] <= m["xi"]) & (m["xi"] <= m["xi_hi"])).mean()),
            "width": float((m["xi_hi"] - m["xi_lo"]).mean())}


def output_metrics(per_rep: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for method, g in per_rep.groupby("method", sort=False):
        rows.append({"method": method, **{k: float(g[k].mean())
                                           for k in ("rmse", "bias", "coverage", "width")},
                     "replications": len(g)})
    return pd.DataFrame(rows, columns=OUTPUT_COLUMNS)


def parameter_table(setting: str, metrics: pd.DataFrame) -> pd.DataFrame:
    """Our metrics with the paper's beside them (NaN where the paper has none)."""
    ref = paper.PARAMS.get(setting, {})
    out = metrics[["method", "parameter", "bias", "rmse", "coverage", "width",
                   "replications"]].copy()
    for i, name in enumerate(["bias", "rmse", "coverage", "width"]):
        out[f"paper_{name}"] = [ref.get(m, {}).get(p, (np.nan,) * 4)[i]
                                for m, p in zip(out["method"], out["parameter"], strict=True)]
    return out


def output_table(setting: str, metrics: pd.DataFrame) -> pd.DataFrame:
    ref = paper.OUTPUT.get(setting, {})
    rows = []
    for i, name in enumerate(["rmse", "bias", "coverage", "width"]):
        row = {"metric": f"time-integrated {name}"}
        for _, r in metrics.iterrows():
            row[r["method"]] = r[name]
        for method in ("koh", "mos"):
            row[f"paper_{method}"] = ref[method][i] if method in ref else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def to_markdown(df: pd.DataFrame, title: str, digits: int = 4) -> str:
    """A GitHub markdown table (no tabulate dependency)."""
    def fmt(v: object) -> str:
        if isinstance(v, float | np.floating):
            return "" if np.isnan(v) else f"{v:.{digits}f}"
        return str(v)

    head = "| " + " | ".join(map(str, df.columns)) + " |"
    sep = "| " + " | ".join("---" for _ in df.columns) + " |"
    body = ["| " + " | ".join(fmt(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join([f"### {title}", "", head, sep, *body, ""]) + "\n"
