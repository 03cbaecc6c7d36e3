"""Posterior files: ArviZ netCDF, summary table, and the one place that talks to ArviZ.

ArviZ 0.2x (InferenceData) and 1.x (DataTree) differ in ``from_dict``'s signature;
:func:`to_inference_data` is the only caller of it.  ``rhat``, ``ess``, ``summary``,
``to_netcdf``/``from_netcdf`` exist in both.
"""

from __future__ import annotations

import logging
import math
import os
import warnings
from typing import Any

import numpy as np
import pandas as pd

from simcalib.bayes.convergence import Convergence, stable
from simcalib.bayes.likelihood import Likelihood
from simcalib.bayes.models import DISCREPANCY, HYPER
from simcalib.bayes.modes import minor_modes
from simcalib.bayes.sampler import RunResult
from simcalib.errors import DataError
from simcalib.io import atomic_path

log = logging.getLogger(__name__)
HYPER_NAMES = [HYPER["gamma"], HYPER["ell"], HYPER["sigma2"]]
SUMMARY_COLUMNS = ["parameter", "mean", "sd", "lower95", "upper95", "median", "r_hat",
                   "ess_bulk", "ess_tail", "converged", "minor_mode"]


def _az() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import arviz as az
    return az


def _major() -> int:
    return int(str(_az().__version__).split(".")[0])


def to_inference_data(posterior: dict[str, np.ndarray], sample_stats: dict[str, np.ndarray],
                      observed: dict[str, np.ndarray], coords: dict[str, Any],
                      dims: dict[str, list[str]], attrs: dict[str, Any],
                      posterior_predictive: dict[str, np.ndarray] | None = None) -> Any:
    az = _az()
    if _major() >= 1:  # pragma: no cover - ArviZ 1.x needs Python >= 3.12
        groups = {"posterior": posterior, "sample_stats": sample_stats, "observed_data": observed}
        if posterior_predictive:
            groups["posterior_predictive"] = posterior_predictive
        idata = az.from_dict(groups, coords=coords, dims=dims)
        idata.attrs.update(attrs)
        for name in ("posterior", "sample_stats"):
            idata[name].attrs.update(attrs)
        return idata
    idata = az.from_dict(posterior=posterior, sample_stats=sample_stats, observed_data=observed,
                         posterior_predictive=posterior_predictive or None,
                         coords=coords, dims=dims)
    idata.posterior.attrs.update(attrs)
    idata.sample_stats.attrs.update(attrs)
    return idata


def run_attrs(idata: Any) -> dict[str, Any]:
    """Attributes written by :func:`build_idata` (setting, method, counters ...)."""
    return dict(posterior_dataset(idata).attrs)


def posterior_dataset(idata: Any) -> Any:
    """The posterior group as an xarray Dataset (both ArviZ APIs)."""
    post = idata["posterior"] if _major() >= 1 else idata.posterior
    return post.to_dataset() if hasattr(post, "to_dataset") else post


#: Group attributes that change from run to run: ArviZ's creation stamp; the per-chain
#: wall and CPU times (any of ``timing.TIMING_FIELDS``) go to ``<stem>_timing.json``.
VOLATILE_ATTRS = ("created_at",)


def _groups(idata: Any) -> list[Any]:
    if _major() >= 1:  # pragma: no cover - ArviZ 1.x (DataTree)
        return [idata[g] for g in idata.children]
    return [getattr(idata, g) for g in idata.groups()]


def write_netcdf(idata: Any, path: str | os.PathLike[str]) -> None:
    """Write without creation stamps or timings, so the same seed gives the same bytes;
    the chains' wall and CPU seconds go to the ``_timing.json`` side file."""
    from simcalib import timing

    seconds: dict[str, Any] = {}
    for group in _groups(idata):
        for key in VOLATILE_ATTRS:
            group.attrs.pop(key, None)
        for key in [k for k in group.attrs if k in timing.TIMING_FIELDS]:
            seconds[key] = np.asarray(group.attrs.pop(key)).tolist()
    with atomic_path(path) as tmp:
        idata.to_netcdf(str(tmp))
    if seconds:
        from simcalib import io

        io.write_json(seconds, timing.timing_path(path).with_suffix(".json"))


def read_netcdf(path: str | os.PathLike[str]) -> Any:
    if not os.path.exists(path):
        raise DataError(str(path), "file not found")
    try:
        return _az().from_netcdf(str(path))
    except (OSError, ValueError) as exc:
        raise DataError(str(path), f"not a readable ArviZ netCDF file ({exc})") from None


def _posterior_predictive(pb: Likelihood, result: RunResult, rng: np.random.Generator
                          ) -> np.ndarray:
    """Replicated data ``y_rep = f(theta) + delta + eps`` at the observed entries, one per
    kept draw (the ODE is solved once per distinct theta: rejected proposals repeat it),
    back on the data's scale for positive settings.  Shape (chains, draws, time, output)."""
    chains = result.chains
    out = np.full((len(chains), chains[0].theta.shape[0], *pb.mask.shape), np.nan)
    for ci, c in enumerate(chains):
        last_theta, f = None, None
        for k in range(c.theta.shape[0]):
            if last_theta is None or not np.array_equal(c.theta[k], last_theta):
                fw = pb.forward(c.theta[k])
                f = None if fw is None else fw[0]
                last_theta = c.theta[k]
            if f is None:
                continue
            rep = f + c.delta[k] + math.sqrt(c.sigma2[k]) * rng.standard_normal(pb.m)
            out[ci, k] = pb.observed_matrix(np.exp(rep) if pb.positive else rep)
    return out


