"""``sequential``'s own posterior (simcalib.metamodel.posterior.sequential_posterior):
a linear toy whose posterior must concentrate on the truth, coverage of true inputs on
noisy toys, the answer's rule and its agreement with the posterior, the emulator's
numpy forward pass, bad runs tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from simcalib.errors import DataError
from simcalib.metamodel.posterior import agreement, sequential_posterior
from simcalib.study import Study
from simcalib.study.simulation import simulate_rows

NOISE = {"sd": 0.0}
ENS = {"members": 3, "hidden": [16, 16], "epochs": 250, "patience": 50}
FAST = {"chains": 4, "warmup": 300, "draws": 500, "max_draws": 1500, "init_draws": 400,
        "error_dof": 0, "pair_plots": 1, "save_draws": 50, "calibration_targets": 12,
        "calibration_draws": 250}


def linear(inputs: pd.DataFrame, seeds: np.ndarray) -> pd.DataFrame:
    """y1 = x1 + x2, y2 = x1 - x2 / 2 (+ Gaussian noise of sd NOISE['sd'] per run)."""
    x1, x2 = inputs["x1"].to_numpy(), inputs["x2"].to_numpy()
    e = np.array([np.random.default_rng(int(s)).normal(0, 1, 2) for s in seeds])
    e = e * NOISE["sd"] if NOISE["sd"] else np.zeros((len(x1), 2))
    return pd.DataFrame({"y1": x1 + x2 + e[:, 0], "y2": x1 - 0.5 * x2 + e[:, 1]})


A = np.array([[1.0, 1.0], [1.0, -0.5]])


def fit_of(z: np.ndarray) -> np.ndarray:
    """The inputs whose noise-free outputs are z exactly."""
    return np.linalg.solve(A, z)


def _study(noisy: bool = False) -> Study:
    return Study("lin", {"simulator": {"type": "python", "options": {
        "function": linear, "outputs": ["y1", "y2"]}},
        "parameters": {"x1": {"lower": 0, "upper": 10}, "x2": {"lower": 0, "upper": 10}},
        "noise": {"stochastic": noisy}})


def _toy(truths: np.ndarray, noise: float, seed: int = 0, per_target: int = 24):
    """Runs shaped like sequential's (a uniform start, then runs near the target),
    simulated targets with known inputs, and records whose answer is the best run."""
    NOISE["sd"] = noise
    study = _study(noise > 0)
    r = np.random.default_rng(seed)
    frames, recs = [], []
    tg = pd.DataFrame(truths, columns=["x1", "x2"])
    tg.insert(0, "target_id", np.arange(len(truths)))
    targets = simulate_rows(study, tg, seed + 1, stream="targets", id_column="target_id")
    for t, _ in enumerate(truths):
        # sequential closes in on the inputs that fit the (noisy) target best
        xt = fit_of(targets.loc[t, ["y1", "y2"]].to_numpy(dtype=float))
        near = per_target - per_target // 2
        # the rounds close in on the target, as sequential's trust regions do
        sd = np.geomspace(1.0, 0.05, near)[:, None]
        X = np.vstack([r.uniform(0, 10, (per_target // 2, 2)),
                       xt + sd * r.normal(0, 1, (near, 2))])
        df = pd.DataFrame(X.clip(0.01, 9.99), columns=["x1", "x2"])
        df.insert(0, "run_id", np.arange(len(X)))
        res = simulate_rows(study, df, seed, stream=f"calib:{t}").assign(target_id=t)
        z = targets.loc[t, ["y1", "y2"]].to_numpy(dtype=float)
        err = np.abs(res[["y1", "y2"]].to_numpy(dtype=float) - z).sum(axis=1)
        best = res.iloc[int(np.argmin(err))]
        recs.append({"target_id": t, "x_x1": best["x1"], "x_x2": best["x2"]})
        frames.append(res)
    return study, pd.concat(frames, ignore_index=True), targets, pd.DataFrame(recs)


@pytest.fixture(scope="module")
def deterministic():
    study, runs, targets, recs = _toy(np.array([[3.0, 4.0], [7.0, 2.0]]), 0.0)
    res = sequential_posterior(study, runs, targets, recs, {**FAST, "error_scale": 1.0},
                               ENS, seed=3)
    return res, recs


def test_linear_toy_posterior_concentrates_on_the_truth(deterministic):
    """Known answer: two outputs fix both inputs; the posterior's median is near the
    truth, its interval holds it and is a small share of the box."""
    res, recs = deterministic
    s = res.summary
    assert s["converged"].all() and s["identified"].all()
    np.testing.assert_allclose(s["q50"], s["true"], atol=0.35)
    assert ((s["q5"] <= s["true"]) & (s["true"] <= s["q95"])).all()
    assert ((s["q95"] - s["q5"]) < 3.5).all()    # of a range of 10 (the prior's: 9)
    assert res.meta["stochastic"] is False and res.meta["unidentified"] == []
    # deterministic: the answer is the strategy's best run, inside its posterior
    a = res.answers
    assert (a["answer_rule"].str.startswith("best run")).all()
    np.testing.assert_allclose(a[["x_x1", "x_x2"]], recs[["x_x1", "x_x2"]])
    assert a["inside_90"].all() and a["inside_joint_90"].all()
    assert (a["why_outside"].fillna("") == "").all()


def test_files_beside_the_design_posteriors(deterministic, tmp_path):
    from simcalib.bayes.posterior import read_netcdf
    from simcalib.metamodel.posterior.sequential import write

    res, _ = deterministic
    write(res, tmp_path, {**FAST, "save_draws": 50}, "lin")
    for f in ("posterior_summary.csv", "answer.csv", "posterior.json", "intervals.png",
              "targets/target_0.nc", "targets/pair_0.png"):
        assert (tmp_path / f).is_file(), f
    assert read_netcdf(tmp_path / "targets" / "target_1.nc").posterior["x1"].shape == (4, 50)
    import json

    meta = json.loads((tmp_path / "posterior.json").read_text())
    assert meta["kappa"] == 1.0 and not meta["kappa_calibrated"]
    assert set(meta["error_terms"]) >= {"spread_sd_median_at_runs", "residual_sd"}


@pytest.mark.slow
def test_noisy_toys_cover_their_true_inputs_and_answer_with_the_median():
    """Stochastic: kappa calibrated on one fold and checked on the other; the 90 %
    intervals of 6 targets hold most of their 12 true inputs; the answer is the
    posterior's median (not the luckiest run), inside the joint region."""
    truths = np.array([[2.0, 3.0], [4.0, 7.0], [6.0, 5.0], [8.0, 2.0], [3.0, 8.5],
                       [6.5, 1.5]])
    study, runs, targets, recs = _toy(truths, 0.4, seed=11, per_target=16)
    res = sequential_posterior(study, runs, targets, recs, {**FAST, "ppc_draws": 0}, ENS,
                               seed=5)
    s = res.summary
    inside = ((s["q5"] <= s["true"]) & (s["true"] <= s["q95"])).mean()
    assert inside >= 9 / 12
    assert res.meta["kappa_calibrated"] and res.meta["stochastic"]
    chk = res.meta["kappa_check"]["joint_coverage"]
    assert set(chk) == {"0.5", "0.8", "0.9", "0.95"} and chk["0.95"] >= 0.6
    a = res.answers
    assert (a["answer_rule"] == "posterior median").all()
    med = s.pivot(index="target_id", columns="input", values="q50")
    np.testing.assert_allclose(a[["x_x1", "x_x2"]].to_numpy(), med[["x1", "x2"]].to_numpy())
    assert a["inside_joint_90"].all()
    # known answer: one noisy observation z is best explained by A^-1 z
    best = np.array([fit_of(targets.loc[t, ["y1", "y2"]].to_numpy(dtype=float))
                     for t in range(len(truths))])
    np.testing.assert_allclose(a[["x_x1", "x_x2"]].to_numpy(), best, atol=0.4)


