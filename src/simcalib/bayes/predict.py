"""Output uncertainty: the predicted process ``A z(theta) + delta`` on a dense grid.

For a thinned set of posterior draws: solve the ODE at the dense times, and extend
delta from the observed entries to the dense grid by its Gaussian conditional under
the KOH kernel of that draw (for MOS this is also the conditional under the MOS
prior, because the constraint J^T delta_obs = 0 is a function of delta_obs itself).
Returns pointwise means and equal-tailed 95% bands of the process, the simulator
part ``f`` and the discrepancy part ``delta``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from simcalib.bayes.kernels import robust_cholesky, se_kernel, tri_solve
from simcalib.bayes.models import Setting
from simcalib.bayes.posterior import posterior_dataset


def predictive(setting: Setting, idata: object, t_dense: np.ndarray, n_draws: int,
               rng: np.random.Generator) -> pd.DataFrame:
    post = posterior_dataset(idata)
    params = setting.params
    theta = np.stack([np.asarray(post[p].values).ravel() for p in params], axis=1)
    gamma = np.asarray(post["gamma"].values).ravel()
    ell = np.asarray(post["ell"].values).ravel()
    delta = np.asarray(post["delta"].values)
    delta = delta.reshape(-1, *delta.shape[-2:])        # (draws, time, output)
    t_obs = np.asarray(post["time"].values, dtype=np.float64)
    outputs = [str(o) for o in post["output"].values]
    idx = [setting.model.state_names.index(o) for o in outputs]
    total = theta.shape[0]
    pick = np.linspace(0, total - 1, min(n_draws, total)).round().astype(int)
    n_t, n_o = len(t_dense), len(outputs)
    f_s = np.full((len(pick), n_t, n_o), np.nan)
    d_s = np.full((len(pick), n_t, n_o), np.nan)
    for k, i in enumerate(pick):
        sol = setting.model.solve(theta[i], t_dense, sensitivities=False)
        if sol is None:
            continue
        f_s[k] = sol.z[:, idx]
        for o in range(n_o):
            ok = np.isfinite(delta[i, :, o])
            kd = se_kernel(t_dense, t_obs[ok], gamma[i], ell[i])
            koo = se_kernel(t_obs[ok], t_obs[ok], gamma[i], ell[i])
            lo, _ = robust_cholesky(koo)
            a = tri_solve(lo, kd.T)                            # L^-1 K_od
            mean = a.T @ tri_solve(lo, delta[i, ok, o])
            cov = se_kernel(t_dense, t_dense, gamma[i], ell[i]) - a.T @ a
            # the conditional covariance is singular at the observed times: draw through
            # its eigendecomposition with round-off negatives clipped to zero
            lam, vec = np.linalg.eigh(0.5 * (cov + cov.T))
            d_s[k, :, o] = mean + vec @ (np.sqrt(np.maximum(lam, 0.0)) * rng.standard_normal(n_t))
    good = np.all(np.isfinite(f_s), axis=(1, 2))
    f_s, d_s = f_s[good], d_s[good]
    xi = f_s + d_s
    rows = []
    for o, name in enumerate(outputs):
        block = {"time": t_dense, "output": name}
        for label, arr in (("xi", xi), ("f", f_s), ("delta", d_s)):
            q = np.quantile(arr[:, :, o], [0.025, 0.975], axis=0)
            block[f"{label}_mean"] = arr[:, :, o].mean(axis=0)
            block[f"{label}_lo"] = q[0]
            block[f"{label}_hi"] = q[1]
        rows.append(pd.DataFrame(block))
    out = pd.concat(rows, ignore_index=True)
    out["draws"] = int(good.sum())
    return out
