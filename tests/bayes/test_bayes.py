"""Bayesian ODE calibration (KOH / MOS): sensitivities, covariances, sampler, files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simcalib.bayes.kernels import (
    ObsLayout,
    mos_covariance,
    mos_from_koh,
    robust_cholesky,
)
from simcalib.bayes.models import BUILTIN, Setting, build_setting
from simcalib.bayes.ode import ODEModel, finite_difference_sensitivities
from simcalib.bayes.sampler import Likelihood, ObsData, Sampler, SamplerConfig, run
from simcalib.cli import main as cli_main
from simcalib.errors import ConfigError, DataError
from simcalib.seeds import rng


@pytest.fixture(scope="module")
def settings() -> dict[str, Setting]:
    return {name: make() for name, make in BUILTIN.items() if name != "sirv_iv"}


def _logistic(t, z, th, m):
    """A user ODE: logistic growth with harvesting, written with the math namespace."""
    (x,) = z
    r, k, h = th
    return [r * x * (1 - x / k) - h * m.exp(-t) * x]


def _rel_err(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-12))


@pytest.mark.parametrize("name", ["two_mass", "four_mass", "fitzhugh_nagumo", "sirv_irv"])
def test_sensitivities_match_finite_differences(settings, name):
    s = settings[name]
    theta = s.lower + (s.upper - s.lower) * np.linspace(0.3, 0.7, len(s.params))
    t = s.obs_times()
    sol = s.model.solve(theta, t)
    assert sol is not None and sol.s.shape == (len(t), s.model.n_state, s.model.n_param)
    fd = finite_difference_sensitivities(s.model, theta, t)
    assert _rel_err(sol.s, fd) < 1e-4


def test_spring_models_use_the_exact_linear_solver(settings):
    assert settings["two_mass"].model.solver == "expm"
    assert settings["four_mass"].model.solver == "expm"
    assert settings["fitzhugh_nagumo"].model.solver == "dopri5"   # compiled (numba)
    # forcing F0 cos(omega t) is carried exactly by the two oscillator states
    s = settings["four_mass"]
    sol = s.model.solve(s.lower, np.linspace(0, 2, 9), sensitivities=False)
    np.testing.assert_allclose(sol.z[:, -2], np.cos(5 * np.linspace(0, 2, 9)), atol=1e-10)


@pytest.mark.parametrize("differentiation", ["sympy", "torch"])
def test_user_ode_sensitivities_are_automatic(differentiation):
    model = ODEModel(_logistic, ["x"], ["r", "k", "h"], [0.1], differentiation=differentiation)
    assert model.differentiation == differentiation
    theta = np.array([1.2, 2.0, 0.3])
    t = np.linspace(0, 2, 5) if differentiation == "sympy" else np.array([0.0, 0.5, 1.0])
    sol = model.solve(theta, t)
    assert _rel_err(sol.s, finite_difference_sensitivities(model, theta, t)) < 1e-4
    gz, gth = model.jacobians(0.5, [0.4], theta)
    assert gz.shape == (1, 1) and gth.shape == (1, 3)


def test_user_ode_with_branches_falls_back_to_torch():
    def rhs(t, z, th, m):
        x = z[0]
        if x > 0.5:  # data-dependent branch: cannot be traced symbolically
            return [-th[0] * x]
        return [th[0] * x]

    model = ODEModel(rhs, ["x"], ["a"], [0.1])
    assert model.differentiation == "torch"
    sol = model.solve([0.5], np.linspace(0, 1, 5))
    assert sol is not None and np.all(np.isfinite(sol.s))


def test_mos_covariance_annihilates_sensitivities(settings):
    s = settings["two_mass"]
    theta = (s.lower + s.upper) / 2
    t = s.obs_times()
    sol = s.model.solve(theta, t)
    idx = s.obs_index
    jac = sol.s[:, idx, :].transpose(1, 0, 2).reshape(-1, len(s.params))
    layout = ObsLayout.build(np.tile(t, len(idx)), np.repeat(np.arange(len(idx)), len(t)))
    c = layout.koh(0.3, 1.1)
    cd = mos_covariance(c, jac)
    scale = np.abs(jac).max() * np.abs(c).max()
    assert np.abs(jac.T @ cd).max() < 1e-9 * scale
    assert np.allclose(cd, cd.T, atol=1e-12)
    assert np.linalg.eigvalsh(cd).min() > -1e-9 * np.abs(c).max()
    # a projected KOH draw satisfies the constraint too
    fac = mos_from_koh(c, jac)
    lc, _ = robust_cholesky(c)
    draw = fac.project(lc @ np.random.default_rng(0).standard_normal(len(c)))
    assert np.abs(jac.T @ draw).max() < 1e-8 * np.abs(jac).max() * np.abs(draw).max() * len(c)


def test_singular_inputs_are_regularised_and_counted():
    t = np.linspace(0, 1, 30)
    layout = ObsLayout.build(t, np.zeros(30, dtype=int))
    c = layout.koh(1.0, 5.0)  # numerically singular kernel matrix
    with pytest.raises(np.linalg.LinAlgError):
        np.linalg.cholesky(c - 1e-3 * np.eye(30))
    chol, jitter = robust_cholesky(c)
    assert jitter > 0 and np.all(np.isfinite(chol))
    jac = np.stack([t, np.zeros(30)], axis=1)  # a parameter the data do not see
    fac = mos_from_koh(layout.koh(1.0, 0.1), jac)
    assert fac.regularised >= 1 and fac.js.shape[1] == 1


def _toy_setting(sigma2: float) -> Setting:
    """z' = theta (z(0) = 0, so z = theta t), written as a linear homogeneous system."""
    model = ODEModel(lambda t, z, th, m: [th[0] * z[1], 0 * z[1]], ["z", "one"], ["theta"],
                     [0.0, 1.0])
    return Setting("toy", model, ["z"], {"theta": (-50.0, 50.0)}, t_end=1.0, n_obs=12,
                   gamma_prior=(np.log(0.2), 1e-4), ell_prior=(np.log(0.3), 1e-4),
                   sigma2_prior=(1e6, sigma2 * 1e6))