def test_stochastic_detected_from_repeated_points():
    from simcalib.metamodel.posterior.emulator import replicate_variance

    rows = pd.DataFrame({"x": [1.0, 1.0, 2.0, 3.0, 3.0], "y": [0.0, 2.0, 5.0, 1.0, 1.0]})
    var, pts = replicate_variance(rows, ["x"], ["y"])
    assert pts == 2 and var[0] == pytest.approx(2.0 / 2)   # ss 2 over 2 dof


def test_numpy_members_match_the_ensemble():
    from simcalib.metamodel.ensemble import EnsembleSettings, fit_ensemble
    from simcalib.metamodel.posterior.emulator import EnsembleError

    r = np.random.default_rng(0)
    X = r.uniform(0, 1, (30, 2))
    Y = np.column_stack([X.sum(axis=1), X[:, 0] * X[:, 1]])
    ens = fit_ensemble(X, Y, ["a", "b"], ["y1", "y2"],
                       EnsembleSettings.from_config({**ENS, "epochs": 50}), seed=1)
    model = EnsembleError(ens, np.eye(2) * 1e-4, "test")
    Xq = r.uniform(0, 1, (7, 2))
    np.testing.assert_allclose(model.predict_members(Xq), ens.predict_members(Xq),
                               rtol=1e-5, atol=1e-6)
    C = model.cov(Xq)
    np.testing.assert_allclose(np.sqrt(np.diagonal(C - model.residual, axis1=1, axis2=2)),
                               ens.spread(Xq), rtol=1e-4, atol=1e-7)


