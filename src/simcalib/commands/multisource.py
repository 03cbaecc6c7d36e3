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
from pathlib import Path
from typing import Any

from simcalib import io, timing
from simcalib.commands._common import (
    add_params_or_config,
    config_from_args,
    load_params,
    seed_from_args,
)
from simcalib.errors import ConfigError

log = logging.getLogger("simcalib.multisource")

CASES = ("analytic", "hardening")
#: ms-fit's case labels: the analytic example and the hardening law's two steps
FIT_CASES = ("analytic", "hardening/step1", "hardening/step2")
FIT_FILES = ("theta.csv", "theta_seeds.csv", "posterior.csv", "rrmse.csv", "predictions.csv",
             "latent.csv", "history.csv", "models.pt", "fit.json")


def _ms_params(args: argparse.Namespace, kind: str) -> dict[str, Any]:
    """``--params`` as given, or the params the rule builds from ``--config``."""
    from simcalib.multisource import params as MP

    cfg = config_from_args(args)
    if cfg is None:
        return load_params(args.params)
    case, step = MP.split_case(args.case)
    if kind == "data":
        return MP.data_params(cfg, case)
    return MP.fit_params(cfg, case, args.scenario, step)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ms-data", help="generate a multi-source case's data, declaration "
                                       "and theta^MSE",
                       description="Simulate a case's high- and low-fidelity sources (seeded "
                       "from the top-level seed and the case), write the long data table, the "
                       "problem declaration (sources, inputs, parameters, ranges) and the "
                       "theta^MSE reference table that iPro-NC's estimates are judged against.")
    p.add_argument("--case", choices=CASES, required=True, help="which case to generate")
    add_params_or_config(p, "the case's data settings (multisource.<case>.data)",
                         "multisource.<case>.data is read from it")
    p.add_argument("--datasets", nargs="+", metavar="SOURCE=CSV", default=[],
                   help="hardening case on the FE model: each source's FE study dataset "
                        "(s0=results/<study>/dataset.csv s1=... s2=...)")
    p.add_argument("--output-data", dest="data", required=True,
                   help="long data table (CSV) to write")
    p.add_argument("--output-spec", dest="spec", required=True,
                   help="problem declaration (JSON) to write")
    p.add_argument("--output-theta-mse", dest="theta_mse", required=True,
                   help="theta^MSE table (CSV) to write")
    p.set_defaults(func=cmd_data)

    p = sub.add_parser("ms-fit", help="fit iPro-NC on one scenario over several seeds",
                       description="Fit iPro-NC (paper 2) to the sources of one scenario, "
                       "once per seed of fit.n_seeds, and write theta-hat summaries, "
                       "posterior draws, RRMSE, predictions, latents, the training history, "
                       "the trained networks and fit.json into --output-dir.")
    p.add_argument("--case", required=True, choices=FIT_CASES,
                   help="case label used in seeds and logs")
    p.add_argument("--scenario", required=True,
                   help="scenario name (a key of multisource.<case>.scenarios)")
    add_params_or_config(p, "{fit: ..., sources: [...], theta?: {...}, max_input?: {...}, "
                         "fix?: [...]}", "the fit settings are merged from multisource.fit, "
                         "the case, the step and the scenario as the workflow does")
    p.add_argument("--data", required=True, help="long data table (CSV, from ms-data)")
    p.add_argument("--spec", required=True, help="problem declaration (JSON, from ms-data)")
    p.add_argument("--theta-mse", required=True, help="theta^MSE table (CSV, from ms-data)")
    p.add_argument("--fixed", help="theta.csv of an earlier step: its means fix the "
                                   "parameters listed in params.fix")
    p.add_argument("--output-dir", dest="outdir", required=True,
                   help=f"directory to write {', '.join(FIT_FILES)} into")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.set_defaults(func=cmd_fit)

    p = sub.add_parser("ms-lsq", help="baseline: least squares of each LF model vs HF data",
                       description="The baseline iPro-NC is compared with: calibrate each "
                       "low-fidelity model alone by least squares against the high-fidelity "
                       "training data, and write its parameters and errors.")
    p.add_argument("--case", choices=CASES, required=True, help="which case")
    add_params_or_config(p, "the case's data settings (multisource.<case>.data)",
                         "multisource.<case>.data is read from it")
    p.add_argument("--data", required=True, help="long data table (CSV, from ms-data)")
    p.add_argument("--output", required=True, help="baseline table (CSV) to write")
    p.set_defaults(func=cmd_lsq)

    p = sub.add_parser("ms-report", help="tables and figures of a multi-source case",
                       description="Gather a case's fitted scenarios, theta^MSE and the "
                       "least-squares baseline into the paper's tables (CSV) and figures "
                       "(PNG), written into --output-dir.")
    p.add_argument("--case", choices=CASES, required=True, help="which case")
    p.add_argument("--fits", nargs="+", required=True,
                   help="fit directories; the last two path parts name step/scenario")
    p.add_argument("--theta-mse", required=True, help="theta^MSE table (CSV, from ms-data)")
    p.add_argument("--lsq", required=True, help="baseline table (CSV, from ms-lsq)")
    p.add_argument("--output-dir", dest="outdir", required=True,
                   help="directory to write the tables and figures into")
    p.set_defaults(func=cmd_report)


