"""CLI verbs of the Bayesian ODE calibration stage (KOH vs MOS discrepancy).

``bayes-data``     simulate one replication's data (shared by KOH and MOS)
``bayes-run``      sample one (setting, method, replication): posterior.nc, summary.csv,
                   predictive.csv, run.json
``bayes-metrics``  aggregate replications: metrics.csv, output_metrics.csv, per_replication.csv
``bayes-table``    the paper's tables with our numbers beside them (CSV + markdown)
``bayes-plot``     output-UQ figure (paper Fig. 2/4/6/8/9) and posterior marginals
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simcalib import timing
from simcalib.commands._common import add_params_arg, add_seed_arg, load_params
from simcalib.errors import ConfigError, DataError
from simcalib.io import read_csv, read_json, write_csv, write_json, write_text

log = logging.getLogger(__name__)


def _options(params: dict[str, Any]) -> dict[str, Any]:
    opts = params.get("options") or {}
    if not isinstance(opts, dict):
        raise ConfigError("bayes.setting_options", "must be a mapping")
    return opts


# ----------------------------------------------------------------------------- data
def cmd_data(args: argparse.Namespace) -> int:
    from simcalib.bayes.models import make_setting
    from simcalib.bayes.synthetic import simulate
    from simcalib.seeds import rng

    params = load_params(args.params)
    setting = make_setting(args.setting, _options(params))
    sim = simulate(setting, rng(args.seed, "bayes", args.setting, "data", args.rep),
                   refine=int(params.get("refine", 10)))
    obs = pd.DataFrame(sim.obs.y, columns=sim.obs.outputs)
    obs.insert(0, "time", sim.obs.t)
    write_csv(obs, args.obs)
    dense = []
    for o, name in enumerate(sim.obs.outputs):
        dense.append(pd.DataFrame({"time": sim.dense_t, "output": name,
                                   "xi": sim.dense["xi"][:, o], "f": sim.dense["f"][:, o],
                                   "delta": sim.dense["delta"][:, o]}))
    write_csv(pd.concat(dense, ignore_index=True), args.dense)
    write_json({**sim.truth, "rep": args.rep, "seed": args.seed}, args.truth)
    log.info("simulated %s rep %d: theta*=%s", args.setting, args.rep, sim.truth["theta"])
    return 0


def read_obs(path: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``time`` column plus one column per observed state; empty cells are missing."""
    df = read_csv(path, required=["time"])
    outputs = [c for c in df.columns if c != "time"]
    if not outputs:
        raise DataError(path, "no observed-state columns besides 'time'")
    try:
        y = df[outputs].to_numpy(dtype=np.float64)
        t = df["time"].to_numpy(dtype=np.float64)
    except ValueError as exc:
        raise DataError(path, f"non-numeric values ({exc})") from None
    if not np.all(np.isfinite(t)):
        raise DataError(path, "missing or non-finite times")
    return t, y, outputs


# ----------------------------------------------------------------------------- run
def cmd_run(args: argparse.Namespace) -> int:
    from simcalib.bayes.models import make_setting
    from simcalib.bayes.posterior import build_idata, summarize, write_netcdf
    from simcalib.bayes.predict import predictive
    from simcalib.bayes.sampler import Likelihood, ObsData, SamplerConfig, run
    from simcalib.seeds import rng

    params = load_params(args.params)
    setting = make_setting(args.setting, _options(params))
    cfg = SamplerConfig.from_dict(params.get("sampler") or {})
    if cfg.chains < 2:
        log.warning("R-hat needs at least two chains; running %d", cfg.chains)
    t, y, outputs = read_obs(args.data)
    pb = Likelihood(setting, ObsData(t, y, outputs), args.method, source=args.data)
    keys = ("bayes", args.setting, args.method, args.rep)
    result = run(pb, cfg, args.seed, keys, init_keys=("bayes", args.setting, "init", args.rep))
    attrs = {"setting": args.setting, "method": args.method, "rep": int(args.rep),
             "seed": int(args.seed), "iterations": cfg.iterations, "burn_in": cfg.burn_in,
             "thin": cfg.thin}
    idata = build_idata(pb, result, attrs)
    write_netcdf(idata, args.posterior)
    summ = summarize(idata, setting.params)
    summ.insert(0, "rep", args.rep)
    summ.insert(0, "method", args.method)
    summ.insert(0, "setting", args.setting)
    write_csv(summ, args.summary)
    if args.predictive:
        t_dense = setting.dense_times(int(params.get("refine", 10)))
        t_dense = t_dense[t_dense >= setting.model.t0]
        pred = predictive(setting, idata, t_dense, int(params.get("predict_draws", 200)),
                          rng(args.seed, *keys, "predict"))
        pred.insert(0, "rep", args.rep)
        pred.insert(0, "method", args.method)
        write_csv(pred, args.predictive)
    if args.run_info:
        counters = {k: int(sum(getattr(c.counters, k) for c in result.chains))
                    for k in vars(result.chains[0].counters)}
        timing.write_json({"setting": args.setting, "method": args.method, "rep": args.rep,
                    "iterations": cfg.iterations, "chains": cfg.chains,
                    "seconds_per_chain": [c.seconds for c in result.chains],
                    "acceptance": [c.acceptance for c in result.chains],
                    "init_theta": dict(zip(setting.params, map(float, result.init["theta"]),
                                           strict=True)),
                    "ess_bulk_min": float(summ["ess_bulk"].min()),
                    "rhat_max": float(summ["r_hat"].max()), **counters}, args.run_info)
    return 0


