"""Optimally-Predict: the metamodel embedded exactly in a MILP (HiGHS or Gurobi).

Public API: :func:`optimize`, :func:`alternative_optima`, :class:`OPResult`,
:func:`check_forward`.  See docs/metamodel_op.md for the formulation.
"""

from simcalib.metamodel.milp.alternatives import alternative_optima
from simcalib.metamodel.milp.gurobi_backend import SolverLicenceError
from simcalib.metamodel.milp.optimize import SOLVER_DEFAULTS, optimize, solver_settings
from simcalib.metamodel.milp.problem import (
           ForwardCheckError,
           OPResult,
           build_problem,
           check_forward,
)

__all__ = ["SOLVER_DEFAULTS", "ForwardCheckError", "OPResult", "SolverLicenceError",
           "alternative_optima", "build_problem", "check_forward", "optimize",
           "solver_settings"]
