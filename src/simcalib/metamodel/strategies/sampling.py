"""Random search (paper 1, "RS"): r uniform runs over the bounds at the target's
context; the best by actual error.  The baseline of ``reduction_vs_rs``."""

from __future__ import annotations

from typing import Any

from simcalib.metamodel.strategies.ledger import TargetRun, choose
from simcalib.metamodel.strategies.registry import strategy


@strategy("rs", label="RS", order=10, reads=("budget",))
def strategy_rs(p: TargetRun) -> dict[str, Any]:
    X = p.sample(p.budget, p.bounds())
    p.simulate(X, "rs")
    x, e, status = choose(p, X[0])
    return {"x": x, "error": e, "status": status, "anchor": X[0], "anchor_kind": "first_sample"}

