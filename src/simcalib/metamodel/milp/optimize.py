"""Optimally-Predict: the single entry point, dispatching on the option set's backend.

``optimize`` = checked problem (:mod:`.problem`) -> neuron bounds (:mod:`.bounds`)
-> warm start (:mod:`.warmstart`) -> backend solve -> forward-pass check.  The
reported ``seconds`` is the whole wall time (bounds + warm start + solve); the parts
are in ``OPResult.info``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from simcalib.config import check_section, schema_defaults
from simcalib.errors import ConfigError
from simcalib.metamodel.milp.bounds import NeuronBounds, compute_bounds, interval_bounds
from simcalib.metamodel.milp.formulation import MILPModel, build_milp
from simcalib.metamodel.milp.problem import (
    OPProblem,
    OPResult,
    build_problem,
    check_forward,
    full_inputs,
)
from simcalib.metamodel.milp.warmstart import warm_start as search_warm_start
from simcalib.metamodel.network import Metamodel
from simcalib.seeds import rng
from simcalib.space import Space

log = logging.getLogger(__name__)

BACKENDS = ("highs", "gurobi")

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
    return out


def prepare(mm: Metamodel, space: Space, target: Mapping[str, float],
            context: Mapping[str, float] | None, solver: Mapping[str, Any],
            box: tuple[np.ndarray, np.ndarray] | None, weights: Mapping[str, float] | None,
            warm_start: np.ndarray | None, seed: int, cutoff_slack: float = 0.0,
            allow_trivial: bool = True
            ) -> tuple[OPProblem, dict[str, Any], NeuronBounds, np.ndarray | None, dict[str, Any]]:
    """OPProblem, settings, bounds and warm-start point (shared with alternatives)."""
    s = solver_settings(solver)
    problem = build_problem(mm, space, target, context, box, weights)
    x0, f0, wstats = search_warm_start(problem, space, s["warm_start"],
                                       rng(seed, "op", "warm_start"))
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
    if trivial or (s["backend"] == "gurobi" and not s["use_bounds"]):
        t0 = time.perf_counter()
        nb = NeuronBounds(pre=interval_bounds(problem), seconds=0.0)
        nb.seconds = time.perf_counter() - t0
    else:
        # the incumbent's objective (+ slack for alternative optima) cuts the region
        cutoff = f0 + cutoff_slack if x0 is not None and np.isfinite(f0) else None
        nb = compute_bounds(problem, s["obbt"], int(s["threads"] or 1), cutoff)
    wstats["used_objective"] = None if x0 is None else f0
    return problem, s, nb, x0, wstats


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
             warm_start: np.ndarray | None = None, seed: int = 0) -> OPResult:
    """Minimise Σ_j w_j |M_j(x, c) - ẑ_j| / y_std_j over the tunables ``x`` in ``box``
    (default: the bounds at ``context``), integer inputs integer, linear domain
    constraints respected.  See :class:`OPResult`."""
    t0 = time.perf_counter()
    problem, s, nb, x0, wstats = prepare(mm, space, target, context, solver, box, weights,
                                         warm_start, seed)
    info: dict[str, Any] = {"bounds": nb.summary(), "warm_start": wstats}
    if wstats.get("trivial"):
        # no solver needed: the warm start is within mip_gap_abs of the bound 0
        info["solve_seconds"] = 0.0
        return finish(mm, space, problem, None, None, x0, None, "optimal", 0.0, 0,
                      time.perf_counter() - t0, s["backend"] if s["use_bounds"] or
                      s["backend"] == "highs" else "gurobi-plain", float(s["check_tol"]), info)
    if s["backend"] == "highs":
        from simcalib.metamodel.milp import highs_backend

        model = build_milp(problem, nb)
        info["model"] = {"cols": model.n_cols, "rows": model.n_rows,
                         "binaries": model.n_binaries}
        warm = model.solution_from_x(problem, x0) if x0 is not None else None
        raw = highs_backend.solve(model, s, warm, seed)
        info["solve_seconds"] = raw.seconds
        x = raw.values[model.x] if raw.values is not None else None
        y = raw.values[model.y] if raw.values is not None else None
        return finish(mm, space, problem, model, raw.values, x, y, raw.status, raw.bound,
                      raw.nodes, time.perf_counter() - t0, "highs", float(s["check_tol"]), info)
    from simcalib.metamodel.milp import gurobi_backend

    raw = gurobi_backend.solve_predictor(problem, nb, s, x0, seed)
    info["solve_seconds"] = raw.seconds
    info["model"] = raw.model_size
    name = "gurobi" if s["use_bounds"] else "gurobi-plain"
    return finish(mm, space, problem, None, None, raw.x, raw.y, raw.status, raw.bound,
                  raw.nodes, time.perf_counter() - t0, name, float(s["check_tol"]), info)
