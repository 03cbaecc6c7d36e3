"""The metamodel posterior (simcalib.metamodel.posterior): a linear-Gaussian case whose
posterior is known exactly, an unidentified input, constraints, integers, and the
outputs of the cal-posterior step."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from simcalib.metamodel.posterior import TargetSpec, build, sample, settings
from simcalib.study.space import build_space

SIGMA = 0.3
A = np.array([[1.0, 0.5, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 0.0]])  # x3 never matters


class LinearModel:
    """M(x) = A x with a known Gaussian error: the exact posterior (away from the box)
    is N(mu, (A^T A / sigma^2)^-1) in the identified inputs."""

    input_names = ["x1", "x2", "x3"]
    output_names = ["y1", "y2", "y3"]
    y_std = np.ones(3)

    def __init__(self, A: np.ndarray = A, sigma: float = SIGMA) -> None:
        self.A, self.sigma = A, sigma

    def mean(self, X: np.ndarray) -> np.ndarray:
        return X @ self.A.T

    def cov(self, X: np.ndarray) -> np.ndarray:  # noqa: ARG002
        return self.sigma ** 2 * np.eye(3)


def _space(constraints: list[str] | None = None, integer: bool = False):
    return build_space({"parameters": {
        "x1": {"lower": -10, "upper": 10},
        "x2": {"lower": -10, "upper": 10, "integer": integer},
        "x3": {"lower": -10, "upper": 10}},
        "constraints": constraints or []})


CFG = settings({"chains": 4, "warmup": 600, "draws": 1500, "max_draws": 6000, "error_dof": 0,
                "init_draws": 4000})


def _draws(space, z: np.ndarray, seed: int = 1, model=None):
    model = model or LinearModel()
    spec = TargetSpec(0, {}, z, np.zeros(3), np.ones(3))
    post = build(space, model, [spec], CFG, model=model)
    return sample(post, CFG, np.random.default_rng(seed))


def test_linear_gaussian_posterior_matches_exact_mean_and_sd():
    z = np.array([1.0, -2.0, 0.5])
    d = _draws(_space(), z)
    assert d.converged.all()
    X = d.flat(0)
    Ai = A[:, :2]
    prec = Ai.T @ Ai / SIGMA ** 2
    cov = np.linalg.inv(prec)
    mu = cov @ Ai.T @ z / SIGMA ** 2
    sd = np.sqrt(np.diag(cov))
    ess = d.ess_bulk[0, :2]
    # Monte-Carlo error of a mean: sd / sqrt(ESS); of an sd: about sd / sqrt(2 ESS)
    assert np.all(np.abs(X[:, :2].mean(axis=0) - mu) < 4 * sd / np.sqrt(ess))
    assert np.all(np.abs(X[:, :2].std(axis=0) - sd) < 4 * sd / np.sqrt(2 * ess))
    assert np.all(d.r_hat[0] <= 1.01) and np.all(d.ess_bulk[0] >= 400)


def test_unidentified_input_keeps_its_prior():
    """x3 never enters the outputs: its posterior is the prior, uniform on [-10, 10]."""
    d = _draws(_space(), np.array([1.0, -2.0, 0.5]), seed=2)
    x3 = d.flat(0)[:, 2]
    ess = d.ess_bulk[0, 2]
    prior_sd = 20 / np.sqrt(12)
    assert abs(x3.mean()) < 4 * prior_sd / np.sqrt(ess)
    assert abs(x3.std() - prior_sd) < 0.1 * prior_sd
    assert x3.min() > -10 and x3.max() < 10
    # quartiles of a uniform
    assert np.allclose(np.quantile(x3, [0.25, 0.75]), [-5, 5], atol=1.5)


def test_constraints_hold_for_every_draw_and_truncate_the_posterior():
    """x1 + x2 <= 0 cuts through the unconstrained posterior (mean x1 + x2 ~ 0.5)."""
    z = np.array([1.0, -0.5, 0.5])
    space = _space(["x1 + x2 <= 0"])
    d = _draws(space, z, seed=3)
    X = d.X.reshape(-1, 3)
    assert np.all(X[:, 0] + X[:, 1] <= 1e-9)
    free = _draws(_space(), z, seed=3).X.reshape(-1, 3)
    assert (free[:, 0] + free[:, 1] > 0).mean() > 0.3   # the constraint does bite


def test_integer_input_gets_its_exact_discrete_posterior():
    """x2 integer: its posterior mass on each integer k is the Gaussian integral of
    the exact joint over x1 at x2 = k (computed on a grid), up to MC error."""
    z = np.array([1.0, -2.0, 0.5])
    d = _draws(_space(integer=True), z, seed=4)
    x2 = d.flat(0)[:, 1]
    assert np.all(x2 == np.round(x2))
    ks = np.arange(-10, 11)
    grid = np.linspace(-10, 10, 4001)
    mass = []
    for k in ks:
        X = np.column_stack([grid, np.full_like(grid, k), np.zeros_like(grid)])
        r = X @ A.T - z
        mass.append(np.exp(-0.5 * (r ** 2).sum(axis=1) / SIGMA ** 2).sum())
    p = np.array(mass) / np.sum(mass)
    emp = np.array([(x2 == k).mean() for k in ks])
    n_eff = float(d.ess_bulk[0, 1])
    assert np.all(np.abs(emp - p) < 4 * np.sqrt(p * (1 - p) / n_eff) + 1e-3)


def test_bad_settings_name_the_key():
    from simcalib.errors import ConfigError

    with pytest.raises(ConfigError, match="calibration.posterior"):
        settings({"chain": 4})
    with pytest.raises(ConfigError, match="max_draws"):
        settings({"draws": 2000, "max_draws": 1000})


def _heldout() -> tuple[pd.DataFrame, dict]:
    """40 held-out rows of the linear model with its true error, and quick settings of
    kappa's calibration (24 pseudo-targets)."""
    r = np.random.default_rng(5)
    X = r.uniform(-8, 8, (40, 3))
    Z = X @ A.T + r.normal(0, SIGMA, (40, 3))
    rows = pd.DataFrame(np.hstack([X, Z]), columns=["x1", "x2", "x3", "y1", "y2", "y3"])
    cfg = settings({"calibration_targets": 24, "error_dof": 0, "warmup": 300,
                    "calibration_draws": 400, "init_draws": 500})
    return rows, cfg


