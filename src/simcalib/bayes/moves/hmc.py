"""Hamiltonian proposals from the sensitivities' gradient (``theta_kernel: hmc``).

``leapfrog_steps`` leapfrog steps of the block, preconditioned by the run's adapted
proposal shape ``L`` (coordinates ``x = L w``, unit mass in w), step
``exp(log_lam / 2)`` jittered by +-20 % per iteration (so no trajectory length
resonates with the posterior), then the Metropolis test on
``log target - |momentum|^2 / 2``.  The gradient is the target's
(:meth:`simcalib.bayes.target.LockstepSampler.gradient`).  A lane whose trajectory
leaves the support or fails a solve is rejected there; with ``theta_boundary:
reflect`` the drift bounces off theta's bounds instead
(:func:`simcalib.bayes.moves.reflect.reflect_drift`), an exact billiard.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from simcalib.bayes.moves.base import TARGET_ACCEPT
from simcalib.bayes.moves.reflect import reflect_drift

if TYPE_CHECKING:
    from simcalib.bayes.chains import LockstepRun
    from simcalib.bayes.state import LaneState


class Hamiltonian:
    name = "hmc"
    target_accept = TARGET_ACCEPT["hmc"]

    def __init__(self, steps: int, reflect: bool = False) -> None:
        self.steps, self.reflect = int(steps), bool(reflect)

    def _step_sizes(self, run: LockstepRun) -> np.ndarray:
        eps = np.exp(0.5 * run.log_lam)
        if self.steps > 1:
            eps = eps * (0.8 + 0.4 * run.streams.uniform())
        return eps

    def _drift(self, x: np.ndarray, mom: np.ndarray, lc: np.ndarray, eps: np.ndarray,
               p: int) -> tuple[np.ndarray, np.ndarray]:
        if self.reflect:
            return reflect_drift(x, mom, lc, eps, p)
        return x + eps[:, None] * np.einsum("cij,cj->ci", lc, mom), mom

    def propose(self, run: LockstepRun) -> tuple[LaneState, np.ndarray]:
        s, st, streams = run.s, run.st, run.streams
        lc = np.empty((run.n_lane, s.d, s.d))
        for g, sl in enumerate(s.slices):
            lc[sl] = run.base_chol[g]
        eps = self._step_sizes(run)
        mom0 = streams.normal((s.d,))
        mom = mom0.copy()
        x, grad = st.x, st.grad
        assert grad is not None
        alive = np.isfinite(st.lp)
        new = st
        for _ in range(self.steps):
            mom = mom + 0.5 * eps[:, None] * np.einsum("cji,cj->ci", lc, grad)
            x, mom = self._drift(x, mom, lc, eps, s.p)
            new = s.evaluate(x, run.sigma2, alive)
            run.counts.add(new)
            alive &= np.isfinite(new.lp)
            grad = s.gradient(new, run.sigma2)
            mom = mom + 0.5 * eps[:, None] * np.einsum("cji,cj->ci", lc, grad)
        new.grad = grad
        log_u = np.log(streams.uniform())
        with np.errstate(invalid="ignore"):
            log_ratio = (new.lp - 0.5 * np.einsum("ci,ci->c", mom, mom)
                         - st.lp + 0.5 * np.einsum("ci,ci->c", mom0, mom0))
        take = alive & np.isfinite(log_ratio) & (log_u < log_ratio)
        return new, take
