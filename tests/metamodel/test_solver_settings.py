"""Solver and optimize settings built once (issue 40): the schema's defaults, a typo
is a ConfigError naming the key with "did you mean", from every entry point of the
MILP stage, and a built object is not validated again."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from simcalib.config import schema_defaults
from simcalib.errors import ConfigError
from simcalib.metamodel.milp.settings import (
    SKIP_BELOW,
    OptimizeSettings,
    SolverSettings,
)


def test_defaults_are_the_schema_s_and_the_object_is_frozen():
    s = SolverSettings.build({})
    d = schema_defaults("solvers.schema.yaml", "option_set", {"backend": "highs"})
    assert s.time_limit == d["time_limit"] and s.sub_mip is d["sub_mip"] is False
    assert s.warm_start.samples == d["warm_start"]["samples"]
    # skip_below null in the schema: resolved by backend once, at build
    assert d["obbt"]["skip_below"] is None
    assert s.obbt.skip_below == SKIP_BELOW["highs"]
    assert SolverSettings.build({"backend": "gurobi"}).obbt.skip_below == SKIP_BELOW["gurobi"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.time_limit = 1.0  # type: ignore[misc]
    assert SolverSettings.build(s) is s                     # built once, not re-validated


def test_nested_sections_merge_key_by_key():
    s = SolverSettings.build({"obbt": {"time_limit": 3}, "warm_start": {"local": 1}})
    assert s.obbt.time_limit == 3 and s.obbt.enabled is True
    assert s.warm_start.local == 1 and s.warm_start.samples == 20000
    v = s.merged({"obbt": {"enabled": False}, "options": {"mip_max_nodes": 50}})
    assert v.obbt.enabled is False and v.obbt.time_limit == 3
    assert v.options == {"mip_max_nodes": 50} and s.options == {}


@pytest.mark.parametrize("bad, key, hint", [
    ({"time_limt": 5}, r"solver\.time_limt", "did you mean 'time_limit'"),
    ({"obbt": {"box_time_limt": 5}}, r"solver\.obbt\.box_time_limt", "box_time_limit"),
    ({"time_limit": -1}, r"solver\.time_limit", "minimum"),
    ({"options": {"mip_max_node": 10}}, r"solver\.options\.mip_max_node",
     "did you mean 'mip_max_nodes'"),
])
def test_a_typo_is_a_config_error_naming_the_key(bad, key, hint):
    with pytest.raises(ConfigError, match=key) as err:
        SolverSettings.build(bad)
    assert hint in str(err.value)
    with pytest.raises(ConfigError, match=key):
        SolverSettings.build({}).merged(bad)


def test_optimize_settings_resolve_the_named_set():
    sets = {"highs-default": {"backend": "highs", "threads": 1}}
    o = OptimizeSettings.build({"alternatives": {"k": 2}}, sets, "studies.x.optimize")
    assert o.solver_name == "highs-default" and o.solver.threads == 1
    assert (o.alternatives.k, o.alternatives.epsilon) == (2, 0.01) and o.weights == {}
    with pytest.raises(ConfigError, match=r"studies\.x\.optimize\.solver.*did you mean "
                                          r"'highs-default'"):
        OptimizeSettings.build({"solver": "highs-defualt"}, sets, "studies.x.optimize")
    with pytest.raises(ConfigError, match=r"solvers\.highs-default\.thread"):
        OptimizeSettings.build({}, {"highs-default": {"backend": "highs", "thread": 1}},
                               "studies.x.optimize")


def test_optimize_raises_the_typo_before_any_work():
    """``optimize`` builds the settings first: the typo is the error, not a failed
    solve that a strategy would record as data."""
    from simcalib.metamodel.milp import optimize

    class Boom:   # any use of the metamodel would fail differently
        def __getattr__(self, name):
            raise AssertionError("the metamodel was used before the settings were checked")

    with pytest.raises(ConfigError, match=r"solver\.warm_strat"):
        optimize(Boom(), None, {}, None, {"warm_strat": {}})  # type: ignore[arg-type]


def test_mm_optimize_params_with_a_typo_fail_naming_the_key(tmp_path):
    import argparse

    from simcalib.commands.metamodel import _optimize_params

    space = {"parameters": {"a": {"lower": 0.0, "upper": 1.0}}, "contexts": {},
             "constraints": []}
    params = {"space": space, "optimize": {},
              "solver": {"backend": "highs", "mip_gap_ab": 0.1}}
    args = argparse.Namespace(config=None, study="toy", threads=None,
                              params=json.dumps(params))
    with pytest.raises(ConfigError, match=r"solvers\.highs-default\.mip_gap_ab.*"
                                          r"did you mean 'mip_gap_abs'"):
        _optimize_params(args)
    params["solver"] = {"backend": "highs", "mip_gap_abs": 0.1}
    args.params = json.dumps(params)
    args.threads = 3
    sp, opt = _optimize_params(args)
    assert opt.solver.mip_gap_abs == 0.1 and opt.solver.threads == 3
    assert list(sp.tunable_names) == ["a"] and np.isfinite(opt.alternatives.distance)


def test_a_node_limit_stops_the_search_after_fixed_work():
    """A node limit, not seconds, decides where a hard solve stops (issue 40): the
    status says so, and two runs give the same point and the same node count."""
    import torch

    from simcalib.metamodel.milp import optimize
    from simcalib.metamodel.model import Metamodel, build_net
    from simcalib.study.space import build_space

    with torch.random.fork_rng():
        torch.manual_seed(5)
        net = build_net(3, [24, 24], 3)
    r = np.random.default_rng(5)
    mm = Metamodel(net, [f"i{k}" for k in range(3)], [f"o{k}" for k in range(3)],
                   r.uniform(-1, 1, 3), r.uniform(0.5, 2, 3), r.uniform(-1, 1, 3),
                   r.uniform(0.5, 2, 3), {"study": "toy"})
    space = build_space({"parameters": {f"i{k}": {"lower": -1.0, "upper": 2.0}
                                        for k in range(3)}, "contexts": {}, "constraints": []})
    solver = SolverSettings.build({"threads": 1, "time_limit": 600, "obbt": {"enabled": False},
                                   "warm_start": {"samples": 200, "local": 0, "starts": 4,
                                                  "iters": 20, "polish": 1},
                                   "options": {"mip_max_nodes": 5}})
    target = {"o0": 0.0, "o1": -0.1, "o2": -0.2}
    a, b = (optimize(mm, space, target, {}, solver, seed=0) for _ in range(2))
    assert a.status == "node_limit" and a.nodes == 5 and not a.time_limited
    assert np.array_equal(a.x, b.x) and a.objective == b.objective and b.nodes == 5
