"""Calibrating to a curve (issue 42, Goal 1): ``sequential`` on the epidemic's daily
case curve against Optuna's TPE (``blackbox``) and GP-BO (``gpbo``) on the same curve
misfit, and against ``sequential`` on four hand-picked scalar summaries of the curve.

Setting: the stochastic epidemic (population 500,000, 2 replicates a run), the case
curve observed every 4th day, days 4..160 (40 points: the epidemics of the box peak
between day 55 and 140); one observed curve per target (one stochastic run at hidden
true inputs); one target per search; equal total runs N (64 / 128 / 256) for every
method.  Targets: the seed's held-out targets (``make_targets``) whose observed curve
holds an epidemic (4 x the sum of its points >= 1 % of the population: a flat curve
identifies nothing, and every method would be scored on noise).

Methods (each N runs in all, its own start included):

* ``seq_curve``: ``sequential`` on the 40 points (its ensemble on the curve's basis
  weights, the decode folded into the last layer: :mod:`simcalib.metamodel.ensemble`);
* ``tpe`` / ``gpbo``: the ``blackbox`` and ``gpbo`` strategies on the same Delta, one
  anytime run per target read at each N (neither looks at its budget);
* ``seq_summary``: ``sequential`` on four summaries computed from the same curve
  (peak day and peak height on the observed grid, the cumulative cases 4 x sum of the
  points, the cases on day 60), observed = the summaries of the observed curve.

Delta of the curve: sum over the points of |S_t - z_t| / s, each point weighted 1/m
(the curve counts as one output), s one scale for the series (the root mean of the
points' variances over a 256-run Sobol design of the seed, outside every budget; the
summaries get their own sds the same way).  Reported per (method, N):

* ``rescored``: the answer's curve Delta re-scored on ``--rescore`` fresh replicates
  (common random numbers across methods), beside ``floor``: the same re-scoring at
  the true inputs (the misfit of fresh runs at the truth, the best any answer can
  expect), and their ratio;
* ``dist_<input>``: |answer - truth| / the input's range, per input, and their mean;
* with ``--posterior``: the ``sequential`` posterior's "pinned down" column per input
  (:func:`simcalib.metamodel.posterior.sequential_posterior` on the run log).

    python benchmarks/curve_peers.py --quick     # 1 seed x 3 targets, N 64 and 128
    python benchmarks/curve_peers.py             # 3 seeds x 5 targets, N 64 128 256

Writes ``results/benchmarks/curve_peers_runs.csv`` (one row per seed, target, method
and N; rewritten after every cell, so a killed run keeps what it finished),
``curve_peers.csv`` (medians per method and N) and ``curve_peers.json`` (the settings
and the summary).
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from breakeven import ScaleOnly, TimedRun  # noqa: E402

from simcalib import io  # noqa: E402
from simcalib.metamodel.strategies import calibrate, get  # noqa: E402
from simcalib.metamodel.strategies.ledger import read_targets  # noqa: E402
from simcalib.metamodel.strategies.runner import default_optimize, rescore  # noqa: E402
from simcalib.metamodel.strategies.settings import merged_settings  # noqa: E402
from simcalib.seeds import rng  # noqa: E402
from simcalib.simulators import epidemic  # noqa: E402
from simcalib.study import Study  # noqa: E402
from simcalib.study.simulation import make_targets, simulate_rows  # noqa: E402

OUT = ROOT / "results" / "benchmarks"
DAYS = list(range(4, 161, 4))
MID_DAY = 60
SCALE_RUNS = 256
#: an observed curve holds an epidemic when its cumulative cases reach this share
MIN_ATTACK = 0.01
OPTIONS = {"population": 500000, "replicates": 2}
PARAMETERS = {"R0": {"lower": 1.0, "upper": 2.5},
              "vaccinationfraction": {"lower": 0.5, "upper": 1.0},
              "responsedelay": {"lower": 5, "upper": 10, "integer": True},
              "ascertainmentdelay": {"lower": 1, "upper": 5, "integer": True},
              "ascertainmentfraction": {"lower": 0.4, "upper": 0.8},
              "vaccinedosesdaily": {"lower": 390, "upper": 760, "integer": True}}
SUMMARIES = ["peak_day", "peak_height", "cumulative", "cases_mid"]
SOLVER = {"backend": "highs"}


def summaries(curves: np.ndarray) -> np.ndarray:
    """(n, 40) curves on :data:`DAYS` -> (n, 4) summaries (module doc)."""
    c = np.atleast_2d(np.asarray(curves, dtype=float))
    days = np.asarray(DAYS, dtype=float)
    return np.column_stack([days[np.argmax(c, axis=1)], c.max(axis=1), 4.0 * c.sum(axis=1),
                            c[:, DAYS.index(MID_DAY)]])


def summary_simulator(inputs: pd.DataFrame, seeds: np.ndarray) -> pd.DataFrame:
    """The epidemic reduced to :data:`SUMMARIES` of its case curve on :data:`DAYS`."""
    opts = epidemic.EpidemicOptions(**OPTIONS)
    _, curves = epidemic.simulate_batch_curves(inputs.reset_index(drop=True), opts,
                                               np.asarray(seeds))
    s = summaries(curves[:, np.asarray(DAYS) - 1])
    return pd.DataFrame(s, columns=SUMMARIES, index=inputs.index)


def curve_study(n_targets: int) -> Study:
    return Study("epi_curve", {
        "simulator": {"type": "epidemic", "options": dict(OPTIONS)},
        "parameters": PARAMETERS, "series": {"cases": {"index": "day", "points": DAYS}},
        "targets": {"n": n_targets}})


def summary_study() -> Study:
    return Study("epi_summary", {
        "simulator": {"type": "python", "options": {"function": summary_simulator}},
        "parameters": PARAMETERS, "outputs": SUMMARIES, "noise": {"stochastic": True}})


def scale_of(study: Study, seed: int, cols: list[str], series: bool) -> np.ndarray:
    """Delta's scale for the seed: the sd over a Sobol design (one per series)."""
    d = study.space.design(SCALE_RUNS, rng(seed, "design", study.name), "sobol")
    d.insert(0, "run_id", np.arange(len(d), dtype=np.int64))
    sim = simulate_rows(study, d, seed)
    Y = sim.loc[sim["status"] == "ok", cols].to_numpy(dtype=float)
    sd = Y.std(axis=0)
    if series:
        sd = np.full_like(sd, np.sqrt(np.mean(sd**2)))
    return np.where(sd > 0, sd, 1.0)


