"""Sampling every target's posterior at once: differential-evolution Metropolis.

Lanes are (target, chain) pairs; each iteration evaluates the metamodel once on all
lanes (a few hundred rows), so 10 targets x 4 chains cost about what one target does.

Why this sampler:

* The posterior of a calibration is often a ridge or a curve (inputs that trade off,
  Rosenbrock's valley) or has several modes; a random walk with one covariance mixes
  badly along a curve.  Proposals x' = x + g (z1 - z2) + e with z1, z2 drawn from an
  archive of the target's own past states (DE-MCz, ter Braak & Vrugt 2008) take the
  posterior's local shape from the archive; g = 1 on one step in ten jumps between modes.
* Integer inputs make the likelihood piecewise constant in the sampler's coordinates
  (:mod:`.density`), so a gradient-based sampler does not apply; Metropolis does.
* Exactness: during warm-up the archive grows and the step size adapts to an
  acceptance of ~0.25 per target; after warm-up both are frozen, so the proposal is a
  fixed symmetric mixture (the pair (z1, z2) is as likely as (z2, z1)) and the chains
  are exact Metropolis chains whose diagnostics mean what they say.
* Starts: importance resampling of ``init_draws`` prior draws per target, so chains
  start spread over the regions of high posterior mass, several modes included.

Chains run in blocks of ``draws`` iterations until every target's rank-normalised
R-hat <= ``r_hat`` and bulk ESS >= ``ess_bulk`` for every coordinate, or
``max_draws`` iterations in all; a target that misses is flagged, never dropped.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from simcalib.bayes.convergence import stable
from simcalib.metamodel.posterior.density import Posterior
from simcalib.progress import eta

log = logging.getLogger(__name__)

#: step-size adaptation target and the share of mode-jumping (g = 1) proposals
TARGET_ACCEPT = 0.25
JUMP_SHARE = 0.1
JITTER = 1e-5
#: share of proposals that redraw one integer input's cell (studies with integers)
CELL_SHARE = 0.1


@dataclass
class Draws:
    """Posterior draws of T targets: coordinates U (C, N, T, D), tunables X
    (C, N, T, d), log density (C, N, T), diagnostics per target and coordinate."""

    post: Posterior
    U: np.ndarray
    X: np.ndarray
    logp: np.ndarray
    r_hat: np.ndarray
    ess_bulk: np.ndarray
    diag_mask: np.ndarray     # (T, D): which coordinates are diagnosed (tau only if inferred)
    converged: np.ndarray     # (T,)
    acceptance: np.ndarray    # (T,)
    iterations: int
    seconds: float
    cpu_seconds: float
    settings: dict[str, Any]

    @property
    def tau(self) -> np.ndarray | None:
        """(C, N, T) draws of tau (nan for targets that do not infer it)."""
        if self.post.D == self.post.d:
            return None
        return np.where(self.post.infer[None, None, :], np.exp(self.U[..., self.post.d]),
                        np.nan)

    def flat(self, t: int) -> np.ndarray:
        """Target ``t``'s tunable draws, chains concatenated: (C N, d)."""
        return self.X[:, :, t, :].reshape(-1, self.post.d)


