"""The per-series basis (simcalib.metamodel.basis): exact for a curve linear in the
inputs, the truncation error it records checked against direct computations
(Eckart-Young, an eigen-decomposition, scikit-learn's PCA for the held-out error),
JSON round trip, and its bad inputs."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.decomposition import PCA

from simcalib.errors import DataError
from simcalib.metamodel.basis import SeriesBasis, fit_basis, load_bases, save_bases

T = 50
POINTS = np.arange(1, T + 1, dtype=float)


def linear_curves(n: int, p: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, tuple]:
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(p, T)) * np.linspace(1, 3, T)
    c = np.sin(POINTS / 7) * 5
    x = rng.uniform(size=(n, p))
    return x, c + x @ a, (a, c)


@pytest.mark.parametrize("p, n", [(1, 30), (3, 40), (3, 20)])  # (3, 20): runs < points
def test_curve_linear_in_the_inputs_is_exact(p, n):
    x, y, (a, c) = linear_curves(n, p)
    b = fit_basis(y, POINTS, "cases", variance=1 - 1e-10)
    assert b.k == p
    assert b.error["rms"] < 1e-12 * np.abs(y).max() and b.error["cv_rms"] < 1e-10
    w = b.encode(y)
    assert np.allclose(b.decode(w), y, atol=1e-12)
    # the weights are affine in the inputs: a linear metamodel predicts them exactly
    design = np.column_stack([np.ones(n), x])
    coef, *_ = np.linalg.lstsq(design, w, rcond=None)
    assert np.allclose(design @ coef, w, atol=1e-10)
    # a new input's curve (never seen) is represented exactly too
    x_new = np.random.default_rng(9).uniform(size=(5, p))
    y_new = c + x_new @ a
    assert np.allclose(b.decode(b.encode(y_new)), y_new, atol=1e-10)
    assert np.allclose(b.encode(y_new), np.column_stack([np.ones(5), x_new]) @ coef,
                       atol=1e-10)


def structured(n: int = 60, seed: int = 1) -> np.ndarray:
    """Curves with four components of decreasing size plus noise."""
    rng = np.random.default_rng(seed)
    shapes = np.array([np.exp(-((POINTS - m) / 6) ** 2) for m in (15, 25, 35, 10)])
    amp = rng.normal(size=(n, 4)) * np.array([10.0, 4.0, 1.0, 0.3])
    return 2.0 + amp @ shapes + 0.01 * rng.normal(size=(n, T))


def test_truncated_basis_reports_its_error_like_a_direct_computation():
    y = structured()
    b = fit_basis(y, POINTS, "cases", variance=0.95)
    assert 1 <= b.k < 4
    # direct: eigenvectors of the covariance of the standardised curves
    mu = y.mean(axis=0)
    sigma = np.sqrt(np.mean(y.var(axis=0, ddof=1)))
    z = (y - mu) / sigma
    evals, evecs = np.linalg.eigh(z.T @ z)
    order = np.argsort(evals)[::-1]
    evals, v = evals[order], evecs[:, order[:b.k]]
    assert np.isclose(evals[:b.k].sum() / evals.sum(), 1 - b.error["unexplained"])
    assert evals[:b.k - 1].sum() / evals.sum() < 0.95 <= evals[:b.k].sum() / evals.sum()
    resid = sigma * (z - z @ v @ v.T)
    assert np.allclose(b.error["point_rms"], np.sqrt(np.mean(resid**2, axis=0)), rtol=1e-9)
    assert np.isclose(b.error["max_abs"], np.abs(resid).max(), rtol=1e-9)
    # Eckart-Young: the squared residual is the discarded eigenvalues, in curve units
    assert np.isclose(b.error["rms"] ** 2 * y.size, sigma**2 * evals[b.k:].sum(), rtol=1e-9)
    assert np.allclose(b.decode(b.encode(y)), y - resid, atol=1e-10)
    # held out: scikit-learn's PCA refitted without each fold (runs i % 5 == f)
    cv = np.zeros_like(y)
    for f in range(5):
        test = np.arange(len(y)) % 5 == f
        m, s = y[~test].mean(axis=0), np.sqrt(np.mean(y[~test].var(axis=0, ddof=1)))
        pca = PCA(n_components=b.k, svd_solver="full").fit((y[~test] - m) / s)
        zt = (y[test] - m) / s
        cv[test] = s * (zt - pca.inverse_transform(pca.transform(zt)))
    assert np.allclose(b.error["cv_point_rms"], np.sqrt(np.mean(cv**2, axis=0)), rtol=1e-8)
    assert b.error["cv_rms"] > b.error["rms"]
    assert np.isclose(b.error_at(), b.error["cv_rms"])
    sub = [10.0, 20.0, 30.0]
    assert np.isclose(b.error_at(sub, cv=False),
                      np.sqrt(np.mean(np.mean(resid**2, axis=0)[[9, 19, 29]])))


def test_threshold_and_cap_choose_k():
    y = structured()
    ks = [fit_basis(y, POINTS, "c", variance=v).k for v in (0.5, 0.9, 0.99, 0.9999)]
    assert ks == sorted(ks) and ks[0] == 1 and ks[-1] >= 4
    capped = fit_basis(y, POINTS, "c", variance=0.9999, max_components=2)
    assert capped.k == 2 and capped.error["unexplained"] > 0.001
    assert capped.weight_sd.shape == (2,) and capped.weight_sd[0] > capped.weight_sd[1]


def test_json_round_trip_is_exact(tmp_path):
    b = fit_basis(structured(), POINTS, "cases", variance=0.99)
    save_bases({"cases": b}, tmp_path / "mm.basis.json")
    back = load_bases(tmp_path / "mm.basis.json")["cases"]
    assert isinstance(back, SeriesBasis) and back.k == b.k and back.scale == b.scale
    for f in ("points", "mean", "components", "explained", "weight_sd"):
        assert np.array_equal(getattr(back, f), getattr(b, f))
    assert np.array_equal(back.error["cv_point_rms"], b.error["cv_point_rms"])
    w = np.random.default_rng(3).normal(size=(4, b.k))
    assert np.array_equal(back.decode(w), b.decode(w))
    (tmp_path / "bad.json").write_text('{"format": "other"}')
    with pytest.raises(DataError, match="not a series-basis file"):
        load_bases(tmp_path / "bad.json")
    with pytest.raises(DataError, match="not a series basis"):
        SeriesBasis.from_json({"name": "x"}, "f.json")


@pytest.mark.parametrize("curves, pts, words", [
    (np.ones((10, T)) * np.arange(T), POINTS, "the same in every run"),
    (np.random.default_rng(0).normal(size=(5, T)), POINTS, "5 runs; a basis needs at least 8"),
    ([[1.0, 2.0, 3.0]] * 8 + [[1.0, 2.0]], POINTS[:3], "lengths [2, 3]: series of different"),
    (np.random.default_rng(0).normal(size=(10, T - 1)), POINTS, "different lengths"),
])
def test_bad_basis_inputs_name_the_series(curves, pts, words):
    with pytest.raises(DataError) as exc:
        fit_basis(curves, pts, "cases")
    assert exc.value.source == "series 'cases'" and words in exc.value.message


def test_nan_point_and_bad_weights():
    y = structured(20)
    y[3, 7] = np.nan
    with pytest.raises(DataError, match="run 3 has a non-finite value at point 8"):
        fit_basis(y, POINTS, "cases")
    b = fit_basis(structured(20), POINTS, "cases", variance=0.9)
    with pytest.raises(DataError, match="weights given"):
        b.decode(np.zeros((1, b.k + 1)))
    with pytest.raises(DataError, match="not among the basis's points"):
        b.point_index([1.0, 60.0])
