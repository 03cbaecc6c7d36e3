"""``sequential`` as a chain of jobs: a step job per round, the round's runs as jobs.

Why: with a simulator of an hour a run, a search of 128 runs in rounds of 16 is 8
hours of wall if each round's 16 runs run side by side, and 128 hours in one job.  The
workflow therefore cuts the search (``sequential.jobs: rounds``) into

* **step jobs** (:func:`run_step`): step 0 draws the start; step s >= 1 enters the
  runs of step s-1, fits the ensemble and solves round s-1's proposal MILPs.  Each
  writes the search's state (:meth:`Search.state`) and the step's proposals;
* **simulation jobs** (:func:`simulate_chunk`): ``chunk_size`` proposals each,
  journaled run by run (a killed job redoes only the runs in flight), with the seeds
  the one-job search uses (from the run id), so the same rows give the same outputs;
* **the final job** (:func:`finish`): enters the last runs and makes the records
  (answer, selection by mean, re-scoring) with the one-job path's code.

The chain is static (Snakemake's own DAG, no second scheduler): :func:`plan` counts
the steps from the budget, the batch, the number of targets and the start.  When the
start cannot be known before the run (targets at several contexts, or
``use_design``), the count is an upper bound and a step with nothing left to propose
writes no rows.  Every step restores the state exactly (pickled arrays and weights, the
random streams' states), so the runs and records equal the one-job search's, bit for
bit, whatever ``--cores``, profile or job layout.
"""

from __future__ import annotations

import logging
import pickle
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simcalib.errors import DataError
from simcalib.metamodel.strategies.ledger import Target, TargetRun
from simcalib.metamodel.strategies.search import Search, initial_runs, run_here

log = logging.getLogger(__name__)

STRATEGY = "sequential"


# ---- the plan: how many steps, how many runs each ----------------------------------