def test_bad_runs_tables_name_the_problem():
    study, runs, targets, recs = _toy(np.array([[3.0, 4.0]]), 0.0, per_target=8)
    with pytest.raises(DataError, match=r"lack column\(s\) \['y2'\]"):
        sequential_posterior(study, runs.drop(columns="y2"), targets, recs, FAST, ENS)
    with pytest.raises(DataError, match="at least 8"):
        sequential_posterior(study, runs.head(5), targets, recs, FAST, ENS)


# ---- agreement: the check and its words --------------------------------------------------

def test_agreement_inside_and_the_three_reasons():
    r = np.random.default_rng(0)
    names = ["a", "b"]
    draws = r.normal(0, 1, (2000, 2))
    iv = {"a": (-1.64, 1.64), "b": (-1.64, 1.64)}
    ok = agreement.check({"a": 0.1, "b": -0.2}, iv, {"a": 0.1, "b": 0.1}, draws, names,
                         agreement.inside_ellipsoid(np.array([0.1, -0.2]), draws))
    assert ok.agrees and ok.why == "" and ok.inside_joint
    weak = agreement.check({"a": 3.0, "b": 0.0}, iv, {"a": 0.7, "b": 0.1}, draws, names)
    assert weak.outside == ("a",) and weak.why.startswith("weakly identified input a")
    ridge_draws = np.column_stack([draws[:, 0], draws[:, 0] + 0.1 * draws[:, 1]])
    ridge = agreement.check({"a": 3.0, "b": 3.0}, iv, {"a": 0.1, "b": 0.1}, ridge_draws,
                            names)
    assert ridge.why.startswith("a ridge of equal fits: a and b")
    both = agreement.check({"a": 3.0, "b": 3.0}, iv, {"a": 0.7, "b": 0.1}, ridge_draws,
                           names)
    assert both.why.startswith("a ridge") and both.why.endswith("alone, a is weakly identified")
    other = agreement.check({"a": 3.0, "b": 0.0}, iv, {"a": 0.1, "b": 0.1}, draws, names)
    assert "different criterion" in other.why and "a outside" in other.why
    # inside every interval, outside the joint region: a corner of the box
    corner = agreement.check({"a": 1.6, "b": 1.6}, iv, {}, draws, names,
                             agreement.inside_ellipsoid(np.array([1.6, 1.6]), draws))
    assert corner.inside_intervals and corner.inside_joint is False and not corner.agrees
    assert "joint 90 % region" in corner.why


def test_hpd_region_holds_ninety_percent_of_draws():
    lp = -0.5 * np.random.default_rng(1).chisquare(3, 20000)
    inside = np.array([agreement.inside_hpd(v, lp) for v in lp[:2000]])
    assert inside.mean() == pytest.approx(0.9, abs=0.02)
    assert not agreement.inside_hpd(-np.inf, lp)


@pytest.mark.slow
def test_rule_writes_the_posterior_beside_the_strategy_and_the_console_shows_it(
        tmp_path):
    """The workflow: cal_seq_posterior runs downstream of sequential's job, its files
    land in results/<study>/calibration/sequential_posterior/, the read-me-first page
    shows its answer, and the console's end block prints the answer with intervals and
    a report command carrying the --configfile the run used."""
    import json

    from tests.conftest import REPO, run_snakemake

    cfg = REPO / "tests" / "configs" / "seq_posterior.yaml"
    proc = run_snakemake(tmp_path, configfile=cfg, timeout=1200)
    out = tmp_path / "results" / "rosen" / "calibration" / "sequential_posterior"
    ans = pd.read_csv(out / "answer.csv")
    rec = pd.read_csv(tmp_path / "results" / "rosen" / "calibration" / "sequential.csv")
    assert list(ans["target_id"]) == list(rec["target_id"])
    # Rosenbrock is deterministic: the answer is sequential's best run
    np.testing.assert_allclose(ans[["x_x", "x_y"]], rec[["x_x", "x_y"]])
    assert {"inside_90", "inside_joint_90", "why_outside"} <= set(ans.columns)
    meta = json.loads((out / "posterior.json").read_text())
    assert meta["usable_runs"] == len(pd.read_csv(
        tmp_path / "results" / "rosen" / "calibration" / "runs" / "sequential.csv"))
    assert (out / "intervals.png").is_file() and (out / "targets" / "target_0.nc").is_file()
    page = (tmp_path / "results" / "report" / "summary.md").read_text()
    assert "sequential's posterior, from its own runs" in page
    console = proc.stderr
    assert "rosen: sequential (" in console and "target 0: x " in console
    import os

    # typed where the run was started: -d to its working directory, the config file
    rel = os.path.relpath(cfg)
    rel = str(cfg) if rel.startswith("..") else rel
    assert (f"-d {tmp_path} --report results/report.html --configfile {rel}") in console
