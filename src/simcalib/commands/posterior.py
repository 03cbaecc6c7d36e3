"""CLI verbs of the posteriors (docs/posterior.md): ``cal-posterior`` (the design's
metamodel) and ``cal-seq-posterior`` (``sequential``'s own runs).

``--params`` is the study's config restricted to what the step reads (simulator,
parameters, contexts, constraints, outputs, ``calibration.posterior``, and for
``cal-seq-posterior`` ``calibration.sequential.ensemble`` and ``noise``).
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from simcalib import io
from simcalib.commands._common import (
    add_study_args,
    one_torch_thread,
    seed_from_args,
    study_from_args,
)

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cal-posterior", help="posterior over the calibrated inputs of every "
                       "target, with a predictive check",
                       description="Sample p(x | z) ~ prior(x) N(z; M(x), Sigma) for every "
                       "target from the metamodel (Sigma: observation sd, held-out metamodel "
                       "error, an inferred scale), write posterior_summary.csv (R-hat and "
                       "bulk ESS per input, converged flag), one ArviZ netCDF per target, pair "
                       "plots, the intervals figure, and a predictive check that simulates "
                       "calibration.posterior.ppc_draws draws per target.")
    add_study_args(p)
    p.add_argument("--metamodel", required=True,
                   help="metamodel directory (model.pt + metamodel.json)")
    p.add_argument("--targets", required=True, help="targets CSV (targets.csv)")
    p.add_argument("--dataset", help="the design's dataset.csv the metamodel was trained on: "
                   "its held-out rows calibrate the error scale kappa "
                   "(calibration.posterior.error_scale: calibrate)")
    p.add_argument("--output-dir", dest="output_dir", required=True,
                   help="directory to write (results/<study>/calibration/posterior)")
    p.set_defaults(func=cmd_posterior)
    register_sequential(sub)


def cmd_posterior(args: argparse.Namespace) -> int:
    from simcalib.metamodel.model import Metamodel
    from simcalib.metamodel.posterior.pipeline import run_study
    from simcalib.metamodel.strategies.ledger import check_compatible

    study = study_from_args(args)
    mm = Metamodel.load(args.metamodel)
    one_torch_thread()
    check_compatible(study, mm, str(Path(args.metamodel) / "metamodel.json"))
    targets = io.read_csv(args.targets, ["target_id"])
    cfg = (study.cfg.get("calibration") or {}).get("posterior") or {}
    dataset = io.read_csv(args.dataset) if args.dataset else None
    meta = run_study(study, mm, targets, cfg, seed_from_args(args), args.output_dir, dataset)
    ppc = meta["ppc"]
    print(f"{study.name}: kappa {meta['kappa']:g}; posterior of {meta['targets']} targets, "
          f"{meta['converged_targets']} converged (max R-hat {meta['r_hat_max']:.4f}, min "
          f"bulk ESS {meta['ess_bulk_min']:.0f}); predictive check {ppc.get('runs', 0)} runs, "
          f"coverage {ppc.get('empirical_coverage', float('nan')):.2f} (expected "
          f"{ppc.get('nominal_coverage', float('nan')):.2f}) -> {args.output_dir}")
    return 0


def register_sequential(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cal-seq-posterior", help="sequential's posterior over the calibrated "
                       "inputs of every target, from its own runs",
                       description="Refit sequential's ensemble on every run of the strategy "
                       "(--runs), sample p(x | z) for every target with the ensemble's spread, "
                       "its cross-fitted held-out error (run-to-run noise included) and the "
                       "observation sd as error terms, and write posterior_summary.csv (R-hat, "
                       "bulk ESS, identified), answer.csv (the answer, inside its 90 % "
                       "intervals and joint region or why not), posterior.json, kappa.csv, "
                       "intervals.png and one ArviZ netCDF per target (docs/posterior.md).")
    add_study_args(p)
    p.add_argument("--runs", required=True,
                   help="sequential's runs (results/<study>/<caldir>/runs/sequential.csv)")
    p.add_argument("--records", required=True,
                   help="sequential's records (results/<study>/<caldir>/sequential.csv)")
    p.add_argument("--targets", required=True, help="the targets CSV those runs calibrated")
    p.add_argument("--output-dir", dest="output_dir", required=True,
                   help="directory to write (results/<study>/<caldir>/sequential_posterior)")
    p.set_defaults(func=cmd_seq_posterior)


def cmd_seq_posterior(args: argparse.Namespace) -> int:
    from simcalib.metamodel.posterior.sequential import sequential_posterior

    study = study_from_args(args)
    one_torch_thread()
    cal = study.cfg.get("calibration") or {}
    runs = io.read_csv(args.runs, ["target_id", "status"])
    records = io.read_csv(args.records, ["target_id"])
    targets = io.read_csv(args.targets, ["target_id"])
    res = sequential_posterior(study, runs, targets, records, cal.get("posterior") or {},
                               (cal.get("sequential") or {}).get("ensemble") or {},
                               seed_from_args(args), out_dir=args.output_dir)
    m = res.meta
    print(f"{study.name}: sequential's posterior of {m['targets']} targets from "
          f"{m['usable_runs']} runs, kappa {m['kappa']:g}, {m['converged_targets']} converged "
          f"(max R-hat {m['r_hat_max']:.4f}, min bulk ESS {m['ess_bulk_min']:.0f}); "
          f"{'stochastic' if m['stochastic'] else 'deterministic'} simulator "
          f"({m['stochastic_source']}) -> {args.output_dir}")
    names = study.space.tunable_names
    for _, r in res.answers.iterrows():
        xs = ", ".join(f"{n} {r[f'x_{n}']:.4g}" for n in names)
        inside = bool(r["inside_90"]) and r["inside_joint_90"] != False  # noqa: E712
        tail = "" if inside else f"; OUTSIDE its 90 % region: {r['why_outside']}"
        print(f"  target {r['target_id']}: {xs} ({r['answer_rule']}){tail}")
    for line in m["trust"]:
        log.warning("%s sequential posterior: %s", study.name, line)
    return 0