@pytest.mark.slow
def test_sampler_recovers_conjugate_gaussian_posterior():
    """Hyperparameters and sigma^2 pinned by near-degenerate priors: the marginal
    posterior of theta is then Gaussian and known in closed form."""
    sigma2 = 0.05
    s = _toy_setting(sigma2)
    assert s.model.solver == "expm"
    t = s.obs_times()
    g = np.random.default_rng(3)
    y = 1.5 * t + 0.2 * np.sin(6 * t) + np.sqrt(sigma2) * g.standard_normal(len(t))
    cov = ObsLayout.build(t, np.zeros(len(t), dtype=int)).koh(0.2, 0.3) + sigma2 * np.eye(len(t))
    prec = t @ np.linalg.solve(cov, t)
    mean, sd = t @ np.linalg.solve(cov, y) / prec, 1 / np.sqrt(prec)
    for method in ("koh", "mos"):
        pb = Likelihood(s, ObsData(t, y[:, None], ["z"]), method)
        n = 2500 if method == "koh" else 800  # MOS: only the location is checked
        res = run(pb, SamplerConfig(iterations=n, burn_in=n // 3, chains=2, log_every=0,
                                    adapt_every=100, initial_step_log=1e-5, progress=False),
                  11, ("toy", method))
        draws = np.concatenate([c.theta[:, 0] for c in res.chains])
        if method == "koh":
            assert abs(draws.mean() - mean) < 0.15 * sd
            assert abs(draws.std() / sd - 1) < 0.15
        else:
            # MOS removes the discrepancy along J = t: theta is then the least-squares fit
            ls = t @ y / (t @ t)
            assert abs(draws.mean() - ls) < 0.2 * draws.std() + 1e-3
        s2 = np.concatenate([c.sigma2 for c in res.chains])
        assert abs(s2.mean() / sigma2 - 1) < 0.01
        if method == "mos":  # every delta draw is orthogonal to the sensitivities
            delta = np.concatenate([c.delta for c in res.chains])
            assert np.abs(delta @ t).max() < 1e-8 * np.abs(delta).max() * len(t)


