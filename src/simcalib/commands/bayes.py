"""CLI verbs of the Bayesian ODE calibration stage (KOH vs MOS discrepancy).

``bayes-data``     simulate one replication's data (shared by KOH and MOS)
``bayes-run``      sample one (setting, method, replication) or one real data set:
                   posterior.nc, summary.csv, predictive.csv, run.json
``bayes-metrics``  aggregate replications: metrics.csv, output_metrics.csv, per_replication.csv
``bayes-table``    the paper's tables with our numbers beside them (CSV + markdown)
``bayes-plot``     output-UQ figure (data, model-only and discrepancy-corrected bands; the
                   true process and posterior marginals only when a truth is known)
``bayes-diagnostics``  trace, rank and pair plots of one posterior
``bayes-compare``  KOH and MOS side by side on one real data set (+ predictive check)
``bayes-run-batch``  a block of replications of the replication study (paper 3 at scale):
                   sampled as lanes of one lock-step program, one record per replication
``bayes-replication-tables``  the replication study's tables (both subsets), paired
                   KOH-vs-MOS differences with standard errors, meta.json and the figure
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from simcalib import timing
from simcalib.commands._common import (
    add_params_or_config,
    config_from_args,
    load_params,
    seed_from_args,
)
from simcalib.errors import ConfigError, DataError
from simcalib.io import read_csv, read_json, write_csv, write_json, write_text

if TYPE_CHECKING:     # the bayes modules load with the verb that needs them (start-up)
    from simcalib.bayes.convergence import Convergence
    from simcalib.bayes.settings import JobSettings

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- data
def cmd_data(args: argparse.Namespace) -> int:
    from simcalib.bayes.models import build_setting
    from simcalib.bayes.numerics import numeric_events
    from simcalib.bayes.synthetic import simulate
    from simcalib.seeds import rng

    job = _job(args, "data")
    args.seed = seed_from_args(args)
    if "data" in job.options:
        raise ConfigError(f"bayes.setting_options.{args.setting}.data",
                          "a real-data setting has no simulated replications: fit its data "
                          "with bayes-run --data FILE")
    setting = build_setting(args.setting, job.options, dirs=job.search_dirs)
    with numeric_events(f"{args.setting} data rep {args.rep}"):
        sim = simulate(setting, rng(args.seed, "bayes", args.setting, "data", args.rep),
                       refine=job.refine)
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


def _obs_matrix(path: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    from simcalib.bayes.data import read_obs

    obs, _ = read_obs(path)
    return obs.t, obs.y, obs.outputs


# ----------------------------------------------------------------------------- run
def cmd_run(args: argparse.Namespace) -> int:
    from simcalib.bayes.fit import fit_ode
    from simcalib.bayes.posterior import write_netcdf

    job = _job(args, "run")
    args.seed = seed_from_args(args)
    truth = read_json(args.truth) if args.truth else None
    res = fit_ode(args.setting, job, args.data, args.method, args.seed, args.rep,
                  predict=bool(args.predictive), truth=truth)
    write_netcdf(res.idata, args.posterior)
    summ = res.summary.copy()
    summ.insert(0, "rep", args.rep)
    summ.insert(0, "method", args.method)
    summ.insert(0, "setting", args.setting)
    write_csv(summ, args.summary)
    if args.predictive and res.predictive is not None:
        pred = res.predictive.copy()
        pred.insert(0, "rep", args.rep)
        pred.insert(0, "method", args.method)
        write_csv(pred, args.predictive)
    if args.run_info:
        timing.write_json(res.info, args.run_info)
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
        s = read_csv(path, required=["method", "rep", "parameter", "mean", "lower95",
                                     "upper95", "r_hat", "ess_bulk"])
        for _, r in s.iterrows():
            tr = truths.get(int(r["rep"]))
            if tr is None:
                raise DataError(path, f"no truth file for replication {r['rep']}")
            if r["parameter"] in tr["theta"]:
                rows.append({**r.to_dict(), "truth": float(tr["theta"][r["parameter"]])})
    if not rows:
        raise DataError(str(args.summary[0]) if args.summary else "--summary", "no summaries")
    per_rep = pd.DataFrame(rows)
    write_csv(parameter_metrics(per_rep, args.exclude_unconverged), args.metrics)
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


# ----------------------------------------------------------------------------- replication study
def cmd_run_batch(args: argparse.Namespace) -> int:
    from simcalib.bayes.replication import parse_reps, run_block
    from simcalib.bayes.settings import ReplicationSettings

    params = load_params(args.params)
    rs = ReplicationSettings.from_params(params)
    try:
        reps = parse_reps(args.reps)
    except ValueError as exc:
        raise ConfigError("--reps", str(exc)) from None
    records = run_block(args.setting, args.protocol, args.method, reps, rs.sampler,
                        seed_from_args(args), output=rs.output_metrics,
                        convergence=rs.convergence, refine=rs.refine,
                        predict_draws=rs.predict_draws)
    write_json({"params": params, "seed": seed_from_args(args), "records": records},
               args.output)
    bad = sum(not r["converged"] for r in records)
    print(f"{args.setting} {args.protocol} {args.method} replications {args.reps}: "
          f"{len(records)} runs, {bad} not converged, "
          f"{records[0]['cpu_total'] * len(records):.0f} CPU s -> {args.output}")
    if bad:
        log.warning("%s %s %s: %d of %d chain sets NOT converged (R-hat/ESS outside the "
                    "thresholds): the 'converged' tables leave them out, counted",
                    args.setting, args.protocol, args.method, bad, len(records))
    return 0


def _read_records(paths: list[str]) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    for path in paths:
        blob = read_json(path)
        if "records" not in blob:
            raise DataError(path, "not a bayes-run-batch file (no 'records')")
        runs.extend(blob["records"])
    return runs


def _replication_tables(mine: list[dict[str, Any]], s: str, proto: str) -> dict[str, Any]:
    """One setting and protocol's parameter, paired and output tables (both subsets)."""
    from simcalib.bayes.metrics import (
        SUBSETS,
        replication_output_table,
        replication_paired_table,
        replication_param_table,
    )

    return {name: pd.concat([fn(mine, s, proto, sub) for sub in SUBSETS], ignore_index=True)
            for name, fn in (("params", replication_param_table),
                             ("paired", replication_paired_table),
                             ("output", replication_output_table))}


