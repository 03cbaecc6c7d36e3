"""The exact curve misfit (simcalib.metamodel.milp.series_misfit): its rows solved by
HiGHS equal a brute-force numpy evaluation, alone (weights in a box) and on top of a
ReLU network embedded by the existing formulation."""

from __future__ import annotations

import numpy as np
import pytest

from simcalib.errors import DataError
from simcalib.metamodel.basis import fit_basis
from simcalib.metamodel.milp import highs_backend
from simcalib.metamodel.milp.bounds import NeuronBounds, interval_bounds
from simcalib.metamodel.milp.formulation import MILPModel, build_milp
from simcalib.metamodel.milp.highs_threads import new_highs, set_threads
from simcalib.metamodel.milp.problem import OPProblem
from simcalib.metamodel.milp.series_misfit import (
    append_to_model,
    build_misfit,
    misfit_from_basis,
)
from simcalib.metamodel.milp.settings import SolverSettings

SOLVER = {"time_limit": 60.0, "mip_gap_abs": 1e-9, "threads": 1}


def small(seed: int = 0, m: int = 12, k: int = 2):
    rng = np.random.default_rng(seed)
    B = rng.normal(size=(m, k))  # noqa: N806
    mu = rng.normal(size=m)
    z = mu + B @ np.array([0.3, -0.6])[:k] + 0.3 * rng.normal(size=m)
    s = rng.uniform(0.5, 2.0, size=m)
    return B, mu, z, s


def solve_raw_highs(misfit, lo, hi):
    """The backend-neutral rows handed to highspy directly (no simcalib backend)."""
    a, lower, upper = misfit.rows()
    k, m = misfit.n_weights, misfit.n_points
    h = new_highs()  # highspy.Highs(), minding HiGHS's process-global thread scheduler
    set_threads(h, 1)
    h.setOptionValue("output_flag", False)
    inf = h.getInfinity()
    cost = np.concatenate([np.zeros(k), misfit.cost])
    clo = np.concatenate([lo, np.zeros(m)])
    chi = np.concatenate([hi, np.full(m, inf)])
    h.addCols(k + m, cost, clo, chi, 0, np.zeros(0, np.int32), np.zeros(0, np.int32),
              np.zeros(0))
    nz = a != 0
    starts = np.concatenate([[0], np.cumsum(nz.sum(axis=1))[:-1]]).astype(np.int32)
    idx = np.nonzero(nz)[1].astype(np.int32)
    h.addRows(len(lower), lower, np.where(np.isfinite(upper), upper, inf), int(nz.sum()),
              starts, idx, a[nz])
    h.run()
    return np.asarray(h.getSolution().col_value)[:k], h.getInfo().objective_function_value


def test_lp_in_a_box_equals_brute_force():
    B, mu, z, s = small()  # noqa: N806
    mis = build_misfit(B, mu, z, s)
    lo, hi = np.array([-1.0, -1.0]), np.array([1.0, 1.0])
    w, obj = solve_raw_highs(mis, lo, hi)
    # the objective is the misfit at the solver's weights, computed by numpy
    direct = np.sum(np.abs(B @ w + mu - z) / s)
    assert np.isclose(obj, direct, atol=1e-9) and np.isclose(mis.value(w)[0], direct)
    # and no point of a fine grid over the box does better
    g = np.linspace(-1, 1, 401)
    grid = np.stack(np.meshgrid(g, g), axis=-1).reshape(-1, 2)
    vals = np.abs(grid @ B.T + mu - z) / s @ np.ones(len(z))
    assert vals.min() >= obj - 1e-9 and vals.min() - obj < 1e-2
    # the same through MILPModel and simcalib's HiGHS backend
    m = MILPModel()
    wc = m.add_cols(2, lo, hi)
    e = append_to_model(m, wc, mis)
    raw = highs_backend.solve(m, SolverSettings.build(SOLVER))
    assert raw.status == "optimal" and np.isclose(raw.objective, obj, atol=1e-9)
    assert m.n_rows == 2 * len(z) and m.n_cols == 2 + len(z) and len(e) == len(z)


def test_a_curve_in_the_basis_is_matched_exactly_at_its_weights():
    rng = np.random.default_rng(4)
    B, mu = rng.normal(size=(30, 3)), rng.normal(size=30)  # noqa: N806
    w_true = np.array([0.2, -0.5, 0.7])
    mis = build_misfit(B, mu, mu + B @ w_true, np.ones(30), cost=rng.uniform(0.5, 1, 30))
    w, obj = solve_raw_highs(mis, -np.ones(3), np.ones(3))
    assert abs(obj) < 1e-9 and np.allclose(w, w_true, atol=1e-7)


def test_fold_and_weights_subset_from_a_basis():
    rng = np.random.default_rng(2)
    y = rng.normal(size=(40, 3)) @ rng.normal(size=(3, 20)) + 0.01 * rng.normal(size=(40, 20))
    basis = fit_basis(y, np.arange(20.0), "cases", variance=0.99)
    pts, z = np.array([2.0, 5.0, 11.0]), y[0, [2, 5, 11]] + 0.1
    mis = misfit_from_basis(basis, pts, z)
    w = basis.encode(y[:5])
    want = np.abs(basis.decode(w)[:, [2, 5, 11]] - z).sum(axis=1) / basis.scale
    assert np.allclose(mis.value(w), want)
    sd = np.array([0.1, 0.2, 0.4])
    assert np.allclose(misfit_from_basis(basis, pts, z, sd).value(w),
                       (np.abs(basis.decode(w)[:, [2, 5, 11]] - z) / sd).sum(axis=1))
    off, sc = rng.normal(size=basis.k), rng.uniform(0.5, 2, size=basis.k)
    yw = rng.normal(size=(6, basis.k))
    assert np.allclose(mis.fold(off, sc).value(yw), mis.value(off + sc * yw))
    with pytest.raises(DataError, match="not among the basis's points"):
        misfit_from_basis(basis, [2.5], [1.0])


