"""One target's calibration run: the target, the budget ledger, and the calls every
strategy makes (sample, simulate, OP).

Errors are on normalised outputs: each output divided by the metamodel's training-set
standard deviation (``Metamodel.y_std``), so ``error`` (actual, Delta) is
sum_j |S_j(x) - z_j| / s_j and ``predicted_error`` (delta) is sum_j |M_j(x) - z_j| / s_j.
``distance`` is the Euclidean distance between x and x* after
:meth:`Space.to_unit` (each input scaled to [0, 1] over its global bounds); it exists
only for simulated targets (observed targets have no true inputs x*).  An observed
target may carry per-output standard deviations and weights
(:mod:`simcalib.study.observations`): output j's term is then w_j |.| / d_j, d_j = sd_j.

Simulation runs are real simulator calls (:func:`simcalib.study.simulation.simulate_rows`),
seeded from (seed, study, strategy, target, run index).  A failed run counts against
the budget, is kept in the run log and never chosen.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simcalib.errors import DataError
from simcalib.seeds import int_seed, rng
from simcalib.study.model import Study
from simcalib.study.simulation import simulate_rows


def point_key(x: Any) -> tuple[float, ...]:
    """A run's input point as a dict key: runs at one point (re-runs, replicates) share
    it, whatever float noise their stored rows carry."""
    return tuple(np.round(np.asarray(x, dtype=float), 12))


log = logging.getLogger(__name__)

OptimizeFn = Callable[..., Any]
#: a journaled group of calibration runs that ends within this many seconds doubles the
#: next group (:meth:`TargetRun._simulate_rows`)
GROUP_SECONDS = 0.5

@dataclass
class Target:
    target_id: int
    x_true: np.ndarray | None   # tunables, raw; None for an observed target (no truth)
    context: dict[str, float]
    z: np.ndarray               # outputs in the metamodel's output order
    ok: bool = True
    # multiplier of output j's term |.| / s_j (weight_j * s_j / sd_j; 1 by default)
    weight: np.ndarray | None = None
    # per output: whether the target gives its own sd (sd_<output>), which then divides
    # that term whatever the base scale s_j is (None: no sd given)
    sd_given: np.ndarray | None = None


def check_compatible(study: Study, mm: Any, source: str = "metamodel") -> None:
    """The metamodel must map exactly the study's inputs to the study's outputs."""
    if list(mm.input_names) != list(study.input_names):
        raise DataError(source, f"metamodel inputs {list(mm.input_names)} differ from the "
                        f"study's inputs {list(study.input_names)}")
    if sorted(mm.output_names) != sorted(study.outputs):
        raise DataError(source, f"metamodel outputs {list(mm.output_names)} differ from the "
                        f"study's outputs {list(study.outputs)}")


def read_targets(df: pd.DataFrame, study: Study, mm: Any, source: str = "targets") -> list[Target]:
    """Targets from a ``targets.csv`` table, outputs in the metamodel's order.  The true
    inputs are read when every tunable column is there (simulated targets), else the
    targets are observed ones (``x_true`` None); ``sd_<output>``/``weight_<output>``
    columns set per-target output weights."""
    from simcalib.study.observations import SD_PREFIX, has_truth, output_weights
    from simcalib.study.series import parse_column

    need = ["target_id", *study.space.context_names, *mm.output_names]
    missing = [c for c in need if c not in df.columns]
    partial = [c for c in study.space.tunable_names if c not in df.columns]
    if partial and len(partial) < len(study.space.tunable_names):
        missing += partial   # some true inputs but not all: a broken file, not observed data
    if missing:
        raise DataError(source, f"the target file does not match the metamodel: missing "
                        f"column(s) {missing} (metamodel outputs {list(mm.output_names)}, "
                        f"inputs {list(study.input_names)})")
    truth = has_truth(df, study.space.tunable_names)
    weights = output_weights(df, list(mm.output_names), output_scale(mm))
    plain = bool(np.all(weights == 1.0))
    out = []
    status = df["status"].astype(str) if "status" in df else pd.Series("ok", index=df.index)
    sd_cols = [SD_PREFIX + o for o in mm.output_names]
    points = np.array([parse_column(o) is not None for o in mm.output_names])
    for k, (i, row) in enumerate(df.iterrows()):
        z = row[list(mm.output_names)].to_numpy(dtype=float)
        # a curve's point the target does not observe (weight 0) is no missing data:
        # it leaves Delta, so its NaN is kept out of the check and out of the sums
        unseen = points & (weights[k] == 0)
        z = np.where(unseen, 0.0, z)
        ok = status.loc[i] == "ok" and bool(np.isfinite(z).all())
        x_true = row[study.space.tunable_names].to_numpy(dtype=float) if truth else None
        given = np.array([c in df.columns and bool(np.isfinite(float(row[c])))
                          for c in sd_cols])
        out.append(Target(int(row["target_id"]), x_true,
                          {c: float(row[c]) for c in study.space.context_names}, z, ok,
                          None if plain else weights[k].copy(),
                          given if given.any() else None))
    if not out:
        raise DataError(source, "no targets")
    return out


def output_scale(mm: Any) -> np.ndarray:
    """Per-output divisor for Delta and delta: the metamodel's training-set std."""
    s = np.asarray(mm.y_std, dtype=float).reshape(-1)
    if s.shape[0] != len(mm.output_names):
        raise DataError("metamodel", f"y_std has {s.shape[0]} values for "
                        f"{len(mm.output_names)} outputs")
    return np.where(np.isfinite(s) & (s > 0), s, 1.0)


