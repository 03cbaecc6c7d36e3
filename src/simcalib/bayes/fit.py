"""One calibration, end to end: setting + data file -> posterior, summary, predictive.

The ``bayes-run`` verb and tests call :func:`fit_ode`; it is the same for synthetic
replications and for real data.  For a real-data setting without explicit hyperpriors
they are derived from the data first (:mod:`simcalib.bayes.hyperpriors`).  Every
result carries its convergence verdict (R-hat, bulk ESS, ``converged``) and an
unconverged chain set is a WARNING in the log.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from simcalib.bayes.convergence import Convergence
from simcalib.bayes.data import DataReport, read_obs
from simcalib.bayes.hyperpriors import data_scaled_priors
from simcalib.bayes.likelihood import Likelihood
from simcalib.bayes.models import Setting, build_setting
from simcalib.bayes.numerics import numeric_events
from simcalib.bayes.posterior import build_idata, posterior_summary, warn_unconverged
from simcalib.bayes.predict import dense_grid, predictive
from simcalib.bayes.results import RunResult
from simcalib.bayes.sampler import SamplerConfig, run
from simcalib.bayes.settings import JobSettings
from simcalib.errors import ConfigError
from simcalib.seeds import rng

log = logging.getLogger(__name__)


@dataclass
class Calibration:
    setting: Setting
    idata: Any
    summary: pd.DataFrame
    predictive: pd.DataFrame | None
    info: dict[str, Any] = field(default_factory=dict)


def fit_ode(name: str, job: JobSettings, data_path: str, method: str, seed: int,
            rep: int = 0, predict: bool = True,
            truth: Mapping[str, Any] | None = None) -> Calibration:
    """One calibration with ``job``'s settings (built once from the rule's params).
    ``truth`` (a synthetic setting's truth.json) is read only under
    ``sampler.protocol: reference``, which starts the chains there (the paper's
    public code does; it shows what an honest start costs)."""
    setting = build_setting(name, job.options, dirs=job.search_dirs)
    cfg, conv = job.sampler, job.convergence
    if cfg.chains < 2:
        log.warning("R-hat needs at least two chains; running %d (nothing will count as "
                    "converged)", cfg.chains)
    if cfg.protocol == "reference" and truth is None:
        raise ConfigError("bayes.sampler.protocol",
                          "'reference' starts at the truth: pass --truth truth.json "
                          "(simulated settings only)")
    obs, report = read_obs(data_path, setting.observed if setting.data else None)
    label = f"{name}/{method}" + (f"/rep{rep}" if setting.data is None else "")
    with numeric_events(f"{label} (hyperpriors from the data)"):
        setting, priors = data_scaled_priors(setting, obs,
                                             rng(seed, "bayes", name, "priors", rep),
                                             ls_starts=cfg.ls_starts, source=data_path)
    pb = Likelihood(setting, obs, method, source=data_path)
    keys = ("bayes", name, method, rep)
    result = run(pb, cfg, seed, keys, init_keys=("bayes", name, "init", rep),
                 truth=truth if cfg.protocol == "reference" else None)
    with numeric_events(f"{label} (posterior and predictive)"):
        idata = build_idata(pb, result, _attrs(name, method, rep, seed, cfg, result, setting,
                                               data_path, priors),
                            predictive_rng=rng(seed, *keys, "ppc"))
        summ = posterior_summary(idata, setting.params, conv)
        converged = warn_unconverged(summ, label, conv)
        pred = None
        if predict:
            t_dense = (dense_grid(obs.t, job.refine) if setting.data is not None
                       else setting.dense_times(job.refine))
            t_dense = t_dense[t_dense >= setting.model.t0]
            pred = predictive(setting, idata, t_dense, job.predict_draws,
                              rng(seed, *keys, "predict"))
    info = _info(name, method, rep, cfg, conv, result, setting, summ, converged, report,
                 priors)
    return Calibration(setting, idata, summ, pred, info)


def _attrs(name: str, method: str, rep: int, seed: int, cfg: SamplerConfig,
           result: RunResult, setting: Setting, data_path: str,
           priors: Mapping[str, Any]) -> dict[str, Any]:
    """The posterior file's attributes: how it was made."""
    rec = result.record
    return {"setting": name, "method": method, "rep": int(rep), "seed": int(seed),
            "iterations": cfg.iterations, "burn_in": cfg.burn_in, "thin": cfg.thin,
            "protocol": cfg.protocol, "engine": cfg.engine,
            "iterations_run": int(rec["iterations_run"]),
            "stop_reason": str(rec["stop_reason"]),
            "data": data_path, "truth": "known (synthetic)" if setting.data is None
            else "unknown (real data)",
            "gamma_prior": list(setting.gamma_prior), "ell_prior": list(setting.ell_prior),
            "sigma2_prior": list(setting.sigma2_prior),
            "hyperpriors": "from data" if priors else "given"}


def _info(name: str, method: str, rep: int, cfg: SamplerConfig, conv: Convergence,
          result: RunResult, setting: Setting, summ: pd.DataFrame, converged: bool,
          report: DataReport, priors: Mapping[str, Any]) -> dict[str, Any]:
    """run.json: timing, acceptance, convergence, data and hyperpriors, counters."""
    counters = {k: int(sum(getattr(c.counters, k) for c in result.chains))
                for k in vars(result.chains[0].counters)}
    return {"setting": name, "method": method, "rep": rep, "iterations": cfg.iterations,
            "burn_in": cfg.burn_in, "chains": cfg.chains,
            "seconds_per_chain": [c.seconds for c in result.chains],
            "cpu_seconds_per_chain": [float(c.cpu_seconds) for c in result.chains],
            "acceptance": [c.acceptance for c in result.chains],
            "init_theta": dict(zip(setting.params, map(float, result.init["theta"]),
                                   strict=True)),
            "ess_bulk_min": float(summ["ess_bulk"].min()),
            "rhat_max": float(summ["r_hat"].max()), "converged": bool(converged),
            "convergence_thresholds": {"r_hat": conv.r_hat, "ess_bulk": conv.ess_bulk},
            "positive": setting.positive, "data": report.as_dict(),
            "hyperpriors": priors or {"source": "given",
                                      "gamma_prior": list(setting.gamma_prior),
                                      "ell_prior": list(setting.ell_prior),
                                      "sigma2_prior": list(setting.sigma2_prior)},
            "protocol": cfg.protocol, "engine": cfg.engine,
            "sampler_record": {k: v for k, v in result.record.items()
                               if isinstance(v, (str, int, float, bool))},
            **counters}
