"""Bayesian calibration on real data: a user's model and data file, no truth.

A tiny user model (exponential decay whose rate is called ``gamma``, the name the
discrepancy variance used to take, and whose initial value is a parameter) keeps
these tests fast: it is linear, so it is solved exactly (expm).
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simcalib.bayes.data import ObsData, read_obs
from simcalib.bayes.likelihood import Likelihood
from simcalib.bayes.models import build_setting
from simcalib.bayes.ode import ODEModel, finite_difference_sensitivities
from simcalib.cli import main as cli_main
from simcalib.errors import ConfigError, DataError
from tests.fixtures.bayes_data import DECAY, _decay_data


@pytest.fixture()
def user_dir(tmp_path: Path) -> Path:
    """A user's project: a model module and a data file beside the config."""
    (tmp_path / "decaymodel.py").write_text(DECAY)
    _decay_data(tmp_path / "decay.csv")
    return tmp_path


# ----------------------------------------------------------------------- (c) user models
def test_user_model_resolves_beside_the_config_without_pythonpath(user_dir):
    s = build_setting("decay", {"model": "decaymodel:setting", "data": "decay.csv"},
                     dirs=[str(user_dir)])
    assert s.params == ["gamma", "delta", "x0"] and s.data == str(user_dir / "decay.csv")
    assert (s.t_start, s.t_end, s.n_obs) == (0.0, 12.0, 20)
    # no priors given: left for the data to set (see test_data_scaled_priors...)
    assert s.gamma_prior is None and s.sigma2_prior is None
    by_file = build_setting("decay", {"model": str(user_dir / "decaymodel.py") + ":setting"})
    assert by_file.params == s.params


@pytest.mark.parametrize(("opts", "key", "match"), [
    ({"model": "nosuchmodule_xyz:setting"}, "model", "cannot import"),
    ({"model": "decaymodel:nothing"}, "model", "no function 'nothing'"),
    ({"model": "decaymodel:wrong_length"}, "model", "rhs returned 3 values for 1 states"),
    ({"model": "decaymodel:reserved"}, "model", "reserved"),
    ({"model": "decaymodel:setting", "data": "elsewhere.csv"}, "data", "not found"),
    ({"model": "decaymodel:setting", "data": "decay.csv", "t0": 3.0}, "t0",
     "after the first data time 0"),
])
def test_bad_user_models_fail_at_validation_naming_the_problem(user_dir, opts, key, match):
    with pytest.raises(ConfigError, match=match) as err:
        build_setting("decay", opts, dirs=[str(user_dir)])
    assert err.value.path == f"bayes.setting_options.decay.{key}"


def test_unknown_observed_state_in_data_is_a_validation_error(user_dir):
    pd.DataFrame({"time": [0, 1, 2], "y": [1.0, 2.0, 3.0]}).to_csv(user_dir / "b.csv",
                                                                  index=False)
    with pytest.raises(ConfigError, match=r"column\(s\) \['y'\] are not states"):
        build_setting("decay", {"model": "decaymodel:setting", "data": "b.csv"},
                     dirs=[str(user_dir)])


def test_import_error_inside_the_module_is_named(tmp_path):
    (tmp_path / "broken.py").write_text("import numpy\nraise RuntimeError('typo here')\n")
    with pytest.raises(ConfigError, match="importing 'broken:setting' failed: RuntimeError"):
        build_setting("b", {"model": "broken:setting"}, dirs=[str(tmp_path)])


def test_check_data_settings_validates_the_workflow_config(user_dir):
    from simcalib.bayes.checks import check_bayes, check_data_settings
    from simcalib.config import schema_defaults

    cfg = {"bayes": schema_defaults("bayes.schema.yaml", base={
        "settings": ["two_mass", "decay"], "sampler": {"iterations": 3000},
        "setting_options": {"decay": {"model": "decaymodel:setting", "data": "decay.csv"}}})}
    found = check_data_settings(cfg, [str(user_dir)])
    assert list(found) == ["decay"] and Path(found["decay"]).resolve() == user_dir / "decay.csv"
    cfg["bayes"]["setting_options"]["decay"]["sampler"] = {"burn_in": 3000}
    with pytest.raises(ConfigError, match="bayes.setting_options.decay.sampler.burn_in"):
        check_bayes(cfg)


