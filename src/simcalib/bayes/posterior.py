"""Posterior files: ArviZ netCDF, summary table, and the one place that talks to ArviZ.

ArviZ 0.2x (InferenceData) and 1.x (DataTree) differ in ``from_dict``'s signature;
:func:`to_inference_data` is the only caller of it.  ``rhat``, ``ess``, ``summary``,
``to_netcdf``/``from_netcdf`` exist in both.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np
import pandas as pd

from simcalib.bayes.sampler import Likelihood, RunResult
from simcalib.errors import DataError
from simcalib.io import atomic_path


def _az() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import arviz as az
    return az


def _major() -> int:
    return int(str(_az().__version__).split(".")[0])


def to_inference_data(posterior: dict[str, np.ndarray], sample_stats: dict[str, np.ndarray],
                      observed: dict[str, np.ndarray], coords: dict[str, Any],
                      dims: dict[str, list[str]], attrs: dict[str, Any]) -> Any:
    az = _az()
    if _major() >= 1:  # pragma: no cover - ArviZ 1.x needs Python >= 3.12
        idata = az.from_dict({"posterior": posterior, "sample_stats": sample_stats,
                              "observed_data": observed}, coords=coords, dims=dims)
        idata.attrs.update(attrs)
        for name in ("posterior", "sample_stats"):
            idata[name].attrs.update(attrs)
        return idata
    idata = az.from_dict(posterior=posterior, sample_stats=sample_stats, observed_data=observed,
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


#: Group attributes that change from run to run: ArviZ's creation stamp and the
#: per-chain wall times (those go to ``<stem>_timing.json`` instead).
VOLATILE_ATTRS = ("created_at",)
TIMING_ATTRS = ("seconds",)


def _groups(idata: Any) -> list[Any]:
    if _major() >= 1:  # pragma: no cover - ArviZ 1.x (DataTree)
        return [idata[g] for g in idata.children]
    return [getattr(idata, g) for g in idata.groups()]


def write_netcdf(idata: Any, path: str | os.PathLike[str]) -> None:
    """Write without creation stamps or timings, so the same seed gives the same bytes;
    the chains' wall seconds go to the ``_timing.json`` side file."""
    from simcalib import timing

    seconds: dict[str, Any] = {}
    for group in _groups(idata):
        for key in VOLATILE_ATTRS:
            group.attrs.pop(key, None)
        for key in TIMING_ATTRS:
            if key in group.attrs:
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


def build_idata(pb: Likelihood, result: RunResult, attrs: dict[str, Any]) -> Any:
    """Posterior (theta, gamma, ell, sigma2, delta), sample stats, observed data."""
    params = pb.setting.params
    chains = result.chains
    post: dict[str, np.ndarray] = {}
    for k, name in enumerate(params):
        post[name] = np.stack([c.theta[:, k] for c in chains])
    post["gamma"] = np.exp(np.stack([c.log_gamma for c in chains]))
    post["ell"] = np.exp(np.stack([c.log_ell for c in chains]))
    post["sigma2"] = np.stack([c.sigma2 for c in chains])
    n_t, n_o = pb.mask.shape
    delta = np.full((len(chains), chains[0].delta.shape[0], n_t, n_o), np.nan)
    for ci, c in enumerate(chains):
        delta[ci][:, pb.ti, pb.oi] = c.delta
    post["delta"] = delta
    stats = {"lp": np.stack([c.lp for c in chains]),
             "accepted": np.stack([c.accepted.astype(bool) for c in chains])}
    coords = {"time": pb.t, "output": list(pb.data.outputs)}
    dims = {"delta": ["time", "output"], "y": ["time", "output"]}
    counters = {f"{k}_chain{i}": v for i, c in enumerate(chains)
                for k, v in vars(c.counters).items()}
    extra = {"acceptance": [c.acceptance for c in chains], "seconds": [c.seconds for c in chains],
             "init_theta": list(map(float, result.init.get("theta", []))),
             "parameters": ",".join(params), **counters}
    all_attrs = {**attrs, **{k: (np.asarray(v) if isinstance(v, list) else v)
                             for k, v in extra.items()}}
    return to_inference_data(post, stats, {"y": np.asarray(pb.data.y, dtype=np.float64)},
                             coords, dims, all_attrs)


def summarize(idata: Any, params: list[str]) -> pd.DataFrame:
    """Per scalar variable: mean, sd, 2.5% / 50% / 97.5% quantiles (equal-tailed 95%),
    bulk and tail ESS and rank-normalised R-hat (ArviZ)."""
    az = _az()
    names = [*params, "gamma", "ell", "sigma2"]
    post = posterior_dataset(idata)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        diag = az.summary(idata, var_names=names, kind="diagnostics")
    rows = []
    for n in names:
        x = np.asarray(post[n].values, dtype=np.float64).ravel()
        q = np.quantile(x, [0.025, 0.5, 0.975])
        rows.append({"parameter": n, "mean": x.mean(), "sd": x.std(ddof=1), "q2.5": q[0],
                     "median": q[1], "q97.5": q[2],
                     "ess_bulk": float(diag.loc[n, "ess_bulk"]),
                     "ess_tail": float(diag.loc[n, "ess_tail"]),
                     "r_hat": float(diag.loc[n, "r_hat"])})
    return pd.DataFrame(rows)
