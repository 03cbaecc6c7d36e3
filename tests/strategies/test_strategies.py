"""Calibration strategies (simcalib.metamodel.strategies) on Rosenbrock with tiny budgets.

The metamodel and OP solver are small stand-ins here (a biased copy of the true
function and a dense random search), so these tests check the strategies' logic
(budgets, boxes, choices, records, summaries) independently of training and MILPs;
the end-to-end path with the real metamodel and MILP is in test_strategies_cli.py.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pandas as pd
import pytest

from simcalib.errors import ConfigError, DataError
from simcalib.metamodel import strategies as st
from simcalib.metamodel.strategies.adaptive import at_region_edge, round_sizes
from simcalib.metamodel.strategies.summary import trust_warnings
from simcalib.study import Study
from simcalib.study.simulation import simulate_rows
from tests.fixtures.strategies import (
    ROSEN,
    SEED,
    FakeMM,
    fake_optimize,
    rosen_study,
    rosen_targets,
)

#: every registered strategy whose optional extra is installed (gpbo needs BoTorch)
AVAILABLE = [s for s in st.names()
             if s != "gpbo" or importlib.util.find_spec("botorch") is not None]




@pytest.fixture(scope="module")
def study() -> Study:
    return rosen_study()


@pytest.fixture(scope="module")
def targets(study: Study) -> pd.DataFrame:
    return rosen_targets(study)


def run(study, targets, strategy, budget=12, proximity=0.05, **kw):
    settings = {"budget": budget, "proximity": proximity, **kw.pop("settings", {})}
    return st.calibrate(study, FakeMM(), targets, strategy, settings, {}, SEED,
                        optimize_fn=fake_optimize, **kw)


def actual_error(study, mm, target_row, x):
    rows = pd.DataFrame([dict(zip(study.space.tunable_names, x, strict=True))])
    for c in study.space.context_names:
        rows[c] = target_row[c]
    rows.insert(0, "run_id", [0])
    out = simulate_rows(study, rows, SEED, stream="check")
    return float(np.abs(out["f"].iloc[0] - target_row["f"]) / mm.y_std[0])


@pytest.mark.parametrize("strategy", AVAILABLE)
def test_budget_respected_and_records(study, targets, strategy):
    rec, runs = run(study, targets, strategy, budget=10)
    expect = 1 if strategy == "op" else 10
    assert (rec["runs"] == expect).all()
    assert runs.groupby("target_id").size().eq(expect).all()
    for col in ("error", "predicted_error", "distance", "x_x", "x_y", "true_x", "seconds",
                "failed_runs", "status"):
        assert col in rec
    assert rec["error"].notna().all() and (rec["status"] == "ok").all()
    # the chosen point's recorded error is the one of a logged run at that point
    for _, r in rec.iterrows():
        ok = runs[(runs.target_id == r.target_id) & np.isclose(runs.x, r.x_x)
                  & np.isclose(runs.y, r.x_y)]
        assert np.isclose(ok["error"].min(), r.error)


@pytest.mark.parametrize("strategy", AVAILABLE)
def test_better_than_starting_anchor(study, targets, strategy):
    """Each strategy ends at least as good as where it started: its anchor's actual
    error (OP point, RS best, first sample/trial); OP itself beats a random point on
    the metamodel's predicted error, the quantity it optimises."""
    mm = FakeMM()
    rec, _ = run(study, targets, strategy, budget=12)
    for _, r in rec.iterrows():
        t = targets.set_index("target_id").loc[r.target_id]
        anchor = np.array([r.anchor_x, r.anchor_y])
        if strategy == "op":
            rnd = study.space.sample_tunables(50, np.random.default_rng(1), "uniform",
                                              {"a": t.a, "b": t.b})
            X = rnd[study.input_names].to_numpy()
            pe = np.abs(mm.predict(X)[:, 0] - t.f) / mm.y_std[0]
            assert r.predicted_error <= np.median(pe)
        elif strategy == "stp":
            assert r.predicted_error <= r.anchor_predicted_error + 1e-12
        else:
            assert r.error <= actual_error(study, mm, t, anchor) + 1e-12


