"""The posterior on curves (issue 42 item 3): the design route and ``sequential``'s own
posterior on a study with a series output, against the analytic (Gaussian linear)
posterior of a curve linear in its inputs; unobserved points, per-point sds, the
error model's structure and a fully identified curve."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from simcalib.metamodel import curves
from simcalib.metamodel.basis import fit_basis
from simcalib.metamodel.model import Metamodel, build_net
from simcalib.metamodel.posterior import run, sequential_posterior, settings, target_specs
from simcalib.metamodel.posterior.curves import ConstantCov, CurveError, layout
from simcalib.metamodel.posterior.noise import error_model
from simcalib.metamodel.posterior.summary import summarize, unidentified_inputs
from simcalib.study import Study
from simcalib.study.simulation import simulate_rows

T = np.arange(0, 10)
PARAMS = {"a": {"lower": -1.0, "upper": 2.0}, "b": {"lower": -1.0, "upper": 1.0}}
TRUTH = np.array([0.4, 0.3])
SD = 0.03 * (1 + T)              # per-point observation sds, 0.03 .. 0.3
FAST = {"chains": 4, "warmup": 400, "draws": 1500, "max_draws": 3000, "init_draws": 400,
        "error_dof": 0, "error_scale": 1.0, "pair_plots": 0, "save_draws": 50,
        "obs_noise": "auto", "ppc_draws": 0}


def lin_curve(df: pd.DataFrame) -> pd.DataFrame:
    """y_t = a + b t: a curve linear in its inputs."""
    a, b = df["a"].to_numpy(), df["b"].to_numpy()
    return pd.DataFrame({"y": [list(a[i] + b[i] * T) for i in range(len(df))]})


def lin_study() -> Study:
    return Study("lincurve", {"simulator": {"type": "python", "options": {
        "function": lin_curve}}, "parameters": PARAMS,
        "series": {"y": {"index": "t", "points": T.tolist()}}})


OUTS = [f"y@{t}" for t in T]


def exact_metamodel(resid_sd: float = 1e-5) -> Metamodel:
    """A metamodel of the curve that is exact: a ReLU layer kept in its linear region,
    the basis weights linear in (a, b), the decode folded in (as training does)."""
    r = np.random.default_rng(0)
    X = np.column_stack([r.uniform(-1, 2, 40), r.uniform(-1, 1, 40)])
    Y = X[:, :1] + X[:, 1:] * T
    basis = fit_basis(Y, T, "y")
    # weights = c0 + X @ C (exactly: encode is affine, the curve linear in X)
    W = basis.encode(Y)
    C, *_ = np.linalg.lstsq(np.column_stack([np.ones(40), X]), W, rcond=None)
    net = build_net(2, [2], 2)
    lin = [m for m in net if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        lin[0].weight.copy_(torch.eye(2, dtype=lin[0].weight.dtype))
        lin[0].bias.fill_(10.0)                     # h = x + 10 > 0: ReLU is identity
        lin[1].weight.copy_(torch.as_tensor(C[1:].T, dtype=lin[1].weight.dtype))
        lin[1].bias.copy_(torch.as_tensor(C[0] - 10.0 * C[1:].sum(axis=0),
                                          dtype=lin[1].weight.dtype))
    inner = Metamodel(net, ["a", "b"], ["y#0", "y#1"], np.zeros(2), np.ones(2),
                      np.zeros(2), np.ones(2))
    info = {"series": {"y": {"basis": basis.to_json(), "test_r2": 1.0}},
            "test_residual_cov": (resid_sd ** 2 * np.eye(len(T))).tolist()}
    mm = curves.fold(inner, OUTS, {"y": basis}, info)
    np.testing.assert_allclose(mm.predict(X), Y, atol=1e-9)
    return mm


def analytic(z: np.ndarray, sd: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The Gaussian linear posterior of (a, b) under a flat prior: mean, covariance."""
    D = np.column_stack([np.ones(len(T)), T])[keep]
    P = D.T @ (D / sd[keep, None] ** 2)
    cov = np.linalg.inv(P)
    return cov @ D.T @ (z[keep] / sd[keep] ** 2), cov


