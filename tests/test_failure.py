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