def observed_targets(study: Study, seed: int, n: int) -> pd.DataFrame:
    """The first ``n`` held-out targets whose observed curve holds an epidemic."""
    tdf = simulate_rows(study, make_targets(study, seed), seed, stream="targets:targets",
                        id_column="target_id")
    tdf = tdf[tdf["status"] == "ok"].reset_index(drop=True)
    cum = summaries(tdf[study.outputs].to_numpy(dtype=float))[:, 2]
    return tdf[cum >= MIN_ATTACK].head(n).reset_index(drop=True)


def sequential_answer(study: Study, mm: Any, tdf: pd.DataFrame, N: int, seed: int
                      ) -> tuple[np.ndarray, pd.Series, pd.DataFrame, float]:
    settings = merged_settings({"budget": N, "strategies": ["sequential"], "rescore": 0,
                                "select": {"top": 0}})
    t0 = time.process_time()
    rec, runs = calibrate(study, mm, tdf, "sequential", settings, SOLVER, seed)
    r = rec.iloc[0]
    x = np.array([r[f"x_{n}"] for n in study.space.tunable_names], dtype=float)
    return x, r, runs, time.process_time() - t0


def pinned(study: Study, rec: pd.Series, runs: pd.DataFrame, tdf: pd.DataFrame, seed: int
           ) -> dict[str, Any]:
    """The sequential posterior's "pinned down" column per input (empty on failure,
    with the error in ``posterior_error``)."""
    try:
        from simcalib.metamodel.posterior import sequential_posterior

        post = sequential_posterior(study, runs, tdf, records=rec.to_frame().T, seed=seed)
        tab = post.summary
        # the posterior's "pinned down" column is ``identified`` (posterior/summary.py)
        return {f"pinned_{n}": bool(tab.loc[tab["input"] == n, "identified"].iloc[0])
                for n in study.space.tunable_names}
    except Exception as exc:  # noqa: BLE001 - reported in the table, never hidden
        return {"posterior_error": f"{type(exc).__name__}: {exc}"[:300]}


