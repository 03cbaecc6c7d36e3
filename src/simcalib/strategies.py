"""Calibration strategies under a simulation budget (paper 1, "Methods"), plus an
adaptive multi-round strategy and a black-box baseline.

For one target (true inputs x*, context c, simulated outputs z) and a budget of r
simulation runs, every strategy returns one calibrated input vector x:

``rs``        r uniform runs over the bounds at c; the best by actual error.
``op``        the metamodel's optimum (MILP over the whole box); one run scores it.
``stp``       r - 1 uniform runs; OP inside the proximity box around the best of
              them; one run scores the OP point, which is the answer (paper: the OP
              point is chosen even when the RS anchor was better).  r runs in all.
``pts``       OP over the whole box; r uniform runs inside the proximity box around
              the OP point; the best by actual error.
``adaptive``  the paper's "future work": the r runs in rounds; after each round the
              metamodel is corrected on the target's own runs (a local output offset,
              optionally fine-tuning the network), OP is re-solved in a trust region
              around the best run so far, and the region grows on progress at its
              edge, shrinks without progress.  See docs/strategies.md.
``blackbox``  Optuna TPE (seeded) on the actual error, r trials (what Covasim/Starsim
              users do today).

Errors are on normalised outputs: each output divided by the metamodel's training-set
standard deviation (``Metamodel.y_std``), so ``error`` (actual, Delta) is
sum_j |S_j(x) - z_j| / s_j and ``predicted_error`` (delta) is sum_j |M_j(x) - z_j| / s_j.
``distance`` is the Euclidean distance between x and x* after
:meth:`Space.to_unit` (each input scaled to [0, 1] over its global bounds).

Simulation runs are real simulator calls (:func:`simcalib.simulation.simulate_rows`),
seeded from (seed, study, strategy, target, run index).  A failed run counts against
the budget, is kept in the run log and never chosen.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from simcalib.errors import ConfigError, DataError
from simcalib.seeds import int_seed, rng
from simcalib.simulation import simulate_rows
from simcalib.study import Study

log = logging.getLogger(__name__)

STRATEGIES: tuple[str, ...] = ("rs", "op", "stp", "pts", "adaptive", "blackbox")

#: Defaults of the ``calibration`` study section (the schema holds the same ones).
DEFAULTS: dict[str, Any] = {
    "budget": 100,
    "proximity": 0.05,
    "sampling": "uniform",
    "mc_samples": 0,
    "rescore": 0,
    "adaptive": {"rounds": 6, "grow": 1.5, "shrink": 0.5, "min_proximity": 0.001,
                 "update": "offset", "neighbours": 10, "epochs": 20},
    "blackbox": {"n_startup_trials": 10, "multivariate": True},
}

#: Smallest budget each strategy can work with.
MIN_BUDGET: dict[str, int] = {"rs": 1, "op": 1, "stp": 2, "pts": 1, "adaptive": 2,
                              "blackbox": 1}

OptimizeFn = Callable[..., Any]


# --------------------------------------------------------------------------------------
# settings
# --------------------------------------------------------------------------------------

def merged_settings(cfg: Mapping[str, Any] | None) -> dict[str, Any]:
    """``cfg`` over :data:`DEFAULTS` (one level deep for the nested sections)."""
    cfg = dict(cfg or {})
    out = {**DEFAULTS, **cfg}
    for sec in ("adaptive", "blackbox"):
        out[sec] = {**DEFAULTS[sec], **(cfg.get(sec) or {})}
    return out


def check_settings(strategy: str, budget: int, proximity: float, settings: Mapping[str, Any],
                   key: str = "calibration") -> None:
    """Bad input fails here, before any simulator run, with the key path."""
    if strategy not in STRATEGIES:
        raise ConfigError(f"{key}.strategies", f"unknown strategy {strategy!r}; "
                          f"use one of {list(STRATEGIES)}")
    if not isinstance(budget, int | np.integer) or budget < MIN_BUDGET[strategy]:
        raise ConfigError(f"{key}.budget", f"strategy {strategy!r} needs a budget of at least "
                          f"{MIN_BUDGET[strategy]} simulation run(s), got {budget}")
    if not (isinstance(proximity, int | float) and 0.0 < float(proximity) <= 1.0):
        raise ConfigError(f"{key}.proximity", f"must lie in (0, 1], got {proximity}")
    if strategy == "adaptive":
        a = settings["adaptive"]
        if int(a["rounds"]) < 1:
            raise ConfigError(f"{key}.adaptive.rounds", "must be >= 1")
        if not 0 < float(a["shrink"]) <= 1 or float(a["grow"]) < 1:
            raise ConfigError(f"{key}.adaptive", "need 0 < shrink <= 1 <= grow")
        if not 0 < float(a["min_proximity"]) <= 1:
            raise ConfigError(f"{key}.adaptive.min_proximity", "must lie in (0, 1]")
        if a["update"] not in ("offset", "fine_tune", "both", "none"):
            raise ConfigError(f"{key}.adaptive.update",
                              "use one of offset, fine_tune, both, none")


# --------------------------------------------------------------------------------------
# targets and metamodel compatibility
# --------------------------------------------------------------------------------------

@dataclass
class Target:
    target_id: int
    x_true: np.ndarray          # tunables, raw
    context: dict[str, float]
    z: np.ndarray               # outputs in the metamodel's output order
    ok: bool = True


def check_compatible(study: Study, mm: Any, source: str = "metamodel") -> None:
    """The metamodel must map exactly the study's inputs to the study's outputs."""
    if list(mm.input_names) != list(study.input_names):
        raise DataError(source, f"metamodel inputs {list(mm.input_names)} differ from the "
                        f"study's inputs {list(study.input_names)}")
    if sorted(mm.output_names) != sorted(study.outputs):
        raise DataError(source, f"metamodel outputs {list(mm.output_names)} differ from the "
                        f"study's outputs {list(study.outputs)}")


def read_targets(df: pd.DataFrame, study: Study, mm: Any, source: str = "targets") -> list[Target]:
    """Targets from a ``targets.csv`` table, outputs in the metamodel's order."""
    need = ["target_id", *study.input_names, *mm.output_names]
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise DataError(source, f"the target file does not match the metamodel: missing "
                        f"column(s) {missing} (metamodel outputs {list(mm.output_names)}, "
                        f"inputs {list(study.input_names)})")
    out = []
    status = df["status"].astype(str) if "status" in df else pd.Series("ok", index=df.index)
    for i, row in df.iterrows():
        z = row[list(mm.output_names)].to_numpy(dtype=float)
        ok = status.loc[i] == "ok" and bool(np.isfinite(z).all())
        out.append(Target(int(row["target_id"]),
                          row[study.space.tunable_names].to_numpy(dtype=float),
                          {c: float(row[c]) for c in study.space.context_names}, z, ok))
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


