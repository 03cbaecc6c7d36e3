"""Optimally-Predict: the single entry point, dispatching on the option set's backend.

``optimize`` = checked problem (:mod:`.problem`) -> neuron bounds (:mod:`.bounds`)
-> warm start (:mod:`.warmstart`) -> backend solve -> forward-pass check -> floor
(:mod:`.multistart`).  The reported ``seconds`` is the whole wall time; the parts
are in ``OPResult.info``.  The option set arrives as a :class:`SolverSettings`
(:mod:`.settings`: checked and defaulted once, at the entry).

``time_limit`` bounds the whole call (:class:`Budget`): the box bounds get at most
half of it (once per job, cached), the per-target bound tightening at most 30 % of
what is left, the MILP the rest less a 10 % reserve for the floor, which runs only
when the solve ends unproven.  The floor is fixed work (its result depends on the
seed, not on the machine's load), sized to cost about what the benchmark's
baselines cost, so on a very small limit it can overrun it.  The numpy work runs on
one BLAS thread: its matrices are small, and a multi-threaded OpenBLAS spends more CPU synchronising
threads than computing (measured: 20-start L-BFGS 0.12 CPU-s on one thread, 1-2
CPU-s on the default threads of a shared 2-core machine).  Seconds depend on the
machine's load; a node limit in the raw options (``mip_max_nodes``) does not, so the
shipped configs stop hard solves by nodes and keep ``time_limit`` as a safety cap.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from simcalib.config import schema_defaults
from simcalib.metamodel.milp.bounds import NeuronBounds, compute_bounds, interval_bounds
from simcalib.metamodel.milp.boxbounds import box_bounds, cached_unstable
from simcalib.metamodel.milp.formulation import MILPModel, build_milp
from simcalib.metamodel.milp.localsearch import local_refine
from simcalib.metamodel.milp.multistart import batched_multistart
from simcalib.metamodel.milp.problem import (
    OPProblem,
    OPResult,
    build_problem,
    check_forward,
    full_inputs,
)
from simcalib.metamodel.milp.settings import SolverSettings
from simcalib.metamodel.milp.warmstart import warm_start as search_warm_start
from simcalib.metamodel.model import Metamodel
from simcalib.seeds import rng
from simcalib.study.space import Space

log = logging.getLogger(__name__)

#: random samples of the light warm start of a small net (``obbt.skip_below``)
SMALL_SAMPLES = 2000
#: warm start of a net with few unstable neurons (``obbt.light_below``): samples and
#: refinements (2x32 solvable, 17 unstable: the full pool cost ~0.036 of ~0.12 CPU-s
#: per target, and its better incumbent saved fewer nodes than it cost)
LIGHT_SAMPLES, LIGHT_LOCAL = 5000, 2

#: shares of ``time_limit`` (:class:`Budget`)
BOX_SHARE, OBBT_SHARE, FLOOR_SHARE, MIN_SOLVE_SHARE = 0.5, 0.3, 0.1, 0.05

_BLAS: Any = None


def one_blas_thread() -> Any:
    """A context manager limiting every loaded BLAS to one thread (threadpoolctl's
    controller is built once: scanning the loaded libraries costs milliseconds)."""
    global _BLAS
    if _BLAS is None:
        from threadpoolctl import ThreadpoolController

        _BLAS = ThreadpoolController()
    return _BLAS.limit(limits=1, user_api="blas")


@dataclass
class Budget:
    """The option set's ``time_limit`` spread over the parts of one OP call."""

    start: float
    limit: float

    def left(self) -> float:
        return self.start + self.limit - time.perf_counter()

    def box(self, configured: float) -> float:
        """Box bounds: computed once per job and cached, so the share depends on the
        limit only (a stable cache key), not on the time left."""
        return min(float(configured), BOX_SHARE * self.limit)

    def obbt(self, configured: float) -> float:
        return max(1e-3, min(float(configured), OBBT_SHARE * max(0.0, self.left())))

    def solve(self) -> float:
        return max(MIN_SOLVE_SHARE * self.limit, self.left() - FLOOR_SHARE * self.limit)


