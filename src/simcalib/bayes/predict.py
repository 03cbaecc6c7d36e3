"""Output uncertainty: the predicted process ``A z(theta) + delta`` on a dense grid.

For a thinned set of posterior draws: solve the ODE at the dense times, and extend
delta from the observed entries to the dense grid by its Gaussian conditional under
the KOH kernel of that draw (for MOS this is also the conditional under the MOS
prior, because the constraint J^T delta_obs = 0 is a function of delta_obs itself).
Returns pointwise means and equal-tailed 95% bands of the process ``xi``, the
simulator part ``f`` (model only), the discrepancy part ``delta`` and new data ``y``
(the process plus observation noise of variance sigma^2: where data should fall).

For ``positive`` settings everything is modelled on the log scale: ``xi = f exp(delta)``
and ``y = xi exp(eps)``, so every band stays positive; ``delta`` is then the log of a
multiplicative discrepancy.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from simcalib.bayes.kernels import robust_cholesky, se_kernel, tri_solve
from simcalib.bayes.models import DISCREPANCY, HYPER, Setting
from simcalib.bayes.posterior import posterior_dataset


def dense_grid(t_obs: np.ndarray, refine: int) -> np.ndarray:
    """A grid over the data's time span with ``refine`` points per data interval that
    contains every observation time (also for irregular sampling)."""
    t_obs = np.asarray(t_obs, dtype=np.float64)
    parts = [np.linspace(a, b, refine + 1)[:-1] for a, b in zip(t_obs[:-1], t_obs[1:],
                                                                    strict=True)]
    return np.concatenate([*parts, t_obs[-1:]])


def predictive(setting: Setting, idata: object, t_dense: np.ndarray, n_draws: int,
               rng: np.random.Generator) -> pd.DataFrame:
    post = posterior_dataset(idata)
    params = setting.params
    theta = np.stack([np.asarray(post[p].values).ravel() for p in params], axis=1)
    gamma = np.asarray(post[HYPER["gamma"]].values).ravel()
    ell = np.asarray(post[HYPER["ell"]].values).ravel()
    sigma2 = np.asarray(post[HYPER["sigma2"]].values).ravel()
    delta = np.asarray(post[DISCREPANCY].values)
    delta = delta.reshape(-1, *delta.shape[-2:])        # (draws, time, output)
    t_obs = np.asarray(post["time"].values, dtype=np.float64)
    outputs = [str(o) for o in post["output"].values]
    idx = [setting.model.state_names.index(o) for o in outputs]
    total = theta.shape[0]
    pick = np.linspace(0, total - 1, min(n_draws, total)).round().astype(int)
    n_t, n_o = len(t_dense), len(outputs)
    f_s = np.full((len(pick), n_t, n_o), np.nan)
    d_s = np.full((len(pick), n_t, n_o), np.nan)
    e_s = np.full((len(pick), n_t, n_o), np.nan)
    for k, i in enumerate(pick):
        sol = setting.model.solve(theta[i], t_dense, sensitivities=False)
        if sol is None or (setting.positive and np.any(sol.z[:, idx] <= 0)):
            continue
        f_s[k] = np.log(sol.z[:, idx]) if setting.positive else sol.z[:, idx]
        e_s[k] = np.sqrt(sigma2[i]) * rng.standard_normal((n_t, n_o))
        # outputs observed at the same times share the draw's conditional covariance
        # (same kernel, same conditioning set): factorise it once per pattern of
        # observed times, the costliest step (an n_t x n_t eigendecomposition)
        factors: dict[bytes, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
        for o in range(n_o):
            ok = np.isfinite(delta[i, :, o])
            if ok.tobytes() not in factors:
                kd = se_kernel(t_dense, t_obs[ok], gamma[i], ell[i])
                koo = se_kernel(t_obs[ok], t_obs[ok], gamma[i], ell[i])
                lo, _ = robust_cholesky(koo)
                a = tri_solve(lo, kd.T)                        # L^-1 K_od
                cov = se_kernel(t_dense, t_dense, gamma[i], ell[i]) - a.T @ a
                # the conditional covariance is singular at the observed times: draw
                # through its eigendecomposition with round-off negatives clipped to zero
                lam, vec = np.linalg.eigh(0.5 * (cov + cov.T))
                factors[ok.tobytes()] = (lo, a, vec, np.sqrt(np.maximum(lam, 0.0)))
            lo, a, vec, root = factors[ok.tobytes()]
            mean = a.T @ tri_solve(lo, delta[i, ok, o])
            d_s[k, :, o] = mean + vec @ (root * rng.standard_normal(n_t))
    good = np.all(np.isfinite(f_s), axis=(1, 2))
    f_s, d_s, e_s = f_s[good], d_s[good], e_s[good]
    xi, y_new = f_s + d_s, f_s + d_s + e_s
    if setting.positive:
        f_s, xi, y_new = np.exp(f_s), np.exp(xi), np.exp(y_new)
    rows = []
    for o, name in enumerate(outputs):
        block = {"time": t_dense, "output": name}
        for label, arr in (("xi", xi), ("f", f_s), ("delta", d_s), ("y", y_new)):
            q = np.quantile(arr[:, :, o], [0.025, 0.975], axis=0)
            block[f"{label}_mean"] = arr[:, :, o].mean(axis=0)
            block[f"{label}_lo"] = q[0]
            block[f"{label}_hi"] = q[1]
        rows.append(pd.DataFrame(block))
    out = pd.concat(rows, ignore_index=True)
    out["draws"] = int(good.sum())
    return out
