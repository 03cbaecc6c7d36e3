"""Extending a lock-step run until it converges (``sampler.until_converged``).

After the configured ``iterations``, the chains are extended in blocks until R-hat
and bulk ESS meet :class:`~simcalib.bayes.convergence.UntilConverged`'s thresholds
(and, with ``minor_modes``, no minor mode is poorly explored) or
``max_iterations``.  A block after a check with R-hat <= 1.1 just continues the
chains with the frozen kernel (the kept draws grow: every draw after the burn-in);
after a check with R-hat > 1.1 the chains are clearly not mixing, so the block first
adapts the proposal again for half its length and everything before that point is
discarded (a new, longer burn-in).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simcalib.bayes.chains import AdvanceSettings, LockstepRun
from simcalib.bayes.convergence import UntilConverged, diagnose, is_converged
from simcalib.bayes.models import HYPER
from simcalib.bayes.modes import poorly_explored

log = logging.getLogger(__name__)

READAPT_RHAT = 1.1   # above this, an extension adapts the proposal again first


@dataclass
class Outcome:
    """How a run ended: why it stopped, the kept draws to drop (a re-adaptation's
    burn-in), the last diagnostics and what the loop did (``extra`` in the record)."""

    stop: str = "fixed_length"
    drop: int = 0
    r_hat: float = float("nan")
    ess: float = float("nan")
    extra: dict[str, Any] = field(default_factory=dict)

    def count(self, what: str) -> None:
        self.extra[what] = self.extra.get(what, 0) + 1


def judged(state: LockstepRun, drop: int, sl: slice,
           dr: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Run ``sl``'s kept draws of the variables the posterior summary judges, on its
    scales (theta, gamma, ell, sigma2): R-hat/ESS and the minor-mode check read
    these, so a chain set this loop calls converged is not flagged there."""
    if dr is None:
        dr = state.draws(drop, keys=("theta", "hyp", "s2"))
    return {"theta": dr["theta"][sl], "gamma": np.exp(dr["hyp"][sl, ..., 0]),
            "ell": np.exp(dr["hyp"][sl, ..., 1]), "sigma2": dr["s2"][sl]}


def check(v: dict[str, np.ndarray], chains: int) -> tuple[float, float]:
    """``(max R-hat, min bulk ESS)``; NaN with one chain."""
    if chains < 2:
        return float("nan"), float("nan")
    return diagnose(v)


def _minor_modes(state: LockstepRun, cur: dict[str, np.ndarray]) -> list[Any]:
    params = state.s.pb.setting.params
    return poorly_explored({
        **{p: cur["theta"][..., i] for i, p in enumerate(params)},
        **{HYPER[k]: cur[k] for k in ("gamma", "ell", "sigma2")}})


def _done(state: LockstepRun, until: UntilConverged, out: Outcome,
          cur: dict[str, np.ndarray], label: str) -> bool:
    """Whether the loop stops here (``out.stop`` says why)."""
    if is_converged(out.r_hat, out.ess, until.r_hat, until.ess_bulk):
        # R-hat and ESS judge the bulk; a minor mode a chain entered only a few
        # times (or never) needs more iterations as well
        modes = _minor_modes(state, cur) if until.minor_modes else []
        if not modes:
            out.stop = "converged"
            return True
        out.count("minor_mode_extensions")
        log.info("%s: R-hat and ESS pass, but %s: extending", label, modes[0].describe())
    if state.it >= until.max_iterations:
        out.stop = "max_iterations"
        return True
    return False


def extend_until_converged(state: LockstepRun, until: UntilConverged, iterations: int,
                           settings: AdvanceSettings, bar: Any = None) -> Outcome:
    """Extend the (single) run of ``state`` in blocks; returns how it ended."""
    sl0, chains, label = state.s.slices[0], state.s.chains, settings.label
    out = Outcome()
    cur = judged(state, 0, sl0)
    out.r_hat, out.ess = check(cur, chains)
    block = until.block or iterations
    discard = settings.burn_in
    while not _done(state, until, out, cur, label):
        n_more = min(block, until.max_iterations - state.it)
        if bar is not None:
            bar.total += n_more
        if not out.r_hat <= READAPT_RHAT:
            # clearly not mixing: the frozen kernel is probably poor; adapt again
            # during the first half of this block and discard everything before
            discard = state.it + n_more // 2
            state.advance(n_more, settings, bar, adapt_until=discard)
            out.count("readapted")
        else:
            state.advance(n_more, settings, bar)
        assert state.kept_from is not None
        out.drop = discard - state.kept_from
        cur = judged(state, out.drop, sl0)
        out.r_hat, out.ess = check(cur, chains)
        log.info("%s: extended to %d iterations: R-hat max %.3f, bulk ESS min %.0f",
                 label, state.it, out.r_hat, out.ess)
    if out.stop == "max_iterations":
        # INFO: the job's one WARNING is the posterior summary's verdict
        log.info("%s: not converged after %d iterations, the cap (R-hat max %.3f > %.3f or "
                 "bulk ESS min %.0f < %.0f)", label, state.it, out.r_hat,
                 until.r_hat, out.ess, until.ess_bulk)
    return out