#: Defaults of one solver option set, from solvers.schema.yaml (the one source of truth).
SOLVER_DEFAULTS: dict[str, Any] = schema_defaults("solvers.schema.yaml", "option_set",
                                                  {"backend": "highs"})


def solver_settings(solver: SolverSettings | Mapping[str, Any] | None) -> SolverSettings:
    """The option set over the schema's defaults (:meth:`SolverSettings.build`); an
    unknown or mistyped option is a :class:`ConfigError` naming ``solver.<key>``."""
    return SolverSettings.build(solver, "solver")


@dataclass
class _Prep:
    """What the stages of :func:`prepare` hand each other."""

    problem: OPProblem
    full: OPProblem
    s: SolverSettings
    box_tl: float
    cutoff_slack: float
    probe: tuple[np.ndarray | None, float, dict[str, Any]] | None = None
    box_nb: NeuronBounds | None = None
    cached: bool = False

    @property
    def plain(self) -> bool:
        return self.s.backend == "gurobi" and not self.s.use_bounds

    @property
    def box_unstable(self) -> int | None:
        return None if self.box_nb is None else int(self.box_nb.summary()["unstable"])

    @property
    def small(self) -> bool:
        """Few unstable neurons over the box: the box bounds are the MILP's as they are."""
        u = self.box_unstable
        return u is not None and self.cutoff_slack == 0.0 and u <= self.s.obbt.skip_below

    @property
    def light(self) -> bool:
        """One round of per-target tightening (a second one saved fewer nodes than its
        LPs cost on 2x32 solvable; on 2x16 plain, 32 unstable, it halves the nodes)."""
        u = self.box_unstable
        return u is not None and not self.small and self.cutoff_slack == 0.0 \
            and u <= self.s.obbt.light_below


def _probe(p: _Prep, space: Space, seed: int) -> None:
    """HiGHS: the full warm start before the box bounds, so a target it already proves
    (objective within mip_gap_abs of the bound 0, common on Rosenbrock) skips them; on
    a net with many contexts the cache rarely helps and each call paid up to
    box_time_limit for nothing.  With the box bounds already cached (every target
    after a job's first) a net with few unstable neurons gets the light warm start
    (``obbt.light_below``)."""
    s, ws = p.s, p.s.warm_start
    first = ws.multistart_first
    known = cached_unstable(p.full, p.box_tl) if s.obbt.light_below and s.obbt.enabled \
        and p.cutoff_slack == 0.0 else None
    if known is not None and s.obbt.skip_below < known <= s.obbt.light_below:
        ws = replace(ws, samples=min(ws.samples, LIGHT_SAMPLES), local=min(ws.local, LIGHT_LOCAL))
    p.probe = search_warm_start(p.problem, space, ws, rng(seed, "op", "warm_start"),
                                multistart=first)
    p.probe[2]["multistart_done"] = first and p.probe[2].get("multistart_objective") is not None


def _box_stage(p: _Prep, box: tuple[np.ndarray, np.ndarray] | None) -> None:
    """Bounds over the full box at this context (they hold on every sub-box, the
    proximity boxes of the strategies, so one cached computation serves them all),
    narrowed to ``box`` by interval arithmetic."""
    threads = p.s.threads or 1
    if p.s.obbt.enabled:
        p.box_nb, p.cached = box_bounds(p.full, p.box_tl, threads)
    else:  # no LP tightening anywhere: interval arithmetic over the box
        t_ia = time.perf_counter()
        p.box_nb = NeuronBounds(pre=interval_bounds(p.full))
        p.box_nb.seconds = time.perf_counter() - t_ia
    if box is not None:
        t_sub = time.perf_counter()
        p.box_nb = NeuronBounds(pre=interval_bounds(p.problem, start=p.box_nb.pre),
                                seconds=p.box_nb.seconds + time.perf_counter() - t_sub,
                                lp_solves=p.box_nb.lp_solves)


