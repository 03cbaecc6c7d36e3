"""Failure handling: the failure region of a built-in simulator (simulator.fail_region),
the run-success classifier (simcalib.metamodel.failure) and its MILP constraint."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest

from simcalib.config import load_yaml, validate_config
from simcalib.errors import ConfigError
from simcalib.study import Study
from simcalib.study.simulation import simulate_rows

QUAD = {
    "simulator": {"type": "rosenbrock", "fail_region": {"x": [0.5, 1.0]}},
    "parameters": {"x": {"lower": -2.0, "upper": 2.0}, "y": {"lower": -1.0, "upper": 3.0}},
}


def test_fail_region_fails_exactly_the_box_and_keeps_other_rows() -> None:
    plain = Study("r", {**QUAD, "simulator": {"type": "rosenbrock"}})
    failing = Study("r", QUAD)
    rows = pd.DataFrame({"run_id": np.arange(5), "x": [0.0, 0.5, 0.7, 1.0, 1.5],
                         "y": [1.0] * 5})
    a = simulate_rows(plain, rows, 3)
    b = simulate_rows(failing, rows, 3)
    inside = np.array([False, True, True, True, False])   # ends included
    assert (b["status"] == np.where(inside, "error", "ok")).all()
    assert b.loc[inside, "f"].isna().all()
    assert b.loc[inside, "message"].str.contains("failure region").all()
    np.testing.assert_array_equal(a.loc[~inside, "f"], b.loc[~inside, "f"])


def test_fail_region_union_of_boxes_and_integer_top_value() -> None:
    cfg = {"simulator": {"type": "rosenbrock",
                         "fail_region": [{"x": [1.5, 2.0]}, {"n": [3, 3], "y": [0.0, 1.0]}]},
           "parameters": {"x": {"lower": -2.0, "upper": 2.0},
                          "y": {"lower": -1.0, "upper": 3.0},
                          "n": {"lower": 0, "upper": 3, "integer": True}}}
    s = Study("r", cfg)
    rows = pd.DataFrame({"run_id": np.arange(4), "x": [1.8, 0.0, 0.0, 0.0],
                         "y": [2.0, 0.5, 2.0, 0.5], "n": [0, 3, 3, 2]})
    out = simulate_rows(s, rows, 1)
    assert list(out["status"]) == ["error", "error", "ok", "ok"]


@pytest.mark.parametrize("spec,match", [({"z": [0, 1]}, "not an input"),
                                        ({"x": [1, 0]}, "lo <= hi"),
                                        ({"x": 3}, "lo <= hi"), ("x", "not of type")])
def test_fail_region_bad_spec_names_the_key(spec, match) -> None:
    cfg = copy.deepcopy(QUAD)
    cfg["simulator"]["fail_region"] = spec
    with pytest.raises(ConfigError, match=match) as err:
        Study("r", cfg).simulator  # noqa: B018
    assert "simulator.fail_region" in str(err.value)


def test_fail_region_passes_the_schema() -> None:
    cfg = copy.deepcopy(load_yaml("tests/configs/tiny.yaml"))
    name = next(iter(cfg["studies"]))
    cfg["studies"][name]["simulator"]["fail_region"] = {
        next(iter(cfg["studies"][name]["parameters"])): [0, 0.1]}
    validate_config(cfg)


# ---- the run-success classifier and its MILP constraint ---------------------------------

def _failing_design(n: int = 400, seed: int = 0) -> pd.DataFrame:
    """y = 0.1 k + (x - 0.5)^2 on x in [0, 1], k in 0..6; every run with k <= 1 fails.
    A metamodel of the ok runs extrapolates the linear trend in k, so for the target
    y = 0 its optimum is k = 0, where the simulator always fails."""
    r = np.random.default_rng(seed)
    df = pd.DataFrame({"x": r.uniform(0, 1, n), "k": r.integers(0, 7, n).astype(float)})
    df["y"] = 0.1 * df["k"] + (df["x"] - 0.5) ** 2
    df["status"] = np.where(df["k"] <= 1, "error", "ok")
    df.loc[df["status"] != "ok", "y"] = np.nan
    return df


@pytest.fixture(scope="module")
def failing_mm():
    import torch

    from simcalib.metamodel.failure import fit_failure
    from simcalib.metamodel.training import train_metamodel

    torch.set_num_threads(1)
    df = _failing_design()
    mm, _ = train_metamodel(df, ["x", "k"], ["y"], {"hidden": [16, 16], "epochs": 200,
                                                    "threads": 1, "solvable": {"enabled": False}},
                            seed=1, study="f")
    ok = (df["status"] == "ok").to_numpy()
    fm = fit_failure(df[["x", "k"]].to_numpy(), ok, ["x", "k"], {}, seed=1, tag="f")
    return mm, fm, df


SPACE = {"parameters": {"x": {"lower": 0.0, "upper": 1.0},
                        "k": {"lower": 0, "upper": 6, "integer": True}}}


def test_classifier_learns_where_runs_fail(failing_mm) -> None:
    _, fm, df = failing_mm
    assert fm is not None and fm.info["failed"] == int((df["status"] != "ok").sum())
    assert fm.accuracy >= 0.95 and fm.info["balanced_accuracy"] >= 0.95
    grid = np.array([[0.5, k] for k in range(7)], dtype=float)
    assert list(fm.ok(grid)) == [False, False, True, True, True, True, True]
    from simcalib.metamodel.failure import fit_failure

    every_ok = np.ones(len(df), dtype=bool)
    assert fit_failure(df[["x", "k"]].to_numpy(), every_ok, ["x", "k"]) is None
    assert fit_failure(df[["x", "k"]].to_numpy(), df["k"].to_numpy() > 1, ["x", "k"],
                       {"model": "off"}) is None


def test_op_avoids_the_failing_region_only_with_the_classifier(failing_mm) -> None:
    from simcalib.metamodel.milp import optimize
    from simcalib.study.space import build_space

    mm, fm, _ = failing_mm
    space = build_space(SPACE)
    solver = {"backend": "highs", "time_limit": 30, "threads": 1}
    blind = optimize(mm, space, {"y": 0.0}, {}, solver, seed=1)
    assert blind.x[1] <= 1                      # walks into k <= 1: every run fails there
    guarded = optimize(mm, space, {"y": 0.0}, {}, solver, seed=1, failure=fm)
    assert guarded.status == "optimal"
    assert guarded.x[1] == 2                    # the best k where runs succeed
    assert guarded.x[0] == pytest.approx(0.5, abs=0.1)
    assert guarded.info["failure"]["success_probability"] >= 0.5
    assert guarded.predicted.shape == (1,)      # the metamodel's outputs only
    assert guarded.objective >= blind.objective - 1e-9
    mm.failure = fm                             # attached: every OP is guarded
    try:
        assert optimize(mm, space, {"y": 0.0}, {}, solver, seed=1).x[1] == 2
    finally:
        mm.failure = None


def test_failure_file_roundtrip_and_sampling_filter(failing_mm, tmp_path) -> None:
    from simcalib.metamodel.failure import load_failure, load_metamodel, save_failure
    from simcalib.metamodel.strategies.ledger import Target, TargetRun

    mm, fm, _ = failing_mm
    mm.save(tmp_path)
    save_failure(fm, tmp_path)
    back = load_metamodel(tmp_path)
    X = np.array([[0.2, 0.0], [0.7, 4.0], [0.4, 1.0]])
    np.testing.assert_allclose(back.failure.logit(X), fm.logit(X), rtol=1e-12, atol=1e-12)
    (tmp_path / "none").mkdir()
    save_failure(None, tmp_path / "none")
    assert load_failure(tmp_path / "none") is None
    assert load_failure(tmp_path / "absent") is None
    from tests.conftest import REPO

    study = Study("f", {"simulator": {"type": "python", "options": {
        "function": "tests.sim_fixtures:slow_quadratic", "path": str(REPO),
        "outputs": ["y"]}}, "outputs": ["y"], **SPACE})
    t = Target(0, None, {}, np.array([0.0]))

    def draw(strategy: str) -> np.ndarray:
        p = TargetRun(study, back, t, 40, 1.0, {"sampling": "uniform"}, {}, 3, strategy,
                      lambda *a, **k: None)
        return p.sample(40)

    assert (draw("pts")[:, 1] >= 2).all()       # predicted failures are not proposed
    assert (draw("rs")[:, 1] <= 1).any()        # the baseline stays blind


def test_the_failing_example_config_validates_and_finds_its_program() -> None:
    from simcalib.config import load_config
    from simcalib.simulators.pyfunc import load_callable
    from tests.conftest import REPO

    cfg = load_config(REPO / "config" / "failing_example.yaml")
    s = cfg["studies"]["int_fail"]
    assert s["metamodel"]["failure"]["model"] == "auto"
    fn = load_callable(s["simulator"]["options"]["function"], "k",
                       s["simulator"]["options"]["path"])   # relative: under the checkout
    out = fn(pd.DataFrame({"x": [0.5], "z": [0.3], "k": [2]}), {})
    assert out["y"].iloc[0] == pytest.approx(0.2)


def test_adaptive_leaves_a_region_where_every_run_failed(failing_mm) -> None:
    """Blind OP (no classifier) anchors at k = 0, inside the fail region k <= 1; with
    a small R every round stayed there (12 of 12 runs failed).  After a round in which
    every run so far failed, adaptive draws from the whole space and never re-runs a
    point that failed, so it finds runs that succeed within the budget."""
    from simcalib.metamodel.strategies.ledger import Target
    from simcalib.metamodel.strategies.runner import calibrate_target
    from tests.conftest import REPO

    mm, _, _ = failing_mm
    assert mm.failure is None
    study = Study("f", {"simulator": {"type": "python", "fail_region": {"k": [0, 1]},
                                      "options": {"function": "tests.sim_fixtures:linear_k",
                                                  "path": str(REPO), "outputs": ["y"]}},
                        "outputs": ["y"], **SPACE})
    t = Target(0, None, {}, np.array([0.0]))
    solver = {"backend": "highs", "time_limit": 30, "threads": 1}
    rec, runs = calibrate_target(study, mm, t, "adaptive", 12, 0.02,
                                 {"adaptive": {"rounds": 4, "update": "none"}}, solver, seed=2)
    ok = [r for r in runs if r["status"] == "ok"]
    assert len(ok) >= 3
    assert all(r["k"] >= 2 for r in ok)
    assert np.isfinite(rec["error"])