def test_nonfinite_ode_is_rejected_and_counted():
    model = ODEModel(lambda t, z, th, m: [th[0] * z[0] ** 2], ["x"], ["a"], [1.0])
    s = Setting("blowup", model, ["x"], {"a": (0.01, 5.0)}, t_end=2.0, n_obs=5)
    t = s.obs_times()
    pb = Likelihood(s, ObsData(t, np.ones((5, 1)), ["x"]), "koh")
    assert pb.forward(np.array([3.0])) is None  # blows up at t = 1/3
    sm = Sampler(pb, SamplerConfig(iterations=10, burn_in=0, chains=1, log_every=0))
    from simcalib.bayes.sampler import Counters

    counters = Counters()
    assert sm._state(np.array([3.0, -2.0, 0.0]), 0.1, counters) is None
    assert counters.ode_failures == 1
    assert sm._state(np.array([9.0, -2.0, 0.0]), 0.1, counters) is None
    assert counters.out_of_bounds == 1


def test_bad_bounds_and_priors_fail_early():
    with pytest.raises(ConfigError, match="bounds.k1"):
        build_setting("two_mass", {"bounds": {"k1": [5, 1]}})
    with pytest.raises(ConfigError, match="bounds.zz"):
        build_setting("two_mass", {"bounds": {"zz": [0, 1]}})
    with pytest.raises(ConfigError, match="gamma_prior"):
        build_setting("two_mass", {"gamma_prior": [0, -1]})
    with pytest.raises(ConfigError, match="unknown setting"):
        build_setting("three_mass")
    with pytest.raises(ConfigError, match="burn_in"):
        SamplerConfig.from_dict({"iterations": 10, "burn_in": 10})
    with pytest.raises(ConfigError, match="unknown key"):
        SamplerConfig.from_dict({"iteration": 10})


def test_semantic_check_of_the_config_section():
    from simcalib.bayes.checks import check_bayes
    from simcalib.config import schema_defaults

    def checked(section):      # a semantic check sees the validated, defaulted section
        check_bayes({"bayes": schema_defaults("bayes.schema.yaml", base=section)})

    checked({"settings": ["two_mass"], "sampler": {"iterations": 10, "burn_in": 5}})
    with pytest.raises(ConfigError, match="bayes.settings"):
        checked({"settings": ["nope"]})
    with pytest.raises(ConfigError, match="burn_in"):
        checked({"sampler": {"iterations": 10, "burn_in": 10}})
    with pytest.raises(ConfigError, match="bayes.setting_options.two_mass.sampler.theta_kernel"):
        checked({"sampler": {"engine": "sequential"},
                 "setting_options": {"two_mass": {"sampler": {"theta_kernel": "hmc"}}}})


@pytest.fixture(scope="module")
def two_mass_run(tmp_path_factory) -> Path:
    """CLI: simulate one replication and run KOH and MOS on it (short chains)."""
    d = tmp_path_factory.mktemp("bayes")
    params = json.dumps({"refine": 5})
    assert cli_main(["bayes-data", "--params", params, "--seed", "5", "--setting", "two_mass",
                     "--rep", "0", "--output-obs", str(d / "obs.csv"),
                     "--output-dense", str(d / "dense.csv"),
                     "--output-truth", str(d / "truth.json")]) == 0
    run_params = json.dumps({"sampler": {"iterations": 1200, "burn_in": 600, "log_every": 0,
                                         "adapt_every": 100}, "refine": 5, "predict_draws": 40})
    for method in ("koh", "mos"):
        assert cli_main(["bayes-run", "--params", run_params, "--seed", "5", "--setting",
                         "two_mass", "--method", method, "--rep", "0", "--data",
                         str(d / "obs.csv"), "--output-posterior", str(d / f"{method}.nc"),
                         "--output-summary", str(d / f"{method}.csv"), "--output-predictive",
                         str(d / f"{method}_pred.csv"), "--output-run-info",
                         str(d / f"{method}.json")]) == 0
    return d