def observed_curve(seed: int = 5) -> np.ndarray:
    return TRUTH[0] + TRUTH[1] * T + SD * np.random.default_rng(seed).normal(size=len(T))


def targets_table(z: np.ndarray) -> pd.DataFrame:
    """Three targets: every point seen; the first five unobserved (empty, as a long
    file gives them); the first five given wild values with weight 0."""
    rows = []
    for tid in range(3):
        row = {"target_id": tid}
        for j, o in enumerate(OUTS):
            v = z[j]
            if tid == 1 and j < 5:
                v = np.nan
            if tid == 2 and j < 5:
                v = 50.0 + j
                row[f"weight_{o}"] = 0.0
            elif tid == 2:
                row[f"weight_{o}"] = 1.0
            row[o] = v
            row[f"sd_{o}"] = np.nan if (tid == 1 and j < 5) else SD[j]
        rows.append(row)
    return pd.DataFrame(rows)


def moments(draws, t: int) -> tuple[np.ndarray, np.ndarray]:
    X = draws.flat(t)
    return X.mean(axis=0), np.cov(X.T)


@pytest.fixture(scope="module")
def design_draws():
    torch.set_num_threads(1)
    st = lin_study()
    mm = exact_metamodel()
    z = observed_curve()
    specs = target_specs(targets_table(z), st.space, list(mm.output_names), "auto")
    draws = run(st.space, mm, specs, settings(FAST), 7, "curve-test")
    return st, mm, z, specs, draws


@pytest.mark.slow
def test_linear_curve_posterior_matches_the_analytic_gaussian(design_draws):
    """Centred on the truth's posterior mean, with its width and correlation: the
    per-point sds enter as given (heteroscedastic weighted least squares)."""
    _, _, z, specs, draws = design_draws
    assert not specs[0].infer_scale and np.allclose(specs[0].obs_var, SD ** 2)
    mu, cov = analytic(z, SD, np.ones(len(T), bool))
    m, c = moments(draws, 0)
    sd = np.sqrt(np.diag(cov))
    assert np.all(np.abs(m - mu) < 0.15 * sd), (m, mu, sd)
    np.testing.assert_allclose(np.sqrt(np.diag(c)), sd, rtol=0.1)
    rho, rho_a = c[0, 1] / np.sqrt(c[0, 0] * c[1, 1]), cov[0, 1] / np.prod(sd)
    assert abs(rho - rho_a) < 0.05
    assert np.all(np.abs(mu - TRUTH) < 3 * sd)        # and the truth inside
    # the per-point sds matter: equal sds (their mean) give a clearly different width
    _, cov_eq = analytic(z, np.full(len(T), SD.mean()), np.ones(len(T), bool))
    assert np.max(np.abs(np.sqrt(np.diag(cov_eq)) / sd - 1)) > 0.3
    assert draws.converged[0]


@pytest.mark.slow
def test_unobserved_points_leave_the_likelihood(design_draws):
    """A point not observed (empty) or weighted 0 (with a wild value) is ignored: the
    posterior is the analytic one on the observed points, wider than with all."""
    _, _, z, specs, draws = design_draws
    keep = T >= 5
    assert np.array_equal(specs[1].weight > 0, keep) and np.array_equal(specs[2].weight > 0,
                                                                         keep)
    mu, cov = analytic(z, SD, keep)
    sd = np.sqrt(np.diag(cov))
    _, cov_all = analytic(z, SD, np.ones(len(T), bool))
    assert np.all(sd > 1.3 * np.sqrt(np.diag(cov_all)))
    for t in (1, 2):
        m, c = moments(draws, t)
        assert np.all(np.abs(m - mu) < 0.2 * sd), (t, m, mu, sd)
        np.testing.assert_allclose(np.sqrt(np.diag(c)), sd, rtol=0.12)


