"""``sequential``: a metamodel strategy for one data set and few, expensive runs.

Why: paper 1's route amortises one large design over many targets.  With one target
the design is mostly spent where the target is not, and GP Bayesian optimisation on
the actual error wins at equal total runs.  This strategy spends every run on the
target: a small scrambled Sobol start (``initial_per_input`` x tunables runs, at most
half the budget), then rounds of ``batch`` runs.  Each round

1. retrains (warm-started from the last round's weights) an ensemble of small ReLU
   nets on every successful run so far (bootstrap resamples; out-of-bag R^2 logged);
2. if any run failed, trains the run-success classifier on every run with its status
   (:mod:`simcalib.metamodel.failure`); every proposal MILP then demands predicted
   success >= its threshold, so the strategy stops walking into a region where the
   simulator fails;
3. proposes the batch by **Thompson sampling through the exact MILP**
   (Papalexopoulos et al., ICML 2022): ``mean_proposals`` points minimise the
   ensemble mean's predicted misfit (the mean of ReLU nets is one ReLU net) in a trust
   region around the best run (``radius``), each other point one member's (a plausible
   simulator, so its optimum is a plausible location of the target's); a
   ``local_share`` of the member proposals are solved in the trust region too, the
   rest over the whole box;
   proposals closer than ``min_distance`` to a run or to each other are replaced by a
   random point near them.  The proposal MILPs use ``solver`` over the study's
   option set (a small gap, no per-target bound tightening: a proposal is a sample's
   optimum, not a result); one that hits its time limit uses its incumbent (counted
   in ``op_unproven``).

Each proposal MILP minimises exactly the target's Delta (the member's output scale is
undone by the objective weights), with the study's bounds, integers and linear
constraints at the target's context.  Seeds from (seed, study, target, round), so the
same config gives the same runs; the runs go through the usual ledger (journalled,
counted against ``budget``, failed runs kept).  The history column holds the anytime
trajectory (best Delta after each round) for anytime curves.

**The answer** (``final``).  On a deterministic simulator it is the best run.  On a
stochastic one the best single run is partly lucky noise (the winner's curse: its own
Delta flatters it, and the point it came from is often not the best on average), so
``final: auto`` becomes ``ensemble`` there: the ensemble is refitted once on every run
and, among the ``final_top`` best distinct points by their own (mean) Delta, the answer
is the one whose ensemble-mean prediction has the lowest Delta.  The mean of nets
trained on every run averages the noise of all runs near a point; restricting it to
points that were run and did well keeps its error far from the runs out of the choice.
No run is spent on it, and the runs themselves do not change.

With ``use_design`` the study's simulated design runs replace the Sobol start: they
enter the ledgers (phase ``design``, split among the targets at their context, failed
runs included so the classifier learns from them) and count against the budget, so
``runs`` = design runs + new runs and the comparison with a strategy that simulates
its start stays fair.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np

from simcalib.errors import ConfigError, DataError
from simcalib.metamodel.strategies.ledger import TargetRun, op_unproven, point_key
from simcalib.metamodel.strategies.registry import strategy
from simcalib.metamodel.strategies.search import Search, initial_runs, run_here

__all__ = ["adopt_design", "initial_runs", "outcomes", "propose_for", "sequential_joint"]

log = logging.getLogger(__name__)


def check_sequential(settings: Mapping[str, Any], key: str) -> None:
    """The strategy's settings (also when called from Python, not the schema)."""
    from simcalib.metamodel.ensemble import EnsembleSettings

    s = settings["sequential"]
    for k in ("initial_per_input", "batch"):
        if int(s[k]) < 1:
            raise ConfigError(f"{key}.sequential.{k}", f"must be >= 1, got {s[k]}")
    if int(s["mean_proposals"]) < 0:
        raise ConfigError(f"{key}.sequential.mean_proposals", "must be >= 0")
    if not 0.0 <= float(s["local_share"]) <= 1.0:
        raise ConfigError(f"{key}.sequential.local_share", "must lie in [0, 1]")
    if not 0.0 < float(s["radius"]) <= 1.0:
        raise ConfigError(f"{key}.sequential.radius", "must lie in (0, 1]")
    if s["final"] not in FINAL_RULES:
        raise ConfigError(f"{key}.sequential.final", f"must be one of {FINAL_RULES}, got "
                          f"{s['final']!r}")
    if int(s["final_top"]) < 1:
        raise ConfigError(f"{key}.sequential.final_top", "must be >= 1")
    from simcalib.metamodel.milp.optimize import solver_settings

    try:
        solver_settings({"backend": "highs", **dict(s["solver"])})
    except ConfigError as exc:
        raise ConfigError(f"{key}.sequential.solver", str(exc)) from None
    EnsembleSettings.from_config(s.get("ensemble"), f"{key}.sequential.ensemble")


#: ``sequential.final``: how the answer is chosen among the runs (module doc)
FINAL_RULES = ("auto", "best_run", "ensemble")


def final_rule(p: TargetRun, s: Mapping[str, Any], detected: bool | None = None) -> str:
    """``best_run`` or ``ensemble``: ``auto`` is ``ensemble`` for a simulator known to
    be stochastic (its best single run is partly noise), else ``best_run``.
    ``detected``: what the start's repeated point showed, where the config is silent."""
    from simcalib.study.noise import known_stochastic

    rule = str(s["final"])
    if rule == "auto":
        known = known_stochastic(p.study.cfg)
        return "ensemble" if (known if known is not None else detected) else "best_run"
    return rule


