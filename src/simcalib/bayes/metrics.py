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

from typing import Any

import numpy as np
import pandas as pd

from simcalib.bayes import paper
from simcalib.bayes.convergence import is_converged

PARAM_COLUMNS = ["method", "parameter", "bias", "rmse", "coverage", "width", "replications",
                 "rhat_max", "ess_bulk_min", "unconverged"]
OUTPUT_COLUMNS = ["method", "rmse", "bias", "coverage", "width", "replications"]


def parameter_metrics(per_rep: pd.DataFrame, exclude_unconverged: bool = False
                      ) -> pd.DataFrame:
    """``per_rep``: one row per (method, rep, parameter) with truth, mean, lower95,
    upper95, r_hat, ess_bulk and converged.  ``unconverged`` counts the replications
    whose chains for this parameter did not converge: they stay in the averages (the
    count says how far to trust them) unless ``exclude_unconverged``
    (``bayes.exclude_unconverged``), the rule the replication study's "converged"
    subset applies."""
    rows = []
    for (method, param), g_all in per_rep.groupby(["method", "parameter"], sort=False):
        bad = (~g_all["converged"].astype(bool)) if "converged" in g_all else None
        g = g_all[~bad] if exclude_unconverged and bad is not None else g_all
        if g.empty:
            rows.append({"method": method, "parameter": param, "bias": np.nan, "rmse": np.nan,
                         "coverage": np.nan, "width": np.nan, "replications": 0,
                         "rhat_max": float(g_all["r_hat"].max()),
                         "ess_bulk_min": float(g_all["ess_bulk"].min()),
                         "unconverged": int(bad.sum()) if bad is not None else 0})
            continue
        err = g["mean"] - g["truth"]
        covered = (g["lower95"] <= g["truth"]) & (g["truth"] <= g["upper95"])
        rows.append({"method": method, "parameter": param, "bias": err.mean(),
                     "rmse": float(np.sqrt(np.mean(err**2))),
                     "coverage": float(covered.mean()),
                     "width": float((g["upper95"] - g["lower95"]).mean()),
                     "replications": len(g), "rhat_max": float(g_all["r_hat"].max()),
                     "ess_bulk_min": float(g_all["ess_bulk"].min()),
                     "unconverged": int(bad.sum()) if bad is not None else 0})
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
    cols = ["method", "parameter", "bias", "rmse", "coverage", "width", "replications"]
    out = metrics[[*cols, *[c for c in ("rhat_max", "ess_bulk_min", "unconverged")
                            if c in metrics.columns]]].copy()
    for i, name in enumerate(["bias", "rmse", "coverage", "width"]):
        out[f"paper_{name}"] = [ref.get(m, {}).get(p, (np.nan,) * 4)[i]
                                for m, p in zip(out["method"], out["parameter"], strict=True)]
    return out


def convergence_note(metrics: pd.DataFrame) -> str:
    """The trust line under a replication table: how many chain sets did not converge."""
    if "unconverged" not in metrics.columns or metrics.empty:
        return ""
    bad = metrics[metrics["unconverged"] > 0]
    if bad.empty:
        return "Convergence: every chain set converged (R-hat and bulk ESS within thresholds).\n\n"
    per = ", ".join(f"{r.method}/{r.parameter}: {int(r.unconverged)} of {int(r.replications)}"
                    for r in bad.itertuples())
    return ("**WARNING: not converged** (R-hat or bulk ESS outside thresholds; numbers "
            f"flagged in `unconverged`): {per}.\n\n")


