"""The strategies built on Optimally-Predict (paper 1, "Methods"):

``op``   the metamodel's optimum (MILP over the whole box); one run scores it.
``stp``  r - 1 uniform runs; OP inside the proximity box around the best of them;
         one run scores the OP point, which is the answer (paper: the OP point is
         chosen even when the RS anchor was better).  r runs in all.
``pts``  OP over the whole box; r uniform runs inside the proximity box around the
         OP point; the best by actual error.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simcalib.metamodel.strategies.ledger import TargetRun, choose
from simcalib.metamodel.strategies.registry import strategy


@strategy("op", label="OP", order=20, uses_anchor=True, fixed_budget=1)
def strategy_op(p: TargetRun) -> dict[str, Any]:
    x = p.full_op()
    e = p.simulate(x[None, :], "score")[0]
    return {"x": x, "error": e if np.isfinite(e) else float("nan"),
            "status": "ok" if np.isfinite(e) else "all_runs_failed", "anchor": x,
            "anchor_kind": "op"}



@strategy("stp", label="StP", order=30, min_budget=2, reads=("budget", "proximity"),
          best_of_runs=False)
def strategy_stp(p: TargetRun) -> dict[str, Any]:
    X = p.sample(p.budget - 1, p.bounds())
    p.simulate(X, "rs")
    best = p.best_run("rs")
    anchor = best["x"] if best is not None else X[0]
    x = p.op(p.box(anchor, p.proximity), "stp")
    e = p.simulate(x[None, :], "score")[0]
    return {"x": x, "error": e if np.isfinite(e) else float("nan"),
            "status": "ok" if np.isfinite(e) else "all_runs_failed", "anchor": anchor,
            "anchor_kind": "rs_best", "anchor_error": best["error"] if best else float("nan")}



@strategy("pts", label="PtS", order=40, reads=("budget", "proximity"), uses_anchor=True)
def strategy_pts(p: TargetRun) -> dict[str, Any]:
    anchor = p.full_op()
    X = p.sample(p.budget, p.box(anchor, p.proximity))
    p.simulate(X, "local")
    x, e, status = choose(p, anchor)
    return {"x": x, "error": e, "status": status, "anchor": anchor, "anchor_kind": "op"}

