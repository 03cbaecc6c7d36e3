"""Adaptive Metropolis-within-Gibbs for KOH and MOS calibration (paper Algorithm 1).

Per iteration:

1. ``(theta, log gamma, log ell)`` jointly by a Gaussian random-walk Metropolis step on
   their marginal posterior with delta integrated out,
   ``N(y; f_theta, C_delta(theta, phi) + sigma^2 I) * prior``: uniform on theta inside
   its bounds (a proposal outside is rejected without solving the ODE), Gaussian on
   ``log gamma`` and ``log ell`` (the log-normal priors).  One ODE + sensitivity solve per
   proposal; a failed or non-finite solve rejects the proposal and is counted.
2. ``delta`` exactly from its Gaussian conditional, by Matheron's rule
   ``delta = d0 + C_d Sigma^{-1} (r - d0 - e0)`` with ``d0 ~ N(0, C_d)``,
   ``e0 ~ N(0, sigma^2 I)``, ``Sigma = C_d + sigma^2 I`` (exact although the MOS ``C_d``
   is singular; for MOS ``d0`` is a KOH draw projected off the sensitivities).
3. ``sigma^2`` from ``IG(alpha + m/2, beta + |y - f - delta|^2 / 2)`` with all ``m``
   observed entries (n times x J outputs, less missing ones).

The proposal starts as ``diag((0.01 (UB - LB))^2, 0.05^2, 0.05^2)`` and is replaced every
``adapt_every`` iterations by ``lambda * 2.38^2 / d`` times the chain's covariance
(Haario et al.); ``lambda`` follows the acceptance rate towards 0.234.  Adaptation stops
at the end of burn-in by default, so the kept draws come from a fixed kernel.  Chains
start from a multi-start least-squares fit, never from the truth.
"""

from __future__ import annotations

import logging
import math
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.optimize

from simcalib.bayes.convergence import ESS_BULK_MIN, R_HAT_MAX
from simcalib.bayes.data import ObsData
from simcalib.bayes.kernels import (
    CholeskyError,
    MosFactors,
    chol_solve,
    mos_from_koh,
    robust_cholesky,
    tri_solve,
)
from simcalib.bayes.likelihood import Likelihood
from simcalib.bayes.numerics import numeric_events
from simcalib.bayes.results import ChainResult, Counters, RunResult
from simcalib.bayes.sampler_config import SamplerConfig
from simcalib.errors import DataError
from simcalib.progress import eta

__all__ = ["ChainResult", "Counters", "Likelihood", "ObsData", "RunResult", "Sampler",
           "SamplerConfig", "run", "run_many"]

log = logging.getLogger(__name__)
LOG2PI = math.log(2.0 * math.pi)


@dataclass
class _State:
    x: np.ndarray              # theta, log gamma, log ell
    f: np.ndarray
    c: np.ndarray              # KOH covariance gamma (I_J kron K)
    c_delta: np.ndarray        # discrepancy covariance (c for KOH)
    mos: MosFactors | None
    lp: float = -np.inf
    chol: np.ndarray | None = None    # Cholesky of C_delta + sigma^2 I (current sigma^2)
    chol_c: np.ndarray | None = None  # Cholesky of C (lazily, for delta draws)


