"""Optimally-Predict: the single entry point, dispatching on the option set's backend.

``optimize`` = checked problem (:mod:`.problem`) -> neuron bounds (:mod:`.bounds`)
-> warm start (:mod:`.warmstart`) -> backend solve -> forward-pass check -> floor
(:mod:`.multistart`).  The reported ``seconds`` is the whole wall time; the parts
are in ``OPResult.info``.

``time_limit`` bounds the whole call (:class:`Budget`): the box bounds get at most
half of it (once per job, cached), the per-target bound tightening at most 30 % of
what is left, the MILP the rest less a 10 % reserve for the floor, which runs only
when the solve ends unproven.  The floor is fixed work (its result depends on the
seed, not on the machine's load), sized to cost about what the benchmark's
baselines cost, so on a very small limit it can overrun it.  The numpy work runs on
one BLAS thread: its matrices are small, and a multi-threaded OpenBLAS spends more CPU synchronising
threads than computing (measured: 20-start L-BFGS 0.12 CPU-s on one thread, 1-2
CPU-s on the default threads of a shared 2-core machine).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from simcalib.config import check_section, schema_defaults
from simcalib.errors import ConfigError
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
from simcalib.metamodel.milp.warmstart import warm_start as search_warm_start
from simcalib.metamodel.model import Metamodel
from simcalib.seeds import rng
from simcalib.study.space import Space

log = logging.getLogger(__name__)

BACKENDS = ("highs", "gurobi")
#: ``obbt.skip_below`` by backend (benchmarks/op_milp.py, 2 cores): HiGHS needs the
#: per-target cutoff tightening even on 2x16 (without it 0-1/5 targets proven in 10 s
#: instead of 5/5); Gurobi does not, and skipping it (and the heavy warm start) makes
#: ours as fast as plain gurobi-ml on nets it proves quickly
SKIP_BELOW = {"highs": 0, "gurobi": 64}
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


def solver_settings(solver: Mapping[str, Any] | None) -> dict[str, Any]:
    """The option set over the defaults; an unknown or mistyped option is an error."""
    check_section({"backend": "highs", **(solver or {})}, "solvers.schema.yaml", "solver",
                  "option_set")
    out: dict[str, Any] = {k: (dict(v) if isinstance(v, dict) else v)
                           for k, v in SOLVER_DEFAULTS.items()}
    for k, v in (solver or {}).items():
        if isinstance(v, Mapping) and isinstance(out.get(k), dict):
            out[k] = {**out[k], **v}
        else:
            out[k] = v
    if out["backend"] not in BACKENDS:
        raise ConfigError("solvers.backend", f"unknown backend {out['backend']!r}; use one of "
                          f"{list(BACKENDS)}")
    if float(out["time_limit"]) <= 0:
        raise ConfigError("solvers.time_limit", "must be > 0")
    if out["obbt"].get("skip_below") is None:
        out["obbt"]["skip_below"] = SKIP_BELOW[out["backend"]]
    return out


def prepare(mm: Metamodel, space: Space, target: Mapping[str, float],
            context: Mapping[str, float] | None, solver: Mapping[str, Any],
            box: tuple[np.ndarray, np.ndarray] | None, weights: Mapping[str, float] | None,
            warm_start: np.ndarray | None, seed: int, cutoff_slack: float = 0.0,
            allow_trivial: bool = True, budget: Budget | None = None
            ) -> tuple[OPProblem, dict[str, Any], NeuronBounds, np.ndarray | None, dict[str, Any]]:
    """OPProblem, settings, bounds and warm-start point (shared with alternatives).

    Portfolio by net size: the bounds over the whole box are computed once per
    (network, context, box) and cached (:mod:`.boxbounds`).  When at most
    ``obbt.skip_below`` neurons are unstable over the box, the MILP uses them as
    they are and the warm start is light (the full pool runs afterwards only if
    the solve is not proven optimal).  Otherwise sampling and refinement run first
    and their objective cuts the per-target tightening, which starts from the box
    bounds and skips neurons they prove stable; multi-start L-BFGS runs after an
    unproven solve (or first, with ``warm_start.multistart_first``).  With a
    ``budget`` the bound tightening's time limits are capped by it."""
    s = solver_settings(solver)
    problem = build_problem(mm, space, target, context, box, weights)
    plain = s["backend"] == "gurobi" and not s["use_bounds"]
    threads = int(s["threads"] or 1)
    box_nb, cached = None, False
    # HiGHS always runs the full warm start (obbt.skip_below is 0 for it): run it before
    # the box bounds, so a target it already proves (objective within mip_gap_abs of
    # the bound 0, common on Rosenbrock) skips them; on a net with many contexts the
    # cache rarely helps and each call paid up to box_time_limit for nothing
    probe = None
    light_below = int(s["obbt"].get("light_below", 0) or 0)
    box_tl = float(s["obbt"].get("box_time_limit", 30.0))
    box_tl = budget.box(box_tl) if budget else box_tl
    full = problem if box is None else build_problem(mm, space, target, context, None,
                                                     weights)
    if s["backend"] == "highs" and allow_trivial and warm_start is None:
        first_p = bool(s["warm_start"].get("multistart_first", False))
        ws_p = dict(s["warm_start"])
        # box bounds already cached (every target after a job's first): a net with few
        # unstable neurons gets the light warm start (``obbt.light_below``)
        known = cached_unstable(full, box_tl) if light_below and \
            s["obbt"].get("enabled", True) and cutoff_slack == 0.0 else None
        if known is not None and int(s["obbt"].get("skip_below", 0)) < known <= light_below:
            ws_p.update(samples=min(int(ws_p.get("samples", 20000)), LIGHT_SAMPLES),
                        local=min(int(ws_p.get("local", 5)), LIGHT_LOCAL))
        probe = search_warm_start(problem, space, ws_p,
                                  rng(seed, "op", "warm_start"), multistart=first_p)
        probe[2]["multistart_done"] = first_p and \
            probe[2].get("multistart_objective") is not None
    early_trivial = probe is not None and probe[0] is not None and \
        probe[1] <= float(s["mip_gap_abs"])
    if not plain and not early_trivial:
        # bounds over the full box at this context hold on every sub-box (proximity
        # boxes of the strategies), so one cached computation serves them all
        if s["obbt"].get("enabled", True):
            box_nb, cached = box_bounds(full, box_tl, threads)
        else:  # no LP tightening anywhere: interval arithmetic over the box
            t_ia = time.perf_counter()
            box_nb = NeuronBounds(pre=interval_bounds(full))
            box_nb.seconds = time.perf_counter() - t_ia
        if box is not None:
            t_sub = time.perf_counter()
            box_nb = NeuronBounds(pre=interval_bounds(problem, start=box_nb.pre),
                                  seconds=box_nb.seconds + time.perf_counter() - t_sub,
                                  lp_solves=box_nb.lp_solves)
    box_unstable = None if box_nb is None else int(box_nb.summary()["unstable"])
    small = box_unstable is not None and cutoff_slack == 0.0 \
        and box_unstable <= int(s["obbt"].get("skip_below", 0))
    # few unstable neurons: one round of per-target tightening (a second one saved
    # fewer nodes than its LPs cost on 2x32 solvable; on 2x16 plain, 32 unstable, it
    # halves the nodes and stays)
    light = box_unstable is not None and not small and cutoff_slack == 0.0 \
        and box_unstable <= light_below
    ws = dict(s["warm_start"])
    if small:  # a quick solve: a light incumbent now, the full pool only if unproven
        ws.update(samples=min(int(ws.get("samples", 20000)), SMALL_SAMPLES), local=0)
        if s["backend"] == "gurobi":
            # Gurobi's own heuristics find a first incumbent at once: no samples before
            # the solve (they were most of the gap to plain gurobi-ml on small nets);
            # the floor after an unproven solve still runs the whole pool
            ws["samples"] = 0
    # multi-start L-BFGS costs ~20 local searches: run first only when asked
    # (``warm_start.multistart_first``), else after the solve and only if it is unproven
    first = bool(ws.get("multistart_first", False)) and not small
    if probe is not None:   # the full warm start already ran (HiGHS): the same draws
        x0, f0, wstats = probe
    else:
        x0, f0, wstats = search_warm_start(problem, space, ws, rng(seed, "op", "warm_start"),
                                           multistart=first)
        wstats["multistart_done"] = first and wstats.get("multistart_objective") is not None
    wstats["light"] = bool(small)
    if warm_start is not None:
        given = np.clip(np.asarray(warm_start, dtype=float), problem.lo, problem.hi)
        given[problem.integer] = np.round(given[problem.integer])
        if problem.feasible(given)[0]:
            fg = float(problem.objective(given)[0])
            wstats["given_objective"] = fg
            if fg < f0:
                x0, f0 = given, fg
        else:
            log.warning("the given warm start violates the constraints; ignored")
            wstats["given_objective"] = None
    # the objective is >= 0: a warm start within mip_gap_abs of 0 is proven optimal
    trivial = allow_trivial and x0 is not None and f0 <= float(s["mip_gap_abs"])
    wstats["trivial"] = bool(trivial)
    if trivial or plain:
        t0 = time.perf_counter()
        nb = NeuronBounds(pre=interval_bounds(problem), seconds=0.0)
        nb.seconds = time.perf_counter() - t0
    elif small and box_nb is not None:
        nb = box_nb
        nb.seconds = 0.0 if cached else nb.seconds
    else:
        # the incumbent's objective (+ slack for alternative optima) cuts the region
        cutoff = f0 + cutoff_slack if x0 is not None and np.isfinite(f0) else None
        obbt = dict(s["obbt"])
        if light:
            obbt["rounds"] = 1
        if budget is not None:
            obbt["time_limit"] = budget.obbt(float(obbt.get("time_limit", 10.0)))
        nb = compute_bounds(problem, obbt, threads, cutoff,
                            start=None if box_nb is None else box_nb.pre)
        if box_nb is not None and not cached:
            nb.seconds += box_nb.seconds  # the first target pays for the box bounds
    wstats["used_objective"] = None if x0 is None else f0
    wstats["portfolio"] = {"box_unstable": box_unstable, "box_cached": bool(cached),
                           "path": "plain" if plain else ("box-bounds" if small else
                                                          ("cutoff-light" if light
                                                           else "cutoff"))}
    return problem, s, nb, x0, wstats