# ----------------------------------------------------------------------- (h) data files
@pytest.mark.parametrize(("csv", "match"), [
    ("t,x\n0,1\n1,2\n", "no 'time' column"),
    ("time\n0\n1\n", "no observed-state column"),
    ("time,x\n0,1\n1,abc\n2,3\n", r"column 'x' has non-numeric values \['abc'\] on line\(s\) 3"),
    ("time,x\n0,1\n2,2\n1,3\n", r"not increasing at line\(s\) 4"),
    ("time,x\n0,1\n1,2\n1,3\n", r"duplicate times \[1.0\]"),
    ("time,x,y\n0,1,\n1,2,\n2,3,\n", "column 'y' has no finite value"),
    ("time,x\n0,1\n,2\n", "missing or non-finite times"),
])
def test_bad_data_files_fail_clearly(tmp_path, csv, match):
    (tmp_path / "d.csv").write_text(csv)
    with pytest.raises(DataError, match=match) as err:
        read_obs(tmp_path / "d.csv")
    assert str(tmp_path / "d.csv") in str(err.value)


def test_missing_and_infinite_values_are_counted_and_reported(tmp_path, caplog):
    (tmp_path / "d.csv").write_text("time,x,y\n0,1,5\n1,,6\n2,inf,\n3,4,8\n")
    with caplog.at_level(logging.WARNING):
        obs, rep = read_obs(tmp_path / "d.csv")
    assert rep.missing == {"x": 1, "y": 1} and rep.infinite == {"x": 1}
    assert rep.as_dict()["observed_entries"] == 5
    assert np.isnan(obs.y[2, 0]) and "missing values" in caplog.text


# ----------------------------------------------------------------------- (d) z0 parameters
@pytest.mark.parametrize("linear", [True, False])
def test_initial_states_as_parameter_expressions_have_sensitivities(linear):
    if linear:
        rhs = lambda t, z, th, m: [-th[0] * z[0], th[0] * z[0]]  # noqa: E731
    else:
        rhs = lambda t, z, th, m: [-th[0] * z[0] * z[1] / 100, th[0] * z[0] * z[1] / 100]  # noqa: E731
    model = ODEModel(rhs, ["a", "b"], ["k", "n", "b0"], z0=["n - b0", "b0"])
    assert model.solver == ("expm" if linear else "dopri5")
    th = np.array([0.4, 120.0, 7.0])
    t = np.linspace(0.0, 3.0, 7)
    sol = model.solve(th, t)
    np.testing.assert_allclose(sol.z[0], [113.0, 7.0])
    np.testing.assert_allclose(sol.s[0], [[0, 1, -1], [0, 0, 1]], atol=1e-12)
    fd = finite_difference_sensitivities(model, th, t)
    assert np.max(np.abs(sol.s - fd)) < 1e-5 * np.max(np.abs(fd))
    with pytest.raises(ValueError, match="not parameters"):
        ODEModel(rhs, ["a", "b"], ["k", "n", "b0"], z0=["N0", 1.0])


# ----------------------------------------------------------------------- (e) positivity
def test_data_setting_without_derived_priors_warns(user_dir, caplog):
    s = build_setting("decay", {"model": "decaymodel:setting", "data": "decay.csv"},
                     dirs=[str(user_dir)])
    with caplog.at_level(logging.WARNING):
        pb = Likelihood(s, read_obs(s.data)[0], "koh")
    assert "unit-scale defaults" in caplog.text and pb.setting.gamma_prior == (-2.0, 1.0)


