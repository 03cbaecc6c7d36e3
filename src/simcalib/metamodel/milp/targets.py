"""Optimally-Predict over a table of targets (what ``simcalib mm-optimize`` writes as
op.csv): each target's OP point, its predicted outputs, the solver's status and gap,
and the trust flags a reader needs before using the point."""

from __future__ import annotations

import logging
import time
from typing import Any

import pandas as pd

from simcalib.metamodel import trust
from simcalib.metamodel.milp.settings import OptimizeSettings
from simcalib.progress import eta

log = logging.getLogger(__name__)


def solve_targets(study: str, space: Any, mm: Any, targets: pd.DataFrame,
                  opt: OptimizeSettings, seed: int) -> pd.DataFrame:
    """Optimally-Predict every target: one row per target (per alternative), in the
    op.csv layout, with the trust flags (``low_r2``, ``flag``) and a progress line
    per target."""
    from simcalib.metamodel.milp import alternative_optima, optimize

    alt, solver, weights = opt.alternatives, opt.solver, opt.weights or None
    verdict = trust.judge(mm.info)
    low = verdict.weak_outputs
    if low:
        log.warning("%s: the metamodel's test R2 is below min_r2 = %g for %s; every OP "
                    "result below is flagged low_r2", study, verdict.min_r2, low)
    rows = []
    t0 = time.perf_counter()
    for k_done, (_, row) in enumerate(targets.iterrows(), 1):
        tid = int(row["target_id"]) if "target_id" in row else int(_)
        target = {o: float(row[o]) for o in mm.output_names}
        context = {c: float(row[c]) for c in space.context_names}
        s = int(seed) + tid
        if alt.k > 1:
            results = alternative_optima(mm, space, target, context, solver, alt.k,
                                         alt.epsilon, alt.distance, weights=weights, seed=s)
        else:
            results = [optimize(mm, space, target, context, solver, weights=weights, seed=s)]
        for rank, r in enumerate(results):
            out: dict[str, Any] = {"target_id": tid, "rank": rank}
            out.update({n: v for n, v in zip(space.tunable_names, r.x, strict=True)})
            out.update(context)
            out.update({f"pred_{o}": v for o, v in zip(mm.output_names, r.predicted,
                                                        strict=True)})
            out.update({"objective": r.objective, "bound": r.bound, "gap": r.gap,
                        "status": r.status, "time_limited": r.time_limited,
                        "seconds": round(r.seconds, 4), "nodes": r.nodes, "backend": r.backend,
                        "low_r2": bool(low), "flag": trust.op_flag(r.status, r.gap, verdict)})
            if r.status != "optimal":
                log.warning("%s target %d rank %d: not proven optimal (%s, gap %.3g): the "
                            "point may not be the metamodel's best", study, tid, rank,
                            r.status, r.gap)
            rows.append(out)
            log.info("%s target %d/%d (id %d) rank %d: %s objective %.6g gap %.2g in %.2f s; "
                     "%s", study, k_done, len(targets), tid, rank, r.status, r.objective, r.gap,
                     r.seconds, eta(time.perf_counter() - t0, k_done, len(targets)))
    df = pd.DataFrame(rows)
    # inputs in the metamodel's (the config's) order, whatever order the space has
    first = ["target_id", "rank", *mm.input_names]
    return df[first + [c for c in df.columns if c not in first]]
