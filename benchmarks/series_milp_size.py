"""MILP size and solve time of the curve misfit against the scalar case (issue 42's
goal "MILP size and solve time per proposal reported against the scalar case"), on
the epidemic model: metamodels trained on the same runs predict either the nine scalar
outputs or the k basis weights of the case curve at 30 / 100 points; each OP is the
existing formulation (interval + OBBT bounds), the curve's misfit appended.

A benchmark, not part of the test suite (trains three metamodels, ~6 min on a busy
2-core machine): ``python benchmarks/series_milp_size.py`` prints the table and writes
``results/benchmarks/series_milp_size.csv``; the assertions hold the size formula
(2m rows and m columns per m observed points, no binary) and that every solve's
objective equals numpy's misfit at its answer (a solve may stop at the 30 s limit:
counted in the table, not failed)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import qmc

from simcalib.metamodel.basis import fit_basis
from simcalib.metamodel.milp import highs_backend
from simcalib.metamodel.milp.bounds import tighten_bounds
from simcalib.metamodel.milp.formulation import build_milp
from simcalib.metamodel.milp.problem import build_problem
from simcalib.metamodel.milp.series_misfit import append_to_model, misfit_from_basis
from simcalib.metamodel.milp.settings import SolverSettings
from simcalib.metamodel.training import train_metamodel
from simcalib.simulators.epidemic import (
    INPUTS,
    OUTPUTS,
    EpidemicOptions,
    simulate_batch_curves,
)
from simcalib.study.space import build_space

SOLVER = {"time_limit": 30.0, "mip_gap_abs": 1e-4, "threads": 1}
MM = {"hidden": [16, 16]}  # config/config.yaml's epidemic metamodel
N_RUNS, N_TARGETS = 256, 4


def space():
    params = {n: {"lower": lo, "upper": hi, **({"integer": True} if i else {})}
              for n, (lo, hi, i) in INPUTS.items()}
    return build_space({"parameters": params}, "bench")


def dist(x: np.ndarray, truth: np.ndarray) -> float:
    """Mean |x - truth| over the inputs, as a fraction of each input's range."""
    lo = np.array([v[0] for v in INPUTS.values()])
    hi = np.array([v[1] for v in INPUTS.values()])
    return float(np.mean(np.abs(x - truth) / (hi - lo)))


def solve(problem, append=None):
    bounds = tighten_bounds(problem, time_limit=10.0)
    m = build_milp(problem, bounds)
    if append is not None:
        append(m)
    t0 = time.process_time()  # CPU seconds: HiGHS runs on this thread (a busy machine
    raw = highs_backend.solve(m, SolverSettings.build(SOLVER))  # stretches wall, not CPU)
    return m, raw, time.process_time() - t0


@pytest.mark.slow
def test_curve_misfit_milp_size_against_scalars():
    sp = space()
    names = list(INPUTS)
    lo, hi = np.array([v[0] for v in INPUTS.values()]), np.array([v[1] for v in INPUTS.values()])
    x = lo + qmc.Sobol(6, seed=3).random(512)[:N_RUNS + N_TARGETS] * (hi - lo)
    x[:, [2, 3, 5]] = np.round(x[:, [2, 3, 5]])
    df = pd.DataFrame(x, columns=names)
    opts = EpidemicOptions(population=100_000, max_days=120)
    res, curves = simulate_batch_curves(df, opts, np.arange(len(df), dtype=np.int64) + 11)
    train, targets = slice(0, N_RUNS), range(N_RUNS, N_RUNS + N_TARGETS)
    data = pd.concat([df, res], axis=1).iloc[train]
    rows = []
    scalar_mm, _ = train_metamodel(data, names, OUTPUTS, MM, seed=1, study="bench")
    for j in targets:
        target = {o: float(res[o].iloc[j]) for o in OUTPUTS}
        problem = build_problem(scalar_mm, sp, target, {})
        m, raw, sec = solve(problem)
        assert raw.status in ("optimal", "time_limit")
        rows.append(("scalar", 9, len(OUTPUTS), m.n_rows, m.n_cols, m.n_binaries, sec,
                     raw.status == "optimal", dist(raw.values[m.x], x[j])))
    for days, var in [(d, v) for d in (np.arange(4, 121, 4), np.arange(1, 101))
                      for v in (0.99,)]:
        basis = fit_basis(curves[train][:, days - 1], days, "cases", variance=var)
        w = basis.encode(curves[train][:, days - 1])
        wcols = [f"w{i}" for i in range(basis.k)]
        wdata = pd.concat([df.iloc[train], pd.DataFrame(w, columns=wcols)], axis=1)
        wdata["status"] = "ok"
        mm, _ = train_metamodel(wdata, names, wcols, MM, seed=1, study="bench")
        for j in targets:
            mis = misfit_from_basis(basis, days, curves[j, days - 1])
            folded = mis.fold(np.asarray(mm.y_mean, float), np.asarray(mm.y_std, float))
            base = build_problem(mm, sp, dict.fromkeys(wcols, 0.0), {})
            problem = dataclasses.replace(base, weights=np.zeros(basis.k))
            m, raw, sec = solve(problem, lambda m, f=folded: append_to_model(m, m.y, f))
            assert raw.status in ("optimal", "time_limit")
            xs = raw.values[m.x]
            y = mm.predict_scaled(xs[None, :])[0]
            assert np.isclose(folded.value(y)[0], raw.objective, atol=1e-5)
            plain = build_milp(problem, tighten_bounds(problem, time_limit=10.0))
            assert (m.n_rows - plain.n_rows, m.n_cols - plain.n_cols) == (2 * len(days),
                                                                         len(days))
            assert m.n_binaries == plain.n_binaries
            rows.append((f"curve {len(days)} pts, variance {var}", len(days), basis.k,
                         m.n_rows, m.n_cols, m.n_binaries, sec, raw.status == "optimal",
                         dist(xs, x[j])))
    table = pd.DataFrame(rows, columns=["case", "points", "net outputs", "rows", "cols",
                                        "binaries", "solve_s", "optimal", "dist"])
    summary = table.groupby("case", sort=False).agg(
        points=("points", "first"), outputs=("net outputs", "first"), rows=("rows", "first"),
        cols=("cols", "first"), binaries=("binaries", "mean"),
        solve_median_s=("solve_s", "median"), solve_max_s=("solve_s", "max"),
        optimal=("optimal", "sum"), op_distance=("dist", "mean"))
    print("\n" + summary.to_string())
    out = Path("results/benchmarks/series_milp_size.csv")
    out.parent.mkdir(parents=True, exist_ok=True)
    summary.to_csv(out)
    print(f"wrote {out}")


if __name__ == "__main__":
    raise SystemExit(pytest.main(["-q", "-s", "-p", "no:cacheprovider", "-m", "slow", __file__]))