def test_positive_setting_models_the_log_scale(user_dir):
    s = build_setting("decay", {"model": "decaymodel:setting", "data": "decay.csv",
                               "positive": True}, dirs=[str(user_dir)])
    obs, _ = read_obs(s.data, s.observed)
    s = s.with_unit_priors()  # the priors do not matter here
    pb = Likelihood(s, obs, "mos")
    np.testing.assert_allclose(pb.y, np.log(obs.y[:, 0]))
    th = np.array([0.3, 1.0, 100.0])
    f, jac = pb.forward(th)
    sol = s.model.solve(th, obs.t)
    np.testing.assert_allclose(f, np.log(sol.z[:, 0]))
    np.testing.assert_allclose(jac, sol.s[:, 0, :] / sol.z[:, :1])
    # the vectorized engine's batched forward works on the same (log) scale
    from simcalib.bayes.batched import BatchedForward

    fb, jb, okb = BatchedForward(pb)(np.stack([th, th]), True)
    assert okb.all()
    np.testing.assert_allclose(fb, np.stack([f, f]), rtol=1e-10)
    np.testing.assert_allclose(jb, np.stack([jac, jac]), rtol=1e-10)
    bad = ObsData(obs.t, np.where(np.arange(20)[:, None] == 3, -1.0, obs.y), obs.outputs)
    with pytest.raises(DataError, match=r"1 observation\(s\) <= 0"):
        Likelihood(s, bad, "koh")


# ----------------------------------------------------------------------- (f) hyperpriors
def test_data_scaled_priors_follow_the_units_of_the_data(user_dir):
    from simcalib.bayes.hyperpriors import data_scaled_priors
    from simcalib.seeds import rng

    out = {}
    for scale in (1.0, 100.0):
        _decay_data(user_dir / "s.csv", scale)
        s = build_setting("decay", {"model": "decaymodel:setting", "data": "s.csv",
                                   "bounds": {"x0": [1.0, 500.0 * scale],
                                              "delta": [0.0, 5.0 * scale]}},
                         dirs=[str(user_dir)])
        obs, _ = read_obs(s.data, s.observed)
        out[scale], rec = data_scaled_priors(s, obs, rng(1, "p"))
        assert rec["ls_residual_variance"] > 0
    a, b = out[1.0], out[100.0]
    # gamma and sigma^2 are variances: they scale with the square of the data's unit
    assert b.gamma_prior[0] - a.gamma_prior[0] == pytest.approx(np.log(1e4), abs=1e-3)
    assert b.sigma2_prior[1] / a.sigma2_prior[1] == pytest.approx(1e4, rel=1e-3)
    assert b.ell_prior == a.ell_prior  # time units did not change
    assert np.exp(a.ell_prior[0]) == pytest.approx(max(12.0 / 4, 2 * 12 / 19))
    # explicit priors are kept
    s = build_setting("decay", {"model": "decaymodel:setting", "data": "s.csv",
                               "gamma_prior": [0.0, 1.0], "ell_prior": [0.0, 1.0],
                               "sigma2_prior": [2.0, 1.0]}, dirs=[str(user_dir)])
    kept, rec = data_scaled_priors(s, read_obs(s.data)[0], rng(1, "p"))
    assert rec == {} and kept.gamma_prior == (0.0, 1.0)


# ----------------------------------------------------------------------- (a, b, g) end to end
@pytest.fixture(scope="module")
def data_run(tmp_path_factory) -> Path:
    """The CLI on a user's data set: both methods, diagnostics, comparison, figure."""
    d = tmp_path_factory.mktemp("realdata")
    (d / "decaymodel.py").write_text(DECAY)
    _decay_data(d / "decay.csv")
    params = json.dumps({"options": {"model": "decaymodel:setting", "data": "decay.csv",
                                     "sampler": {"iterations": 1600, "burn_in": 800}},
                         "sampler": {"iterations": 200, "burn_in": 100, "log_every": 0,
                                     "adapt_every": 100, "ls_starts": 4},
                         "convergence": {"r_hat": 1.05, "ess_bulk": 50},
                         "refine": 4, "predict_draws": 40, "search_dirs": [str(d)]})
    for m in ("koh", "mos"):
        assert cli_main(["bayes-run", "--params", params, "--seed", "3", "--setting", "decay",
                         "--method", m, "--data", str(d / "decay.csv"), "--output-posterior",
                         str(d / f"{m}.nc"), "--output-summary", str(d / f"{m}.csv"),
                         "--output-predictive",
                         str(d / f"{m}_pred.csv"), "--output-run-info", str(d / f"{m}.json")]) == 0
    return d


