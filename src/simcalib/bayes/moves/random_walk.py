"""Adaptive random-walk Metropolis on the block (``theta_kernel: mwg``).

The paper's Algorithm 1 step: a Gaussian step shaped by the run's adapted proposal
covariance (Gauss-Newton at the start, then the pooled draws' covariance, Haario et
al.) and scaled per lane by ``exp(log_lam / 2)``, tuned towards 23.4 % acceptance.
A proposal outside the support or whose solve fails has ``lp = -inf`` and is
rejected (and counted).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from simcalib.bayes.moves.base import TARGET_ACCEPT

if TYPE_CHECKING:
    from simcalib.bayes.chains import LockstepRun
    from simcalib.bayes.state import LaneState


class RandomWalk:
    name = "mwg"
    steps = 0
    target_accept = TARGET_ACCEPT["mwg"]

    def propose(self, run: LockstepRun) -> tuple[LaneState, np.ndarray]:
        s, st, streams = run.s, run.st, run.streams
        z = streams.normal((s.d,))
        step = np.empty_like(z)
        for g, sl in enumerate(s.slices):      # each run's own proposal shape
            step[sl] = z[sl] @ run.base_chol[g].T
        xp = st.x + np.exp(0.5 * run.log_lam)[:, None] * step
        new = s.evaluate(xp, run.sigma2, np.ones(run.n_lane, dtype=bool))
        run.counts.add(new)
        log_u = np.log(streams.uniform())
        take = np.isfinite(new.lp) & (log_u < new.lp - st.lp)
        return new, take