def _warm_stage(p: _Prep, space: Space, seed: int
                ) -> tuple[np.ndarray | None, float, dict[str, Any]]:
    """The incumbent: the probe's when HiGHS ran it (the same draws), else the warm
    start sized by the portfolio.  A small net gets a light incumbent now and the
    full pool only if unproven; Gurobi's own heuristics find a first incumbent at once
    (no samples: they were most of the gap to plain gurobi-ml on small nets).  The
    multi-start (~20 local searches) runs first only when asked."""
    if p.probe is not None:
        x0, f0, wstats = p.probe
    else:
        ws = p.s.warm_start
        if p.small:
            ws = replace(ws, samples=0 if p.s.backend == "gurobi" else
                         min(ws.samples, SMALL_SAMPLES), local=0)
        first = ws.multistart_first and not p.small
        x0, f0, wstats = search_warm_start(p.problem, space, ws, rng(seed, "op", "warm_start"),
                                           multistart=first)
        wstats["multistart_done"] = first and wstats.get("multistart_objective") is not None
    wstats["light"] = bool(p.small)
    return x0, f0, wstats


def _given_start(problem: OPProblem, given: np.ndarray, x0: np.ndarray | None, f0: float,
                 wstats: dict[str, Any]) -> tuple[np.ndarray | None, float]:
    """The caller's warm start replaces the search's when it is feasible and better."""
    g = np.clip(np.asarray(given, dtype=float), problem.lo, problem.hi)
    g[problem.integer] = np.round(g[problem.integer])
    if not problem.feasible(g)[0]:
        log.warning("the given warm start violates the constraints; ignored")
        wstats["given_objective"] = None
        return x0, f0
    fg = float(problem.objective(g)[0])
    wstats["given_objective"] = fg
    return (g, fg) if fg < f0 else (x0, f0)


def _target_bounds(p: _Prep, x0: np.ndarray | None, f0: float, trivial: bool,
                   budget: Budget | None) -> NeuronBounds:
    """The MILP's neuron bounds: interval arithmetic when no MILP is needed (or plain
    gurobi-ml), the box bounds of a small net, else the per-target tightening cut by
    the incumbent's objective (+ slack for alternative optima)."""
    if trivial or p.plain:
        t0 = time.perf_counter()
        nb = NeuronBounds(pre=interval_bounds(p.problem), seconds=0.0)
        nb.seconds = time.perf_counter() - t0
        return nb
    if p.small and p.box_nb is not None:
        nb = p.box_nb
        nb.seconds = 0.0 if p.cached else nb.seconds
        return nb
    cutoff = f0 + p.cutoff_slack if x0 is not None and np.isfinite(f0) else None
    tl = p.s.obbt.time_limit if budget is None else budget.obbt(p.s.obbt.time_limit)
    nb = compute_bounds(p.problem, p.s.obbt, p.s.threads or 1, cutoff,
                        start=None if p.box_nb is None else p.box_nb.pre,
                        rounds=1 if p.light else 2, time_limit=tl)
    if p.box_nb is not None and not p.cached:
        nb.seconds += p.box_nb.seconds  # the first target pays for the box bounds
    return nb


