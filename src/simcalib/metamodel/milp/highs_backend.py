"""Solve a :class:`~simcalib.metamodel.milp.formulation.MILPModel` with HiGHS (``highspy``).

Solver options come from the option set: ``time_limit``, ``mip_gap_abs`` (the
absolute gap on the standardised objective that counts as proven optimal),
``mip_gap_rel`` (0 by default, so only the absolute gap decides), ``threads``,
``feasibility_tol`` (tight by default, so the forward-pass check at 1e-5 holds),
``sub_mip`` (HiGHS's RINS and RENS sub-MIP heuristics, off by default) and
``options`` (raw HiGHS options, passed through unchanged).  A warm start is a full
column vector handed over with ``setSolution`` before the solve.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from simcalib.errors import ConfigError, SimcalibError
from simcalib.metamodel.milp.formulation import MILPModel
from simcalib.metamodel.milp.highs_threads import new_highs, set_threads
from simcalib.metamodel.milp.settings import SolverSettings


@dataclass
class RawSolve:
    status: str
    values: np.ndarray | None
    objective: float
    bound: float
    nodes: int
    seconds: float
    time_limited: bool
    #: the improving incumbents HiGHS found, newest last (column vectors): seeds of
    #: the floor's multi-start when the solve ends unproven
    pool: list[np.ndarray] | None = None


def _status_name(h: Any, status: Any) -> str:
    import highspy

    S = highspy.HighsModelStatus
    names = {S.kOptimal: "optimal", S.kTimeLimit: "time_limit", S.kInfeasible: "infeasible",
             S.kUnbounded: "unbounded", S.kInterrupt: "interrupted",
             S.kSolutionLimit: "solution_limit", S.kIterationLimit: "iteration_limit"}
    if status in names:
        return names[status]
    return h.modelStatusToString(status).lower().replace(" ", "_")


def _node_limited(solver: SolverSettings, nodes: int) -> bool:
    """HiGHS reports a reached ``mip_max_nodes`` as a solution limit."""
    cap = solver.options.get("mip_max_nodes")
    return cap is not None and nodes >= int(cap)


def apply_options(h: Any, solver: SolverSettings, seed: int) -> None:
    """The option set's values on a HiGHS instance (every default is the schema's:
    ``solver`` was built by :meth:`SolverSettings.build`)."""
    h.setOptionValue("output_flag", solver.log)
    h.setOptionValue("time_limit", solver.time_limit)
    h.setOptionValue("mip_abs_gap", solver.mip_gap_abs)
    h.setOptionValue("mip_rel_gap", solver.mip_gap_rel)
    tol = solver.feasibility_tol
    h.setOptionValue("mip_feasibility_tolerance", tol)
    h.setOptionValue("primal_feasibility_tolerance", tol)
    h.setOptionValue("random_seed", int(seed) % 2_147_483_647)
    set_threads(h, solver.threads)
    # RINS/RENS sub-MIPs: with our incumbent and tightened bounds they cost more than
    # they find (``sub_mip``, default off; docs/metamodel_op.md); raw options override
    h.setOptionValue("mip_heuristic_run_rins", solver.sub_mip)
    h.setOptionValue("mip_heuristic_run_rens", solver.sub_mip)
    for key, value in solver.options.items():
        status = h.setOptionValue(str(key), value)
        import highspy

        if status != highspy.HighsStatus.kOk:
            raise ConfigError(f"solvers.options.{key}", f"HiGHS rejected option {key}={value!r}")


def solve(model: MILPModel, solver: SolverSettings, warm: np.ndarray | None = None,
          seed: int = 0) -> RawSolve:
    import highspy

    h = new_highs()
    apply_options(h, solver, seed)
    n = model.n_cols
    cost = np.asarray(model.cost, dtype=float)
    inf = h.getInfinity()
    lo = np.asarray(model.col_lo, dtype=float)
    hi = np.asarray(model.col_hi, dtype=float)
    lo[~np.isfinite(lo)] = -inf
    hi[~np.isfinite(hi)] = inf
    h.addCols(n, cost, lo, hi, 0, np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32),
              np.zeros(0))
    starts, index, value = model.csr()
    rlo = np.asarray(model.row_lo, dtype=float)
    rhi = np.asarray(model.row_hi, dtype=float)
    rlo[~np.isfinite(rlo)] = -inf
    rhi[~np.isfinite(rhi)] = inf
    if model.n_rows:
        h.addRows(model.n_rows, rlo, rhi, len(index), starts[:-1].astype(np.int32),
                  index.astype(np.int32), value)
    ints = np.nonzero(np.asarray(model.integer, dtype=bool))[0].astype(np.int32)
    if len(ints):
        h.changeColsIntegrality(len(ints), ints,
                                np.full(len(ints), int(highspy.HighsVarType.kInteger),
                                        dtype=np.uint8))
    h.setOptionValue("mip_improving_solution_save", True)
    if warm is not None:
        h.setSolution(n, np.arange(n, dtype=np.int32), np.asarray(warm, dtype=float))
    t0 = time.perf_counter()
    h.run()
    seconds = time.perf_counter() - t0
    ms = h.getModelStatus()
    status = _status_name(h, ms)
    if status in ("not_set", "load_error", "model_error", "presolve_error", "solve_error",
                  "postsolve_error"):
        raise SimcalibError(f"HiGHS did not solve the OP model (status {status}); rerun with "
                            "log: true in the solver option set to see why")
    info = h.getInfo()
    has_sol = int(info.primal_solution_status) == 2
    values = np.asarray(h.getSolution().col_value, dtype=float) if has_sol else None
    obj = float(info.objective_function_value) if has_sol else float("inf")
    bound = float(info.mip_dual_bound) if len(ints) or model.n_binaries else obj
    if status == "optimal":
        bound = min(bound, obj) if np.isfinite(bound) else obj
    nodes = int(info.mip_node_count) if info.mip_node_count >= 0 else 0
    if status == "solution_limit" and _node_limited(solver, nodes):
        status = "node_limit"   # what a reader of op.csv should see: the search's cap
    pool = None
    if status != "optimal":
        try:
            pool = [np.asarray(s.col_value, dtype=float) for s in h.getSavedMipSolutions()]
        except (AttributeError, RuntimeError):  # an older highspy: no saved solutions
            pool = None
    return RawSolve(status=status, values=values, objective=obj, bound=bound, nodes=nodes,
                    seconds=seconds, time_limited=status == "time_limit", pool=pool)