def test_strategies_beat_op_on_average(study, targets):
    errs = {s: run(study, targets, s, budget=16)[0]["error"].mean()
            for s in ("op", "pts", "adaptive")}
    assert errs["pts"] <= errs["op"]
    assert errs["adaptive"] <= errs["op"]


def test_pts_full_box_is_rs(study, targets):
    """PtS with R = 1 samples the whole box, i.e. it is RS (same random stream)."""
    rs, _ = run(study, targets, "rs", budget=8)
    pts, _ = run(study, targets, "pts", budget=8, proximity=1.0, stream="rs")
    np.testing.assert_allclose(pts["error"], rs["error"])
    np.testing.assert_allclose(pts[["x_x", "x_y"]], rs[["x_x", "x_y"]])


def test_pts_tiny_box_is_op(study, targets):
    """PtS with R -> 0 runs only (numerically) the OP point."""
    op, _ = run(study, targets, "op", budget=8)
    pts, _ = run(study, targets, "pts", budget=8, proximity=1e-9)
    np.testing.assert_allclose(pts[["x_x", "x_y"]], op[["x_x", "x_y"]], atol=1e-6)
    np.testing.assert_allclose(pts["error"], op["error"], rtol=1e-5, atol=1e-9)


@pytest.mark.slow
def test_summary_matches_records(study, targets):
    recs = {s: run(study, targets, s, budget=8)[0] for s in AVAILABLE}
    summ = st.summarize(recs)
    assert list(summ["strategy"]) == AVAILABLE
    for col in ("strategy", "median_error", "mean_error", "reduction_vs_rs", "runs"):
        assert col in summ
    for _, row in summ.iterrows():
        df = recs[row.strategy]
        assert np.isclose(row.median_error, df["error"].median())
        assert np.isclose(row.mean_error, df["error"].mean())
        assert np.isclose(row.runs, df["runs"].mean())
        assert np.isclose(row.reduction_vs_rs,
                          1 - df["error"].mean() / recs["rs"]["error"].mean())
    assert summ.set_index("strategy").loc["rs", "reduction_vs_rs"] == 0


def test_deterministic(study, targets):
    a, _ = run(study, targets, "blackbox", budget=6)
    b, _ = run(study, targets, "blackbox", budget=6)
    pd.testing.assert_frame_equal(a.drop(columns=["seconds", "sim_seconds", "op_seconds"]),
                                  b.drop(columns=["seconds", "sim_seconds", "op_seconds"]))


def test_anchors_reused(study, targets):
    anchors = st.compute_anchors(study, FakeMM(), targets, {}, SEED, fake_optimize)
    calls = []

    def counting(*a, **k):
        calls.append(k.get("box"))
        return fake_optimize(*a, **k)

    rec, _ = st.calibrate(study, FakeMM(), targets, "pts", {"budget": 4}, {}, SEED,
                          optimize_fn=counting, anchors=anchors)
    assert calls == []
    np.testing.assert_allclose(rec[["anchor_x", "anchor_y"]].to_numpy(),
                               anchors[["x_x", "x_y"]].to_numpy())


def test_failed_runs_count_against_budget(study, targets, monkeypatch):
    real = study.simulator.run

    def flaky(inputs, seeds, threads=1):
        res = real(inputs, seeds, threads)
        res.loc[res.index[::2], "status"] = "error"
        res.loc[res.index[::2], "f"] = np.nan
        return res

    s2 = Study("rosen", ROSEN)
    monkeypatch.setattr(s2.simulator, "run", flaky)
    rec, runs = st.calibrate(s2, FakeMM(), targets, "rs", {"budget": 6}, {}, SEED,
                             optimize_fn=fake_optimize)
    assert (rec["runs"] == 6).all()
    assert (rec["failed_runs"] == 3).all()
    assert (runs["status"] == "error").sum() == 9
    assert np.isfinite(rec["error"]).all()