@pytest.mark.slow
def test_fully_identified_curve_summarises_without_crash(design_draws, tmp_path):
    """Every input pinned down: an empty 'unidentified' list, and the design route's
    whole step (pipeline.run_study) runs and writes its files."""
    from simcalib.metamodel.posterior.pipeline import run_study

    st, mm, z, _, draws = design_draws
    table = summarize(draws)
    assert unidentified_inputs(table) == []
    assert table["identified"].all()
    meta = run_study(st, mm, targets_table(z).head(1), FAST, 0, tmp_path)
    assert meta["unidentified"] == [] and meta["targets"] == 1
    assert "curves: basis error model" in meta["sigma_source"]
    assert (tmp_path / "posterior_summary.csv").is_file()


def test_curve_error_model_is_correlated_full_rank_and_maps_the_basis():
    """Sigma = A C A^T + D: correlated between points, full rank where the raw P x P
    residual covariance of a few held-out rows is not; 'independent' is its diagonal."""
    mm = exact_metamodel()
    basis = curves.bases_of(mm)["y"]
    basis.error["cv_point_rms"] = np.full(len(T), 0.01)
    r = np.random.default_rng(1)
    # three held-out residual curves that are shifts along the basis (rank 3 < 10)
    Rrows = basis.decode(r.normal(0, 0.1, (3, basis.k))) - basis.mean
    R = Rrows.T @ Rrows / 3
    assert np.linalg.matrix_rank(R) <= 3
    lay = layout(OUTS, {"y": basis})
    np.testing.assert_allclose(lay.Q @ basis.B, basis.B, atol=1e-12)   # a projector on B
    full = CurveError(ConstantCov(lay.Pi @ R @ lay.Pi.T), lay, "basis", "test",
                      full_mean=mm.predict)
    S = full.cov(np.zeros((1, 2)))
    assert np.linalg.eigvalsh(S).min() >= 0.01 ** 2 * (1 - 1e-9)
    np.testing.assert_allclose(S - np.diag(np.diag(S)), R - np.diag(np.diag(R)), atol=1e-12)
    ind = CurveError(ConstantCov(lay.Pi @ R @ lay.Pi.T), lay, "independent", "test",
                     full_mean=mm.predict)
    Si = ind.cov(np.zeros((1, 2)))
    np.testing.assert_allclose(Si, np.diag(np.diag(S)), atol=1e-15)
    # the design route builds the same model from the metamodel's info
    mm.info["series"]["y"]["basis"] = basis.to_json()
    mm.info["test_residual_cov"] = R.tolist()
    em = error_model(mm)
    np.testing.assert_allclose(em.cov(np.zeros((1, 2))), S, atol=1e-12)
    assert np.allclose(em.y_std, basis.scale)
    # kappa's cross-fit: the covariance re-estimated from residual rows is the one the
    # design route builds from their second moment
    refit = em.with_residuals(Rrows, np.zeros_like(Rrows))
    np.testing.assert_allclose(refit.cov(np.zeros((1, 2))), S, atol=1e-12)
    np.testing.assert_allclose(refit.mean(np.zeros((1, 2))), em.mean(np.zeros((1, 2))))
    with pytest.raises(Exception, match="curve_errors"):
        CurveError(ConstantCov(R), lay, "ar1", "test")


