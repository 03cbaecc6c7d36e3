"""The level model of a curve's error (simcalib.metamodel.levelnoise; the posterior's
``scaled`` curve error model): the slope recovered from residuals whose variance grows
with the level, none on constant noise, the factors' normalisation, the level-free
covariance, and the error model's covariance scaled at the predicted curve."""

from __future__ import annotations

import numpy as np
import pytest

from simcalib.errors import DataError
from simcalib.metamodel import levelnoise
from simcalib.metamodel.posterior.curves import ConstantCov, CurveError, CurveLayout

T = 12
OUTS = ["s"] + [f"cases@{t}" for t in range(T)]


def _rows(gamma: float, n: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Predictions of a curve whose level spans two decades, residuals of variance
    level**gamma (and a scalar output of unit noise)."""
    r = np.random.default_rng(seed)
    lev = 10 ** r.uniform(0, 2, n)
    pred = np.column_stack([r.normal(size=n), lev[:, None] * np.ones((n, T))])
    resid = np.column_stack([r.normal(size=n),
                             r.normal(size=(n, T)) * np.sqrt(lev ** gamma)[:, None]])
    return resid, pred


@pytest.mark.parametrize("gamma", [0.0, 1.0, 1.5])
def test_slope_recovered(gamma: float) -> None:
    resid, pred = _rows(gamma)
    rec = levelnoise.fit(resid, pred, OUTS)
    assert list(rec) == ["cases"]
    assert rec["cases"]["gamma"] == pytest.approx(gamma, abs=0.08)
    assert rec["cases"]["rows"] == len(pred)


def test_factors_average_one_and_leave_scalars() -> None:
    resid, pred = _rows(1.0)
    rec = levelnoise.fit(resid, pred, OUTS)
    G = levelnoise.factors(pred, OUTS, rec)
    assert G.shape == pred.shape
    assert np.all(G[:, 0] == 1.0)
    assert G[:, 1:].mean() == pytest.approx(1.0, rel=1e-9)
    # a curve ten times higher: ten times the variance (gamma 1, floor aside)
    hi = levelnoise.factors(pred[:1] * np.r_[1, [10] * T], OUTS, rec)[0, 1]
    assert hi / G[0, 1] == pytest.approx(10.0, rel=0.1)


def test_level_free_covariance_is_flat() -> None:
    """Divided by its factors, residuals of variance ~ level have one variance."""
    resid, pred = _rows(1.0, n=2000)
    rec = levelnoise.fit(resid, pred, OUTS)
    S0 = levelnoise.level_free(resid, pred, OUTS, rec)
    G = levelnoise.factors(pred, OUTS, rec)
    lo, hi = pred[:, 1] < 5, pred[:, 1] > 50
    r0 = resid / np.sqrt(G)
    assert np.mean(r0[lo, 1:] ** 2) == pytest.approx(np.mean(r0[hi, 1:] ** 2), rel=0.2)
    assert np.allclose(np.diag(S0)[1:], np.mean(r0[:, 1:] ** 2, axis=0))


def test_too_few_rows_no_slope() -> None:
    resid, pred = _rows(1.0, n=levelnoise.MIN_ROWS - 1)
    assert levelnoise.fit(resid, pred, OUTS)["cases"]["gamma"] == 0.0


def _identity_layout(P: int) -> CurveLayout:
    return CurveLayout(tuple(f"c@{t}" for t in range(P)), tuple(f"c#{t}" for t in range(P)),
                       np.eye(P), np.eye(P), np.zeros(P), np.zeros(P), {"c": P})


class _Mean:
    def __init__(self, level: float) -> None:
        self.level = level

    def __call__(self, X: np.ndarray) -> np.ndarray:
        return np.full((len(np.atleast_2d(X)), 3), self.level) * np.atleast_2d(X)[:, :1]


def test_scaled_error_model_grows_with_the_predicted_curve() -> None:
    lay = _identity_layout(3)
    C = np.array([[1.0, 0.5, 0.0], [0.5, 1.0, 0.2], [0.0, 0.2, 1.0]])
    rec = {"c": {"gamma": 1.0, "ref": 2.0, "floor": 0.0}}
    m = CurveError(ConstantCov(C), lay, "scaled", "test", full_mean=_Mean(1.0),
                   y_std=np.ones(3), level=rec)
    S = m.cov(np.array([[2.0], [8.0]]))      # levels 2 and 8: factors 1 and 4
    assert np.allclose(S[0], C)
    assert np.allclose(S[1], 4 * C)
    basis = CurveError(ConstantCov(C), lay, "basis", "test", full_mean=_Mean(1.0),
                       y_std=np.ones(3), level=rec)
    assert np.allclose(basis.cov(np.array([[8.0]])), C)   # basis ignores the level
    with pytest.raises(DataError, match="level"):
        CurveError(ConstantCov(C), lay, "scaled", "test", full_mean=_Mean(1.0),
                   y_std=np.ones(3))


def _noisy_curve_rows(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """A curve a * exp(b t / T) with noise of variance ~ its level (counts-like)."""
    r = np.random.default_rng(seed)
    X = np.column_stack([r.uniform(0.5, 20, n), r.uniform(0, 1, n)])
    t = np.arange(T)
    mean = X[:, :1] * np.exp(X[:, 1:] * t / T)
    Y = mean + np.sqrt(mean) * r.normal(size=mean.shape)
    return X, Y, [f"cases@{k}" for k in t]


def test_training_records_the_level_and_the_design_route_scales():
    """A metamodel trained on a curve whose noise grows with it records the slope
    (metamodel.json's level_noise) and the level-free covariance; the design posterior's
    ``scaled`` model then gives a higher curve a larger error, ``basis`` does not."""
    import pandas as pd
    import torch

    from simcalib.metamodel.posterior.noise import error_model
    from simcalib.metamodel.training import train_metamodel

    torch.set_num_threads(1)
    X, Y, outs = _noisy_curve_rows(300, 0)
    df = pd.DataFrame(np.column_stack([X, Y]), columns=["a", "b", *outs]).assign(status="ok")
    mm, metrics = train_metamodel(df, ["a", "b"], outs, {"hidden": [16], "epochs": 150},
                                  0, "lvl")
    rec = metrics["level_noise"]["cases"]
    assert 0.5 < rec["gamma"] < 1.5 and rec["log_corr"] > 0.3
    assert np.asarray(metrics["test_residual_cov_level_free"]).shape == (T, T)
    lo, hi = np.array([[2.0, 0.5]]), np.array([[18.0, 0.5]])
    scaled, basis = error_model(mm, "scaled"), error_model(mm, "basis")
    ratio = np.trace(scaled.cov(hi)[0]) / np.trace(scaled.cov(lo)[0])
    assert ratio > 3.0                     # ~9x the level: gamma ~ 1
    assert np.allclose(basis.cov(hi), basis.cov(lo))


@pytest.mark.slow
def test_sequential_posterior_scaled_on_a_noisy_curve():
    """``sequential``'s posterior with ``curve_errors: scaled`` fits the slope on its
    cross-fitted residuals, says so in posterior.json's curve terms, and still covers
    the truth."""
    import pandas as pd
    import torch

    from simcalib.metamodel.posterior import sequential_posterior
    from simcalib.study import Study

    torch.set_num_threads(1)

    def sim(df: pd.DataFrame) -> pd.DataFrame:   # the study's simulator (runs given)
        t = np.arange(T)
        mean = df[["a"]].to_numpy() * np.exp(df[["b"]].to_numpy() * t / T)
        r = np.random.default_rng(int(df["a"].sum() * 1e6) % 2**31)
        return pd.DataFrame({"cases": list(mean + np.sqrt(mean) * r.normal(size=mean.shape))})

    st = Study("lvl", {"simulator": {"type": "python", "options": {"function": sim}},
                       "parameters": {"a": {"lower": 0.5, "upper": 20.0},
                                      "b": {"lower": 0.0, "upper": 1.0}},
                       "series": {"cases": {"index": "day", "points": list(range(T))}}})
    X, Y, outs = _noisy_curve_rows(64, 3)
    runs = pd.DataFrame(np.column_stack([X, Y]), columns=["a", "b", *outs])
    runs = runs.assign(status="ok", target_id=0, run_id=np.arange(len(runs)))
    truth = np.array([10.0, 0.6])
    z = truth[0] * np.exp(truth[1] * np.arange(T) / T)
    z = z + np.sqrt(z) * np.random.default_rng(9).normal(size=T)
    tg = pd.DataFrame([{"target_id": 0, "true_a": truth[0], "true_b": truth[1],
                        **dict(zip(outs, z, strict=True))}])
    ens = {"members": 3, "hidden": [16, 16], "epochs": 300, "patience": 60}
    cfg = {"chains": 4, "warmup": 400, "draws": 1500, "max_draws": 3000,
           "init_draws": 400, "error_dof": 0, "error_scale": 1.0, "pair_plots": 0,
           "save_draws": 50, "obs_noise": "auto", "ppc_draws": 0}
    res = sequential_posterior(st, runs, tg, None, cfg, ens, seed=1, stochastic=True,
                               curve_errors="scaled")
    terms = res.meta["error_terms"]["curves"]
    assert terms["error_model"] == "scaled"
    assert terms["series"]["cases"]["level_noise"]["gamma"] > 0.3
    draws = res.draws.flat(0)
    lo, hi = np.quantile(draws, [0.05, 0.95], axis=0)
    assert np.all((lo <= truth) & (truth <= hi)), (lo, hi)
