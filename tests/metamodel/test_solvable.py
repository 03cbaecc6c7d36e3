"""Solvable training (ReLU stability + sparsity), the stability record, box bounds
reused across targets, the OP portfolio and the never-worse-than-local-search floor."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from simcalib.metamodel.milp import build_problem, highs_backend, optimize
from simcalib.metamodel.milp.bounds import tighten_bounds
from simcalib.metamodel.milp.boxbounds import box_bounds, clear_cache
from simcalib.metamodel.milp.warmstart import multistart_lbfgs
from simcalib.metamodel.model import Metamodel, build_net
from simcalib.metamodel.solvable import interval_preacts, rs_penalty
from simcalib.metamodel.training import train_metamodel
from simcalib.seeds import rng
from simcalib.study.space import build_space
from tests.fixtures.toy_data import FAST, _data

HIGHS = {"backend": "highs", "time_limit": 30, "threads": 1,
         "warm_start": {"samples": 2000, "local": 2, "starts": 4}}


@pytest.fixture(scope="module")
def pair():
    df = _data()
    plain = train_metamodel(df, ["a", "b", "c"], ["p", "q"], FAST, seed=1, study="toy")
    solv = train_metamodel(df, ["a", "b", "c"], ["p", "q"],
                           {**FAST, "solvable": {"enabled": True, "epochs": 80,
                                                 "rs_weight": 0.1}}, seed=1, study="toy")
    return plain, solv


def test_solvable_training_removes_unstable_neurons_and_keeps_r2(pair):
    (_, mp), (mm, ms) = pair
    rec = ms["solvable"]
    assert rec["applied"] and rec["chosen_epoch"] >= 1
    # the same plain net is the starting point (same seed and split)
    assert rec["plain_test_r2"] == pytest.approx(mp["test_r2"])
    assert rec["interval_unstable"] < rec["interval_unstable_plain"]
    assert ms["stability"]["binaries"] < mp["stability"]["binaries"]
    # validation R2 guard on every output; test R2 follows closely on this smooth toy
    assert rec["val_r2_max_drop"] <= rec["settings"]["r2_tolerance"] + 1e-12
    assert rec["test_r2_max_drop"] <= 0.01
    assert 0 < rec["hidden_sparsity"] <= 0.5 + 1e-9
    assert "stability" in mm.info and "solvable" in mm.info


@pytest.mark.parametrize("which", [0, 1])
def test_stability_counts_hold_on_sampled_inputs(pair, which):
    mm, m = pair[which]
    st = m["stability"]
    assert st["binaries"] == st["neurons"] - st["stable_active"] - st["stable_inactive"]
    assert st["binaries"] <= st["interval_unstable"]
    # no sampled point of the input box contradicts a neuron the LP calls stable
    lo = np.array([mm.info["input_bounds"][n][0] for n in mm.input_names])
    hi = np.array([mm.info["input_bounds"][n][1] for n in mm.input_names])
    X = torch.as_tensor(mm.scale_inputs(np.random.default_rng(0).uniform(lo, hi, (20000, 3))))
    pre, a = [], X
    with torch.no_grad():
        for mod in mm.net:
            a = mod(a)
            if isinstance(mod, torch.nn.Linear):
                pre.append(a.numpy())
    pre = pre[:-1]
    always_on = sum(int((z >= 0).all(axis=0).sum()) for z in pre)
    always_off = sum(int((z <= 0).all(axis=0).sum()) for z in pre)
    assert st["stable_active"] <= always_on and st["stable_inactive"] <= always_off


def test_rs_penalty_is_zero_only_for_stable_neurons():
    with torch.random.fork_rng():
        torch.manual_seed(0)
        net = build_net(2, [4], 1)
    lo, hi = torch.tensor([-1.0, -1.0], dtype=torch.float64), torch.ones(2, dtype=torch.float64)
    (L, U), = interval_preacts(net, lo, hi)
    W, b = net[0].weight.detach(), net[0].bias.detach()
    corners = torch.tensor([[x, y] for x in (-1.0, 1.0) for y in (-1.0, 1.0)],
                           dtype=torch.float64) @ W.T + b
    # first layer on a box: interval bounds are exact (attained at corners)
    assert torch.allclose(L.detach(), corners.min(0).values)
    assert torch.allclose(U.detach(), corners.max(0).values)
    with torch.no_grad():
        net[0].bias.copy_(W.abs().sum(1) + 0.5)  # every neuron always active
    assert float(rs_penalty(interval_preacts(net, lo, hi)).detach()) == 0.0
    with torch.no_grad():
        net[0].bias.zero_()  # hyperplanes through the middle: maximal penalty 1/2
    assert float(rs_penalty(interval_preacts(net, lo, hi)).detach()) == pytest.approx(0.5)


def _toy_mm(seed: int = 3) -> tuple[Metamodel, object]:
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        net = build_net(2, [16, 16], 2)
    r = np.random.default_rng(seed)
    mm = Metamodel(net, ["i0", "i1"], ["o0", "o1"], r.uniform(-1, 1, 2), r.uniform(0.5, 2, 2),
                   r.uniform(-1, 1, 2), r.uniform(0.5, 2, 2), {"study": "toy"})
    space = build_space({"parameters": {"i0": {"lower": -1.0, "upper": 2.0},
                                              "i1": {"lower": -1.0, "upper": 2.0}},
                               "contexts": {}, "constraints": []})
    return mm, space


def _grid_min(mm, target):
    xs = np.linspace(-1, 2, 601)
    X1, X2 = np.meshgrid(xs, xs, indexing="ij")
    z = mm.scale_outputs(np.array([target[o] for o in mm.output_names]))
    return float(np.abs(mm.predict_scaled(np.column_stack([X1.ravel(), X2.ravel()]))
                        - z).sum(axis=1).min())


@pytest.mark.parametrize(("skip_below", "light_below", "path"),
                         [(0, 0, "cutoff"), (0, 1000, "cutoff-light"),
                          (1000, 1000, "box-bounds")])
def test_box_bounds_are_cached_and_every_portfolio_path_finds_the_optimum(
        skip_below, light_below, path):
    clear_cache()
    mm, space = _toy_mm()
    solver = {**HIGHS, "obbt": {"skip_below": skip_below, "light_below": light_below}}
    for k, target in enumerate([{"o0": 0.3, "o1": -0.4}, {"o0": -0.2, "o1": 0.5}]):
        res = optimize(mm, space, target, {}, solver, seed=k)
        port = res.info["warm_start"]["portfolio"]
        assert port["box_cached"] == (k == 1)  # the second target reuses the box bounds
        assert port["path"] == path
        assert res.status == "optimal"
        grid = _grid_min(mm, target)
        assert grid - 0.05 <= res.objective <= grid + 1e-7


def test_light_path_tightens_once_and_samples_less_once_box_bounds_are_cached(monkeypatch):
    """``obbt.light_below``: a net with few unstable neurons gets one round of
    per-target tightening (fewer LPs than two) and, from the second target on (box
    bounds cached), the light warm start; the optimum is the same."""
    import importlib

    opt = importlib.import_module("simcalib.metamodel.milp.optimize")
    seen: list[int] = []
    real = opt.search_warm_start

    def spy(problem, space, cfg, gen, multistart=True):
        seen.append(cfg.samples)
        return real(problem, space, cfg, gen, multistart=multistart)

    monkeypatch.setattr(opt, "search_warm_start", spy)
    mm, space = _toy_mm()
    targets = [{"o0": 0.3, "o1": -0.4}, {"o0": -0.2, "o1": 0.5}]
    out = {}
    for light in (0, 1000):
        clear_cache()
        seen.clear()
        solver = {**HIGHS, "warm_start": {**HIGHS["warm_start"], "samples": 20000},
                  "obbt": {"light_below": light}}
        out[light] = [optimize(mm, space, t, {}, solver, seed=k) for k, t in enumerate(targets)]
        assert seen == ([20000, 20000] if light == 0 else [20000, opt.LIGHT_SAMPLES])
    for full, lite in zip(out[0], out[1000], strict=True):
        assert full.status == lite.status == "optimal"
        assert abs(full.objective - lite.objective) <= 1e-4
        assert lite.info["bounds"]["lp_solves"] < full.info["bounds"]["lp_solves"]


def test_box_bounds_contain_sampled_preactivations():
    mm, space = _toy_mm(5)
    prob = build_problem(mm, space, {"o0": 0.0, "o1": 0.0}, {})
    nb, _ = box_bounds(prob, use_cache=False)
    X = np.random.default_rng(1).uniform(prob.lo, prob.hi, (20000, 2))
    for (L, U), z in zip(nb.pre, prob.forward(X), strict=True):
        assert (z >= L - 1e-9).all() and (z <= U + 1e-9).all()


def test_op_is_never_worse_than_its_local_search_pool(monkeypatch):
    """A solve that ends without an incumbent (time limit) still returns the pool's
    best point, with the solver's bound and the honest gap."""
    mm, space = _toy_mm(7)
    target = {"o0": 0.1, "o1": 0.2}

    def no_incumbent(model, solver, warm=None, seed=0):
        return highs_backend.RawSolve(status="time_limit", values=None, objective=np.inf,
                                      bound=0.0, nodes=1, seconds=0.0, time_limited=True)

    monkeypatch.setattr(highs_backend, "solve", no_incumbent)
    res = optimize(mm, space, target, {}, {**HIGHS, "obbt": {"skip_below": 1000}}, seed=2)
    assert res.status == "time_limit" and np.isfinite(res.x).all()
    ws = res.info["warm_start"]
    assert res.info["floor"]["source"] in ("warm_start_pool", "multistart", "refined_samples")
    # deferred multi-start ran because the solve was unproven; never worse than it
    assert res.objective <= ws["multistart_objective"] + 1e-12
    assert res.objective <= ws["sample_objective"] + 1e-12
    assert res.gap == pytest.approx(res.objective - 0.0)
    prob = build_problem(mm, space, target, {})
    _, fl = multistart_lbfgs(prob, space, 4, rng(2, "op", "floor_multistart"))
    assert res.objective <= fl + 1e-12