def prepare(mm: Metamodel, space: Space, target: Mapping[str, float],
            context: Mapping[str, float] | None, solver: SolverSettings | Mapping[str, Any],
            box: tuple[np.ndarray, np.ndarray] | None, weights: Mapping[str, float] | None,
            warm_start: np.ndarray | None, seed: int, cutoff_slack: float = 0.0,
            allow_trivial: bool = True, budget: Budget | None = None
            ) -> tuple[OPProblem, SolverSettings, NeuronBounds, np.ndarray | None, dict[str, Any]]:
    """OPProblem, settings, bounds and warm-start point (shared with alternatives).

    Portfolio by net size: the bounds over the whole box are computed once per
    (network, context, box) and cached (:mod:`.boxbounds`).  When at most
    ``obbt.skip_below`` neurons are unstable over the box, the MILP uses them as
    they are and the warm start is light (the full pool runs afterwards only if
    the solve is not proven optimal).  Otherwise sampling and refinement run first
    and their objective cuts the per-target tightening, which starts from the box
    bounds and skips neurons they prove stable; multi-start L-BFGS runs after an
    unproven solve (or first, with ``warm_start.multistart_first``).  With a
    ``budget`` the bound tightening's time limits are capped by it.

    Stages: probe (HiGHS's early warm start) -> box bounds -> warm start -> the
    caller's start -> the per-target bounds."""
    s = SolverSettings.build(solver)
    problem = build_problem(mm, space, target, context, box, weights)
    full = problem if box is None else build_problem(mm, space, target, context, None, weights)
    box_tl = s.obbt.box_time_limit if budget is None else budget.box(s.obbt.box_time_limit)
    p = _Prep(problem=problem, full=full, s=s, box_tl=box_tl, cutoff_slack=cutoff_slack)
    if s.backend == "highs" and allow_trivial and warm_start is None:
        _probe(p, space, seed)
    early_trivial = p.probe is not None and p.probe[0] is not None and \
        p.probe[1] <= s.mip_gap_abs
    if not p.plain and not early_trivial:
        _box_stage(p, box)
    x0, f0, wstats = _warm_stage(p, space, seed)
    if warm_start is not None:
        x0, f0 = _given_start(problem, warm_start, x0, f0, wstats)
    # the objective is >= 0: a warm start within mip_gap_abs of 0 is proven optimal
    trivial = allow_trivial and x0 is not None and f0 <= s.mip_gap_abs
    wstats["trivial"] = bool(trivial)
    nb = _target_bounds(p, x0, f0, trivial, budget)
    wstats["used_objective"] = None if x0 is None else f0
    path = "plain" if p.plain else ("box-bounds" if p.small else
                                    ("cutoff-light" if p.light else "cutoff"))
    wstats["portfolio"] = {"box_unstable": p.box_unstable, "box_cached": bool(p.cached),
                           "path": path}
    return problem, s, nb, x0, wstats


def _floor_seeds(problem: OPProblem, res: OPResult, x0: np.ndarray | None,
                 pool: list[np.ndarray] | None, k: int = 8) -> list[np.ndarray]:
    """Known good points to start the floor's search from: the solver's point, the
    warm start and the last ``k`` improving incumbents of the MILP."""
    seeds = [np.asarray(p, dtype=float) for p in (pool or [])[-k:]]
    seeds += [np.asarray(v, dtype=float) for v in (res.x, x0) if v is not None]
    return [v for v in seeds if v.shape == (problem.n_in,) and np.all(np.isfinite(v))]


def apply_floor(mm: Metamodel, space: Space, problem: OPProblem, res: OPResult,
                x0: np.ndarray | None, f0: float, s: SolverSettings, wstats: dict[str, Any],
                seed: int, pool: list[np.ndarray] | None = None,
                deadline: float | None = None) -> OPResult:
    """Never worse than local search: polish the solver's point with L-BFGS and, when
    the solve is not proven optimal, run the batched multi-start of
    :mod:`.multistart` (hundreds of spread starts plus the MILP's incumbents and the
    warm start as seeds, integers by neighbour moves) unless it already ran before
    the solve; return the best of these and the warm-start pool.  The bound stays
    the solver's (valid for every point); the gap shrinks with the objective.
    ``info['floor']`` says where the answer came from and what it cost."""
    ws = s.warm_start
    if not ws.enabled:
        return res
    t0, c0 = time.perf_counter(), time.process_time()
    cands: list[tuple[float, np.ndarray, str]] = []
    milp_obj = res.objective
    if np.all(np.isfinite(res.x)):
        cands.append((float(problem.objective(res.x)[0]), res.x, "solver"))
        xp, fp = local_refine(problem, res.x, ws.maxiter)
        cands.append((fp, xp, "solver+polish"))
    if x0 is not None and np.isfinite(f0):
        cands.append((f0, np.asarray(x0, dtype=float), "warm_start_pool"))
    floor: dict[str, Any] = {"solver_objective": milp_obj, "source": "solver", "seconds": 0.0}
    if res.status != "optimal" and not wstats.get("multistart_done") and ws.starts > 0:
        ms = batched_multistart(problem, rng(seed, "op", "floor_multistart"),
                                starts=ws.starts, iters=ws.iters, polish=ws.polish,
                                maxiter=ws.maxiter,
                                seeds=_floor_seeds(problem, res, x0, pool), deadline=deadline)
        wstats["multistart_objective"] = ms.objective
        floor["multistart"] = {"starts": ms.starts, "seconds": round(ms.seconds, 4),
                               "objective": ms.objective}
        if np.isfinite(ms.objective):
            cands.append((ms.objective, ms.x, "multistart"))
    if problem.guarded:
        # local searches do not see a constraint output (the run-success logit): score
        # every candidate with it (+inf when the point is predicted to fail)
        cands = [(float(problem.objective(np.asarray(x, dtype=float))[0]), x, src)
                 for _, x, src in cands]
        cands = [c for c in cands if np.isfinite(c[0])]
    if not cands:
        return res
    f_best, x_best, src = min(cands, key=lambda c: c[0])
    if src != "solver" and f_best < milp_obj - 1e-12:
        x = np.clip(np.asarray(x_best, dtype=float), problem.lo, problem.hi)
        x[problem.integer] = np.round(x[problem.integer])
        y = mm.predict_scaled(full_inputs(mm, problem, x)[None])[0]
        obj = float(np.abs(y - problem.target_scaled) @ problem.weights)
        if obj < milp_obj and problem.guard_ok(x)[0]:
            bound = res.bound
            gap = max(0.0, obj - bound) if np.isfinite(bound) else np.inf
            res = OPResult(x=x, predicted=mm.unscale_outputs(y), objective=obj,
                           bound=float(bound), gap=float(gap), status=res.status,
                           seconds=res.seconds, nodes=res.nodes, backend=res.backend,
                           time_limited=res.time_limited, info=res.info)
            floor["source"] = src
    floor["seconds"] = round(time.perf_counter() - t0, 4)
    floor["cpu_seconds"] = round(time.process_time() - c0, 4)
    res.seconds += floor["seconds"]
    res.info["floor"] = floor
    return res