def test_all_runs_failed_is_recorded(study, targets, monkeypatch):
    s2 = Study("rosen", ROSEN)
    real = s2.simulator.run

    def broken(inputs, seeds, threads=1):
        res = real(inputs, seeds, threads)
        res["status"] = "timeout"
        return res

    monkeypatch.setattr(s2.simulator, "run", broken)
    rec, _ = st.calibrate(s2, FakeMM(), targets, "pts", {"budget": 3}, {}, SEED,
                          optimize_fn=fake_optimize)
    assert (rec["status"] == "all_runs_failed").all()
    assert rec["error"].isna().all()
    summ = st.summarize({"pts": rec})
    assert summ["failed_targets"].iloc[0] == len(rec)


@pytest.mark.parametrize("strategy,budget", [("stp", 1), ("adaptive", 1), ("rs", 0)])
def test_budget_too_small(study, targets, strategy, budget):
    with pytest.raises(ConfigError, match="budget"):
        run(study, targets, strategy, budget=budget)


@pytest.mark.parametrize("prox", [0.0, -0.1, 1.5])
def test_bad_proximity(study, targets, prox):
    with pytest.raises(ConfigError, match="proximity"):
        run(study, targets, "pts", proximity=prox)


def test_target_file_must_match_metamodel(study, targets):
    with pytest.raises(DataError, match="does not match the metamodel"):
        run(study, targets.rename(columns={"f": "g"}), "rs")
    bad = FakeMM()
    bad.output_names = ["g"]
    with pytest.raises(DataError, match="outputs"):
        st.calibrate(study, bad, targets, "rs", {"budget": 2}, {}, SEED,
                     optimize_fn=fake_optimize)


def test_failed_target_recorded(study, targets):
    t = targets.copy()
    t.loc[0, "status"] = "error"
    rec, runs = run(study, t, "rs", budget=3)
    assert rec.loc[0, "status"] == "target_failed" and rec.loc[0, "runs"] == 0
    assert len(rec) == len(t)


def test_round_sizes():
    assert round_sizes(10, 4) == [3, 3, 2, 2]
    assert sum(round_sizes(100, 7)) == 100


def test_sweep_summary(study, targets):
    recs = {r: run(study, targets, "pts", budget=5, proximity=r)[0] for r in (0.01, 0.1, 1.0)}
    sw = st.sweep_summary(recs)
    assert list(sw["proximity"]) == [0.01, 0.1, 1.0]
    assert sw["best"].sum() == 1


def test_rescore_outside_budget(study, targets):
    """Re-scoring runs are extra (budget unchanged); on a deterministic simulator the
    re-scored error equals the chosen run's error."""
    rec, runs = run(study, targets, "pts", budget=5, settings={"rescore": 3})
    assert (rec["runs"] == 5).all() and len(runs) == 5 * len(rec)
    np.testing.assert_allclose(rec["rescored_error"], rec["error"], rtol=1e-9, atol=1e-12)
    summ = st.summarize({"pts": rec})
    assert np.isclose(summ["mean_rescored_error"].iloc[0], rec["rescored_error"].mean())


def test_trust_region_edge_ignores_pinned_inputs_and_global_bounds():
    """The adaptive region grows only when the best point is near a side of the region
    beyond which the optimum could lie."""
    bounds = (np.array([0.0, 0.0, 1.0]), np.array([10.0, 10.0, 5.0]))
    box = (np.array([4.0, 0.0, 3.0]), np.array([6.0, 2.0, 3.0]))   # input 2 pinned at 3
    # interior in the free inputs; the pinned one must not count as "at the edge"
    assert not at_region_edge(np.array([5.0, 1.0, 3.0]), box, bounds)
    # near an interior side of the box
    assert at_region_edge(np.array([4.1, 1.0, 3.0]), box, bounds)
    assert at_region_edge(np.array([5.0, 1.9, 3.0]), box, bounds)
    # near a side that is the global bound: nothing lies beyond it
    assert not at_region_edge(np.array([5.0, 0.1, 3.0]), box, bounds)
    # an integer input whose box is only the anchor's neighbours (2..4) moves by itself
    ibox = (np.array([4.0, 0.0, 2.0]), np.array([6.0, 2.0, 4.0]))
    integer = np.array([False, False, True])
    assert not at_region_edge(np.array([5.0, 1.0, 4.0]), ibox, bounds, integer=integer)
    assert at_region_edge(np.array([5.0, 1.0, 4.0]), ibox, bounds)


