"""``sequential``'s ensemble on series outputs (issue 42): trained on each series'
basis weights with the decode folded into the last layer (known answers: the fold and
its inverse, a rank-2 curve reconstructed exactly, a truncating basis reporting its
error, the warm start's projection onto a refitted basis)."""

from __future__ import annotations

import numpy as np
import pytest

from simcalib.metamodel import curves
from simcalib.metamodel.basis import fit_basis
from simcalib.metamodel.ensemble import EnsembleSettings, fit_ensemble, replicate_diffs

T = np.arange(0, 12)
OUT = ["s", *(f"y@{t}" for t in T)]
FAST = EnsembleSettings.from_config({"members": 3, "hidden": [12], "epochs": 200,
                                     "warm_epochs": 50, "patience": 40})


def _data(n: int, seed: int = 0, bump: bool = False) -> tuple[np.ndarray, np.ndarray]:
    r = np.random.default_rng(seed)
    X = r.uniform(0, 1, (n, 2))
    if bump:
        c = 1.0 + 9.0 * X[:, :1]
        Y = np.exp(-0.5 * ((T - c) / 0.7) ** 2) * (1 + X[:, 1:])
    else:
        Y = X[:, :1] + X[:, 1:] * T / 10.0
    return X, np.column_stack([X.sum(axis=1), Y])


def test_fold_and_unfold_are_inverse() -> None:
    X, Y = _data(30)
    basis = fit_basis(Y[:, 1:], T, "y")
    names = ["s", *(f"y{curves.WEIGHT_SEP}{i}" for i in range(basis.k))]
    r = np.random.default_rng(1)
    W, b = r.normal(size=(len(names), 5)), r.normal(size=len(names))
    mean, std = r.normal(size=len(names)), r.uniform(0.5, 2, len(names))
    Wn, bn, ym, ys = curves.fold_layer(W, b, names, mean, std, OUT, {"y": basis})
    assert np.allclose(ym[1:], basis.mean) and np.allclose(ys[1:], basis.scale)
    W2, b2 = curves.unfold_layer(Wn, bn, ym, ys, OUT, {"y": basis}, names, mean, std)
    assert np.allclose(W2, W, atol=1e-10) and np.allclose(b2, b, atol=1e-10)


def test_ensemble_on_a_curve_trains_on_basis_weights() -> None:
    X, Y = _data(40)
    ens = fit_ensemble(X, Y, ["a", "b"], OUT, FAST, seed=3)
    rec = ens.info["series"]["y"]
    # a + b t / 10 is a rank-2 family: 2 components, reconstructed exactly
    assert rec["components"] == 2 and rec["points"] == len(T)
    assert rec["basis_cv_relative"] < 1e-10 and rec["basis_unexplained"] < 1e-12
    assert "noise_ceiling" not in rec and rec["replicate_pairs"] == 0
    # every member's curve lies in the basis's span (the decode is its last layer) ...
    basis = curves.bases_of(ens.member(0))["y"]
    P = ens.predict_members(X)[:, :, 1:]
    for Pm in P:
        assert np.allclose(basis.decode(basis.encode(Pm)), Pm, atol=1e-9)
    # ... and the mean net (the MILP's) predicts the ensemble mean
    assert np.allclose(ens.mean_metamodel().predict(X), ens.predict(X), atol=1e-9)
    assert rec["oob_r2"] > 0.9 and ens.info["min_oob_r2"] <= rec["oob_r2"]
    # the weights are recovered from the folded layer (the compact MILP's head)
    Wh, bh = curves.weight_head(ens.member(0), "y")
    assert Wh.shape[0] == 2 and np.isfinite(Wh).all() and np.isfinite(bh).all()


def test_a_truncated_basis_reports_its_error() -> None:
    X, Y = _data(40, bump=True)
    ens = fit_ensemble(X, Y, ["a", "b"], OUT, FAST, seed=3,
                       series={"max_components": 3})
    rec = ens.info["series"]["y"]
    assert rec["components"] == 3
    b = fit_basis(Y[:, 1:], T, "y", max_components=3, min_runs=3)
    assert rec["basis_cv_relative"] == pytest.approx(b.error["cv_rms"] / b.scale)
    assert rec["basis_cv_relative"] > 0.05 and rec["basis_unexplained"] > 0.05


def test_warm_start_projects_the_last_curves_on_the_new_basis() -> None:
    """With no training epochs the warm fit's nets are the old nets' curves projected
    on the basis refitted to the new rows, exactly."""
    X, Y = _data(60, bump=True)
    old = fit_ensemble(X[:30], Y[:30], ["a", "b"], OUT, FAST, seed=3,
                       series={"max_components": 4})
    zero = EnsembleSettings.from_config({**FAST.__dict__, "hidden": list(FAST.hidden),
                                         "warm_epochs": 0})
    new = fit_ensemble(X, Y, ["a", "b"], OUT, zero, seed=3, warm=old,
                       series={"max_components": 4})
    nb = curves.bases_of(new.member(0))["y"]
    assert nb.n_runs == 60
    P_old, P_new = old.predict_members(X), new.predict_members(X)
    assert np.allclose(P_new[:, :, 0], P_old[:, :, 0], atol=1e-9)   # the scalar as it was
    want = nb.decode(np.stack([nb.encode(p[:, 1:]) for p in P_old]).reshape(-1, nb.k))
    assert np.allclose(P_new[:, :, 1:].reshape(-1, len(T)), want, atol=1e-9)


def test_replicates_give_the_noise_ceiling() -> None:
    X, Y = _data(30)
    r = np.random.default_rng(5)
    Xr = np.vstack([X, X[:10]])
    Yr = np.vstack([Y, Y[:10]]) + np.column_stack([np.zeros(40), r.normal(0, 0.05, (40, len(T)))])
    d = replicate_diffs(Xr, Yr)
    assert d.shape == (10, Y.shape[1])
    ens = fit_ensemble(Xr, Yr, ["a", "b"], OUT, FAST, seed=3)
    rec = ens.info["series"]["y"]
    assert rec["replicate_pairs"] == 10 and 0.5 < rec["noise_ceiling"] < 1.0
    # a deterministic curve repeated: ceiling 1
    ens0 = fit_ensemble(np.vstack([X, X[:3]]), np.vstack([Y, Y[:3]]), ["a", "b"], OUT, FAST,
                        seed=3)
    assert ens0.info["series"]["y"]["noise_ceiling"] == pytest.approx(1.0)


def test_scalar_outputs_keep_the_plain_path() -> None:
    X, Y = _data(20)
    ens = fit_ensemble(X, Y[:, :1], ["a", "b"], ["s"], FAST, seed=3)
    assert "series" not in ens.info and ens.info["min_oob_r2"] == ens.info["oob_r2"]["s"]
