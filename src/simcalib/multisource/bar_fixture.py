"""TEST FIXTURE: a 1-D bar stand-in for the hardening-law study (paper §4.2).

The study itself runs the finite-element specimen (:mod:`.hardening`,
:mod:`simcalib.simulators.tension_fe`); this fast reduced model stays for tests
(``multisource.hardening.model: bar``) and is not the paper's study.

A tensile bar (width W, thickness T, gauge length L) with a centred elliptical hole
of semi-axes ``a`` (across the width) and ``b`` (along the load) is pulled by a
prescribed displacement ``u`` of a reference point on its top end, bottom end fixed.
The bar is a 1-D chain of ``n_el`` two-node elements along the load axis; element e
carries the net cross-section of its mid-height,

    A(y) = T * (W - 2 a sqrt(1 - (y/b)^2))   for |y| < b,   T W otherwise,

so the same force F gives a higher stress next to the hole.  Each element follows
rate-independent J2 plasticity in 1-D with isotropic hardening sigma_y(eps_p): the
return mapping is eps_p,new = max(eps_p,old, sigma_y^{-1}(F / A)) (exact for a
statically determinate chain), and F at every step solves sum_e L_e eps_e(F) = u
by a safeguarded Newton iteration.  Lateral (x) and through-thickness (z) strains
are ``-nu sigma/E - eps_p / 2`` (elastic Poisson effect plus plastic
incompressibility), which is what makes nu observable.

Outputs per loading step: the reaction force F at the reference point and the
(x, y, z) displacements of 12 points on the top-left quadrant of the front surface
(x < 0, y > 0), ``ux = eps_x(y) X``, ``uy = integral of eps from the bottom``,
``uz = eps_z(y) T / 2``.

Limits (documented in docs/multisource.md): no stress concentration across the
section (the net-section stress is uniform, so the peak at the hole edge is
underestimated), no necking or localisation, no shear or bending, small strains,
monotonic loading (unloading would be elastic and is handled, but never occurs).
It is a fast, physically consistent stand-in for the paper's 3-D FE model, not a
replacement for it.

Materials: high fidelity = Holloman ``sigma0 + K eps_p^n`` with Table 2's fixed values;
low fidelity s1/s2 = Voce with one or two saturating terms,
``sigma0 + R0 eps_p + sum_i Rinf_i (1 - exp(-b_i eps_p))``, parameters over Table 2's
ranges.  Units: MPa, mm, N.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from simcalib.multisource.hardening import (  # noqa: F401  (the case's constants, re-exported)
    ELASTIC,
    GROUP_INDEX,
    HOLLOMAN,
    OUT_GROUPS,
    THETA,
    VOCE_RANGES,
    problem,
    with_noise,
)
from simcalib.simulators.fe.material import hardening
from simcalib.simulators.fe.specimen import surface_points


@dataclass(frozen=True)
class Geometry:
    width: float = 10.0
    thickness: float = 2.0
    length: float = 40.0
    n_el: int = 40

    def points(self) -> np.ndarray:
        """12 surface points of the top-left quadrant: (X, Y) in mm (the FE
        specimen's)."""
        return surface_points(self.width, self.length)


def hardening_inverse(law: str, p: dict[str, np.ndarray], sigma: np.ndarray,
                      start: np.ndarray | None = None) -> np.ndarray:
    """eps_p with sigma_y(eps_p) = sigma (0 below sigma0), vectorised.  ``start``
    (e.g. the previous plastic strain) must not exceed the root where sigma_y(start)
    <= sigma; elsewhere the result is not used by the caller."""
    over = sigma - p["sigma0"]
    if law == "holloman":
        return np.where(over > 0, (np.maximum(over, 0) / p["K"]) ** (1.0 / p["n"]), 0.0)
    # Voce is concave increasing: from a point left of the root Newton climbs to it
    # monotonically.  (sigma - sigma0 - sum Rinf) / R0 is such a point.
    sat = sum(p[f"Rinf{i}"] for i in (1, 2) if f"Rinf{i}" in p)
    eps = np.maximum((over - sat) / p["R0"], 0.0)
    if start is not None:
        eps = np.maximum(eps, start)
    tol = max(1e-11 * float(np.max(np.abs(sigma))), 1e-9)
    for _ in range(60):
        g, dg = hardening("voce", p, eps)
        res = g - sigma
        eps = np.maximum(eps - res / dg, 0.0)
        if np.max(np.abs(res) * (over > 0)) <= tol:
            break
    return np.where(over > 0, eps, 0.0)


def _slope(law: str, p: dict[str, np.ndarray], eps: np.ndarray) -> np.ndarray:
    """d sigma_y / d eps_p (large where eps_p -> 0 for Holloman)."""
    if law == "holloman":
        return p["K"] * p["n"] * np.maximum(eps, 1e-12) ** (p["n"] - 1)
    return hardening("voce", p, eps)[1]


def simulate(law: str, params: dict[str, np.ndarray | float], a: np.ndarray, b: np.ndarray,
             u_steps: np.ndarray, geom: Geometry = Geometry()) -> dict[str, np.ndarray]:
    """Run ``len(a)`` specimens through the loading history ``u_steps`` (mm).

    ``params`` values are scalars or arrays of length ``len(a)``.  Returns arrays
    ``F`` [n, steps], ``ux``, ``uy``, ``uz`` [n, steps, 12].  The hole region
    |y| < b is cut into ``geom.n_el`` elements; the two full-section parts above and
    below carry a uniform stress and are one element each.
    """
    a, b = np.atleast_1d(a).astype(float), np.atleast_1d(b).astype(float)
    n, half = a.size, geom.length / 2
    p = {k: np.broadcast_to(np.asarray(v, float), (n,))[:, None] for k, v in params.items()}
    t = np.linspace(-1.0, 1.0, geom.n_el + 1)
    edges = np.concatenate([np.full((n, 1), -half), b[:, None] * t[None, :],
                            np.full((n, 1), half)], axis=1)                # [n, n_el+3]
    ymid, le = (edges[:, 1:] + edges[:, :-1]) / 2, np.diff(edges, axis=1)
    rel = np.clip(1 - (ymid / b[:, None]) ** 2, 0, None)
    area = geom.thickness * (geom.width - 2 * a[:, None] * np.sqrt(rel))
    pts = geom.points()
    el = np.clip((edges[:, None, 1:-1] <= pts[None, :, 1:2]).sum(axis=2), 0, le.shape[1] - 1)
    rows = np.arange(n)[:, None]
    E, nu = p["E"], p["nu"]
    eps_p = np.zeros_like(area)
    F = np.zeros(n)
    out = {k: np.zeros((n, len(u_steps), 12)) for k in ("ux", "uy", "uz")}
    out["F"] = np.zeros((n, len(u_steps)))
    compliance = (le / area).sum(axis=1)
    for k, u in enumerate(u_steps):
        lo, hi = np.zeros(n), u / compliance * E[:, 0] * 1.0001       # elastic upper bound
        # Predictor: linear extrapolation of F(u); F is concave in u, so this lands
        # right of the root and Newton then converges monotonically.
        if k >= 2:
            du = (u - u_steps[k - 1]) / (u_steps[k - 1] - u_steps[k - 2])
            F = out["F"][:, k - 1] + du * (out["F"][:, k - 1] - out["F"][:, k - 2])
        elif k == 1:
            F = out["F"][:, 0] * u / u_steps[0]
        F = np.clip(F, lo, hi)
        for it in range(100):
            sig = F[:, None] / area
            ep = np.maximum(eps_p, hardening_inverse(law, p, sig, eps_p))
            r = ((sig / E + ep) * le).sum(axis=1) - u
            done = np.abs(r) <= 1e-8 * u
            if np.all(done):
                break
            lo, hi = np.where(r < 0, F, lo), np.where(r > 0, F, hi)
            dep = np.where(ep > eps_p, 1.0 / _slope(law, p, ep), 0.0)
            Fn = F - r / ((1.0 / E + dep) * le / area).sum(axis=1)
            # u(F) is increasing and convex (kinks only where an element starts to
            # yield, each raising the slope), so Newton overshoots at most once;
            # bisect when it leaves the bracket, and always after 40 iterations.
            bad = (Fn <= lo) | (Fn >= hi) | ~np.isfinite(Fn) | (it >= 40)
            F = np.where(done, F, np.where(bad, (lo + hi) / 2, Fn))
        sig = F[:, None] / area
        eps_p = np.maximum(eps_p, hardening_inverse(law, p, sig, eps_p))
        eps = sig / E + eps_p
        lateral = -nu * sig / E - 0.5 * eps_p
        disp = np.concatenate([np.zeros((n, 1)), np.cumsum(eps * le, axis=1)], axis=1)
        y_lo = edges[rows, el]
        out["uy"][:, k] = disp[rows, el] + eps[rows, el] * (pts[None, :, 1] - y_lo)
        out["ux"][:, k] = lateral[rows, el] * pts[None, :, 0]
        out["uz"][:, k] = lateral[rows, el] * geom.thickness / 2
        out["F"][:, k] = F
    return out


def to_rows(sim: dict[str, np.ndarray], a: np.ndarray, b: np.ndarray,
            u_steps: np.ndarray) -> dict[str, np.ndarray]:
    """Flatten (specimen, step) into rows with inputs a, b, u and the 37 outputs."""
    n, s = sim["F"].shape
    cols = {"specimen": np.repeat(np.arange(n), s), "a": np.repeat(a, s),
            "b": np.repeat(b, s), "u": np.tile(u_steps, n), "F": sim["F"].reshape(-1)}
    for g in ("ux", "uy", "uz"):
        flat = sim[g].reshape(n * s, 12)
        for i, c in enumerate(OUT_GROUPS[g]):
            cols[c] = flat[:, i]
    return cols


def law_of(source: str) -> str:
    return "holloman" if source == "s0" else "voce"


def source_params(source: str, theta: dict[str, np.ndarray] | None = None) -> dict:
    """Material parameters of a source: Holloman's fixed values for s0, else ``theta``
    (missing Voce terms of s1 are absent, so n = 1)."""
    if source == "s0":
        return dict(HOLLOMAN)
    return {k: theta[k] for k in THETA[source]}


def _design(n: int, names: list[str], rng: np.random.Generator,
            hole: tuple[float, float]) -> dict[str, np.ndarray]:
    d = {"a": rng.uniform(*hole, n), "b": rng.uniform(*hole, n)}
    for t in names:
        d[t] = rng.uniform(*VOCE_RANGES[t], n)
    return d


def generate(p: dict, rng: np.random.Generator) -> pd.DataFrame:
    """One long table (see :mod:`.problem`): per source ``n_train`` specimens for
    training, ``round(n * val_fraction)`` for validation and ``n_test`` for testing,
    each contributing one row per loading step.  LF parameters are drawn uniformly
    over Table 2's ranges; HF uses Holloman's fixed values.  ``noise_rel`` adds
    Gaussian noise with sd = noise_rel * sd(output group) to the HF rows."""
    geom = Geometry(n_el=int(p["n_el"]))
    u_steps = np.linspace(p["u_max"] / p["n_steps"], p["u_max"], int(p["n_steps"]))
    all_theta = THETA["s2"]
    frames = []
    spec_id = 0
    for src in ("s0", "s1", "s2"):
        n = int(p["n_train"][src])
        sizes = {"train": n, "val": max(1, round(n * p["val_fraction"])),
                 "test": int(p["n_test"])}
        for split, m in sizes.items():
            d = _design(m, THETA.get(src, []), rng, tuple(p["hole"]))
            theta = {t: d[t] for t in THETA.get(src, [])}
            sim = simulate(law_of(src), source_params(src, theta), d["a"], d["b"], u_steps, geom)
            cols = to_rows(sim, d["a"], d["b"], u_steps)
            cols["specimen"] = cols["specimen"] + spec_id
            spec_id += m
            df = pd.DataFrame(cols)
            for t in all_theta:
                df[t] = np.repeat(d[t], len(u_steps)) if t in theta else np.nan
            df.insert(0, "split", split)
            df.insert(0, "source", src)
            frames.append(df)
    return with_noise(pd.concat(frames, ignore_index=True), float(p["noise_rel"]), rng)


def lf_model(source: str, a: np.ndarray, b: np.ndarray, u_steps: np.ndarray, geom: Geometry
             ) -> Callable[[dict[str, float]], np.ndarray]:
    """theta -> outputs [n_specimens * steps, 37] of a Voce source (for least squares)."""
    def run(theta: dict[str, float]) -> np.ndarray:
        sim = simulate("voce", source_params(source, theta), a, b, u_steps, geom)
        cols = to_rows(sim, a, b, u_steps)
        return np.column_stack([cols[c] for g in OUT_GROUPS.values() for c in g])
    return run


def lf_batch_model(source: str, a: np.ndarray, b: np.ndarray, u_steps: np.ndarray,
                   geom: Geometry) -> Callable[[list[dict[str, float]]], list[np.ndarray]]:
    """Several thetas in one vectorised run (the specimens are tiled per theta)."""
    def run(thetas: list[dict[str, float]]) -> list[np.ndarray]:
        m, n = len(thetas), len(a)
        params = {k: np.repeat([t[k] for t in thetas], n) for k in THETA[source]}
        aa, bb = np.tile(a, m), np.tile(b, m)
        sim = simulate("voce", params, aa, bb, u_steps, geom)
        cols = to_rows(sim, aa, bb, u_steps)
        y = np.column_stack([cols[c] for g in OUT_GROUPS.values() for c in g])
        return np.split(y, m)
    return run


def lsq_fit(source: str, a: np.ndarray, b: np.ndarray, u_steps: np.ndarray, geom: Geometry,
            y: np.ndarray, starts: np.ndarray, max_nfev: int) -> dict[str, dict[str, float]]:
    """Least squares of a Voce source against outputs ``y`` of the specimens (a, b)."""
    from simcalib.multisource.baselines import least_squares_fit

    return least_squares_fit(lf_model(source, a, b, u_steps, geom), y, GROUP_INDEX,
                             {t: VOCE_RANGES[t] for t in THETA[source]}, starts,
                             max_nfev=max_nfev,
                             batch_model=lf_batch_model(source, a, b, u_steps, geom))


def theta_mse(p: dict, rng: np.random.Generator) -> pd.DataFrame:
    """theta^MSE of s1 and s2: least squares of the Voce model against the noise-free
    Holloman model on a ``mse_grid`` x ``mse_grid`` grid of hole geometries and the whole loading
    history, all
    parameters free.  ``theta_ref`` holds Holloman's E, nu, sigma0 (shared physics)."""
    from simcalib.multisource.baselines import start_points

    geom = Geometry(n_el=int(p["n_el"]))
    u_steps = np.linspace(p["u_max"] / p["n_steps"], p["u_max"], int(p["n_steps"]))
    g = np.linspace(*p["hole"], int(p["mse_grid"]))
    a, b = (v.ravel() for v in np.meshgrid(g, g))
    hf = simulate("holloman", HOLLOMAN, a, b, u_steps, geom)
    cols = to_rows(hf, a, b, u_steps)
    y = np.column_stack([cols[c] for grp in OUT_GROUPS.values() for c in grp])
    rows = []
    for src in ("s1", "s2"):
        names = THETA[src]
        fit = lsq_fit(src, a, b, u_steps, geom, y,
                      start_points(len(names), int(p["lsq_starts"]), rng),
                      int(p["lsq_max_nfev"]))
        for t in names:
            rows.append({"source": src, "parameter": t, "theta_mse": fit[t]["mean"],
                         "theta_ref": HOLLOMAN.get(t, np.nan) if t in ELASTIC else np.nan,
                         "objective": fit[t]["objective"]})
    return pd.DataFrame(rows)
