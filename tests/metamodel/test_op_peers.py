"""benchmarks/op_peers.py: OMLT's MILP built from simcalib's folded layers has the
same optimum as simcalib's OP, and both equal the torch forward pass there (skipped
without the ``peers`` extra)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("omlt")
pytest.importorskip("pyomo")

from simcalib.metamodel.milp import build_problem, optimize  # noqa: E402
from simcalib.metamodel.model import Metamodel, build_net  # noqa: E402
from simcalib.study.space import build_space  # noqa: E402
from tests.fixtures.benchmarks import load_benchmark  # noqa: E402


def _op_peers():
    return load_benchmark("op_peers")


def test_omlt_optimum_equals_simcalib_and_the_forward_pass():
    peers = _op_peers()
    if peers.peers_available():
        pytest.skip(peers.peers_available())
    with torch.random.fork_rng():
        torch.manual_seed(5)
        net = build_net(3, [8, 8], 2)
    r = np.random.default_rng(5)
    mm = Metamodel(net, ["a", "k", "c"], ["o0", "o1"], r.uniform(-1, 1, 3),
                   r.uniform(0.5, 2, 3), r.uniform(-1, 1, 2), r.uniform(0.5, 2, 2),
                   {"study": "toy"})
    # an integer tunable, a linear constraint and a context folded into the first layer
    space = build_space({"parameters": {"a": {"lower": -1.0, "upper": 2.0},
                                        "k": {"lower": 0, "upper": 4, "integer": True}},
                         "contexts": {"c": {"values": [0.5, 1.5]}},
                         "constraints": ["a + k <= 4.5"]})
    target, context = {"o0": 0.7, "o1": -0.2}, {"c": 1.5}
    solver = {"backend": "highs", "time_limit": 20, "threads": 1, "mip_gap_abs": 1e-4}
    ours = optimize(mm, space, target, context, solver, seed=1)
    problem = build_problem(mm, space, target, context)
    om = peers.solve_omlt(problem, 20.0, 1)
    assert ours.status == "optimal" and om["status"] == "optimal"
    assert om["objective"] == pytest.approx(ours.objective, abs=2e-4)
    x, f = peers.torch_objective(mm, problem, om["x"])
    assert f == pytest.approx(om["objective"], abs=peers.FORWARD_TOL)
    assert x[1] == np.round(x[1]) and x[0] + x[1] <= 4.5 + 1e-7
    # both are the optimum: no point of a fine grid over the feasible set is better
    g = np.linspace(-1, 2, 301)
    X = np.array([[a, k] for k in range(5) for a in g if a + k <= 4.5])
    grid = min(peers.torch_objective(mm, problem, xx)[1] for xx in X[::1])
    assert ours.objective <= grid + 1e-7 and om["objective"] <= grid + 2e-4
    # the row the benchmark writes says the same
    row = peers.compare_one(mm, space, target, context, solver, 20.0, 1, omlt_first=True)
    assert row["both_proven"] and row["agree"]
    assert row["simcalib_forward_ok"] and row["omlt_forward_ok"]
