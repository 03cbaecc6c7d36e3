"""Tables and files of sampled posteriors: ``posterior_summary.csv`` (one row per
target and input, with its convergence flag) and one ArviZ netCDF per target.

Reading an input's row: ``prior_sd_ratio`` is the posterior sd over the prior sd on
the sampler's (unit, log-aware) scale.  Near 1 the data say nothing about the input
(the posterior is the prior: ``identified`` False at >= ``UNIDENTIFIED``); near 0 it
is pinned down.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simcalib.metamodel.posterior.sampler import Draws

#: posterior sd / prior sd (unit scale) from which an input counts as not identified
UNIDENTIFIED = 0.8
SUMMARY_COLUMNS = ["target_id", "input", "mean", "sd", "q5", "q50", "q95", "r_hat",
                   "ess_bulk", "converged", "prior_sd_ratio", "identified"]


def summarize(draws: Draws) -> pd.DataFrame:
    """One row per target and input (and ``tau`` where inferred), with the target's
    convergence flag on every row and the true value when the target is synthetic."""
    post = draws.post
    names = post.space.tunable_names
    rows: list[dict[str, Any]] = []
    prior_sd = 1.0 / np.sqrt(12.0)
    tau = draws.tau
    for t, spec in enumerate(post.targets):
        X = draws.flat(t)
        Uu = draws.U[:, :, t, : post.d].reshape(-1, post.d)
        for j, name in enumerate(names):
            q = np.quantile(X[:, j], [0.05, 0.5, 0.95])
            ratio = float(Uu[:, j].std() / prior_sd)
            row = {"target_id": spec.target_id, "input": name, "mean": float(X[:, j].mean()),
                   "sd": float(X[:, j].std(ddof=1)), "q5": q[0], "q50": q[1], "q95": q[2],
                   "r_hat": float(draws.r_hat[t, j]), "ess_bulk": float(draws.ess_bulk[t, j]),
                   "converged": bool(draws.converged[t]), "prior_sd_ratio": round(ratio, 4),
                   "identified": ratio < UNIDENTIFIED}
            if spec.x_true is not None:
                row["true"] = float(spec.x_true[j])
            rows.append(row)
        if tau is not None and spec.infer_scale:
            v = tau[:, :, t].reshape(-1)
            q = np.quantile(v, [0.05, 0.5, 0.95])
            rows.append({"target_id": spec.target_id, "input": "tau", "mean": float(v.mean()),
                         "sd": float(v.std(ddof=1)), "q5": q[0], "q50": q[1], "q95": q[2],
                         "r_hat": float(draws.r_hat[t, post.d]),
                         "ess_bulk": float(draws.ess_bulk[t, post.d]),
                         "converged": bool(draws.converged[t]), "prior_sd_ratio": np.nan,
                         "identified": True})
    df = pd.DataFrame(rows)
    cols = SUMMARY_COLUMNS + (["true"] if "true" in df.columns else [])
    return df[cols]


def unidentified_inputs(table: pd.DataFrame) -> list[str]:
    """``target_id:input`` of every row not identified, in table order; [] when every
    input is pinned down.  Built row by row: ``DataFrame.agg(..., axis=1)`` on an empty
    selection returns a frame under pandas >= 3 (no ``tolist``), which crashed the
    posterior exactly on the well-identified case."""
    if "identified" not in table.columns:
        return []
    bad = table[~table["identified"].astype(bool)]
    return [f"{t}:{i}" for t, i in zip(bad["target_id"], bad["input"], strict=True)]


def inference_data(draws: Draws, t: int, save_draws: int) -> Any:
    """Target ``t``'s draws as ArviZ InferenceData (posterior per input, log density
    and tau in sample_stats, the observed outputs), thinned evenly to ``save_draws``
    per chain."""
    from simcalib.bayes.posterior import to_inference_data

    post = draws.post
    n = draws.X.shape[1]
    keep = np.unique(np.linspace(0, n - 1, min(n, int(save_draws))).round().astype(int))
    spec = post.targets[t]
    posterior = {name: draws.X[:, keep, t, j] for j, name in enumerate(post.space.tunable_names)}
    stats: dict[str, np.ndarray] = {"lp": draws.logp[:, keep, t]}
    if draws.tau is not None and spec.infer_scale:
        posterior["tau"] = draws.tau[:, keep, t]
    observed = {o: np.array([v]) for o, v in zip(post.model.output_names, spec.z, strict=True)}
    attrs = {"target_id": int(spec.target_id), "converged": int(draws.converged[t]),
             "r_hat_max": float(np.nanmax(np.where(draws.diag_mask[t], draws.r_hat[t],
                                                   np.nan))),
             "ess_bulk_min": float(np.nanmin(np.where(draws.diag_mask[t], draws.ess_bulk[t],
                                                      np.nan))),
             "iterations": int(draws.iterations), "thinned_to": int(len(keep)),
             "sigma_source": str(getattr(post.model, "source", type(post.model).__name__))}
    for c, v in spec.context.items():
        attrs[f"context_{c}"] = float(v)
    if spec.x_true is not None:
        for name, v in zip(post.space.tunable_names, spec.x_true, strict=True):
            attrs[f"true_{name}"] = float(v)
    return to_inference_data(posterior, stats, observed, {}, {}, attrs)


def write_netcdfs(draws: Draws, directory: str | Path, save_draws: int) -> list[Path]:
    """``target_<id>.nc`` per target in ``directory``."""
    from simcalib.bayes.posterior import write_netcdf

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    out = []
    for t, spec in enumerate(draws.post.targets):
        p = d / f"target_{spec.target_id}.nc"
        write_netcdf(inference_data(draws, t, save_draws), p)
        out.append(p)
    return out