# --------------------------------------------------------------------------------------
# one target's calibration problem: budget accounting, simulation, OP
# --------------------------------------------------------------------------------------

class BudgetExceeded(RuntimeError):
    """A strategy asked for more runs than its budget (a bug, never user input)."""



#: candidates drawn per random run when a run-success classifier filters them
FAILURE_OVERSAMPLE = 4


@dataclass
class TargetRun:
    """Everything a strategy needs for one target; counts and logs every run."""

    study: Study
    mm: Any
    target: Target
    budget: int
    proximity: float
    settings: Mapping[str, Any]
    solver: Mapping[str, Any]
    seed: int
    strategy: str
    optimize_fn: OptimizeFn
    stream: str = ""
    anchor: np.ndarray | None = None   # precomputed full-space OP point (tunables)
    anchor_seconds: float = 0.0        # what solving it took (charged to this strategy)
    anchor_status: str = "precomputed"  # its solver status (anchors.csv), for trust flags
    threads: int = 1                   # parallel simulator runs per batch (command sims)
    #: per-run journal (a .jsonl path): finished runs are appended as they end, and a
    #: rerun of the same target replays them instead of simulating them again (a
    #: strategy is deterministic given its runs, so it asks for the same rows)
    journal: Path | None = None
    #: the open journal and the runs it held when opened (set on first use)
    _journal: Any = field(default=None, init=False, repr=False)
    _journal_held: dict[int, dict[str, Any]] = field(default_factory=dict, init=False,
                                                     repr=False)
    #: runs made before this job that a strategy may adopt (the study's simulated
    #: design: inputs, outputs, status; ``sequential.use_design``), else None
    given: pd.DataFrame | None = None
    #: runs kept aside beyond ``budget`` for the selection by mean (phase ``select``
    #: may spend them; the strategy sees only ``budget``), so no budget changes in place
    reserve: int = 0
    #: runs per journaled group (:meth:`_simulate_rows`); 0 until the first group
    _group: int = field(default=0, init=False, repr=False)
    runs: list[dict[str, Any]] = field(default_factory=list)
    op_calls: list[dict[str, Any]] = field(default_factory=list)
    sim_seconds: float = 0.0
    op_seconds: float = 0.0

    def __post_init__(self) -> None:
        self.stream = self.stream or self.strategy
        self.space = self.study.space
        self.out_names = list(self.mm.output_names)
        self._set_scale()
        self.rng = rng(self.seed, "calibrate", self.study.name, self.stream,
                       self.target.target_id)

    def _set_scale(self) -> None:
        base = output_scale(self.mm)
        w = self.target.weight
        # effective divisor d_j / w_j; a zero weight drops the output (inf divisor)
        self.scale = base if w is None else np.divide(
            base, w, out=np.full_like(base, np.inf), where=w > 0)
        self.op_weights = (None if w is None else
                           dict(zip(self.mm.output_names, np.asarray(w, float).tolist(),
                                    strict=True)))

    def rescale(self, old_base: np.ndarray) -> None:
        """The base scale (``mm.y_std``) changed from ``old_base`` (a study without a
        metamodel fixes it from its start runs, :mod:`.scale`): recompute the divisors
        (an output whose sd the target gives keeps it) and every run's Delta."""
        new = output_scale(self.mm)
        if self.target.sd_given is not None:
            w = self.target.weight if self.target.weight is not None else np.ones(len(new))
            ratio = np.where(self.target.sd_given, new / np.asarray(old_base, float), 1.0)
            self.target.weight = w * ratio
        self._set_scale()
        for r in self.runs:
            if np.isfinite(r["error"]):
                r["error"] = float(self.err(r["y"])[0])

    @property
    def scale_source(self) -> str:
        """What this target's Delta divides each output's misfit by, in words."""
        from simcalib.metamodel.strategies.scale import scale_source

        return scale_source(self.mm, self.target.sd_given)

    # ---- accounting --------------------------------------------------------
    @property
    def used(self) -> int:
        return len(self.runs)

    @property
    def left(self) -> int:
        return self.budget - self.used

    # ---- inputs ------------------------------------------------------------
    def frame(self, X: np.ndarray) -> pd.DataFrame:
        X = np.atleast_2d(np.asarray(X, dtype=float))
        df = pd.DataFrame(X, columns=self.space.tunable_names)
        for c in self.space.context_names:
            df[c] = self.target.context[c]
        return df[self.study.input_names]

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        return self.space.bounds(self.target.context)

    def box(self, anchor: np.ndarray, radius: float) -> tuple[np.ndarray, np.ndarray]:
        return self.space.proximity_box(anchor, radius, self.target.context)

    def sample(self, n: int, box: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """``n`` random points of ``box``.  With a run-success classifier (the
        metamodel's ``failure``) every strategy but ``rs`` (the baseline stays blind)
        draws :data:`FAILURE_OVERSAMPLE` times as many and keeps the first ``n``
        predicted to succeed, topped up in draw order when too few are."""
        if n <= 0:
            return np.zeros((0, len(self.space.tunable_names)))
        fm = getattr(self.mm, "failure", None)
        k = n * FAILURE_OVERSAMPLE if fm is not None and self.strategy != "rs" else n
        df = self.space.sample_tunables(k, self.rng, self.settings.get("sampling", "uniform"),
                                        self.target.context, box)
        X = df[self.space.tunable_names].to_numpy(dtype=float)
        if k == n:
            return X
        ok = fm.ok(self.frame(X)[fm.input_names].to_numpy(dtype=float))
        order = np.concatenate([np.flatnonzero(ok), np.flatnonzero(~ok)])
        return X[np.sort(order[:n]) if ok.sum() >= n else order[:n]]

    # ---- errors ------------------------------------------------------------
    def err(self, Y: np.ndarray) -> np.ndarray:
        Y = np.atleast_2d(np.asarray(Y, dtype=float))
        return (np.abs(Y - self.target.z) / self.scale).sum(axis=1)

    def predict(self, X: np.ndarray) -> np.ndarray:
        X = np.atleast_2d(np.asarray(X, dtype=float))
        if len(X) == 0:
            return np.zeros((0, len(self.out_names)))
        inp = self.frame(X)[list(self.mm.input_names)].to_numpy(dtype=float)
        return np.atleast_2d(np.asarray(self.mm.predict(inp), dtype=float))

    def predicted_error(self, X: np.ndarray, mm: Any = None) -> np.ndarray:
        if mm is None:
            return self.err(self.predict(X))
        inp = self.frame(X)[list(mm.input_names)].to_numpy(dtype=float)
        return self.err(np.asarray(mm.predict(inp), dtype=float))

    # ---- simulation --------------------------------------------------------
    def simulate(self, X: np.ndarray, phase: str) -> np.ndarray:
        """Real simulator runs of the rows of ``X``; returns Delta per row (inf for a
        failed run).  Every run is logged and counted, failed or not."""
        X = np.atleast_2d(np.asarray(X, dtype=float))
        if len(X) == 0:
            return np.zeros(0)
        room = self.left + (self.reserve if phase == "select" else 0)
        if len(X) > room:
            raise BudgetExceeded(f"{self.strategy}: {len(X)} runs asked, {room} left")
        rows = self.frame(X)
        rows.insert(0, "run_id", np.arange(self.used, self.used + len(X), dtype=np.int64))
        t0 = time.perf_counter()
        res = self._simulate_rows(rows)
        self.sim_seconds += time.perf_counter() - t0
        Y = res[self.out_names].to_numpy(dtype=float)
        return self._enter(X, Y, res["status"].to_numpy(), res["message"].to_numpy(),
                           (res["status"] == "ok").to_numpy(), phase)

    def _enter(self, X: np.ndarray, Y: np.ndarray, status: np.ndarray, message: np.ndarray,
               ok: np.ndarray, phase: str) -> np.ndarray:
        """Log runs as this target's next runs (ids from :attr:`used`) with their Delta
        (inf where not ``ok``); returns the Deltas.  One place for simulated and
        adopted runs alike."""
        errs = np.where(ok, self.err(np.where(ok[:, None], Y, 0.0)), np.inf)
        for i in range(len(X)):
            self.runs.append({"run_id": self.used, "phase": phase, "x": X[i].copy(),
                              "y": Y[i].copy(), "status": status[i], "message": message[i],
                              "error": float(errs[i])})
        return errs

    def adopt(self, rows: pd.DataFrame, phase: str) -> None:
        """Enter runs made before this job (rows of a simulated design at this target's
        context: inputs, outputs, ``status``) as this target's runs: counted against
        the budget and logged like its own, never simulated again.  Why: a strategy
        that starts from the study's design pays for those runs, so its run count
        compares fairly with a strategy that simulates its start."""
        if len(rows) > self.left:
            raise BudgetExceeded(f"{self.strategy}: {len(rows)} runs adopted, {self.left} left")
        X = rows[self.space.tunable_names].to_numpy(dtype=float)
        Y = rows[self.out_names].to_numpy(dtype=float)
        status = rows["status"].astype(str).to_numpy()
        msg = (rows["message"].fillna("").astype(str).to_numpy() if "message" in rows
               else np.full(len(rows), ""))
        self._enter(X, Y, status, msg, (status == "ok") & np.isfinite(Y).all(axis=1), phase)

    def close_journal(self) -> None:
        """fsync and close the target's journal (its runs stay replayable)."""
        if self._journal is not None:
            self._journal.close()
            self._journal = None

    def _simulate_rows(self, rows: pd.DataFrame) -> pd.DataFrame:
        """Simulator results of ``rows``; with a journal, the rows it holds (same run
        id, same inputs) are replayed and every new run is appended as it ends."""
        stream = f"calib:{self.stream}:{self.target.target_id}"
        if self.journal is None:
            # each run's seed derives from its run id: the same results at any thread count
            return simulate_rows(self.study, rows, self.seed, stream=stream,
                                 threads=self.threads)
        if self._journal is None:
            from simcalib.study.journal import Journal, fingerprint, program_digest
            from simcalib.study.simulation import FINGERPRINT_KEYS

            fp = fingerprint(
                self.study.name, {k: self.study.cfg.get(k) for k in FINGERPRINT_KEYS},
                self.seed, stream, pd.DataFrame(), program_digest(self.study.simulator))
            # opened once per target (read once, kept open): reopening and rereading it
            # for every run cost more than a cheap simulator's runs (issue 26, item 5)
            self._journal, self._journal_held = Journal.open(self.journal, fp, "run_id")
        names = self.study.input_names
        held = self._journal_held
        replay = []
        for _, row in rows.iterrows():
            rec = held.get(int(row["run_id"]))
            same = rec is not None and all(
                np.isclose(float(rec.get(f"in:{n}", np.nan)), float(row[n]), rtol=0,
                           atol=1e-12) for n in names)
            replay.append(rec if same else None)
        todo = rows[[r is None for r in replay]]
        parts = []
        # groups of ``threads`` runs, each journaled as it ends: a kill loses at most the
        # runs in flight, as in a design chunk.  A group that ends within GROUP_SECONDS
        # doubles the next one (a slower one halves it, down to ``threads``), so a
        # simulator of milliseconds is not called, and its frames built, once per run
        # (100 Rosenbrock runs: 0.2 -> 0.03 CPU s); a kill then loses at most about
        # GROUP_SECONDS of runs.  Seeds come from run ids: the grouping never changes a
        # result.
        least = max(1, self.threads)
        self._group = max(self._group, least)
        g = 0
        while g < len(todo):
            t0 = time.perf_counter()
            # simulate_rows, not run_chunk: a run that fails is data here (a strategy
            # may walk into a failing region), never a reason to stop the job
            part = simulate_rows(self.study, todo.iloc[g:g + self._group], self.seed,
                                 stream=stream, threads=self.threads)
            _journal_append(self._journal, part, names)
            parts.append(part)
            g += len(part)
            fast = time.perf_counter() - t0 < GROUP_SECONDS
            self._group = self._group * 2 if fast else max(least, self._group // 2)
        new = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
        if len(new) == len(rows):   # nothing replayed: the new runs, in rows order
            return new
        cols = [c for c in new.columns if c not in rows.columns] if len(new) else None
        out, k = [], 0
        for i, rec in enumerate(replay):
            if rec is None:
                out.append(new.iloc[k])
                k += 1
            else:
                r = rows.iloc[i].to_dict()
                r.update({c: v for c, v in rec.items() if not c.startswith("in:")
                          and c != "run_id"})
                out.append(pd.Series(r))
        res = pd.DataFrame(out).reset_index(drop=True)
        if cols is not None:
            for c in cols:
                if c not in res:
                    res[c] = np.nan
        return res

    def best_run(self, phase: str | None = None) -> dict[str, Any] | None:
        cand = [r for r in self.runs if (phase is None or r["phase"] == phase)
                and np.isfinite(r["error"])]
        return min(cand, key=lambda r: r["error"]) if cand else None

    # ---- OP ----------------------------------------------------------------
    def op(self, box: tuple[np.ndarray, np.ndarray] | None, label: str,
           mm: Any = None, shift: np.ndarray | None = None,
           weights: Mapping[str, float] | None = None, failure: Any = None,
           solver: Mapping[str, Any] | None = None, sample: bool = False) -> np.ndarray:
        """Minimise the (optionally offset-corrected) predicted error over ``box``.

        The solver seed depends on (study, target, label), not on the strategy, so
        op, pts and adaptive share one full-space OP point per target.

        ``shift`` is an output offset b (raw units) with S ~ M + b locally, so the
        corrected problem min |M(x) + b - z| is OP with target z - b.  A failed solve
        falls back to the best of 2000 metamodel evaluations in the box (logged).

        ``weights`` (objective weights by output) replace the target's; ``failure``
        (a run-success classifier) replaces ``mm.failure``; ``solver`` replaces the
        study's option set (the ``sequential`` strategy's per-proposal time limit).
        ``sample``: the solve proposes a run (Thompson sampling), it does not answer
        (counted in ``op_unproven`` like any solve)."""
        mm = self.mm if mm is None else mm
        z = self.target.z - (shift if shift is not None else 0.0)
        target = dict(zip(self.out_names, z.tolist(), strict=True))
        t0 = time.perf_counter()
        x, status = None, "error"
        try:
            w = self.op_weights if weights is None else weights
            kw: dict[str, Any] = {"weights": w} if w is not None else {}
            if failure is not None:
                kw["failure"] = failure
            res = self.optimize_fn(mm, self.space, target, self.target.context,
                                   self.solver if solver is None else solver,
                                   box=box, seed=int_seed(self.seed, "calibrate-op",
                                                          self.study.name,
                                                          self.target.target_id, label), **kw)
            status = str(getattr(res, "status", "ok"))
            x = _as_tunables(getattr(res, "x", None), self.space.tunable_names)
        except Exception as exc:  # noqa: BLE001 - a failed solve is data, recorded below
            log.warning("target %s: OP (%s) failed: %s", self.target.target_id, label, exc)
            status = f"error: {exc}"
        dt = time.perf_counter() - t0
        self.op_seconds += dt
        fallback = x is None or not np.isfinite(x).all()
        if fallback:
            Xc = self.space.sample_tunables(2000, rng(self.seed, "op-fallback", self.study.name,
                                                      self.target.target_id, label),
                                            "uniform", self.target.context, box)
            Xc = Xc[self.space.tunable_names].to_numpy(dtype=float)
            pe = (np.abs(self._predict_with(mm, Xc) - z) / self.scale).sum(axis=1)
            x = Xc[int(np.argmin(pe))]
        else:
            x = self.space.round_integers(x)
            if box is not None:
                x = np.clip(x, box[0], box[1])
            else:
                lo, hi = self.bounds()
                x = np.clip(x, lo, hi)
        self.op_calls.append({"label": label, "status": status, "fallback": bool(fallback),
                              "seconds": dt, "sample": bool(sample)})
        return x

    def _predict_with(self, mm: Any, X: np.ndarray) -> np.ndarray:
        inp = self.frame(X)[list(mm.input_names)].to_numpy(dtype=float)
        return np.atleast_2d(np.asarray(mm.predict(inp), dtype=float))

    def full_op(self) -> np.ndarray:
        """The full-space OP point: precomputed (``anchor``) or solved now."""
        if self.anchor is not None:
            self.op_calls.append({"label": "anchor", "status": self.anchor_status,
                                  "fallback": False, "seconds": self.anchor_seconds})
            self.op_seconds += self.anchor_seconds
            return np.asarray(self.anchor, dtype=float)
        return self.op(None, "full")


# OP statuses that prove the point optimal for the metamodel (anything else, e.g. a
# time limit or a fallback, is "unproven" and flagged in the records and summary)
PROVEN_STATUSES = ("optimal", "precomputed")


def op_time_limited(calls: Sequence[Mapping[str, Any]]) -> int:
    """How many OP solves the time limit stopped.  Why counted apart: a node limit
    stops a solve after fixed work, the same on any machine; a time limit stops it
    after a load-dependent amount, so a search whose proposals it stopped may propose
    other runs when rerun on another machine or at another load (measured: one
    ``epidemic_mean`` search of 128 runs at batch 4 ended at Delta 0.028 and 0.031 in
    two runs at load 7 and 4)."""
    return sum(str(c["status"]) == "time_limit" for c in calls)


def op_unproven(calls: Sequence[Mapping[str, Any]]) -> int:
    """How many OP solves of a target ended without a proof of optimality, those that
    only propose a run (``sample``: sequential's Thompson samples) included: the
    records count what the job's log and history count (a proposal stopped early is
    its incumbent, a weaker sample; the answer is still a simulated run)."""
    return sum(bool(c["fallback"]) or str(c["status"]) not in PROVEN_STATUSES for c in calls)


def _as_tunables(x: Any, names: Sequence[str]) -> np.ndarray | None:
    if x is None:
        return None
    if isinstance(x, Mapping):
        return np.array([float(x[n]) for n in names])
    if isinstance(x, pd.Series):
        return x[list(names)].to_numpy(dtype=float)
    arr = np.asarray(x, dtype=float).reshape(-1)
    return arr[: len(names)]



def choose(p: TargetRun, fallback_x: np.ndarray) -> tuple[np.ndarray, float, str]:
    """The best successful run so far (x, Delta, status), or ``fallback_x`` when every
    run failed."""
    best = p.best_run()
    if best is None:
        return fallback_x, float("nan"), "all_runs_failed"
    return best["x"], best["error"], "ok"


def _journal_append(jr: Any, res: pd.DataFrame, names: Sequence[str]) -> None:
    """Append finished runs (their inputs as ``in:<name>``) to a target's open journal
    (written through at once, fsync'd at most every 50 ms: :class:`Journal`)."""
    for _, row in res.iterrows():
        rec = {k: row[k] for k in res.columns if k not in names}
        rec.update({f"in:{n}": float(row[n]) for n in names})
        rec["run_id"] = int(row["run_id"])
        jr.append(rec)