def run_seed(seed: int, n_targets: int, totals: list[int], methods: list[str],
             k_rescore: int, posterior: bool, rows: list[dict[str, Any]], flush: Any,
             log: logging.Logger, only: int | None = None) -> None:
    cs, ss = curve_study(4 * n_targets + 8), summary_study()
    c_scale = scale_of(cs, seed, cs.outputs, True)
    s_scale = scale_of(ss, seed, ss.outputs, False)
    cmm, smm = ScaleOnly(cs, c_scale), ScaleOnly(ss, s_scale)
    tdf = observed_targets(cs, seed, n_targets)
    targets = read_targets(tdf, cs, cmm)
    names = cs.space.tunable_names
    span = np.array([PARAMETERS[n]["upper"] - PARAMETERS[n]["lower"] for n in names])
    for i, t in enumerate(targets):
        if only is not None and i != only:
            continue
        floor = rescore(cs, cmm, t, t.x_true, k_rescore, seed, c_scale)
        sdf = pd.DataFrame(summaries(tdf.loc[[i], cs.outputs].to_numpy(float)),
                           columns=SUMMARIES)
        sdf.insert(0, "target_id", t.target_id)

        def add(method: str, N: int, x: np.ndarray, own: float, cpu: float,
                extra: dict[str, Any] | None = None, t: Any = t, floor: float = floor
                ) -> None:
            d = np.abs(x - t.x_true) / span
            sc = rescore(cs, cmm, t, x, k_rescore, seed, c_scale)
            rows.append({"seed": seed, "target_id": t.target_id, "method": method, "N": N,
                         "own_error": own, "rescored": sc, "floor": floor,
                         "ratio": sc / floor, "mean_dist": float(d.mean()),
                         **{f"dist_{n}": float(v) for n, v in zip(names, d, strict=True)},
                         **{f"true_{n}": float(v) for n, v in zip(names, t.x_true,
                                                                   strict=True)},
                         **{f"x_{n}": float(v) for n, v in zip(names, x, strict=True)},
                         "cpu_s": round(cpu, 2), **(extra or {})})
            flush()
            log.info("seed %d target %d %s N=%d: re-scored %.4g (floor %.4g), mean dist "
                     "%.3f, %.0f CPU-s", seed, t.target_id, method, N, sc, floor,
                     d.mean(), cpu)

        for N in totals:
            if "seq_curve" in methods:
                x, r, runs, cpu = sequential_answer(cs, cmm, tdf.loc[[i]], N, seed)
                hist = str(r["history"])
                m = re.search(r"series cases: (\d+) basis components .*?reconstruction "
                              r"error ([0-9.e+-]+) of its scale", hist)
                extra = {"components": int(m.group(1)) if m else np.nan,
                         "basis_error": float(m.group(2)) if m else np.nan}
                if posterior:
                    extra.update(pinned(cs, r, runs, tdf.loc[[i]], seed))
                add("seq_curve", N, x, float(r["error"]), cpu, extra)
            if "seq_summary" in methods:
                x, r, runs, cpu = sequential_answer(ss, smm, sdf, N, seed)
                extra = pinned(ss, r, runs, sdf, seed) if posterior else {}
                add("seq_summary", N, x, float(r["error"]), cpu, extra)
        for m, strat in (("tpe", "blackbox"), ("gpbo", "gpbo")):
            if m not in methods:
                continue
            B = max(totals)
            t0 = time.process_time()
            p = TimedRun(cs, cmm, t, B, 0.05, merged_settings({"budget": B, "rescore": 0}),
                         SOLVER, seed, strat, default_optimize())
            get(strat).fn(p)
            errs = np.array([q["error"] for q in p.runs])
            for N in totals:
                e = np.where(np.isfinite(errs[:N]), errs[:N], np.inf)
                j = int(np.argmin(e))
                add(m, N, np.asarray(p.runs[j]["x"], float), float(errs[j]), p.cpu[N - 1]
                    if hasattr(p, "cpu") else time.process_time() - t0)