def _replication_meta(mine: list[dict[str, Any]], s: str, proto: str,
                      args: argparse.Namespace, params: dict[str, Any],
                      conv: Convergence) -> dict[str, Any]:
    """meta.json of one setting and protocol: counts, cost and how it was made."""
    methods = sorted({r["method"] for r in mine})
    cpu = {m: [r["cpu_total"] for r in mine if r["method"] == m] for m in methods}
    return {"made_by": args.made_by, "setting": s, "protocol": proto,
            "replications": len({r["rep"] for r in mine}),
            "sampler": params["sampler"], "seed": args.seed,
            "convergence_thresholds": {"r_hat": conv.r_hat, "ess_bulk": conv.ess_bulk},
            "unconverged": {m: sum(not r["converged"] for r in mine if r["method"] == m)
                            for m in methods},
            "cpu_seconds_per_run_mean": {m: float(np.mean(v)) for m, v in cpu.items()},
            "cpu_seconds_total": float(sum(sum(v) for v in cpu.values())),
            "batched_runs_max": max(int(r["batched_runs"]) if "batched_runs" in r else 1
                                    for r in mine)}


def cmd_replication_tables(args: argparse.Namespace) -> int:
    from simcalib.bayes.metrics import apply_convergence_rule
    from simcalib.bayes.plots import fig_paired_differences
    from simcalib.bayes.settings import ReplicationSettings

    params = load_params(args.params)
    conv = ReplicationSettings.from_params(params).convergence
    runs = apply_convergence_rule(_read_records(args.records), conv.r_hat, conv.ess_bulk)
    out_dir = Path(args.output_dir)
    all_paired = []
    groups = dict.fromkeys((r["setting"], r["protocol"]) for r in runs)
    for s, proto in groups:
        mine = [r for r in runs if r["setting"] == s and r["protocol"] == proto]
        stem = f"bayes_{s}_{proto}"
        tables = _replication_tables(mine, s, proto)
        for name, df in tables.items():
            write_csv(df, out_dir / f"{stem}_{name}.csv")
        all_paired.append(tables["paired"])
        write_json(_replication_meta(mine, s, proto, args, params, conv),
                   out_dir / f"{stem}_meta.json")
        n_bad = sum(not r["converged"] for r in mine)
        if n_bad:
            log.warning("%s %s: %d of %d chain sets not converged (R-hat > %g or bulk ESS < "
                        "%g): left out of the 'converged' rows, counted in "
                        "excluded_unconverged", s, proto, n_bad, len(mine), conv.r_hat,
                        conv.ess_bulk)
    paired = [p for p in all_paired if len(p)]
    if args.figure and paired:
        fig_paired_differences(pd.concat(paired, ignore_index=True), args.figure)
    total = sum(r["cpu_total"] for r in runs)
    print(f"{len(groups)} setting/protocol table sets from {len(runs)} runs "
          f"({total:.0f} CPU s of sampling and output metrics) -> {out_dir}")
    return 0