def plan(n_targets: int, budget: int, n_tunables: int, per_input: int, batch: int,
         exact_start: bool) -> list[int]:
    """The most runs of each step of a search (step 0: the start), as the workflow's
    static chain of jobs.  ``budget``: each target's runs for the search (the
    selection by mean's kept aside); ``exact_start``: every target at one context and
    no design adopted, so the start and hence every round is known exactly (else the
    start counts as empty: an upper bound on the rounds, and a round has at most
    max(batch, targets) runs)."""
    k = max(1, int(n_targets))
    left = [int(budget)] * k
    if exact_start:
        n0 = initial_runs(k * budget, n_tunables, per_input)
        n0 = min(n0, sum(b // 2 if b >= 4 else b for b in left)) or n0
        start = [min(len(range(j, n0, k)), left[j]) for j in range(k)]
        left = [lf - s for lf, s in zip(left, start, strict=True)]
        steps = [sum(start)]
    else:
        steps = [min(k * budget, k * per_input * n_tunables)]
    while any(lf > 0 for lf in left):
        active = [i for i, lf in enumerate(left) if lf > 0]
        share = max(1, int(batch) // len(active))
        took = 0
        for i in active:
            t = min(share, left[i])
            left[i] -= t
            took += t
        steps.append(took if exact_start else max(int(batch), k))
    return steps


def chunks(rows: int, chunk_size: int) -> int:
    """Simulation jobs of a step of at most ``rows`` runs (at least one)."""
    return max(1, -(-int(rows) // max(1, int(chunk_size))))


# ---- files ---------------------------------------------------------------------------

def _dump(obj: Any, path: str | Path) -> None:
    """Pickle to a temporary name, then rename (an interrupted job leaves nothing)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    with tmp.open("wb") as f:
        pickle.dump(obj, f, protocol=pickle.HIGHEST_PROTOCOL)
    tmp.replace(path)


def _load(path: str | Path) -> Any:
    with open(path, "rb") as f:
        return pickle.load(f)


# ---- a step --------------------------------------------------------------------------

def restore(ps: list[TargetRun], state: Mapping[str, Any] | None,
            sims: Sequence[Mapping[str, Any]]) -> Search:
    """The search over the ledgers ``ps`` as the previous step left it (``state``
    None: not started), with that step's runs (``sims``: chunk results) entered and
    the round's stock taken."""
    search = Search(ps)
    if state is None or state["search"] is None:
        return search
    search.restore(state["search"])
    if state["stepped"]:
        # the one-job search takes stock after every start and round it runs, and
        # only then (a step with nothing left to propose adds no trajectory point)
        enter(search, sims)
        search.after_round()
    return search


def enter(search: Search, sims: Sequence[Mapping[str, Any]]) -> None:
    """Enter simulated rows into their targets' ledgers, in run-id order, as the
    one-job search's ``simulate`` does."""
    parts = [s["rows"] for s in sims if len(s["rows"])]
    if not parts:
        return
    res = pd.concat(parts, ignore_index=True).sort_values(["target_id", "run_id"],
                                                          kind="stable")
    secs = sum(float(s["seconds"]) for s in sims)
    n = len(res)
    for p in search.ps:
        rows = res[res["target_id"] == p.target.target_id]
        if not len(rows):
            continue
        ids = rows["run_id"].to_numpy(dtype=np.int64)
        if not np.array_equal(ids, np.arange(p.used, p.used + len(rows))):
            raise DataError("round runs", f"target {p.target.target_id}: runs {ids.tolist()} "
                            f"do not follow its {p.used} runs so far (a step's files from "
                            "another config? rerun the chain)")
        X = rows[p.space.tunable_names].to_numpy(dtype=float)
        Y = rows[p.out_names].to_numpy(dtype=float)
        status = rows["status"].to_numpy()
        p._enter(X, Y, status, rows["message"].to_numpy(), status == "ok",
                 str(rows["phase"].iloc[0]))
        p.sim_seconds += secs * len(rows) / n


def run_step(ps: list[TargetRun], step: int, state: Mapping[str, Any] | None,
             sims: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], pd.DataFrame]:
    """Step ``step``: restore, enter the previous step's runs, then the start (step 0)
    or the next round's proposals.  Returns (the new state, the proposals: target_id,
    run_id, phase and the study's inputs per row; none once every budget is spent)."""
    if (step == 0) != (state is None):
        raise DataError("round state", f"step {step} needs {'no' if step == 0 else 'the'} "
                        "previous step's state")
    search = restore(ps, state, sims)
    stepped = step == 0 or search.active()
    if step == 0:
        props = search.start()
    elif stepped:
        props = search.propose()
    else:
        props = {}
    return ({"step": step, "stepped": stepped, "search": search.state()},
            proposals_frame(search, props))


def proposals_frame(search: Search, props: Mapping[int, tuple[np.ndarray, str]]
                    ) -> pd.DataFrame:
    """A step's proposals as rows (each target's next run ids)."""
    names = list(search.p0.study.input_names)
    parts = []
    for p in search.ps:
        if p.target.target_id not in props:
            continue
        X, phase = props[p.target.target_id]
        if len(X) > p.left:
            raise DataError("round proposals", f"target {p.target.target_id}: {len(X)} "
                            f"proposals, {p.left} runs left")
        df = p.frame(X)
        df.insert(0, "phase", phase)
        df.insert(0, "run_id", np.arange(p.used, p.used + len(X), dtype=np.int64))
        df.insert(0, "target_id", p.target.target_id)
        parts.append(df)
    if not parts:
        return pd.DataFrame(columns=["target_id", "run_id", "phase", *names])
    return pd.concat(parts, ignore_index=True)


def step_job(study: Any, mm: Any, targets: pd.DataFrame, settings: Mapping[str, Any],
             solver: Mapping[str, Any], seed: int, step: int,
             state_path: str | Path | None, sim_paths: Sequence[str | Path],
             design: pd.DataFrame | None = None, source: str = "targets"
             ) -> tuple[dict[str, Any], pd.DataFrame]:
    """One step job: the ledgers as the one-job search builds them, the previous
    step's state and runs, then :func:`run_step`."""
    from simcalib.metamodel.strategies.ledger import check_compatible, read_targets
    from simcalib.metamodel.strategies.runner import joint_ledgers
    from simcalib.metamodel.strategies.settings import check_settings, merged_settings

    check_compatible(study, mm)
    settings = merged_settings(settings)
    prox = float(settings["proximity"])
    check_settings(STRATEGY, int(settings["budget"]), prox, settings)
    tlist = read_targets(targets, study, mm, source)
    ps = joint_ledgers(study, mm, tlist, STRATEGY, settings, solver, seed, prox, design=design)
    state, sims = read_step(state_path, sim_paths)
    if not ps:   # every target failed: nothing to search
        return {"step": step, "stepped": False, "search": None}, pd.DataFrame()
    return run_step(ps, step, state, sims)


def write_step(state: dict[str, Any], props: pd.DataFrame, out_state: str | Path,
               out_props: str | Path) -> None:
    _dump(props, out_props)
    _dump(state, out_state)


def read_step(state_path: str | Path | None, sim_paths: Sequence[str | Path]
              ) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The previous step's state and its chunks' results."""
    state = _load(state_path) if state_path else None
    return state, [_load(p) for p in sim_paths]


# ---- a simulation job ----------------------------------------------------------------

def simulate_chunk(study: Any, props: pd.DataFrame, chunk: int, chunk_size: int, seed: int,
                   threads: int = 1, journal_dir: str | Path | None = None
                   ) -> dict[str, Any]:
    """Run rows ``[chunk * chunk_size, (chunk + 1) * chunk_size)`` of a step's
    proposals, each target's rows as its ledger would (same stream, seeds from the run
    ids; journaled under ``journal_dir``, so a killed job resumes).  Returns the rows
    with outputs, status and message, and the seconds the runs took."""
    from simcalib.metamodel.strategies.runner import default_optimize
    from simcalib.metamodel.strategies.scale import RunScale

    part = props.iloc[chunk * chunk_size:(chunk + 1) * chunk_size]
    mm = RunScale(list(study.input_names), list(study.outputs), study=study.name)
    t0 = time.perf_counter()
    out = []
    for tid, rows in part.groupby("target_id", sort=False):
        jr = (Path(journal_dir) / f"{STRATEGY}_{int(tid)}_{chunk}.jsonl"
              if journal_dir is not None else None)
        p = TargetRun(study, mm, Target(int(tid), None, {}, np.zeros(len(mm.output_names))),
                      len(rows), 1.0, {}, {}, seed, STRATEGY, default_optimize(),
                      threads=max(1, int(threads)), journal=jr)
        res = p._simulate_rows(rows[["run_id", *study.input_names]].reset_index(drop=True))
        p.close_journal()
        res.insert(0, "phase", rows["phase"].to_numpy())
        res.insert(0, "target_id", int(tid))
        out.append(res)
    rows_out = pd.concat(out, ignore_index=True) if out else pd.DataFrame()
    return {"rows": rows_out, "seconds": time.perf_counter() - t0}


# ---- the last step -------------------------------------------------------------------

def finisher(state: Mapping[str, Any], sims: Sequence[Mapping[str, Any]]) -> Any:
    """The joint search's last step for :func:`runner.calibrate_block` (``joint=``):
    restore, enter the last runs, then each target's outcome as the one-job search
    makes it.  A chain cut too short (it never is: :func:`plan` is an upper bound)
    would finish its rounds here rather than answer early."""
    from simcalib.metamodel.strategies.sequential import outcomes

    def joint(ps: list[TargetRun]) -> list[dict[str, Any]]:
        search = restore(ps, state, sims)
        while search.active():
            log.warning("%s sequential: the round chain ended with runs left; running "
                        "round %d here", search.p0.study.name, search.round)
            run_here(search, search.propose())
            search.after_round()
        return outcomes(search)

    return joint
