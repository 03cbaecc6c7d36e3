"""Exact local search of the metamodel objective: L-BFGS-B (SLSQP with linear
constraints) on the continuous inputs, then +-1 moves on each integer input.

Shared by the warm start (:mod:`.warmstart`) and the floor's batched multi-start
(:mod:`.multistart`), which polishes its best points with it; kept apart so that
neither of those imports the other's module for it.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from simcalib.metamodel.milp.problem import OPProblem


def objective_and_grad(problem: OPProblem, x: np.ndarray) -> tuple[float, np.ndarray]:
    """Σ w |y(x) - ẑ| and a (sub)gradient with respect to the raw tunables."""
    acts = [np.asarray(x, dtype=float)]
    pre = []
    a = acts[0]
    for i, (W, b) in enumerate(problem.layers):
        z = W @ a + b
        pre.append(z)
        if i < len(problem.layers) - 1:
            a = np.maximum(z, 0.0)
            acts.append(a)
    y = pre[-1]
    r = y - problem.target_scaled
    f = float(np.abs(r) @ problem.weights)
    g = problem.weights * np.sign(r)
    for i in range(len(problem.layers) - 1, -1, -1):
        W, _ = problem.layers[i]
        g = g @ W
        if i > 0:
            g = g * (pre[i - 1] > 0)
    return f, g


def _continuous(problem: OPProblem, x0: np.ndarray, maxiter: int) -> np.ndarray:
    cont = ~problem.integer
    if not cont.any():
        return x0
    xf = x0.copy()

    def fun(v: np.ndarray) -> tuple[float, np.ndarray]:
        xf[cont] = v
        f, g = objective_and_grad(problem, xf)
        return f, g[cont]

    bounds = list(zip(problem.lo[cont], problem.hi[cont], strict=True))
    if len(problem.A):
        A = problem.A
        cons = []
        for a, r, eq in zip(A, problem.rhs, problem.equality, strict=True):
            fixed = float(a[~cont] @ x0[~cont])
            ac = a[cont]
            cons.append({"type": "eq" if eq else "ineq",
                         "fun": (lambda v, ac=ac, r=r, fixed=fixed: r - fixed - ac @ v),
                         "jac": (lambda v, ac=ac: -ac)})
        res = minimize(fun, x0[cont], jac=True, method="SLSQP", bounds=bounds,
                       constraints=cons, options={"maxiter": maxiter})
    else:
        res = minimize(fun, x0[cont], jac=True, method="L-BFGS-B", bounds=bounds,
                       options={"maxiter": maxiter})
    out = x0.copy()
    out[cont] = np.clip(res.x, problem.lo[cont], problem.hi[cont])
    return out


def local_refine(problem: OPProblem, x0: np.ndarray, maxiter: int = 200, rounds: int = 5
                 ) -> tuple[np.ndarray, float]:
    """Continuous polish plus integer ±1 moves; never returns a worse or infeasible
    point than ``x0`` (assumed feasible)."""
    best = np.asarray(x0, dtype=float).copy()
    best_f = float(problem.objective(best)[0])
    ints = np.nonzero(problem.integer)[0]
    for _ in range(rounds):
        improved = False
        cand = _continuous(problem, best, maxiter)
        if problem.feasible(cand)[0]:
            fc = float(problem.objective(cand)[0])
            if fc < best_f - 1e-12:
                best, best_f, improved = cand, fc, True
        if len(ints):
            moves = []
            for j in ints:
                for step in (-1.0, 1.0):
                    c = best.copy()
                    c[j] += step
                    moves.append(c)
            M = np.array(moves)
            ok = problem.feasible(M)
            if ok.any():
                fm = problem.objective(M[ok])
                i = int(np.argmin(fm))
                if fm[i] < best_f - 1e-12:
                    best, best_f, improved = M[ok][i], float(fm[i]), True
        if not improved:
            break
    return best, best_f