# ----------------------------------------------------------------------------- tables
def cmd_table(args: argparse.Namespace) -> int:
    from simcalib.bayes import paper
    from simcalib.bayes.metrics import (
        convergence_note,
        output_table,
        parameter_table,
        to_markdown,
    )

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
            "paper_* columns are the paper's numbers.\n\n" + convergence_note(met))
    title1 = f"{args.setting}: parameters" + (f" (paper Table {t1})" if t1 else "")
    title2 = f"{args.setting}: output" + (f" (paper Table {t2})" if t2 else "")
    write_text(to_markdown(pt, title1) + "\n" + note, Path(args.out_params).with_suffix(".md"))
    write_text(to_markdown(ot, title2) + "\n" + note, Path(args.out_output).with_suffix(".md"))
    return 0


# ----------------------------------------------------------------------------- plots
def _flags(summaries: list[str]) -> dict[str, str]:
    """Per method, "NOT CONVERGED" when its summary says so."""
    out = {}
    for path in summaries:
        s = read_csv(path, required=["method", "converged"])
        if not s["converged"].astype(bool).all():
            out[str(s["method"].iloc[0])] = "NOT CONVERGED"
    return out


def cmd_plot(args: argparse.Namespace) -> int:
    from simcalib.bayes.plots import marginals_figure, output_uq_figure

    preds = [read_csv(p, required=["method", "time", "output", "xi_mean"]) for p in args.predictive]
    t, y, outputs = _obs_matrix(args.data)
    if (args.dense is None) != (args.truth is None):
        raise ConfigError("bayes-plot", "give both --dense and --truth (synthetic data) or "
                          "neither (real data: no truth is drawn)")
    dense = read_csv(args.dense, required=["time", "output", "xi"]) if args.dense else None
    pred = pd.concat(preds, ignore_index=True)
    write_csv(pred, Path(args.out_uq).with_suffix(".csv"))
    output_uq_figure(args.setting, pred, t, y, outputs, dense, args.out_uq,
                     flags=_flags(args.summary or []))
    if args.out_marginals:
        if args.truth is None:
            raise ConfigError("--output-marginals", "posterior marginals against the truth need "
                              "--truth; real data have none (see bayes-diagnostics)")
        marg = marginals_figure(args.setting, args.posterior, read_json(args.truth),
                                args.out_marginals)
        write_csv(marg, Path(args.out_marginals).with_suffix(".csv"))
    return 0


