"""Vectorised Metropolis-within-Gibbs: every chain of a run advanced in one step.

Same algorithm as :class:`simcalib.bayes.sampler.Sampler` (paper Algorithm 1: a
random-walk block on ``(theta, log gamma, log ell)`` with delta integrated out, then
exact Gibbs draws of delta and sigma^2), same posterior; what changes is cost per
effective sample:

* **lock-step lanes**: the C chains are lanes of one array program; forward solves,
  covariances, Cholesky factorisations and triangular solves are batched over lanes
  (:mod:`simcalib.bayes.batched`), and KOH lanes never solve sensitivities;
* **theta on its own scale by default** (``theta_scale: linear``; coordinates
  ``u = (theta - LB) / (UB - LB)``, proposals outside the bounds rejected and
  counted, as the sequential engine).  ``theta_scale: logit`` proposes
  ``u = logit((theta - LB) / (UB - LB))`` with the Jacobian in the target, so no
  proposal leaves the bounds; it was the default until measured: on
  FitzHugh-Nagumo KOH (a* = 0.89 near its bound 1) the logit's stretching bent the
  posterior and the bulk ESS of 10,000 iterations fell from 254 to 12, on four-mass
  KOH from 63 to 13 (docs/bayes.md); ``gamma`` and ``ell`` are proposed on the log
  scale (sigma^2 has an exact Gibbs draw);
* **better adaptation**: the initial proposal is shaped by the Gauss-Newton
  covariance at the start (``(J^T J / s^2)^{-1}``, regularised by the bound widths)
  instead of a fixed diagonal; during burn-in the covariance is re-estimated from the
  **pooled** draws of all chains every ``max(25, adapt_every // 4)`` iterations and
  each lane's scale follows its own acceptance rate towards 0.234 every 25
  iterations.  Adaptation stops at the end of burn-in (unless
  ``adapt_after_burn_in``), so the kept draws come from a fixed kernel.

* **gradient-informed proposals** (``theta_kernel: mala | hmc``, default ``mwg``): the
  block is moved by Langevin (one leapfrog step) or Hamiltonian (``leapfrog_steps``)
  proposals from the gradient of its log target (:meth:`LockstepSampler.gradient`,
  from the forward sensitivities), preconditioned by the same adapted covariance,
  the step scale tuned towards 57.4 % / 70 % acceptance; log sigma^2 joins the block
  (on the marginal with delta integrated out) and delta keeps its exact draw, for the
  output only.  Measured against the random walk and NumPyro NUTS in docs/bayes.md
  ("Against NUTS"): HMC up to 8.6x the random walk's ESS per CPU-second (two-mass
  KOH), about equal on FitzHugh-Nagumo MOS and on four-mass KOH on the linear scale;

* **KOH on a full grid as one block** (:class:`simcalib.bayes.batched.KronLayout`):
  ``C + sigma^2 I = I_J kron (gamma K + sigma^2 I_T)``, so one T x T factor per lane
  instead of an m x m one (J^3 fewer flops, the same matrices);
* **replications as lanes** (:func:`run_lockstep_many`): independent runs of one
  setting and method (the paper's 100 simulated data sets) share one array program,
  lanes ``g * chains ... (g + 1) * chains - 1`` being run g; each run keeps its own data,
  hyperprior, random stream (:class:`Streams`), pooled proposal covariance and
  convergence record, so a run's draws do not depend on which runs share its batch
  (equal to the run alone up to floating-point round-off).  What is shared is the
  per-call overhead, which dominates on the small (m <= 100) covariances here: on
  four-mass KOH the sampler's CPU per chain falls ~2.5x from 1 to 50 runs a batch.

:func:`run_lockstep` also extends the chains in blocks until they converge when
``until_converged`` is set (see :func:`simcalib.bayes.sampler.run`); batches of
several runs run a fixed length.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from simcalib.bayes.batched import (
    BatchedForward,
    FullLayout,
    KronLayout,
    MosBatch,
    batch_cholesky,
    chol_solve_batch,
)
from simcalib.bayes.convergence import ESS_BULK_MIN, R_HAT_MAX
from simcalib.bayes.models import HYPER
from simcalib.bayes.modes import poorly_explored
from simcalib.bayes.protocol import HyperPrior
from simcalib.errors import DataError
from simcalib.progress import eta

log = logging.getLogger(__name__)


def _sigmoid(u: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * u))


class Streams:
    """One random stream per run of a batch.  Every draw is made run by run from that
    run's own generator, with the shapes the run would use alone, so batching never
    changes a run's random numbers."""

    def __init__(self, rngs: list[np.random.Generator], slices: list[slice]) -> None:
        self.rngs, self.slices = rngs, slices
        self.chains = slices[0].stop - slices[0].start

    def normal(self, tail: tuple[int, ...], groups: Any = None) -> np.ndarray:
        """Standard normals of shape (lanes, *tail); ``groups`` (default all) draw,
        the other runs' rows are zero and their streams untouched."""
        out = np.zeros((len(self.rngs) * self.chains, *tail))
        for g in range(len(self.rngs)) if groups is None else groups:
            out[self.slices[g]] = self.rngs[g].standard_normal((self.chains, *tail))
        return out

    def uniform(self) -> np.ndarray:
        return np.concatenate([r.uniform(size=self.chains) for r in self.rngs])

    def gamma(self, shape: np.ndarray) -> np.ndarray:
        """Gamma(shape[g], 1) draws, ``shape`` one value per run."""
        return np.concatenate([r.gamma(shape[g], size=self.chains)
                               for g, r in enumerate(self.rngs)])


