"""The log target of every lane of a lock-step run, and its gradient.

:class:`LockstepSampler` holds what the lanes share (one setting and method, the
observation layout, each run's data and hyperprior) and evaluates, for all lanes at
once, the marginal posterior of the block ``(u, [log sigma^2,] log gamma, log ell)``
with delta integrated out: forward solves and covariances batched over lanes
(:mod:`simcalib.bayes.batched`), KOH on a full grid as one ``T x T`` block per lane
(:class:`~simcalib.bayes.batched.KronLayout`).  The moves
(:mod:`simcalib.bayes.moves`) propose, this module scores; the run
(:mod:`simcalib.bayes.chains`) keeps the states.

Theta is sampled on its own scale (``theta_scale: linear``; ``u = (theta - LB) /
(UB - LB)``, proposals outside the bounds have ``lp = -inf``) or through the logit of
its bounds (``theta_scale: logit``, the Jacobian in the target, so no proposal leaves
the bounds); ``gamma`` and ``ell`` on the log scale.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simcalib.bayes.batched import (
    BatchedForward,
    FullLayout,
    KronLayout,
    MosBatch,
    chol_solve_batch,
)
from simcalib.bayes.moves import make_move
from simcalib.bayes.protocol import HyperPrior
from simcalib.bayes.state import LaneState
from simcalib.bayes.streams import Streams
from simcalib.errors import DataError


def _sigmoid(u: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * u))


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
        # theta block kernel: random-walk (mwg) or gradient-informed (mala, hmc); the
        # gradient kernels on the linear scale may bounce off theta's bounds instead of
        # rejecting the trajectory there (an exact billiard, moves.reflect)
        self.kernel = cfg.theta_kernel
        self.reflect = (self.kernel != "mwg" and not self.logit
                        and cfg.theta_boundary == "reflect")
        self.move = make_move(self.kernel, cfg.steps_for(pb.method), self.reflect)
        self.leapfrog = self.move.steps
        self.target_accept = self.move.target_accept
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
    def evaluate(self, x: np.ndarray, sigma2: np.ndarray, lanes: np.ndarray) -> LaneState:
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
        return LaneState(x=x, theta=theta, f=f, jac=jac, c=c, c_delta=c_delta, mos=mos,
                         chol=chol, lp=lp, ok=ok, ode_fail=ode_fail,
                         out_of_support=lanes & ~np.isfinite(prior), regularised=reg,
                         chol_fail=chol_fail)

    def gradient(self, st: LaneState, sigma2: np.ndarray) -> np.ndarray:
        """Gradient (C, d) of the log target in the sampling coordinates
        ``(u, log sigma^2, log gamma, log ell)`` at the evaluated states ``st`` (with
        ``st.chol`` the factor of ``C_delta + sigma^2 I``), from the sensitivities ``J``:

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
        x, p = st.x, self.p
        n_lane = x.shape[0]
        g = np.zeros((n_lane, self.d))
        ok = np.isfinite(st.lp)
        if not ok.any():
            return g
        kron = isinstance(self.cov, KronLayout)
        n = self.cov.size
        resid = self.y - st.f
        r = self.cov.to_blocks(resid) if kron else resid[:, :, None]     # (C, n, k)
        k = r.shape[2]
        with np.errstate(all="ignore"):
            sinv = chol_solve_batch(st.chol, np.broadcast_to(np.eye(n), (n_lane, n, n)))
            alpha = sinv @ r
            a_flat = self.cov.from_blocks(alpha) if kron else alpha[:, :, 0]
            g_theta = np.einsum("cmp,cm->cp", st.jac, a_flat)
            g[:, :p] = g_theta * self.dtheta_du(x[:, :p]) + self.grad_log_jacobian(x[:, :p])

            def hyper_term(ds: np.ndarray) -> np.ndarray:
                quad = np.einsum("cik,cij,cjk->c", alpha, ds, alpha)
                return 0.5 * quad - 0.5 * k * np.einsum("cij,cji->c", sinv, ds)

            g[:, -2] = hyper_term(st.c_delta)
            if self.s2_in_block:
                s2 = self.sigma2_of(x, sigma2)
                quad = np.einsum("cik,cik->c", alpha, alpha)
                tr = np.einsum("cii->c", sinv)
                g[:, p] = (0.5 * s2 * (quad - k * tr) - self.a0 + self.b0 / s2)
            ell2 = np.exp(2.0 * np.clip(x[:, -1], -300, 300))
            d2 = (self.cov.block if kron else self.cov.layout).d2
            dc = st.c * d2[None] / ell2[:, None, None]
            mos = st.mos
            if mos is not None and mos.js.shape[2] > 0:
                q = chol_solve_batch(mos.lg, np.swapaxes(mos.js, 1, 2))   # G^{-1} J^T
                proj = np.eye(n)[None] - mos.cj @ q
                dc = proj @ dc @ np.swapaxes(proj, 1, 2)
            g[:, -1] = hyper_term(dc)
            g[:, -2:] += self.hyper.grad(x[:, -2], x[:, -1])
        return np.where(ok[:, None] & np.isfinite(g), g, 0.0)

    # ------------------------------------------------------------- start
    def start(self, starts: np.ndarray, hyper0: np.ndarray, sigma2: np.ndarray,
              streams: Streams) -> LaneState:
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
                st.take(new, need)
            need &= ~np.isfinite(new.lp)
            if not need.any():
                return st
        raise DataError("data", f"no finite starting point near the start for "
                        f"{int(need.sum())} of {n_lane} chains")

    def initial_proposal(self, st: LaneState, sigma2: np.ndarray) -> np.ndarray:
        """Gauss-Newton shaped proposal covariance in the sampling coordinates, one per
        run (G, d, d), pooled over its lanes:
        ``(J_u^T J_u / s^2 + diag(1 / (0.1 * width_u)^2))^{-1}`` with ``J_u = J dtheta/du``,
        times ``2.38^2 / d``; log gamma, log ell keep the initial step
        ``initial_step_log``."""
        cfg, d, p = self.cfg, self.d, self.p
        f, jac, ok = self.fwd(st.theta, True)
        covs = []
        dtheta_all = self.dtheta_du(st.x[:, :p])
        for c in range(st.theta.shape[0]):
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
