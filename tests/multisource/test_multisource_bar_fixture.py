"""The reduced mechanics model of the hardening-law study and the LS baseline."""

from __future__ import annotations

import numpy as np
import pytest

from simcalib.multisource import bar_fixture as H
from simcalib.multisource.baselines import least_squares_fit, start_points

U = np.linspace(0.05, 0.8, 8)
GEOM = H.Geometry(n_el=16)


def test_elastic_force_matches_series_compliance():
    a, b = np.array([1.0, 2.0]), np.array([1.5, 1.0])
    u = np.array([1e-3])                       # far below yield
    sim = H.simulate("holloman", H.HOLLOMAN, a, b, u, GEOM)
    edges_t = np.linspace(-1, 1, GEOM.n_el + 1)
    for i in range(2):
        edges = np.concatenate([[-GEOM.length / 2], b[i] * edges_t, [GEOM.length / 2]])
        mid, le = (edges[1:] + edges[:-1]) / 2, np.diff(edges)
        area = GEOM.thickness * (GEOM.width - 2 * a[i] * np.sqrt(np.clip(1 - (mid / b[i])**2,
                                                                       0, None)))
        expected = u[0] * H.HOLLOMAN["E"] / (le / area).sum()
        assert sim["F"][i, 0] == pytest.approx(expected, rel=1e-6)


def test_plasticity_softens_and_force_increases():
    a, b = np.array([1.5]), np.array([1.5])
    sim = H.simulate("holloman", H.HOLLOMAN, a, b, U, GEOM)
    F = sim["F"][0]
    assert np.all(np.diff(F) > 0)
    slope = np.diff(F) / np.diff(U)
    assert slope[-1] < 0.5 * (F[0] / U[0])         # yielded: much softer than elastic
    assert sim["uy"][0, -1, -1] < U[-1]              # points below the top move less


def test_poisson_ratio_drives_lateral_contraction_only():
    a, b = np.array([1.2]), np.array([1.8])
    p = {"E": 2e5, "sigma0": 600.0, "R0": 2000.0, "Rinf1": 300.0, "b1": 50.0}
    s1 = H.simulate("voce", {**p, "nu": 0.2}, a, b, U, GEOM)
    s2 = H.simulate("voce", {**p, "nu": 0.4}, a, b, U, GEOM)
    np.testing.assert_allclose(s1["F"], s2["F"])
    np.testing.assert_allclose(s1["uy"], s2["uy"])
    assert np.all(s2["uz"] < s1["uz"])              # more (negative) contraction
    assert np.all(s1["ux"] > 0)                      # points at x < 0 move inward (+x)


def test_voce_inverse_is_exact():
    p = {k: np.array([[v]]) for k, v in
         {"sigma0": 500.0, "R0": 1000.0, "Rinf1": 800.0, "b1": 500.0,
          "Rinf2": 800.0, "b2": 5.0}.items()}
    sig = np.array([[400.0, 600.0, 1500.0, 2500.0]])
    eps = H.hardening_inverse("voce", p, sig)
    g = (p["sigma0"] + p["R0"] * eps + p["Rinf1"] * (1 - np.exp(-p["b1"] * eps))
         + p["Rinf2"] * (1 - np.exp(-p["b2"] * eps)))
    assert eps[0, 0] == 0.0
    np.testing.assert_allclose(g[0, 1:], sig[0, 1:], rtol=1e-9)


def test_same_elastic_parameters_same_elastic_response():
    a, b = np.array([1.0]), np.array([1.0])
    u = np.array([5e-3, 1e-2])
    hf = H.simulate("holloman", H.HOLLOMAN, a, b, u, GEOM)
    lf = H.simulate("voce", {"E": H.HOLLOMAN["E"], "nu": H.HOLLOMAN["nu"], "sigma0": 650.0,
                             "R0": 1000.0, "Rinf1": 100.0, "b1": 10.0}, a, b, u, GEOM)
    for k in ("F", "ux", "uy", "uz"):
        np.testing.assert_allclose(hf[k], lf[k], rtol=1e-9)


def test_least_squares_recovers_voce_parameters():
    a = np.array([1.0, 2.0, 1.5])
    b = np.array([2.0, 1.0, 1.5])
    truth = {"E": 2.1e5, "nu": 0.3, "sigma0": 700.0, "R0": 2500.0, "Rinf1": 400.0, "b1": 80.0}
    y = H.lf_model("s1", a, b, U, GEOM)(truth)
    groups, i = [], 0
    for grp in H.OUT_GROUPS.values():
        groups.append(list(range(i, i + len(grp))))
        i += len(grp)
    fit = least_squares_fit(H.lf_model("s1", a, b, U, GEOM), y, groups,
                            {t: H.VOCE_RANGES[t] for t in H.THETA["s1"]},
                            start_points(6, 1, np.random.default_rng(0)), max_nfev=60,
                            batch_model=H.lf_batch_model("s1", a, b, U, GEOM))
    for t in ("E", "nu", "sigma0"):
        assert fit[t]["mean"] == pytest.approx(truth[t], rel=0.02)
