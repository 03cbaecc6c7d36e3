"""The analytic example of paper §4.1 (Eq. 10-12).

Three sources with three outputs and one input x in [-1, 2.2]: the high-fidelity
s0 (noisy, noise variances [0.025, 5e-5, 0.02]), s1 with two parameters and a
model-form error, s2 with one parameter and none (its theta^MSE is exactly -0.5).
Low-fidelity data are noise-free; their parameters are drawn uniformly in
[-1, 2.2].  Where ``log`` gets a non-positive argument (s1, output 2, e.g.
theta = (-1, -1) at x near 2.2) the output is NaN: a missing output, masked in the
loss.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import optimize

from simcalib.multisource.problem import ProblemSpec, SourceSpec

X_RANGE = (-1.0, 2.2)
THETA_RANGE = (-1.0, 2.2)
NOISE_VAR = (0.025, 5e-5, 0.02)
OUTPUTS = ("y1", "y2", "y3")
THETA = {"s1": ["theta1", "theta2"], "s2": ["theta1"]}


def _log(a: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(a > 0, np.log(np.where(a > 0, a, 1.0)), np.nan)


def f_s0(x: np.ndarray) -> np.ndarray:
    """Eq. 10, noise-free."""
    return np.stack([-0.5 * x**3 - 2.0 * x**2 + x + 1,
                     _log(-0.5 * x**3 + 2.0 * x**2 + 2.0 * x + 11),
                     -0.5 * x**3 + 2.0 * (x - 0.5) ** 2 - 2], axis=-1)


def f_s1(x: np.ndarray, t1: np.ndarray, t2: np.ndarray) -> np.ndarray:
    """Eq. 11 (model-form error: no theta reproduces s0)."""
    return np.stack([t1 * x**3 - t2 * x**2 + 2,
                     _log(t1 * x**3 + t2 * x**2 + 2.0 * x + 11),
                     t1 * x**3 + t2 * np.cosh(x - 0.3) - 3.5], axis=-1)


def f_s2(x: np.ndarray, t1: np.ndarray) -> np.ndarray:
    """Eq. 12 (theta1 = -0.5 reproduces s0 exactly)."""
    return np.stack([t1 * x**3 - 2.0 * x**2 + x + 1,
                     _log(t1 * x**3 + 2.0 * x**2 + 2.0 * x + 11),
                     t1 * x**3 + 2.0 * (x - 0.5) ** 2 - 2], axis=-1)


def f_source(name: str, x: np.ndarray, theta: dict[str, float | np.ndarray]) -> np.ndarray:
    if name == "s0":
        return f_s0(x)
    if name == "s1":
        return f_s1(x, theta["theta1"], theta["theta2"])
    if name == "s2":
        return f_s2(x, theta["theta1"])
    raise KeyError(name)


def problem() -> ProblemSpec:
    return ProblemSpec(
        sources=[SourceSpec("s0", [], True), SourceSpec("s1", THETA["s1"]),
                 SourceSpec("s2", THETA["s2"])],
        x=["x"], outputs={o: [o] for o in OUTPUTS})


def generate(n_train: dict[str, int], val_fraction: float, n_test: int,
             noise_var: list[float] | tuple[float, ...], rng: np.random.Generator
             ) -> pd.DataFrame:
    """One long table: per source n train rows, round(n * val_fraction) validation
    rows and ``n_test`` test rows.  ``true_y*`` columns hold the noise-free value."""
    frames = []
    for name in ("s0", "s1", "s2"):
        n = int(n_train[name])
        sizes = {"train": n, "val": max(1, round(n * val_fraction)), "test": int(n_test)}
        for split, m in sizes.items():
            x = rng.uniform(*X_RANGE, m)
            d = pd.DataFrame({"source": name, "split": split, "x": x})
            th = {t: rng.uniform(*THETA_RANGE, m) for t in THETA.get(name, [])}
            for t in ("theta1", "theta2"):
                d[t] = th.get(t, np.full(m, np.nan))
            y = f_source(name, x, th)
            true = y.copy()
            if name == "s0":
                y = y + rng.normal(size=y.shape) * np.sqrt(np.asarray(noise_var))
            for i, o in enumerate(OUTPUTS):
                d[o] = y[:, i]
                d[f"true_{o}"] = true[:, i]
            frames.append(d)
    return pd.concat(frames, ignore_index=True)


def theta_mse(source: str, n_grid: int = 2001) -> dict[str, float]:
    """theta minimising sum_i mean_x (f_LF,i - f_s0,i)^2 / var_x(f_s0,i) against the
    noise-free s0 on a uniform x grid, inside the parameter bounds."""
    x = np.linspace(*X_RANGE, n_grid)
    ref = f_s0(x)
    var = ref.var(axis=0)
    names = THETA[source]

    def obj(v: np.ndarray) -> float:
        y = f_source(source, x, dict(zip(names, v, strict=True)))
        if not np.all(np.isfinite(y)):
            return 1e6
        return float((((y - ref) ** 2).mean(axis=0) / var).sum())

    grid = np.linspace(*THETA_RANGE, 33)
    starts = (np.array(np.meshgrid(*[grid] * len(names))).reshape(len(names), -1).T)
    best = min(starts, key=obj)
    res = optimize.minimize(obj, best, method="L-BFGS-B", bounds=[THETA_RANGE] * len(names),
                            options={"ftol": 1e-14, "gtol": 1e-10})
    out = dict(zip(names, map(float, res.x), strict=True))
    out["objective"] = float(res.fun)
    return out