@dataclass
class Problem:
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
    runs: list[dict[str, Any]] = field(default_factory=list)
    op_calls: list[dict[str, Any]] = field(default_factory=list)
    sim_seconds: float = 0.0
    op_seconds: float = 0.0

    def __post_init__(self) -> None:
        self.stream = self.stream or self.strategy
        self.space = self.study.space
        self.scale = output_scale(self.mm)
        self.out_names = list(self.mm.output_names)
        self.rng = rng(self.seed, "calibrate", self.study.name, self.stream,
                       self.target.target_id)

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
        if n <= 0:
            return np.zeros((0, len(self.space.tunable_names)))
        df = self.space.sample_tunables(n, self.rng, self.settings.get("sampling", "uniform"),
                                        self.target.context, box)
        return df[self.space.tunable_names].to_numpy(dtype=float)

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
        if len(X) > self.left:
            raise BudgetExceeded(f"{self.strategy}: {len(X)} runs asked, {self.left} left")
        rows = self.frame(X)
        rows.insert(0, "run_id", np.arange(self.used, self.used + len(X), dtype=np.int64))
        t0 = time.perf_counter()
        res = simulate_rows(self.study, rows, self.seed,
                            stream=f"calib:{self.stream}:{self.target.target_id}")
        self.sim_seconds += time.perf_counter() - t0
        ok = (res["status"] == "ok").to_numpy()
        Y = res[self.out_names].to_numpy(dtype=float)
        errs = np.where(ok, self.err(np.where(ok[:, None], Y, 0.0)), np.inf)
        for i in range(len(X)):
            self.runs.append({"run_id": int(rows["run_id"].iloc[i]), "phase": phase,
                              "x": X[i].copy(), "y": Y[i].copy(), "status": res["status"].iloc[i],
                              "message": res["message"].iloc[i], "error": float(errs[i])})
        return errs

    def best_run(self, phase: str | None = None) -> dict[str, Any] | None:
        cand = [r for r in self.runs if (phase is None or r["phase"] == phase)
                and np.isfinite(r["error"])]
        return min(cand, key=lambda r: r["error"]) if cand else None

    # ---- OP ----------------------------------------------------------------
    def op(self, box: tuple[np.ndarray, np.ndarray] | None, label: str,
           mm: Any = None, shift: np.ndarray | None = None) -> np.ndarray:
        """Minimise the (optionally offset-corrected) predicted error over ``box``.

        The solver seed depends on (study, target, label), not on the strategy, so
        op, pts and adaptive share one full-space OP point per target.

        ``shift`` is an output offset b (raw units) with S ~ M + b locally, so the
        corrected problem min |M(x) + b - z| is OP with target z - b.  A failed solve
        falls back to the best of 2000 metamodel evaluations in the box (logged)."""
        mm = self.mm if mm is None else mm
        z = self.target.z - (shift if shift is not None else 0.0)
        target = dict(zip(self.out_names, z.tolist(), strict=True))
        t0 = time.perf_counter()
        x, status = None, "error"
        try:
            res = self.optimize_fn(mm, self.space, target, self.target.context, self.solver,
                                   box=box, seed=int_seed(self.seed, "calibrate-op",
                                                          self.study.name,
                                                          self.target.target_id, label))
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
                              "seconds": dt})
        return x

    def _predict_with(self, mm: Any, X: np.ndarray) -> np.ndarray:
        inp = self.frame(X)[list(mm.input_names)].to_numpy(dtype=float)
        return np.atleast_2d(np.asarray(mm.predict(inp), dtype=float))

    def full_op(self) -> np.ndarray:
        """The full-space OP point: precomputed (``anchor``) or solved now."""
        if self.anchor is not None:
            self.op_calls.append({"label": "anchor", "status": "precomputed",
                                  "fallback": False, "seconds": self.anchor_seconds})
            self.op_seconds += self.anchor_seconds
            return np.asarray(self.anchor, dtype=float)
        return self.op(None, "full")