def diagnostics(U: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rank-normalised R-hat and bulk ESS (ArviZ) of every (target, coordinate) of
    draws (chains, draws, T, D).  Computed on the sampler's coordinates: a monotone
    map of each continuous input (rank-normalised diagnostics are invariant to it)
    and, for an integer input, the continuous coordinate whose mixing implies the
    integer's."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import arviz as az

        ds = az.convert_to_dataset({"u": np.asarray(U)})
        r = np.asarray(az.rhat(ds)["u"].values, dtype=float)
        e = np.asarray(az.ess(ds, method="bulk")["u"].values, dtype=float)
    return r, e


def ladder(n: int, t_max: float) -> np.ndarray:
    """Inverse temperatures 1 > ... > 1 / t_max, geometric (n rungs; n = 1: no tempering)."""
    if n <= 1:
        return np.ones(1)
    return float(t_max) ** (-np.arange(n) / (n - 1))


def sample(post: Posterior, settings: Mapping[str, Any], rng: np.random.Generator,
           label: str = "posterior", warn: bool = True) -> Draws:
    """Sample every target of ``post`` (see module doc for the scheme)."""
    t_wall, t_cpu = time.perf_counter(), time.process_time()
    C = int(settings["chains"])
    warmup = int(settings["warmup"])
    block = int(settings["draws"])
    max_draws = max(block, int(settings["max_draws"]))
    r_max, ess_min = float(settings["r_hat"]), float(settings["ess_bulk"])
    beta = ladder(int(settings["temperatures"]), float(settings["max_temperature"]))
    K = len(beta)
    T, D, d = len(post.targets), post.D, post.d
    G = T * K                                    # groups: (target, rung), target-major
    L = G * C                                    # lanes: (target, rung, chain)
    lane_g = np.repeat(np.arange(G), C)
    lane_t = lane_g // K
    lane_b = beta[lane_g % K]
    int_dims = np.flatnonzero(post.space.integer_mask)
    # ---- starts and initial archives: importance resampling of prior draws (each rung
    # resamples with its own tempered weights)
    n0 = int(settings["init_draws"])
    M = max(C, int(settings["archive"]))
    U0 = post.sample_prior(n0, np.arange(T), rng).reshape(T, n0, D)
    lpr0, ll0 = post.parts(U0.reshape(T * n0, D), np.repeat(np.arange(T), n0))
    lpr0, ll0 = lpr0.reshape(T, n0), ll0.reshape(T, n0)
    U = np.empty((L, D))
    archive = np.empty((G, M, D))
    for g in range(G):
        i, b = divmod(g, K)
        w = lpr0[i] + beta[b] * ll0[i]
        p = np.exp(w - np.max(w))
        p = p / p.sum()
        nz = int((p > 0).sum())
        U[g * C:(g + 1) * C] = U0[i, rng.choice(n0, size=C, replace=nz < C, p=p)]
        archive[g] = U0[i, rng.choice(n0, size=M, replace=True, p=p)]
    lpr, ll = post.parts(U, lane_t)
    scale = np.ones(G)
    g0 = 2.38 / np.sqrt(2.0 * D)
    fill = np.zeros(G, dtype=int)

    def step(U: np.ndarray, lpr: np.ndarray, ll: np.ndarray, scale: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        i1 = rng.integers(0, M, L)
        i2 = (i1 + rng.integers(1, M, L)) % M
        jump = rng.random(L) < JUMP_SHARE
        g = np.where(jump, 1.0, g0 * scale[lane_g])
        prop = U + g[:, None] * (archive[lane_g, i1] - archive[lane_g, i2]) \
            + JITTER * rng.standard_normal((L, D))
        if len(int_dims):
            # a fresh cell for one integer input (others unchanged): symmetric, and
            # what lets a chain leave an integer value whose neighbours it cannot see
            cell = rng.random(L) < CELL_SHARE
            j = int_dims[rng.integers(0, len(int_dims), L)]
            rows = np.flatnonzero(cell)
            prop[rows] = U[rows]
            prop[rows, j[rows]] = rng.random(len(rows))
        ppr, pll = post.parts(prop, lane_t)
        acc = np.log(rng.random(L)) < (ppr + lane_b * pll) - (lpr + lane_b * ll)
        U = np.where(acc[:, None], prop, U)
        lpr = np.where(acc, ppr, lpr)
        ll = np.where(acc, pll, ll)
        return U, lpr, ll, acc, jump

    def swap(U: np.ndarray, lpr: np.ndarray, ll: np.ndarray, parity: int
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Exchange states of adjacent rungs (even or odd pairs), per target and chain."""
        if K < 2:
            return U, lpr, ll
        Uv, pv, lv = U.reshape(T, K, C, D), lpr.reshape(T, K, C), ll.reshape(T, K, C)
        for k in range(parity, K - 1, 2):
            a = np.log(rng.random((T, C))) < (beta[k] - beta[k + 1]) * (lv[:, k + 1]
                                                                       - lv[:, k])
            for arr in (Uv, pv, lv):
                m = a[..., None] if arr.ndim == 4 else a
                lo, hi = arr[:, k].copy(), arr[:, k + 1].copy()
                arr[:, k] = np.where(m, hi, lo)
                arr[:, k + 1] = np.where(m, lo, hi)
        return Uv.reshape(L, D), pv.reshape(L), lv.reshape(L)

    # ---- warm-up: archives grow, step sizes adapt
    half = warmup // 2
    every = max(1, (warmup - half) * C // M)
    acc_n = np.zeros(G)
    acc_d = np.zeros(G)
    for it in range(warmup):
        U, lpr, ll, acc, jump = step(U, lpr, ll, scale)
        U, lpr, ll = swap(U, lpr, ll, it % 2)
        acc_n += np.bincount(lane_g, acc & ~jump, minlength=G)
        acc_d += np.bincount(lane_g, ~jump, minlength=G)
        if it < half or (it - half) % every == 0:
            pos = (fill[:, None] + np.arange(C)) % M
            archive[np.arange(G)[:, None], pos] = U.reshape(G, C, D)
            fill += C
        if (it + 1) % 50 == 0:
            rate = acc_n / np.maximum(acc_d, 1)
            scale = np.clip(scale * np.exp(2.0 * (rate - TARGET_ACCEPT)), 1e-4, 10.0)
            acc_n[:] = 0
            acc_d[:] = 0
    # ---- sampling with archives and step sizes frozen (exact Metropolis, exact swaps)
    cold = (np.arange(L) // C) % K == 0
    chunks_U, chunks_lp = [], []
    acc_total = np.zeros(T)
    n = 0
    diag_mask = np.ones((T, D), dtype=bool)
    if D > d:
        diag_mask[:, d] = post.infer
    t_loop = time.perf_counter()
    it = warmup
    while True:
        bu = np.empty((block, T * C, D))
        bl = np.empty((block, T * C))
        for k in range(block):
            U, lpr, ll, acc, _ = step(U, lpr, ll, scale)
            U, lpr, ll = swap(U, lpr, ll, it % 2)
            it += 1
            bu[k], bl[k] = U[cold], (lpr + ll)[cold]
            acc_total += np.bincount(lane_t[cold], acc[cold], minlength=T)
        chunks_U.append(bu)
        chunks_lp.append(bl)
        n += block
        allU = np.concatenate(chunks_U).reshape(n, T, C, D).transpose(2, 0, 1, 3)
        r_hat, ess = diagnostics(allU)
        ok = _converged(r_hat, ess, diag_mask, r_max, ess_min)
        log.info("%s: %d draws per chain; %d/%d targets converged (max R-hat %.4f, min "
                 "bulk ESS %.0f); %s", label, n, int(ok.sum()), T,
                 float(np.nanmax(np.where(diag_mask, r_hat, np.nan))),
                 float(np.nanmin(np.where(diag_mask, ess, np.nan))),
                 eta(time.perf_counter() - t_loop, n, max_draws))
        if ok.all() or n + block > max_draws:
            break
    allL = np.concatenate(chunks_lp).reshape(n, T, C).transpose(2, 0, 1)
    X = post.to_x(allU.reshape(-1, D), np.tile(np.arange(T), C * n)).reshape(C, n, T, d)
    unconverged = [post.targets[i].target_id for i in np.flatnonzero(~ok)]
    if unconverged and warn:
        log.warning("%s: the chains of target(s) %s did not converge in %d draws per chain "
                    "(R-hat <= %g and bulk ESS >= %g): their posteriors are flagged "
                    "converged = False", label, unconverged, n, r_max, ess_min)
    return Draws(post, allU, X, allL, np.vectorize(stable)(r_hat), np.vectorize(stable)(ess),
                 diag_mask, ok, acc_total / (n * C), warmup + n,
                 time.perf_counter() - t_wall, time.process_time() - t_cpu, dict(settings))


def _converged(r_hat: np.ndarray, ess: np.ndarray, mask: np.ndarray, r_max: float,
               ess_min: float) -> np.ndarray:
    good = np.isfinite(r_hat) & (r_hat <= r_max) & (ess >= ess_min)
    return np.all(good | ~mask, axis=1)