def test_adaptive_small_budget_gets_fewer_rounds(study, targets):
    """Two runs a round at least: a budget of 5 with the default 6 rounds runs 2 rounds
    and still spends exactly its budget."""
    rec, runs = run(study, targets.head(2), "adaptive", budget=5)
    assert (rec["runs"] == 5).all()
    assert all(len(h.split()) == 2 for h in rec["history"])
    assert set(runs["phase"]) == {"round0", "round1"}


def test_anchors_reuse_points_mm_optimize_solved(study, targets):
    """Issue 15, no duplicate solves: op.csv's rank-0 points become the anchors and no
    MILP is solved again; a target missing from op.csv is still solved."""
    calls = []

    def counting(*a, **kw):
        calls.append(1)
        return fake_optimize(*a, **kw)

    solved = pd.DataFrame({"target_id": [0, 1, 0], "rank": [0, 0, 1],
                           "x": [5.1, 10.2, 4.5], "y": [20.0, 99.0, 30.0],
                           "status": ["optimal", "time_limit", "optimal"],
                           "seconds": [1.5, 2.0, 9.0]})
    anchors = st.compute_anchors(study, FakeMM(), targets, {}, SEED, optimize_fn=counting,
                                 solved=solved)
    a = anchors.set_index("target_id")
    assert a.loc[0, "x_x"] == 5.1 and a.loc[0, "x_y"] == 20.0
    assert a.loc[1, "status"] == "time_limit" and a.loc[1, "seconds"] == 2.0
    assert len(calls) == 1  # target 2 only
    fresh = st.compute_anchors(study, FakeMM(), targets, {}, SEED, optimize_fn=counting)
    assert len(calls) == 1 + len(targets)
    assert np.isfinite(fresh[["x_x", "x_y"]].to_numpy()).all()


def _rec(errors: list[float]) -> pd.DataFrame:
    n = len(errors)
    return pd.DataFrame({"target_id": range(n), "error": errors, "predicted_error": errors,
                         "runs": [4] * n, "failed_runs": [4 if np.isnan(e) else 0
                                                          for e in errors],
                         "seconds": [0.1] * n})


def test_failed_targets_are_named_and_comparisons_use_common_targets():
    """pts failed target 2 (no successful run); rs calibrated all four: the reduction
    compares the three targets both calibrated, and a warning says so."""
    recs = {"rs": _rec([1.0, 2.0, 3.0, 10.0]), "pts": _rec([0.5, 1.0, np.nan, 1.5])}
    summ = st.summarize(recs).set_index("strategy")
    assert summ.loc["pts", "failed_targets"] == 1
    assert summ.loc["pts", "failed_target_ids"] == "2"
    assert summ.loc["rs", "failed_target_ids"] == ""
    assert (summ["compared_targets"] == 3).all()
    assert summ.loc["rs", "mean_error_compared"] == pytest.approx((1 + 2 + 10) / 3)
    assert summ.loc["pts", "mean_error_compared"] == pytest.approx(1.0)
    assert summ.loc["pts", "reduction_vs_rs"] == pytest.approx(1 - 1.0 / (13 / 3))
    assert summ.loc["rs", "mean_error"] == pytest.approx(4.0)   # its own targets
    lines = trust_warnings(summ.reset_index())
    assert any("pts: target(s) 2" in line and "3 target(s)" in line for line in lines)
    # nothing failed: the compared errors are the plain ones, no warning
    ok = st.summarize({"rs": _rec([1.0, 2.0]), "pts": _rec([0.5, 1.0])})
    assert (ok["mean_error_compared"] == ok["mean_error"]).all()
    assert trust_warnings(ok) == []