def _as_tunables(x: Any, names: Sequence[str]) -> np.ndarray | None:
    if x is None:
        return None
    if isinstance(x, Mapping):
        return np.array([float(x[n]) for n in names])
    if isinstance(x, pd.Series):
        return x[list(names)].to_numpy(dtype=float)
    arr = np.asarray(x, dtype=float).reshape(-1)
    return arr[: len(names)]


# --------------------------------------------------------------------------------------
# the strategies: each returns (chosen x, info dict)
# --------------------------------------------------------------------------------------

def _choose(p: Problem, fallback_x: np.ndarray) -> tuple[np.ndarray, float, str]:
    best = p.best_run()
    if best is None:
        return fallback_x, float("nan"), "all_runs_failed"
    return best["x"], best["error"], "ok"


def strategy_rs(p: Problem) -> dict[str, Any]:
    X = p.sample(p.budget, p.bounds())
    p.simulate(X, "rs")
    x, e, status = _choose(p, X[0])
    return {"x": x, "error": e, "status": status, "anchor": X[0], "anchor_kind": "first_sample"}


def strategy_op(p: Problem) -> dict[str, Any]:
    x = p.full_op()
    e = p.simulate(x[None, :], "score")[0]
    return {"x": x, "error": e if np.isfinite(e) else float("nan"),
            "status": "ok" if np.isfinite(e) else "all_runs_failed", "anchor": x,
            "anchor_kind": "op"}


def strategy_stp(p: Problem) -> dict[str, Any]:
    X = p.sample(p.budget - 1, p.bounds())
    p.simulate(X, "rs")
    best = p.best_run("rs")
    anchor = best["x"] if best is not None else X[0]
    x = p.op(p.box(anchor, p.proximity), "stp")
    e = p.simulate(x[None, :], "score")[0]
    return {"x": x, "error": e if np.isfinite(e) else float("nan"),
            "status": "ok" if np.isfinite(e) else "all_runs_failed", "anchor": anchor,
            "anchor_kind": "rs_best", "anchor_error": best["error"] if best else float("nan")}


def strategy_pts(p: Problem) -> dict[str, Any]:
    anchor = p.full_op()
    X = p.sample(p.budget, p.box(anchor, p.proximity))
    p.simulate(X, "local")
    x, e, status = _choose(p, anchor)
    return {"x": x, "error": e, "status": status, "anchor": anchor, "anchor_kind": "op"}


