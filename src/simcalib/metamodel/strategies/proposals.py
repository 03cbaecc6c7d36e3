"""``sequential``'s proposals: where the next runs of a round go, and its start from a
study's design.

Why a module of its own: the search (:mod:`~simcalib.metamodel.strategies.search`,
the resumable state machine the one-job and round-job paths share) asks for
proposals, and the strategy (:mod:`~simcalib.metamodel.strategies.sequential`) drives
the search; with the proposals in either of those two the two modules imported each
other.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np

from simcalib.errors import ConfigError, DataError
from simcalib.metamodel.strategies.ledger import TargetRun

log = logging.getLogger(__name__)


def adopt_design(grp: list[TargetRun]) -> int:
    """The study's design runs at the context of the targets ``grp`` as their start:
    split among their ledgers in turn (each pays for its share), failed runs
    included.  Returns how many (0: none at this context, the Sobol start is used).
    A design larger than the runs these targets may use is a config error: the
    design runs count, so they cannot exceed budget x targets."""
    key = "calibration.sequential.use_design"
    first = grp[0]
    D = first.given
    if D is None:
        raise ConfigError(key, "is true, but no design runs were given (cal-run --design "
                          "results/<study>/dataset.csv; calibrate(..., design=...))")
    need = [*first.study.input_names, *first.out_names, "status"]
    missing = [c for c in need if c not in D.columns]
    if missing:
        raise DataError("design", f"the design runs lack column(s) {missing}")
    at = np.ones(len(D), dtype=bool)
    for c, v in first.target.context.items():
        at &= np.isclose(D[c].to_numpy(dtype=float), v, rtol=0, atol=1e-12)
    rows = D[at].reset_index(drop=True)
    ctx = f" at context {first.target.context}" if first.target.context else ""
    if not len(rows):
        log.warning("%s sequential: no design run%s; starting from Sobol runs instead",
                    first.study.name, ctx)
        return 0
    room = sum(q.left for q in grp)
    if len(rows) > room:
        raise ConfigError(key, f"the study's design has {len(rows)} runs{ctx}, more than "
                          f"the {room} runs {len(grp)} target(s) may use there "
                          f"({grp[0].budget} runs each from calibration.budget, design "
                          "runs included): raise calibration.budget, lower design.n or set "
                          "use_design false")
    for j, q in enumerate(grp):
        q.adopt(rows.iloc[j::len(grp)], "design")
    failed = int((rows["status"].astype(str) != "ok").sum())
    log.info("%s sequential: %d design runs%s as the start (%d failed), counted against "
             "the budget of %d", first.study.name, len(rows), ctx, failed, room)
    return len(rows)


def propose_for(p: TargetRun, search: Any, mean_mm: Any, fm: Any, b: int) -> np.ndarray:
    """``b`` proposals for target ``p`` in the search's current round.  Proposal kinds
    cycle through ``batch`` slots per target (the target's proposals so far,
    ``search.made``): ``mean_proposals`` from the ensemble mean (``mean_mm``) in the
    trust region around the best run at its context, then members' (Thompson
    sampling), a ``local_share`` of them in that trust region, the rest over the whole
    box.  One target gets every slot each round; K targets sharing a round each get
    their share and continue the cycle in the next.  Members are drawn without
    replacement (a permutation), so a batch no larger than the ensemble gives every
    proposal its own member; the ensemble grows to the batch's member proposals
    (:meth:`~simcalib.metamodel.ensemble.EnsembleSettings.for_batch`), so a batch of 64
    still samples 63 distinct plausible simulators."""
    s, ens = search.s, search.ens
    tid = p.target.target_id
    made, k, r = search.made[tid], search.round, search.rngs[tid]
    best = search.pool.best(p)
    batch, n_mean = int(s["batch"]), int(s["mean_proposals"])
    solver = _merge(p.solver, s["solver"])
    # the mean of M nets is an M times wider MILP: bound tightening pays there
    solvers = (solver, _merge(solver, {"obbt": {"enabled": True, "time_limit": 2.0}}))
    local_box = p.box(best["x"], float(s["radius"])) if best is not None else None
    n_local = int(round(float(s["local_share"]) * max(0, batch - n_mean)))
    seen = np.array([q["x"] for q in search.pool.runs(p)])
    out: list[np.ndarray] = []
    members = r.permutation(np.arange(len(ens)).repeat(-(-b // max(1, len(ens)))))
    for i in range(b):
        slot = (made + i) % batch
        mean = slot < n_mean
        mm = mean_mm if mean else ens.member(int(members[i]))
        # the mean's optimum is the exploiting proposal: solved in the trust region
        # (where it is cheap: a mean of M nets is an M times wider MILP); members'
        # proposals explore, a share of them globally
        local = (mean or (slot - n_mean) < n_local) and local_box is not None
        box = local_box if local else None
        x = p.op(box, f"seq{k}:{i}", mm=mm, weights=_objective_weights(p, mm), failure=fm,
                 solver=solvers[1] if mean else solvers[0], sample=True)
        near = np.vstack([seen, *out]) if out else seen
        if _unit_dist(p, x, near) < float(s["min_distance"]):
            x = _nudge(p, x, near, float(s["radius"]), r, fm)
        out.append(x)
    return np.array(out)


def _merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``base``, one level of nested mappings merged."""
    out = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in base.items()}
    for k, v in over.items():
        out[k] = {**out[k], **v} if isinstance(v, Mapping) and isinstance(out.get(k),
                                                                          dict) else v
    return out


def _objective_weights(p: TargetRun, mm: Any) -> dict[str, float]:
    """Weights that make the MILP's objective sum_j w_j |M_j - z_j| / y_std_j equal to
    the target's Delta (sum_j |M_j - z_j| / scale_j): w_j = y_std_j / scale_j."""
    w = np.asarray(mm.y_std, dtype=float) / p.scale
    return dict(zip(p.out_names, np.where(np.isfinite(w), w, 0.0).tolist(), strict=True))


def _nudge(p: TargetRun, x: np.ndarray, near: np.ndarray, radius: float,
           r: np.random.Generator, fm: Any) -> np.ndarray:
    """A random feasible point near ``x`` that is new (a proposal repeating a run
    teaches nothing; for a noisy simulator the selection step re-runs on purpose)."""
    for scale in (0.25, 0.5, 1.0):
        box = p.box(x, radius * scale)
        df = p.space.sample_tunables(16, r, "uniform", p.target.context, box)
        C = df[p.space.tunable_names].to_numpy(dtype=float)
        if fm is not None:
            okc = fm.ok(p.frame(C)[fm.input_names].to_numpy(dtype=float))
            C = np.vstack([C[okc], C[~okc]])
        for c in C:
            if _unit_dist(p, c, near) > 0:
                return c
    return x


def _unit_dist(p: TargetRun, x: np.ndarray, X: np.ndarray) -> float:
    """Smallest max-norm distance of ``x`` to the rows of ``X`` (unit-scaled inputs)."""
    if len(X) == 0:
        return np.inf
    return float(np.abs(p.space.to_unit(X) - p.space.to_unit(x)[None, :]).max(axis=1).min())
