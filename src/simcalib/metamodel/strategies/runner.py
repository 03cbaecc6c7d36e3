"""Running a strategy over a set of targets: one record per target (the chosen
inputs, actual and predicted error, distance to the truth, runs, time) and the run
log (every simulator run, failed or not).  What each strategy does lives in its own
module of this package; the registry says which exist."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simcalib.errors import ConfigError, DataError
from simcalib.metamodel.strategies.ledger import (
    BudgetExceeded,
    OptimizeFn,
    Target,
    TargetRun,
    check_compatible,
    op_time_limited,
    op_unproven,
    point_key,
    read_targets,
)
from simcalib.metamodel.strategies.registry import get, reads_design
from simcalib.metamodel.strategies.settings import CalibrationSettings, SelectSettings
from simcalib.progress import eta
from simcalib.seeds import int_seed
from simcalib.study.model import Study
from simcalib.study.simulation import simulate_rows

log = logging.getLogger(__name__)


def default_optimize() -> OptimizeFn:
    """The MILP's ``optimize``, imported at its first call: a strategy that solves no
    MILP (rs, blackbox) does not pay the solver stack's import (scipy.optimize, HiGHS)
    at its job's start."""
    def optimize(*args: Any, **kwargs: Any) -> Any:
        from simcalib.metamodel.milp import optimize as milp_optimize

        return milp_optimize(*args, **kwargs)

    return optimize