# ----------------------------------------------------------------------------- metrics
def cmd_metrics(args: argparse.Namespace) -> int:
    from simcalib.bayes.metrics import output_metrics, output_metrics_one, parameter_metrics

    truths: dict[int, dict[str, Any]] = {}
    for path in args.truth:
        tr = read_json(path)
        if "rep" not in tr or "theta" not in tr:
            raise DataError(path, "truth file needs 'rep' and 'theta'")
        truths[int(tr["rep"])] = tr
    dense = {}
    for path in args.dense:
        tr_path = Path(path).with_name("truth.json")
        rep = int(read_json(tr_path)["rep"]) if tr_path.exists() else len(dense)
        dense[rep] = read_csv(path, required=["time", "output", "xi"])
    rows = []
    for path in args.summary:
        s = read_csv(path, required=["method", "rep", "parameter", "mean", "q2.5", "q97.5",
                                     "r_hat", "ess_bulk"])
        for _, r in s.iterrows():
            tr = truths.get(int(r["rep"]))
            if tr is None:
                raise DataError(path, f"no truth file for replication {r['rep']}")
            if r["parameter"] in tr["theta"]:
                rows.append({**r.to_dict(), "truth": float(tr["theta"][r["parameter"]])})
    if not rows:
        raise DataError(str(args.summary[0]) if args.summary else "--summary", "no summaries")
    per_rep = pd.DataFrame(rows)
    write_csv(parameter_metrics(per_rep), args.metrics)
    write_csv(per_rep, args.per_rep)
    out_rows = []
    for path in args.predictive:
        p = read_csv(path, required=["method", "rep", "time", "output", "xi_mean", "xi_lo",
                                     "xi_hi"])
        rep = int(p["rep"].iloc[0])
        if rep not in dense:
            raise DataError(path, f"no dense truth for replication {rep}")
        out_rows.append({"method": p["method"].iloc[0], "rep": rep,
                         **output_metrics_one(p, dense[rep])})
    if out_rows:
        write_csv(output_metrics(pd.DataFrame(out_rows)), args.output_metrics)
    else:
        write_csv(pd.DataFrame(columns=["method", "rmse", "bias", "coverage", "width",
                                        "replications"]), args.output_metrics)
    return 0


# ----------------------------------------------------------------------------- tables
def cmd_table(args: argparse.Namespace) -> int:
    from simcalib.bayes import paper
    from simcalib.bayes.metrics import output_table, parameter_table, to_markdown

    met = read_csv(args.metrics, required=["method", "parameter", "bias", "rmse", "coverage",
                                           "width", "replications"])
    out = read_csv(args.output_metrics, required=["method", "rmse", "bias", "coverage", "width"])
    t1, t2 = paper.TABLES.get(args.setting, (None, None))
    pt = parameter_table(args.setting, met)
    ot = output_table(args.setting, out)
    write_csv(pt, args.out_params)
    write_csv(ot, args.out_output)
    reps = int(met["replications"].max()) if len(met) else 0
    note = (f"Ours: {reps} replication(s); paper: 100 replications. "
            "paper_* columns are the paper's numbers.\n\n")
    title1 = f"{args.setting}: parameters" + (f" (paper Table {t1})" if t1 else "")
    title2 = f"{args.setting}: output" + (f" (paper Table {t2})" if t2 else "")
    write_text(to_markdown(pt, title1) + "\n" + note, Path(args.out_params).with_suffix(".md"))
    write_text(to_markdown(ot, title2) + "\n" + note, Path(args.out_output).with_suffix(".md"))
    return 0


