"""Both posteriors on a deterministic curve whose observations give ``sd_<series>`` at
one point only, at none, or at every point (the study that crashed ``sequential``'s
posterior with "Matrix is not positive definite"): no crash, the truth inside every
90 % interval, and the covariance positive definite by construction (docs/posterior.md,
"A floor under Sigma").

Why it crashed: the runs of a curve linear in its inputs are exactly rank 2, so the
basis truncates nothing and the emulator's error ``A C A^T + D`` has rank 2 over 10
points; where no sd is given (a pseudo-target of the kappa calibration, a simulated
target, an observed point without sd once tau -> 0 on noise-free data) nothing filled
the other 8 directions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from simcalib.metamodel.posterior import run, sequential_posterior, settings, target_specs
from simcalib.metamodel.posterior.build import build
from simcalib.metamodel.posterior.density import ERROR_FLOOR
from simcalib.study import Study
from simcalib.study.simulation import simulate_rows
from tests.fixtures.curves import PARAMS, SERIES, T, lin_curve

TRUTH = np.array([0.4, 0.3])
OUTS = [f"y@{t}" for t in T]
SD = 0.05
#: target 0: sd at one point (t = 3); 1: at none; 2: at every point
VARIANTS = {0: "sd at one point", 1: "no sd", 2: "sd at every point"}
QUICK = {"chains": 4, "warmup": 300, "draws": 800, "max_draws": 1600, "init_draws": 400,
         "pair_plots": 0, "save_draws": 20, "ppc_draws": 0, "calibration_targets": 8,
         "calibration_draws": 300}
ENS = {"members": 3, "hidden": [16], "epochs": 200, "patience": 40}


def lin_study() -> Study:
    return Study("lin", {"simulator": {"type": "python", "options": {"function": lin_curve}},
                         "parameters": PARAMS, "series": SERIES})


def observed() -> pd.DataFrame:
    """The simulator's own curve at the truth (noise-free), in the wide layout: the
    ``sd_y@<t>`` cells empty where a target gives no sd (three wide files' rows in one
    table, as ``pd.concat`` joins them)."""
    z = TRUTH[0] + TRUTH[1] * T
    rows = []
    for tid in VARIANTS:
        row: dict[str, float] = {"target_id": tid}
        for j, o in enumerate(OUTS):
            row[o] = z[j]
            given = tid == 2 or (tid == 0 and T[j] == 3)
            row[f"sd_{o}"] = SD if given else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def simulated() -> pd.DataFrame:
    """The same curve as a simulated target (true inputs known): no observation noise
    and no inferred scale at all."""
    df = observed().iloc[:1][["target_id", *OUTS]].copy()
    df["a"], df["b"] = TRUTH
    return df


def runs_of(st: Study, targets: int = 1) -> pd.DataFrame:
    """``sequential``-like runs: a spread over the box and a cloud around the truth,
    with the truth itself run three times (a deterministic simulator: equal outputs,
    the ensemble's spread there ~0)."""
    r = np.random.default_rng(2)
    X = np.vstack([np.column_stack([r.uniform(0, 1, 14), r.uniform(-1, 1, 14)]),
                   np.clip(TRUTH + 0.05 * r.normal(size=(15, 2)), [0, -1], [1, 1]),
                   np.tile(TRUTH, (3, 1))])
    df = pd.DataFrame(X, columns=["a", "b"])
    df.insert(0, "run_id", np.arange(len(X)))
    sims = simulate_rows(st, df, 0)
    return pd.concat([sims.assign(target_id=t) for t in range(targets)], ignore_index=True)


def assert_truth_inside(summary: pd.DataFrame, tids) -> None:
    for tid in tids:
        rows = summary[summary["target_id"] == tid].set_index("input")
        for name, x in zip(["a", "b"], TRUTH, strict=True):
            lo, hi = rows.at[name, "q5"], rows.at[name, "q95"]
            assert lo <= x <= hi, (VARIANTS.get(tid, tid), name, lo, x, hi)


def test_sd_where_given_tau_where_not_and_a_floor_everywhere():
    """The likelihood's covariance, term by term: an exact emulator of a rank-2 curve
    has error ~0, so Sigma is the given sds, tau s_t only at the points without sd, and
    the floor (eps s_t)^2; Cholesky succeeds for a simulated target (no noise at all),
    where it failed before."""
    st = lin_study()
    r = np.random.default_rng(0)
    X = np.column_stack([r.uniform(0, 1, 40), r.uniform(-1, 1, 40)])
    data = simulate_rows(st, pd.DataFrame({"run_id": range(40), "a": X[:, 0], "b": X[:, 1]}),
                         0)
    from simcalib.metamodel.ensemble import EnsembleSettings
    from simcalib.metamodel.posterior.emulator import fit_curve_emulator

    emu = fit_curve_emulator(data.assign(target_id=0), st.space.input_names, OUTS,
                             EnsembleSettings.from_config(ENS, "ens"), 0, "lin", None,
                             "basis")
    assert emu.model.layout.trunc_var.max() < 1e-20     # the basis truncates nothing
    specs = target_specs(observed(), st.space, OUTS, "auto")
    assert [s.infer_scale for s in specs] == [True, True, False]
    np.testing.assert_array_equal(specs[0].tau_mask(), (T != 3).astype(float))
    np.testing.assert_array_equal(specs[1].tau_mask(), np.ones(len(T)))
    assert specs[0].obs_var[3] == SD ** 2 and specs[0].obs_var[T != 3].sum() == 0
    post = build(st.space, emu.model, specs, settings({"error_dof": 0}), model=emu.model)
    s = post.scale
    x = TRUTH[None, :]
    # the likelihood at tau, against a Gaussian with the covariance written out
    for t, spec in enumerate(specs):
        for tau in (1e-30, 0.02):
            C = emu.model.cov(x)[0] + np.diag(spec.obs_var
                                             + (tau * s) ** 2 * spec.tau_mask()
                                             + (ERROR_FLOOR * s) ** 2)
            r_ = spec.z - emu.model.mean(x)[0]
            want = -0.5 * (r_ @ np.linalg.solve(C, r_) + np.linalg.slogdet(C)[1]
                           + len(T) * np.log(2 * np.pi))
            got = post.loglik(x, np.array([t]), np.array([np.log(tau)]))[0]
            np.testing.assert_allclose(got, want, rtol=1e-9)
    # a simulated target: no obs noise, no tau; the emulator's error alone is singular
    sim = target_specs(simulated(), st.space, OUTS, "auto")
    assert not sim[0].infer_scale and not sim[0].obs_var.any()
    raw = emu.model.cov(x)[0]
    assert np.linalg.eigvalsh(raw).min() < 1e-12 * np.linalg.eigvalsh(raw).max()
    psim = build(st.space, emu.model, sim, settings({"error_dof": 0}), model=emu.model)
    assert np.isfinite(psim.loglik(np.vstack([x, [[0.9, -0.9]]]), np.zeros(2, int))).all()


@pytest.mark.parametrize("error_scale", ["calibrate", 1.0])
def test_sequential_posterior_with_sd_at_one_point_none_or_all(error_scale):
    """``sequential``'s posterior (its default kappa calibration included, whose
    pseudo-targets carry no noise) on the three sd variants at once: no crash, every
    target's 90 % intervals contain the truth; tau is inferred where sds are missing."""
    torch.set_num_threads(1)
    st = lin_study()
    res = sequential_posterior(st, runs_of(st, 3), observed(), None,
                               {**QUICK, "error_scale": error_scale}, ENS, seed=1)
    assert_truth_inside(res.summary, VARIANTS)
    taus = set(res.summary.loc[res.summary["input"] == "tau", "target_id"])
    assert taus == {0, 1}
    assert res.meta["error_terms"]["inferred_scale_targets"] == 2


def test_sequential_posterior_of_a_simulated_noise_free_curve():
    """A simulated target (no observation noise, no tau) where the ensemble's spread
    at the truth is ~0 (the truth was run three times): no crash, truth inside."""
    torch.set_num_threads(1)
    st = lin_study()
    res = sequential_posterior(st, runs_of(st), simulated(), None, QUICK, ENS, seed=1)
    assert_truth_inside(res.summary, [0])
    assert "tau" not in set(res.summary["input"])


def test_an_emulator_with_zero_error_gives_a_proper_narrow_posterior():
    """The limit: an exact emulator whose error is 0 everywhere (no spread, no residual,
    a basis that truncates nothing) on the noise-free curve.  Sigma is then the given
    sds and the floor alone; every variant samples, tau stays proper (its posterior
    does not run to 0: below the floor it buys no likelihood) and the truth is inside."""
    from simcalib.metamodel.basis import fit_basis
    from simcalib.metamodel.posterior.curves import ConstantCov, CurveError, layout
    from simcalib.metamodel.posterior.summary import summarize

    torch.set_num_threads(1)
    st = lin_study()
    r = np.random.default_rng(0)
    X = np.column_stack([r.uniform(0, 1, 40), r.uniform(-1, 1, 40)])
    basis = fit_basis(X[:, :1] + X[:, 1:] * T, T, "y")
    lay = layout(OUTS, {"y": basis})
    exact = CurveError(ConstantCov(np.zeros((basis.k, basis.k))), lay, "basis", "exact",
                       full_mean=lambda x: x[:, :1] + x[:, 1:] * T,
                       y_std=np.full(len(T), basis.scale), input_names=["a", "b"])
    assert exact.cov(TRUTH[None, :]).max() < 1e-25       # truncation error: rounding
    cfg = settings({**QUICK, "error_scale": 1.0})
    specs = target_specs(observed(), st.space, OUTS, "auto")
    specs += target_specs(simulated().assign(target_id=3), st.space, OUTS, "auto")
    draws = run(st.space, exact, specs, cfg, 0, "exact", model=exact)
    table = summarize(draws)
    assert_truth_inside(table, [*VARIANTS, 3])
    tau = table[table["input"] == "tau"].set_index("target_id")
    # proper: tau ~ its prior's Jacobian below the floor (q5 ~ eps / 20), not at the
    # coordinate's bound (exp(-50)); small, as noise-free data say
    assert set(tau.index) == {0, 1}
    assert (tau["q5"] > 1e-6).all() and (tau["q95"] < 10 * ERROR_FLOOR).all(), tau


def test_design_posterior_with_sd_at_one_point_none_or_all(tmp_path):
    """The design route (``calibration.posterior``'s whole step, kappa calibrated on the
    metamodel's held-out rows, pseudo-targets without noise) on a metamodel trained on
    the same curve: the three sd variants and a simulated target, no crash, truth
    inside."""
    from simcalib.metamodel.posterior.pipeline import run_study
    from simcalib.metamodel.training import train_metamodel

    torch.set_num_threads(1)
    st = lin_study()
    r = np.random.default_rng(4)
    design = pd.DataFrame({"run_id": np.arange(96), "a": r.uniform(0, 1, 96),
                           "b": r.uniform(-1, 1, 96)})
    data = simulate_rows(st, design, 1)
    mm, m = train_metamodel(data, st.input_names, st.outputs,
                            {"hidden": [16], "epochs": 200, "patience": 40}, 0, "lin")
    assert m["series"]["y"]["basis_cv_relative"] < 1e-9   # nothing truncated: rank 2
    meta = run_study(st, mm, observed(), QUICK, 0, tmp_path / "obs", dataset=data)
    assert meta["kappa_calibrated"] and meta["targets"] == 3
    summary = pd.read_csv(tmp_path / "obs" / "posterior_summary.csv")
    assert_truth_inside(summary, VARIANTS)
    specs = target_specs(simulated(), st.space, OUTS, "auto")
    draws = run(st.space, mm, specs, settings({**QUICK, "error_scale": 1.0}), 0, "sim")
    from simcalib.metamodel.posterior.summary import summarize

    assert_truth_inside(summarize(draws), [0])


@pytest.mark.slow
def test_sequential_then_its_posterior_end_to_end(tmp_path):
    """The path that failed: the ``sequential`` strategy itself (no metamodel: Δ's scale
    from its start runs) on the deterministic curve, then its posterior with the
    default kappa calibration, the files written as the rule writes them."""
    from simcalib.metamodel.strategies.runner import calibrate
    from simcalib.metamodel.strategies.scale import RunScale

    torch.set_num_threads(1)
    st = lin_study()
    # as a wide observations file gives it: one sd column, at t = 3, for both targets
    targets = observed().iloc[[0, 0]].reset_index(drop=True).assign(target_id=[0, 1])
    targets = targets.drop(columns=[f"sd_{o}" for o in OUTS if o != "y@3"])
    seq = {"sequential": {"ensemble": {"members": 2, "hidden": [8], "epochs": 100,
                                       "warm_epochs": 50, "patience": 20},
                          "solver": {"options": {"mip_max_nodes": 100}}}}
    mm = RunScale(list(st.input_names), list(st.outputs), study="lin")
    rec, runs = calibrate(st, mm, targets, "sequential", {"budget": 12, **seq},
                          {"backend": "highs"}, 11)
    res = sequential_posterior(st, runs, targets, rec, QUICK, ENS, seed=1,
                               out_dir=tmp_path / "sequential_posterior")
    assert res.meta["kappa_calibrated"]
    assert (tmp_path / "sequential_posterior" / "posterior_summary.csv").is_file()
    assert_truth_inside(res.summary, [0, 1])
    assert set(res.summary.loc[res.summary["input"] == "tau", "target_id"]) == {0, 1}
