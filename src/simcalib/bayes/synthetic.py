"""Synthetic data as in the paper (section 4.1.1).

theta* ~ U(bounds); gamma*, ell* from their log-normal priors; the discrepancy is one
draw from the MOS prior on a dense grid (the orthogonality constraint discretised on
that grid, so theta* stays the L2-minimiser of the true process); the true process
is ``xi = A z(theta*) + delta``; the data are ``xi`` at the n observation times (a
subset of the dense grid) plus N(0, sigma_eps^2) noise.  The same data serve KOH and
MOS of one replication.

A ``positive`` setting is simulated on the log scale, as it is fitted:
``xi = z(theta*) exp(delta)`` with delta orthogonal to the sensitivities of ``log z``,
and multiplicative log-normal noise, so the data stay positive.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from simcalib.bayes.data import ObsData
from simcalib.bayes.kernels import ObsLayout, mos_from_koh, robust_cholesky
from simcalib.bayes.models import Setting
from simcalib.errors import DataError


@dataclass
class SimulatedData:
    obs: ObsData
    truth: dict[str, Any]        # theta*, gamma*, ell*, noise variance
    dense_t: np.ndarray
    dense: dict[str, np.ndarray]  # xi, f, delta: (n_dense, J)


def simulate(setting: Setting, rng: np.random.Generator, refine: int = 10,
             max_tries: int = 100) -> SimulatedData:
    model = setting.model
    t_dense = setting.dense_times(refine)
    idx = np.array(setting.obs_index)
    n_out = len(idx)
    tries = 0
    for _ in range(max_tries):
        tries += 1
        u = rng.uniform(size=len(setting.params))
        theta = setting.lower + (setting.upper - setting.lower) * u
        sol = model.solve(theta, t_dense)
        if sol is not None and not (setting.positive and np.any(sol.z[:, idx] <= 0)):
            break
    else:
        raise DataError(setting.name, f"ODE failed for {max_tries} draws of theta")
    (mg, sg), (ml, sl) = setting.gamma_prior, setting.ell_prior
    gamma = float(np.exp(mg + sg * rng.standard_normal()))
    ell = float(np.exp(ml + sl * rng.standard_normal()))
    f = sol.z[:, idx]                                   # (n_dense, J)
    # output-major stacking of the dense grid
    t_all = np.tile(t_dense, n_out)
    o_all = np.repeat(np.arange(n_out), len(t_dense))
    layout = ObsLayout.build(t_all, o_all)
    c = layout.koh(gamma, ell)
    sens = sol.s[:, idx, :]
    if setting.positive:
        sens = sens / f[:, :, None]                     # sensitivities of log z
    jac = sens.transpose(1, 0, 2).reshape(n_out * len(t_dense), -1)
    lc, _ = robust_cholesky(c, start=1e-10, limit=1e-1)
    fac = mos_from_koh(c, jac)
    delta = fac.project(lc @ rng.standard_normal(len(t_all))).reshape(n_out, len(t_dense)).T
    obs_pos = np.arange(0, len(t_dense), refine)
    eps = np.sqrt(setting.noise_variance) * rng.standard_normal((len(obs_pos), n_out))
    if setting.positive:
        xi = f * np.exp(delta)
        y = xi[obs_pos] * np.exp(eps)
    else:
        xi = f + delta
        y = xi[obs_pos] + eps
    truth = {"setting": setting.name, "theta": dict(zip(setting.params, map(float, theta),
                                                         strict=True)),
             "gamma": gamma, "ell": ell, "noise_variance": setting.noise_variance,
             "theta_attempts": tries, "outputs": list(setting.observed)}
    return SimulatedData(ObsData(t_dense[obs_pos], y, list(setting.observed)), truth, t_dense,
                         {"xi": xi, "f": f, "delta": delta})