def test_highs_thread_count_may_change_within_a_process():
    """HiGHS keeps one global scheduler: an LP with 1 thread, then a MILP with 2,
    must both solve (the MILP used to end with status not_set)."""
    mm, space = _toy_mm(9)
    prob = build_problem(mm, space, {"o0": 0.0, "o1": 0.0}, {})
    tighten_bounds(prob, threads=1)
    res = optimize(mm, space, {"o0": 0.0, "o1": 0.0}, {}, {**HIGHS, "threads": 2})
    assert res.status == "optimal"


def test_low_r2_is_flagged_with_a_warning(caplog):
    df = _data(300)
    df["q"] = np.random.default_rng(0).normal(size=len(df))  # pure noise: R2 ~ 0
    with caplog.at_level(logging.WARNING, logger="simcalib.metamodel"):
        _, m = train_metamodel(df, ["a", "b", "c"], ["p", "q"], {**FAST, "epochs": 30},
                               seed=0, study="noisy")
    assert m["low_r2_outputs"] == ["q"] and m["r2_ok"] is False and m["min_r2"] == 0.9
    assert any("below metamodel.min_r2" in r.getMessage() and "q" in r.getMessage()
               for r in caplog.records)


def test_code_defaults_mirror_the_schemas():
    """metamodel.solvable, min_r2 and the solver option set's new keys: the library's
    defaults (used by direct API calls) equal the schema's (used by the workflow)."""
    from simcalib.config import SCHEMA_DIR, load_yaml
    from simcalib.metamodel.milp import SOLVER_DEFAULTS
    from simcalib.metamodel.solvable import SOLVABLE_DEFAULTS
    from simcalib.metamodel.training import DEFAULTS

    mm = load_yaml(SCHEMA_DIR / "metamodel.schema.yaml")["properties"]
    assert DEFAULTS["min_r2"] == mm["min_r2"]["default"]
    props = mm["solvable"]["properties"]
    assert SOLVABLE_DEFAULTS == {k: v["default"] for k, v in props.items()}
    opt = load_yaml(SCHEMA_DIR / "solvers.schema.yaml")["definitions"]["option_set"]
    for sec in ("obbt", "warm_start"):
        schema = {k: v["default"] for k, v in opt["properties"][sec]["properties"].items()}
        assert SOLVER_DEFAULTS[sec] == schema, sec


