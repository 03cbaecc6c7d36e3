"""The metamodel posterior (simcalib.metamodel.posterior): a linear-Gaussian case whose
posterior is known exactly, an unidentified input, constraints, integers, and the
outputs of the cal-posterior step."""

from __future__ import annotations

import numpy as np
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
