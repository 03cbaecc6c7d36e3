"""The ``sequential`` strategy: Thompson sampling through the MILP of a net ensemble.

Tiny ensembles (3 nets of 8 x 8, few epochs) and budgets of a few dozen Rosenbrock
runs keep each test at a few seconds; the benchmark (benchmarks/breakeven.py) measures
the strategy at real sizes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simcalib.errors import ConfigError
from simcalib.metamodel import strategies as st
from simcalib.metamodel.strategies.ledger import Target, TargetRun
from simcalib.metamodel.strategies.runner import default_optimize
from simcalib.metamodel.strategies.sequential import initial_runs
from simcalib.metamodel.strategies.settings import check_settings, merged_settings
from simcalib.study import Study
from tests.cal_fixtures import warped_plane_study

SEED = 11
SMALL = {"sequential": {"ensemble": {"members": 3, "hidden": [8, 8], "epochs": 300,
                                     "warm_epochs": 100, "patience": 50},
                        "solver": {"options": {"mip_max_nodes": 200}}}}


XSTAR = np.array([0.62, 0.27])


class ScaleMM:
    """No design metamodel: the strategy trains its own; the ledger needs the output
    scale of Delta (and a predict for the predicted-error column, NaN)."""

    input_names = ["x", "y"]
    output_names = ["a", "b"]
    y_std = np.array([0.3, 0.3])

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.full((len(np.atleast_2d(X)), 2), np.nan)


def _run(study: Study, budget: int, strategy: str = "sequential", journal: Path | None = None,
         extra: dict | None = None) -> TargetRun:
    x, y = XSTAR
    t = Target(0, XSTAR.copy(), {}, np.array([x + 0.5 * y * y, y + 0.5 * x * x]))
    settings = merged_settings({"budget": budget, **SMALL, **(extra or {})})
    p = TargetRun(study, ScaleMM(), t, budget, 0.05, settings, {"backend": "highs"}, SEED,
                  strategy, default_optimize(), journal=journal)
    st.get(strategy).fn(p)
    return p


def test_reaches_the_known_optimum_and_beats_random_search() -> None:
    p = _run(warped_plane_study(), 28)
    rs = _run(warped_plane_study(), 28, "rs")
    assert p.used == 28 and all(r["status"] == "ok" for r in p.runs)
    best, rs_best = p.best_run()["error"], rs.best_run()["error"]
    assert best < 0.01                  # Delta = 0 at x* only; about 1 in the box
    x = p.best_run()["x"]
    assert np.abs(x - XSTAR).max() < 0.02
    assert best < rs_best / 5
    # the rounds found it, not the Sobol start
    start = min(r["error"] for r in p.runs if r["phase"] == "sobol")
    assert best < start / 5
    assert {r["phase"] for r in p.runs} >= {"sobol", "round0", "round1"}


def test_same_seed_same_runs() -> None:
    a, b = _run(warped_plane_study(), 16), _run(warped_plane_study(), 16)
    np.testing.assert_array_equal(np.array([r["x"] for r in a.runs]),
                                  np.array([r["x"] for r in b.runs]))


@pytest.mark.slow
def test_failure_region_is_avoided_once_runs_fail() -> None:
    # every run with x > 0.75 fails (a quarter of the box), away from x* = (0.62, 0.27)
    p = _run(warped_plane_study({"x": [0.75, 1.0]}), 28)
    start = [r for r in p.runs if r["phase"] == "sobol"]
    rounds = [r for r in p.runs if r["phase"] != "sobol"]
    share_start = np.mean([r["status"] != "ok" for r in start])
    share_rounds = np.mean([r["status"] != "ok" for r in rounds])
    assert share_start > 0.15
    assert share_rounds <= share_start / 3
    assert p.best_run()["error"] < 0.05


@pytest.mark.slow
def test_resume_after_a_kill_mid_round_replays_the_journal(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    # every group "slow": runs journaled one at a time, as for a costly simulator (a fast
    # one's groups grow; tests/strategies/test_calibration_blocks.py checks that)
    monkeypatch.setattr("simcalib.metamodel.strategies.ledger.GROUP_SECONDS", 0.0)
    full = _run(warped_plane_study(), 16)
    study = warped_plane_study()
    calls = {"n": 0}
    run = study.simulator.run

    def dying(batch, seeds, threads=1):  # noqa: ANN001 - the simulator protocol
        calls["n"] += len(batch)
        if calls["n"] > 13:              # killed in the second round
            raise KeyboardInterrupt
        return run(batch, seeds, threads)

    study.simulator.run = dying
    jpath = tmp_path / "seq_0.jsonl"
    with pytest.raises(KeyboardInterrupt):
        _run(study, 16, journal=jpath)
    study.simulator.run = run
    again = warped_plane_study()
    counted = {"n": 0}
    run2 = again.simulator.run

    def counting(batch, seeds, threads=1):  # noqa: ANN001
        counted["n"] += len(batch)
        return run2(batch, seeds, threads)

    again.simulator.run = counting
    resumed = _run(again, 16, journal=jpath)
    assert counted["n"] == 16 - 13      # only the runs the journal did not hold
    np.testing.assert_array_equal(np.array([r["x"] for r in resumed.runs]),
                                  np.array([r["x"] for r in full.runs]))
    np.testing.assert_allclose([r["error"] for r in resumed.runs],
                               [r["error"] for r in full.runs])


def test_initial_runs_and_settings_checks() -> None:
    assert initial_runs(100, 6, 5) == 30
    assert initial_runs(20, 6, 5) == 10      # at most half the budget
    assert initial_runs(4, 6, 5) == 2
    with pytest.raises(ConfigError, match="sequential.local_share"):
        merged_settings({"budget": 10, "sequential": {"local_share": 1.5}})
    s = merged_settings({"budget": 10, "sequential": {"solver": {"time_limt": 3}}})
    with pytest.raises(ConfigError, match="sequential.solver"):
        check_settings("sequential", 10, 0.05, s)
    with pytest.raises(ConfigError, match="sequential.ensemble.members"):
        merged_settings({"budget": 10, "sequential": {"ensemble": {"members": 0}}})


@pytest.mark.slow
def test_k_targets_at_once_share_their_runs() -> None:
    """Three targets in one job: one ensemble, every run in every target's data, each
    ledger paying for its own proposals (3 x budget runs in all)."""
    import pandas as pd

    from simcalib.metamodel.strategies.runner import calibrate

    xs = np.array([[0.62, 0.27], [0.2, 0.8], [0.45, 0.5]])
    tdf = pd.DataFrame({"target_id": [0, 1, 2], "x": xs[:, 0], "y": xs[:, 1],
                        "a": xs[:, 0] + 0.5 * xs[:, 1] ** 2, "b": xs[:, 1] + 0.5 * xs[:, 0] ** 2})
    rec, runs = calibrate(warped_plane_study(), ScaleMM(), tdf, "sequential",
                          {"budget": 12, **SMALL}, {"backend": "highs"}, SEED)
    assert list(rec["runs"]) == [12, 12, 12] and len(runs) == 36
    assert (rec["status"] == "ok").all()
    assert (rec["error"] < 0.05).all()
    # the same 12 runs per target spent separately: each search starts from nothing
    alone = [calibrate(warped_plane_study(), ScaleMM(), tdf.iloc[[i]], "sequential",
                       {"budget": 12, **SMALL}, {"backend": "highs"}, SEED)[0]["error"].iloc[0]
             for i in range(3)]
    assert rec["error"].mean() < np.mean(alone) / 3
    # each record's simulated outputs are those of a real run (its own or another's)
    for _, r in rec.iterrows():
        hit = runs[(np.isclose(runs["x"], r["x_x"])) & (np.isclose(runs["y"], r["x_y"]))]
        assert len(hit) >= 1 and np.isclose(hit["a"].iloc[0], r["sim_a"])
    # the trajectory is the job's runs vs this target's best Delta, ending at its answer
    traj, stopped = rec["history"].iloc[0].split(" | ")
    assert stopped.startswith("proposal MILPs stopped unproven")
    last = traj.split()[-1].split(":")
    assert int(last[0]) == 36 and np.isclose(float(last[1]), rec["error"].iloc[0], rtol=1e-3)


def test_ensemble_mean_is_one_exact_relu_net_and_fits_are_reproducible() -> None:
    from simcalib.metamodel.ensemble import EnsembleSettings, fit_ensemble

    r = np.random.default_rng(0)
    X = r.uniform(0, 1, (40, 2))
    Y = np.c_[X[:, 0] + 0.5 * X[:, 1] ** 2, X[:, 1] + 0.5 * X[:, 0] ** 2]
    es = EnsembleSettings.from_config({"members": 3, "hidden": [8, 8], "epochs": 200})
    ens = fit_ensemble(X, Y, ["x", "y"], ["a", "b"], es, seed=4, tag=0)
    again = fit_ensemble(X, Y, ["x", "y"], ["a", "b"], es, seed=4, tag=0)
    Xt = r.uniform(0, 1, (25, 2))
    np.testing.assert_array_equal(ens.predict_members(Xt), again.predict_members(Xt))
    # the mean of the members, as one (3x wider) ReLU net the MILP can embed
    mean = ens.mean_metamodel()
    np.testing.assert_allclose(mean.predict(Xt), ens.predict(Xt), rtol=0, atol=1e-10)
    assert mean.hidden == [24, 24]
    assert ens.spread(Xt).shape == (25, 2) and (ens.spread(Xt) > 0).any()
    # a warm fit keeps the scalers (the weights still mean the same thing)
    warm = fit_ensemble(np.vstack([X, Xt]), np.vstack([Y, Y[:25]]), ["x", "y"], ["a", "b"],
                        es, seed=4, tag=1, warm=ens)
    np.testing.assert_array_equal(warm.x_mean, ens.x_mean)
    assert ens.info["min_oob_r2"] > 0.5


@pytest.mark.slow
def test_use_design_starts_from_the_design_runs_and_counts_them() -> None:
    """``sequential.use_design``: the study's design runs (a quarter of them failed) are
    the start instead of the Sobol runs, every one counted in the target's runs; the
    search still ends at x*; a design the budget cannot hold is an error naming the key."""
    import pandas as pd

    from simcalib.metamodel.strategies.registry import reads_design
    from simcalib.metamodel.strategies.runner import calibrate
    from simcalib.seeds import rng
    from simcalib.study.simulation import simulate_rows

    study = warped_plane_study({"x": [0.75, 1.0]})
    d = study.space.design(12, rng(SEED, "design", "wp"), "sobol")
    d.insert(0, "run_id", np.arange(len(d), dtype=np.int64))
    design = simulate_rows(study, d, SEED)
    assert 0 < (design["status"] != "ok").sum() < 6
    x, y = XSTAR
    tdf = pd.DataFrame({"target_id": [0], "x": [x], "y": [y], "a": [x + 0.5 * y * y],
                        "b": [y + 0.5 * x * x]})
    on = {"sequential": {**SMALL["sequential"], "use_design": True}}
    assert reads_design("sequential", merged_settings(on))
    assert not reads_design("sequential", merged_settings(SMALL))
    rec, runs = calibrate(study, ScaleMM(), tdf, "sequential", {"budget": 32, **on},
                          {"backend": "highs"}, SEED, design=design)
    assert int(rec["runs"].iloc[0]) == 32 and len(runs) == 32   # 12 design + 20 new
    head = runs.iloc[:12]
    assert (head["phase"] == "design").all() and "sobol" not in set(runs["phase"])
    np.testing.assert_allclose(head[["x", "y"]].to_numpy(), design[["x", "y"]].to_numpy())
    assert list(head["status"]) == list(design["status"])
    assert int(rec["failed_runs"].iloc[0]) >= int((design["status"] != "ok").sum())
    # Delta = 0 at x* only, about 1 in the box; the rounds found it, not the design
    assert rec["error"].iloc[0] < 0.02
    assert rec["error"].iloc[0] < runs.iloc[:12]["error"].min() / 5
    assert np.abs(rec[["x_x", "x_y"]].to_numpy()[0] - XSTAR).max() < 0.02
    # the failed design runs trained the classifier: the new runs keep out of x > 0.75
    new = runs.iloc[12:]
    assert (new["status"] != "ok").mean() <= (head["status"] != "ok").mean() / 3
    with pytest.raises(ConfigError, match="calibration.sequential.use_design"):
        calibrate(study, ScaleMM(), tdf, "sequential", {"budget": 8, **on},
                  {"backend": "highs"}, SEED, design=design)
    with pytest.raises(ConfigError, match="calibration.sequential.use_design"):
        calibrate(study, ScaleMM(), tdf, "sequential", {"budget": 28, **on},
                  {"backend": "highs"}, SEED)


def _noisy_study(sd: float) -> Study:
    """The warped plane with Gaussian noise of sd ``sd`` on each output, declared
    stochastic (``noise.stochastic``) as a user would for a Python function."""
    from tests.conftest import REPO

    sim = {"type": "python", "options": {"function": "tests.sim_fixtures:noisy_warped_plane",
                                         "path": str(REPO), "outputs": ["a", "b"],
                                         "options": {"sd": sd}}}
    return Study("nwp", {"simulator": sim, "outputs": ["a", "b"], "noise": {"stochastic": True},
                         "parameters": {"x": {"lower": 0.0, "upper": 1.0},
                                        "y": {"lower": 0.0, "upper": 1.0}},
                         "constraints": []})


def _true_delta(x: np.ndarray) -> float:
    """Noise-free Delta of the warped plane at ``x`` against the target made at x*."""
    f = lambda v: np.array([v[0] + 0.5 * v[1] ** 2, v[1] + 0.5 * v[0] ** 2])  # noqa: E731
    return float((np.abs(f(x) - f(XSTAR)) / ScaleMM.y_std).sum())


def _ledger(study: Study, budget: int, extra: dict | None = None) -> TargetRun:
    x, y = XSTAR
    t = Target(0, XSTAR.copy(), {}, np.array([x + 0.5 * y * y, y + 0.5 * x * x]))
    settings = merged_settings({"budget": budget, **SMALL, **(extra or {})})
    return TargetRun(study, ScaleMM(), t, budget, 0.05, settings, {"backend": "highs"}, SEED,
                     "sequential", default_optimize())


def test_final_pick_sees_through_a_lucky_outlier() -> None:
    """Runs of a noisy simulator: 40 near x* (noisy Delta ~0.3) and one far away whose
    noise happened to land on the target (own Delta 0: the best single run, true
    Delta ~1).  The ensemble mean, trained on every run, predicts the outlier's
    neighbourhood badly and picks a point near x*, truly better."""
    from simcalib.metamodel.ensemble import EnsembleSettings, fit_ensemble
    from simcalib.metamodel.strategies.sequential import final_pick

    p = _ledger(_noisy_study(0.05), 60)
    r = np.random.default_rng(3)
    X = np.vstack([np.clip(XSTAR + r.uniform(-0.15, 0.15, (40, 2)), 0, 1),
                   r.uniform(0, 1, (19, 2))])
    f = np.c_[X[:, 0] + 0.5 * X[:, 1] ** 2, X[:, 1] + 0.5 * X[:, 0] ** 2]
    Y = f + 0.05 * r.standard_normal(f.shape)
    lucky = np.array([0.15, 0.85])       # far from x*; its one run equals the target
    X, Y = np.vstack([X, lucky]), np.vstack([Y, p.target.z])
    runs = [{"x": x, "y": y, "error": float(p.err(y)[0])} for x, y in zip(X, Y, strict=True)]
    assert min(runs, key=lambda q: q["error"])["x"] is runs[-1]["x"]    # the best single run
    assert _true_delta(lucky) > 0.8
    es = EnsembleSettings.from_config({"members": 3, "hidden": [8, 8], "epochs": 600})
    ens = fit_ensemble(X, Y, ["x", "y"], ["a", "b"], es, seed=5, tag=0)
    pick, cands = final_pick(p, runs, ens, 8)
    assert len(cands) == 8 and cands[0]["error"] == 0.0           # the outlier competed
    assert pick is not None and pick["x"] is not runs[-1]["x"]
    assert _true_delta(pick["x"]) < 0.3 * _true_delta(lucky)
    chosen = next(c for c in cands if c["best"] is pick)
    assert chosen["predicted"] == min(c["predicted"] for c in cands)
    # final_top 1: the best single run, whatever the ensemble says
    assert final_pick(p, runs, ens, 1)[0] is runs[-1]


@pytest.mark.slow
def test_final_rule_on_noisy_and_deterministic_studies() -> None:
    """``final: auto``: the ensemble's pick on a stochastic study, the best run on a
    deterministic one (unchanged: the same answer as ``best_run``); the rule never
    changes the runs, only which of them is the answer."""
    from simcalib.metamodel.strategies.sequential import final_rule

    noisy = {f: _ledger(_noisy_study(0.03), 28, {"sequential": {
        **SMALL["sequential"], "final": f}}) for f in ("auto", "best_run")}
    outs = {f: st.get("sequential").fn(p) for f, p in noisy.items()}
    assert final_rule(noisy["auto"], noisy["auto"].settings["sequential"]) == "ensemble"
    np.testing.assert_array_equal(np.array([r["x"] for r in noisy["auto"].runs]),
                                  np.array([r["x"] for r in noisy["best_run"].runs]))
    best = noisy["best_run"].best_run()
    np.testing.assert_array_equal(outs["best_run"]["x"], best["x"])
    assert "final pick by the ensemble mean" in outs["auto"]["history"]
    assert "final pick" not in outs["best_run"]["history"]
    # the answer is one of the 8 best runs, with that run's own outputs and Delta
    top = sorted(r["error"] for r in noisy["auto"].runs)[:8]
    assert outs["auto"]["error"] in top
    run = next(r for r in noisy["auto"].runs if np.array_equal(r["x"], outs["auto"]["x"]))
    np.testing.assert_array_equal(outs["auto"]["y"], run["y"])
    # deterministic: auto is best_run, and the outcome is the same to the last digit
    det = {f: _ledger(warped_plane_study(), 16, {"sequential": {**SMALL["sequential"], "final": f}})
           for f in ("auto", "best_run")}
    assert final_rule(det["auto"], det["auto"].settings["sequential"]) == "best_run"
    a, b = (st.get("sequential").fn(p) for p in det.values())
    assert a["history"] == b["history"] and a["error"] == b["error"]
    np.testing.assert_array_equal(a["x"], b["x"])
    with pytest.raises(ConfigError, match="sequential.final"):
        merged_settings({"budget": 10, "sequential": {"final": "mean"}})
