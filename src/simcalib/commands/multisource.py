"""CLI verbs of the multi-source (iPro-NC) stage.

``ms-data``    generate a case's data table, its problem declaration and theta^MSE
``ms-fit``     fit iPro-NC for one scenario over several seeds; write theta-hat
               summaries, posterior draws, RRMSE, predictions, latents, history
``ms-lsq``     baseline: direct least squares of each LF model against the HF data
``ms-report``  gather a case's scenarios into the paper's tables and figures
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simcalib import io, timing
from simcalib.commands._common import add_params_arg, add_seed_arg, load_params
from simcalib.errors import ConfigError, DataError
from simcalib.seeds import int_seed, rng

log = logging.getLogger("simcalib.multisource")

CASES = ("analytic", "hardening")
FIT_FILES = ("theta.csv", "theta_seeds.csv", "posterior.csv", "rrmse.csv", "predictions.csv",
             "latent.csv", "history.csv", "models.pt", "fit.json")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ms-data", help="generate a multi-source case's data, declaration "
                                       "and theta^MSE")
    p.add_argument("--case", choices=CASES, required=True)
    add_params_arg(p, "the case's data settings (multisource.<case>.data)")
    add_seed_arg(p)
    p.add_argument("--data", required=True, help="output: long data table (CSV)")
    p.add_argument("--spec", required=True, help="output: problem declaration (JSON)")
    p.add_argument("--theta-mse", required=True, help="output: theta^MSE table (CSV)")
    p.set_defaults(func=cmd_data)

    p = sub.add_parser("ms-fit", help="fit iPro-NC on one scenario over several seeds")
    p.add_argument("--case", required=True, help="case label used in seeds and logs")
    p.add_argument("--scenario", required=True)
    add_params_arg(p, "{fit: ..., sources: [...], theta?: {...}, max_input?: {...}, "
                      "fix?: [...]}")
    add_seed_arg(p)
    p.add_argument("--data", required=True)
    p.add_argument("--spec", required=True)
    p.add_argument("--theta-mse", required=True)
    p.add_argument("--fixed", help="theta.csv of an earlier step: its means fix the "
                                   "parameters listed in params.fix")
    p.add_argument("--outdir", required=True, help=f"writes {', '.join(FIT_FILES)}")
    p.add_argument("--threads", type=int, default=1)
    p.set_defaults(func=cmd_fit)

    p = sub.add_parser("ms-lsq", help="baseline: least squares of each LF model vs HF data")
    p.add_argument("--case", choices=CASES, required=True)
    add_params_arg(p, "the case's data settings (multisource.<case>.data)")
    add_seed_arg(p)
    p.add_argument("--data", required=True)
    p.add_argument("--output", required=True)
    p.set_defaults(func=cmd_lsq)

    p = sub.add_parser("ms-report", help="tables and figures of a multi-source case")
    p.add_argument("--case", choices=CASES, required=True)
    p.add_argument("--fits", nargs="+", required=True,
                   help="fit directories; the last two path parts name step/scenario")
    p.add_argument("--theta-mse", required=True)
    p.add_argument("--lsq", required=True)
    p.add_argument("--outdir", required=True)
    p.set_defaults(func=cmd_report)


# --------------------------------------------------------------------------- ms-data
def cmd_data(args: argparse.Namespace) -> int:
    params = load_params(args.params)
    g = rng(args.seed, "multisource", args.case, "data")
    if args.case == "analytic":
        from simcalib.multisource import analytic as A

        df = A.generate(params["n_train"], params["val_fraction"], params["n_test"],
                        params["noise_var"], g)
        spec = A.problem()
        rows = []
        for src in ("s1", "s2"):
            t = A.theta_mse(src)
            rows += [{"source": src, "parameter": k, "theta_mse": t[k],
                      "theta_ref": np.nan, "objective": t["objective"]} for k in A.THETA[src]]
        mse = pd.DataFrame(rows)
    else:
        from simcalib.multisource import hardening as H

        t0 = time.perf_counter()
        df = H.generate(params, g)
        log.info("hardening data: %d rows in %.1f s", len(df), time.perf_counter() - t0)
        spec = H.problem()
        mse = H.theta_mse(params, rng(args.seed, "multisource", args.case, "theta_mse"))
    timing.write_csv(df, args.data)
    io.write_json(spec.to_dict(), args.spec)
    timing.write_csv(mse, args.theta_mse)
    return 0


# --------------------------------------------------------------------------- ms-fit
def _scenario_spec(spec_d: dict, params: dict[str, Any]):
    from simcalib.multisource.problem import ProblemSpec

    spec = ProblemSpec.from_dict(spec_d)
    for src, names in (params.get("theta") or {}).items():
        try:
            spec.source(src).theta = list(names)
        except KeyError:
            raise ConfigError(f"theta.{src}", f"no source '{src}' in the problem "
                                              f"({[s.name for s in spec.sources]})") from None
    sources = params.get("sources")
    if not sources:
        raise ConfigError("sources", "list the sources of the scenario")
    unknown = [s for s in sources if s not in [x.name for x in spec.sources]]
    if unknown:
        raise ConfigError("sources", f"unknown source(s) {unknown}; "
                                     f"the problem has {[s.name for s in spec.sources]}")
    sub = spec.subset(list(sources))
    sub.check("scenario")
    return sub


def _theta_ref(path: str) -> dict[str, dict[str, float]]:
    t = io.read_csv(path, required=["source", "parameter", "theta_mse"])
    out: dict[str, dict[str, float]] = {}
    for r in t.itertuples():
        out.setdefault(r.source, {})[r.parameter] = float(r.theta_mse)
    return out


def cmd_fit(args: argparse.Namespace) -> int:
    import torch

    from simcalib.multisource import readout as R
    from simcalib.multisource.problem import check_frame
    from simcalib.multisource.training import FitSettings, fit_one

    torch.set_num_threads(max(1, args.threads))
    params = load_params(args.params)
    st = FitSettings.from_dict(params.get("fit"), "fit")
    spec = _scenario_spec(io.read_json(args.spec), params)
    df = check_frame(io.read_csv(args.data), spec, args.data)
    for col, vmax in (params.get("max_input") or {}).items():
        if col not in spec.x:
            raise ConfigError(f"max_input.{col}", f"not an input column ({spec.x})")
        df = df[df[col] <= vmax + 1e-12].reset_index(drop=True)
    fixed: dict[str, dict[str, float]] = {}
    if params.get("fix"):
        if not args.fixed:
            raise ConfigError("fix", "parameters to fix need --fixed THETA_CSV")
        prev = io.read_csv(args.fixed, required=["source", "parameter", "mean"])
        for s in spec.lf:
            for t in params["fix"]:
                if t not in s.theta:
                    continue
                v = prev[(prev.source == s.name) & (prev.parameter == t)]["mean"]
                if v.empty:
                    raise DataError(args.fixed, f"no mean for {s.name}.{t} to fix")
                fixed.setdefault(s.name, {})[t] = float(v.iloc[0])
    train, val = df[df.split == "train"], df[df.split == "val"]
    test = df[df.split == "test"]
    results = []
    for k in range(st.n_seeds):
        s = int_seed(args.seed, "multisource", args.case, args.scenario, "fit", k)
        label = f"{args.case}/{args.scenario} seed {k + 1}/{st.n_seeds}"
        res = fit_one(train, val, spec, st, s, fixed=fixed, label=label)
        log.info("%s: %.1f s", label, res.seconds)
        results.append(res)
    g = torch.Generator().manual_seed(int_seed(args.seed, "multisource", args.case,
                                               args.scenario, "readout") % 2**62)
    per_seed = max(1, st.n_posterior // st.n_seeds)
    samples = pd.concat([R.theta_samples(r, per_seed, g) for r in results], ignore_index=True)
    dparams = pd.concat([R.distribution_params(r) for r in results], ignore_index=True)
    ref = _theta_ref(args.theta_mse)
    theta = R.theta_summary(samples, dparams, [r.seconds for r in results], ref)
    tm = io.read_csv(args.theta_mse)
    if "theta_ref" in tm.columns:
        theta = theta.merge(tm[["source", "parameter", "theta_ref"]],
                            on=["source", "parameter"], how="left")
    theta["fit_cpu_seconds"] = float(np.mean([r.cpu_seconds for r in results]))
    theta.insert(0, "scenario", args.scenario)
    preds = [x.name for x in spec.sources]
    theta_for = {x.name: "calibrated" for x in spec.lf}
    rr = R.rrmse_table(results, test, spec, preds, theta_for)
    rr.insert(0, "scenario", args.scenario)
    hf = test[test.source == spec.hf.name].reset_index(drop=True)
    pcols: dict[str, np.ndarray] = {}
    for p in preds:
        ms = [R.predict(r, hf, p, theta_for.get(p, "data")) for r in results]
        mean = np.mean([m for m, _ in ms], axis=0)
        sd = np.sqrt(np.mean([s**2 for _, s in ms], axis=0) + np.var([m for m, _ in ms], axis=0))
        for i, c in enumerate(spec.y_cols):
            pcols[f"{p}_mean_{c}"], pcols[f"{p}_sd_{c}"] = mean[:, i], sd[:, i]
    keep = [*spec.x, *spec.y_cols] + [c for c in hf.columns if c.startswith("true_")]
    pred = pd.concat([hf[keep].reset_index(drop=True), pd.DataFrame(pcols)], axis=1)
    lat = pd.concat([R.latent_maps(r, train, 300, g) for r in results], ignore_index=True)
    hist = pd.concat([pd.DataFrame(r.history).assign(seed=r.seed) for r in results],
                     ignore_index=True)
    out = Path(args.outdir)
    timing.write_csv(theta, out / "theta.csv")
    timing.write_csv(dparams, out / "theta_seeds.csv")
    timing.write_csv(samples, out / "posterior.csv")
    timing.write_csv(rr, out / "rrmse.csv")
    timing.write_csv(pred, out / "predictions.csv")
    timing.write_csv(lat, out / "latent.csv")
    timing.write_csv(hist, out / "history.csv")
    timing.write_torch({"spec": spec.to_dict(), "settings": vars(st),
                        "models": [{"seed": r.seed, "state": r.model.state_dict(),
                                    "scaling": r.scaling.to_dict()} for r in results]},
                       out / "models.pt")
    timing.write_json({"case": args.case, "scenario": args.scenario, "sources": preds,
                   "fixed": fixed, "n_train_rows": len(train), "n_val_rows": len(val),
                   "fit_seconds": [r.seconds for r in results],
                   "fit_cpu_seconds": [r.cpu_seconds for r in results],
                   "best_epoch": [r.best_epoch for r in results],
                   "threads": args.threads, "settings": vars(st)}, out / "fit.json")
    for r in theta.itertuples():
        log.info("%s %s.%s: mean %.4g sd %.3g [%.4g, %.4g] theta_mse %.4g", args.scenario,
                 r.source, r.parameter, r.mean, r.sd, r.lower95, r.upper95, r.theta_mse)
    return 0


# --------------------------------------------------------------------------- ms-lsq
def cmd_lsq(args: argparse.Namespace) -> int:
    from simcalib.multisource import baselines as B

    params = load_params(args.params)
    df = io.read_csv(args.data, required=["source", "split"])
    hf = df[(df.source == "s0") & (df.split == "train")].reset_index(drop=True)
    g = rng(args.seed, "multisource", args.case, "lsq")
    frames = []
    if args.case == "analytic":
        from simcalib.multisource import analytic as A

        y = hf[list(A.OUTPUTS)].to_numpy(float)
        x = hf["x"].to_numpy(float)
        for src in ("s1", "s2"):
            names = A.THETA[src]
            fit = B.least_squares_fit(
                lambda th, s=src: A.f_source(s, x, th), y, [[0], [1], [2]],
                {t: A.THETA_RANGE for t in names}, B.start_points(len(names), 5, g))
            frames.append(B.to_frame(src, fit, "lsq_direct"))
    else:
        from simcalib.multisource import hardening as H

        geom = H.Geometry(n_el=int(params["n_el"]))
        u_steps = np.linspace(params["u_max"] / params["n_steps"], params["u_max"],
                              int(params["n_steps"]))
        hf = hf.sort_values(["specimen", "u"]).reset_index(drop=True)
        spec_rows = hf.drop_duplicates("specimen")
        a, b = spec_rows["a"].to_numpy(float), spec_rows["b"].to_numpy(float)
        cols = [c for grp in H.OUT_GROUPS.values() for c in grp]
        y = hf.sort_values(["specimen", "u"])[cols].to_numpy(float)
        for src in ("s1", "s2"):
            fit = H.lsq_fit(src, a, b, u_steps, geom, y,
                            B.start_points(len(H.THETA[src]), int(params["lsq_starts"]), g),
                            int(params["lsq_max_nfev"]))
            frames.append(B.to_frame(src, fit, "lsq_direct"))
    timing.write_csv(pd.concat(frames, ignore_index=True), args.output)
    return 0


# --------------------------------------------------------------------------- ms-report
def _gather(fits: list[str], name: str) -> pd.DataFrame:
    frames = []
    for d in fits:
        p = Path(d)
        t = timing.read_csv(p / name)
        t["scenario"] = p.name
        t["step"] = p.parent.name
        frames.append(t)
    return pd.concat(frames, ignore_index=True)


def _baselines(theta: pd.DataFrame, lsq: pd.DataFrame, mse: pd.DataFrame) -> pd.DataFrame:
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


def cmd_report(args: argparse.Namespace) -> int:
    from simcalib.multisource import plots

    out = Path(args.outdir)
    mse = io.read_csv(args.theta_mse, required=["source", "parameter", "theta_mse"])
    lsq = timing.read_csv(args.lsq)
    theta = _gather(args.fits, "theta.csv")
    rr = _gather(args.fits, "rrmse.csv")
    keep = ["scenario", "output", "rrmse", "rrmse_noisefree", "rrmse_seed_mean", "rrmse_seed_sd"]
    if args.case == "analytic":
        from simcalib.multisource import analytic as A

        t1 = rr[rr.predictor == "s0"]
        timing.write_csv(t1[[c for c in keep if c in t1.columns]], out / "rrmse.csv")
        lf = rr[rr.predictor != "s0"]
        timing.write_csv(lf[["scenario", "predictor"] + [c for c in keep[1:] if c in lf.columns]],
                     out / "rrmse_lf.csv")
        timing.write_csv(theta.drop(columns=["step"]), out / "theta_summary.csv")
        base = _baselines(theta, lsq, mse)
        timing.write_csv(base, out / "baselines.csv")
        post = _gather(args.fits, "posterior.csv").drop(columns=["step"])
        timing.write_csv(post, out / "fig2_posteriors.csv")
        plots.posteriors(post, mse, {"theta1": A.THETA_RANGE, "theta2": A.THETA_RANGE},
                         out / "fig2_posteriors.png")
        curves = []
        for d in args.fits:
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
        curves_df = pd.concat(curves, ignore_index=True)
        timing.write_csv(curves_df, out / "fig3_curves.csv")
        plots.curves(curves_df, out / "fig3_curves.png")
        lat = _gather(args.fits, "latent.csv").drop(columns=["step"])
        timing.write_csv(lat, out / "fig4_latent.csv")
        plots.latents(lat, out / "fig4_latent.png")
    else:
        t3 = theta[theta.step == "step1"].drop(columns=["step"])
        timing.write_csv(t3, out / "table3_theta_step1.csv")
        timing.write_csv(theta[theta.step == "step2"].drop(columns=["step"]),
                     out / "theta_step2.csv")
        cols = ["scenario", "predictor", "output", "rrmse", "rrmse_seed_mean", "rrmse_seed_sd"]
        timing.write_csv(rr[rr.step == "step1"][cols], out / "table4_rrmse_step1.csv")
        timing.write_csv(rr[rr.step == "step2"][cols], out / "table5_rrmse_step2.csv")
        base = _baselines(theta[theta.step == "step2"], lsq, mse)
        timing.write_csv(base, out / "baselines.csv")
        curves = []
        for d in args.fits:
            p = Path(d)
            pr = io.read_csv(p / "predictions.csv")
            first = pr[(pr["a"] == pr["a"].iloc[0]) & (pr["b"] == pr["b"].iloc[0])]
            for c in [c for c in pr.columns if c.endswith("_mean_F")]:
                curves.append(pd.DataFrame({"step": p.parent.name, "scenario": p.name,
                                            "predictor": c.split("_mean_")[0],
                                            "u": first["u"], "F_true": first["F"],
                                            "F_pred": first[c]}))
        cdf = pd.concat(curves, ignore_index=True)
        timing.write_csv(cdf, out / "fig_force.csv")
        plots.hardening_curves(cdf, out / "fig_force.png")
    return 0