def cmd_diagnostics(args: argparse.Namespace) -> int:
    from simcalib.bayes.models import HYPER
    from simcalib.bayes.plots import pair_figure, rank_figure, trace_figure
    from simcalib.bayes.posterior import read_netcdf, run_attrs

    idata = read_netcdf(args.posterior)
    attrs = run_attrs(idata)
    params = [p for p in str(attrs.get("parameters", "")).split(",") if p]
    if not params:
        raise DataError(args.posterior, "no 'parameters' attribute: not a bayes-run posterior")
    names = [*params, *HYPER.values()]
    title = f"{attrs.get('setting', '')} {str(attrs.get('method', '')).upper()}"
    trace_figure(idata, names, title + ": traces", args.out_trace)
    rank_figure(idata, names, title + ": rank histograms per chain", args.out_rank)
    pair_figure(idata, params, title + ": physical parameters", args.out_pair)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from simcalib.bayes.metrics import comparison_table, predictive_check, to_markdown

    summaries = {}
    for path in args.summary:
        s = read_csv(path, required=["method", "parameter", "mean", "lower95", "upper95",
                                     "r_hat", "ess_bulk", "converged"])
        summaries[str(s["method"].iloc[0])] = s
    table = comparison_table(summaries)
    write_csv(table, args.out_params)
    t, y, outputs = _obs_matrix(args.data)
    preds = pd.concat([read_csv(p, required=["method", "time", "output", "xi_lo", "xi_hi",
                                             "y_lo", "y_hi"]) for p in args.predictive],
                      ignore_index=True)
    ppc = predictive_check(preds, t, y, outputs)
    write_csv(ppc, args.out_output)
    bad = [m for m, s in summaries.items() if not s["converged"].astype(bool).all()]
    trust = (f"**WARNING: not converged: {', '.join(m.upper() for m in bad)}** (R-hat or "
             "bulk ESS outside thresholds; see the *_converged columns); do not trust "
             "these numbers before running longer chains.\n\n" if bad else
             "Convergence: every parameter of every method converged.\n\n")
    note = (f"Real data ({args.data}): the truth is unknown, so there is no bias, RMSE or "
            "coverage of parameters; the predictive check below compares with the data.\n\n")
    write_text(to_markdown(table, f"{args.setting}: KOH vs MOS posteriors") + "\n" + note
               + trust, Path(args.out_params).with_suffix(".md"))
    write_text(to_markdown(ppc, f"{args.setting}: posterior predictive check against the "
                           "data") + "\n" + "coverage_y95: share of data inside the 95% band "
               "for new data (about 0.95 expected); coverage_xi95: inside the band of the "
               "process without noise.\n\n" + trust, Path(args.out_output).with_suffix(".md"))
    return 0


def _job(args: argparse.Namespace, kind: str) -> JobSettings:
    """The job's settings from ``--params`` as given, or from the params the rule
    builds from ``--config`` (model modules and data files are then searched beside
    the config file, then in the working directory)."""
    from simcalib.bayes import params as BP
    from simcalib.bayes.settings import JobSettings

    cfg = config_from_args(args)
    if cfg is None:
        params = load_params(args.params)
    else:
        build = BP.data_params if kind == "data" else BP.run_params
        params = build(cfg, args.setting, [str(Path(args.config).resolve().parent)])
    return JobSettings.from_params(params, args.setting)


