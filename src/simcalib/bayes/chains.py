"""The mutable state of one lock-step run and its iteration (paper Algorithm 1, batched).

Per iteration, for every lane at once:

1. the block ``(u, [log sigma^2,] log gamma, log ell)`` is moved by the run's kernel
   (:mod:`simcalib.bayes.moves`: random walk, MALA or HMC);
2. delta | rest exactly, then for the random walk sigma^2 | rest exactly
   (:mod:`simcalib.bayes.gibbs`);
3. the draws after the burn-in are kept; during adaptation the per-lane step scale
   follows its acceptance rate towards the kernel's target every 25 iterations and the
   run's proposal shape is re-estimated from its **pooled** lanes every
   ``max(25, adapt_every // 4)`` iterations (second half of the history so far).

A run is advanced in blocks (:meth:`LockstepRun.advance`), so ``until_converged``
(:mod:`simcalib.bayes.extend`) can extend it without restarting.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from simcalib.bayes.batched import batch_cholesky
from simcalib.bayes.gibbs import draw_delta, draw_sigma2
from simcalib.bayes.state import LaneCounters, LaneState
from simcalib.bayes.streams import Streams
from simcalib.bayes.target import LockstepSampler
from simcalib.progress import eta

log = logging.getLogger(__name__)

#: iterations between two tunings of the per-lane step scale
SCALE_EVERY = 25


@dataclass(frozen=True)
class AdvanceSettings:
    """What :meth:`LockstepRun.advance` reads of ``bayes.sampler``, built once per run."""

    burn_in: int
    adapt_every: int
    adapt_after_burn_in: bool
    adapt_scale: bool
    log_every: int
    label: str

    @classmethod
    def of(cls, cfg: Any, label: str) -> AdvanceSettings:
        return cls(cfg.burn_in, cfg.adapt_every, cfg.adapt_after_burn_in, cfg.adapt_scale,
                   cfg.log_every, label)


class LockstepRun:
    """The mutable state of one lock-step run (one or more runs as lane groups)."""

    def __init__(self, sampler: LockstepSampler, st: LaneState, sigma2: np.ndarray,
                 streams: Streams, capacity: int) -> None:
        self.s, self.st, self.sigma2, self.streams = sampler, st, sigma2, streams
        n_lane, d = st.x.shape[0], sampler.d
        self.n_lane = n_lane
        self.it = 0
        self.start = st.theta.copy()
        cov0 = sampler.initial_proposal(st, sigma2)
        self.cov0 = cov0                                  # (G, d, d), one per run
        self.base_chol = np.linalg.cholesky(cov0)
        self.log_lam = np.zeros(n_lane)
        self.hist = np.empty((capacity, n_lane, d))
        self.acc_block = np.zeros(n_lane)
        self.acc_total = np.zeros(n_lane)
        self.chol_c = np.zeros((n_lane, sampler.cov.size, sampler.cov.size))
        self.chol_c_ok = np.zeros(n_lane, dtype=bool)
        self.counts = LaneCounters(n_lane)
        self.kept: dict[str, list[np.ndarray]] = {k: [] for k in
                                                   ("theta", "hyp", "s2", "delta", "lp", "acc")}
        self.kept_from: int | None = None     # iteration of the first stored draw
        if sampler.leapfrog > 0:
            self.sigma2 = sampler.sigma2_of(st.x, sigma2)
            st.grad = sampler.gradient(st, self.sigma2)
        self.wall = 0.0
        self.cpu = 0.0

    def advance(self, n_iter: int, settings: AdvanceSettings, bar: Any = None,
                adapt_until: int | None = None) -> None:
        """Run ``n_iter`` more iterations; draws from ``burn_in`` on are stored, the
        proposal adapts before ``adapt_until`` (default ``burn_in``)."""
        adapt_until = settings.burn_in if adapt_until is None else adapt_until
        t0, c0 = time.perf_counter(), time.process_time()
        it0 = self.it
        for _ in range(n_iter):
            self._iterate(settings, adapt_until)
            if bar is not None:
                bar.update()
            if settings.log_every and self.it % settings.log_every == 0:
                done = self.it - it0
                log.info("%s iteration %d (%d/%d of this block) acceptance %s lp %s, %s",
                         settings.label, self.it, done, n_iter,
                         np.round(self.acc_total / self.it, 3), np.round(self.st.lp, 2),
                         eta(time.perf_counter() - t0, done, n_iter))
        self.wall += time.perf_counter() - t0
        self.cpu += time.process_time() - c0

    def _iterate(self, settings: AdvanceSettings, adapt_until: int) -> None:
        it = self.it
        # 1. the block | sigma^2 (or with it), all lanes at once
        new, take = self.s.move.propose(self)
        if take.any():
            self.st.take(new, take)
            self.chol_c_ok &= ~take
            self.acc_block += take
            self.acc_total += take
        # 2. delta (and sigma^2) | rest, exactly
        delta = self._gibbs()
        self.hist[it] = self.st.x
        if it >= settings.burn_in:
            self._keep(it, delta, take)
        if settings.adapt_after_burn_in or it + 1 < adapt_until:
            self._adapt(it, settings)
        self.it += 1

    def _gibbs(self) -> np.ndarray:
        """delta | rest for every lane; sigma^2 | rest when the block does not move it
        (then the factor and log target follow the new sigma^2)."""
        s, st = self.s, self.st
        need = ~self.chol_c_ok
        if need.any():
            lc, ok, reg = batch_cholesky(st.c[need])
            self.chol_c[need] = lc
            self.chol_c_ok[need] = ok
            self.counts.regularised[need] += reg
        if s.s2_in_block:
            self.sigma2 = s.sigma2_of(st.x, self.sigma2)
        delta = draw_delta(s, st, self.sigma2, self.streams, self.chol_c)
        # the gradient kernels moved sigma^2 in the block (delta is then drawn for the
        # output only)
        if not s.s2_in_block:
            self.sigma2 = draw_sigma2(s, st, delta, self.streams)
            ll, chol, ok_l, jit = s.cov.loglik(st.c_delta, self.sigma2, s.y - st.f)
            self.counts.regularised += jit
            self.counts.cholesky_failures += ~ok_l
            st.chol = chol
            st.lp = np.where(ok_l, ll, -np.inf) + s.log_prior(st.x)
        return delta

    def _keep(self, it: int, delta: np.ndarray, take: np.ndarray) -> None:
        s, st = self.s, self.st
        if self.kept_from is None:
            self.kept_from = it
        u = st.x
        jac = s.log_jacobian(u[:, : s.p])
        self.kept["theta"].append(st.theta.copy())
        self.kept["hyp"].append(u[:, -2:].copy())
        self.kept["s2"].append(self.sigma2.copy())
        self.kept["delta"].append(delta)
        # log lik + hyperprior, as sequential
        self.kept["lp"].append(st.lp - jac - s.log_prior_s2(u))
        self.kept["acc"].append(take.astype(np.int8))

    def _adapt(self, it: int, settings: AdvanceSettings) -> None:
        """Step scale towards the kernel's acceptance target (every 25 iterations) and
        the run's proposal shape from its pooled lanes (every ``cov_every``)."""
        d = self.s.d
        if settings.adapt_scale and (it + 1) % SCALE_EVERY == 0:
            rate = self.acc_block / float(SCALE_EVERY)
            self.log_lam = np.clip(self.log_lam + 2.0 * (rate - self.s.target_accept),
                                   -14.0, 7.0)
            self.acc_block[:] = 0
        cov_every = max(SCALE_EVERY, settings.adapt_every // 4)
        if (it + 1) % cov_every == 0 and it + 1 >= 4 * d:
            # per run, pooled over its lanes, second half of the history so far
            # (forgets the transient from the start)
            for g, sl in enumerate(self.s.slices):
                window = self.hist[(it + 1) // 2: it + 1, sl].reshape(-1, d)
                emp = np.cov(window, rowvar=False)
                if np.all(np.isfinite(emp)):
                    cov = 2.38**2 / d * emp + 1e-10 * self.cov0[g]
                    lc, ok, _ = batch_cholesky(cov[None])
                    if ok[0]:
                        # the scale already tuned stays with the new shape
                        self.base_chol[g] = lc[0]

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