@pytest.mark.slow
def test_short_two_mass_run_recovers_truth(two_mass_run):
    d = two_mass_run
    truth = json.loads((d / "truth.json").read_text())
    for method in ("koh", "mos"):
        summ = pd.read_csv(d / f"{method}.csv").set_index("parameter")
        for p, v in truth["theta"].items():
            assert summ.loc[p, "lower95"] <= v <= summ.loc[p, "upper95"], (method, p)
        info = json.loads((d / f"{method}.json").read_text())
        assert 0.05 < min(info["acceptance"]) < 0.7
        # chains start from least squares, not from the truth
        assert info["init_theta"] != truth["theta"]


def test_arviz_diagnostics_are_written(two_mass_run):
    from simcalib.bayes.posterior import posterior_dataset, read_netcdf, run_attrs

    d = two_mass_run
    summ = pd.read_csv(d / "mos.csv")
    assert list(summ.columns[3:]) == ["parameter", "mean", "sd", "lower95", "upper95", "median",
                                      "r_hat", "ess_bulk", "ess_tail", "converged", "minor_mode"]
    # the flag follows the thresholds exactly (R-hat <= 1.01 and bulk ESS >= 400, and
    # no minor mode the chains explored too little)
    expect = (summ["r_hat"] <= 1.01) & (summ["ess_bulk"] >= 400) & summ["minor_mode"].isna()
    assert (summ["converged"] == expect).all()
    assert np.all(summ["r_hat"] < 1.5) and np.all(summ["ess_bulk"] > 10)
    idata = read_netcdf(d / "mos.nc")
    post = posterior_dataset(idata)
    assert post["k1"].shape == (2, 600)
    assert post["discrepancy"].shape == (2, 600, 20, 2)
    assert {"hyper_gamma", "hyper_ell", "hyper_sigma2"} <= set(post.data_vars)
    assert not {"gamma", "ell", "sigma2", "delta"} & set(post.data_vars)
    ppc = idata.posterior_predictive["y"]
    assert ppc.shape == (2, 600, 20, 2) and np.isfinite(ppc.values).all()
    assert idata.observed_data["y"].shape == (20, 2)
    attrs = run_attrs(idata)
    assert attrs["method"] == "mos" and "ode_failures_chain0" in attrs
    pred = pd.read_csv(d / "mos_pred.csv")
    assert len(pred) == 2 * 96 and np.all(pred["xi_lo"] <= pred["xi_hi"])