def build_idata(pb: Likelihood, result: RunResult, attrs: dict[str, Any],
                predictive_rng: np.random.Generator | None = None) -> Any:
    """Posterior (theta; the namespaced hyperparameters ``hyper_gamma``, ``hyper_ell``,
    ``hyper_sigma2``; the ``discrepancy`` at the observed entries), sample stats, the
    observed data and, with ``predictive_rng``, the posterior predictive of the data."""
    params = pb.setting.params
    chains = result.chains
    post: dict[str, np.ndarray] = {}
    for k, name in enumerate(params):
        post[name] = np.stack([c.theta[:, k] for c in chains])
    post[HYPER["gamma"]] = np.exp(np.stack([c.log_gamma for c in chains]))
    post[HYPER["ell"]] = np.exp(np.stack([c.log_ell for c in chains]))
    post[HYPER["sigma2"]] = np.stack([c.sigma2 for c in chains])
    n_t, n_o = pb.mask.shape
    delta = np.full((len(chains), chains[0].delta.shape[0], n_t, n_o), np.nan)
    for ci, c in enumerate(chains):
        delta[ci][:, pb.ti, pb.oi] = c.delta
    post[DISCREPANCY] = delta
    stats = {"lp": np.stack([c.lp for c in chains]),
             "accepted": np.stack([c.accepted.astype(bool) for c in chains])}
    coords = {"time": pb.t, "output": list(pb.data.outputs)}
    dims = {DISCREPANCY: ["time", "output"], "y": ["time", "output"]}
    counters = {f"{k}_chain{i}": v for i, c in enumerate(chains)
                for k, v in vars(c.counters).items()}
    extra = {"acceptance": [c.acceptance for c in chains], "seconds": [c.seconds for c in chains],
             "cpu_seconds": [float(getattr(c, "cpu_seconds", float("nan"))) for c in chains],
             "init_theta": list(map(float, result.init.get("theta", []))),
             "parameters": ",".join(params), "positive": int(pb.positive),
             "scale": "log (multiplicative error)" if pb.positive else "linear", **counters}
    all_attrs = {**attrs, **{k: (np.asarray(v) if isinstance(v, list) else v)
                             for k, v in extra.items()}}
    pp = None
    if predictive_rng is not None:
        pp = {"y": _posterior_predictive(pb, result, predictive_rng)}
    return to_inference_data(post, stats, {"y": np.asarray(pb.data.y, dtype=np.float64)},
                             coords, dims, all_attrs, posterior_predictive=pp)


def posterior_summary(idata: Any, params: list[str], convergence: Convergence | None = None
              ) -> pd.DataFrame:
    """Per scalar variable (physical parameters, then the namespaced hyperparameters):
    mean, sd, equal-tailed 95% interval, median, rank-normalised R-hat, bulk and tail
    ESS (ArviZ), ``minor_mode`` (a separate mode the chains explored too little, which
    R-hat does not see: :mod:`simcalib.bayes.modes`; empty when none) and
    ``converged`` (R-hat and bulk ESS within ``convergence`` and no such mode; False
    with a single chain, where R-hat is undefined)."""
    az = _az()
    conv = convergence or Convergence()
    names = [*params, *HYPER_NAMES]
    post = posterior_dataset(idata)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        diag = az.summary(idata, var_names=names, kind="diagnostics", round_to="none")
    rows = []
    for n in names:
        chains = np.asarray(post[n].values, dtype=np.float64)
        x = chains.ravel()
        q = np.quantile(x, [0.025, 0.5, 0.975])
        r_hat, ess = stable(diag.loc[n, "r_hat"]), stable(diag.loc[n, "ess_bulk"])
        modes = [m for m in minor_modes(chains.reshape(chains.shape[0], -1), n)
                 if m.poorly_explored] if chains.ndim >= 2 and chains.shape[0] > 1 else []
        rows.append({"parameter": n, "mean": x.mean(), "sd": x.std(ddof=1), "lower95": q[0],
                     "upper95": q[2], "median": q[1], "r_hat": r_hat, "ess_bulk": ess,
                     "ess_tail": stable(diag.loc[n, "ess_tail"]),
                     "converged": bool(np.isfinite(r_hat) and r_hat <= conv.r_hat
                                       and ess >= conv.ess_bulk and not modes),
                     "minor_mode": "; ".join(m.describe() for m in modes)})
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def warn_unconverged(summary: pd.DataFrame, label: str,
                     convergence: Convergence | None = None) -> bool:
    """One WARNING for a chain set with any unconverged variable; True if converged."""
    conv = convergence or Convergence()
    bad = summary[~summary["converged"].astype(bool)]
    if bad.empty:
        log.info("%s: converged (R-hat <= %g, bulk ESS >= %g for all %d variables)", label,
                 conv.r_hat, conv.ess_bulk, len(summary))
        return True
    worst = ", ".join(f"{r.parameter} (R-hat {r.r_hat:.3f}, ESS {r.ess_bulk:.0f}"
                      + (f"; a minor mode explored too little: {r.minor_mode}"
                         if isinstance(r.minor_mode, str) and r.minor_mode else "") + ")"
                      for r in bad.itertuples())
    log.warning("%s: NOT CONVERGED (need R-hat <= %g and bulk ESS >= %g): %s; run longer "
                "chains (bayes.sampler.iterations) before trusting these numbers", label,
                conv.r_hat, conv.ess_bulk, worst)
    return False
