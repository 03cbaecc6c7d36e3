"""Optimally-Predict MILP: exactness against brute force, bound validity, the
forward-pass check, integrality, constraints, warm start, time limit, bad input,
alternative optima, and Gurobi (skipped without a usable licence)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from simcalib.errors import ConfigError, DataError
from simcalib.metamodel.milp import (
    ForwardCheckError,
    SolverLicenceError,
    alternative_optima,
    build_problem,
    optimize,
)
from simcalib.metamodel.milp.bounds import interval_bounds, tighten_bounds
from simcalib.metamodel.milp.settings import SolverSettings
from simcalib.metamodel.model import Metamodel, build_net
from simcalib.study.space import build_space

HIGHS = {"backend": "highs", "time_limit": 30, "threads": 1,
         "warm_start": {"samples": 2000, "local": 2}}


def _mm(n_in: int, hidden: list[int], n_out: int, seed: int = 0, study: str = "toy"
        ) -> Metamodel:
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        net = build_net(n_in, hidden, n_out)
    r = np.random.default_rng(seed)
    return Metamodel(net, [f"i{k}" for k in range(n_in)], [f"o{k}" for k in range(n_out)],
                     r.uniform(-1, 1, n_in), r.uniform(0.5, 2, n_in), r.uniform(-1, 1, n_out),
                     r.uniform(0.5, 2, n_out), {"study": study})


def _space(n_in: int, integer: tuple[int, ...] = (), constraints: list[str] | None = None,
           contexts: dict | None = None):
    params = {f"i{k}": {"lower": -1.0, "upper": 2.0, "integer": k in integer}
              for k in range(n_in - len(contexts or {}))}
    for k in integer:
        params[f"i{k}"].update(lower=0, upper=4)
    return build_space({"parameters": params, "contexts": contexts or {},
                              "constraints": constraints or []})


def _grid_min(mm, target, xs, ys, extra=()):
    X1, X2 = np.meshgrid(xs, ys, indexing="ij")
    X = np.column_stack([X1.ravel(), X2.ravel(), *[np.full(X1.size, e) for e in extra]])
    z = mm.scale_outputs(np.array([target[o] for o in mm.output_names]))
    f = np.abs(mm.predict_scaled(X) - z).sum(axis=1)
    return float(f.min())


def test_milp_optimum_equals_brute_force_on_a_grid():
    mm = _mm(2, [8, 8], 2, seed=3)
    space = _space(2)
    target = {"o0": 0.3, "o1": -0.4}
    res = optimize(mm, space, target, {}, HIGHS)
    assert res.status == "optimal" and res.gap <= 1e-4
    xs = np.linspace(-1, 2, 601)
    grid = _grid_min(mm, target, xs, xs)
    # exact optimum: never worse than the grid; the grid (step 0.005) is close to it
    assert res.objective <= grid + 1e-7
    assert res.objective >= grid - 0.05
    # reported objective is the metamodel's value at x*
    z = mm.scale_outputs(np.array([0.3, -0.4]))
    assert res.objective == pytest.approx(float(np.abs(mm.predict_scaled(res.x) - z).sum()),
                                          abs=1e-9)
    assert res.bound <= res.objective + 1e-9


def test_tightened_bounds_contain_sampled_preactivations():
    mm = _mm(3, [16, 16, 8], 2, seed=1)
    space = _space(3)
    prob = build_problem(mm, space, {"o0": 0.0, "o1": 0.0}, {})
    nb = tighten_bounds(prob, time_limit=30)
    ia = interval_bounds(prob)
    X = np.random.default_rng(0).uniform(prob.lo, prob.hi, (20000, 3))
    X = np.vstack([X, prob.lo, prob.hi])
    pre = prob.forward(X)
    for (L, U), (Li, Ui), z in zip(nb.pre, ia, pre, strict=True):
        assert (z >= L[None, :] - 1e-9).all() and (z <= U[None, :] + 1e-9).all()
        assert (L >= Li - 1e-12).all() and (U <= Ui + 1e-12).all()  # never looser
    # tightening is strictly tighter somewhere in the deeper layers
    assert any((U - L).sum() < (Ui - Li).sum() - 1e-6
               for (L, U), (Li, Ui) in zip(nb.pre[1:-1], ia[1:-1], strict=True))


def test_forward_check_catches_a_corrupted_weight(monkeypatch):
    mm = _mm(2, [8], 1, seed=2)
    space = _space(2)
    orig = Metamodel.linear_layers

    def corrupted(self):
        layers = orig(self)
        W, b = layers[1]
        W = W.copy()
        W[0, :] += 0.5
        layers[1] = (W, b)
        return layers

    monkeypatch.setattr(Metamodel, "linear_layers", corrupted)
    with pytest.raises(ForwardCheckError, match="forward-pass check failed"):
        optimize(mm, space, {"o0": 0.2}, {}, {**HIGHS, "warm_start": {"enabled": False}})


def test_integer_inputs_and_linear_constraints():
    mm = _mm(3, [12, 12], 2, seed=4)
    space = _space(3, integer=(1,), constraints=["i0 + i1 <= 2.5", "i2 >= i0"])
    target = {"o0": 1.0, "o1": 1.0}
    res = optimize(mm, space, target, {}, HIGHS)
    assert res.status == "optimal"
    x = res.x
    assert x[1] == np.round(x[1]) and 0 <= x[1] <= 4
    assert x[0] + x[1] <= 2.5 + 1e-7 and x[2] >= x[0] - 1e-7
    # brute force over the integer values and a grid of the continuous ones
    best = np.inf
    g = np.linspace(-1, 2, 121)
    z = mm.scale_outputs(np.array([1.0, 1.0]))
    for k in range(5):
        A, C = np.meshgrid(g, g, indexing="ij")
        X = np.column_stack([A.ravel(), np.full(A.size, k), C.ravel()])
        X = X[(X[:, 0] + X[:, 1] <= 2.5) & (X[:, 2] >= X[:, 0])]
        if len(X):
            best = min(best, float(np.abs(mm.predict_scaled(X) - z).sum(axis=1).min()))
    assert res.objective <= best + 1e-7


def test_contexts_are_fixed_and_box_respected():
    mm = _mm(3, [8, 8], 1, seed=5)
    space = _space(3, contexts={"i2": {"values": [0.0, 1.0]}})
    box = (np.array([0.0, 0.0]), np.array([0.5, 1.0]))
    res = optimize(mm, space, {"o0": 0.1}, {"i2": 1.0}, HIGHS, box=box)
    assert (res.x >= box[0] - 1e-9).all() and (res.x <= box[1] + 1e-9).all()
    xs = np.linspace(0, 0.5, 201)
    ys = np.linspace(0, 1, 201)
    assert res.objective <= _grid_min(mm, {"o0": 0.1}, xs, ys, extra=(1.0,)) + 1e-7


def test_warm_start_and_time_limit_return_the_incumbent_with_its_gap():
    mm = _mm(6, [64, 64, 64], 4, seed=6)
    space = _space(6)
    target = {f"o{k}": 0.5 for k in range(4)}
    x0 = np.full(6, 0.5)
    solver = {"backend": "highs", "time_limit": 0.3, "threads": 1,
              "obbt": {"enabled": False}, "warm_start": {"enabled": False}}
    res = optimize(mm, space, target, {}, solver, warm_start=x0)
    assert res.info["warm_start"]["given_objective"] is not None
    assert res.status == "time_limit" and res.time_limited
    assert np.isfinite(res.objective) and res.gap > 0
    assert res.objective <= res.info["warm_start"]["given_objective"] + 1e-9
    assert res.bound <= res.objective
    # the warm start is the incumbent's upper bound; a cold run must still be flagged
    cold = optimize(mm, space, target, {}, solver)
    assert cold.time_limited


def test_bad_input_is_reported_clearly():
    mm = _mm(3, [4], 2, seed=7)
    space = _space(3, integer=(2,))
    ok = {"o0": 0.0, "o1": 0.0}
    with pytest.raises(DataError, match="missing output"):
        optimize(mm, space, {"o0": 0.0}, {}, HIGHS)
    with pytest.raises(DataError, match="unknown output"):
        optimize(mm, space, {**ok, "zz": 1.0}, {}, HIGHS)
    with pytest.raises(ConfigError, match="outside the bounds"):
        optimize(mm, space, ok, {}, HIGHS, box=(np.array([-5.0, 0, 0]), np.array([0.0, 1, 1])))
    with pytest.raises(ConfigError, match="empty"):
        optimize(mm, space, ok, {}, HIGHS,
                 box=(np.array([0.0, 0.0, 2.2]), np.array([1.0, 1.0, 2.8])))
    with pytest.raises(ConfigError, match="weights"):
        optimize(mm, space, ok, {}, HIGHS, weights={"nope": 1.0})
    other = _mm(2, [4], 2, seed=7, study="other")
    with pytest.raises(DataError, match="another study"):
        optimize(other, space, ok, {}, HIGHS)
    with pytest.raises(ConfigError, match="backend"):
        optimize(mm, space, ok, {}, {"backend": "cplex"})


def test_alternative_optima_are_apart_and_near_optimal():
    mm = _mm(2, [8, 8], 1, seed=8)
    space = _space(2)
    alts = alternative_optima(mm, space, {"o0": 0.0}, {}, HIGHS, k=3, epsilon=0.5,
                              distance=0.2)
    assert 1 <= len(alts)
    best = alts[0].objective
    for a in alts:
        assert a.objective <= best + 0.5 + 1e-9
    for i in range(len(alts)):
        for j in range(i):
            assert np.max(np.abs(alts[i].x - alts[j].x) / 3.0) >= 0.2 - 1e-6


def _gurobi_or_skip():
    try:
        import gurobipy as gp

        env = gp.Env(empty=True)
        env.setParam("OutputFlag", 0)
        env.start()
        env.dispose()
    except Exception as exc:  # noqa: BLE001  (any licence/import problem means skip)
        pytest.skip(f"no usable Gurobi licence: {exc}")


@pytest.mark.parametrize("use_bounds", [True, False])
def test_gurobi_matches_highs(use_bounds):
    _gurobi_or_skip()
    mm = _mm(3, [10, 10], 2, seed=9)
    space = _space(3, integer=(0,), constraints=["i1 <= i2"])
    target = {"o0": 0.2, "o1": -0.3}
    ref = optimize(mm, space, target, {}, HIGHS)
    try:
        res = optimize(mm, space, target, {}, {**HIGHS, "backend": "gurobi",
                                                "use_bounds": use_bounds})
    except SolverLicenceError as exc:
        pytest.skip(str(exc))
    assert res.status == "optimal"
    assert res.objective == pytest.approx(ref.objective, abs=2e-4)
    assert res.x[0] == np.round(res.x[0]) and res.x[1] <= res.x[2] + 1e-7
    if use_bounds:  # a small net on Gurobi: no samples before the solve (its own heuristics)
        ws = res.info["warm_start"]
        assert ws["portfolio"]["path"] == "box-bounds" and ws["samples"] == 0


def test_warm_start_without_samples_is_empty_or_multistart_only():
    from simcalib.metamodel.milp.warmstart import warm_start

    mm = _mm(2, [6], 1, seed=4)
    space = _space(2)
    problem = build_problem(mm, space, {"o0": 0.1}, {}, None, None)
    # samples 0: what the portfolio asks on Gurobi's small nets (a config needs >= 1)
    ws = dataclasses.replace(SolverSettings.build({}).warm_start, samples=0, starts=3)
    x, f, st = warm_start(problem, space, ws, np.random.default_rng(0), multistart=False)
    assert x is None and f == np.inf and st["found"] is False
    x, f, st = warm_start(problem, space, ws,
                          np.random.default_rng(0), multistart=True)
    assert x is not None and f == pytest.approx(float(problem.objective(x)[0]))
    assert st["multistart_objective"] == f


def test_gurobi_licence_too_small_is_one_clear_error():
    _gurobi_or_skip()
    mm = _mm(2, [1200], 1, seed=10)
    space = _space(2)
    with pytest.raises(SolverLicenceError, match="backend: highs"):
        optimize(mm, space, {"o0": 0.0}, {}, {"backend": "gurobi", "use_bounds": False,
                                              "obbt": {"enabled": False},
                                              "warm_start": {"enabled": False}})


def test_cutoff_bounds_contain_every_point_at_least_as_good():
    mm = _mm(3, [16, 16], 2, seed=11)
    space = _space(3)
    prob = build_problem(mm, space, {"o0": 0.2, "o1": -0.1}, {})
    X = np.random.default_rng(1).uniform(prob.lo, prob.hi, (50000, 3))
    f = prob.objective(X)
    cutoff = float(np.quantile(f, 0.05))
    nb = tighten_bounds(prob, time_limit=30, cutoff=cutoff)
    good = X[f <= cutoff]
    assert (good >= nb.x_lo - 1e-9).all() and (good <= nb.x_hi + 1e-9).all()
    for (L, U), z in zip(nb.pre, prob.forward(good), strict=True):
        assert (z >= L - 1e-9).all() and (z <= U + 1e-9).all()
    # and the optimum under these bounds is the true one
    res = optimize(mm, space, {"o0": 0.2, "o1": -0.1}, {}, HIGHS)
    assert res.objective <= float(f.min()) + 1e-7


def test_warm_start_at_zero_objective_is_proven_without_a_solve():
    mm = _mm(2, [8], 1, seed=12)
    space = _space(2)
    y = float(mm.predict(np.array([0.3, 0.7]))[0, 0])
    res = optimize(mm, space, {"o0": y}, {}, HIGHS)
    assert res.status == "optimal" and res.objective <= 1e-4 and res.bound == 0.0


def test_inputs_are_matched_by_name_not_order():
    mm = _mm(2, [8, 8], 1, seed=13)
    fwd = build_space({"parameters": {"i0": {"lower": -1, "upper": 2},
                                            "i1": {"lower": -1, "upper": 2}}})
    rev = build_space({"parameters": {"i1": {"lower": -1, "upper": 2},
                                            "i0": {"lower": -1, "upper": 2}}})
    a = optimize(mm, fwd, {"o0": 0.4}, {}, HIGHS)
    b = optimize(mm, rev, {"o0": 0.4}, {}, HIGHS)
    assert a.objective == pytest.approx(b.objective, abs=2e-4)
    assert b.objective == pytest.approx(
        float(np.abs(mm.scale_outputs(mm.predict(b.x[::-1]))[0] - mm.scale_outputs(
            np.array([0.4]))).sum()), abs=1e-9)


def test_alternative_optima_on_gurobi():
    _gurobi_or_skip()
    mm = _mm(2, [8, 8], 1, seed=8)
    space = _space(2)
    ref = alternative_optima(mm, space, {"o0": 0.0}, {}, HIGHS, k=2, epsilon=0.5,
                             distance=0.2)
    alts = alternative_optima(mm, space, {"o0": 0.0}, {}, {**HIGHS, "backend": "gurobi"},
                              k=2, epsilon=0.5, distance=0.2)
    assert len(alts) == len(ref)
    assert alts[0].objective == pytest.approx(ref[0].objective, abs=2e-4)


@pytest.mark.slow
def test_floor_of_a_node_limited_milp_matches_the_multistart_baselines():
    """A MILP stopped early (one node, a poor 100-sample incumbent) returns a point
    worse than the benchmark's baselines; the floor's batched multi-start must
    bring OP level with them (here: onto the proven optimum)."""
    from simcalib.metamodel.milp.warmstart import multistart_lbfgs, sample_search
    from simcalib.seeds import rng

    mm = _mm(3, [32, 32], 2, seed=1)
    space = build_space({"parameters": {"i0": {"lower": -1.0, "upper": 2.0},
                                        "i1": {"lower": -1.0, "upper": 2.0},
                                        "i2": {"lower": 0, "upper": 60, "integer": True}}})
    target = {"o0": 0.3, "o1": -0.2}
    prob = build_problem(mm, space, target, {})
    lbfgs = min(multistart_lbfgs(prob, space, 20, rng(7, "ms", k))[1] for k in range(3))
    sampling = float(sample_search(prob, space, 100_000, rng(7, "s"))[1][0])
    limited = {"backend": "highs", "time_limit": 30, "threads": 1,
               "options": {"mip_max_nodes": 1}, "warm_start": {"samples": 100, "local": 0}}
    res = optimize(mm, space, target, {}, limited, seed=1)
    assert res.status != "optimal"
    assert res.info["floor"]["solver_objective"] > min(lbfgs, sampling) + 1e-3  # needs it
    assert res.objective <= min(lbfgs, sampling) + 1e-9
    assert res.info["floor"]["source"] == "multistart"
    assert float(prob.objective(res.x)[0]) == pytest.approx(res.objective, abs=1e-9)
    assert prob.feasible(res.x)[0]
    proven = optimize(mm, space, target, {}, {"backend": "highs", "time_limit": 60,
                                               "threads": 1}, seed=1)
    assert proven.status == "optimal"
    assert res.objective <= proven.objective + 1e-4
    assert res.bound <= proven.objective + 1e-9  # the solver's bound stays valid


def test_time_limit_bounds_the_whole_call_including_bound_tightening():
    """A 3x64 net's box and cutoff tightening alone take ~15 s at the default
    obbt limits; a 1 s time limit must cover them (the floor may add its fixed
    fraction of a second)."""
    import time

    from simcalib.metamodel.milp.boxbounds import clear_cache

    mm = _mm(4, [64, 64, 64], 2, seed=5)
    space = _space(4)
    clear_cache()
    t0 = time.perf_counter()
    res = optimize(mm, space, {"o0": 0.1, "o1": 0.2}, {}, {"backend": "highs",
                                                           "time_limit": 1.0, "threads": 1})
    wall = time.perf_counter() - t0
    assert wall < 6.0 and res.seconds < 6.0  # ~15 s with the limit on the solve only
    assert res.info["solve_time_limit"] < 1.0
    assert np.isfinite(res.objective) and res.bound <= res.objective + 1e-9


def test_sub_mip_heuristics_off_by_default_and_overridable():
    """``sub_mip`` (default false) switches HiGHS's RINS and RENS; raw options win."""
    import highspy

    from simcalib.metamodel.milp.highs_backend import apply_options
    from simcalib.metamodel.milp.optimize import solver_settings

    def run(opts: dict) -> tuple[bool, bool]:
        h = highspy.Highs()
        apply_options(h, solver_settings({"backend": "highs", **opts}), 0)
        return (h.getOptionValue("mip_heuristic_run_rins")[1],
                h.getOptionValue("mip_heuristic_run_rens")[1])

    assert run({}) == (False, False)
    assert run({"sub_mip": True}) == (True, True)
    assert run({"options": {"mip_heuristic_run_rins": True}}) == (True, False)


