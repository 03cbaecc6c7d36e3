"""Vectorised Metropolis-within-Gibbs: every chain of a run advanced in one step.

Same algorithm as :class:`simcalib.bayes.sampler.Sampler` (paper Algorithm 1: a
block on ``(theta, log gamma, log ell)`` with delta integrated out, then exact Gibbs
draws of delta and sigma^2), same posterior; what changes is cost per effective
sample.  The pieces, one module each (as emcee keeps its moves):

* :mod:`~simcalib.bayes.target`: the log target of all lanes (the C chains are lanes
  of one array program; forward solves, covariances, Cholesky factors and triangular
  solves batched over lanes; KOH on a full grid as ``I_J kron (gamma K + sigma^2
  I_T)``, one T x T factor per lane) and its gradient from the sensitivities;
* :mod:`~simcalib.bayes.moves`: the block's kernel, adaptive random walk (``mwg``,
  default; Gauss-Newton shaped initial proposal, pooled covariance adaptation, per-lane
  scale towards 0.234), MALA or HMC (``mala | hmc``, preconditioned by the same
  covariance; log sigma^2 joins the block) with reflection at theta's bounds;
  measured against NumPyro NUTS in docs/bayes.md ("Against NUTS");
* :mod:`~simcalib.bayes.chains`: the run's state and iteration (Gibbs draws in
  :mod:`~simcalib.bayes.gibbs`, adaptation during burn-in only unless
  ``adapt_after_burn_in``, so the kept draws come from a fixed kernel);
* :mod:`~simcalib.bayes.extend`: extension until converged (``until_converged``).

Theta is proposed on its own scale by default (``theta_scale: linear``; ``logit``
bent the posterior near a bound: on FitzHugh-Nagumo KOH the bulk ESS of 10,000
iterations fell from 254 to 12, docs/bayes.md).

**Replications as lanes** (:func:`run_lockstep_many`): independent runs of one
setting and method (the paper's 100 simulated data sets) share one array program,
lanes ``g * chains ... (g + 1) * chains - 1`` being run g; each run keeps its own
data, hyperprior, random stream (:class:`~simcalib.bayes.streams.Streams`), pooled
proposal covariance and convergence record, so a run's draws do not depend on which
runs share its batch.  What is shared is the per-call overhead, which dominates on
the small (m <= 100) covariances here: on four-mass KOH the sampler's CPU per chain
falls ~2.5x from 1 to 50 runs a batch.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import numpy as np

from simcalib.bayes.batched import KronLayout
from simcalib.bayes.chains import AdvanceSettings, LockstepRun
from simcalib.bayes.convergence import UntilConverged, is_converged
from simcalib.bayes.extend import Outcome, check, extend_until_converged, judged
from simcalib.bayes.moves import TARGET_ACCEPT
from simcalib.bayes.moves.reflect import MAX_BOUNCES, reflect_drift
from simcalib.bayes.results import ChainResult, Counters
from simcalib.bayes.streams import Streams
from simcalib.bayes.target import LockstepSampler

__all__ = ["MAX_BOUNCES", "TARGET_ACCEPT", "LockstepRun", "LockstepSampler", "Streams",
           "reflect_drift", "run_lockstep", "run_lockstep_many"]

log = logging.getLogger(__name__)

Run = tuple[list[ChainResult], dict[str, Any]]


def run_lockstep(pb: Any, cfg: Any, init: dict[str, Any], hyper: Any,
                 rng: np.random.Generator, until: UntilConverged | None = None) -> Run:
    """All ``cfg.chains`` chains in lock-step from ``init`` (the least-squares fit or
    the reference start); with ``until`` extended until converged
    (:mod:`simcalib.bayes.extend`).  Returns the chains and the run's record."""
    return run_lockstep_many([pb], cfg, [init], [hyper], [rng], until)[0]


def run_lockstep_many(pbs: list[Any], cfg: Any, inits: list[dict[str, Any]],
                      hypers: list[Any], rngs: list[np.random.Generator],
                      until: UntilConverged | None = None, kron: bool = True) -> list[Run]:
    """Several independent runs of one setting and method (each with its own data,
    start, hyperprior and random stream) as lanes of one lock-step program; per run
    the result of :func:`run_lockstep`.  ``until`` (extension to convergence) needs a
    single run: the extension is decided per run.  ``kron=False`` factorises the
    full m x m KOH covariance even on a full grid (for tests and comparisons)."""
    if until is not None and len(pbs) > 1:
        raise ValueError("until_converged extends one run at a time; batch runs with a "
                         "fixed length")
    sampler = LockstepSampler(pbs, cfg, hypers, cfg.chains, kron)
    state = _prepare(sampler, cfg, inits, hypers, rngs, until)
    label = f"{sampler.pb.setting.name} {sampler.pb.method}"
    if len(pbs) > 1:
        label += f" ({len(pbs)} runs as lanes)"
    settings = AdvanceSettings.of(cfg, label)
    bar = _progress_bar(cfg, sampler.n_lane)
    state.advance(cfg.iterations, settings, bar)
    outcome = (Outcome() if until is None else
               extend_until_converged(state, until, cfg.iterations, settings, bar))
    if bar is not None:
        bar.close()
    return _collect(state, cfg, inits, until, outcome)