def test_metrics_tables_and_plots(two_mass_run, tmp_path):
    d = two_mass_run
    for m in ("koh", "mos"):  # metrics reads per-rep files named as the workflow names them
        (tmp_path / m).mkdir()
    out = tmp_path
    assert cli_main(["bayes-metrics", "--setting", "two_mass", "--truth", str(d / "truth.json"),
                     "--dense", str(d / "dense.csv"), "--summary", str(d / "koh.csv"),
                     str(d / "mos.csv"), "--predictive", str(d / "koh_pred.csv"),
                     str(d / "mos_pred.csv"), "--output-metrics", str(out / "metrics.csv"),
                     "--output-metrics-outputs", str(out / "out.csv"), "--output-per-rep",
                     str(out / "per.csv")]) == 0
    met = pd.read_csv(out / "metrics.csv")
    assert {"method", "parameter", "bias", "rmse", "coverage", "width",
            "replications"} <= set(met.columns)
    assert len(met) == 8 and set(met["method"]) == {"koh", "mos"}
    assert cli_main(["bayes-table", "--setting", "two_mass", "--metrics", str(out / "metrics.csv"),
                     "--metrics-outputs", str(out / "out.csv"), "--output-params",
                     str(out / "tp.csv"), "--output-outputs", str(out / "to.csv")]) == 0
    tp = pd.read_csv(out / "tp.csv")
    assert tp.loc[(tp.method == "mos") & (tp.parameter == "k1"), "paper_rmse"].item() == 2.5667
    assert "Table 1" in (out / "tp.md").read_text()
    # every table carries its trust signal: unconverged replications are counted
    per = pd.read_csv(out / "per.csv")
    expect = (~per["converged"].astype(bool)).groupby([per["method"], per["parameter"]]).sum()
    got = met.set_index(["method", "parameter"])["unconverged"]
    assert (got.sort_index() == expect.sort_index()).all()
    md = (out / "tp.md").read_text()
    assert ("not converged" in md) == bool(got.sum()) and "unconverged" in md
    assert cli_main(["bayes-plot", "--setting", "two_mass", "--data", str(d / "obs.csv"),
                     "--dense", str(d / "dense.csv"), "--truth", str(d / "truth.json"),
                     "--predictive", str(d / "koh_pred.csv"), str(d / "mos_pred.csv"),
                     "--posterior", str(d / "koh.nc"), str(d / "mos.nc"),
                     "--output-uq", str(out / "uq.png"), "--output-marginals",
                     str(out / "marg.png")]) == 0
    assert (out / "uq.png").stat().st_size > 1000 and (out / "marg.csv").exists()


def test_missing_observations_are_masked(settings, tmp_path):
    s = settings["two_mass"]
    g = rng(1, "test")
    from simcalib.bayes.synthetic import simulate

    sim = simulate(s, g, refine=2)
    y = sim.obs.y.copy()
    y[3, 0] = np.nan
    y[7:9, 1] = np.nan
    pb = Likelihood(s, ObsData(sim.obs.t, y, sim.obs.outputs), "mos")
    assert pb.m == y.size - 3
    res = run(pb, SamplerConfig(iterations=60, burn_in=30, chains=1, log_every=0), 1, ("m",))
    assert res.chains[0].delta.shape == (30, pb.m)
    # the CLI reads empty cells as missing, and rejects non-numeric ones
    df = pd.DataFrame({"time": sim.obs.t, "x1": y[:, 0], "x2": y[:, 1]})
    df.to_csv(tmp_path / "obs.csv", index=False)
    from simcalib.bayes.data import read_obs

    obs, report = read_obs(str(tmp_path / "obs.csv"))
    assert np.isnan(obs.y[3, 0]) and obs.outputs == ["x1", "x2"]
    assert report.missing == {"x1": 1, "x2": 2}
    df.astype(object).assign(x1="oops").to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(DataError):
        read_obs(str(tmp_path / "bad.csv"))
    with pytest.raises(DataError, match="not states"):
        Likelihood(s, ObsData(sim.obs.t, y, ["x1", "v9"]), "koh")


def test_cli_reports_bad_params_in_one_line(tmp_path, capsys):
    rc = cli_main(["bayes-run", "--params", '{"sampler": {"iterationz": 3}}', "--seed", "1",
                   "--setting", "two_mass", "--method", "koh", "--data", str(tmp_path / "x.csv"),
                   "--output-posterior", str(tmp_path / "p.nc"),
                   "--output-summary", str(tmp_path / "s.csv")])
    assert rc == 2
    assert "iterationz" in capsys.readouterr().err


def test_data_are_shared_by_methods_and_reproducible(settings):
    from simcalib.bayes.synthetic import simulate

    s = settings["sirv_irv"]
    a = simulate(s, rng(3, "bayes", "sirv_irv", "data", 0), refine=3)
    b = simulate(s, rng(3, "bayes", "sirv_irv", "data", 0), refine=3)
    np.testing.assert_array_equal(a.obs.y, b.obs.y)
    assert a.obs.y.shape == (20, 3)
    lo, hi = s.lower, s.upper
    th = np.array(list(a.truth["theta"].values()))
    assert np.all((th >= lo) & (th <= hi))