class Sampler:
    """The sequential engine: one chain after the other (``engine: sequential``)."""

    def __init__(self, problem: Likelihood, cfg: SamplerConfig, hyper: Any = None) -> None:
        from simcalib.bayes.protocol import HyperPrior

        self.pb, self.cfg = problem, cfg
        self.d = problem.p + 2
        s = problem.setting
        self.hyper = hyper or HyperPrior(tuple(s.gamma_prior), tuple(s.ell_prior))

    def _log_prior_hyper(self, lg: float, ll: float) -> float:
        return float(self.hyper.log_density(lg, ll))

    # ------------------------------------------------------------- pieces
    def _loglik(self, st: _State, sigma2: float, counters: Counters) -> float:
        sig = st.c_delta.copy()
        sig.flat[:: self.pb.m + 1] += sigma2
        try:
            chol, jit = robust_cholesky(sig)
        except CholeskyError:
            counters.cholesky_failures += 1
            st.chol = None
            return -np.inf
        counters.regularised += int(jit > 0)
        st.chol = chol
        a = tri_solve(chol, self.pb.y - st.f)
        return float(-0.5 * a @ a - np.sum(np.log(np.diag(chol))) - 0.5 * self.pb.m * LOG2PI)

    def _state(self, x: np.ndarray, sigma2: float, counters: Counters) -> _State | None:
        theta = x[: self.pb.p]
        if not self.pb.in_bounds(theta):
            counters.out_of_bounds += 1
            return None
        fw = self.pb.forward(theta)
        if fw is None:
            counters.ode_failures += 1
            return None
        f, jac = fw
        c = self.pb.layout.koh(math.exp(x[-2]), math.exp(x[-1]))
        fac = None
        if self.pb.method == "mos":
            try:
                fac = mos_from_koh(c, jac)
            except CholeskyError:
                counters.cholesky_failures += 1
                return None
            counters.regularised += fac.regularised
        st = _State(x, f, c, c if fac is None else fac.c_delta, fac)
        prior = self._log_prior_hyper(x[-2], x[-1])
        if not np.isfinite(prior):
            counters.out_of_bounds += 1
            return None
        st.lp = self._loglik(st, sigma2, counters) + prior
        return st

    def _draw_delta(self, st: _State, sigma2: float, rng: np.random.Generator,
                    counters: Counters) -> np.ndarray:
        """Exact draw by Matheron's rule: ``d0 ~ N(0, C_delta)`` (a KOH draw projected for
        MOS), ``e0 ~ N(0, sigma^2 I)``, ``delta = d0 + C_delta Sigma^{-1} (r - d0 - e0)``."""
        m = self.pb.m
        if st.chol_c is None:
            st.chol_c, jit = robust_cholesky(st.c)
            counters.regularised += int(jit > 0)
        d0 = st.chol_c @ rng.standard_normal(m)
        if st.mos is not None:
            d0 = st.mos.project(d0)
        e0 = math.sqrt(sigma2) * rng.standard_normal(m)
        assert st.chol is not None
        return d0 + st.c_delta @ chol_solve(st.chol, self.pb.y - st.f - d0 - e0)

    # ------------------------------------------------------------- init
    def least_squares_start(self, rng: np.random.Generator) -> dict[str, Any]:
        """Multi-start bounded least squares of ``|y - f_theta|^2`` with the exact
        Jacobian from the sensitivities; the best fit seeds every chain."""
        pb = self.pb
        cache: dict[bytes, tuple[np.ndarray, np.ndarray] | None] = {}

        def fw(th: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
            key = th.tobytes()
            if key not in cache:
                cache.clear()
                cache[key] = pb.forward(th)
            return cache[key]

        def fun(th: np.ndarray) -> np.ndarray:
            r = fw(th)
            return np.full(pb.m, 1e6) if r is None else r[0] - pb.y

        def jac(th: np.ndarray) -> np.ndarray:
            r = fw(th)
            return np.zeros((pb.m, pb.p)) if r is None else r[1]

        best: tuple[float, np.ndarray] | None = None
        costs = []
        span = pb.upper - pb.lower
        for _ in range(self.cfg.ls_starts):
            x0 = pb.lower + span * rng.uniform(0.02, 0.98, pb.p)
            try:
                res = scipy.optimize.least_squares(fun, x0, jac=jac, bounds=(pb.lower, pb.upper),
                                                   x_scale="jac", max_nfev=200, method="trf")
            except (ValueError, np.linalg.LinAlgError):
                continue
            costs.append(float(res.cost))
            if np.isfinite(res.cost) and (best is None or res.cost < best[0]):
                best = (float(res.cost), res.x)
        if best is None:
            raise DataError("data", "least-squares initialisation failed from every start")
        theta = np.clip(best[1], pb.lower + 1e-6 * span, pb.upper - 1e-6 * span)
        return {"theta": theta, "cost": best[0], "costs": costs,
                "sigma2": max(2.0 * best[0] / pb.m, 1e-12)}

    # ------------------------------------------------------------- chain
    def _start_state(self, init: dict[str, Any], rng: np.random.Generator,
                     counters: Counters) -> _State:
        """The LS fit (or the truth, protocol reference) jittered by the initial step,
        hyperparameters at their prior medians (or their true values); up to 100
        tries for a finite log posterior."""
        cfg, pb = self.cfg, self.pb
        span = pb.upper - pb.lower
        x = np.concatenate([init["theta"],
                            init["hyper"] if "hyper" in init else self.hyper.start()])
        sigma2 = float(init["sigma2"])
        st = None
        for _ in range(100):
            x0 = x.copy()
            x0[: pb.p] = np.clip(x0[: pb.p] + cfg.initial_step * span * rng.standard_normal(pb.p),
                                 pb.lower + 1e-6 * span, pb.upper - 1e-6 * span)
            x0[-2:] += cfg.initial_step_log * rng.standard_normal(2)
            st = self._state(x0, sigma2, counters)
            if st is not None and np.isfinite(st.lp):
                return st
        raise DataError("data", "no finite starting point near the least-squares fit")

    def _metropolis(self, st: _State, prop_chol: np.ndarray, sigma2: float,
                    rng: np.random.Generator, counters: Counters) -> tuple[_State, bool]:
        """1. (theta, phi) | sigma^2 by random-walk Metropolis on the marginal posterior."""
        xp = st.x + prop_chol @ rng.standard_normal(self.d)
        new = self._state(xp, sigma2, counters)
        if new is not None and np.isfinite(new.lp):
            if math.log(rng.uniform()) < new.lp - st.lp:
                return new, True
        return st, False

    def _gibbs(self, st: _State, sigma2: float, rng: np.random.Generator,
               counters: Counters) -> tuple[np.ndarray, float]:
        """2. delta | theta, phi, sigma^2, y; 3. sigma^2 | theta, delta, y (all m
        observed entries); the state's log posterior follows the new sigma^2."""
        pb = self.pb
        try:
            delta = self._draw_delta(st, sigma2, rng, counters)
        except CholeskyError:
            counters.cholesky_failures += 1
            delta = np.zeros(pb.m)
        resid = pb.y - st.f - delta
        a0, b0 = pb.setting.sigma2_prior
        sigma2 = float((b0 + 0.5 * resid @ resid) / rng.gamma(a0 + 0.5 * pb.m))
        st.lp = self._loglik(st, sigma2, counters) + self._log_prior_hyper(st.x[-2], st.x[-1])
        return delta, sigma2

    def run_chain(self, init: dict[str, Any], rng: np.random.Generator, label: str = ""
                  ) -> ChainResult:
        cfg, pb = self.cfg, self.pb
        counters = Counters()
        st = self._start_state(init, rng, counters)
        sigma2 = float(init["sigma2"])
        start = st.x.copy()
        adapter = _Adapter.initial(cfg, pb.upper - pb.lower, self.d)
        kept = _Kept(len(range(cfg.burn_in, cfg.iterations, cfg.thin)), pb.p, pb.m)
        hist = np.empty((cfg.iterations, self.d))
        acc_total = 0
        t0, c0 = time.perf_counter(), time.process_time()
        bar = _progress_bar(cfg, label)
        for it in range(cfg.iterations):
            st, accepted = self._metropolis(st, adapter.prop_chol, sigma2, rng, counters)
            acc_total += accepted
            adapter.acc_block += accepted
            delta, sigma2 = self._gibbs(st, sigma2, rng, counters)
            hist[it] = st.x
            if it >= cfg.burn_in and (it - cfg.burn_in) % cfg.thin == 0:
                kept.store(st, sigma2, delta, accepted)
            if cfg.adapt_after_burn_in or it + 1 < cfg.burn_in:
                adapter.update(it, hist, cfg)
            if bar is not None:
                bar.update()
            if cfg.log_every and (it + 1) % cfg.log_every == 0:
                log.info("%s iteration %d/%d acceptance %.3f lp %.2f, %s", label, it + 1,
                         cfg.iterations, acc_total / (it + 1), st.lp,
                         eta(time.perf_counter() - t0, it + 1, cfg.iterations))
        if bar is not None:
            bar.close()
        seconds = time.perf_counter() - t0
        return ChainResult(kept.theta, kept.hyp[:, 0], kept.hyp[:, 1], kept.s2, kept.delta,
                           kept.lp, kept.acc, acc_total / cfg.iterations, counters, seconds,
                           start, time.process_time() - c0)


def _progress_bar(cfg: SamplerConfig, label: str) -> Any:
    if not (cfg.progress and sys.stderr.isatty()):
        return None
    from tqdm import tqdm

    return tqdm(total=cfg.iterations, desc=label or "chain", leave=False, file=sys.stderr)


class _Adapter:
    """The sequential chain's proposal: ``diag((initial_step (UB - LB))^2,
    initial_step_log^2 x 2)`` at first, then every ``adapt_every`` iterations
    ``lambda * 2.38^2 / d`` times the covariance of the second half of the history
    (Haario et al.), ``lambda`` following the acceptance rate towards 0.234."""

    def __init__(self, prop_cov: np.ndarray, d: int) -> None:
        self.prop_cov = prop_cov
        self.prop_chol = np.linalg.cholesky(prop_cov)
        self.base_scale = 2.38**2 / d
        self.d = d
        self.lam = 1.0
        self.acc_block = 0

    @classmethod
    def initial(cls, cfg: SamplerConfig, span: np.ndarray, d: int) -> _Adapter:
        return cls(np.diag(np.concatenate([(cfg.initial_step * span) ** 2,
                                           [cfg.initial_step_log**2] * 2])), d)

    def update(self, it: int, hist: np.ndarray, cfg: SamplerConfig) -> None:
        if (it + 1) % cfg.adapt_every != 0:
            return
        rate = self.acc_block / cfg.adapt_every
        self.acc_block = 0
        if cfg.adapt_scale:
            self.lam = float(np.clip(self.lam * math.exp(2.0 * (rate - 0.234)), 1e-3, 1e3))
        window = hist[(it + 1) // 2: it + 1]
        emp = np.cov(window, rowvar=False) if len(window) > self.d else None
        if emp is not None and np.all(np.isfinite(emp)):
            cov = self.lam * self.base_scale * emp + 1e-10 * self.prop_cov
            try:
                self.prop_chol, _ = robust_cholesky(cov)
            except CholeskyError:
                pass


class _Kept:
    """The kept draws of one sequential chain."""

    def __init__(self, n_keep: int, p: int, m: int) -> None:
        self.theta = np.empty((n_keep, p))
        self.hyp = np.empty((n_keep, 2))
        self.s2 = np.empty(n_keep)
        self.delta = np.empty((n_keep, m))
        self.lp = np.empty(n_keep)
        self.acc = np.zeros(n_keep, dtype=np.int8)
        self.k = 0

    def store(self, st: _State, sigma2: float, delta: np.ndarray, accepted: bool) -> None:
        k, p = self.k, self.theta.shape[1]
        self.theta[k] = st.x[:p]
        self.hyp[k] = st.x[-2:]
        self.s2[k] = sigma2
        self.delta[k] = delta
        self.lp[k] = st.lp
        self.acc[k] = accepted
        self.k += 1


def _start(problem: Likelihood, cfg: SamplerConfig, seed: int, keys: tuple[Any, ...],
           init_keys: tuple[Any, ...] | None, truth: Mapping[str, Any] | None
           ) -> tuple[dict[str, Any], Any]:
    """The run's start and hyperprior: least squares (honest) or the truth (reference)."""
    from simcalib.bayes.protocol import hyper_prior, reference_start
    from simcalib.seeds import rng as make_rng

    hyper = hyper_prior(problem.setting, cfg.protocol, truth, cfg.reference_box)
    if cfg.protocol == "reference":
        init = reference_start(problem.setting, truth)
        log.info("reference protocol: chains start at the truth theta=%s",
                 np.round(init["theta"], 4))
    else:
        sampler = Sampler(problem, cfg, hyper)
        init = sampler.least_squares_start(make_rng(seed, *(init_keys or (*keys, "init"))))
        init["protocol"] = "honest"
        log.info("least-squares start theta=%s cost=%.4g", np.round(init["theta"], 4),
                 init["cost"])
    return init, hyper


def _vectorized_result(chains: list[ChainResult], record: dict[str, Any],
                       init: dict[str, Any]) -> RunResult:
    for i, c in enumerate(chains):
        log.info("chain %d: %.1f s, acceptance %.3f, %s", i, c.seconds, c.acceptance,
                 c.counters)
    _log_record(record)
    return RunResult(chains, init, record)


def run(problem: Likelihood, cfg: SamplerConfig, seed: int, keys: tuple[Any, ...],
        init_keys: tuple[Any, ...] | None = None,
        truth: Mapping[str, Any] | None = None) -> RunResult:
    """Start (least squares, or the truth under ``protocol: reference``), then
    ``cfg.chains`` chains: in lock-step with one stream ``rng(seed, *keys, "vectorized")``
    (``engine: vectorized``), or one after the other, each with its own stream
    ``rng(seed, *keys, chain)`` (``engine: sequential``).  ``truth`` (theta, gamma, ell,
    noise_variance) is only read under ``protocol: reference``."""
    from simcalib.bayes._threads import limit_blas_threads

    limit_blas_threads(1)
    with numeric_events("chain set " + "/".join(map(str, keys))):
        return _run(problem, cfg, seed, keys, init_keys, truth)


def _run(problem: Likelihood, cfg: SamplerConfig, seed: int, keys: tuple[Any, ...],
         init_keys: tuple[Any, ...] | None, truth: Mapping[str, Any] | None) -> RunResult:
    from simcalib.seeds import rng as make_rng

    init, hyper = _start(problem, cfg, seed, keys, init_keys, truth)
    if cfg.engine == "vectorized":
        from simcalib.bayes.lockstep import run_lockstep

        lanes, record = run_lockstep(problem, cfg, init, hyper,
                                     make_rng(seed, *keys, "vectorized"), cfg.until())
        return _vectorized_result(lanes, record, init)
    sampler = Sampler(problem, cfg, hyper)
    chains = []
    for c in range(cfg.chains):
        res = sampler.run_chain(init, make_rng(seed, *keys, c), label=f"chain {c}")
        log.info("chain %d: %.1f s, acceptance %.3f, %s", c, res.seconds, res.acceptance,
                 res.counters)
        chains.append(res)
    record = {"engine": "sequential", "protocol": cfg.protocol, "iterations_run": cfg.iterations,
              "burn_in_used": cfg.burn_in, "stop_reason": "fixed_length"}
    if cfg.chains > 1:
        from simcalib.bayes.convergence import diagnose, is_converged

        r_hat, ess = diagnose({"theta": np.stack([c.theta for c in chains]),
                               "gamma": np.exp(np.stack([c.log_gamma for c in chains])),
                               "ell": np.exp(np.stack([c.log_ell for c in chains])),
                               "sigma2": np.stack([c.sigma2 for c in chains])})
        record.update({"r_hat_max": r_hat, "ess_bulk_min": ess,
                       "converged": is_converged(r_hat, ess)})
    _log_record(record)
    return RunResult(chains, init, record)


def run_many(problems: list[Likelihood], cfg: SamplerConfig, seed: int,
             keys: list[tuple[Any, ...]], init_keys: list[tuple[Any, ...] | None] | None = None,
             truths: list[Mapping[str, Any] | None] | None = None) -> list[RunResult]:
    """Several independent runs of one setting and method (say the replications of a
    simulation study), each exactly as :func:`run` would do it (same start, same
    stream ``rng(seed, *keys[i], "vectorized")``, same draws up to floating-point
    round-off), but sampled as lanes of one lock-step program, which shares the
    per-step overhead.  Vectorized engine and a fixed chain length only; with
    ``until_converged`` or the sequential engine the runs are done one by one."""
    from simcalib.bayes._threads import limit_blas_threads
    from simcalib.seeds import rng as make_rng

    n = len(problems)
    init_keys = init_keys or [None] * n
    truths = truths or [None] * n
    if cfg.engine != "vectorized" or cfg.until() is not None or n == 1:
        return [run(pb, cfg, seed, k, ik, tr) for pb, k, ik, tr
                in zip(problems, keys, init_keys, truths, strict=True)]
    from simcalib.bayes.lockstep import run_lockstep_many

    limit_blas_threads(1)
    label = f"{len(problems)} chain sets " + "/".join(map(str, keys[0])) + "..."
    with numeric_events(label):
        starts = [_start(pb, cfg, seed, k, ik, tr) for pb, k, ik, tr
                  in zip(problems, keys, init_keys, truths, strict=True)]
        out = run_lockstep_many(problems, cfg, [s[0] for s in starts],
                                [s[1] for s in starts],
                                [make_rng(seed, *k, "vectorized") for k in keys])
    return [_vectorized_result(lanes, record, s[0])
            for (lanes, record), s in zip(out, starts, strict=True)]


def _log_record(record: Mapping[str, Any]) -> None:
    """The run's convergence verdict by the default thresholds (bayes.convergence's
    schema values; until_converged's own when set).  INFO, not WARNING: the verdict a
    job acts on is the posterior summary's, with the config's thresholds
    (:func:`simcalib.bayes.posterior.warn_unconverged`), and one line says it."""
    if "converged" in record and not record["converged"]:
        log.info("chain set not converged (R-hat max %.3f, bulk ESS min %.0f; thresholds "
                 "%g / %g unless until_converged sets others)", record["r_hat_max"],
                 record["ess_bulk_min"], R_HAT_MAX, ESS_BULK_MIN)