def _check_batch(pbs: list[Any]) -> None:
    """Runs batched together must share the setting, method and observation layout
    (one forward model and one covariance layout serve every lane)."""
    first = pbs[0]
    for pb in pbs[1:]:
        same = (pb.setting.name == first.setting.name and pb.method == first.method
                and pb.positive == first.positive and pb.m == first.m
                and np.array_equal(pb.t, first.t) and np.array_equal(pb.ti, first.ti)
                and np.array_equal(pb.si, first.si)
                and np.array_equal(pb.lower, first.lower)
                and np.array_equal(pb.upper, first.upper))
        if not same:
            raise ValueError("runs batched as lanes need the same setting, method, bounds "
                             f"and observation times/outputs ({first.setting.name} "
                             f"{first.method} vs {pb.setting.name} {pb.method})")


class LockstepSampler:
    """All chains of one or more runs (same setting and method, each its own data) as
    lanes of one array program: run g owns lanes ``g * chains ... (g + 1) * chains - 1``."""

    def __init__(self, pbs: list[Any], cfg: Any, hypers: list[Any], chains: int,
                 kron: bool = True) -> None:
        _check_batch(pbs)
        self.pb, self.cfg = pbs[0], cfg
        pb = self.pb
        self.n_group, self.chains = len(pbs), chains
        self.n_lane = self.n_group * chains
        self.group = np.repeat(np.arange(self.n_group), chains)
        self.slices = [slice(g * chains, (g + 1) * chains) for g in range(self.n_group)]
        self.hyper = HyperPrior.for_lanes(hypers, self.group)
        self.p = pb.p
        self.span = pb.upper - pb.lower
        self.mos = pb.method == "mos"
        self.logit = cfg.theta_scale == "logit"
        # theta block kernel: random-walk (mwg) or gradient-informed (mala, hmc)
        self.kernel = cfg.theta_kernel
        steps = cfg.leapfrog_steps
        if isinstance(steps, dict):          # one count per method ({koh: 6, mos: 3})
            steps = steps[pb.method]
        self.leapfrog = {"mwg": 0, "mala": 1}.get(self.kernel, steps)
        # gradient kernels on the linear scale: bounce off theta's bounds instead of
        # rejecting the trajectory there (an exact billiard, see _drift)
        self.reflect = (self.leapfrog > 0 and not self.logit
                        and getattr(cfg, "theta_boundary", "reject") == "reflect")
        self.target_accept = TARGET_ACCEPT[self.kernel]
        # the gradient kernels move log sigma^2 in the block too (coordinate p), on
        # the marginal with delta integrated out; the random walk keeps its Gibbs draw
        self.s2_in_block = self.leapfrog > 0
        self.d = pb.p + 2 + int(self.s2_in_block)
        self.fwd = BatchedForward(pb)
        # KOH on a full grid: one T x T factor per lane instead of m x m (same matrices)
        block = KronLayout.of(pb) if kron else None
        self.cov: FullLayout | KronLayout = block if block is not None else FullLayout(
            pb.layout)
        self.y = np.stack([q.y for q in pbs])[self.group]            # (lanes, m)
        prior = np.array([q.setting.sigma2_prior for q in pbs], dtype=np.float64)
        self.a0_group = prior[:, 0]
        self.a0 = prior[self.group, 0]
        self.b0 = prior[self.group, 1]

    # ------------------------------------------------------------- coordinates
    def to_theta(self, u: np.ndarray) -> np.ndarray:
        if self.logit:
            return self.pb.lower + self.span * _sigmoid(u)
        return self.pb.lower + self.span * u

    def to_u(self, theta: np.ndarray) -> np.ndarray:
        s = (theta - self.pb.lower) / self.span
        if not self.logit:
            return s
        s = np.clip(s, 1e-9, 1 - 1e-9)
        return np.log(s) - np.log1p(-s)

    def log_jacobian(self, u: np.ndarray) -> np.ndarray:
        """``log |dtheta/du|`` summed over theta, up to a constant (0 on the linear
        scale; ``sum log s (1 - s)`` through the logit)."""
        if not self.logit:
            return np.zeros(u.shape[0])
        return np.sum(-np.logaddexp(0.0, -u) - np.logaddexp(0.0, u), axis=1)

    def sigma2_of(self, x: np.ndarray, sigma2: np.ndarray) -> np.ndarray:
        """The states' sigma^2: their coordinate when it is in the block, else the
        Gibbs-drawn ``sigma2``."""
        return np.exp(np.clip(x[:, self.p], -700, 700)) if self.s2_in_block else sigma2

    def log_prior_s2(self, x: np.ndarray) -> np.ndarray:
        """sigma^2's inverse-gamma prior as a density of ``log sigma^2`` (Jacobian
        included, constants dropped): ``-alpha log s2 - beta / s2``; 0 when sigma^2 is
        drawn by Gibbs (its prior enters there)."""
        if not self.s2_in_block:
            return np.zeros(x.shape[0])
        ls2 = np.clip(x[:, self.p], -700, 700)
        return -self.a0 * ls2 - self.b0 * np.exp(-ls2)

    def grad_log_jacobian(self, u: np.ndarray) -> np.ndarray:
        """Gradient of :meth:`log_jacobian` in u: ``1 - 2 s`` through the logit."""
        if not self.logit:
            return np.zeros_like(u)
        return 1.0 - 2.0 * _sigmoid(u)

    def dtheta_du(self, u: np.ndarray) -> np.ndarray:
        if not self.logit:
            return np.broadcast_to(self.span, u.shape)
        s = _sigmoid(u)
        return self.span * s * (1 - s)

    def log_prior(self, x: np.ndarray) -> np.ndarray:
        """Log prior density of the sampling coordinates: uniform theta (on the linear
        scale ``-inf`` outside the bounds, through the logit its Jacobian), plus the
        hyperprior of log gamma, log ell."""
        u = x[:, : self.p]
        lp = (self.log_jacobian(u) + self.hyper.log_density(x[:, -2], x[:, -1])
              + self.log_prior_s2(x))
        if not self.logit:
            lp = np.where(np.all((u >= 0.0) & (u <= 1.0), axis=1), lp, -np.inf)
        return lp

    # ------------------------------------------------------------- state
    def evaluate(self, x: np.ndarray, sigma2: np.ndarray, lanes: np.ndarray
                 ) -> dict[str, Any]:
        """Everything the chain keeps for the states ``x`` (C, d) at ``sigma2``: forward
        output, covariances, Cholesky factor of ``C_delta + sigma2 I`` and the log
        posterior (``-inf`` for lanes not in ``lanes``, out of the prior's support,
        or whose solve failed)."""
        n_lane = x.shape[0]
        prior = self.log_prior(x)
        sigma2 = self.sigma2_of(x, sigma2)
        live = lanes & np.isfinite(prior)
        theta = self.to_theta(x[:, : self.p])
        f = np.zeros((n_lane, self.pb.m))
        ok = np.zeros(n_lane, dtype=bool)
        jac = None
        sens = self.mos or self.leapfrog > 0     # gradients need J for KOH too
        if live.any():
            fl, jl, okl = self.fwd(theta[live], sens)
            f[live] = fl
            ok[live] = okl
            if jl is not None:
                jac = np.zeros((n_lane, self.pb.m, self.p))
                jac[live] = jl
        if sens and jac is None:
            jac = np.zeros((n_lane, self.pb.m, self.p))
        ode_fail = live & ~ok
        # covariances for every lane (cheap); lanes that are not ok get -inf below
        gam = np.exp(np.clip(x[:, -2], -700, 700))
        ell = np.exp(np.clip(x[:, -1], -700, 700))
        c = self.cov.covariance(gam, ell)
        mos = None
        reg = np.zeros(n_lane, dtype=int)
        chol_fail = np.zeros(n_lane, dtype=bool)
        if self.mos:
            assert jac is not None
            jac_safe = np.where(ok[:, None, None], jac, 1.0)
            mos = MosBatch(c, jac_safe)
            chol_fail |= ok & ~mos.ok
            ok &= mos.ok
            c_delta = mos.c_delta
            reg += np.where(ok, mos.regularised, 0)
        else:
            c_delta = c
        ll, chol, ok_l, jit = self.cov.loglik(c_delta, sigma2, self.y - f)
        reg += (jit & ok).astype(int)
        chol_fail |= ok & ~ok_l
        ok &= ok_l
        lp = np.where(ok, ll + prior, -np.inf)
        return {"x": x, "theta": theta, "f": f, "jac": jac, "c": c, "c_delta": c_delta,
                "mos": mos,
                "chol": chol, "lp": lp, "ok": ok, "ode_fail": ode_fail,
                "out_of_support": lanes & ~np.isfinite(prior), "regularised": reg,
                "chol_fail": chol_fail}

    @staticmethod
    def accept(st: dict[str, Any], new: dict[str, Any], take: np.ndarray) -> None:
        for key in ("x", "theta", "f", "c", "c_delta", "chol", "lp", "jac", "grad"):
            if st.get(key) is not None:
                st[key][take] = new[key][take]
        if st["mos"] is not None:
            st["mos"].take(take, new["mos"])

    def gradient(self, st: dict[str, Any], sigma2: np.ndarray) -> np.ndarray:
        """Gradient (C, d) of the log target in the sampling coordinates
        ``(u, log sigma^2, log gamma, log ell)`` at the evaluated states ``st`` (with
        ``st["chol"]`` the factor of ``C_delta + sigma^2 I``), from the sensitivities ``J``:

        * theta: ``J^T alpha`` with ``alpha = Sigma^{-1} (y - f)``, times ``dtheta/du``,
          plus the logit Jacobian's gradient;
        * log gamma, log ell: ``alpha^T dSigma alpha / 2 - tr(Sigma^{-1} dSigma) / 2``
          plus the hyperprior's gradient, with ``dSigma = C_delta`` for log gamma
          (``C_delta`` is homogeneous in gamma, KOH and MOS) and ``C o d2 / ell^2`` for
          log ell (MOS: projected, ``P (C o d2 / ell^2) P^T`` with
          ``P = I - C J (J^T C J)^{-1} J^T``), likewise ``dSigma = sigma^2 I`` for
          log sigma^2, plus its prior's gradient ``-alpha + beta / sigma^2``.

        Exact for KOH.  For MOS, ``C_delta`` also depends on theta through J, whose
        derivative would need second-order sensitivities: that term is left out.  The
        proposal is then guided by an approximate gradient, which leaves the chain
        exact (any deterministic force field gives a volume-preserving, reversible
        leapfrog; the Metropolis test uses the true density).  Lanes not in the
        support get a zero gradient."""
        x, p = st["x"], self.p
        n_lane = x.shape[0]
        g = np.zeros((n_lane, self.d))
        ok = np.isfinite(st["lp"])
        if not ok.any():
            return g
        kron = isinstance(self.cov, KronLayout)
        n = self.cov.size
        resid = self.y - st["f"]
        r = self.cov.to_blocks(resid) if kron else resid[:, :, None]     # (C, n, k)
        k = r.shape[2]
        with np.errstate(all="ignore"):
            sinv = chol_solve_batch(st["chol"], np.broadcast_to(np.eye(n), (n_lane, n, n)))
            alpha = sinv @ r
            a_flat = self.cov.from_blocks(alpha) if kron else alpha[:, :, 0]
            g_theta = np.einsum("cmp,cm->cp", st["jac"], a_flat)
            g[:, :p] = g_theta * self.dtheta_du(x[:, :p]) + self.grad_log_jacobian(x[:, :p])

            def hyper_term(ds: np.ndarray) -> np.ndarray:
                quad = np.einsum("cik,cij,cjk->c", alpha, ds, alpha)
                return 0.5 * quad - 0.5 * k * np.einsum("cij,cji->c", sinv, ds)

            g[:, -2] = hyper_term(st["c_delta"])
            if self.s2_in_block:
                s2 = self.sigma2_of(x, sigma2)
                quad = np.einsum("cik,cik->c", alpha, alpha)
                tr = np.einsum("cii->c", sinv)
                g[:, p] = (0.5 * s2 * (quad - k * tr) - self.a0 + self.b0 / s2)
            ell2 = np.exp(2.0 * np.clip(x[:, -1], -300, 300))
            d2 = (self.cov.block if kron else self.cov.layout).d2
            dc = st["c"] * d2[None] / ell2[:, None, None]
            mos = st["mos"]
            if mos is not None and mos.js.shape[2] > 0:
                q = chol_solve_batch(mos.lg, np.swapaxes(mos.js, 1, 2))   # G^{-1} J^T
                proj = np.eye(n)[None] - mos.cj @ q
                dc = proj @ dc @ np.swapaxes(proj, 1, 2)
            g[:, -1] = hyper_term(dc)
            g[:, -2:] += self.hyper.grad(x[:, -2], x[:, -1])
        return np.where(ok[:, None] & np.isfinite(g), g, 0.0)

    # ------------------------------------------------------------- start
    def start(self, starts: np.ndarray, hyper0: np.ndarray, sigma2: np.ndarray,
              streams: Streams) -> dict[str, Any]:
        """Lanes start at ``starts`` (C, p) jittered by the initial step (retrying up to
        100 times per lane; a run draws again only while one of its lanes needs it),
        hyperparameters at ``hyper0`` (C, 2) jittered likewise."""
        cfg, n_lane = self.cfg, starts.shape[0]
        lo, hi = self.pb.lower + 1e-6 * self.span, self.pb.upper - 1e-6 * self.span
        st = None
        need = np.ones(n_lane, dtype=bool)
        x = np.zeros((n_lane, self.d))
        for _ in range(100):
            groups = [g for g, sl in enumerate(self.slices) if need[sl].any()]
            z_th = streams.normal((self.p,), groups)
            z_h = streams.normal((2,), groups)
            th = np.clip(starts + cfg.initial_step * self.span * z_th, lo, hi)
            parts = [self.to_u(th), hyper0 + cfg.initial_step_log * z_h]
            if self.s2_in_block:
                ls2 = np.log(sigma2) + cfg.initial_step_log * streams.normal((1,), groups)[:, 0]
                parts.insert(1, ls2[:, None])
            xn = np.concatenate(parts, axis=1)
            x = np.where(need[:, None], xn, x)
            new = self.evaluate(x, sigma2, np.ones(n_lane, dtype=bool))
            if st is None:
                st = new
            else:
                self.accept(st, new, need)
            need &= ~np.isfinite(new["lp"])
            if not need.any():
                return st
        raise DataError("data", f"no finite starting point near the start for "
                        f"{int(need.sum())} of {n_lane} chains")

    def initial_proposal(self, st: dict[str, Any], sigma2: np.ndarray) -> np.ndarray:
        """Gauss-Newton shaped proposal covariance in the sampling coordinates, one per
        run (G, d, d), pooled over its lanes:
        ``(J_u^T J_u / s^2 + diag(1 / (0.1 * width_u)^2))^{-1}`` with ``J_u = J dtheta/du``,
        times ``2.38^2 / d``; log gamma, log ell keep the initial step
        ``initial_step_log``."""
        cfg, d, p = self.cfg, self.d, self.p
        f, jac, ok = self.fwd(st["theta"], True)
        covs = []
        dtheta_all = self.dtheta_du(st["x"][:, :p])
        for c in range(st["theta"].shape[0]):
            dtheta = dtheta_all[c]
            # width of the u-step that moves theta by 10% of its range
            width = 0.1 * self.span / np.maximum(dtheta, 1e-6 * self.span)
            prec = np.diag(1.0 / width**2)
            if ok[c] and jac is not None:
                ju = jac[c] * dtheta[None]
                prec = prec + ju.T @ ju / max(float(sigma2[c]), 1e-12)
            cov = np.zeros((d, d))
            cov[:p, :p] = np.linalg.inv(prec)
            cov[p:, p:] = np.eye(d - p) * cfg.initial_step_log**2
            if self.s2_in_block:   # log sigma^2's sd when the noise dominates: sqrt(2/m)
                cov[p, p] = 2.0 / self.pb.m
            covs.append(cov)
        out = np.empty((self.n_group, d, d))
        for g, sl in enumerate(self.slices):
            cov = np.mean(covs[sl], axis=0)
            cov[:p, :p] *= 2.38**2 / d
            out[g] = cov
        return out


