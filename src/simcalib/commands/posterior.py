"""CLI verb of the metamodel posterior: ``cal-posterior`` (docs/posterior.md).

``--params`` is the study's config restricted to what the step reads (simulator,
parameters, contexts, constraints, outputs, and ``calibration.posterior``).
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