def test_report_names_failed_targets():
    from simcalib.report.sections import paper1_trust_lines

    summ = st.summarize({"rs": _rec([1.0, 2.0, 3.0]), "pts": _rec([0.5, np.nan, 1.0])})
    lines = paper1_trust_lines(summ)
    assert any("pts: target(s) 1" in line and "2 targets" in line for line in lines)


def test_choose_by_mean_on_a_noisy_simulator(targets):
    """A stochastic simulator: 3 candidates re-run twice each inside the budget; the
    answer is the candidate with the lowest mean Delta over its runs, and that mean is
    the record's error.  A deterministic one (and select.top: 0) runs no selection."""
    noisy = Study("rosen", {**ROSEN, "simulator": {"type": "rosenbrock",
                                                    "options": {"noise_rel": 0.3}}})
    rec, runs = run(noisy, targets, "pts", budget=12)
    for tid, g in runs.groupby("target_id"):
        sel = g[g["phase"] == "select"]
        assert len(g) == 12 and len(sel) == 6              # inside the budget
        r = rec.set_index("target_id").loc[tid]
        x = np.array([r["x_x"], r["x_y"]])
        same = g[np.isclose(g["x"], x[0]) & np.isclose(g["y"], x[1])]
        assert len(same) == 3                               # the first run + 2 re-runs
        assert r["error"] == pytest.approx(same["error"].mean())
        # no other candidate has a lower mean
        for _, cand in sel.groupby(["x", "y"]):
            xy = cand[["x", "y"]].iloc[0]
            allruns = g[np.isclose(g["x"], xy["x"]) & np.isclose(g["y"], xy["y"])]
            assert allruns["error"].mean() >= r["error"] - 1e-12
        assert "select by mean" in r["history"]
    _, plain_runs = run(Study("rosen", ROSEN), targets, "pts", budget=12)
    assert (plain_runs["phase"] != "select").all()
    _, off = run(noisy, targets, "pts", budget=12, settings={"select": {"top": 0}})
    assert (off["phase"] != "select").all()
    assert (rec["selection_runs"] == 3).all()
    # StP answers with an OP point (no winner's curse; re-selecting among its noisy
    # samples made it worse, docs/strategies.md): it never re-selects
    srec, sruns = run(noisy, targets, "stp", budget=12)
    assert (sruns["phase"] != "select").all() and (srec["runs"] == 12).all()
    assert (srec["selection_runs"] == 1).all()


def test_record_columns_are_reserved_names(study, targets):
    """Every column a strategy record writes beside the study's own names is reserved,
    so no parameter, context or output can collide with it (study/names.py)."""
    from simcalib.study.names import GENERATED_PREFIXES, RESERVED_COLUMNS

    rec, runs = run(study, targets, "pts", budget=4, settings={"rescore": 1})
    own = set(study.input_names) | set(study.outputs)
    for col in [*rec.columns, *runs.columns]:
        if col not in own and not col.startswith(GENERATED_PREFIXES):
            assert col in RESERVED_COLUMNS, col


@pytest.mark.parametrize("strategy", ["rs", "pts"])
def test_a_solver_key_typo_is_a_config_error_from_every_strategy(study, targets, strategy):
    """Issue 40: ``rs`` (no MILP) ignored a misspelled solver option and ``pts`` only
    logged it; now every strategy refuses it before a run, naming the key."""
    settings = {"budget": 6, "proximity": 0.05}
    with pytest.raises(ConfigError, match=r"solver\.time_limt.*did you mean 'time_limit'"):
        st.calibrate(study, FakeMM(), targets, strategy, settings, {"time_limt": 3}, SEED,
                     optimize_fn=fake_optimize)
