"""Is anything left?  Linear domain constraints checked by LP at validation.

The design samples by rejection, so constraints that exclude every input inside the
bounds used to fail only in the design job; one small LP per context level finds
that when the config is read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from simcalib.errors import ConfigError

if TYPE_CHECKING:
    from simcalib.study.space import Space


def check_feasible(space: Space, key: str) -> None:
    """One LP per level of the discrete contexts: do the linear constraints leave any
    input inside the bounds?  Continuous contexts are LP variables over their range;
    bounds that depend on them are relaxed to their extremes and integrality is
    relaxed, so a region the LP calls feasible may still be thin (the design job then
    reports how few points it could draw), but an empty one fails here, before any job.
    """
    from scipy.optimize import linprog  # scipy at validation only when constraints exist

    levels = space.context_levels()
    relaxed = len(levels) > 1000  # beyond that, one LP over the contexts' spans
    fixed = [] if relaxed else [c for c in space.contexts if c.discrete]
    free = [c for c in space.contexts if c not in fixed]
    names = space.tunable_names + [c.name for c in free]
    for level in [{}] if relaxed else levels:
        lo, hi = space.global_bounds() if free else space.bounds(level)
        box = list(zip(lo, hi, strict=True)) + [c.span for c in free]
        a_ub, b_ub, a_eq, b_eq = [], [], [], []
        for con in space.constraints:
            row = np.zeros(len(names))
            rhs = con.rhs
            for n, coef in con.coefs.items():
                if n in names:
                    row[names.index(n)] += coef
                else:
                    rhs -= coef * float(level[n])
            (a_eq if con.sense == "==" else a_ub).append(row)
            (b_eq if con.sense == "==" else b_ub).append(rhs)
        res = linprog(np.zeros(len(names)), A_ub=np.array(a_ub) if a_ub else None,
                      b_ub=np.array(b_ub) if b_ub else None,
                      A_eq=np.array(a_eq) if a_eq else None,
                      b_eq=np.array(b_eq) if b_eq else None, bounds=box, method="highs")
        if res.status == 2:
            where = f" at context {level}" if level else ""
            raise ConfigError(key, f"no input inside the bounds satisfies every constraint"
                              f"{where}: {[c.text for c in space.constraints]}")
