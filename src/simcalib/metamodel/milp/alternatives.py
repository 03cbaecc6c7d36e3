"""Alternative optima (paper 1, non-identifiability): up to ``k`` solutions whose
objective is within ``epsilon`` of the optimum and which lie at least ``distance``
apart from each other in scaled inputs (L-infinity distance on the tunables scaled
to [0, 1] over the space's global bounds).

Each further solution re-solves our MILP with, for every solution found so far,
a disjunction "some input moves by at least ``distance``": two binaries per input
(move up / move down) with big-M = the scaled box width, and at least one of them on.
The search stops at the first solution worse than optimum + epsilon or when no
feasible point remains.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from simcalib.errors import ConfigError
from simcalib.metamodel.milp.formulation import MILPModel, build_milp
from simcalib.metamodel.milp.optimize import finish, prepare
from simcalib.metamodel.milp.problem import OPProblem, OPResult
from simcalib.metamodel.milp.settings import SolverSettings
from simcalib.metamodel.model import Metamodel
from simcalib.study.space import Space


def _exclude(model: MILPModel, problem: OPProblem, space: Space, x_prev: np.ndarray,
             distance: float) -> None:
    glo, ghi = space.global_bounds()
    span = np.where(ghi > glo, ghi - glo, 1.0)
    u_lo = (problem.lo - glo) / span
    u_hi = (problem.hi - glo) / span
    s = (x_prev - glo) / span
    terms = []
    for i in range(problem.n_in):
        xi = int(model.x[i])
        # up: u_i >= s_i + d  <=>  x_i >= glo + (s_i + d) span   when b = 1
        if s[i] + distance <= u_hi[i] + 1e-12:
            b = int(model.add_cols(1, 0.0, 1.0, 0.0, True)[0])
            big = (s[i] + distance - u_lo[i]) * span[i]
            thr = glo[i] + (s[i] + distance) * span[i]
            # x_i - big * b >= thr - big
            model.add_row(np.array([xi, b]), np.array([1.0, -big]), thr - big, np.inf)
            terms.append(b)
        if s[i] - distance >= u_lo[i] - 1e-12:
            b = int(model.add_cols(1, 0.0, 1.0, 0.0, True)[0])
            big = (u_hi[i] - (s[i] - distance)) * span[i]
            thr = glo[i] + (s[i] - distance) * span[i]
            # x_i + big * b <= thr + big
            model.add_row(np.array([xi, b]), np.array([1.0, big]), -np.inf, thr + big)
            terms.append(b)
    if not terms:
        model.add_row(np.array([int(model.x[0])]), np.array([0.0]), 1.0, np.inf)  # infeasible
        return
    model.add_row(np.array(terms), np.ones(len(terms)), 1.0, np.inf)


def alternative_optima(mm: Metamodel, space: Space, target: Mapping[str, float],
                       context: Mapping[str, float],
                       solver: SolverSettings | Mapping[str, Any], k: int,
                       epsilon: float, distance: float,
                       box: tuple[np.ndarray, np.ndarray] | None = None,
                       weights: Mapping[str, float] | None = None, seed: int = 0
                       ) -> list[OPResult]:
    """The optimum first, then up to ``k - 1`` further solutions (see module doc)."""
    if k < 1:
        raise ConfigError("optimize.alternatives.k", "must be >= 1")
    if epsilon < 0 or not 0 < distance <= 1:
        raise ConfigError("optimize.alternatives", "need epsilon >= 0 and 0 < distance <= 1")
    problem, s, nb, x0, wstats = prepare(mm, space, target, context, solver, box, weights,
                                         None, seed, cutoff_slack=float(epsilon),
                                         allow_trivial=False)
    found: list[OPResult] = []
    best = np.inf
    for i in range(k):
        t0 = time.perf_counter()
        model = build_milp(problem, nb)
        for r in found:
            _exclude(model, problem, space, r.x, distance)
        warm = model.solution_from_x(problem, x0) if (i == 0 and x0 is not None) else None
        if s.backend == "highs":
            from simcalib.metamodel.milp import highs_backend

            raw = highs_backend.solve(model, s, warm, seed + i)
            values = raw.values
            status, bound, nodes = raw.status, raw.bound, raw.nodes
        else:
            from simcalib.metamodel.milp import gurobi_backend

            g = gurobi_backend.solve_model(model, s, warm, seed + i)
            values, status, bound, nodes = g.values, g.status, g.bound, g.nodes
        if values is None:
            break
        res = finish(mm, space, problem, model, values, values[model.x], values[model.y],
                     status, bound, nodes, time.perf_counter() - t0, s.backend,
                     s.check_tol, {"rank": i, "bounds": nb.summary()})
        if i == 0:
            best = res.objective
        elif res.objective > best + epsilon:
            break
        found.append(res)
    return found
