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

from simcalib import io, timing
from simcalib.commands._common import add_params_arg, add_seed_arg, load_params

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
    from simcalib.multisource.pipeline import generate

    df, spec, mse = generate(args.case, load_params(args.params), args.seed)
    timing.write_csv(df, args.data)
    io.write_json(spec.to_dict(), args.spec)
    io.write_csv(mse, args.theta_mse)
    return 0


def cmd_fit(args: argparse.Namespace) -> int:
    import torch

    from simcalib.multisource import pipeline as P
    from simcalib.multisource.problem import check_frame

    torch.set_num_threads(max(1, args.threads))
    params = load_params(args.params)
    spec = P.scenario_spec(io.read_json(args.spec), params)
    df = check_frame(io.read_csv(args.data), spec, args.data)
    mse = io.read_csv(args.theta_mse, required=["source", "parameter", "theta_mse"])
    prev = (io.read_csv(args.fixed, required=["source", "parameter", "mean"])
            if params.get("fix") and args.fixed else None)
    fixed = P.fixed_values(prev, spec, list(params.get("fix") or []), args.fixed or "--fixed")
    fit = P.fit_scenario(df, spec, params, mse, fixed, args.seed, args.case, args.scenario)
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
    timing.write_csv(least_squares(args.case, load_params(args.params), df, args.seed),
                     args.output)
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
    return 0
