"""Simulator protocol: Rosenbrock values, the python adapter, failures as data."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from simcalib.errors import ConfigError
from simcalib.seeds import int_seed, rng, row_seeds
from simcalib.simulators import build_simulator, finalize
from simcalib.study import Study
from simcalib.study.simulation import make_design, make_targets, simulate_rows

ROSEN = {
    "simulator": {"type": "rosenbrock"},
    "parameters": {"x": {"lower": "a - 1", "upper": "a + 1"},
                   "y": {"lower": "a**2 - 5", "upper": "a**2 + 5"}},
    "contexts": {"a": {"values": [5, 10]}, "b": {"values": [10, 20]}},
    "design": {"n": 8, "method": "sobol", "per_level": True, "chunk_size": 5},
    "targets": {"n": 4},
}


def test_rosenbrock_values() -> None:
    sim = build_simulator(ROSEN)
    df = pd.DataFrame({"x": [5.0, 4.0, 1.0], "y": [25.0, 20.0, 1.0], "a": [5, 5, 1],
                       "b": [10, 10, 100]})
    out = sim.run(df, np.zeros(3))
    np.testing.assert_allclose(out["f"], [0.0, 1.0 + 10 * 16.0, 0.0])
    assert (out["status"] == "ok").all()


def test_noisy_rosenbrock_is_seeded() -> None:
    study = dict(ROSEN, simulator={"type": "rosenbrock", "options": {"noise_sd": 2.0}})
    sim = build_simulator(study)
    df = pd.DataFrame({"x": [5.0] * 400, "y": [25.0] * 400, "a": [5] * 400, "b": [10] * 400})
    seeds = row_seeds(1, "s", np.arange(400))
    a, b = sim.run(df, seeds)["f"], sim.run(df, seeds)["f"]
    np.testing.assert_array_equal(a, b)
    assert a.std() == pytest.approx(2.0, rel=0.15) and abs(a.mean()) < 0.4


def test_non_finite_outputs_become_status_rows() -> None:
    raw = pd.DataFrame({"f": [1.0, np.nan, np.inf], "g": [1.0, 2.0, 3.0]})
    out = finalize(raw, ["f", "g"], raw.index)
    assert list(out["status"]) == ["ok", "nan_output", "nan_output"]
    assert "f" in out.loc[1, "message"]


def good_fn(df: pd.DataFrame, seeds: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({"s": df["x"] + df["y"], "seed_even": seeds % 2})


def bad_fn(df: pd.DataFrame) -> pd.DataFrame:
    raise RuntimeError("model diverged")


def test_python_adapter_runs_and_catches_exceptions() -> None:
    study = {"simulator": {"type": "python",
                           "options": {"function": "tests.simulators.test_simulators:good_fn",
                                       "outputs": ["s", "seed_even"]}},
             "parameters": {"x": {"lower": 0, "upper": 1}, "y": {"lower": 0, "upper": 1}}}
    sim = build_simulator(study)
    df = pd.DataFrame({"x": [0.1, 0.2], "y": [0.3, 0.4]})
    out = sim.run(df, np.array([3, 4]))
    np.testing.assert_allclose(out["s"], [0.4, 0.6])
    np.testing.assert_array_equal(out["seed_even"], [1, 0])
    study["simulator"]["options"]["function"] = "tests.simulators.test_simulators:bad_fn"
    out = build_simulator(study).run(df, np.array([3, 4]))
    assert (out["status"] == "error").all()
    assert "model diverged" in out.loc[0, "message"]
    study["simulator"]["options"]["function"] = "tests.simulators.test_simulators:nope"
    with pytest.raises(ConfigError, match="no callable"):
        build_simulator(study)


def test_seeds_are_stable_and_independent_of_chunking() -> None:
    assert int_seed(1, "a", 2) == int_seed(1, "a", 2)
    assert int_seed(1, "a", 2) != int_seed(1, "a", 3) != int_seed(2, "a", 2)
    assert rng(5, "x").random() == rng(5, "x").random()
    ids = np.arange(10)
    np.testing.assert_array_equal(row_seeds(3, "s", ids)[4:], row_seeds(3, "s", ids[4:]))


def test_design_and_targets_for_a_study() -> None:
    study = Study("rb", ROSEN)
    design = make_design(study, 11)
    assert list(design.columns) == ["run_id", "x", "y", "a", "b"] and len(design) == 32
    full = simulate_rows(study, design, 11)
    halves = pd.concat([simulate_rows(study, design.iloc[:13], 11),
                        simulate_rows(study, design.iloc[13:], 11)], ignore_index=True)
    pd.testing.assert_frame_equal(full, halves)
    targets = make_targets(study, 11)
    assert len(targets) == 4 and set(targets.a) == {5.0, 10.0}
    assert not np.isin(targets.x.to_numpy(), design.x.to_numpy()).any()