def _floor_seeds(problem: OPProblem, res: OPResult, x0: np.ndarray | None,
                 pool: list[np.ndarray] | None, k: int = 8) -> list[np.ndarray]:
    """Known good points to start the floor's search from: the solver's point, the
    warm start and the last ``k`` improving incumbents of the MILP."""
    seeds = [np.asarray(p, dtype=float) for p in (pool or [])[-k:]]
    seeds += [np.asarray(v, dtype=float) for v in (res.x, x0) if v is not None]
    return [v for v in seeds if v.shape == (problem.n_in,) and np.all(np.isfinite(v))]


def apply_floor(mm: Metamodel, space: Space, problem: OPProblem, res: OPResult,
                x0: np.ndarray | None, f0: float, s: Mapping[str, Any], wstats: dict[str, Any],
                seed: int, pool: list[np.ndarray] | None = None,
                deadline: float | None = None) -> OPResult:
    """Never worse than local search: polish the solver's point with L-BFGS and, when
    the solve is not proven optimal, run the batched multi-start of
    :mod:`.multistart` (hundreds of spread starts plus the MILP's incumbents and the
    warm start as seeds, integers by neighbour moves) unless it already ran before
    the solve; return the best of these and the warm-start pool.  The bound stays
    the solver's (valid for every point); the gap shrinks with the objective.
    ``info['floor']`` says where the answer came from and what it cost."""
    ws = s["warm_start"]
    if not ws.get("enabled", True):
        return res
    t0, c0 = time.perf_counter(), time.process_time()
    cands: list[tuple[float, np.ndarray, str]] = []
    milp_obj = res.objective
    if np.all(np.isfinite(res.x)):
        cands.append((float(problem.objective(res.x)[0]), res.x, "solver"))
        xp, fp = local_refine(problem, res.x, int(ws.get("maxiter", 200)))
        cands.append((fp, xp, "solver+polish"))
    if x0 is not None and np.isfinite(f0):
        cands.append((f0, np.asarray(x0, dtype=float), "warm_start_pool"))
    floor: dict[str, Any] = {"solver_objective": milp_obj, "source": "solver", "seconds": 0.0}
    if res.status != "optimal" and not wstats.get("multistart_done") and \
            int(ws.get("starts", 0)) > 0:
        ms = batched_multistart(problem, rng(seed, "op", "floor_multistart"),
                                starts=int(ws["starts"]), iters=int(ws.get("iters", 200)),
                                polish=int(ws.get("polish", 4)),
                                maxiter=int(ws.get("maxiter", 200)),
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
             context: Mapping[str, float] | None, solver: Mapping[str, Any],
             box: tuple[np.ndarray, np.ndarray] | None = None,
             weights: Mapping[str, float] | None = None,
             warm_start: np.ndarray | None = None, seed: int = 0,
             failure: Any = None) -> OPResult:
    """Minimise Σ_j w_j |M_j(x, c) - ẑ_j| / y_std_j over the tunables ``x`` in ``box``
    (default: the bounds at ``context``), integer inputs integer, linear domain
    constraints respected, within the option set's ``time_limit`` for the whole
    call.  See :class:`OPResult`.

    ``failure`` (a :class:`simcalib.metamodel.failure.FailureModel`; default: the
    one attached to ``mm``, ``mm.failure``): the run-success classifier becomes one
    more output of the embedded network, bounded below so that the answer's predicted
    success probability is at least its threshold; the result's ``predicted`` holds
    the metamodel's outputs only, ``info['failure']`` the answer's predicted success probability."""
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
    budget = Budget(t0, float(solver_settings(solver)["time_limit"]))
    with one_blas_thread():
        problem, s, nb, x0, wstats = prepare(mm, space, target, context, solver, box, weights,
                                             warm_start, seed, budget=budget)
        res, pool = _solve(mm, space, problem, s, nb, x0, wstats, seed, t0, budget)
        f0 = wstats.get("used_objective")
        # the floor is fixed work (reproducible from the seed, whatever the load): the
        # MILP's budget keeps FLOOR_SHARE of the limit for it
        return apply_floor(mm, space, problem, res, x0, np.inf if f0 is None else float(f0),
                           s, wstats, seed, pool)


