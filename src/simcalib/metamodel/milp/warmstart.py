"""Cheap searches of the metamodel: the MILP's warm start and the benchmark baselines.

* :func:`sample_search` evaluates many feasible design points in one batched numpy
  forward pass (the folded network; no torch overhead) and keeps the best.
* :func:`local_refine` polishes a point: L-BFGS-B (or SLSQP when there are linear
  domain constraints) over the continuous inputs with the integers fixed, then ±1
  moves on each integer input, repeated while it improves.  The objective is
  piecewise linear; its gradient is back-propagated exactly in numpy.
* :func:`warm_start` = sampling + refinement of the best few distinct samples +
  (optionally) the batched multi-start of :mod:`.multistart` (the pool).
* :func:`multistart_lbfgs` is the benchmark's independent baseline: L-BFGS from
  ``starts`` random points, one scipy call each.  The result is handed to the
  solver as an incumbent, which gives HiGHS a good primal bound from node 0 (it
  may otherwise find none on larger nets), and it is the floor of OP's answer:
  OP never returns a point worse than its own local searches.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from simcalib.errors import ConfigError
from simcalib.metamodel.milp.localsearch import local_refine
from simcalib.metamodel.milp.multistart import batched_multistart
from simcalib.metamodel.milp.problem import OPProblem
from simcalib.metamodel.milp.settings import WarmStartSettings
from simcalib.study.space import Space


def sample_search(problem: OPProblem, space: Space, n: int, rng: np.random.Generator,
                  keep: int = 1, batch: int = 50_000) -> tuple[np.ndarray, np.ndarray]:
    """Best ``keep`` of ``n`` random feasible points in the problem's box:
    (points (keep, d), objectives (keep,))."""
    best_x: list[np.ndarray] = []
    best_f: list[np.ndarray] = []
    done = 0
    while done < n:
        m = min(batch, n - done)
        df = space.sample_tunables(m, rng, "uniform", problem.context,
                                   box=(problem.lo, problem.hi))
        X = df[problem.tunable_names].to_numpy(dtype=float)
        f = problem.objective(X)
        order = np.argsort(f)[:keep]
        best_x.append(X[order])
        best_f.append(f[order])
        done += m
    X = np.concatenate(best_x)
    f = np.concatenate(best_f)
    order = np.argsort(f)[:keep]
    return X[order], f[order]


def multistart_lbfgs(problem: OPProblem, space: Space, starts: int, rng: np.random.Generator,
                     maxiter: int = 200) -> tuple[np.ndarray, float]:
    """The benchmark baseline: local refinement from ``starts`` random feasible points."""
    df = space.sample_tunables(starts, rng, "uniform", problem.context,
                               box=(problem.lo, problem.hi))
    X = df[problem.tunable_names].to_numpy(dtype=float)
    best_x, best_f = X[0], np.inf
    for x0 in X:
        x, f = local_refine(problem, x0, maxiter)
        if f < best_f:
            best_x, best_f = x, f
    return best_x, float(best_f)


def _batched(problem: OPProblem, cfg: WarmStartSettings, rng: np.random.Generator,
             seeds: list[np.ndarray]) -> tuple[np.ndarray, float]:
    r = batched_multistart(problem, rng, starts=cfg.starts, iters=cfg.iters,
                           polish=cfg.polish, maxiter=cfg.maxiter, seeds=seeds)
    return r.x, r.objective


def warm_start(problem: OPProblem, space: Space, cfg: WarmStartSettings,
               rng: np.random.Generator, multistart: bool = True
               ) -> tuple[np.ndarray | None, float, dict[str, Any]]:
    """The warm-start pool: sampling, refinement of the best ``local`` distinct
    samples, and (``multistart``) the batched multi-start from ``starts`` spread
    points seeded with the pool's best.
    Returns (best x or None, objective, stats); ``None`` when disabled or when no
    feasible point could be drawn (the solver then starts cold).  The pool's best is
    also the floor of OP's answer (:func:`simcalib.metamodel.milp.optimize.optimize`)."""
    if not cfg.enabled:
        return None, np.inf, {"enabled": False}
    t0 = time.perf_counter()
    n, k = cfg.samples, cfg.local
    if n <= 0:  # no sampling asked (a solver that finds its own first incumbent)
        stats = {"enabled": True, "found": False, "samples": 0, "multistart_objective": None}
        best_x, best_f = None, np.inf
        if multistart and cfg.starts > 0:
            best_x, best_f = _batched(problem, cfg, rng, [])
            stats.update(found=bool(np.isfinite(best_f)), multistart_objective=best_f)
            if not np.isfinite(best_f):
                best_x = None
        stats.update({"objective": best_f, "seconds": time.perf_counter() - t0})
        return best_x, best_f, stats
    try:
        X, f = sample_search(problem, space, n, rng, keep=max(1, 20 * k))
    except ConfigError:
        return None, np.inf, {"enabled": True, "found": False,
                              "seconds": time.perf_counter() - t0}
    sample_best = float(f[0])
    distinct = cfg.distinct
    # refine the best distinct samples (skip near-duplicates in scaled inputs)
    span = np.where(problem.hi > problem.lo, problem.hi - problem.lo, 1.0)
    chosen: list[np.ndarray] = []
    for x in (X if k > 0 else []):
        if all(np.max(np.abs((x - c) / span)) > distinct for c in chosen):
            chosen.append(x)
        if len(chosen) >= k:
            break
    best_x, best_f = X[0], float(f[0])
    for x0 in chosen:
        x, fx = local_refine(problem, x0, cfg.maxiter)
        if fx < best_f:
            best_x, best_f = x, fx
    stats: dict[str, Any] = {"enabled": True, "found": True, "sample_objective": sample_best,
                             "refined_objective": best_f, "multistart_objective": None}
    if multistart and cfg.starts > 0:
        xm, fm = _batched(problem, cfg, rng, [best_x])
        stats["multistart_objective"] = fm
        if fm < best_f:
            best_x, best_f = xm, fm
    stats.update({"objective": best_f, "seconds": time.perf_counter() - t0})
    return best_x, best_f, stats
