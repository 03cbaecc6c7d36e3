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

**Curves** (a study with ``series``, issue 42).  The ensemble is trained on each
series' basis weights, the basis refitted on every round's runs (components by
explained variance, ``metamodel.series``), the decode folded into each member's last
layer (:mod:`simcalib.metamodel.ensemble`), so the proposal MILPs still minimise the
exact misfit over every observed point.  Delta divides a series' points by one scale
(:mod:`.scale`) and weighs each point 1/m (the curve counts as one output).  The
record's history ends with each series' basis: its components, its held-out
reconstruction error relative to the series' scale, the curve's out-of-bag R^2 and,
where runs were repeated at one point, the curve's noise ceiling
(:func:`basis_note`; the same as columns in ``out['series']``, :func:`basis_columns`).

**Noise from the start.**  Where the config does not say whether the simulator is
stochastic, the start's last point repeats its first (a fresh seed); different outputs
mark it stochastic (the record's ``stochastic`` column says so, with the evidence).
Where it is declared (or known) stochastic, the start's last two points repeat its
first two, and the pairs' differences measure the run-to-run noise: its sd per output
in the ``stochastic`` column, a curve's noise ceiling, the posterior's replicate term.
Declared deterministic: no repeat.

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

from simcalib.errors import ConfigError
from simcalib.metamodel.strategies.ledger import TargetRun, op_unproven, point_key
from simcalib.metamodel.strategies.proposals import adopt_design, propose_for
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
               f"{op_unproven(solves)} of {len(solves)}" + note + basis_note(ens)}
        if best is not None:
            out.update({"x": best["x"], "error": best["error"], "status": "ok",
                        "y": best["y"]})
        if search.noise is not None:
            out["stochastic"] = search.noise["evidence"]
        if ens is not None and ens.info.get("series"):
            out["series"] = basis_columns(ens)
        outs.append(out)
    return outs


def basis_columns(ens: Any) -> dict[str, Any]:
    """Per series of the last ensemble: its basis size and held-out reconstruction
    error (relative to the series' scale), the curve's pooled out-of-bag R^2 and, where
    runs were repeated at one point, its noise ceiling: ``series_<name>_<what>``
    columns for the records (the trust flags of a curve, beside the ensemble's R^2)."""
    out: dict[str, Any] = {}
    for name, r in (ens.info.get("series") or {}).items():
        out[f"series_{name}_components"] = int(r["components"])
        out[f"series_{name}_basis_error"] = float(r["basis_cv_relative"])
        out[f"series_{name}_oob_r2"] = float(r.get("oob_r2", float("nan")))
        out[f"series_{name}_noise_ceiling"] = float(r.get("noise_ceiling", float("nan")))
    return out


def basis_note(ens: Any) -> str:
    """The history column's words on each series' basis (:func:`basis_columns`)."""
    recs = (getattr(ens, "info", None) or {}).get("series") or {}
    parts = []
    for name, r in recs.items():
        cut = (f", cut from {r['cut_from_components']} by the noise ceiling"
               if "cut_from_components" in r else "")
        ceil = (f", noise ceiling {r['noise_ceiling']:.3f} ({r['replicate_pairs']} replicate "
                "pairs)" if "noise_ceiling" in r else ", noise ceiling n/a (no repeated point)")
        parts.append(f"series {name}: {r['components']} basis components of {r['points']} "
                     f"points on {r['runs']} runs{cut}, held-out reconstruction error "
                     f"{r['basis_cv_relative']:.3g} of its scale (rms {r['basis_cv_rms']:.3g}), "
                     f"unexplained variance {r['basis_unexplained']:.3g}, curve OOB R2 "
                     f"{r.get('oob_r2', float('nan')):.3f}{ceil}")
    return "".join(f" | {p}" for p in parts)


@strategy("sequential", label="Sequential", order=67, min_budget=4,
          reads=("budget", "sequential"), study_keys=("metamodel",), default=False,
          check=check_sequential, joint=sequential_joint,
          design_key="sequential.use_design", needs_metamodel=False)
def strategy_sequential(p: TargetRun) -> dict[str, Any]:
    """One target: Sobol start, then Thompson sampling through the MILP of an
    ensemble (module doc); a job runs its targets at once (:func:`sequential_joint`)."""
    return sequential_joint([p])[0]
