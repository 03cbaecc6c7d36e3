"""The ``cal-posterior`` step: sample every target's posterior and write what a reader
needs in one directory.

    posterior_summary.csv   target, input, mean, sd, q5, q50, q95, r_hat, ess_bulk,
                            converged, prior_sd_ratio, identified (+ true)
    intervals.png           every target's 90 % intervals against the box (+ truth)
    ppc.csv, ppc_runs.csv   the predictive check (k simulated draws per target)
    posterior.json          settings, Sigma's source, cost, convergence and PPC counts
    targets/target_<id>.nc  ArviZ netCDF per target (posterior, lp, observed data)
    targets/pair_<id>.png   pair plots of the first ``pair_plots`` targets
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simcalib import io, timing
from simcalib.metamodel import trust
from simcalib.metamodel.posterior.build import error_scale, run, settings, target_specs
from simcalib.metamodel.posterior.check import predictive_check
from simcalib.metamodel.posterior.plots import intervals_figure, pair_plot
from simcalib.metamodel.posterior.summary import summarize, unidentified_inputs, write_netcdfs

log = logging.getLogger(__name__)


def run_study(study: Any, mm: Any, targets: pd.DataFrame, cfg: Mapping[str, Any] | None,
              seed: int, out_dir: str | Path, dataset: pd.DataFrame | None = None
              ) -> dict[str, Any]:
    """Calibrate kappa (on ``dataset``'s held-out rows), sample, summarise, plot and
    check; returns the contents of posterior.json."""
    import time

    c = settings(cfg)
    out = Path(out_dir)
    (out / "targets").mkdir(parents=True, exist_ok=True)
    space = study.space
    t0 = time.process_time()
    kappa, ktable = error_scale(space, mm, c, seed, dataset, study.name)
    kappa_cpu = time.process_time() - t0
    if ktable is not None:
        io.write_csv(ktable, out / "kappa.csv")
    specs = target_specs(targets, space, list(mm.output_names), c["obs_noise"],
                         source="targets", kappa=kappa)
    draws = run(space, mm, specs, c, seed, study.name)
    table = summarize(draws)
    io.write_csv(table, out / "posterior_summary.csv")
    write_netcdfs(draws, out / "targets", int(c["save_draws"]))
    glo, ghi = space.global_bounds()
    names = space.tunable_names
    for t, spec in enumerate(draws.post.targets[: int(c["pair_plots"])]):
        pair_plot(draws.flat(t), names, draws.post.lo[t], draws.post.hi[t],
                  out / "targets" / f"pair_{spec.target_id}.png", spec.x_true,
                  f"{study.name}, target {spec.target_id}"
                  + ("" if draws.converged[t] else " (NOT converged)"))
    intervals_figure(table, {n: (float(a), float(b)) for n, a, b in zip(names, glo, ghi,
                                                                         strict=True)},
                     out / "intervals.png",
                     f"{study.name}: posterior 90 % intervals ({int(draws.converged.sum())}/"
                     f"{len(specs)} targets converged)")
    ppc, ppc_runs, ppc_summary = predictive_check(study, draws, int(c["ppc_draws"]), seed)
    io.write_csv(ppc, out / "ppc.csv")
    timing.write_csv(ppc_runs, out / "ppc_runs.csv")
    verdict = trust.judge(mm.info)
    model = draws.post.model
    meta = {
        "study": study.name, "targets": len(specs),
        "converged_targets": int(draws.converged.sum()),
        "unconverged_targets": [s.target_id for s, ok in zip(draws.post.targets,
                                                             draws.converged, strict=True)
                                if not ok],
        "r_hat_max": float(np.nanmax(np.where(draws.diag_mask, draws.r_hat, np.nan))),
        "ess_bulk_min": float(np.nanmin(np.where(draws.diag_mask, draws.ess_bulk, np.nan))),
        "iterations": int(draws.iterations), "chains": int(c["chains"]),
        "acceptance_median": float(np.median(draws.acceptance)),
        "metamodel_evaluations": int(draws.post.evaluations),
        "cpu_seconds": round(draws.cpu_seconds, 3),
        "seconds": round(draws.seconds, 3),
        "sigma_source": str(getattr(model, "source", type(model).__name__)),
        "kappa": kappa, "kappa_calibrated": ktable is not None,
        "kappa_cost": {"cpu_seconds": round(kappa_cpu, 3)},   # -> posterior_timing.json
        "metamodel_ok": bool(verdict.ok),
        "inferred_scale_targets": int(sum(s.infer_scale for s in specs)),
        "unidentified": unidentified_inputs(table),
        "settings": c, "ppc": ppc_summary,
    }
    if not verdict.ok:
        log.warning(verdict.warning(study.name) + "; the posterior rests on it")
    timing.write_json(meta, out / "posterior.json")   # seconds -> posterior_timing.json
    log.info("%s: posterior of %d targets in %.1f CPU s, %d converged; Sigma from %s",
             study.name, len(specs), draws.cpu_seconds, meta["converged_targets"],
             meta["sigma_source"])
    return meta