def _add_settings(p: argparse.ArgumentParser, what: str) -> None:
    add_params_or_config(p, what, "bayes.* and bayes.setting_options[--setting] are read "
                         "from it")
    p.add_argument("--setting", required=True,
                   help="setting name (a built-in model or a key of bayes.setting_options)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bayes-data", help="simulate one replication of a Bayesian ODE setting",
                       description="Simulate one replication of a synthetic setting: draw the "
                       "true parameters and discrepancy, solve the ODE, add noise, and write "
                       "the observations, the true process on a dense grid and the truth. "
                       "KOH and MOS are then fitted to the same data.")
    _add_settings(p, "{options: setting_options[setting], refine: int}")
    p.add_argument("--rep", type=int, required=True, help="replication index (seeds the data)")
    p.add_argument("--output-obs", dest="obs", required=True,
                   help="observations CSV to write: time + one column per observed state")
    p.add_argument("--output-dense", dest="dense", required=True,
                   help="CSV to write: true process xi = f + delta on a dense grid")
    p.add_argument("--output-truth", dest="truth", required=True,
                   help="JSON to write: theta*, gamma*, ell*, noise variance")
    p.set_defaults(func=cmd_data)

    p = sub.add_parser("bayes-run", help="KOH or MOS calibration of one data set (MCMC)",
                       description="Calibrate one data set with the KOH or MOS discrepancy "
                       "prior by Metropolis-within-Gibbs (paper 3); write the posterior "
                       "(ArviZ netCDF), its summary with R-hat and ESS (the trust signal), "
                       "the posterior predictive on a dense grid and the run record.")
    _add_settings(p, "{sampler: {...}, options: {...}, refine: int, predict_draws: int}")
    p.add_argument("--method", required=True, choices=["koh", "mos"],
                   help="discrepancy prior: koh (Kennedy-O'Hagan) or mos")
    p.add_argument("--rep", type=int, default=0, help="replication index (seeds the chains)")
    p.add_argument("--data", required=True, help="obs.csv: time + one column per observed state")
    p.add_argument("--truth", help="truth.json of simulated data (read only under "
                   "sampler.protocol: reference)")
    p.add_argument("--output-posterior", dest="posterior", required=True,
                   help="ArviZ netCDF posterior to write")
    p.add_argument("--output-summary", dest="summary", required=True,
                   help="summary CSV to write: mean, quantiles, ESS, R-hat, converged")
    p.add_argument("--output-predictive", dest="predictive",
                   help="CSV to write: predicted process on the dense grid")
    p.add_argument("--output-run-info", dest="run_info",
                   help="JSON to write: timing, acceptance, counters")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("bayes-metrics", help="aggregate replications into metrics tables",
                       description="Compare every replication's posterior summary and "
                       "predictive with its truth; write per-parameter bias, RMSE, coverage "
                       "and width, the same for the predicted process, and the per-replication "
                       "rows.")
    p.add_argument("--setting", required=True, help="setting name")
    p.add_argument("--truth", nargs="+", required=True, help="truth.json of each replication")
    p.add_argument("--dense", nargs="*", default=[], help="dense.csv of each replication")
    p.add_argument("--summary", nargs="+", required=True,
                   help="summary.csv of each method and replication")
    p.add_argument("--predictive", nargs="*", default=[],
                   help="predictive.csv of each method and replication")
    p.add_argument("--output-metrics", dest="metrics", required=True,
                   help="parameter metrics CSV (metrics.csv) to write")
    p.add_argument("--output-metrics-outputs", dest="output_metrics", required=True,
                   help="metrics of the predicted process (output_metrics.csv) to write")
    p.add_argument("--output-per-rep", dest="per_rep", required=True,
                   help="per-replication rows (per_replication.csv) to write")
    p.add_argument("--exclude-unconverged", action="store_true",
                   help="leave unconverged chain sets out of the averages (counted in "
                   "unconverged): bayes.exclude_unconverged")
    p.set_defaults(func=cmd_metrics)

    p = sub.add_parser("bayes-run-batch",
                       help="a block of replications of the replication study (paper 3)",
                       description="Simulate the data of each replication in --reps, sample "
                       "them as lanes of one lock-step program (each run's draws are those it "
                       "gets alone) and write one record per replication: posterior means and "
                       "95%% intervals with the truth, R-hat and bulk ESS, output metrics, CPU.")
    p.add_argument("--params", required=True,
                   help="JSON {sampler, convergence, refine, predict_draws, output_metrics} "
                   "(or @file)")
    p.add_argument("--setting", required=True, help="built-in setting name")
    p.add_argument("--protocol", required=True, choices=["honest", "reference"],
                   help="start protocol")
    p.add_argument("--method", required=True, choices=["koh", "mos"], help="discrepancy prior")
    p.add_argument("--reps", required=True, help="replications, e.g. 0-24 or 3,7")
    p.add_argument("--seed", type=int, required=True, help="the config's top-level seed")
    p.add_argument("--output", required=True, help="JSON of the block's records to write")
    p.set_defaults(func=cmd_run_batch)

    p = sub.add_parser("bayes-replication-tables",
                       help="the replication study's tables, paired differences and figure",
                       description="Read bayes-run-batch records; apply the convergence rule "
                       "(R-hat and bulk ESS thresholds of --params' convergence); write per "
                       "setting and protocol the parameter, paired-difference and output "
                       "tables for the converged subset and for all replications, a meta.json "
                       "(cost, counts, how it was made) and the paired-difference figure.")
    p.add_argument("--params", required=True, help="JSON {sampler, convergence, ...} (or @file)")
    p.add_argument("--records", nargs="+", required=True, help="bayes-run-batch JSON files")
    p.add_argument("--seed", type=int, required=True, help="the config's top-level seed")
    p.add_argument("--output-dir", required=True, help="directory of the tables to write")
    p.add_argument("--output-figure", dest="figure", help="paired-difference figure (PNG) to write")
    p.add_argument("--made-by", default="", help="the command that made them (meta.json)")
    p.set_defaults(func=cmd_replication_tables)

    p = sub.add_parser("bayes-table", help="paper tables with our numbers beside them",
                       description="Write the paper's parameter and output tables for a "
                       "setting with our metrics beside the paper's numbers (CSV + markdown), "
                       "with the replication count and a convergence note.")
    p.add_argument("--setting", required=True, help="setting name")
    p.add_argument("--metrics", required=True, help="metrics.csv from bayes-metrics")
    p.add_argument("--metrics-outputs", dest="output_metrics", metavar="METRICS_OUTPUTS",
                   required=True, help="output_metrics.csv from bayes-metrics")
    p.add_argument("--output-params", dest="out_params", required=True,
                   help="parameter table CSV to write (a .md beside it too)")
    p.add_argument("--output-outputs", dest="out_output", required=True,
                   help="output table CSV to write (a .md beside it too)")
    p.set_defaults(func=cmd_table)

    p = sub.add_parser("bayes-plot", help="output-UQ figure (and marginals given a truth)",
                       description="Draw the data with model-only and discrepancy-corrected "
                       "predictive bands per method (and the true process when known), and, "
                       "given a truth, the posterior marginals against it.")
    p.add_argument("--setting", required=True, help="setting name")
    p.add_argument("--data", required=True, help="obs.csv the methods were fitted to")
    p.add_argument("--dense", help="CSV of the true process (synthetic data only)")
    p.add_argument("--truth", help="JSON of the true parameters (synthetic data only)")
    p.add_argument("--predictive", nargs="+", required=True, help="predictive.csv per method")
    p.add_argument("--posterior", nargs="*", default=[],
                   help="posterior.nc per method (for the marginals)")
    p.add_argument("--summary", nargs="*", default=[],
                   help="summary.csv per method: unconverged ones are flagged in the titles")
    p.add_argument("--output-uq", dest="out_uq", required=True,
                   help="output-UQ figure (PNG) to write (its data as .csv beside it)")
    p.add_argument("--output-marginals", dest="out_marginals",
                   help="figure (PNG) to write: posterior marginals against the truth")
    p.set_defaults(func=cmd_plot)

    p = sub.add_parser("bayes-diagnostics", help="trace, rank and pair plots of a posterior",
                       description="Draw the MCMC diagnostics of one posterior: traces, rank "
                       "histograms per chain, and pair plots of the physical parameters, so a "
                       "run without a truth can still be judged.")
    p.add_argument("--posterior", required=True, help="posterior.nc from bayes-run")
    p.add_argument("--output-trace", dest="out_trace", required=True,
                   help="trace figure (PNG) to write")
    p.add_argument("--output-rank", dest="out_rank", required=True,
                   help="rank-histogram figure (PNG) to write")
    p.add_argument("--output-pair", dest="out_pair", required=True,
                   help="pair-plot figure (PNG) to write")
    p.set_defaults(func=cmd_diagnostics)

    p = sub.add_parser("bayes-compare", help="KOH vs MOS on one real data set",
                       description="Put the KOH and MOS posteriors of one real data set side "
                       "by side and check their predictive bands against the data (the truth "
                       "is unknown); CSV + markdown with a convergence warning when needed.")
    p.add_argument("--setting", required=True, help="setting name")
    p.add_argument("--data", required=True, help="the data CSV the methods were fitted to")
    p.add_argument("--summary", nargs="+", required=True, help="summary.csv per method")
    p.add_argument("--predictive", nargs="+", required=True, help="predictive.csv per method")
    p.add_argument("--output-params", dest="out_params", required=True,
                   help="side-by-side posteriors CSV to write (a .md beside it too)")
    p.add_argument("--output-outputs", dest="out_output", required=True,
                   help="predictive check CSV to write (a .md beside it too)")
    p.set_defaults(func=cmd_compare)
