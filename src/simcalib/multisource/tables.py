"""A multi-source case's report tables, gathered from its scenario fits: the paper's
tables (RRMSE, theta), the baselines side by side, and the data behind the figures."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from simcalib import io, timing

# Paper 2's Tables 3-5 (§4.2), beside which the hardening report puts its own numbers.
# Outputs y1..y4 = ux, uy, uz (the 12 points) and F; a table row "s0 and s1" printed
# twice in Table 4 is read as s0 and s1, then s0 and s2 (the order of the other rows).
OUTS = ("ux", "uy", "uz", "F")
PAPER_TABLE3 = {("s1", "E"): (2.10e5, 8.40e3), ("s1", "nu"): (0.397, 0.011),
                ("s1", "sigma0"): (644.0, 33.2), ("s2", "E"): (2.12e5, 9.02e3),
                ("s2", "nu"): (0.397, 0.011), ("s2", "sigma0"): (767.0, 38.0)}
PAPER_TABLE4 = {
    ("s0_s1", "s0"): (0.13282, 0.11098, 0.04523, 0.26717),
    ("s0_s2", "s0"): (0.13656, 0.17898, 0.05260, 0.28243),
    ("all", "s0"): (0.03568, 0.05219, 0.02041, 0.06388),
    ("s0_s1", "s1"): (1.79507, 1.50945, 1.71485, 0.06393),
    ("all", "s1"): (0.02749, 0.04849, 0.01992, 0.07023),
    ("s0_s2", "s2"): (1.64083, 1.47877, 1.63542, 0.07674),
    ("all", "s2"): (0.02868, 0.04788, 0.02006, 0.07056)}
PAPER_TABLE5 = {
    ("s0_s1", "s0"): (0.38802, 0.62677, 0.64960, 0.79586),
    ("s0_s2", "s0"): (0.12018, 0.11422, 0.04938, 0.11286),
    ("all", "s0"): (0.24249, 0.11590, 0.07363, 0.19953),
    ("s0_s1", "s1"): (1.35483, 6.37452, 4.01805, 10.22809),
    ("all", "s1"): (1.87659, 1.40288, 1.57942, 0.02995),
    ("s0_s2", "s2"): (1.96485, 1.71372, 1.79920, 0.05350),
    ("all", "s2"): (1.89350, 1.41155, 1.59264, 0.03403)}


def with_paper_rrmse(rr: pd.DataFrame, paper: dict) -> pd.DataFrame:
    """``paper_rrmse``: the paper's value for the same scenario, predictor and output
    (NaN where the paper has none)."""
    vals = {(sc, pr, o): v for (sc, pr), row in paper.items() for o, v in zip(OUTS, row,
                                                                               strict=True)}
    return rr.assign(paper_rrmse=[vals.get(k, np.nan) for k in
                                  zip(rr.scenario, rr.predictor, rr.output, strict=True)])


def with_paper_theta(theta: pd.DataFrame) -> pd.DataFrame:
    """``paper_mean``, ``paper_sd``: Table 3 (all sources, step 1) beside each row of
    the all-sources scenario."""
    paper = np.array([PAPER_TABLE3.get((src, par), (np.nan, np.nan)) if sc == "all"
                      else (np.nan, np.nan) for sc, src, par in
                      zip(theta.scenario, theta.source, theta.parameter, strict=True)],
                     dtype=float).reshape(-1, 2)
    return theta.assign(paper_mean=paper[:, 0], paper_sd=paper[:, 1])


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
        out["table3_theta_step1.csv"] = with_paper_theta(
            theta[theta.step == "step1"].drop(columns=["step"]))
        out["theta_step2.csv"] = theta[theta.step == "step2"].drop(columns=["step"])
        cols = ["scenario", "predictor", "output", "rrmse", "rrmse_seed_mean", "rrmse_seed_sd"]
        out["table4_rrmse_step1.csv"] = with_paper_rrmse(rr[rr.step == "step1"][cols],
                                                         PAPER_TABLE4)
        out["table5_rrmse_step2.csv"] = with_paper_rrmse(rr[rr.step == "step2"][cols],
                                                         PAPER_TABLE5)
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
        out["fig_fields.csv"] = displacement_fields(fits)
    return out


def displacement_fields(fits: Sequence[str]) -> pd.DataFrame:
    """The 12 points' displacements of every HF test specimen at its last load step:
    FE value and iPro-NC's HF emulation (``t_s = s0``) side by side, per step and
    scenario (the data of the fitted-vs-FE displacement-field figure)."""
    from simcalib.multisource.hardening import OUT_GROUPS

    rows = []
    for d in fits:
        p = Path(d)
        pr = io.read_csv(p / "predictions.csv")
        last = pr[pr["u"] == pr["u"].max()]
        for g in ("ux", "uy", "uz"):
            for i, c in enumerate(OUT_GROUPS[g]):
                rows.append(pd.DataFrame({
                    "step": p.parent.name, "scenario": p.name, "component": g,
                    "point": i + 1, "a": last["a"], "b": last["b"], "u": last["u"],
                    "fe": last[f"true_{c}"], "ipronc": last[f"s0_mean_{c}"],
                    "ipronc_sd": last[f"s0_sd_{c}"]}))
    return pd.concat(rows, ignore_index=True)