def final_pick(p: TargetRun, runs: list[dict[str, Any]], ens: Any, top: int
               ) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The answer of ``final: ensemble`` among ``runs`` (target ``p``'s runs with their
    Delta in ``error``): the ``top`` best distinct points by their mean Delta over
    their successful runs, ranked by the Delta of ``ens``'s mean prediction (ties: the
    lower own Delta).  Returns (the chosen point's best run, the candidates, each with
    ``x``, ``error`` (mean own Delta), ``runs`` and ``predicted``).  Why: one noisy
    Delta is a poor judge of which point is truly best; the ensemble, trained on every
    run, averages the noise over all runs near each point."""
    pts: dict[tuple[float, ...], list[dict[str, Any]]] = {}
    for r in runs:
        if np.isfinite(r["error"]):
            pts.setdefault(point_key(r["x"]), []).append(r)
    if not pts:
        return None, []
    cands = sorted(({"x": np.asarray(rs[0]["x"], dtype=float),
                     "error": float(np.mean([r["error"] for r in rs])), "runs": len(rs),
                     "best": min(rs, key=lambda r: r["error"])} for rs in pts.values()),
                   key=lambda c: c["error"])[: max(1, int(top))]
    pred = p.predicted_error(np.array([c["x"] for c in cands]), ens)
    for c, e in zip(cands, pred, strict=True):
        c["predicted"] = float(e) if np.isfinite(e) else np.inf
    j = min(range(len(cands)), key=lambda i: (cands[i]["predicted"], cands[i]["error"]))
    return cands[j]["best"], cands


def _unit_dist(p: TargetRun, x: np.ndarray, X: np.ndarray) -> float:
    """Smallest max-norm distance of ``x`` to the rows of ``X`` (unit-scaled inputs)."""
    if len(X) == 0:
        return np.inf
    return float(np.abs(p.space.to_unit(X) - p.space.to_unit(x)[None, :]).max(axis=1).min())


def sequential_joint(ps: list[TargetRun]) -> list[dict[str, Any]]:
    """Every target of a job at once, in this process (the one-job path): one shared
    Sobol start per context, one ensemble retrained on every run, and each round's
    batch divided among the targets (each proposal minimises its target's misfit); a
    run enters every target's data at its context.  Each target's ledger pays for the
    runs proposed for it, so K targets use at most budget x K runs in all.  The steps
    are :class:`~simcalib.metamodel.strategies.search.Search`'s, as in the round jobs
    of :mod:`~simcalib.metamodel.strategies.rounds`.  Returns each target's outcome."""
    search = Search(ps)
    run_here(search, search.start())
    search.after_round()
    while search.active():
        run_here(search, search.propose())
        search.after_round()
    return outcomes(search)


def outcomes(search: Search) -> list[dict[str, Any]]:
    """Each target's outcome once every run is in: its best run among all runs at its
    context, or for ``final: ensemble`` the ensemble's pick (:func:`final_pick`)."""
    ps, s, pool = search.ps, search.s, search.pool
    d = len(ps[0].space.tunable_names)
    rule = final_rule(ps[0], s, (search.noise or {}).get("stochastic"))
    ens = search.finish(refit=rule == "ensemble")
    outs = []
    for p in ps:
        first = p.runs[0]["x"] if p.runs else np.full(d, np.nan)
        best = pool.best(p)
        note = ""
        if rule == "ensemble" and ens is not None and best is not None:
            pick, cands = final_pick(p, pool.runs(p), ens, int(s["final_top"]))
            if pick is not None:
                chosen = next(c for c in cands if c["best"] is pick)
                note = (f" | final pick by the ensemble mean among the {len(cands)} best "
                        f"points: own Delta {pick['error']:.4g} (predicted "
                        f"{chosen['predicted']:.4g}); best run {best['error']:.4g} "
                        f"(predicted {p.predicted_error(best['x'][None, :], ens)[0]:.4g})")
                best = pick
        solves = [c for c in p.op_calls if c.get("sample", False)]
        out = {"x": first, "error": float("nan"), "status": "all_runs_failed",
               "anchor": first,
               "anchor_kind": p.runs[0]["phase"] if p.runs else "sobol",
               "history": " ".join(t[p.target.target_id] for t in search.traj)
               + " | proposal MILPs stopped unproven (node/time limit): "
               f"{op_unproven(solves)} of {len(solves)}" + note}
        if best is not None:
            out.update({"x": best["x"], "error": best["error"], "status": "ok",
                        "y": best["y"]})
        if search.noise is not None:
            out["stochastic"] = search.noise["evidence"]
        outs.append(out)
    return outs


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


@strategy("sequential", label="Sequential", order=67, min_budget=4,
          reads=("budget", "sequential"), study_keys=("metamodel",), default=False,
          check=check_sequential, joint=sequential_joint,
          design_key="sequential.use_design", needs_metamodel=False)
def strategy_sequential(p: TargetRun) -> dict[str, Any]:
    """One target: Sobol start, then Thompson sampling through the MILP of an
    ensemble (module doc); a job runs its targets at once (:func:`sequential_joint`)."""
    return sequential_joint([p])[0]




def propose_for(p: TargetRun, search: Search, mean_mm: Any, fm: Any, b: int) -> np.ndarray:
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