@pytest.mark.slow
def test_kappa_calibration_recovers_an_underestimated_error():
    """The model states an error sd 4x too small (variance 16x): simulation-based
    calibration on held-out rows must pick kappa near 16, and 1 for a correct model."""
    from simcalib.metamodel.posterior.scale import calibrate_kappa

    rows, cfg = _heldout()
    small = LinearModel(sigma=SIGMA / 4)
    k_small, table = calibrate_kappa(_space(), small, rows, cfg, 1, "test")
    k_right, _ = calibrate_kappa(_space(), LinearModel(), rows, cfg, 1, "test")
    assert 8.0 <= k_small <= 32.0
    assert 1.0 <= k_right <= 2.0
    assert set(table["kappa"]) >= {1.0, 16.0}


def test_kappa_is_where_the_signed_coverage_error_crosses_zero():
    """Ranks from a posterior too narrow at kappa 8 and too wide at 16: kappa lies
    between them, log-linear in the signed error; the grid's ends when it never
    crosses."""
    from simcalib.metamodel.posterior.scale import choose, coverage_table

    grid = [4.0, 8.0, 16.0, 32.0]
    u = (np.arange(200) + 0.5) / 200
    # rank u ** a: a < 1 pushes the truths' ranks up (too narrow), a > 1 down (too wide)
    shape = {4.0: 0.5, 8.0: 0.8, 16.0: 1.4, 32.0: 2.0}
    rank = np.concatenate([u ** shape[k] for k in grid])
    kap = np.repeat(grid, len(u))
    table = coverage_table(rank, kap, grid, len(u))
    s = table.groupby("kappa")["signed"].first()
    assert s[8.0] < 0 < s[16.0]
    k = choose(table)
    assert 8.0 < k < 16.0
    t = -s[8.0] / (s[16.0] - s[8.0])
    assert k == pytest.approx(8.0 * 2.0 ** t, rel=5e-3)   # 3 significant digits
    narrow = coverage_table(np.concatenate([u ** 0.5] * 4), kap, grid, len(u))
    wide = coverage_table(np.concatenate([u ** 2.0] * 4), kap, grid, len(u))
    assert choose(narrow) == 32.0 and choose(wide) == 4.0


