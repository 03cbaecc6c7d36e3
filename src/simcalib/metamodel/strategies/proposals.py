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
    still samples 63 distinct plausible simulators.

    A batch of 8 and more, or of 4 and more on a deterministic simulator, also gives
    :func:`linear_slots` slots (after the mean's) to local linear proposals
    (:func:`local_linear`): a Gauss-Newton step from a linear fit of the outputs on
    the runs nearest the best run.  Why: near the optimum the ensemble is no finer than
    ~1e-3 of Delta (fitted over the whole box), so on a narrow valley (Rosenbrock) its
    local proposals land 5-50x above the best run and only lucky draws improve it.  The
    runs near the best run, fitted locally, are exact where the ensemble is coarse (on
    a deterministic simulator; on a noisy one the fit anchored at the best run chases
    its noise, so a small batch there keeps every slot for the ensemble)."""
    s, ens = search.s, search.ens
    tid = p.target.target_id
    made, k, r = search.made[tid], search.round, search.rngs[tid]
    best = search.pool.best(p)
    batch, n_mean = int(s["batch"]), int(s["mean_proposals"])
    solver = _merge(p.solver, s["solver"])
    # the mean of M nets is an M times wider MILP: bound tightening pays there.  The
    # tightening is a fixed number of LPs (two rounds over the inputs and neurons), so
    # it gets the solve's own time limit as a safety cap (the optimizer's Budget gives
    # it at most 30 % of what is left) and its bounds do not depend on the machine's
    # load; a 2 s limit cut it short on a loaded machine (tests/strategies/
    # test_sequential_linear.py checks proposals under a slowed clock)
    solvers = (solver, _merge(solver, {"obbt": {"enabled": True,
                                                "time_limit": float(solver["time_limit"])}}))
    local_box = p.box(best["x"], float(s["radius"])) if best is not None else None
    n_lin = linear_slots(batch, search.deterministic())
    n_local = int(round(float(s["local_share"]) * max(0, batch - n_mean - n_lin)))
    pool_runs = search.pool.runs(p)
    seen = np.array([q["x"] for q in pool_runs])
    out: list[np.ndarray] = []
    members = r.permutation(np.arange(len(ens)).repeat(-(-b // max(1, len(ens)))))
    for i in range(b):
        slot = (made + i) % batch
        mean = slot < n_mean
        x = x_lin = None
        if not mean and slot - n_mean < n_lin and best is not None:
            x = x_lin = local_linear(p, pool_runs, best, slot - n_mean, float(s["radius"]), fm)
        if x is None:
            mm = mean_mm if mean else ens.member(int(members[i]))
            # the mean's optimum is the exploiting proposal: solved in the trust region
            # (where it is cheap: a mean of M nets is an M times wider MILP); members'
            # proposals explore, a share of them globally
            j = slot - n_mean - n_lin
            local = (mean or j < n_local) and local_box is not None
            box = local_box if local else None
            x = p.op(box, f"seq{k}:{i}", mm=mm, weights=_objective_weights(p, mm),
                     failure=fm, solver=solvers[1] if mean else solvers[0], sample=True)
        near = np.vstack([seen, *out]) if out else seen
        # a linear step is meant to land closer than min_distance (its aim is the last
        # digits of Delta): only an exact repeat is moved
        floor = float(s["min_distance"]) if x_lin is None else np.finfo(float).tiny
        if _unit_dist(p, x, near) < floor:
            x = _nudge(p, x, near, float(s["radius"]), r, fm)
        out.append(x)
    return np.array(out)


def linear_slots(batch: int, deterministic: bool = False) -> int:
    """Local linear proposals a round of ``batch`` holds: 0 up to 7, then one more
    each time the batch doubles (8: 1, 16: 2, 32: 3, 64: 4), so the share near the
    best run grows with the batch while the members keep most slots; on a simulator
    known or found ``deterministic`` at least 1 from a batch of 4 (measured on
    Rosenbrock at 128 runs, batch 4, 5 targets: median Delta 1.2e-5 without it, 2.8e-9
    with it, lower on 5 of 5; docs/benchmarks.md)."""
    n = max(0, int(np.floor(np.log2(max(1, batch) / 4.0 + 1e-12))))
    return max(n, 1) if deterministic and batch >= 4 else n


def local_linear(p: TargetRun, runs: list[dict[str, Any]], best: Mapping[str, Any],
                 which: int, radius: float, fm: Any) -> np.ndarray | None:
    """A Gauss-Newton step from the best run: the outputs fitted linearly (exact at
    the best run) on its ``(d + 1) * 2**which`` nearest usable runs, and the point of
    the box those runs span (at most ``radius``) that minimises the linear model's
    Delta, an LP (HiGHS).  ``which`` varies the neighbourhood, so the proposals of one
    round differ.  None (the slot falls back to a member's proposal) where the runs
    do not pin the slope (fewer than d + 1 near, a rank-deficient spread), the LP
    fails, or the point breaks a constraint or is predicted to fail."""
    from scipy.optimize import linprog

    sp = p.space
    d = len(sp.tunable_names)
    ok = [q for q in runs if q["status"] == "ok" and np.isfinite(q["y"]).all()]
    m = (d + 1) * 2 ** which
    if len(ok) < d + 1:
        return None
    u0 = sp.to_unit(np.asarray(best["x"], dtype=float))
    U = sp.to_unit(np.array([q["x"] for q in ok], dtype=float))
    dist = np.abs(U - u0[None, :]).max(axis=1)
    order = np.argsort(dist, kind="stable")[:m]
    order = order[dist[order] > 0]
    dU = U[order] - u0[None, :]
    y0 = np.asarray(best["y"], dtype=float)
    dY = np.array([ok[i]["y"] for i in order], dtype=float) - y0[None, :]
    if len(dU) < d or np.linalg.matrix_rank(dU) < d:
        return None
    J, *_ = np.linalg.lstsq(dU, dY, rcond=None)          # (d, outputs): dY ~ dU J
    rho = min(float(dist[order].max()), radius)
    lo, hi = (sp.to_unit(v) for v in p.bounds())
    dlo, dhi = np.maximum(lo - u0, -rho), np.minimum(hi - u0, rho)
    c_out = np.where(np.isfinite(p.scale) & (p.scale > 0), 1.0 / p.scale, 0.0)
    resid = y0 - np.asarray(p.target.z, dtype=float)
    # outputs Delta ignores (zero weight, no observation) stay out of the LP
    use = (c_out > 0) & np.isfinite(resid) & np.isfinite(J).all(axis=0)
    if not use.any():
        return None
    J, c_out, resid = J[:, use], c_out[use], resid[use]
    n = int(use.sum())
    # variables [step (d), t (n), a (d)]: first min sum_j c_j t_j with
    # +-(y0_j - z_j + (step J)_j) <= t_j; then, at that misfit, the smallest step
    # (sum a_i, a_i >= |step_i|): with fewer outputs than inputs the linear model's
    # solutions are a plane, and the point of it nearest the best run is where the
    # linear fit holds best
    In, Id, Zn, Zd = np.eye(n), np.eye(d), np.zeros((n, d)), np.zeros((d, n))
    A = np.block([[J.T, -In, Zn], [-J.T, -In, Zn], [Id, Zd, -Id], [-Id, Zd, -Id]])
    bvec = np.concatenate([-resid, resid, np.zeros(2 * d)])
    bounds = [*zip(dlo, dhi, strict=True), *[(0, None)] * (n + d)]
    fit = np.concatenate([np.zeros(d), c_out, np.zeros(d)])
    res = linprog(fit, A_ub=A, b_ub=bvec, bounds=bounds, method="highs")
    if res.status != 0 or res.x is None:
        return None
    cap = float(res.fun) * (1 + 1e-9) + 1e-12
    res = linprog(np.concatenate([np.zeros(d + n), np.ones(d)]), A_ub=np.vstack([A, fit]),
                  b_ub=np.append(bvec, cap), bounds=bounds, method="highs")
    if res.status != 0 or res.x is None:
        return None
    x = sp.round_integers(sp.from_unit(u0 + res.x[:d]))
    x = np.clip(x, *p.bounds())
    frame = p.frame(x[None, :])
    if not sp.feasible(frame).all():
        return None
    if fm is not None and not fm.ok(frame[fm.input_names].to_numpy(dtype=float)).all():
        return None
    return x


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
