"""The Gurobi backend: gurobi-ml's ``add_predictor_constr`` on the folded network,
with our neuron bounds set on every layer's output variables and our warm start.

gurobi-ml propagates no bounds by itself (each ReLU is a ``max(z, 0)`` general
constraint on unbounded variables), so Gurobi must derive its own big-M's; setting
our interval/OBBT bounds on the layer outputs (``use_bounds: true``) is what makes
the difference.  ``use_bounds: false`` with warm start and OBBT off is "plain
gurobi-ml", the benchmark's reference.

The pip licence is size-limited (2000 variables, 2000 constraints); a model beyond
it raises :class:`SolverLicenceError` with one line naming the ``highs`` backend.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simcalib.errors import SimcalibError
from simcalib.metamodel.milp.bounds import NeuronBounds
from simcalib.metamodel.milp.formulation import MILPModel
from simcalib.metamodel.milp.problem import OPProblem
from simcalib.metamodel.milp.settings import SolverSettings


class SolverLicenceError(SimcalibError):
    """Gurobi is missing or its licence cannot solve a model this size."""


@dataclass
class GurobiSolve:
    status: str
    x: np.ndarray | None
    y: np.ndarray | None
    bound: float
    nodes: int
    seconds: float
    values: np.ndarray | None = None
    model_size: dict[str, int] = field(default_factory=dict)


def _import() -> Any:
    try:
        import gurobipy as gp
    except ImportError:
        raise SolverLicenceError("gurobipy is not installed; use a solver option set with "
                                 "backend: highs") from None
    return gp


def _env(gp: Any) -> Any:
    try:
        env = gp.Env(empty=True)
        env.setParam("OutputFlag", 0)
        env.start()
        return env
    except gp.GurobiError as exc:
        raise SolverLicenceError(f"no usable Gurobi licence ({exc}); use a solver option set "
                                 "with backend: highs") from None


def _params(m: Any, s: SolverSettings, seed: int) -> None:
    m.Params.OutputFlag = 1 if s.log else 0
    m.Params.TimeLimit = s.time_limit
    m.Params.MIPGapAbs = s.mip_gap_abs
    m.Params.MIPGap = s.mip_gap_rel
    if s.threads > 0:
        m.Params.Threads = s.threads
    m.Params.Seed = int(seed) % 2_000_000_000
    tol = max(s.feasibility_tol, 1e-9)
    m.Params.FeasibilityTol = tol
    m.Params.IntFeasTol = max(tol, 1e-9)
    for key, value in s.options.items():
        m.setParam(str(key), value)


def _status(gp: Any, code: int) -> str:
    G = gp.GRB
    return {G.OPTIMAL: "optimal", G.TIME_LIMIT: "time_limit", G.INFEASIBLE: "infeasible",
            G.INF_OR_UNBD: "infeasible_or_unbounded", G.UNBOUNDED: "unbounded",
            G.INTERRUPTED: "interrupted", G.NODE_LIMIT: "node_limit",
            G.SOLUTION_LIMIT: "solution_limit"}.get(code, f"gurobi_status_{code}")


def _optimize(gp: Any, m: Any) -> None:
    try:
        m.optimize()
    except gp.GurobiError as exc:
        if "size-limited" in str(exc) or "too large" in str(exc).lower():
            raise SolverLicenceError(
                f"the Gurobi licence is too small for this model ({m.NumVars} variables, "
                f"{m.NumConstrs + m.NumGenConstrs} constraints; the pip licence allows 2000 "
                "each): use a solver option set with backend: highs") from None
        raise


def solve_predictor(problem: OPProblem, nb: NeuronBounds, s: SolverSettings,
                    x0: np.ndarray | None, seed: int) -> GurobiSolve:
    """gurobi-ml model of the folded network; our bounds when ``use_bounds``."""
    gp = _import()
    from gurobi_ml import add_predictor_constr

    env = _env(gp)
    m = gp.Model(env=env)
    _params(m, s, seed)
    n, p = problem.n_in, problem.n_out
    vtype = [gp.GRB.INTEGER if i else gp.GRB.CONTINUOUS for i in problem.integer]
    use = s.use_bounds
    x_lo = nb.x_lo if (use and nb.x_lo is not None) else problem.lo
    x_hi = nb.x_hi if (use and nb.x_hi is not None) else problem.hi
    x = m.addMVar((1, n), lb=x_lo[None, :], ub=x_hi[None, :],
                  vtype=np.array(vtype)[None, :], name="x")
    y_lb = np.full(p, -gp.GRB.INFINITY)
    if problem.guarded:  # constraint outputs (a success logit) have a lower bound
        fin = np.isfinite(problem.y_lo)
        y_lb[fin] = problem.y_lo[fin]
    y = m.addMVar((1, p), lb=y_lb[None, :], name="y")
    t = m.addMVar(p, lb=0.0, name="t")
    for a, r, eq in zip(problem.A, problem.rhs, problem.equality, strict=True):
        expr = a @ x[0]
        m.addConstr(expr == r if eq else expr <= r)
    net = problem.torch_net()
    pred = add_predictor_constr(m, net, x, y)
    z = problem.target_scaled
    m.addConstr(t >= y[0] - z)
    m.addConstr(t >= z - y[0])
    m.setObjective(problem.weights @ t, gp.GRB.MINIMIZE)
    m.update()
    layers = list(pred.layers if hasattr(pred, "layers") else pred._layers)
    k = 0
    if use:
        for layer in layers:
            out = layer.output
            if type(layer).__name__ == "DenseLayer":
                L, U = nb.pre[k]
                pad_l, pad_u = 1e-6 * (1 + np.abs(L)), 1e-6 * (1 + np.abs(U))
                out.LB = (L - pad_l)[None, :]
                out.UB = (U + pad_u)[None, :]
                last_dense = k
                k += 1
            else:  # ReLU output of the dense layer just bounded
                L, U = nb.pre[last_dense]
                out.LB = np.zeros((1, len(L)))
                out.UB = (np.maximum(U, 0.0) + 1e-6 * (1 + np.abs(U)))[None, :]
    if x0 is not None and problem.feasible(x0)[0]:
        x.Start = x0[None, :]
        pre = problem.forward(x0)
        k = 0
        for layer in layers:
            if type(layer).__name__ == "DenseLayer":
                layer.output.Start = pre[k]
                last_dense = k
                k += 1
            else:
                layer.output.Start = np.maximum(pre[last_dense], 0.0)
        y.Start = pre[-1]
        t.Start = np.abs(pre[-1][0] - z)
    m.update()
    size = {"cols": int(m.NumVars), "rows": int(m.NumConstrs + m.NumGenConstrs),
            "general": int(m.NumGenConstrs)}
    t0 = time.perf_counter()
    _optimize(gp, m)
    seconds = time.perf_counter() - t0
    status = _status(gp, m.Status)
    has = m.SolCount > 0
    bound = float(m.ObjBound) if m.Status in (gp.GRB.OPTIMAL, gp.GRB.TIME_LIMIT) else np.inf
    res = GurobiSolve(status=status, x=np.array(x.X[0]) if has else None,
                      y=np.array(y.X[0]) if has else None, bound=bound,
                      nodes=int(m.NodeCount), seconds=seconds, model_size=size)
    m.dispose()
    env.dispose()
    return res


def solve_model(model: MILPModel, s: SolverSettings, warm: np.ndarray | None,
                seed: int) -> GurobiSolve:
    """Our own sparse formulation in gurobipy (used for alternative optima)."""
    gp = _import()
    import scipy.sparse as sp

    env = _env(gp)
    m = gp.Model(env=env)
    _params(m, s, seed)
    vt = np.where(np.asarray(model.integer), gp.GRB.INTEGER, gp.GRB.CONTINUOUS)
    lo = np.asarray(model.col_lo, dtype=float)
    hi = np.asarray(model.col_hi, dtype=float)
    v = m.addMVar(model.n_cols, lb=np.where(np.isfinite(lo), lo, -gp.GRB.INFINITY),
                  ub=np.where(np.isfinite(hi), hi, gp.GRB.INFINITY), vtype=vt)
    starts, index, value = model.csr()
    A = sp.csr_matrix((value, index, starts), shape=(model.n_rows, model.n_cols))
    rlo = np.asarray(model.row_lo)
    rhi = np.asarray(model.row_hi)
    fin_hi, fin_lo = np.isfinite(rhi), np.isfinite(rlo)
    if fin_hi.any():
        m.addConstr(A[fin_hi] @ v <= rhi[fin_hi])
    if fin_lo.any():
        m.addConstr(A[fin_lo] @ v >= rlo[fin_lo])
    m.setObjective(np.asarray(model.cost) @ v, gp.GRB.MINIMIZE)
    if warm is not None:
        v.Start = warm
    t0 = time.perf_counter()
    _optimize(gp, m)
    seconds = time.perf_counter() - t0
    has = m.SolCount > 0
    vals = np.array(v.X) if has else None
    bound = float(m.ObjBound) if m.Status in (gp.GRB.OPTIMAL, gp.GRB.TIME_LIMIT) else np.inf
    res = GurobiSolve(status=_status(gp, m.Status), x=None if vals is None else vals[model.x],
                      y=None if vals is None else vals[model.y], bound=bound,
                      nodes=int(m.NodeCount), seconds=seconds, values=vals,
                      model_size={"cols": model.n_cols, "rows": model.n_rows})
    m.dispose()
    env.dispose()
    return res