def summary(df: pd.DataFrame) -> pd.DataFrame:
    dist = [c for c in df.columns if c.startswith("dist_")]
    pin = [c for c in df.columns if c.startswith("pinned_")]
    agg = {"rescored": "median", "floor": "median", "ratio": "median", "mean_dist": "median",
           **{c: "median" for c in ("components", "basis_error") if c in df},
           **dict.fromkeys(dist, "median"), **dict.fromkeys(pin, "mean"), "cpu_s": "median",
           "target_id": "count"}
    out = df.groupby(["N", "method"]).agg(agg).rename(columns={"target_id": "cells"})
    return out.reset_index()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 seed x 3 targets, N 64 and 128")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--targets", type=int, default=5)
    ap.add_argument("--totals", type=int, nargs="+", default=[64, 128, 256])
    ap.add_argument("--methods", nargs="+",
                    default=["seq_curve", "seq_summary", "tpe", "gpbo"])
    ap.add_argument("--rescore", type=int, default=10)
    ap.add_argument("--posterior", action="store_true",
                    help="the sequential posterior's pinned-down column (~1 CPU-min a cell)")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--target-index", type=int, default=None,
                    help="run only the i-th target of each seed (processes side by side: "
                    "each writes its own runs file; then --merge)")
    ap.add_argument("--merge", action="store_true",
                    help="only summarise the runs files already written")
    a = ap.parse_args(argv)
    if a.quick:
        a.seeds, a.targets, a.totals = [0], 3, [64, 128]
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("simcalib").setLevel(logging.WARNING)
    log = logging.getLogger("curve_peers")
    a.out.mkdir(parents=True, exist_ok=True)
    tag = "_quick" if a.quick else ""
    part = "" if a.target_index is None else f"_t{a.target_index}"
    rows: list[dict[str, Any]] = []

    def flush() -> None:
        io.write_csv(pd.DataFrame(rows), a.out / f"curve_peers_runs{tag}{part}.csv")

    t0 = time.perf_counter()
    if a.merge:
        files = sorted(a.out.glob(f"curve_peers_runs{tag}_t*.csv"))
        df = pd.concat([pd.read_csv(f) for f in files], ignore_index=True)
        io.write_csv(df, a.out / f"curve_peers_runs{tag}.csv")
    else:
        for seed in a.seeds:
            run_seed(seed, a.targets, sorted(a.totals), a.methods, a.rescore, a.posterior,
                     rows, flush, log, a.target_index)
        df = pd.DataFrame(rows)
        if part:
            return 0
    s = summary(df)
    io.write_csv(s, a.out / f"curve_peers{tag}.csv")
    meta = {"days": DAYS, "options": OPTIONS, "seeds": a.seeds, "targets": a.targets,
            "totals": a.totals, "methods": a.methods, "rescore": a.rescore,
            "wall_s": round(time.perf_counter() - t0, 1),
            "summary": s.to_dict(orient="records")}
    (a.out / f"curve_peers{tag}.json").write_text(json.dumps(meta, indent=1, default=str))
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(s.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    print(f"wall {meta['wall_s']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
