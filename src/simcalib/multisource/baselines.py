"""Direct least-squares calibration of each cheap low-fidelity model against the
high-fidelity training data, without an emulator (the baseline iPro-NC must beat to
be worth its cost when the low-fidelity model is cheap to run).

The objective sums, over output groups, the mean squared misfit divided by the
variance of the high-fidelity data of that group, so outputs of different units
weigh alike.  Parameters are optimised in [0, 1]-scaled bounds from several
starts; the standard error comes from the Gauss-Newton covariance
``s^2 (J^T J)^-1`` at the optimum (a local, Gaussian approximation).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import pandas as pd
from scipy import optimize


def least_squares_fit(model: Callable[[dict[str, float]], np.ndarray], y: np.ndarray,
                      groups: list[list[int]], bounds: dict[str, tuple[float, float]],
                      starts: np.ndarray, max_nfev: int = 200,
                      batch_model: Callable[[list[dict[str, float]]], list[np.ndarray]]
                      | None = None) -> dict[str, dict[str, float]]:
    """Minimise the group-normalised misfit of ``model(theta)`` (same shape as ``y``,
    NaN where undefined) over ``theta`` in ``bounds``; ``starts`` in [0, 1]^d.
    ``batch_model`` (several thetas in one vectorised call) speeds up the
    finite-difference Jacobian."""
    names = list(bounds)
    lo = np.array([bounds[n][0] for n in names])
    hi = np.array([bounds[n][1] for n in names])
    scale = np.ones(y.shape[1])
    for g in groups:
        v = np.nanvar(y[:, g])
        scale[g] = 1.0 / np.sqrt(max(v, 1e-300) * len(g))
    ok = np.isfinite(y)
    n_res = int(ok.sum())

    # least_squares evaluates the residual at a point and then its Jacobian there:
    # the Jacobian reuses that prediction instead of running the model again (one
    # batch of FE runs in d + 1 saved per Jacobian, same numbers)
    last: dict[bytes, np.ndarray] = {}    # the one point evaluated last

    def predict(z: np.ndarray) -> np.ndarray:
        key = np.asarray(z, float).tobytes()
        if key not in last:
            last.clear()
            last[key] = model(dict(zip(names, lo + z * (hi - lo), strict=True)))
        return last[key]

    def resid(z: np.ndarray) -> np.ndarray:
        # an undefined output (NaN) counts as a large misfit
        return to_resid(predict(z))

    def to_resid(pred: np.ndarray) -> np.ndarray:
        r = (pred - y) * scale
        return np.where(np.isfinite(r), r, 10.0)[ok] / np.sqrt(y.shape[0])

    def jac(z: np.ndarray) -> np.ndarray | str:
        h = np.where(z < 0.5, 1e-6, -1e-6)
        zs = [z + h[i] * np.eye(len(z))[i] for i in range(len(z))]
        preds = batch_model([dict(zip(names, lo + v * (hi - lo), strict=True)) for v in zs])
        r0 = to_resid(predict(z))
        return np.column_stack([(to_resid(p) - r0) / h[i] for i, p in enumerate(preds)])

    t0 = time.perf_counter()
    best = None
    for z0 in starts:
        res = optimize.least_squares(resid, z0, jac=jac if batch_model else "2-point",
                                     bounds=(0.0, 1.0), x_scale=1.0,
                                     xtol=1e-10, ftol=1e-10, max_nfev=max_nfev)
        if best is None or res.cost < best.cost:
            best = res
    z = best.x
    J = best.jac * (1.0 / (hi - lo))[None, :]        # d resid / d theta
    dof = max(n_res - len(names), 1)
    s2 = 2 * best.cost * y.shape[0] / dof
    try:
        cov = np.linalg.pinv(J.T @ J) * s2 / y.shape[0]
        se = np.sqrt(np.clip(np.diag(cov), 0, None))
    except np.linalg.LinAlgError:
        se = np.full(len(names), np.nan)
    theta = lo + z * (hi - lo)
    seconds = time.perf_counter() - t0
    return {n: {"mean": float(theta[i]), "sd": float(se[i]), "objective": float(2 * best.cost),
                "at_bound": bool(z[i] < 1e-6 or z[i] > 1 - 1e-6), "seconds": seconds}
            for i, n in enumerate(names)}


def to_frame(source: str, fit: dict[str, dict[str, float]], method: str) -> pd.DataFrame:
    rows = [{"source": source, "parameter": p, "method": method, "mean": v["mean"],
             "sd": v["sd"], "lower95": v["mean"] - 1.96 * v["sd"],
             "upper95": v["mean"] + 1.96 * v["sd"], "objective": v["objective"],
             "at_bound": v["at_bound"], "fit_seconds": v["seconds"]} for p, v in fit.items()]
    return pd.DataFrame(rows)


def start_points(d: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """Centre of the box plus ``n - 1`` uniform random starts."""
    return np.vstack([np.full((1, d), 0.5), rng.uniform(0.05, 0.95, (max(n - 1, 0), d))])