def round_sizes(budget: int, rounds: int, min_size: int = 1) -> list[int]:
    """Split the budget into ``rounds`` near-equal parts (earlier rounds larger); a
    budget too small for ``rounds`` parts of ``min_size`` runs gets fewer parts."""
    rounds = max(1, min(rounds, budget // max(1, min_size)))
    base, extra = divmod(budget, rounds)
    return [base + (i < extra) for i in range(rounds)]


def _local_offset(p: Problem, centre: np.ndarray, mm: Any, k: int) -> np.ndarray:
    """Median residual S - M over the ``k`` successful runs nearest to ``centre``
    (unit-scaled distance): the metamodel's local bias, in raw output units."""
    ok = [r for r in p.runs if np.isfinite(r["error"])]
    if not ok:
        return np.zeros(len(p.out_names))
    X = np.array([r["x"] for r in ok])
    Y = np.array([r["y"] for r in ok])
    d = np.linalg.norm(p.space.to_unit(X) - p.space.to_unit(centre), axis=1)
    idx = np.argsort(d)[: max(1, k)]
    return np.median(Y[idx] - p._predict_with(mm, X[idx]), axis=0)


def _fine_tuned(p: Problem, mm: Any) -> Any:
    """Fine-tune a copy of the metamodel on this target's successful runs."""
    from simcalib.metamodel import fine_tune

    ok = [r for r in p.runs if np.isfinite(r["error"])]
    if not ok:
        return mm
    df = p.frame(np.array([r["x"] for r in ok]))
    for j, name in enumerate(p.out_names):
        df[name] = [r["y"][j] for r in ok]
    cfg = dict(p.settings.get("metamodel") or {})
    return fine_tune(mm, df, cfg, int_seed(p.seed, "calibrate-ft", p.study.name,
                                           p.target.target_id, len(ok)),
                     epochs=int(p.settings["adaptive"]["epochs"]))


def at_region_edge(x: np.ndarray, box: tuple[np.ndarray, np.ndarray],
                   bounds: tuple[np.ndarray, np.ndarray], margin: float = 0.1) -> bool:
    """Whether ``x`` lies in the outer ``margin`` of the trust region ``box`` on a side
    the optimum could lie beyond.  A side that is the input's global bound does not
    count (nothing lies outside it), nor does an input the box pins to one value (an
    integer input in a small box), which would otherwise count as "at the edge" always
    and make the region grow after every improvement."""
    lo, hi = box
    glo, ghi = bounds
    free = hi > lo
    span = np.where(free, hi - lo, 1.0)
    u = (np.asarray(x, dtype=float) - lo) / span
    low_side = free & (u < margin) & (lo > glo + 1e-12)
    high_side = free & (u > 1 - margin) & (hi < ghi - 1e-12)
    return bool(np.any(low_side | high_side))


def strategy_adaptive(p: Problem) -> dict[str, Any]:
    """Multi-round PtS with a corrected metamodel and a trust region (see module doc)."""
    a = p.settings["adaptive"]
    # two runs a round at least (the corrected OP point and one sample)
    sizes = round_sizes(p.budget, int(a["rounds"]), min_size=2)
    radius = float(p.proximity)
    op0 = p.full_op()
    anchor = op0
    mm = p.mm
    shift = np.zeros(len(p.out_names))
    history = []
    best_err = np.inf
    for k, n_k in enumerate(sizes):
        box = p.box(anchor, radius)
        if k == 0:
            # the OP point itself is run first: PtS never scores its anchor, but the
            # residual there is the most useful datum for the correction below
            X = np.vstack([op0[None, :], p.sample(n_k - 1, box)])
        else:
            x_op = p.op(box, f"adaptive{k}", mm=mm, shift=shift)
            X = np.vstack([x_op[None, :], p.sample(n_k - 1, box)])
        p.simulate(X, f"round{k}")
        best = p.best_run()
        improved = best is not None and best["error"] < best_err - 1e-12
        if best is not None:
            # grow when the best point sits at the edge of the region (the optimum may
            # lie outside), keep it on interior progress, shrink when nothing improved
            if improved and at_region_edge(best["x"], box, p.bounds()):
                radius = min(1.0, radius * float(a["grow"]))
            elif not improved:
                radius = max(float(a["min_proximity"]), radius * float(a["shrink"]))
            best_err = min(best_err, best["error"])
            anchor = best["x"]
        history.append(f"{k}:{n_k}:{radius:.4g}:{best_err:.4g}")
        if k + 1 < len(sizes) and best is not None:
            if a["update"] in ("fine_tune", "both"):
                mm = _fine_tuned(p, p.mm)
            if a["update"] in ("offset", "both"):
                shift = _local_offset(p, anchor, mm, int(a["neighbours"]))
    x, e, status = _choose(p, op0)
    return {"x": x, "error": e, "status": status, "anchor": op0, "anchor_kind": "op",
            "history": " ".join(history)}


def strategy_blackbox(p: Problem) -> dict[str, Any]:
    """Optuna TPE on the actual error, exactly ``budget`` simulator runs.  Proposals
    that break a linear constraint are told as failed without a run (no budget used);
    after 20 x budget such proposals the rest is filled with uniform feasible points."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    b = p.settings["blackbox"]
    sampler = optuna.samplers.TPESampler(
        seed=int_seed(p.seed, "blackbox", p.study.name, p.target.target_id) % (2**32),
        n_startup_trials=int(b["n_startup_trials"]), multivariate=bool(b["multivariate"]))
    study = optuna.create_study(direction="minimize", sampler=sampler)
    lo, hi = p.bounds()
    params = p.space.parameters
    first = None
    rejected = 0
    while p.left > 0 and rejected < 20 * p.budget:
        trial = study.ask()
        x = np.empty(len(params))
        for j, par in enumerate(params):
            if par.integer:
                x[j] = trial.suggest_int(par.name, int(np.ceil(lo[j] - 1e-9)),
                                         int(np.floor(hi[j] + 1e-9)))
            else:
                x[j] = trial.suggest_float(par.name, float(lo[j]), float(hi[j]), log=par.log)
        if p.space.constraints and not p.space.feasible(p.frame(x[None, :]))[0]:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            rejected += 1
            continue
        e = p.simulate(x[None, :], "tpe")[0]
        first = x if first is None else first
        if np.isfinite(e):
            study.tell(trial, float(e))
        else:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
    if p.left > 0:
        p.simulate(p.sample(p.left, p.bounds()), "fill")
    first = first if first is not None else p.runs[0]["x"]
    x, e, status = _choose(p, first)
    return {"x": x, "error": e, "status": status, "anchor": first,
            "anchor_kind": "first_trial"}


STRATEGY_FNS: dict[str, Callable[[Problem], dict[str, Any]]] = {
    "rs": strategy_rs, "op": strategy_op, "stp": strategy_stp, "pts": strategy_pts,
    "adaptive": strategy_adaptive, "blackbox": strategy_blackbox,
}


# --------------------------------------------------------------------------------------
# running a strategy over all targets
# --------------------------------------------------------------------------------------

def default_optimize() -> OptimizeFn:
    from simcalib.milp import optimize

    return optimize


def calibrate_target(study: Study, mm: Any, target: Target, strategy: str, budget: int,
                     proximity: float, settings: Mapping[str, Any], solver: Mapping[str, Any],
                     seed: int, optimize_fn: OptimizeFn | None = None,
                     anchor: np.ndarray | None = None, stream: str | None = None,
                     anchor_seconds: float = 0.0
                     ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run one strategy on one target.  Returns (record, run log rows)."""
    settings = merged_settings(settings)
    check_settings(strategy, int(budget), float(proximity), settings)
    # op needs one scoring run whatever the budget; every other strategy uses exactly r
    eff_budget = 1 if strategy == "op" else int(budget)
    p = Problem(study, mm, target, eff_budget, float(proximity), settings, solver, seed,
                strategy, optimize_fn or default_optimize(), stream=stream or strategy,
                anchor=anchor, anchor_seconds=float(anchor_seconds) if anchor is not None else 0.0)
    names = study.space.tunable_names
    rec: dict[str, Any] = {"target_id": target.target_id, "strategy": strategy,
                           "budget": int(budget), "proximity": float(proximity)}
    t0 = time.perf_counter()
    if not target.ok:
        out = {"x": np.full(len(names), np.nan), "error": float("nan"),
               "status": "target_failed", "anchor": np.full(len(names), np.nan),
               "anchor_kind": ""}
    else:
        out = STRATEGY_FNS[strategy](p)
        if p.used > eff_budget:  # pragma: no cover - guarded by Problem.simulate
            raise BudgetExceeded(f"{strategy} used {p.used} > {eff_budget}")
    # a precomputed anchor's solve time is charged to every strategy that uses it
    seconds = time.perf_counter() - t0 + (p.anchor_seconds if any(
        c["label"] == "anchor" for c in p.op_calls) else 0.0)
    x = np.asarray(out["x"], dtype=float)
    chosen = next((r for r in p.runs if np.array_equal(r["x"], x) and np.isfinite(r["error"])),
                  None)
    pred = p.predict(x[None, :])[0] if np.isfinite(x).all() else np.full(len(p.out_names),
                                                                         np.nan)
    anc = np.asarray(out["anchor"], dtype=float)
    rec.update({
        "status": out["status"],
        "error": float(out["error"]),
        "predicted_error": float(p.err(pred)[0]) if np.isfinite(pred).all() else float("nan"),
        "distance": float(np.linalg.norm(study.space.to_unit(x)
                                         - study.space.to_unit(target.x_true))),
        "runs": p.used,
        "failed_runs": sum(r["status"] != "ok" for r in p.runs),
        "op_solves": sum(c["label"] != "anchor" for c in p.op_calls),
        "op_fallbacks": sum(c["fallback"] for c in p.op_calls),
        "anchor_kind": out["anchor_kind"],
        "anchor_predicted_error": (float(p.predicted_error(anc[None, :])[0])
                                   if np.isfinite(anc).all() else float("nan")),
        "anchor_distance": (float(np.linalg.norm(study.space.to_unit(anc)
                                                 - study.space.to_unit(target.x_true)))
                            if np.isfinite(anc).all() else float("nan")),
        "seconds": round(seconds, 4),
        "sim_seconds": round(p.sim_seconds, 4),
        "op_seconds": round(p.op_seconds, 4),
        "history": out.get("history", ""),
    })
    k = int(settings.get("rescore", 0) or 0)
    if k > 0:
        rec["rescored_error"] = rescore(study, mm, target, x, k, seed, p.scale)
    n_mc = int(settings.get("mc_samples", 0) or 0)
    if n_mc > 0 and hasattr(mm, "predict_mc") and np.isfinite(x).all():
        # MC-dropout predictive spread at the chosen point (paper 1, Appendix F)
        inp = p.frame(x[None, :])[list(mm.input_names)].to_numpy(dtype=float)
        _, sd = mm.predict_mc(inp, n_mc, int_seed(seed, "mc", study.name, target.target_id))
        rec["mc_sd"] = float((np.asarray(sd, dtype=float).reshape(-1) / p.scale).sum())
    for c, v in target.context.items():
        rec[c] = v
    for j, n in enumerate(names):
        rec[f"x_{n}"] = float(x[j])
        rec[f"true_{n}"] = float(target.x_true[j])
        rec[f"anchor_{n}"] = float(anc[j])
    for j, n in enumerate(p.out_names):
        rec[f"target_{n}"] = float(target.z[j])
        rec[f"sim_{n}"] = float(chosen["y"][j]) if chosen is not None else float("nan")
        rec[f"pred_{n}"] = float(pred[j])
    runs = []
    for r in p.runs:
        row = {"target_id": target.target_id, "strategy": strategy,
               "proximity": float(proximity), "run_id": r["run_id"], "phase": r["phase"],
               "status": r["status"], "message": r["message"], "error": r["error"]}
        row.update({n: float(v) for n, v in zip(names, r["x"], strict=True)})
        row.update({n: float(v) for n, v in zip(p.out_names, r["y"], strict=True)})
        runs.append(row)
    return rec, runs


def rescore(study: Study, mm: Any, target: Target, x: np.ndarray, k: int, seed: int,
            scale: np.ndarray) -> float:
    """Mean Delta of ``k`` fresh simulator runs at ``x`` (outside the budget; never used
    to choose).  For a stochastic simulator the chosen run's own Delta is biased low
    (the best of r noisy runs is partly lucky noise); this is the unbiased score.
    The replicate seeds depend on (study, target, replicate) only, so every strategy
    is re-scored with common random numbers."""
    if not (target.ok and np.isfinite(x).all()):
        return float("nan")
    rows = pd.DataFrame(np.repeat(np.asarray(x, dtype=float)[None, :], k, axis=0),
                        columns=study.space.tunable_names)
    for c in study.space.context_names:
        rows[c] = target.context[c]
    rows.insert(0, "run_id", np.arange(k, dtype=np.int64))
    res = simulate_rows(study, rows, seed, stream=f"rescore:{target.target_id}")
    ok = (res["status"] == "ok").to_numpy()
    if not ok.any():
        return float("nan")
    Y = res.loc[ok, list(mm.output_names)].to_numpy(dtype=float)
    return float((np.abs(Y - target.z) / scale).sum(axis=1).mean())


def calibrate(study: Study, mm: Any, targets: pd.DataFrame, strategy: str,
              settings: Mapping[str, Any], solver: Mapping[str, Any], seed: int,
              proximity: float | None = None, optimize_fn: OptimizeFn | None = None,
              anchors: pd.DataFrame | None = None, source: str = "targets",
              stream: str | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One strategy on every target of ``targets``: (per-target records, run log)."""
    check_compatible(study, mm)
    settings = merged_settings(settings)
    prox = float(settings["proximity"] if proximity is None else proximity)
    check_settings(strategy, int(settings["budget"]), prox, settings)
    tlist = read_targets(targets, study, mm, source)
    anchor_of = _anchor_map(anchors, study) if anchors is not None else {}
    anchor_sec = ({int(r["target_id"]): float(r["seconds"]) for _, r in anchors.iterrows()}
                  if anchors is not None and "seconds" in anchors else {})
    records, runs = [], []
    for t in tlist:
        rec, rlog = calibrate_target(study, mm, t, strategy, int(settings["budget"]), prox,
                                     settings, solver, seed, optimize_fn,
                                     anchor=anchor_of.get(t.target_id), stream=stream,
                                     anchor_seconds=anchor_sec.get(t.target_id, 0.0))
        log.info("%s %s target %d: error %.4g (predicted %.4g), %d runs, %.2f s",
                 study.name, strategy, t.target_id, rec["error"], rec["predicted_error"],
                 rec["runs"], rec["seconds"])
        records.append(rec)
        runs.extend(rlog)
    return pd.DataFrame(records), pd.DataFrame(runs)


def _anchor_map(anchors: pd.DataFrame, study: Study) -> dict[int, np.ndarray]:
    names = study.space.tunable_names
    missing = [c for c in ["target_id", *(f"x_{n}" for n in names)] if c not in anchors]
    if missing:
        raise DataError("anchors", f"missing column(s) {missing}")
    return {int(r["target_id"]): np.array([float(r[f"x_{n}"]) for n in names])
            for _, r in anchors.iterrows() if all(np.isfinite(r[f"x_{n}"]) for n in names)}


def compute_anchors(study: Study, mm: Any, targets: pd.DataFrame, solver: Mapping[str, Any],
                    seed: int, optimize_fn: OptimizeFn | None = None,
                    source: str = "targets") -> pd.DataFrame:
    """The full-space OP point of every target (shared by op, pts, adaptive and the
    proximity sweep, so the MILP is solved once per target)."""
    check_compatible(study, mm)
    settings = merged_settings({})
    rows = []
    for t in read_targets(targets, study, mm, source):
        p = Problem(study, mm, t, 0, 1.0, settings, solver, seed, "op",
                    optimize_fn or default_optimize())
        if t.ok:
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
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------
# summaries
# --------------------------------------------------------------------------------------

SUMMARY_COLUMNS = ["strategy", "median_error", "mean_error", "reduction_vs_rs",
                   "median_reduction_vs_rs", "runs", "targets", "failed_targets",
                   "failed_runs", "median_predicted_error", "mean_predicted_error",
                   "median_distance", "mean_seconds"]


def summarize(records: Mapping[str, pd.DataFrame], baseline: str = "rs") -> pd.DataFrame:
    """One row per strategy (in :data:`STRATEGIES` order, then others).

    ``reduction_vs_rs`` = 1 - mean_error / mean_error(rs) (0.46 means 46 % below RS);
    ``median_reduction_vs_rs`` the same on medians; ``runs`` the mean runs per target.
    Errors of failed targets are NaN and left out of the statistics but counted in
    ``failed_targets``."""
    order = [s for s in STRATEGIES if s in records] + [s for s in records
                                                       if s not in STRATEGIES]
    rows = []
    for s in order:
        df = records[s]
        e = df["error"].to_numpy(dtype=float)
        pe = df["predicted_error"].to_numpy(dtype=float)
        rows.append({
            "strategy": s,
            "median_error": float(np.nanmedian(e)) if np.isfinite(e).any() else np.nan,
            "mean_error": float(np.nanmean(e)) if np.isfinite(e).any() else np.nan,
            "runs": float(df["runs"].mean()),
            "targets": int(len(df)),
            "failed_targets": int((~np.isfinite(e)).sum()),
            "failed_runs": int(df["failed_runs"].sum()),
            "median_predicted_error": float(np.nanmedian(pe)) if np.isfinite(pe).any()
            else np.nan,
            "mean_predicted_error": float(np.nanmean(pe)) if np.isfinite(pe).any() else np.nan,
            "median_distance": float(np.nanmedian(df["distance"])),
            "mean_seconds": float(df["seconds"].mean()),
        })
        if "rescored_error" in df:
            re_ = df["rescored_error"].to_numpy(dtype=float)
            rows[-1]["median_rescored_error"] = (float(np.nanmedian(re_))
                                                 if np.isfinite(re_).any() else np.nan)
            rows[-1]["mean_rescored_error"] = (float(np.nanmean(re_))
                                               if np.isfinite(re_).any() else np.nan)
    out = pd.DataFrame(rows)
    base = out[out["strategy"] == baseline]
    if len(base):
        m, md = float(base["mean_error"].iloc[0]), float(base["median_error"].iloc[0])
        out["reduction_vs_rs"] = 1.0 - out["mean_error"] / m if m > 0 else np.nan
        out["median_reduction_vs_rs"] = 1.0 - out["median_error"] / md if md > 0 else np.nan
    else:
        out["reduction_vs_rs"] = np.nan
        out["median_reduction_vs_rs"] = np.nan
    extra = [c for c in ("median_rescored_error", "mean_rescored_error") if c in out]
    return out[SUMMARY_COLUMNS + extra]


def sweep_summary(records: Mapping[float, pd.DataFrame]) -> pd.DataFrame:
    """PtS over proximity values: one row per R (reduction vs R = 1, i.e. RS-like)."""
    rows = []
    for r in sorted(records):
        e = records[r]["error"].to_numpy(dtype=float)
        rows.append({"proximity": float(r), "median_error": float(np.nanmedian(e)),
                     "mean_error": float(np.nanmean(e)),
                     "q25_error": float(np.nanquantile(e, 0.25)),
                     "q75_error": float(np.nanquantile(e, 0.75)),
                     "median_distance": float(np.nanmedian(records[r]["distance"])),
                     "runs": float(records[r]["runs"].mean()), "targets": int(len(e))})
        if "rescored_error" in records[r]:
            re_ = records[r]["rescored_error"].to_numpy(dtype=float)
            rows[-1]["median_rescored_error"] = float(np.nanmedian(re_))
            rows[-1]["mean_rescored_error"] = float(np.nanmean(re_))
    out = pd.DataFrame(rows)
    if len(out):
        best = out["median_error"].idxmin()
        out["best"] = out.index == best
    return out


# --------------------------------------------------------------------------------------
# config checks a schema cannot express
# --------------------------------------------------------------------------------------

def _register_check() -> None:
    from simcalib.config import semantic_check

    @semantic_check
    def check_calibration(config: Mapping[str, Any]) -> None:
        """Budgets large enough for every listed strategy, extra target sets and noise
        studies that exist, noise studies with the same inputs and outputs."""
        studies = config.get("studies") or {}
        for name, cfg in studies.items():
            cal = cfg.get("calibration") or {}
            if not cal.get("enabled", False):
                continue
            key = f"studies.{name}.calibration"
            settings = merged_settings(cal)
            for s in {*settings.get("strategies", STRATEGIES),
                      *(settings.get("extra_strategies") or [])}:
                check_settings(s, int(settings["budget"]), float(settings["proximity"]),
                               settings, key)
            for r in settings.get("sweep") or []:
                check_settings("pts", int(settings["budget"]), float(r), settings,
                               f"{key}.sweep")
            if not (cfg.get("metamodel") or {}).get("enabled", False):
                raise ConfigError(key, "calibration needs the study's metamodel (add a "
                                  "'metamodel' section with enabled: true)")
            for which in settings.get("extra_targets") or []:
                if which not in (cfg.get("extra_targets") or {}):
                    raise ConfigError(f"{key}.extra_targets", f"{which!r} is not one of the "
                                      f"study's extra_targets "
                                      f"{sorted(cfg.get('extra_targets') or {})}")
            for other in settings.get("noise_studies") or []:
                if other not in studies or other == name:
                    raise ConfigError(f"{key}.noise_studies", f"{other!r} is not another "
                                      f"study; have {sorted(studies)}")
                ocfg = studies[other]
                if not (ocfg.get("calibration") or {}).get("enabled", False) or \
                        "pts" not in (ocfg["calibration"].get("strategies") or STRATEGIES):
                    raise ConfigError(f"{key}.noise_studies", f"study {other!r} must enable "
                                      "calibration with the pts strategy")
                if (list(ocfg.get("parameters", {})) != list(cfg.get("parameters", {}))
                        or list(ocfg.get("contexts", {}) or {})
                        != list(cfg.get("contexts", {}) or {})):
                    raise ConfigError(f"{key}.noise_studies", f"study {other!r} must have the "
                                      f"same parameters and contexts as {name!r}")


_register_check()