#: acceptance rates the step scale adapts towards: optimal scaling of random-walk
#: Metropolis (Roberts et al. 1997), MALA (Roberts & Rosenthal 1998), and the usual
#: target for short HMC trajectories
TARGET_ACCEPT = {"mwg": 0.234, "mala": 0.574, "hmc": 0.7}


#: bounces allowed in one drift before the lane's proposal is given up (rejected):
#: a drift crosses the unit box at most a few times when the step is tuned
MAX_BOUNCES = 50


def reflect_drift(x: np.ndarray, mom: np.ndarray, lc: np.ndarray, eps: np.ndarray,
                  p: int) -> tuple[np.ndarray, np.ndarray]:
    """One leapfrog drift ``x += eps L mom`` that bounces off the box ``0 <= x_i <= 1``
    of the first ``p`` coordinates (theta on its linear scale) instead of leaving it.

    Why it is exact: in the proposal's coordinates ``x = L w`` (unit mass in w) the
    bound ``x_j = b`` is the hyperplane ``L_j . w = b`` (``L_j`` row j of L).  The drift
    runs in straight lines to the *first* bound it meets, where the momentum is mirrored
    in that hyperplane, ``mom -= 2 (mom . L_j) / |L_j|^2 L_j`` (x_j's velocity flips,
    the rest of the motion along the wall continues), and goes on for the remaining
    time.  Each piece is a translation or a reflection, so the map is volume-preserving
    and |mom| is kept; run backwards (negated momentum) it retraces the same bounces,
    so it is reversible: the uniform prior's infinite wall taken exactly (Pakman &
    Paninski 2014 for truncated Gaussians; Afshar & Domke 2015).  The Metropolis test
    is unchanged.  A lane still bouncing after ``MAX_BOUNCES`` is returned outside the
    box (its proposal is rejected by the prior)."""
    x, mom = x.copy(), mom.copy()
    n_lane = x.shape[0]
    rows = np.arange(n_lane)
    left = np.ones(n_lane)                               # drift time still to run
    for _ in range(MAX_BOUNCES):
        v = eps[:, None] * np.einsum("cij,cj->ci", lc, mom)
        vp, xp = v[:, :p], x[:, :p]
        with np.errstate(divide="ignore", invalid="ignore"):
            hit_t = np.where(vp > 0, (1.0 - xp) / vp, np.where(vp < 0, -xp / vp, np.inf))
        hit_t = np.maximum(hit_t, 0.0)              # round-off: a coordinate just past
        j = np.argmin(hit_t, axis=1)
        t = hit_t[rows, j]
        hit = t < left
        move = np.where(hit, t, left)
        x = x + move[:, None] * v
        left = left - move
        if not hit.any():
            return x, mom
        lanes = rows[hit]
        x[lanes, j[hit]] = np.where(vp[lanes, j[hit]] > 0, 1.0, 0.0)   # on the wall
        normal = lc[lanes, j[hit], :]
        coef = np.einsum("ci,ci->c", mom[lanes], normal) / np.einsum("ci,ci->c", normal,
                                                                       normal)
        mom[lanes] -= 2.0 * coef[:, None] * normal
    out = left > 0
    x[out, 0] = -1.0                                     # gave up: outside, rejected
    return x, mom