def finish(mm: Metamodel, space: Space, problem: OPProblem, model: MILPModel | None,
           values: np.ndarray | None, x: np.ndarray | None, y_milp: np.ndarray | None,
           status: str, bound: float, nodes: int, seconds: float, backend: str,
           check_tol: float, info: dict[str, Any]) -> OPResult:
    """Round integers, run the forward-pass check, compute the reported numbers."""
    if x is None:
        nan = np.full(problem.n_in, np.nan)
        return OPResult(x=nan, predicted=np.full(problem.n_out, np.nan), objective=np.inf,
                        bound=bound, gap=np.inf, status=status, seconds=seconds, nodes=nodes,
                        backend=backend, time_limited=status == "time_limit", info=info)
    x = np.clip(np.asarray(x, dtype=float), problem.lo, problem.hi)
    x[problem.integer] = np.round(x[problem.integer])
    y_torch = check_forward(mm, space, problem, x, y_milp, check_tol) \
        if y_milp is not None else mm.predict_scaled(full_inputs(mm, problem, x)[None])[0]
    obj = float(np.abs(y_torch - problem.target_scaled) @ problem.weights)
    if status == "optimal":
        bound = min(bound, obj)
    gap = max(0.0, obj - bound) if np.isfinite(bound) else np.inf
    return OPResult(x=x, predicted=mm.unscale_outputs(y_torch), objective=obj, bound=float(bound),
                    gap=float(gap), status=status, seconds=seconds, nodes=int(nodes),
                    backend=backend, time_limited=status == "time_limit", info=info)