def test_a_users_gamma_is_not_the_discrepancy_variance(data_run):
    from simcalib.bayes.posterior import posterior_dataset, read_netcdf

    d = data_run
    for m in ("koh", "mos"):
        summ = pd.read_csv(d / f"{m}.csv")
        assert summ["parameter"].tolist() == ["gamma", "delta", "x0", "hyper_gamma",
                                              "hyper_ell", "hyper_sigma2"]
        row = summ.set_index("parameter")
        # the decay rate of the data (0.35) is recovered; gamma^delta (variance, in
        # squared data units) lives on a different scale entirely
        assert 0.2 < row.loc["gamma", "mean"] < 0.5
        assert row.loc["hyper_gamma", "mean"] > 1.0
        post = posterior_dataset(read_netcdf(d / f"{m}.nc"))
        assert not np.allclose(post["gamma"].values, post["hyper_gamma"].values)
        info = json.loads((d / f"{m}.json").read_text())
        assert info["hyperpriors"]["source"].startswith("data")
        assert info["iterations"] == 1600  # the setting's own sampler override
        assert info["data"]["rows"] == 20


def test_real_data_outputs_carry_trust_signals(data_run, tmp_path, caplog):
    from simcalib.bayes.posterior import read_netcdf

    d = data_run
    summ = pd.read_csv(d / "mos.csv")
    assert {"r_hat", "ess_bulk", "ess_tail", "converged", "lower95", "upper95"} <= set(summ)
    idata = read_netcdf(d / "mos.nc")
    assert idata.posterior_predictive["y"].shape[-2:] == (20, 1)
    assert idata.observed_data["y"].shape == (20, 1)
    # an impossible threshold: every run is unconverged and says so, once per chain set
    params = json.dumps({"options": {"model": "decaymodel:setting", "data": "decay.csv"},
                         "sampler": {"iterations": 60, "burn_in": 30, "log_every": 0,
                                     "ls_starts": 2},
                         "convergence": {"ess_bulk": 1e9}, "search_dirs": [str(d)]})
    with caplog.at_level(logging.WARNING):
        assert cli_main(["bayes-run", "--params", params, "--seed", "3", "--setting",
                         "decay", "--method", "koh", "--data", str(d / "decay.csv"),
                         "--output-posterior", str(tmp_path / "p.nc"), "--output-summary",
                         str(tmp_path / "s.csv")]) == 0
    assert caplog.text.count("NOT CONVERGED") == 1
    assert not pd.read_csv(tmp_path / "s.csv")["converged"].any()


@pytest.mark.slow
def test_real_data_tables_and_figures_without_truth(data_run, tmp_path):
    d = data_run
    out = tmp_path
    assert cli_main(["bayes-compare", "--setting", "decay", "--data", str(d / "decay.csv"),
                     "--summary", str(d / "koh.csv"), str(d / "mos.csv"), "--predictive",
                     str(d / "koh_pred.csv"), str(d / "mos_pred.csv"), "--output-params",
                     str(out / "tp.csv"), "--output-outputs", str(out / "to.csv")]) == 0
    tp = pd.read_csv(out / "tp.csv")
    assert len(tp) == 6 and {"koh_mean", "mos_mean", "koh_converged", "mos_r_hat"} <= set(tp)
    assert tp["parameter"].tolist() == ["gamma", "delta", "x0", "hyper_gamma", "hyper_ell",
                                        "hyper_sigma2"]  # the model's order, not sorted
    md = (out / "tp.md").read_text()
    assert "truth is unknown" in md and "onverge" in md
    ppc = pd.read_csv(out / "to.csv")
    assert set(ppc["method"]) == {"koh", "mos"} and (ppc["n_obs"] == 20).all()
    # the band for new data covers most of the data (20 points: not a tight test)
    assert (ppc["coverage_y95"] >= 0.7).all()
    assert cli_main(["bayes-plot", "--setting", "decay", "--data", str(d / "decay.csv"),
                     "--predictive", str(d / "koh_pred.csv"), str(d / "mos_pred.csv"),
                     "--summary", str(d / "koh.csv"), str(d / "mos.csv"),
                     "--output-uq", str(out / "uq.png")]) == 0
    assert (out / "uq.png").stat().st_size > 5000
    assert cli_main(["bayes-diagnostics", "--posterior", str(d / "mos.nc"), "--output-trace",
                     str(out / "trace.png"), "--output-rank", str(out / "rank.png"),
                     "--output-pair", str(out / "pair.png")]) == 0
    for f in ("trace", "rank", "pair"):
        assert (out / f"{f}.png").stat().st_size > 5000
    # marginals need a truth: asking without one is a clear error
    assert cli_main(["bayes-plot", "--setting", "decay", "--data", str(d / "decay.csv"),
                     "--predictive", str(d / "koh_pred.csv"), "--output-uq", str(out / "u.png"),
                     "--output-marginals", str(out / "m.png")]) == 2


