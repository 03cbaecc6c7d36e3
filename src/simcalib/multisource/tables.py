"""A multi-source case's report tables, gathered from its scenario fits: the paper's
tables (RRMSE, theta), the baselines side by side, and the data behind the figures."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from simcalib import io, timing


def gather(fits: list[str], name: str) -> pd.DataFrame:
    frames = []
    for d in fits:
        p = Path(d)
        t = timing.read_csv(p / name)
        t["scenario"] = p.name
        t["step"] = p.parent.name
        frames.append(t)
    return pd.concat(frames, ignore_index=True)


def baselines(theta: pd.DataFrame, lsq: pd.DataFrame, mse: pd.DataFrame) -> pd.DataFrame:
    """iPro-NC with all sources, iPro-NC bi-fidelity (s0 + that source), direct least
    squares and theta^MSE, side by side per (source, parameter)."""
    cols = ["source", "parameter", "mean", "sd", "lower95", "upper95", "fit_seconds"]
    parts = []
    allsrc = theta[theta.scenario == "all"][cols].assign(method="ipronc_all")
    parts.append(allsrc)
    for src in theta.source.unique():
        bi = theta[(theta.scenario == f"s0_{src}") & (theta.source == src)][cols]
        parts.append(bi.assign(method="ipronc_bifidelity"))
    parts.append(lsq[cols].assign(method="lsq_direct"))
    parts.append(mse[["source", "parameter", "theta_mse"]].rename(columns={"theta_mse": "mean"})
                 .assign(method="theta_mse"))
    out = pd.concat(parts, ignore_index=True)
    ref = mse.set_index(["source", "parameter"])["theta_mse"]
    out["abs_error"] = [abs(m - ref.get((s, p), np.nan))
                        for s, p, m in zip(out.source, out.parameter, out["mean"], strict=True)]
    out["covers_theta_mse"] = [
        bool(lo <= ref.get((s, p), np.nan) <= hi) if np.isfinite(lo) else np.nan
        for s, p, lo, hi in zip(out.source, out.parameter, out.lower95.fillna(np.nan),
                                out.upper95.fillna(np.nan), strict=True)]
    order = {"ipronc_all": 0, "ipronc_bifidelity": 1, "lsq_direct": 2, "theta_mse": 3}
    out["_o"] = out["method"].map(order)
    return (out.sort_values(["source", "parameter", "_o"]).drop(columns="_o")
            [["source", "parameter", "method", "mean", "sd", "lower95", "upper95",
              "abs_error", "covers_theta_mse", "fit_seconds"]])


def case_tables(case: str, fits: Sequence[str], mse: pd.DataFrame, lsq: pd.DataFrame
                ) -> dict[str, pd.DataFrame]:
    """File name -> table of a case's report (figures are drawn from these tables)."""
    theta = gather(fits, "theta.csv")
    rr = gather(fits, "rrmse.csv")
    keep = ["scenario", "output", "rrmse", "rrmse_noisefree", "rrmse_seed_mean", "rrmse_seed_sd"]
    out: dict[str, pd.DataFrame] = {}
    if case == "analytic":
        from simcalib.multisource import analytic as A

        t1 = rr[rr.predictor == "s0"]
        out["rrmse.csv"] = t1[[c for c in keep if c in t1.columns]]
        lf = rr[rr.predictor != "s0"]
        out["rrmse_lf.csv"] = lf[["scenario", "predictor"] + [c for c in keep[1:]
                                                               if c in lf.columns]]
        out["theta_summary.csv"] = theta.drop(columns=["step"])
        out["baselines.csv"] = baselines(theta, lsq, mse)
        out["fig2_posteriors.csv"] = gather(fits, "posterior.csv").drop(columns=["step"])
        curves = []
        for d in fits:
            scen = Path(d).name
            pr = io.read_csv(Path(d) / "predictions.csv")
            th = theta[theta.scenario == scen]
            for src in th.source.unique():
                tmean = {r.parameter: r.mean for r in th[th.source == src].itertuples()}
                formula = A.f_source(src, pr["x"].to_numpy(), tmean)
                for i, o in enumerate(A.OUTPUTS):
                    curves.append(pd.DataFrame({
                        "scenario": scen, "source": src, "output": o, "x": pr["x"],
                        "hf_true": pr[f"true_{o}"], "ipronc_mean": pr[f"{src}_mean_{o}"],
                        "ipronc_sd": pr[f"{src}_sd_{o}"], "lf_formula": formula[:, i]}))
        out["fig3_curves.csv"] = pd.concat(curves, ignore_index=True)
        out["fig4_latent.csv"] = gather(fits, "latent.csv").drop(columns=["step"])
    else:
        out["table3_theta_step1.csv"] = theta[theta.step == "step1"].drop(columns=["step"])
        out["theta_step2.csv"] = theta[theta.step == "step2"].drop(columns=["step"])
        cols = ["scenario", "predictor", "output", "rrmse", "rrmse_seed_mean", "rrmse_seed_sd"]
        out["table4_rrmse_step1.csv"] = rr[rr.step == "step1"][cols]
        out["table5_rrmse_step2.csv"] = rr[rr.step == "step2"][cols]
        out["baselines.csv"] = baselines(theta[theta.step == "step2"], lsq, mse)
        curves = []
        for d in fits:
            p = Path(d)
            pr = io.read_csv(p / "predictions.csv")
            first = pr[(pr["a"] == pr["a"].iloc[0]) & (pr["b"] == pr["b"].iloc[0])]
            for c in [c for c in pr.columns if c.endswith("_mean_F")]:
                curves.append(pd.DataFrame({"step": p.parent.name, "scenario": p.name,
                                            "predictor": c.split("_mean_")[0],
                                            "u": first["u"], "F_true": first["F"],
                                            "F_pred": first[c]}))
        out["fig_force.csv"] = pd.concat(curves, ignore_index=True)
    return out
