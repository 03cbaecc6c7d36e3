"""The strategy registry: one declaration per strategy that the schema, the workflow's
job params, the budget checks, the summaries and the plot labels all read.  The
worked example of docs/strategies.md ("Adding a strategy") is registered here and run
end to end with the stand-in metamodel and OP of test_strategies.py."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pytest

from simcalib.config import load_yaml, validate_config
from simcalib.errors import ConfigError
from simcalib.metamodel.strategies import registry as reg
from simcalib.metamodel.strategies.ledger import TargetRun, choose
from simcalib.metamodel.strategies.runner import calibrate
from simcalib.metamodel.strategies.summary import summarize
from simcalib.study import Study
from tests.fixtures.strategies import SEED, FakeMM, fake_optimize, rosen_study, rosen_targets

BUILTIN = ["rs", "op", "stp", "pts", "adaptive", "blackbox"]


@pytest.fixture(scope="module")
def study() -> Study:
    return rosen_study()


@pytest.fixture(scope="module")
def targets(study: Study) -> pd.DataFrame:
    return rosen_targets(study)



def nested_pts(p: TargetRun) -> dict[str, Any]:
    """docs/strategies.md's worked example, verbatim."""
    anchor = p.full_op()
    first = p.budget // 2
    p.simulate(p.sample(first, p.box(anchor, p.proximity)), "outer")
    best = p.best_run()
    centre = best["x"] if best is not None else anchor
    p.simulate(p.sample(p.left, p.box(centre, p.proximity / 4)), "inner")
    x, e, status = choose(p, anchor)
    return {"x": x, "error": e, "status": status, "anchor": anchor, "anchor_kind": "op"}


@pytest.fixture
def with_nested() -> Iterator[None]:
    reg.registry()
    reg.strategy("nested_pts", label="nested PtS", order=45, min_budget=2,
                 reads=("budget", "proximity"), uses_anchor=True, default=False)(nested_pts)
    yield
    reg._REGISTRY.pop("nested_pts")


def test_builtin_strategies_in_display_order() -> None:
    assert list(reg.registry())[:6] == BUILTIN
    specs = reg.registry()
    assert {n for n, s in specs.items() if s.uses_anchor} == {"op", "pts", "adaptive"}
    assert specs["stp"].min_budget == 2 and specs["op"].fixed_budget == 1
    assert reg.labels()["pts"] == "PtS" and reg.labels()["blackbox"] == "blackbox"


def test_job_settings_hold_only_what_a_strategy_reads() -> None:
    cal = {"budget": 30, "proximity": 0.1, "sampling": "uniform", "mc_samples": 0,
           "rescore": 2, "adaptive": {"rounds": 3}, "blackbox": {"n_startup_trials": 4},
           "sweep": [0.1]}
    assert reg.job_settings("op", cal) == {"sampling": "uniform", "mc_samples": 0, "rescore": 2}
    assert set(reg.job_settings("pts", cal)) == {"sampling", "mc_samples", "rescore", "budget",
                                                 "proximity"}
    assert "adaptive" in reg.job_settings("adaptive", cal)
    assert "adaptive" not in reg.job_settings("blackbox", cal)


def _config_with(strategies: list[str]) -> dict:
    cfg = copy.deepcopy(load_yaml("tests/configs/tiny.yaml"))
    for scfg in cfg["studies"].values():
        if (scfg.get("calibration") or {}).get("enabled"):
            scfg["calibration"]["strategies"] = strategies
    return cfg


def test_schema_enum_comes_from_the_registry(with_nested: None) -> None:
    with pytest.raises(ConfigError, match="calibration.strategies") as err:
        validate_config(_config_with(["rs", "nope"]))
    assert "nested_pts" in str(err.value)
    validate_config(_config_with(["rs", "nested_pts"]))  # the new name is allowed


def test_default_list_leaves_out_opt_in_strategies(with_nested: None) -> None:
    cfg = validate_config(_config_with(["rs"]))
    assert cfg  # sanity: the tiny config validates
    from simcalib.metamodel.strategies.settings import defaults
    assert "nested_pts" not in defaults()["strategies"]


def test_new_strategy_runs_with_exact_budget(with_nested: None, study, targets) -> None:  # noqa: F811
    rec, runs = calibrate(study, FakeMM(), targets, "nested_pts",
                          {"budget": 10, "proximity": 0.1}, {}, SEED,
                          optimize_fn=fake_optimize)
    assert (rec["runs"] == 10).all()
    assert set(runs["phase"]) == {"outer", "inner"}
    assert (runs.groupby("target_id")["phase"].apply(lambda s: (s == "outer").sum()) == 5).all()
    assert np.isfinite(rec["error"]).all()
    # the chosen point is the best run of each target
    best = runs.groupby("target_id")["error"].min()
    assert np.allclose(rec.set_index("target_id")["error"], best)
    with pytest.raises(ConfigError, match="budget"):
        calibrate(study, FakeMM(), targets, "nested_pts", {"budget": 1}, {}, SEED,
                  optimize_fn=fake_optimize)
    rs, _ = calibrate(study, FakeMM(), targets, "rs", {"budget": 10}, {}, SEED,
                      optimize_fn=fake_optimize)
    summ = summarize({"nested_pts": rec, "rs": rs})
    assert list(summ["strategy"]) == ["rs", "nested_pts"]
    assert isinstance(summ, pd.DataFrame)