def test_auto_fine_tunes_only_a_net_the_milp_would_find_hard(pair):
    """``enabled: auto`` (the default) keeps a small net as trained when its unstable
    neurons are at most ``min_unstable``, and fine-tunes it above that."""
    (_, mp), _ = pair
    n_plain = mp["stability"]["interval_unstable"]
    df = _data()
    cfg = {k: v for k, v in FAST.items() if k != "solvable"}
    _, keep = train_metamodel(df, ["a", "b", "c"], ["p", "q"],
                              {**cfg, "solvable": {"enabled": "auto", "min_unstable": n_plain}},
                              seed=1, study="toy")
    assert keep.get("solvable") is None and keep["test_r2"] == pytest.approx(mp["test_r2"])
    _, tuned = train_metamodel(df, ["a", "b", "c"], ["p", "q"],
                               {**cfg, "solvable": {"enabled": "auto", "min_unstable": 0,
                                                    "epochs": 80}}, seed=1, study="toy")
    assert tuned["solvable"]["applied"]
    assert tuned["solvable"]["interval_unstable_plain"] == n_plain


def test_solvable_training_with_dropout_is_reproducible():
    """Dropout in the solvable phase draws from torch's global generator, which torch
    seeds at random in each process: the phase seeds it itself, so the same seed gives
    the same net (it did not: the default config's rosenbrock_noise20 metamodel differed
    from run to run)."""
    df = _data(200)
    cfg = {**FAST, "dropout": 0.2, "epochs": 20,
           "solvable": {"enabled": True, "epochs": 20, "rs_weight": 0.1}}
    torch.manual_seed(1)   # a different global state before each call
    a, _ = train_metamodel(df, ["a", "b", "c"], ["p", "q"], cfg, seed=3, study="drop")
    torch.manual_seed(2)
    b, _ = train_metamodel(df, ["a", "b", "c"], ["p", "q"], cfg, seed=3, study="drop")
    for (wa, ba), (wb, bb) in zip(a.linear_layers(), b.linear_layers(), strict=True):
        np.testing.assert_array_equal(wa, wb)
        np.testing.assert_array_equal(ba, bb)