def comparison_table(summaries: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """KOH and MOS side by side for one data set: per parameter and hyperparameter the
    posterior mean, 95% interval, R-hat, bulk ESS and the converged flag of each method."""
    out: pd.DataFrame | None = None
    for method, s in summaries.items():
        part = s[["parameter", "mean", "sd", "lower95", "upper95", "r_hat", "ess_bulk",
                  "converged"]].rename(columns=lambda c, m=method: c if c == "parameter"
                                       else f"{m}_{c}")
        out = part if out is None else out.merge(part, on="parameter", how="outer", sort=False)
    assert out is not None
    order = list(dict.fromkeys(p for s in summaries.values() for p in s["parameter"]))
    return out.set_index("parameter").loc[order].reset_index()


PPC_COLUMNS = ["method", "output", "n_obs", "rmse_mean", "coverage_y95", "width_y95",
               "coverage_xi95", "width_xi95"]


def predictive_check(pred: pd.DataFrame, t: np.ndarray, y: np.ndarray,
                     outputs: list[str]) -> pd.DataFrame:
    """Posterior predictive check against the observations (no truth needed): per
    method and state, the RMSE of the predicted process mean at the data, the share of
    data inside the 95% band for new data (y: process plus noise; ~0.95 expected) and
    inside the process band (xi: lower, the noise is left out), and the bands' widths."""
    rows = []
    for (method, out), g in pred.groupby(["method", "output"], sort=False):
        if out not in outputs:
            continue
        j = outputs.index(out)
        ok = np.isfinite(y[:, j])
        gt = g["time"].to_numpy()
        pos = np.array([int(np.argmin(np.abs(gt - ti))) for ti in t[ok]])
        obs = y[ok, j]
        row = {"method": method, "output": out, "n_obs": int(ok.sum()),
               "rmse_mean": float(np.sqrt(np.mean((g["xi_mean"].to_numpy()[pos] - obs) ** 2)))}
        for band in ("y", "xi"):
            lo, hi = g[f"{band}_lo"].to_numpy()[pos], g[f"{band}_hi"].to_numpy()[pos]
            row[f"coverage_{band}95"] = float(np.mean((lo <= obs) & (obs <= hi)))
            row[f"width_{band}95"] = float(np.mean(hi - lo))
        rows.append(row)
    return pd.DataFrame(rows, columns=PPC_COLUMNS)


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


# ---- the replication study (paper 3's tables at 100 replications) ----------------------
#
# One exclusion rule for every replication table, the workflow's and the benchmarks':
# a chain set counts as converged when its largest R-hat is <= r_hat and its smallest
# bulk ESS >= ess_bulk (bayes.convergence); :func:`apply_convergence_rule` marks each
# record, and every table is given for the "converged" subset (unconverged chain sets
# left out and counted in ``excluded_unconverged``) and for "all" replications.

REPLICATION_METHODS = ("koh", "mos")
SUBSETS = ("converged", "all")


def apply_convergence_rule(runs: list[dict[str, Any]], r_hat: float, ess_bulk: float
                           ) -> list[dict[str, Any]]:
    """Mark each replication record ``converged`` under the given thresholds (records
    are stored with the run's own thresholds; the tables' rule decides)."""
    return [{**r, "converged": is_converged(r["r_hat_max"], r["ess_bulk_min"], r_hat,
                                            ess_bulk)} for r in runs]


def _param_stats(e: np.ndarray, cov: np.ndarray, wid: np.ndarray) -> dict[str, Any]:
    """Bias, RMSE, coverage and width of ``n`` replications with standard errors (NaN
    where ``n`` is too small)."""
    n = len(e)
    if n == 0:
        return {k: np.nan for k in ("bias", "rmse", "rmse_se", "coverage", "width",
                                    "bias_se", "coverage_se", "width_se")} | {"replications": 0}
    rmse = float(np.sqrt(np.mean(e**2)))
    nan = np.nan
    mse_se = float(np.std(e**2, ddof=1) / np.sqrt(n)) if n > 1 else nan
    return {"bias": float(e.mean()), "rmse": rmse,
            "rmse_se": mse_se / (2 * rmse) if n > 1 else nan,
            "coverage": float(cov.mean()), "width": float(wid.mean()), "replications": n,
            "bias_se": float(e.std(ddof=1) / np.sqrt(n)) if n > 1 else nan,
            "coverage_se": float(np.sqrt(cov.mean() * (1 - cov.mean()) / n)),
            "width_se": float(wid.std(ddof=1) / np.sqrt(n)) if n > 1 else nan}


def replication_param_table(runs: list[dict[str, Any]], setting: str, protocol: str,
                subset: str = "converged") -> pd.DataFrame:
    """``subset``: ``converged`` (unconverged chain sets excluded, counted) or ``all``
    (every replication, to show what the exclusion changes)."""
    rows = []
    for method in REPLICATION_METHODS:
        mine = [r for r in runs if r["method"] == method]
        used = [r for r in mine if r["converged"] or subset == "all"]
        for p in (mine[0]["params"] if mine else {}):
            e = np.array([r["params"][p]["mean"] - r["params"][p]["truth"] for r in used])
            cov = np.array([r["params"][p]["lo"] <= r["params"][p]["truth"]
                            <= r["params"][p]["hi"] for r in used], dtype=float)
            wid = np.array([r["params"][p]["hi"] - r["params"][p]["lo"] for r in used])
            stats = _param_stats(e, cov, wid)
            ref = paper.PARAMS.get(setting, {}).get(method, {}).get(p, (np.nan,) * 4)
            rows.append({"setting": setting, "protocol": protocol, "method": method,
                         "parameter": p, "subset": subset,
                         **{k: stats[k] for k in ("bias", "rmse", "rmse_se", "coverage",
                                                  "width", "replications", "bias_se",
                                                  "coverage_se", "width_se")},
                         "excluded_unconverged": len(mine) - len(used),
                         "paper_bias": ref[0], "paper_rmse": ref[1], "paper_coverage": ref[2],
                         "paper_width": ref[3]})
    return pd.DataFrame(rows)


def replication_paired_table(runs: list[dict[str, Any]], setting: str, protocol: str,
                 subset: str = "converged", n_boot: int = 2000) -> pd.DataFrame:
    by = {(r["method"], r["rep"]): r for r in runs}
    ok = [r for r in runs if r["converged"] or subset == "all"]
    reps = sorted({r["rep"] for r in ok if r["method"] == "koh"}
                  & {r["rep"] for r in ok if r["method"] == "mos"})
    all_reps = sorted({r["rep"] for r in runs})
    rows = []
    if not reps:
        return pd.DataFrame()
    g = np.random.default_rng(20261203)
    boot = g.integers(0, len(reps), size=(n_boot, len(reps)))
    for p in by[("koh", reps[0])]["params"]:
        ek = np.array([by[("koh", r)]["params"][p]["mean"] - by[("koh", r)]["params"][p]["truth"]
                       for r in reps])
        em = np.array([by[("mos", r)]["params"][p]["mean"] - by[("mos", r)]["params"][p]["truth"]
                       for r in reps])
        n = len(reps)
        d2 = em**2 - ek**2
        rk, rm = np.sqrt(np.mean(ek**2)), np.sqrt(np.mean(em**2))
        bdiff = np.sqrt(np.mean(em[boot] ** 2, axis=1)) - np.sqrt(np.mean(ek[boot] ** 2, axis=1))
        pk = paper.PARAMS.get(setting, {}).get("koh", {}).get(p, (np.nan,) * 4)[1]
        pm = paper.PARAMS.get(setting, {}).get("mos", {}).get(p, (np.nan,) * 4)[1]
        rows.append({"setting": setting, "protocol": protocol, "parameter": p,
                     "subset": subset, "rmse_koh": rk, "rmse_mos": rm, "rmse_diff": rm - rk,
                     "rmse_diff_se": float(bdiff.std(ddof=1)),
                     "mse_diff": float(d2.mean()),
                     "mse_diff_se": float(d2.std(ddof=1) / np.sqrt(n)) if n > 1 else np.nan,
                     "mos_smaller_error_share": float(np.mean(np.abs(em) < np.abs(ek))),
                     "replications": n, "excluded_unconverged": len(all_reps) - n,
                     "paper_rmse_diff": pm - pk})
    return pd.DataFrame(rows)


def replication_output_table(runs: list[dict[str, Any]], setting: str, protocol: str,
                 subset: str = "converged") -> pd.DataFrame:
    rows = []
    for method in REPLICATION_METHODS:
        used = [r for r in runs if r["method"] == method and r["output"]
                and (r["converged"] or subset == "all")]
        mine = [r for r in runs if r["method"] == method]
        ref = paper.OUTPUT.get(setting, {}).get(method, (np.nan,) * 4)
        row: dict[str, Any] = {"setting": setting, "protocol": protocol, "method": method,
                               "subset": subset}
        for i, k in enumerate(("rmse", "bias", "coverage", "width")):
            v = np.array([r["output"][k] for r in used])
            row[k] = float(v.mean()) if len(v) else np.nan
            row[f"{k}_se"] = float(v.std(ddof=1) / np.sqrt(len(v))) if len(v) > 1 else np.nan
            row[f"paper_{k}"] = ref[i]
        row["replications"] = len(used)
        row["excluded_unconverged"] = len(mine) - len(used)
        rows.append(row)
    return pd.DataFrame(rows)