def calibrate_target(study: Study, mm: Any, target: Target, strategy: str, budget: int,
                     proximity: float, settings: Mapping[str, Any] | None,
                     solver: Mapping[str, Any], seed: int,
                     optimize_fn: OptimizeFn | None = None, **kwargs: Any
                     ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One strategy on one target from Python, with the ``calibration`` settings as a
    user gives them (a dict, ``budget`` and ``proximity`` beside it): the boundary
    where they become one :class:`CalibrationSettings` (checked once), then
    :func:`run_target`.  ``kwargs``: :func:`run_target`'s keywords."""
    budget = int(budget) if isinstance(budget, np.integer) else budget
    section = {**dict(settings or {}), "budget": budget}
    built = CalibrationSettings.from_config(section, strategy, proximity=proximity)
    return run_target(study, mm, target, built, solver, seed, optimize_fn, **kwargs)


def run_target(study: Study, mm: Any, target: Target, settings: CalibrationSettings,
               solver: Mapping[str, Any], seed: int, optimize_fn: OptimizeFn | None = None,
               *, anchor: np.ndarray | None = None, stream: str | None = None,
               anchor_seconds: float = 0.0, anchor_status: str = "precomputed",
               threads: int = 1, journal: Path | None = None,
               prepared: tuple[TargetRun, dict[str, Any]] | None = None,
               given: pd.DataFrame | None = None
               ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run ``settings.strategy`` on one target with ``settings.budget`` runs at
    proximity ``settings.proximity`` (``threads``: simulator runs of one batch run in
    parallel, for simulators that allow it; results do not depend on it; ``journal``:
    a per-run journal a rerun replays, :class:`TargetRun`).  Returns
    (record, run log rows).  Columns that compare with the true inputs (``distance``,
    ``anchor_distance``, ``true_*``) are there only when the target has them
    (simulated, not observed, targets).  ``prepared``: the target's run and outcome
    from a strategy that ran every target at once (:func:`calibrate_block`); only the
    selection by mean and the record are made here.  ``given``: design runs the
    strategy may adopt (:attr:`TargetRun.given`).  The settings were checked when
    they were built; nothing is validated here.  Stages: prepare the ledger,
    dispatch to the strategy, collect the record and the run log."""
    spec = get(settings.strategy)
    eff_budget, top, reps = split_budget(study, settings)
    if prepared is None:
        p = _ledger(study, mm, target, settings, eff_budget - top * reps, solver, seed,
                    optimize_fn, stream, threads, journal, given=given, anchor=anchor,
                    anchor_seconds=float(anchor_seconds) if anchor is not None else 0.0,
                    anchor_status=anchor_status, reserve=top * reps)
    else:
        p = prepared[0]
    t0 = time.perf_counter()
    out = _dispatch(p, spec, prepared, eff_budget, top, reps)
    # a precomputed anchor's solve time is charged to every strategy that uses it
    seconds = time.perf_counter() - t0 + (p.anchor_seconds if any(
        c["label"] == "anchor" for c in p.op_calls) else 0.0)
    rec = {"target_id": target.target_id, "strategy": settings.strategy,
           "budget": settings.budget, "proximity": settings.proximity,
           **_outcome_columns(p, out, seconds)}
    _extra_columns(rec, p, settings, np.asarray(out["x"], dtype=float))
    _point_columns(rec, p, out)
    runs = run_log(p, settings.strategy, settings.proximity)
    p.close_journal()
    return rec, runs


def _dispatch(p: TargetRun, spec: Any, prepared: tuple[TargetRun, dict[str, Any]] | None,
              eff_budget: int, top: int, reps: int) -> dict[str, Any]:
    """The strategy's outcome for the target (its own, or a joint search's), with the
    selection by mean where it applies."""
    if not p.target.ok:
        n = len(p.space.tunable_names)
        return {"x": np.full(n, np.nan), "error": float("nan"), "status": "target_failed",
                "anchor": np.full(n, np.nan), "anchor_kind": ""}
    out = spec.fn(p) if prepared is None else prepared[1]
    if top and out["status"] == "ok":
        out = select_by_mean(p, out, top, reps)   # spends the ledger's reserve
    if p.used > eff_budget:  # pragma: no cover - guarded by TargetRun.simulate
        raise BudgetExceeded(f"{p.strategy} used {p.used} > {eff_budget}")
    return out


def _unit_distance(p: TargetRun, x: np.ndarray) -> float | None:
    """Distance to the true inputs (unit-scaled); None for an observed target."""
    if p.target.x_true is None:
        return None
    if not np.isfinite(x).all():
        return float("nan")
    return float(np.linalg.norm(p.space.to_unit(x) - p.space.to_unit(p.target.x_true)))


def _outcome_columns(p: TargetRun, out: Mapping[str, Any], seconds: float) -> dict[str, Any]:
    """The record's outcome and trust columns (errors, runs, OP solves, timing)."""
    x = np.asarray(out["x"], dtype=float)
    pred = p.predict(x[None, :])[0] if np.isfinite(x).all() else np.full(len(p.out_names),
                                                                         np.nan)
    anc = np.asarray(out["anchor"], dtype=float)
    rec = {
        "status": out["status"],
        "error": float(out["error"]),
        "predicted_error": float(p.err(pred)[0]) if np.isfinite(pred).all() else float("nan"),
        "distance": _unit_distance(p, x),
        "runs": p.used,
        "failed_runs": sum(r["status"] != "ok" for r in p.runs),
        "selection_runs": int(out.get("selection_runs", 1 if np.isfinite(out["error"]) else 0)),
        "op_solves": sum(c["label"] != "anchor" for c in p.op_calls),
        "op_fallbacks": sum(c["fallback"] for c in p.op_calls),
        "op_unproven": op_unproven(p.op_calls),
        "op_time_limited": op_time_limited(p.op_calls),
        "anchor_kind": out["anchor_kind"],
        "anchor_predicted_error": (float(p.predicted_error(anc[None, :])[0])
                                   if np.isfinite(anc).all() else float("nan")),
        "anchor_distance": _unit_distance(p, anc),
        "seconds": round(seconds, 4),
        "sim_seconds": round(p.sim_seconds, 4),
        "op_seconds": round(p.op_seconds, 4),
        "history": out.get("history", ""),
        "delta_scale": p.scale_source,
    }
    if p.target.x_true is None:
        del rec["distance"], rec["anchor_distance"]
    if "stochastic" in out:   # what the search found out about the simulator's noise
        rec["stochastic"] = out["stochastic"]
    # a curve's trust beside the answer: series_<name>_components / _basis_error /
    # _oob_r2 / _noise_ceiling (sequential's last ensemble; issue 42)
    rec.update(out.get("series") or {})
    return rec


def _extra_columns(rec: dict[str, Any], p: TargetRun, settings: CalibrationSettings,
                   x: np.ndarray) -> None:
    """Re-scored error (fresh replicates) and the MC-dropout spread, when asked for."""
    k = settings.rescore
    if k > 0:
        rec["rescored_error"] = rescore(p.study, p.mm, p.target, x, k, p.seed, p.scale,
                                        p.threads)
    n_mc = settings.mc_samples
    if n_mc > 0 and hasattr(p.mm, "predict_mc") and np.isfinite(x).all():
        # MC-dropout predictive spread at the chosen point (paper 1, Appendix F)
        inp = p.frame(x[None, :])[list(p.mm.input_names)].to_numpy(dtype=float)
        _, sd = p.mm.predict_mc(inp, n_mc, int_seed(p.seed, "mc", p.study.name,
                                                    p.target.target_id))
        rec["mc_sd"] = float((np.asarray(sd, dtype=float).reshape(-1) / p.scale).sum())


def _point_columns(rec: dict[str, Any], p: TargetRun, out: Mapping[str, Any]) -> None:
    """Contexts, the chosen, true and anchor inputs, and per output the target, the
    simulated output at the answer and the metamodel's prediction there."""
    target = p.target
    x = np.asarray(out["x"], dtype=float)
    anc = np.asarray(out["anchor"], dtype=float)
    chosen = next((r for r in p.runs if np.array_equal(r["x"], x) and np.isfinite(r["error"])),
                  None)
    if chosen is None and out.get("y") is not None:
        # a joint strategy's answer may be a run another target paid for
        chosen = {"y": np.asarray(out["y"], dtype=float)}
    pred = p.predict(x[None, :])[0] if np.isfinite(x).all() else np.full(len(p.out_names),
                                                                         np.nan)
    for c, v in target.context.items():
        rec[c] = v
    for j, n in enumerate(p.space.tunable_names):
        rec[f"x_{n}"] = float(x[j])
        if target.x_true is not None:
            rec[f"true_{n}"] = float(target.x_true[j])
        rec[f"anchor_{n}"] = float(anc[j])
    for j, n in enumerate(p.out_names):
        rec[f"target_{n}"] = float(target.z[j])
        rec[f"sim_{n}"] = float(chosen["y"][j]) if chosen is not None else float("nan")
        rec[f"pred_{n}"] = float(pred[j])


def run_log(p: TargetRun, strategy: str, proximity: float) -> list[dict[str, Any]]:
    """The target's run log rows: every run, failed or not."""
    runs = []
    for r in p.runs:
        row = {"target_id": p.target.target_id, "strategy": strategy,
               "proximity": proximity, "run_id": r["run_id"], "phase": r["phase"],
               "status": r["status"], "message": r["message"], "error": r["error"]}
        row.update({n: float(v) for n, v in zip(p.space.tunable_names, r["x"], strict=True)})
        row.update({n: float(v) for n, v in zip(p.out_names, r["y"], strict=True)})
        runs.append(row)
    return runs


def _ledger(study: Study, mm: Any, target: Target, settings: CalibrationSettings,
            budget: int, solver: Mapping[str, Any], seed: int,
            optimize_fn: OptimizeFn | None, stream: str | None, threads: int,
            journal: Path | None, given: pd.DataFrame | None = None,
            **anchor: Any) -> TargetRun:
    """One target's ledger as every calibration path builds it (one job or joint):
    ``budget`` the runs the strategy may spend (:func:`split_budget`); ``given``: the
    study's design runs the strategy may adopt (``use_design``).  The ledger reads
    the settings' keys (:meth:`CalibrationSettings.as_mapping`, read-only)."""
    return TargetRun(study, mm, target, budget, settings.proximity, settings.as_mapping(),
                     solver, seed, settings.strategy, optimize_fn or default_optimize(),
                     stream=stream or settings.strategy, threads=max(1, int(threads)),
                     journal=journal, given=given, **anchor)


def split_budget(study: Study, settings: CalibrationSettings) -> tuple[int, int, int]:
    """(runs of the target, candidates re-run by the selection, runs each) of
    ``settings.budget`` for ``settings.strategy``: op needs one scoring run whatever
    the budget; every other strategy uses exactly the budget, of which the selection
    by mean keeps candidates x runs."""
    return _split(study, settings.select, settings.budget, get(settings.strategy))


def budget_split(study: Study, settings: CalibrationSettings | Mapping[str, Any],
                 budget: int, spec: Any) -> tuple[int, int, int]:
    """:func:`split_budget` for a workflow helper that holds the merged section
    (``merged_settings``) and a strategy's spec, not a settings object."""
    sel = (settings.select if isinstance(settings, CalibrationSettings)
           else SelectSettings(**settings["select"]))
    return _split(study, sel, int(budget), spec)


def _split(study: Study, select: SelectSettings, budget: int, spec: Any
           ) -> tuple[int, int, int]:
    eff = spec.fixed_budget if spec.fixed_budget is not None else int(budget)
    top, reps = (selection(study, select, eff, spec.min_budget)
                 if spec.best_of_runs else (0, 0))
    return eff, top, reps


def selection(study: Study, select: SelectSettings, budget: int, min_budget: int
              ) -> tuple[int, int]:
    """(candidates re-run, runs each) of ``calibration.select`` for one target: ``auto``
    is 3 for a stochastic simulator and 0 otherwise; fewer candidates when the budget
    would leave the strategy less than its minimum (or fewer than two runs)."""
    from simcalib.study.noise import known_stochastic

    top = (AUTO_SELECT_TOP if known_stochastic(study.cfg) else 0) if select.top == "auto" \
        else int(select.top)
    reps = select.reps
    if top <= 0 or reps <= 0:
        return 0, 0
    top = min(top, max(0, (budget - max(min_budget, 2)) // reps))
    return (top, reps) if top > 0 else (0, 0)


#: candidates re-run when ``select.top`` is ``auto`` and the simulator is stochastic
AUTO_SELECT_TOP = 3


def select_by_mean(p: TargetRun, out: dict[str, Any], top: int, reps: int) -> dict[str, Any]:
    """Re-run the ``top`` best distinct successful points ``reps`` times each (phase
    ``select``, inside the budget) and return the one with the lowest mean Delta over
    all its successful runs; the record's error is that mean.  Why: for a noisy
    simulator the best single run is partly lucky noise, and the point it came from is
    often not the best on average (the re-scored error says so afterwards; this
    chooses with it)."""
    seen: dict[tuple[float, ...], list[float]] = {}
    xs: dict[tuple[float, ...], np.ndarray] = {}
    own = [r for r in p.runs if np.array_equal(r["x"], out["x"]) and np.isfinite(r["error"])]
    if own:  # the strategy's own answer is always a candidate, whatever its single run
        key = point_key(own[0]["x"])
        seen[key], xs[key] = [float(r["error"]) for r in own], np.asarray(own[0]["x"], float)
    elif np.isfinite(out.get("error", np.nan)):  # a run another target paid for (joint)
        key = point_key(out["x"])
        seen[key], xs[key] = [float(out["error"])], np.asarray(out["x"], dtype=float)
    for r in sorted((r for r in p.runs if np.isfinite(r["error"])), key=lambda r: r["error"]):
        key = point_key(r["x"])
        if key not in seen and len(seen) < top:
            seen[key] = [float(e["error"]) for e in p.runs
                         if np.array_equal(e["x"], r["x"]) and np.isfinite(e["error"])]
            xs[key] = np.asarray(r["x"], dtype=float)
    if not seen:
        return out
    for key in seen:
        errs = p.simulate(np.repeat(xs[key][None, :], reps, axis=0), "select")
        seen[key] += [float(e) for e in errs if np.isfinite(e)]
    best = min(seen, key=lambda k: float(np.mean(seen[k])))
    means = "; ".join(f"{np.mean(v):.4g} ({len(v)} runs)" for v in seen.values())
    out = {**out, "x": xs[best].copy(), "error": float(np.mean(seen[best])),
           "selection_runs": len(seen[best]),
           "history": (str(out.get("history", "")) + f" | select by mean: {means}").strip(" |")}
    return out


def rescore_runs(study: Study, x: np.ndarray, context: Mapping[str, float], target_id: int,
                 ids: np.ndarray, seed: int, threads: int = 1) -> pd.DataFrame:
    """Fresh runs at ``x`` with the re-scoring seeds: run ids ``ids`` of the stream
    ``rescore:<target_id>`` (so replicate i is the same run whoever asks: the records'
    ``rescored_error`` and the curves figure's band see the same noise)."""
    rows = pd.DataFrame(np.repeat(np.asarray(x, dtype=float)[None, :], len(ids), axis=0),
                        columns=study.space.tunable_names)
    for c in study.space.context_names:
        rows[c] = context[c]
    rows.insert(0, "run_id", np.asarray(ids, dtype=np.int64))
    return simulate_rows(study, rows, seed, stream=f"rescore:{target_id}", threads=threads)


def rescore(study: Study, mm: Any, target: Target, x: np.ndarray, k: int, seed: int,
            scale: np.ndarray, threads: int = 1) -> float:
    """Mean Delta of ``k`` fresh simulator runs at ``x`` (outside the budget; never used
    to choose).  For a stochastic simulator the chosen run's own Delta is biased low
    (the best of r noisy runs is partly lucky noise); this is the unbiased score.
    The replicate seeds depend on (study, target, replicate) only, so every strategy
    is re-scored with common random numbers."""
    if not (target.ok and np.isfinite(x).all()):
        return float("nan")
    res = rescore_runs(study, x, target.context, target.target_id, np.arange(k), seed,
                       threads)
    ok = (res["status"] == "ok").to_numpy()
    if not ok.any():
        return float("nan")
    Y = res.loc[ok, list(mm.output_names)].to_numpy(dtype=float)
    return float((np.abs(Y - target.z) / scale).sum(axis=1).mean())


def check_solver(solver: Mapping[str, Any]) -> None:
    """The solver option set checked where a calibration starts, whatever the strategy
    (``rs`` never solves a MILP, ``pts`` only after its first runs): a misspelled option
    is a ConfigError naming it before any run is spent, as ``optimize()`` and
    ``mm-optimize`` raise it (issue 40)."""
    from simcalib.metamodel.milp.settings import SolverSettings

    SolverSettings.build(solver, "solver")


def calibrate(study: Study, mm: Any, targets: pd.DataFrame, strategy: str,
              settings: CalibrationSettings | Mapping[str, Any] | None,
              solver: Mapping[str, Any], seed: int,
              proximity: float | None = None, optimize_fn: OptimizeFn | None = None,
              anchors: pd.DataFrame | None = None, source: str = "targets",
              stream: str | None = None, threads: int = 1,
              journal_dir: str | Path | None = None, design: pd.DataFrame | None = None
              ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One strategy on every target of ``targets``: (per-target records, run log).
    ``threads``: the runs of one batch (RS's runs, PtS's box, a round) run in parallel
    when the simulator allows it (a command); seeds come from run ids, so the results
    are the same as a serial run's.  ``journal_dir``: each target's runs are journaled
    there as they end (``<strategy>_<target>.jsonl``), so a job killed mid-target
    resumes from its last finished run instead of the target's first.  ``design``: the
    study's simulated design (dataset.csv rows), read by a strategy whose
    ``design_key`` is on (``sequential.use_design``), ignored otherwise.
    ``settings``: a :class:`CalibrationSettings`, or the ``calibration`` section as a
    dict (checked once here, as a config file's; ``proximity`` over its own)."""
    built = CalibrationSettings.build(settings, strategy, proximity)
    return merge_blocks([calibrate_block(study, mm, targets, strategy, built, solver, seed,
                                         None, optimize_fn, anchors, source, stream,
                                         threads, journal_dir, design=design)])


def block_slice(n: int, block: int, blocks: int) -> slice:
    """Positions of block ``block`` (0-based) of ``blocks`` contiguous blocks of ``n``
    targets, sizes differing by at most one (``numpy.array_split``'s rule); a block
    past the targets is empty."""
    if blocks < 1 or not 0 <= block < blocks:
        raise ConfigError("--block", f"block {block} of {blocks}: need 0 <= block < blocks")
    q, r = divmod(n, blocks)
    start = block * q + min(block, r)
    return slice(start, start + q + (block < r))


def merge_blocks(parts: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]]
                 ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(records, run log) of blocks of targets, in block order: the frames a serial
    run over every target builds (the same rows, columns and dtypes, because they are
    built from the same dicts), so the files written from them are the same bytes."""
    records = [r for rec, _ in parts for r in rec]
    runs = [r for _, rl in parts for r in rl]
    return pd.DataFrame(records), pd.DataFrame(runs)


def calibrate_block(study: Study, mm: Any, targets: pd.DataFrame, strategy: str,
                    settings: CalibrationSettings | Mapping[str, Any] | None,
                    solver: Mapping[str, Any], seed: int,
                    proximity: float | None = None, optimize_fn: OptimizeFn | None = None,
                    anchors: pd.DataFrame | None = None, source: str = "targets",
                    stream: str | None = None, threads: int = 1,
                    journal_dir: str | Path | None = None, block: tuple[int, int] = (0, 1),
                    design: pd.DataFrame | None = None,
                    joint: Callable[[list[TargetRun]], list[dict[str, Any]]] | None = None
                    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """:func:`calibrate` on block ``block = (i, n)`` of the targets (:func:`block_slice`
    of the whole table, read as a whole so per-table rules such as output weights are
    the same), as lists of record and run-log dicts for :func:`merge_blocks`.  Every
    seed depends on (study, strategy, target, run), never on the block, so the blocks
    of a job give the serial job's records; a joint strategy (one search for all
    targets) must run as one block.  ``settings``: the job's
    :class:`CalibrationSettings` (``cal-run`` builds them once; a dict is built here,
    once, never per target).  ``joint``: replaces the strategy's joint search (the
    last step of a search run as round jobs:
    :mod:`~simcalib.metamodel.strategies.rounds`)."""
    check_compatible(study, mm)
    check_solver(solver)
    settings = CalibrationSettings.build(settings, strategy, proximity)
    spec = get(strategy)
    tlist = read_targets(targets, study, mm, source)
    if block[1] > 1 and spec.joint is not None:
        raise ConfigError("--block", f"strategy {strategy!r} searches all targets at once "
                          "(joint): run it as one block")
    tlist = tlist[block_slice(len(tlist), *block)]
    design = _design_for(strategy, settings, design)
    anchor_of, anchor_sec, anchor_st = _anchor_info(anchors, study)
    jpath = (lambda tid: Path(journal_dir) / f"{strategy}_{tid}.jsonl") \
        if journal_dir is not None else (lambda tid: None)
    prepared: dict[int, tuple[TargetRun, dict[str, Any]]] = {}
    if spec.joint is not None:
        # one search for every target at once (runs shared): the strategy gets each
        # target's ledger and returns each target's outcome
        ps = joint_ledgers(study, mm, tlist, strategy, settings, solver, seed, None,
                           optimize_fn, stream, threads, jpath, design)
        if ps:
            prepared = {p.target.target_id: (p, o)
                        for p, o in zip(ps, (joint or spec.joint)(ps), strict=True)}
    records, runs = [], []
    t_start = time.perf_counter()
    for k, t in enumerate(tlist, 1):
        rec, rlog = run_target(study, mm, t, settings, solver, seed, optimize_fn,
                               anchor=anchor_of.get(t.target_id), stream=stream,
                               anchor_seconds=anchor_sec.get(t.target_id, 0.0),
                               anchor_status=anchor_st.get(t.target_id, "precomputed"),
                               threads=threads, journal=jpath(t.target_id),
                               prepared=prepared.get(t.target_id), given=design)
        log.info("%s %s target %d/%d (id %d): error %.4g (predicted %.4g), %d runs, "
                 "%.2f s; %s", study.name, strategy, k, len(tlist), t.target_id, rec["error"],
                 rec["predicted_error"], rec["runs"], rec["seconds"],
                 eta(time.perf_counter() - t_start, k, len(tlist)))
        _warn_unproven(study.name, strategy, t.target_id, rec["op_unproven"],
                       spec.joint is not None, rec["op_time_limited"])
        records.append(rec)
        runs.extend(rlog)
    return records, runs


def _design_for(strategy: str, settings: CalibrationSettings, design: pd.DataFrame | None
                ) -> pd.DataFrame | None:
    """The design runs the strategy sees: none unless it can use them (``design_key``);
    asked for (``sequential.use_design``) but not given is an error."""
    key = get(strategy).design_key
    if key is None:
        return None
    if reads_design(strategy, settings.as_mapping()) and design is None:
        raise ConfigError(f"calibration.{key}",
                          f"is true, but strategy {strategy!r} was given no design runs "
                          "(cal-run --design results/<study>/dataset.csv; the workflow "
                          "passes it)")
    return design


def _warn_unproven(study: str, strategy: str, tid: int, n: int, proposals: bool,
                   timed: int = 0) -> None:
    """The log's word on a target's unproven solves (the record's ``op_unproven``) and
    on those the time limit stopped (``op_time_limited``: a rerun may differ)."""
    if not n:
        return
    if proposals:   # sequential's solves only propose runs; its answer is a run
        log.warning("%s %s target %d: %d proposal MILP(s) stopped unproven (node or time "
                    "limit): those proposals were the solver's incumbents; the answer is "
                    "still a simulated run", study, strategy, tid, n)
        if timed:
            log.warning("%s %s target %d: %d of them stopped at the time limit, not the "
                        "node limit: how far a solve gets in its seconds depends on the "
                        "machine's load, so a rerun (another machine, another load) may "
                        "propose other runs; for runs that repeat exactly raise "
                        "sequential.solver.time_limit above the slowest solve (op.csv)",
                        study, strategy, tid, timed)
        return
    log.warning("%s %s target %d: %d OP solve(s) not proven optimal (time limit or "
                "fallback); the OP point may not be the metamodel's optimum",
                study, strategy, tid, n)


def joint_ledgers(study: Study, mm: Any, tlist: list[Target], strategy: str,
                  settings: CalibrationSettings | Mapping[str, Any],
                  solver: Mapping[str, Any], seed: int,
                  prox: float | None = None, optimize_fn: OptimizeFn | None = None,
                  stream: str | None = None, threads: int = 1,
                  jpath: Callable[[int], Path | None] = lambda tid: None,
                  design: pd.DataFrame | None = None) -> list[TargetRun]:
    """The ledgers of a joint search's targets (those not failed), each with the
    budget the search may spend (the selection by mean's runs kept aside): the same
    for the one-job search and for every round job of it.  ``settings``: the job's
    :class:`CalibrationSettings` (a mapping, the section, is built here once:
    :meth:`CalibrationSettings.build`); ``prox``: a proximity over theirs."""
    settings = CalibrationSettings.build(settings, strategy, prox)
    eff, top, reps = split_budget(study, settings)
    return [_ledger(study, mm, t, settings, eff - top * reps, solver, seed, optimize_fn,
                    stream, threads, jpath(t.target_id), given=design, reserve=top * reps)
            for t in tlist if t.ok]


def _anchor_info(anchors: pd.DataFrame | None, study: Study
                 ) -> tuple[dict[int, np.ndarray], dict[int, float], dict[int, str]]:
    """Per target: its precomputed anchor, that solve's seconds and its status."""
    if anchors is None:
        return {}, {}, {}
    sec = ({int(r["target_id"]): float(r["seconds"]) for _, r in anchors.iterrows()}
           if "seconds" in anchors else {})
    st = ({int(r["target_id"]): _anchor_status(r) for _, r in anchors.iterrows()}
          if "status" in anchors else {})
    return _anchor_map(anchors, study), sec, st


def _anchor_status(row: pd.Series) -> str:
    """An anchor row's status for the trust flags: a fallback is never proven."""
    if str(row.get("fallback", False)).strip().lower() in ("true", "1", "1.0"):
        return "fallback"
    return str(row["status"])


def _anchor_map(anchors: pd.DataFrame, study: Study) -> dict[int, np.ndarray]:
    names = study.space.tunable_names
    missing = [c for c in ["target_id", *(f"x_{n}" for n in names)] if c not in anchors]
    if missing:
        raise DataError("anchors", f"missing column(s) {missing}")
    return {int(r["target_id"]): np.array([float(r[f"x_{n}"]) for n in names])
            for _, r in anchors.iterrows() if all(np.isfinite(r[f"x_{n}"]) for n in names)}


def solved_points(op_table: pd.DataFrame, study: Study,
                  source: str = "op.csv") -> dict[int, tuple[np.ndarray, str, float]]:
    """Full-space OP points already solved by ``mm-optimize`` (its best, rank-0 row per
    target): ``target_id -> (tunables, status, seconds)``."""
    names = study.space.tunable_names
    missing = [c for c in ["target_id", "status", *names] if c not in op_table]
    if missing:
        raise DataError(source, f"missing column(s) {missing}")
    df = op_table[op_table["rank"] == 0] if "rank" in op_table else op_table
    out = {}
    for _, r in df.iterrows():
        x = np.array([float(r[n]) for n in names])
        if np.isfinite(x).all():
            secs = float(r["seconds"]) if "seconds" in r and np.isfinite(r["seconds"]) else 0.0
            out[int(r["target_id"])] = (x, str(r["status"]), secs)
    return out


def compute_anchors(study: Study, mm: Any, targets: pd.DataFrame, solver: Mapping[str, Any],
                    seed: int, optimize_fn: OptimizeFn | None = None,
                    source: str = "targets", solved: pd.DataFrame | None = None
                    ) -> pd.DataFrame:
    """The full-space OP point of every target (shared by op, pts, adaptive and the
    proximity sweep, so the MILP is solved once per target).

    ``solved``: ``mm-optimize``'s op.csv for the same targets, solver set and weights;
    its points are reused instead of solving the same MILPs again (a target with its
    own output weights or sds is solved here, since op.csv does not weight them)."""
    check_compatible(study, mm)
    check_solver(solver)
    settings = CalibrationSettings.from_config({}, "op").as_mapping()
    rows = []
    tlist = read_targets(targets, study, mm, source)
    reuse = solved_points(solved, study) if solved is not None else {}
    t_start = time.perf_counter()
    for k, t in enumerate(tlist, 1):
        p = TargetRun(study, mm, t, 0, 1.0, settings, solver, seed, "op",
                    optimize_fn or default_optimize())
        if t.ok and t.weight is None and t.target_id in reuse:
            x0, status, secs = reuse[t.target_id]
            lo, hi = p.bounds()
            x = np.clip(study.space.round_integers(x0), lo, hi)
            call = {"status": status, "fallback": False, "seconds": secs}
            pe = float(p.predicted_error(x[None, :])[0])
        elif t.ok:
            x = p.op(None, "full")
            call = p.op_calls[-1]
            pe = float(p.predicted_error(x[None, :])[0])
        else:
            x, call, pe = np.full(len(study.space.tunable_names), np.nan), \
                {"status": "target_failed", "fallback": False, "seconds": 0.0}, float("nan")
        row = {"target_id": t.target_id, "status": call["status"],
               "fallback": call["fallback"], "seconds": round(call["seconds"], 4),
               "predicted_error": pe}
        row.update({f"x_{n}": float(v) for n, v in zip(study.space.tunable_names, x,
                                                       strict=True)})
        rows.append(row)
        log.info("%s anchors: target %d/%d (id %d): %s, predicted error %.4g; %s", study.name,
                 k, len(tlist), t.target_id, call["status"], pe,
                 eta(time.perf_counter() - t_start, k, len(tlist)))
    return pd.DataFrame(rows)