def optimize(mm: Metamodel, space: Space, target: Mapping[str, float],
             context: Mapping[str, float] | None,
             solver: SolverSettings | Mapping[str, Any],
             box: tuple[np.ndarray, np.ndarray] | None = None,
             weights: Mapping[str, float] | None = None,
             warm_start: np.ndarray | None = None, seed: int = 0,
             failure: Any = None) -> OPResult:
    """Minimise Σ_j w_j |M_j(x, c) - ẑ_j| / y_std_j over the tunables ``x`` in ``box``
    (default: the bounds at ``context``), integer inputs integer, linear domain
    constraints respected, within the option set's ``time_limit`` for the whole
    call.  See :class:`OPResult`.  ``solver``: a :class:`SolverSettings` (a mapping is
    built into one here, once: a misspelled key is a :class:`ConfigError`).

    ``failure`` (a :class:`simcalib.metamodel.failure.FailureModel`; default: the
    one attached to ``mm``, ``mm.failure``): the run-success classifier becomes one
    more output of the embedded network, bounded below so that the answer's predicted
    success probability is at least its threshold; the result's ``predicted`` holds
    the metamodel's outputs only, ``info['failure']`` the answer's predicted success probability."""
    solver = SolverSettings.build(solver)
    if failure is None:
        failure = getattr(mm, "failure", None)
    if failure is not None:
        from simcalib.metamodel.failure import guarded

        n_out = len(mm.output_names)
        res = optimize(guarded(mm, failure), space, target, context, solver, box, weights,
                       warm_start, seed)
        res.predicted = np.asarray(res.predicted)[:n_out]
        prob = float("nan")
        if np.isfinite(res.x).all():
            vals = {**dict(zip(space.tunable_names, np.asarray(res.x, dtype=float),
                               strict=True)), **dict(context or {})}
            prob = float(failure.prob(np.array([[vals[n] for n in failure.input_names]]))[0])
        res.info["failure"] = {"threshold": failure.threshold, "success_probability": prob}
        return res
    t0 = time.perf_counter()
    budget = Budget(t0, solver.time_limit)
    with one_blas_thread():
        problem, s, nb, x0, wstats = prepare(mm, space, target, context, solver, box, weights,
                                             warm_start, seed, budget=budget)
        res, pool = _solve(mm, space, problem, s, nb, x0, wstats, seed, t0, budget)
        f0 = wstats.get("used_objective")
        # the floor is fixed work (reproducible from the seed, whatever the load): the
        # MILP's budget keeps FLOOR_SHARE of the limit for it
        return apply_floor(mm, space, problem, res, x0, np.inf if f0 is None else float(f0),
                           s, wstats, seed, pool)


def _solve(mm: Metamodel, space: Space, problem: OPProblem, s: SolverSettings,
           nb: NeuronBounds,
           x0: np.ndarray | None, wstats: dict[str, Any], seed: int, t0: float,
           budget: Budget | None = None) -> tuple[OPResult, list[np.ndarray] | None]:
    """The backend solve; returns the result and the MILP's incumbents (tunables)."""
    info: dict[str, Any] = {"bounds": nb.summary(), "warm_start": wstats}
    if budget is not None:
        s = s.replace(time_limit=budget.solve())
        info["solve_time_limit"] = round(s.time_limit, 3)
    if wstats.get("trivial"):
        # no solver needed: the warm start is within mip_gap_abs of the bound 0
        info["solve_seconds"] = 0.0
        return finish(mm, space, problem, None, None, x0, None, "optimal", 0.0, 0,
                      time.perf_counter() - t0, s.backend_name, s.check_tol, info), None
    if s.backend == "highs":
        from simcalib.metamodel.milp import highs_backend

        model = build_milp(problem, nb)
        info["model"] = {"cols": model.n_cols, "rows": model.n_rows,
                         "binaries": model.n_binaries}
        # an incumbent outside a constraint output's bound is no incumbent
        warm = (model.solution_from_x(problem, x0)
                if x0 is not None and problem.feasible(x0)[0] else None)
        raw = highs_backend.solve(model, s, warm, seed)
        info["solve_seconds"] = raw.seconds
        x = raw.values[model.x] if raw.values is not None else None
        y = raw.values[model.y] if raw.values is not None else None
        pool = [v[model.x] for v in raw.pool] if raw.pool else None
        return finish(mm, space, problem, model, raw.values, x, y, raw.status, raw.bound,
                      raw.nodes, time.perf_counter() - t0, "highs", s.check_tol, info), pool
    from simcalib.metamodel.milp import gurobi_backend

    raw = gurobi_backend.solve_predictor(problem, nb, s, x0, seed)
    info["solve_seconds"] = raw.seconds
    info["model"] = raw.model_size
    return finish(mm, space, problem, None, None, raw.x, raw.y, raw.status, raw.bound,
                  raw.nodes, time.perf_counter() - t0, s.backend_name, s.check_tol, info), None
