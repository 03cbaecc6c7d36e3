"""``obbt.max_lps``: a count of LPs caps the bound tightening (issue 41).  Capped, the
neurons not reached keep their interval bounds: still valid (every sampled
pre-activation inside them, the MILP's optimum unchanged), never more LPs than the
cap, and the log says how many were solved and skipped."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from simcalib.metamodel.milp import build_problem, optimize
from simcalib.metamodel.milp.bounds import interval_bounds, tighten_bounds
from simcalib.metamodel.milp.settings import SolverSettings
from simcalib.metamodel.model import Metamodel, build_net
from simcalib.study.space import build_space

TARGET = {"o0": 0.2, "o1": -0.1}


def _mm(n_in: int, hidden: list[int], seed: int) -> Metamodel:
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        net = build_net(n_in, hidden, 2)
    r = np.random.default_rng(seed)
    return Metamodel(net, [f"i{k}" for k in range(n_in)], ["o0", "o1"],
                     r.uniform(-1, 1, n_in), r.uniform(0.5, 2, n_in), r.uniform(-1, 1, 2),
                     r.uniform(0.5, 2, 2), {"study": "toy"})


def _space(n_in: int):
    return build_space({"parameters": {f"i{k}": {"lower": -1.0, "upper": 2.0}
                                       for k in range(n_in)},
                        "contexts": {}, "constraints": []})


@pytest.mark.parametrize("cap", [0, 7, 20])
def test_capped_bounds_stay_valid_and_solve_at_most_the_cap(cap: int, caplog) -> None:
    mm = _mm(3, [16, 16, 8], seed=1)
    prob = build_problem(mm, _space(3), TARGET, {})
    X = np.random.default_rng(1).uniform(prob.lo, prob.hi, (40000, 3))
    f = prob.objective(X)
    cutoff = float(np.quantile(f, 0.05))
    full = tighten_bounds(prob, time_limit=60, cutoff=cutoff)
    assert full.complete and full.lp_solves > 20 and full.stopped_by is None
    with caplog.at_level(logging.INFO, logger="simcalib.metamodel.milp.bounds"):
        nb = tighten_bounds(prob, time_limit=60, cutoff=cutoff, max_lps=cap)
    assert nb.lp_solves <= cap and not nb.complete and nb.stopped_by == "max_lps"
    assert nb.lp_skipped >= 2   # at least the pair that would have passed the cap
    assert (f"stopped by obbt.max_lps ({cap}): {nb.lp_solves} LPs solved, "
            f"{nb.lp_skipped} skipped") in caplog.text
    # valid: every point at least as good as the cutoff lies inside the bounds
    good = X[f <= cutoff]
    assert (good >= nb.x_lo - 1e-9).all() and (good <= nb.x_hi + 1e-9).all()
    ia = interval_bounds(prob)
    for (L, U), (Lf, Uf), (Li, Ui), z in zip(nb.pre, full.pre, ia, prob.forward(good),
                                             strict=True):
        assert (z >= L - 1e-9).all() and (z <= U + 1e-9).all()
        # looser than the full tightening, never looser than interval arithmetic
        assert (L <= Lf + 1e-9).all() and (U >= Uf - 1e-9).all()
        assert (L >= Li - 1e-12).all() and (U <= Ui + 1e-12).all()
    if cap == 0:   # no LP at all: interval arithmetic over the box
        for (L, U), (Li, Ui) in zip(nb.pre, ia, strict=True):
            np.testing.assert_array_equal(L, Li)
            np.testing.assert_array_equal(U, Ui)


def test_a_cap_above_the_need_changes_nothing() -> None:
    mm = _mm(3, [16, 16], seed=11)
    prob = build_problem(mm, _space(3), TARGET, {})
    full = tighten_bounds(prob, time_limit=60, cutoff=1.0)
    same = tighten_bounds(prob, time_limit=60, cutoff=1.0, max_lps=full.lp_solves)
    assert same.complete and same.lp_skipped == 0 and same.lp_solves == full.lp_solves
    for (L, U), (Lf, Uf) in zip(same.pre, full.pre, strict=True):
        np.testing.assert_array_equal(L, Lf)
        np.testing.assert_array_equal(U, Uf)


def test_milp_optimum_unchanged_under_a_small_cap() -> None:
    """The MILP on capped bounds proves the same optimum as on fully tightened ones,
    and its per-target tightening solved no more LPs than the cap."""
    mm = _mm(3, [16, 16], seed=11)
    space = _space(3)
    base = {"backend": "highs", "time_limit": 60, "threads": 1,
            "warm_start": {"samples": 200, "local": 0}, "obbt": {"light_below": 0}}
    full = optimize(mm, space, TARGET, {}, SolverSettings.build(base))
    cap = 6
    capped = optimize(mm, space, TARGET, {}, SolverSettings.build(
        {**base, "obbt": {"light_below": 0, "max_lps": cap}}))
    assert full.status == capped.status == "optimal"
    b_full, b_cap = full.info["bounds"], capped.info["bounds"]
    assert b_full["lp_solves"] > cap >= b_cap["lp_solves"] and b_cap["lp_skipped"] > 0
    assert capped.objective == pytest.approx(full.objective, abs=1e-6)
    # the optimum is a true minimum: no sampled point beats it
    prob = build_problem(mm, space, TARGET, {})
    X = np.random.default_rng(2).uniform(prob.lo, prob.hi, (50000, 3))
    assert capped.objective <= float(prob.objective(X).min()) + 1e-7