class LinearPredictor:
    """A scalar metamodel as training writes one: ``predict`` and a recorded held-out
    residual covariance (its error model is then a ResidualError)."""

    input_names = ["x1", "x2", "x3"]
    output_names = ["y1", "y2", "y3"]
    y_std = np.ones(3)
    info = {"test_residual_cov": (SIGMA ** 2 * np.eye(3)).tolist()}

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.atleast_2d(X) @ A.T


def test_kappa_calibrates_on_the_residual_error_model_that_stands_in():
    """The coverage benchmark calibrates kappa on the error model the posterior will
    use; for a scalar metamodel that is a ResidualError, which must carry the
    metamodel's output scale (it crashed with AttributeError: no y_std)."""
    from simcalib.metamodel.posterior.noise import ResidualError, error_model
    from simcalib.metamodel.posterior.scale import calibrate_kappa, crossfit_ranks

    mm = LinearPredictor()
    model = error_model(mm)
    assert isinstance(model, ResidualError)
    np.testing.assert_array_equal(model.y_std, mm.y_std)
    rows, cfg = _heldout()
    kappa, _ = calibrate_kappa(_space(), model, rows, cfg, 1, "test")
    assert 0.7 <= kappa <= 2.0
    # the ranks are cross-fitted (half the rows each); the factor carries the kappa to
    # the covariance of all 40 rows: f(40) / f(20), f(n) = n / (n - 3 - 1)
    _, kap, m, factor = crossfit_ranks(_space(), model, rows, [1.0], cfg,
                                       np.random.default_rng(0))
    assert m == 24 and len(kap) == 24
    assert factor == pytest.approx((40 / 36) / (20 / 16))
    # too few rows for a half's covariance: in-sample, factor 1
    assert crossfit_ranks(_space(), model, rows.iloc[:14], [1.0], cfg,
                          np.random.default_rng(0))[3] == 1.0


def test_the_workflow_calibrates_kappa_on_the_error_model(monkeypatch):
    """``cal_posterior`` passes the metamodel alone; the calibration must get its error
    model (the thing with a residual covariance to cross-fit), not the metamodel, which
    has none: with the metamodel the cross-fit silently fell back to in-sample ranks."""
    from simcalib.metamodel import training
    from simcalib.metamodel.posterior import scale
    from simcalib.metamodel.posterior.build import error_scale
    from simcalib.metamodel.posterior.noise import ResidualError

    seen = {}

    def fake(space, model, rows, cfg, seed, *keys):
        seen["model"] = model
        return 3.0, None

    monkeypatch.setattr(scale, "calibrate_kappa", fake)
    monkeypatch.setattr(training, "heldout_rows", lambda dataset, mm, seed: dataset)
    rows = pd.DataFrame(np.zeros((4, 6)), columns=["x1", "x2", "x3", "y1", "y2", "y3"])
    kappa, _ = error_scale(_space(), LinearPredictor(), settings({}), 0, rows)
    assert kappa == 3.0
    assert isinstance(seen["model"], ResidualError) and hasattr(seen["model"],
                                                               "with_residuals")


class RosenMM:
    """A metamodel stand-in for the pipeline test: Rosenbrock with a small bias and a
    recorded held-out residual covariance."""

    input_names = ["x", "y", "a", "b"]
    output_names = ["f"]
    study = "rosen"

    def __init__(self) -> None:
        self.y_std = np.array([500.0])
        self.info = {"test_residual_cov": [[20.0 ** 2]], "test_r2": {"f": 0.99},
                     "min_r2": 0.9}

    def predict(self, X: np.ndarray) -> np.ndarray:
        from simcalib.simulators.rosenbrock import rosenbrock

        x, y, a, b = np.atleast_2d(X).T
        return (rosenbrock(x, y, a, b) + 5.0)[:, None]


