"""Paper 3's replication study: blocks of replications of one (setting, protocol,
method), sampled as lanes of one lock-step program, each summarised to one record.

Why blocks: a replication is one simulated data set and one MCMC run.  Sampling a block
of them as lanes of one program (:func:`simcalib.bayes.sampler.run_many`) shares the
per-step Python overhead, and each run's draws are bit for bit those it gets alone
(same data ``rng(seed, "bayes", setting, "data", rep)``, start and random stream), so
which runs share a block never changes a number.  The workflow runs one block per job
(``bayes-run-batch``): resumable per block, one block per core or cluster slot.

A record keeps what the tables need (:mod:`simcalib.bayes.metrics`): per parameter the
posterior mean and 95% equal-tailed interval with the truth, the chain set's largest
R-hat and smallest bulk ESS, the output metrics of the predicted process against the
true one on the dense grid, and the CPU seconds the run cost.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from simcalib.bayes._threads import limit_blas_threads
from simcalib.bayes.convergence import Convergence, is_converged
from simcalib.bayes.likelihood import Likelihood
from simcalib.bayes.metrics import output_metrics_one
from simcalib.bayes.models import build_setting
from simcalib.bayes.posterior import build_idata
from simcalib.bayes.predict import predictive
from simcalib.bayes.sampler import SamplerConfig, run_many
from simcalib.bayes.synthetic import simulate
from simcalib.config import schema_defaults
from simcalib.seeds import rng

log = logging.getLogger(__name__)
#: the ``bayes`` section's defaults (refine, predict_draws: bayes.schema.yaml)
_D = schema_defaults("bayes.schema.yaml")

#: replication records' identifying fields, in order
KEYS = ("setting", "protocol", "method", "rep")


def parse_reps(text: str) -> list[int]:
    """``"0-24"`` -> 0..24; ``"3"`` -> [3]; ``"0,5,7"`` -> [0, 5, 7]."""
    out: list[int] = []
    for part in str(text).split(","):
        a, _, b = part.strip().partition("-")
        lo, hi = int(a), int(b) if b else int(a)
        if hi < lo or lo < 0:
            raise ValueError(f"bad replication range {part!r}")
        out.extend(range(lo, hi + 1))
    return out


def blocks(replications: int, size: int) -> list[str]:
    """The block labels ``"a-b"`` of ``replications`` runs in blocks of ``size``."""
    return [f"{i}-{min(i + size, replications) - 1}" for i in range(0, replications, size)]


def run_block(setting_name: str, protocol: str, method: str, reps: Sequence[int],
              sampler: Mapping[str, Any], seed: int, output: bool = True,
              convergence: Convergence | None = None, refine: int = _D["refine"],
              predict_draws: int = _D["predict_draws"]) -> list[dict[str, Any]]:
    """One record per replication in ``reps`` (see the module docstring).

    ``cpu_total`` of a run is the block's process CPU divided by its size;
    ``converged`` applies ``convergence`` (default: the schema's thresholds; the
    tables re-apply their own, so stored records serve any rule)."""
    conv = convergence or Convergence()
    limit_blas_threads(1)
    reps = [int(r) for r in reps]
    t0 = time.process_time()
    setting = build_setting(setting_name)
    sims = [simulate(setting, rng(seed, "bayes", setting_name, "data", r), refine=refine)
            for r in reps]
    pbs = [Likelihood(setting, sim.obs, method) for sim in sims]
    cfg = SamplerConfig.from_dict({**sampler, "protocol": protocol, "log_every": 0,
                                   "progress": False})
    keys = [("bayes", setting_name, method, r) for r in reps]
    log.info("%s %s %s: sampling replications %s as %d lanes (%d iterations, %d chains)",
             setting_name, protocol, method, f"{reps[0]}-{reps[-1]}", len(reps),
             cfg.iterations, cfg.chains)
    results = run_many(pbs, cfg, seed, keys, [("bayes", setting_name, "init", r) for r in reps],
                       [sim.truth for sim in sims])
    c_sample = (time.process_time() - t0) / len(reps)
    records = []
    for r, sim, pb, res, k in zip(reps, sims, pbs, results, keys, strict=True):
        rec = res.record
        params = {}
        for i, name in enumerate(setting.params):
            x = np.concatenate([c.theta[:, i] for c in res.chains])
            lo, hi = np.quantile(x, [0.025, 0.975])
            params[name] = {"mean": float(x.mean()), "lo": float(lo), "hi": float(hi),
                            "truth": float(sim.truth["theta"][name])}
        out: dict[str, Any] = {}
        if output:
            idata = build_idata(pb, res, {"setting": setting_name, "method": method})
            pred = predictive(setting, idata, sim.dense_t, predict_draws,
                              rng(seed, *k, "predict"))
            dense = pd.concat([pd.DataFrame({"time": sim.dense_t, "output": o,
                                             "xi": sim.dense["xi"][:, j]})
                               for j, o in enumerate(sim.obs.outputs)], ignore_index=True)
            out = output_metrics_one(pred, dense)
        rh, ess = float(rec["r_hat_max"]), float(rec["ess_bulk_min"])
        records.append({"setting": setting_name, "protocol": protocol, "method": method,
                        "rep": r, "params": params, "output": out, "r_hat_max": rh,
                        "ess_bulk_min": ess,
                        "converged": is_converged(rh, ess, conv.r_hat, conv.ess_bulk),
                        "iterations_run": int(rec["iterations_run"]),
                        "stop_reason": rec["stop_reason"], "cpu_sampling": c_sample,
                        "batched_runs": len(reps),
                        "acceptance": [float(c.acceptance) for c in res.chains]})
        log.info("%s %s %s rep %d: R-hat %.3f, bulk ESS %.0f (%s)", setting_name, protocol,
                 method, r, rh, ess, "converged" if records[-1]["converged"]
                 else "NOT converged")
    cpu = (time.process_time() - t0) / len(reps)
    for rec_ in records:
        rec_["cpu_total"] = cpu
    return records