@pytest.mark.parametrize("kwargs, words", [
    ({"s": np.zeros(4)}, "divisor"),
    ({"z": np.array([1.0, np.nan, 0, 0])}, "non-finite"),
    ({"z": np.zeros(3)}, "differ"),
    ({"cost": -np.ones(4)}, "weights must be"),
])
def test_bad_misfit_inputs(kwargs, words):
    args = {"B": np.ones((4, 2)), "mu": np.zeros(4), "z": np.zeros(4), "s": np.ones(4)}
    args.update(kwargs)
    with pytest.raises(DataError, match=words):
        build_misfit(**args, name="cases")


def relu_problem(n_in: int, k: int, width: int, seed: int) -> OPProblem:
    rng = np.random.default_rng(seed)
    sizes = [n_in, width, width, k]
    layers = [(rng.normal(size=(b, a)) / np.sqrt(a), 0.1 * rng.normal(size=b))
              for a, b in zip(sizes[:-1], sizes[1:], strict=True)]
    return OPProblem(layers=layers, lo=np.zeros(n_in), hi=np.ones(n_in),
                     integer=np.zeros(n_in, bool), A=np.zeros((0, n_in)), rhs=np.zeros(0),
                     equality=np.zeros(0, bool), target_scaled=np.zeros(k),
                     weights=np.zeros(k), tunable_names=[f"x{i}" for i in range(n_in)],
                     output_names=[f"w{j}" for j in range(k)], context={})


def series_milp(problem: OPProblem, mis, off, sc):
    """The network by the existing formulation (its scalar terms weighted 0), the
    curve misfit appended on its output columns."""
    m = build_milp(problem, NeuronBounds(pre=interval_bounds(problem)))
    append_to_model(m, m.y, mis.fold(off, sc))
    return m


def test_misfit_on_a_relu_network_is_the_milp_objective():
    """A 3-input network predicts 3 standardised basis weights; the MILP's optimum
    equals numpy's forward pass + misfit at its x, and no sampled x does better."""
    rng = np.random.default_rng(7)
    problem = relu_problem(3, 3, 12, seed=3)
    B, mu = rng.normal(size=(25, 3)), rng.normal(size=25)  # noqa: N806
    off, sc = rng.normal(size=3) * 0.1, rng.uniform(0.5, 1.5, size=3)
    x_true = np.array([0.3, 0.6, 0.2])
    w_true = off + sc * problem.forward(x_true)[-1][0]
    z = mu + B @ w_true + 0.05 * rng.normal(size=25)
    mis = build_misfit(B, mu, z, np.full(25, 0.5))
    m = series_milp(problem, mis, off, sc)
    raw = highs_backend.solve(m, SolverSettings.build(SOLVER))
    assert raw.status == "optimal"
    x = raw.values[m.x]
    f = lambda xs: mis.value(off + sc * problem.forward(xs)[-1])  # noqa: E731
    assert np.isclose(f(x)[0], raw.objective, atol=1e-6)
    samples = np.random.default_rng(1).uniform(size=(20000, 3))
    assert f(samples).min() >= raw.objective - 1e-6
    assert f(x_true[None])[0] >= raw.objective - 1e-6


def test_target_misfits_from_long_observations(tmp_path):
    """Observations file -> per-target misfits on the basis: each target its own
    points and sds; the misfit of the basis's mean curve computed by hand."""
    from simcalib.metamodel.milp.series_misfit import target_misfits
    from simcalib.study.series import SeriesSpec, read_series_observations

    rng = np.random.default_rng(5)
    y = rng.normal(size=(30, 2)) @ rng.normal(size=(2, 10)) + 1.0
    basis = fit_basis(y, np.arange(1.0, 11.0), "cases", variance=0.999)
    p = tmp_path / "obs.csv"
    p.write_text("target_id,day,cases,sd_cases\n0,2,1.5,0.5\n0,4,0.5,0.25\n"
                 "1,1,2.0,1.0\n1,3,,\n1,10,1.0,1.0\n")
    obs = read_series_observations(p, {"cases": SeriesSpec("cases", "day")})
    zero = np.zeros((1, basis.k))
    m0 = target_misfits(obs.curves[0], {"cases": basis})[0]
    want0 = abs(basis.mean[1] - 1.5) / 0.5 + abs(basis.mean[3] - 0.5) / 0.25
    assert m0.points.tolist() == [2, 4] and np.isclose(m0.value(zero)[0], want0)
    m1 = target_misfits(obs.curves[1], {"cases": basis})[0]
    assert m1.points.tolist() == [1, 10] and m1.n_points == 2
    with pytest.raises(DataError, match="no basis for it"):
        target_misfits(obs.curves[0], {}, "obs.csv")