def test_pipeline_writes_everything_and_flags(tmp_path):
    """cal-posterior's library path: summary with truth and flags, one readable netCDF
    per target, pair plot, intervals figure, predictive check counted as runs."""
    from simcalib.bayes.posterior import read_netcdf
    from simcalib.metamodel.posterior.pipeline import run_study
    from simcalib.study import Study
    from simcalib.study.simulation import simulate_rows

    study = Study("rosen", {
        "simulator": {"type": "rosenbrock", "options": {}},
        "parameters": {"x": {"lower": "a - 1", "upper": "a + 1"},
                       "y": {"lower": "a**2 - 5", "upper": "a**2 + 5"}},
        "contexts": {"a": {"values": [5, 10]}, "b": {"values": [10, 20]}}})
    t = pd.DataFrame({"target_id": [0, 1], "x": [4.5, 10.2], "y": [22.0, 98.0],
                      "a": [5.0, 10.0], "b": [10.0, 20.0]})
    targets = simulate_rows(study, t, 3, stream="targets", id_column="target_id")
    cfg = {"chains": 2, "warmup": 300, "draws": 500, "max_draws": 500, "init_draws": 500,
           "error_scale": 2.0, "ppc_draws": 3, "pair_plots": 1, "save_draws": 100}
    meta = run_study(study, RosenMM(), targets, cfg, 7, tmp_path)
    summ = pd.read_csv(tmp_path / "posterior_summary.csv")
    assert list(summ.columns[:10]) == ["target_id", "input", "mean", "sd", "q5", "q50",
                                       "q95", "r_hat", "ess_bulk", "converged"]
    assert len(summ) == 4 and "true" in summ
    assert (summ["q5"] <= summ["q50"]).all() and (summ["q50"] <= summ["q95"]).all()
    # 500 draws of 2 chains cannot reach ESS 400 per chain pair here: flagged, not hidden
    assert meta["converged_targets"] == int(summ.groupby("target_id")["converged"].first().sum())
    idata = read_netcdf(tmp_path / "targets" / "target_1.nc")
    assert idata.posterior["x"].shape == (2, 100)
    assert float(idata.observed_data["f"].values[0]) == pytest.approx(targets["f"].iloc[1])
    assert (tmp_path / "targets" / "pair_0.png").is_file()
    assert not (tmp_path / "targets" / "pair_1.png").exists()
    assert (tmp_path / "intervals.png").is_file()
    ppc = pd.read_csv(tmp_path / "ppc.csv")
    assert len(ppc) == 2 and meta["ppc"]["runs"] == 6
    assert meta["ppc"]["nominal_coverage"] == pytest.approx(0.5)
    assert meta["kappa"] == 2.0 and not meta["kappa_calibrated"]


def test_a_per_point_error_covariance_plugs_in():
    """An ensemble's spread varies with x: ``cov(X)`` may return (n, P, P), and the
    likelihood is then the Gaussian with that point's covariance."""

    class Spread(LinearModel):
        def cov(self, X):
            v = (0.1 + 0.05 * np.abs(X[:, 0]))[:, None, None] ** 2
            return v * np.eye(3)[None]

    model = Spread()
    spec = TargetSpec(0, {}, np.array([1.0, -2.0, 0.5]), np.zeros(3), np.ones(3))
    cfg = {**CFG, "error_scale": 1.0}
    post = build(_space(), model, [spec], cfg, model=model)
    X = np.array([[0.5, -2.0, 3.0], [4.0, 1.0, -3.0]])
    ll = post.loglik(X, np.zeros(2, dtype=int))
    from simcalib.metamodel.posterior.density import ERROR_FLOOR

    # the model's variance plus the documented floor (eps s_j)^2, s_j = y_std = 1
    sd = np.sqrt((0.1 + 0.05 * np.abs(X[:, 0])) ** 2 + ERROR_FLOOR ** 2)
    r = spec.z - X @ A.T
    exact = (-0.5 * (r ** 2).sum(axis=1) / sd ** 2 - 3 * np.log(sd)
             - 1.5 * np.log(2 * np.pi))
    np.testing.assert_allclose(ll, exact, rtol=1e-10)