def draw_delta(sampler: LockstepSampler, st: dict[str, Any], sigma2: np.ndarray,
               streams: Streams, chol_c: np.ndarray) -> np.ndarray:
    """Exact delta draws for every lane by Matheron's rule (as the sequential sampler);
    on a KOH full grid with the T x T blocks (the same draws up to round-off)."""
    m, cov = st["f"].shape[1], sampler.cov
    d0 = cov.matvec(chol_c, streams.normal((m,)))
    if st["mos"] is not None:
        d0 = st["mos"].project(d0)
    e0 = np.sqrt(sigma2)[:, None] * streams.normal((m,))
    rhs = sampler.y - st["f"] - d0 - e0
    return d0 + cov.gain(st["c_delta"], st["chol"], rhs)


class LockstepRun:
    """The mutable state of one lock-step run, advanced in blocks (so that
    ``until_converged`` can extend it without restarting)."""

    def __init__(self, sampler: LockstepSampler, st: dict[str, Any], sigma2: np.ndarray,
                 streams: Streams, capacity: int) -> None:
        self.s, self.st, self.sigma2, self.streams = sampler, st, sigma2, streams
        n_lane, d = st["x"].shape[0], sampler.d
        self.n_lane = n_lane
        self.it = 0
        self.start = st["theta"].copy()
        cov0 = sampler.initial_proposal(st, sigma2)
        self.cov0 = cov0                                  # (G, d, d), one per run
        self.base_chol = np.linalg.cholesky(cov0)
        self.log_lam = np.zeros(n_lane)
        self.hist = np.empty((capacity, n_lane, d))
        self.acc_block = np.zeros(n_lane)
        self.acc_total = np.zeros(n_lane)
        self.chol_c = np.zeros((n_lane, sampler.cov.size, sampler.cov.size))
        self.chol_c_ok = np.zeros(n_lane, dtype=bool)
        self.counts = {k: np.zeros(n_lane, dtype=int) for k in
                       ("ode_failures", "out_of_bounds", "regularised", "cholesky_failures")}
        self.kept: dict[str, list[np.ndarray]] = {k: [] for k in
                                                   ("theta", "hyp", "s2", "delta", "lp", "acc")}
        self.kept_from: int | None = None     # iteration of the first stored draw
        if sampler.leapfrog > 0:
            self.sigma2 = sampler.sigma2_of(st["x"], sigma2)
            st["grad"] = sampler.gradient(st, self.sigma2)
        self.wall = 0.0
        self.cpu = 0.0

    def _count(self, ev: dict[str, Any]) -> None:
        self.counts["ode_failures"] += ev["ode_fail"]
        self.counts["out_of_bounds"] += ev["out_of_support"]
        self.counts["regularised"] += ev["regularised"]
        self.counts["cholesky_failures"] += ev["chol_fail"]

    def advance(self, n_iter: int, burn_in: int, adapt_every: int, adapt_after_burn_in: bool,
                adapt_scale: bool, log_every: int, label: str, bar: Any = None,
                adapt_until: int | None = None) -> None:
        """Run ``n_iter`` more iterations; draws from ``burn_in`` on are stored, the
        proposal adapts before ``adapt_until`` (default ``burn_in``)."""
        adapt_until = burn_in if adapt_until is None else adapt_until
        s, streams, st = self.s, self.streams, self.st
        d, n_lane, m = s.d, self.n_lane, s.pb.m
        b0, shape = s.b0, s.a0_group + 0.5 * m
        cov_every = max(25, adapt_every // 4)
        everyone = np.ones(n_lane, dtype=bool)
        t0, c0 = time.perf_counter(), time.process_time()
        it0 = self.it
        for _ in range(n_iter):
            it = self.it
            # 1. (u, log gamma, log ell) | sigma^2, all lanes at once
            if s.leapfrog > 0:
                new, take = self._gradient_proposal()
            else:
                z = streams.normal((d,))
                step = np.empty_like(z)
                for g, sl in enumerate(s.slices):      # each run's own proposal shape
                    step[sl] = z[sl] @ self.base_chol[g].T
                xp = st["x"] + np.exp(0.5 * self.log_lam)[:, None] * step
                new = s.evaluate(xp, self.sigma2, everyone)
                self._count(new)
                log_u = np.log(streams.uniform())
                take = np.isfinite(new["lp"]) & (log_u < new["lp"] - st["lp"])
            if take.any():
                s.accept(st, new, take)
                self.chol_c_ok &= ~take
                self.acc_block += take
                self.acc_total += take
            # 2. delta | rest, exactly
            need = ~self.chol_c_ok
            if need.any():
                lc, ok, reg = batch_cholesky(st["c"][need])
                self.chol_c[need] = lc
                self.chol_c_ok[need] = ok
                self.counts["regularised"][need] += reg
            if s.s2_in_block:
                self.sigma2 = s.sigma2_of(st["x"], self.sigma2)
            delta = draw_delta(s, st, self.sigma2, streams, self.chol_c)
            # 3. sigma^2 | rest, exactly (all m observed entries); the gradient kernels
            # moved it in step 1 (delta is then drawn for the output only)
            if not s.s2_in_block:
                resid = s.y - st["f"] - delta
                self.sigma2 = (b0 + 0.5 * np.einsum("cm,cm->c", resid, resid)
                               ) / streams.gamma(shape)
                ll, chol, ok_l, jit = s.cov.loglik(st["c_delta"], self.sigma2, s.y - st["f"])
                self.counts["regularised"] += jit
                self.counts["cholesky_failures"] += ~ok_l
                st["chol"] = chol
                st["lp"] = np.where(ok_l, ll, -np.inf) + s.log_prior(st["x"])
            self.hist[it] = st["x"]
            if it >= burn_in:
                if self.kept_from is None:
                    self.kept_from = it
                u = st["x"]
                jac = s.log_jacobian(u[:, : s.p])
                self.kept["theta"].append(st["theta"].copy())
                self.kept["hyp"].append(u[:, -2:].copy())
                self.kept["s2"].append(self.sigma2.copy())
                self.kept["delta"].append(delta)
                # log lik + hyperprior, as sequential
                self.kept["lp"].append(st["lp"] - jac - s.log_prior_s2(u))
                self.kept["acc"].append(take.astype(np.int8))
            # adaptation (burn-in only unless adapt_after_burn_in)
            adapting = adapt_after_burn_in or it + 1 < adapt_until
            if adapting and adapt_scale and (it + 1) % 25 == 0:
                rate = self.acc_block / 25.0
                self.log_lam = np.clip(self.log_lam + 2.0 * (rate - s.target_accept),
                                       -14.0, 7.0)
                self.acc_block[:] = 0
            if adapting and (it + 1) % cov_every == 0 and it + 1 >= 4 * d:
                # per run, pooled over its lanes, second half of the history so far
                # (forgets the transient from the start)
                for g, sl in enumerate(s.slices):
                    window = self.hist[(it + 1) // 2: it + 1, sl].reshape(-1, d)
                    emp = np.cov(window, rowvar=False)
                    if np.all(np.isfinite(emp)):
                        cov = 2.38**2 / d * emp + 1e-10 * self.cov0[g]
                        lc, ok, _ = batch_cholesky(cov[None])
                        if ok[0]:
                            # the scale already tuned stays with the new shape
                            self.base_chol[g] = lc[0]
            self.it += 1
            if bar is not None:
                bar.update()
            if log_every and self.it % log_every == 0:
                done = self.it - it0
                log.info("%s iteration %d (%d/%d of this block) acceptance %s lp %s, %s",
                         label, self.it, done, n_iter, np.round(self.acc_total / self.it, 3),
                         np.round(st["lp"], 2), eta(time.perf_counter() - t0, done, n_iter))
        self.wall += time.perf_counter() - t0
        self.cpu += time.process_time() - c0

    def _gradient_proposal(self) -> tuple[dict[str, Any], np.ndarray]:
        """MALA (one leapfrog step) or HMC (``leapfrog_steps``) proposal for every lane,
        preconditioned by the run's adapted proposal shape ``L`` (coordinates
        ``x = L w``, unit mass in w), step ``exp(log_lam / 2)`` (HMC: jittered by
        +-20% per iteration so no trajectory length resonates with the posterior),
        then the Metropolis test on ``log target - |momentum|^2 / 2``.  A lane whose
        trajectory leaves the support or fails a solve is rejected there; with
        ``theta_boundary: reflect`` the drift bounces off theta's bounds instead
        (:func:`reflect_drift`).
        Returns the final states and the accepted lanes."""
        s, st, streams = self.s, self.st, self.streams
        n_lane, d = self.n_lane, s.d
        lc = np.empty((n_lane, d, d))
        for g, sl in enumerate(s.slices):
            lc[sl] = self.base_chol[g]
        eps = np.exp(0.5 * self.log_lam)
        if s.leapfrog > 1:
            eps = eps * (0.8 + 0.4 * streams.uniform())
        mom0 = streams.normal((d,))
        mom = mom0.copy()
        x, grad = st["x"], st["grad"]
        alive = np.isfinite(st["lp"])
        new: dict[str, Any] = {}
        for _ in range(s.leapfrog):
            mom = mom + 0.5 * eps[:, None] * np.einsum("cji,cj->ci", lc, grad)
            if s.reflect:
                x, mom = reflect_drift(x, mom, lc, eps, s.p)
            else:
                x = x + eps[:, None] * np.einsum("cij,cj->ci", lc, mom)
            new = s.evaluate(x, self.sigma2, alive)
            self._count(new)
            alive &= np.isfinite(new["lp"])
            grad = s.gradient(new, self.sigma2)
            mom = mom + 0.5 * eps[:, None] * np.einsum("cji,cj->ci", lc, grad)
        new["grad"] = grad
        log_u = np.log(streams.uniform())
        with np.errstate(invalid="ignore"):
            log_ratio = (new["lp"] - 0.5 * np.einsum("ci,ci->c", mom, mom)
                         - st["lp"] + 0.5 * np.einsum("ci,ci->c", mom0, mom0))
        take = alive & np.isfinite(log_ratio) & (log_u < log_ratio)
        return new, take

    def draws(self, drop_first: int = 0, thin: int = 1,
              keys: tuple[str, ...] | None = None) -> dict[str, np.ndarray]:
        """Kept draws as arrays with a leading lane axis: (C, draws, ...)."""
        out = {}
        for k, v in self.kept.items():
            if keys is not None and k not in keys:
                continue
            arr = np.stack(v[drop_first::thin], axis=1) if v[drop_first::thin] else np.empty(0)
            out[k] = arr
        return out


READAPT_RHAT = 1.1   # above this, an extension adapts the proposal again first


def run_lockstep(pb: Any, cfg: Any, init: dict[str, Any], hyper: Any,
                 rng: np.random.Generator, until: Any = None) -> tuple[list[dict[str, Any]],
                                                                         dict[str, Any]]:
    """All ``cfg.chains`` chains in lock-step from ``init`` (the least-squares fit or
    the reference start).  With ``until`` (:class:`convergence.UntilConverged`) the
    chains are extended in blocks until R-hat and bulk ESS meet its thresholds or
    ``until.max_iterations``.  A block after a check with R-hat <= 1.1 just continues
    the chains with the frozen kernel (the kept draws grow: every draw after the
    burn-in); after a check with R-hat > 1.1 the chains are clearly not mixing, so the
    block first adapts the proposal again for half its length and everything before
    that point is discarded (a new, longer burn-in).
    Returns per-chain dicts and the run's convergence record."""
    return run_lockstep_many([pb], cfg, [init], [hyper], [rng], until)[0]


def run_lockstep_many(pbs: list[Any], cfg: Any, inits: list[dict[str, Any]],
                      hypers: list[Any], rngs: list[np.random.Generator], until: Any = None,
                      kron: bool = True) -> list[tuple[list[dict[str, Any]], dict[str, Any]]]:
    """Several independent runs of one setting and method (each with its own data,
    start, hyperprior and random stream) as lanes of one lock-step program; per run
    the result of :func:`run_lockstep`.  ``until`` (extension to convergence) needs a
    single run: the extension is decided per run.  ``kron=False`` factorises the
    full m x m KOH covariance even on a full grid (for tests and comparisons)."""
    from simcalib.bayes.convergence import diagnose, is_converged

    if until is not None and len(pbs) > 1:
        raise ValueError("until_converged extends one run at a time; batch runs with a "
                         "fixed length")
    chains = cfg.chains
    sampler = LockstepSampler(pbs, cfg, hypers, chains, kron)
    streams = Streams(rngs, sampler.slices)
    starts = np.concatenate([np.repeat(np.asarray(i["theta"], dtype=np.float64)[None], chains,
                                       axis=0) for i in inits])
    hyper0 = np.concatenate([np.repeat(np.asarray(i.get("hyper", h.start()),
                                                  dtype=np.float64)[None], chains, axis=0)
                             for i, h in zip(inits, hypers, strict=True)])
    sigma2 = np.repeat(np.array([float(i["sigma2"]) for i in inits]), chains)
    st = sampler.start(starts, hyper0, sigma2, streams)
    cap = until.max_iterations if until is not None else cfg.iterations
    state = LockstepRun(sampler, st, sigma2, streams, cap)
    n_lane = sampler.n_lane
    bar = None
    if cfg.progress:
        import sys

        if sys.stderr.isatty():
            from tqdm import tqdm

            bar = tqdm(total=cfg.iterations, desc=f"{n_lane} chains", leave=False,
                       file=sys.stderr)
    label = f"{sampler.pb.setting.name} {sampler.pb.method}"
    if len(pbs) > 1:
        label += f" ({len(pbs)} runs as lanes)"
    kw = {"burn_in": cfg.burn_in, "adapt_every": cfg.adapt_every,
          "adapt_after_burn_in": cfg.adapt_after_burn_in, "adapt_scale": cfg.adapt_scale,
          "log_every": cfg.log_every, "label": label, "bar": bar}
    state.advance(cfg.iterations, **kw)
    drop = 0

    def judged(sl: slice, dr: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
        """Run ``sl``'s kept draws of the variables the posterior summary judges, on its
        scales (theta, gamma, ell, sigma2): R-hat/ESS and the minor-mode check read
        these, so a chain set this loop calls converged is not flagged there."""
        if dr is None:
            dr = state.draws(drop, keys=("theta", "hyp", "s2"))
        return {"theta": dr["theta"][sl], "gamma": np.exp(dr["hyp"][sl, ..., 0]),
                "ell": np.exp(dr["hyp"][sl, ..., 1]), "sigma2": dr["s2"][sl]}

    def check(v: dict[str, np.ndarray]) -> tuple[float, float]:
        if chains < 2:
            return float("nan"), float("nan")
        return diagnose(v)

    stop = "fixed_length"
    extra: dict[str, Any] = {}
    r_hat = ess = float("nan")
    if until is not None:         # one run (checked above): its R-hat, ESS decide
        sl0 = sampler.slices[0]
        cur = judged(sl0)
        r_hat, ess = check(cur)
        block = until.block or cfg.iterations
        discard = cfg.burn_in
        while True:
            if is_converged(r_hat, ess, until.r_hat, until.ess_bulk):
                # R-hat and ESS judge the bulk; a minor mode a chain entered only a few
                # times (or never) needs more iterations as well
                modes = []
                if until.minor_modes:
                    modes = poorly_explored({
                        **{p: cur["theta"][..., i]
                           for i, p in enumerate(sampler.pb.setting.params)},
                        **{HYPER[k]: cur[k] for k in ("gamma", "ell", "sigma2")}})
                if not modes:
                    stop = "converged"
                    break
                extra["minor_mode_extensions"] = extra.get("minor_mode_extensions", 0) + 1
                log.info("%s: R-hat and ESS pass, but %s: extending", label,
                         modes[0].describe())
            if state.it >= until.max_iterations:
                stop = "max_iterations"
                break
            n_more = min(block, until.max_iterations - state.it)
            if bar is not None:
                bar.total += n_more
            if not r_hat <= READAPT_RHAT:
                # clearly not mixing: the frozen kernel is probably poor; adapt again
                # during the first half of this block and discard everything before
                discard = state.it + n_more // 2
                state.advance(n_more, **kw, adapt_until=discard)
                extra["readapted"] = extra.get("readapted", 0) + 1
            else:
                state.advance(n_more, **kw)
            assert state.kept_from is not None
            drop = discard - state.kept_from
            cur = judged(sl0)
            r_hat, ess = check(cur)
            log.info("%s: extended to %d iterations: R-hat max %.3f, bulk ESS min %.0f",
                     label, state.it, r_hat, ess)
        if stop == "max_iterations":
            log.warning("%s: NOT converged after %d iterations (R-hat max %.3f > %.3f or "
                        "bulk ESS min %.0f < %.0f)", label, state.it, r_hat,
                        until.r_hat, ess, until.ess_bulk)
    if bar is not None:
        bar.close()
    thresholds = (until.r_hat, until.ess_bulk) if until is not None else (R_HAT_MAX, ESS_BULK_MIN)
    dr = state.draws(drop, cfg.thin)
    # diagnostics on every kept draw (unthinned), stacked once for all runs
    diag = dr if cfg.thin == 1 else state.draws(drop, keys=("theta", "hyp", "s2"))
    out = []
    for g, sl in enumerate(sampler.slices):
        if until is None:
            r_hat, ess = check(judged(sl, diag))
        record: dict[str, Any] = {"engine": "vectorized", "forward": sampler.fwd.mode,
                                  "covariance": "kronecker"
                                  if isinstance(sampler.cov, KronLayout) else "full",
                                  "protocol": inits[g].get("protocol", "honest"), **extra}
        if len(pbs) > 1:
            record["batched_runs"] = len(pbs)
        record.update({"iterations_run": state.it, "burn_in_used": drop + cfg.burn_in,
                       "r_hat_max": r_hat, "ess_bulk_min": ess, "stop_reason": stop,
                       "converged": stop == "converged" if until is not None
                       else is_converged(r_hat, ess, *thresholds)})
        lanes = []
        for c in range(sl.start, sl.stop):
            lanes.append({"theta": dr["theta"][c], "log_gamma": dr["hyp"][c, :, 0],
                          "log_ell": dr["hyp"][c, :, 1], "sigma2": dr["s2"][c],
                          "delta": dr["delta"][c], "lp": dr["lp"][c],
                          "accepted": dr["acc"][c],
                          "acceptance": float(state.acc_total[c] / state.it),
                          "counters": {k: int(v[c]) for k, v in state.counts.items()},
                          # the batch's time shared equally by its lanes
                          "seconds": state.wall / n_lane, "cpu_seconds": state.cpu / n_lane,
                          "start": state.start[c]})
        out.append((lanes, record))
    return out