def test_positive_synthetic_data_stay_positive_and_are_fitted_on_the_log_scale(user_dir):
    from simcalib.bayes.synthetic import simulate
    from simcalib.seeds import rng

    s = build_setting("decay", {"model": "decaymodel:setting", "positive": True,
                               "noise_variance": 0.01, "t_end": 5.0}, dirs=[str(user_dir)])
    assert s.gamma_prior is not None  # no data: the unit-scale priors
    sim = simulate(s, rng(2, "pos"), refine=3)
    assert np.all(sim.obs.y > 0) and np.all(sim.dense["xi"] > 0)
    # multiplicative: log(xi / f) is the discrepancy
    np.testing.assert_allclose(np.log(sim.dense["xi"] / sim.dense["f"]), sim.dense["delta"])
    Likelihood(s, sim.obs, "mos")  # accepted as positive data


# ----------------------------------------------------------------------- overflow (issue 43)
def test_counts_that_would_overflow_the_likelihood_are_refused_naming_the_column(user_dir,
                                                                               capsys):
    """Counts of 1e300 used to fit with exit code 0 and raw overflow warnings: squared
    in the likelihood they are inf.  Now a DataError names the column and magnitude
    (and suggests the log scale, where 1e300 is fine: log(1e300) = 691)."""
    y = _decay_data(user_dir / "huge.csv", scale=1e298)
    assert np.nanmax(y) > 1e299
    params = json.dumps({"options": {"model": "decaymodel:setting", "data": "huge.csv"},
                         "sampler": {"iterations": 20, "burn_in": 10, "log_every": 0},
                         "search_dirs": [str(user_dir)]})
    code = cli_main(["bayes-run", "--params", params, "--seed", "1", "--setting", "decay",
                     "--method", "koh", "--data", str(user_dir / "huge.csv"),
                     "--output-posterior", str(user_dir / "p.nc"),
                     "--output-summary", str(user_dir / "s.csv")])
    err = capsys.readouterr().err
    assert code != 0 and not (user_dir / "p.nc").exists()
    assert re.search(r"huge.csv: column 'x' has values of magnitude 1\.\d+e\+300", err), err
    assert "positive: true" in err
    s = build_setting("decay", {"model": "decaymodel:setting", "data": "huge.csv",
                               "positive": True}, dirs=[str(user_dir)])
    obs, _ = read_obs(s.data, s.observed)
    pb = Likelihood(s.with_unit_priors(), obs, "koh")       # log scale: accepted
    assert np.all(np.isfinite(pb.y)) and pb.y.max() < 700


def test_times_beyond_float64_squares_are_refused(tmp_path):
    (tmp_path / "d.csv").write_text("time,x\n0,1\n1e200,2\n2e200,3\n")
    with pytest.raises(DataError, match=r"column 'time' has values of magnitude 2e\+200"):
        read_obs(tmp_path / "d.csv")
