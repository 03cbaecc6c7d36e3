"""Verification of the finite-element tension model (simulators/fe) before use:
Kirsch's and Inglis' elastic stress concentrations, the homogeneous bar against the
closed-form uniaxial curve of every hardening law, mesh convergence, the consistent
tangent (finite differences) and Newton's quadratic convergence."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import brentq

pytest.importorskip("skfem")

from simcalib.simulators.fe.material import Material, hardening  # noqa: E402
from simcalib.simulators.fe.mesh import MeshSize, quarter_plate, rectangle  # noqa: E402
from simcalib.simulators.fe.solver import Solver, build  # noqa: E402
from simcalib.simulators.fe.specimen import Specimen, simulate  # noqa: E402

HOLLOMAN = {"E": 206000.0, "nu": 0.26, "sigma0": 650.0, "K": 1500.0, "n": 0.36}
VOCE1 = {"E": 180000.0, "nu": 0.33, "sigma0": 500.0, "R0": 2000.0, "Rinf1": 400.0,
         "b1": 60.0}
VOCE2 = {**VOCE1, "E": 250000.0, "nu": 0.22, "Rinf2": 300.0, "b2": 400.0}
LAWS = {"holloman": HOLLOMAN, "voce1": VOCE1, "voce2": VOCE2}
ELASTIC = Material.from_dict("voce1", {"E": 200000.0, "nu": 0.3, "sigma0": 1e9, "R0": 0.0,
                                       "Rinf1": 0.0, "b1": 1.0})


def _vertex_syy(model, u, mat, point):
    """sigma_yy at a mesh vertex, averaged over the elements that share it (the P2
    field's gradient evaluated at the element vertices, plane stress)."""
    from skfem import Basis, ElementTriP2, ElementVector

    X = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    vb = Basis(model.basis.mesh, ElementVector(ElementTriP2()), quadrature=(X, np.ones(3) / 6))
    ue = u[vb.element_dofs]
    g = sum(vb.basis[i][0].grad * ue[i][:, None] for i in range(vb.Nbfun))
    syy = mat.E / (1 - mat.nu**2) * (g[1, 1] + mat.nu * g[0, 0])       # [nel, 3 vertices]
    xy = vb.mesh.p[:, vb.mesh.t]                                        # [2, 3, nel]
    hit = (np.abs(xy[0] - point[0]) < 1e-9) & (np.abs(xy[1] - point[1]) < 1e-9)
    assert hit.any()
    return float(syy.T[hit].mean())


@pytest.mark.parametrize("a, b, kt", [(1.0, 1.0, 3.0),        # Kirsch: circular hole
                                      (1.0, 2.0, 2.0)])       # Inglis: 1 + 2 a / b
def test_elastic_stress_concentration(a, b, kt):
    """A hole of ~1/20 of the plate width: the peak sigma_yy at the hole edge over the
    gross stress is Kirsch's 3 (Inglis' 1 + 2a/b for an ellipse) within 3 %; the
    finite width adds about 0.2 % (Heywood)."""
    size = MeshSize(16, 12, 6, ratio=30.0, top_ratio=4.0).refined(1)
    model = build(*quarter_plate(20.0, 40.0, a, b, size))
    res = Solver(model, ELASTIC).solve(np.array([0.01]))
    nominal = res.reaction[0] / 20.0                 # reaction per unit thickness / half width
    peak = _vertex_syy(model, res.u[0], ELASTIC, (a, 0.0))
    assert peak / nominal == pytest.approx(kt, rel=0.03)


def _uniaxial_stress(mat: Material, eps: float) -> tuple[float, float]:
    """Closed-form uniaxial stress and plastic strain at total strain ``eps``."""
    s0 = mat.params["sigma0"]
    if mat.E * eps <= s0:
        return mat.E * eps, 0.0
    ep = brentq(lambda e: hardening(mat.law, mat.params, np.array(e))[0] - mat.E * (eps - e),
                0.0, eps, xtol=1e-15, rtol=1e-14)
    return mat.E * (eps - ep), ep


@pytest.mark.parametrize("law", list(LAWS))
def test_homogeneous_bar_matches_closed_form(law):
    """A bar without a hole is in uniaxial stress: force, lateral and thickness strain
    follow the closed form of the hardening law (within 1 %; in fact to round-off)."""
    mat = Material.from_dict(law, LAWS[law])
    w, h, T = 5.0, 20.0, 2.0
    model = build(*rectangle(w, h, 3, 6))
    strains = np.array([0.001, 0.002, 0.004, 0.01, 0.02, 0.03])
    res = Solver(model, mat).solve(strains * h)
    for k, eps in enumerate(strains):
        sig, ep = _uniaxial_stress(mat, eps)
        assert 2 * T * res.reaction[k] == pytest.approx(sig * 2 * w * T, rel=0.01)
        assert 2 * T * res.reaction[k] == pytest.approx(sig * 2 * w * T, rel=1e-6)
        ezz = -mat.nu * sig / mat.E - 0.5 * ep
        np.testing.assert_allclose(res.ezz[k], ezz, rtol=1e-6, atol=1e-12)
    assert res.alpha_max[-1] > 0.01                    # deep in the plastic range


def test_mesh_convergence_of_last_force():
    """The last-step force converges under refinement: each halving of h changes it
    less than the one before, and the default mesh is within 0.5 % of a 4x finer one."""
    mat = Material.from_dict("holloman", HOLLOMAN)
    u = np.linspace(0.08, 0.48, 5)
    F = [simulate(mat, 2.0, 1.0, u, Specimen(mesh=size)).F[-1]
         for size in (MeshSize(6, 3, 2), MeshSize(), MeshSize().refined(1))]
    assert abs(F[0] - F[1]) > abs(F[1] - F[2])
    assert abs(F[1] - F[2]) / F[2] < 0.005


def test_consistent_tangent_matches_finite_differences():
    """In a plastic state the assembled tangent is the derivative of the internal
    forces: K v agrees with a central difference of f to 1e-5."""
    mat = Material.from_dict("voce2", VOCE2)
    model = build(*quarter_plate(5.0, 20.0, 1.5, 1.2, MeshSize(8, 4, 2)))
    s = Solver(model, mat)
    s.solve(np.array([0.05, 0.1]))                   # committed plastic state
    u = s.u.copy()
    u[model.top] += 0.02                             # a plastic trial increment
    u[model.free] += 1e-3 * np.sin(np.arange(model.free.size))
    f0, K, _ = s.evaluate(u)
    v = np.cos(np.arange(u.size) * 0.7)
    v /= np.linalg.norm(v)
    eps = 1e-7
    fd = (s.evaluate(u + eps * v)[0] - s.evaluate(u - eps * v)[0]) / (2 * eps)
    assert np.linalg.norm(fd - K @ v) <= 1e-5 * np.linalg.norm(K @ v)


def test_newton_converges_quadratically():
    """Near the solution each residual is about the square of the previous one: in
    the homogeneous plastic bar the convergence order is 2; in the specimen (points
    switching between elastic and plastic) the median order is above 1.6."""
    def orders(hist):
        r = np.asarray(hist)
        return np.log(r[2:] / r[1:-1]) / np.log(r[1:-1] / r[:-2])

    mat = Material.from_dict("voce1", VOCE1)
    bar = Solver(build(*rectangle(5.0, 20.0, 2, 4)), mat, tol=1e-13)
    res = bar.solve(np.array([0.1, 0.3]))
    last = res.residuals[-1]                      # the plastic increment
    assert len(last) >= 3
    assert orders(last)[-1] == pytest.approx(2.0, abs=0.3)
    run = simulate(Material.from_dict("holloman", HOLLOMAN), 1.5, 1.5,
                   np.linspace(0.06, 0.48, 8), Specimen(mesh=MeshSize(8, 4, 3)))
    tail = [orders(h)[-1] for h in run.residuals if len(h) >= 4]
    assert tail and np.median(tail) > 1.6
    assert run.cuts == 0


def test_poisson_ratio_moves_out_of_plane_displacement():
    """nu changes uz (and ux) far more than the force: the response the paper reads
    nu from; the points move inward (ux > 0 at X < 0) and thin (uz < 0)."""
    u = np.linspace(0.03, 0.12, 3)
    lo = simulate(Material.from_dict("voce1", {**VOCE1, "nu": 0.2}), 1.5, 1.5, u)
    hi = simulate(Material.from_dict("voce1", {**VOCE1, "nu": 0.4}), 1.5, 1.5, u)
    duz = np.abs(hi.uz[0] - lo.uz[0]).mean() / np.abs(lo.uz[0]).mean()
    dF = abs(hi.F[0] - lo.F[0]) / lo.F[0]
    assert duz > 0.5 and dF < 0.1
    assert np.all(lo.uz < 0) and np.all(lo.ux[:, :] >= -1e-9)
    assert np.all(np.diff(lo.F) > 0)


def test_point_operators_reproduce_linear_fields():
    """The 12-point read-out is exact for linear fields: displacements through the
    P2 probes (mirrored to X < 0 by the caller) and eps_zz through the P1 projection."""
    from simcalib.simulators.fe.specimen import _probes

    model = build(*quarter_plate(5.0, 20.0, 1.5, 1.2))
    pts = Specimen().points()
    Px, Py, Pz = _probes(model, pts)
    loc, comp = model.basis.doflocs, np.arange(model.n_dofs) % 2
    u = np.where(comp == 0, 0.3 * loc[0] + 0.1 * loc[1], -0.2 * loc[0] + 0.5 * loc[1])
    X, Y = np.abs(pts[:, 0]), pts[:, 1]
    np.testing.assert_allclose(Px @ u, 0.3 * X + 0.1 * Y, atol=1e-12)
    np.testing.assert_allclose(Py @ u, -0.2 * X + 0.5 * Y, atol=1e-12)
    q = np.asarray(model.basis.global_coordinates())
    np.testing.assert_allclose(Pz @ (2 * q[0] + 3 * q[1]).ravel(), 2 * X + 3 * Y, atol=1e-10)