def _solve(mm: Metamodel, space: Space, problem: OPProblem, s: dict[str, Any], nb: NeuronBounds,
           x0: np.ndarray | None, wstats: dict[str, Any], seed: int, t0: float,
           budget: Budget | None = None) -> tuple[OPResult, list[np.ndarray] | None]:
    """The backend solve; returns the result and the MILP's incumbents (tunables)."""
    info: dict[str, Any] = {"bounds": nb.summary(), "warm_start": wstats}
    if budget is not None:
        s = {**s, "time_limit": budget.solve()}
        info["solve_time_limit"] = round(float(s["time_limit"]), 3)
    if wstats.get("trivial"):
        # no solver needed: the warm start is within mip_gap_abs of the bound 0
        info["solve_seconds"] = 0.0
        return finish(mm, space, problem, None, None, x0, None, "optimal", 0.0, 0,
                      time.perf_counter() - t0, s["backend"] if s["use_bounds"] or
                      s["backend"] == "highs" else "gurobi-plain", float(s["check_tol"]),
                      info), None
    if s["backend"] == "highs":
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
                      raw.nodes, time.perf_counter() - t0, "highs", float(s["check_tol"]),
                      info), pool
    from simcalib.metamodel.milp import gurobi_backend

    raw = gurobi_backend.solve_predictor(problem, nb, s, x0, seed)
    info["solve_seconds"] = raw.seconds
    info["model"] = raw.model_size
    name = "gurobi" if s["use_bounds"] else "gurobi-plain"
    return finish(mm, space, problem, None, None, raw.x, raw.y, raw.status, raw.bound,
                  raw.nodes, time.perf_counter() - t0, name, float(s["check_tol"]), info), None