@pytest.mark.slow
def test_sequential_posterior_on_a_curve_centres_on_the_truth():
    """``sequential``'s posterior from runs of a linear curve: the ensemble on the
    basis weights, the likelihood on every observed point with its sd; centred on the
    analytic posterior, no narrower than it (the ensemble's error widens it), and an
    unobserved point is ignored."""
    torch.set_num_threads(1)
    st = lin_study()
    r = np.random.default_rng(2)
    X = np.vstack([np.column_stack([r.uniform(-1, 2, 24), r.uniform(-1, 1, 24)]),
                   TRUTH + 0.1 * r.normal(size=(24, 2))])
    df = pd.DataFrame(X, columns=["a", "b"])
    df.insert(0, "run_id", np.arange(len(X)))
    runs = pd.concat([simulate_rows(st, df, 0).assign(target_id=0),
                      simulate_rows(st, df, 0).assign(target_id=1)], ignore_index=True)
    z = observed_curve()
    tg = targets_table(z).head(2)
    ens = {"members": 3, "hidden": [16, 16], "epochs": 300, "patience": 60}
    res = sequential_posterior(st, runs, tg, None, FAST, ens, seed=1)
    curve_meta = res.meta["error_terms"]["curves"]
    assert curve_meta["error_model"] == "basis"
    assert curve_meta["series"]["y"]["components"] == 2
    for t, keep in ((0, np.ones(len(T), bool)), (1, T >= 5)):
        mu, cov = analytic(z, SD, keep)
        sd = np.sqrt(np.diag(cov))
        m, c = moments(res.draws, t)
        s = np.sqrt(np.diag(c))
        # the emulator's error (3 nets on 48 runs) widens it; never narrower
        assert np.all(s > 0.9 * sd) and np.all(s < 4.0 * sd), (t, s, sd)
        assert np.all(np.abs(m - mu) < 1.0 * s), (t, m, mu, s)
        assert np.all(np.abs(m - TRUTH) < 2.0 * s), (t, m, s)
    assert res.meta["unidentified"] == []


def test_likelihood_in_chunks_equals_one_piece(monkeypatch):
    """Many lanes of a 10-point curve: the chunked likelihood (memory bound) is the
    same numbers as one piece."""
    from simcalib.metamodel.posterior import density
    from simcalib.metamodel.posterior.build import build

    st = lin_study()
    mm = exact_metamodel(resid_sd=0.05)
    specs = target_specs(targets_table(observed_curve()), st.space, OUTS, "auto")
    post = build(st.space, mm, specs, settings(FAST))
    r = np.random.default_rng(3)
    t = r.integers(0, 3, 5000)
    X = post.to_x(r.random((5000, 2)), t)
    whole = post.loglik(X, t)
    monkeypatch.setattr(density, "LANE_FLOATS", 7 * 100)   # chunks of 7 lanes
    np.testing.assert_allclose(post.loglik(X, t), whole, rtol=1e-12, atol=1e-9)
    assert np.isfinite(whole).all()


def test_the_config_key_chooses_the_curve_error_model():
    """``calibration.posterior.curve_errors`` reaches the design route's likelihood
    (build); a value outside the enum is a ConfigError naming the key."""
    from simcalib.errors import ConfigError
    from simcalib.metamodel.posterior.build import build

    mm = exact_metamodel()
    basis = curves.bases_of(mm)["y"]
    basis.error["cv_point_rms"] = np.full(len(T), 0.01)
    mm.info["series"]["y"]["basis"] = basis.to_json()
    r = np.random.default_rng(1)
    Rrows = basis.decode(r.normal(0, 0.1, (3, basis.k))) - basis.mean
    mm.info["test_residual_cov"] = (Rrows.T @ Rrows / 3).tolist()
    st = lin_study()
    specs = target_specs(targets_table(observed_curve()), st.space, OUTS, "auto")
    x0 = np.zeros((1, 2))
    S = {mode: build(st.space, mm, specs, settings({"curve_errors": mode})).model.cov(x0)
         for mode in ("basis", "independent")}
    assert settings({})["curve_errors"] == "basis"
    np.testing.assert_allclose(S["independent"], np.diag(np.diag(S["basis"])), atol=1e-15)
    assert np.abs(S["basis"] - np.diag(np.diag(S["basis"]))).max() > 1e-6
    with pytest.raises(ConfigError, match="curve_errors"):
        settings({"curve_errors": "ar1"})