# --------------------------------------------------------------------------- ms-data
def cmd_data(args: argparse.Namespace) -> int:
    from simcalib.multisource.pipeline import generate

    datasets = {}
    for item in args.datasets:
        src, sep, path = item.partition("=")
        if not sep or not path:
            raise ConfigError("--datasets", f"{item!r} is not SOURCE=CSV (e.g. s0=results/"
                              "tension_holloman/dataset.csv)")
        datasets[src] = path
    df, spec, mse = generate(args.case, _ms_params(args, "data"), seed_from_args(args),
                             datasets)
    timing.write_csv(df, args.data)
    io.write_json(spec.to_dict(), args.spec)
    io.write_csv(mse, args.theta_mse)
    return 0


def cmd_fit(args: argparse.Namespace) -> int:
    import torch

    from simcalib.multisource import pipeline as P
    from simcalib.multisource.problem import check_frame
    from simcalib.multisource.training import FitSettings

    torch.set_num_threads(max(1, args.threads))
    params = _ms_params(args, "fit")
    args.seed = seed_from_args(args)
    spec = P.scenario_spec(io.read_json(args.spec), params)
    df = check_frame(io.read_csv(args.data), spec, args.data)
    mse = io.read_csv(args.theta_mse, required=["source", "parameter", "theta_mse"])
    prev = (io.read_csv(args.fixed, required=["source", "parameter", "mean"])
            if params.get("fix") and args.fixed else None)
    fixed = P.fixed_values(prev, spec, list(params.get("fix") or []), args.fixed or "--fixed")
    fit = P.fit_scenario(df, spec, FitSettings.from_dict(params.get("fit"), "fit"), params,
                         mse, fixed, args.seed, args.case, args.scenario)
    out = Path(args.outdir)
    for name, table in fit.tables.items():
        timing.write_csv(table, out / name)
    timing.write_torch(P.models_payload(spec, fit), out / "models.pt")
    timing.write_json(P.fit_info(args.case, args.scenario, spec, fit, args.threads),
                      out / "fit.json")
    for r in fit.tables["theta.csv"].itertuples():
        log.info("%s %s.%s: mean %.4g sd %.3g [%.4g, %.4g] theta_mse %.4g", args.scenario,
                 r.source, r.parameter, r.mean, r.sd, r.lower95, r.upper95, r.theta_mse)
    return 0


def cmd_lsq(args: argparse.Namespace) -> int:
    from simcalib.multisource.pipeline import least_squares

    df = io.read_csv(args.data, required=["source", "split"])
    timing.write_csv(least_squares(args.case, _ms_params(args, "data"), df,
                                   seed_from_args(args)), args.output)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from simcalib.multisource import plots
    from simcalib.multisource.tables import case_tables

    out = Path(args.outdir)
    mse = io.read_csv(args.theta_mse, required=["source", "parameter", "theta_mse"])
    tables = case_tables(args.case, args.fits, mse, timing.read_csv(args.lsq))
    for name, table in tables.items():
        timing.write_csv(table, out / name)
    if args.case == "analytic":
        from simcalib.multisource import analytic as A

        plots.posteriors(tables["fig2_posteriors.csv"], mse,
                         {"theta1": A.THETA_RANGE, "theta2": A.THETA_RANGE},
                         out / "fig2_posteriors.png")
        plots.curves(tables["fig3_curves.csv"], out / "fig3_curves.png")
        plots.latents(tables["fig4_latent.csv"], out / "fig4_latent.png")
    else:
        plots.hardening_curves(tables["fig_force.csv"], out / "fig_force.png")
        plots.hardening_fields(tables["fig_fields.csv"], out / "fig_fields.png")
    return 0