# ----------------------------------------------------------------------------- plots
def cmd_plot(args: argparse.Namespace) -> int:
    from simcalib.bayes.plots import marginals_figure, output_uq_figure

    preds = [read_csv(p, required=["method", "time", "output", "xi_mean"]) for p in args.predictive]
    t, y, outputs = read_obs(args.data)
    dense = read_csv(args.dense, required=["time", "output", "xi"])
    truth = read_json(args.truth)
    pred = pd.concat(preds, ignore_index=True)
    write_csv(pred, Path(args.out_uq).with_suffix(".csv"))
    output_uq_figure(args.setting, pred, t, y, outputs, dense, args.out_uq)
    marg = marginals_figure(args.setting, args.posterior, truth, args.out_marginals)
    write_csv(marg, Path(args.out_marginals).with_suffix(".csv"))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bayes-data", help="simulate one replication of a Bayesian ODE setting")
    add_params_arg(p, "{options: setting_options[setting], refine: int}")
    add_seed_arg(p)
    p.add_argument("--setting", required=True)
    p.add_argument("--rep", type=int, required=True)
    p.add_argument("--obs", required=True, help="CSV: time + one column per observed state")
    p.add_argument("--dense", required=True, help="CSV: true process xi = f + delta, dense grid")
    p.add_argument("--truth", required=True, help="JSON: theta*, gamma*, ell*, noise variance")
    p.set_defaults(func=cmd_data)

    p = sub.add_parser("bayes-run", help="KOH or MOS calibration of one data set (MCMC)")
    add_params_arg(p, "{sampler: {...}, options: {...}, refine: int, predict_draws: int}")
    add_seed_arg(p)
    p.add_argument("--setting", required=True)
    p.add_argument("--method", required=True, choices=["koh", "mos"])
    p.add_argument("--rep", type=int, default=0)
    p.add_argument("--data", required=True, help="obs.csv: time + one column per observed state")
    p.add_argument("--posterior", required=True, help="ArviZ netCDF output")
    p.add_argument("--summary", required=True, help="CSV: mean, quantiles, ESS, R-hat")
    p.add_argument("--predictive", help="CSV: predicted process on the dense grid")
    p.add_argument("--run-info", help="JSON: timing, acceptance, counters")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("bayes-metrics", help="aggregate replications into metrics tables")
    p.add_argument("--setting", required=True)
    p.add_argument("--truth", nargs="+", required=True)
    p.add_argument("--dense", nargs="*", default=[])
    p.add_argument("--summary", nargs="+", required=True)
    p.add_argument("--predictive", nargs="*", default=[])
    p.add_argument("--metrics", required=True)
    p.add_argument("--output-metrics", required=True)
    p.add_argument("--per-rep", required=True)
    p.set_defaults(func=cmd_metrics)

    p = sub.add_parser("bayes-table", help="paper tables with our numbers beside them")
    p.add_argument("--setting", required=True)
    p.add_argument("--metrics", required=True)
    p.add_argument("--output-metrics", required=True)
    p.add_argument("--out-params", required=True)
    p.add_argument("--out-output", required=True)
    p.set_defaults(func=cmd_table)

    p = sub.add_parser("bayes-plot", help="output-UQ and posterior-marginal figures")
    p.add_argument("--setting", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--dense", required=True)
    p.add_argument("--truth", required=True)
    p.add_argument("--predictive", nargs="+", required=True)
    p.add_argument("--posterior", nargs="+", required=True)
    p.add_argument("--out-uq", required=True)
    p.add_argument("--out-marginals", required=True)
    p.set_defaults(func=cmd_plot)