def _prepare(sampler: LockstepSampler, cfg: Any, inits: list[dict[str, Any]],
             hypers: list[Any], rngs: list[np.random.Generator],
             until: UntilConverged | None) -> LockstepRun:
    """Every lane's starting state: its run's start (theta, hyperparameters at their
    prior start unless given, sigma^2), jittered (:meth:`LockstepSampler.start`)."""
    chains = cfg.chains
    streams = Streams(rngs, sampler.slices)

    def lanes(values: list[Any]) -> np.ndarray:
        return np.concatenate([np.repeat(np.asarray(v, dtype=np.float64)[None], chains,
                                         axis=0) for v in values])

    starts = lanes([i["theta"] for i in inits])
    hyper0 = lanes([i["hyper"] if "hyper" in i else h.start()
                    for i, h in zip(inits, hypers, strict=True)])
    sigma2 = np.repeat(np.array([float(i["sigma2"]) for i in inits]), chains)
    st = sampler.start(starts, hyper0, sigma2, streams)
    cap = until.max_iterations if until is not None else cfg.iterations
    return LockstepRun(sampler, st, sigma2, streams, cap)


def _progress_bar(cfg: Any, n_lane: int) -> Any:
    """A tqdm bar on a terminal when ``progress`` is on, else None."""
    if not (cfg.progress and sys.stderr.isatty()):
        return None
    from tqdm import tqdm

    return tqdm(total=cfg.iterations, desc=f"{n_lane} chains", leave=False, file=sys.stderr)


def _record(state: LockstepRun, cfg: Any, init: dict[str, Any], n_runs: int,
            outcome: Outcome, r_hat: float, ess: float, converged: bool) -> dict[str, Any]:
    s = state.s
    record: dict[str, Any] = {
        "engine": "vectorized", "forward": s.fwd.mode,
        "covariance": "kronecker" if isinstance(s.cov, KronLayout) else "full",
        "protocol": init["protocol"] if "protocol" in init else "honest", **outcome.extra}
    if n_runs > 1:
        record["batched_runs"] = n_runs
    record.update({"iterations_run": state.it, "burn_in_used": outcome.drop + cfg.burn_in,
                   "r_hat_max": r_hat, "ess_bulk_min": ess, "stop_reason": outcome.stop,
                   "converged": converged})
    return record


def _chain(state: LockstepRun, dr: dict[str, np.ndarray], c: int) -> ChainResult:
    """Lane ``c``'s chain; the batch's time shared equally by its lanes."""
    n_lane = state.n_lane
    return ChainResult(dr["theta"][c], dr["hyp"][c, :, 0], dr["hyp"][c, :, 1], dr["s2"][c],
                       dr["delta"][c], dr["lp"][c], dr["acc"][c],
                       float(state.acc_total[c] / state.it), Counters(**state.counts.of_lane(c)),
                       state.wall / n_lane, state.start[c], state.cpu / n_lane)


def _collect(state: LockstepRun, cfg: Any, inits: list[dict[str, Any]],
             until: UntilConverged | None, outcome: Outcome) -> list[Run]:
    """Per run: its chains and its record (R-hat, ESS and whether converged, judged
    with until_converged's thresholds when set, else the convergence defaults)."""
    dr = state.draws(outcome.drop, cfg.thin)
    # diagnostics on every kept draw (unthinned), stacked once for all runs
    diag = dr if cfg.thin == 1 else state.draws(outcome.drop, keys=("theta", "hyp", "s2"))
    out = []
    for g, sl in enumerate(state.s.slices):
        if until is None:
            r_hat, ess = check(judged(state, outcome.drop, sl, diag), cfg.chains)
            converged = is_converged(r_hat, ess)
        else:
            r_hat, ess = outcome.r_hat, outcome.ess
            converged = outcome.stop == "converged"
        record = _record(state, cfg, inits[g], len(inits), outcome, r_hat, ess, converged)
        out.append(([_chain(state, dr, c) for c in range(sl.start, sl.stop)], record))
    return out