def test_observed_target_without_sd_infers_the_observation_scale():
    """No true inputs and no sd_ columns: tau is sampled (a 'tau' row); a target with
    sd_ columns uses them and infers nothing."""
    from simcalib.metamodel.posterior.build import target_specs

    space = _space()
    df = pd.DataFrame({"target_id": [0, 1], "y1": [1.0, 1.0], "y2": [-2.0, -2.0],
                       "y3": [0.5, 0.5]})
    specs = target_specs(df, space, ["y1", "y2", "y3"], "auto")
    assert [s.infer_scale for s in specs] == [True, True]
    with_sd = df.assign(sd_y1=0.2, sd_y2=0.2, sd_y3=0.2)
    specs_sd = target_specs(with_sd, space, ["y1", "y2", "y3"], "auto")
    assert not any(s.infer_scale for s in specs_sd)
    assert np.allclose(specs_sd[0].obs_var, 0.04)
    cfg = {**CFG, "error_scale": 1.0, "max_draws": 1500}
    model = LinearModel()
    d = sample(build(space, model, specs[:1], cfg, model=model), cfg,
               np.random.default_rng(9))
    tau = d.tau[:, :, 0].reshape(-1)
    assert np.all(tau > 0) and d.post.D == 4
    # a residual of ~sigma leaves tau near its prior (half-normal 0.1): not pushed up
    assert np.median(tau) < 0.3


def _linear_sim(inputs: pd.DataFrame) -> pd.DataFrame:
    """y1 = x1 + x2, y2 = x1 - x2: both inputs pinned down by the two outputs."""
    return pd.DataFrame({"y1": inputs["x1"] + inputs["x2"], "y2": inputs["x1"] - inputs["x2"]})


class LinearMM:
    """The exact linear map as a 'metamodel' with a small recorded held-out error."""

    input_names = ["x1", "x2"]
    output_names = ["y1", "y2"]
    study = "lin"

    def __init__(self) -> None:
        self.y_std = np.array([1.0, 1.0])
        self.info = {"test_residual_cov": [[0.01, 0.0], [0.0, 0.01]],
                     "test_r2": {"y1": 0.999, "y2": 0.999}, "min_r2": 0.9}

    def predict(self, X: np.ndarray) -> np.ndarray:
        X = np.atleast_2d(X)
        return np.column_stack([X[:, 0] + X[:, 1], X[:, 0] - X[:, 1]])


def test_fully_identified_posterior_runs_and_lists_no_unidentified_input(tmp_path):
    """Every input pinned down (issue 41): the pipeline once crashed building the empty
    list of unidentified inputs (pandas >= 3: ``agg(axis=1)`` on an empty frame)."""
    from simcalib.metamodel.posterior.pipeline import run_study
    from simcalib.metamodel.posterior.summary import unidentified_inputs
    from simcalib.study import Study

    study = Study("lin", {"simulator": {"type": "python", "options": {
        "function": _linear_sim, "outputs": ["y1", "y2"]}},
        "parameters": {"x1": {"lower": 0, "upper": 10}, "x2": {"lower": 0, "upper": 10}}})
    targets = pd.DataFrame({"target_id": [0, 1], "x1": [3.0, 7.0], "x2": [4.0, 2.0],
                            "y1": [7.0, 9.0], "y2": [-1.0, 5.0], "status": "ok"})
    cfg = {"chains": 2, "warmup": 300, "draws": 500, "max_draws": 500, "init_draws": 500,
           "error_scale": 1.0, "ppc_draws": 0, "pair_plots": 0, "save_draws": 50,
           "error_dof": 0}
    meta = run_study(study, LinearMM(), targets, cfg, 3, tmp_path)
    summ = pd.read_csv(tmp_path / "posterior_summary.csv")
    assert summ["identified"].all()
    assert meta["unidentified"] == [] and unidentified_inputs(summ) == []
    # pinned down: sd 0.1 / sqrt(2) per input against a prior sd of 10 / sqrt(12)
    assert (summ["prior_sd_ratio"] < 0.1).all()
    np.testing.assert_allclose(summ["q50"], [3.0, 4.0, 7.0, 2.0], atol=0.1)
    # and a table with one unidentified row lists exactly that one
    mixed = summ.assign(identified=[True, False, True, True])
    assert unidentified_inputs(mixed) == ["0:x2"]
