"""The compiled Dormand-Prince forward solver (simcalib.bayes.jit) against LSODA."""

from __future__ import annotations

import numpy as np
import pytest

from simcalib.bayes import jit
from simcalib.bayes.models import build_setting
from simcalib.bayes.ode import ODEModel, finite_difference_sensitivities
from simcalib.errors import ConfigError

pytestmark = pytest.mark.skipif(not jit.HAVE_NUMBA, reason="numba not installed")


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("SIMCALIB_JIT_CACHE", str(tmp_path_factory.getbasetemp() / "jit"))


@pytest.mark.parametrize("name", ["fitzhugh_nagumo", "sirv_irv"])
def test_compiled_solve_matches_lsoda_and_finite_differences(name):
    s = build_setting(name)
    model = s.model
    assert model.solver == "dopri5"
    rng = np.random.default_rng(3)
    theta = s.lower + (s.upper - s.lower) * rng.uniform(size=(6, model.n_param))
    t = s.obs_times()
    z, sens, ok = model.solve_lanes(theta, t, True)
    z_only, none, ok2 = model.solve_lanes(theta, t, False)
    assert ok.all() and ok2.all() and none is None
    assert z.shape == (6, len(t), model.n_state)
    assert sens.shape == (6, len(t), model.n_state, model.n_param)
    np.testing.assert_allclose(z_only, z, atol=1e-5 * np.abs(z).max())
    for c in range(6):
        ref = model._solve_lsoda(theta[c], t, True)
        np.testing.assert_allclose(z[c], ref.z, atol=2e-5 * max(1.0, np.abs(ref.z).max()))
        np.testing.assert_allclose(sens[c], ref.s, atol=2e-5 * max(1.0, np.abs(ref.s).max()))
    fd = finite_difference_sensitivities(model, theta[0], t)
    np.testing.assert_allclose(sens[0], fd, atol=1e-4 * max(1.0, np.abs(fd).max()))
    # one lane through solve() is the same computation as in the stack
    one = model.solve(theta[2], t)
    np.testing.assert_allclose(one.z, z[2], rtol=1e-12)


def _vdp(mu: float) -> ODEModel:
    def rhs(t, z, th, m):
        x, y = z
        return [y, th[0] * (1 - x * x) * y - x]

    return ODEModel(rhs, ["x", "y"], ["mu"], [2.0, 0.0], mxstep=2000)


def test_stiff_lane_falls_back_to_lsoda():
    """Van der Pol with mu = 1000 is stiff: the explicit solver gives up after mxstep
    steps and that lane is solved by LSODA; the non-stiff lane stays compiled."""
    model = _vdp(1.0)
    assert model.solver == "dopri5"
    theta = np.array([[1.0], [1000.0]])
    t = np.linspace(0.0, 3.0, 7)
    out, ok = model.compiled(False)(theta, np.array([[2.0, 0.0]] * 2), 0.0, t,
                                    model.rtol, model.atol, model.mxstep)
    assert ok.tolist() == [True, False]
    z, _, ok = model.solve_lanes(theta, t, False)
    assert ok.all()
    for c in range(2):
        ref = model._solve_lsoda(theta[c], t, False)
        np.testing.assert_allclose(z[c], ref.z, atol=1e-4)


def test_blow_up_fails_only_its_lane():
    def rhs(t, z, th, m):
        return [th[0] * z[0] ** 2]

    model = ODEModel(rhs, ["z"], ["k"], [1.0])
    t = np.linspace(0.0, 2.0, 5)     # z = 1 / (1 - k t) blows up at t = 1/k
    z, s, ok = model.solve_lanes(np.array([[0.1], [2.0]]), t, True)
    assert ok.tolist() == [True, False]
    np.testing.assert_allclose(z[0, :, 0], 1 / (1 - 0.1 * t), rtol=1e-6)
    np.testing.assert_allclose(s[0, :, 0, 0], t / (1 - 0.1 * t) ** 2, rtol=1e-5)
    assert model.solve(np.array([2.0]), t) is None


def test_solver_option_and_fallback_without_numba(monkeypatch):
    s = build_setting("fitzhugh_nagumo", {"solver": "lsoda"})
    assert s.model.solver == "lsoda"
    with pytest.raises(ConfigError, match=r"bayes.setting_options.fitzhugh_nagumo.solver"):
        build_setting("fitzhugh_nagumo", {"solver": "expm"})
    assert build_setting("two_mass").model.solver == "expm"
    monkeypatch.setattr(jit, "HAVE_NUMBA", False)
    assert build_setting("fitzhugh_nagumo").model.solver == "lsoda"


def test_compiled_module_is_cached_on_disk(tmp_path, monkeypatch):
    monkeypatch.setenv("SIMCALIB_JIT_CACHE", str(tmp_path))
    monkeypatch.setattr(jit, "_MODULES", {})
    model = _vdp(1.0)
    z, _, ok = model.solve_lanes(np.array([[0.5]]), np.linspace(0, 1, 3), False)
    assert ok.all()
    files = sorted(p.name for p in tmp_path.iterdir())
    assert any(f.startswith("simcalib_ode_") and f.endswith(".py") for f in files)
    assert any((tmp_path / "__pycache__").glob("*.nbi"))   # numba's index of machine code


def test_a_model_that_cannot_be_compiled_is_solved_by_lsoda(monkeypatch, caplog):
    model = _vdp(1.0)

    def broken(*a, **k):
        raise RuntimeError("numba says no")

    monkeypatch.setattr(jit, "compile_rhs", broken)
    t = np.linspace(0.0, 1.0, 5)
    with caplog.at_level("WARNING"):
        sol = model.solve(np.array([1.0]), t)
    assert model.solver == "lsoda" and "using LSODA" in caplog.text
    np.testing.assert_allclose(sol.z, model._solve_lsoda(np.array([1.0]), t, True).z)


def test_division_by_zero_fails_the_lane_not_the_run():
    """numba's default (Python) error model raises ZeroDivisionError; the compiled code
    uses numpy's (inf/nan), so the lane fails and LSODA decides, as for any solve."""
    def rhs(t, z, th, m):
        return [-z[0] / th[0]]

    model = ODEModel(rhs, ["z"], ["tau"], [1.0])
    t = np.linspace(0.0, 1.0, 4)
    z, _, ok = model.solve_lanes(np.array([[2.0], [0.0]]), t, True)
    assert ok.tolist() == [True, False]
    np.testing.assert_allclose(z[0, :, 0], np.exp(-t / 2.0), rtol=1e-6)