def test_pruned_float32_multistart_spends_less_and_matches_the_baselines(monkeypatch):
    """Successive halving and float32 gradient passes (the floor's defaults) evaluate
    under half the rows of the full descent and still reach the multi-start
    baselines; the objective returned is the float64 one at the returned point."""
    from simcalib.metamodel.milp import multistart
    from simcalib.metamodel.milp.warmstart import multistart_lbfgs
    from simcalib.seeds import rng

    mm = _mm(3, [32, 32], 2, seed=1)
    space = build_space({"parameters": {"i0": {"lower": -1.0, "upper": 2.0},
                                        "i1": {"lower": -1.0, "upper": 2.0},
                                        "i2": {"lower": 0, "upper": 60, "integer": True}}})
    prob = build_problem(mm, space, {"o0": 0.3, "o1": -0.2}, {})
    rows: list[int] = []
    grad = multistart.batch_objective_grad

    def counting(problem, X, layers=None):
        rows.append(len(X))
        return grad(problem, X, layers)

    monkeypatch.setattr(multistart, "batch_objective_grad", counting)
    full = multistart.batched_multistart(prob, rng(3), starts=256, prune=False, single=False)
    n_full, rows[:] = sum(rows), []
    fast = multistart.batched_multistart(prob, rng(3), starts=256)
    assert sum(rows) < 0.5 * n_full
    lbfgs = min(multistart_lbfgs(prob, space, 20, rng(7, "ms", k))[1] for k in range(3))
    assert fast.objective <= lbfgs + 1e-6
    assert fast.objective <= full.objective + 1e-3
    assert float(prob.objective(fast.x)[0]) == pytest.approx(fast.objective, abs=1e-12)
    assert prob.feasible(fast.x)[0]
