"""The probe run and replicates/derived outputs for every
simulator type."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simcalib.errors import ConfigError
from simcalib.seeds import row_seeds
from simcalib.simulators import build_simulator, probe, probe_is_reusable, result_columns

ROOT = Path(__file__).resolve().parents[2]
SIM = str(ROOT / "resources/example_simulator/oscillator.py")
OSC = {
    "simulator": {"type": "command", "options": {
        "command": [sys.executable, SIM, "--config", "{input_file}", "--output",
                    "{output_file}"],
        "input_file": {"format": "lines", "extra": {"seed": "{seed}"}},
        "output_file": "Summary0",
        "output_map": {"Peak displacement": "peak_displacement", "Peak time": "peak_time"},
        "timeout": 20}},
    "parameters": {"mass": {"lower": 0.5, "upper": 2.0}, "stiffness": {"lower": 1.0, "upper": 10},
                   "damping": {"lower": 0.0, "upper": 3.0}},
    "outputs": ["peak_displacement", "peak_time"],
}
ROW = pd.DataFrame({"mass": [1.0], "stiffness": [4.0], "damping": [0.8]}, index=[17])


def osc(**options: object) -> dict:
    sim = {**OSC["simulator"], "options": {**OSC["simulator"]["options"], **options}}
    return {**OSC, "simulator": sim}


def test_probe_misspelled_output_key_fails_with_did_you_mean() -> None:
    study = osc(output_map={"Peak displacment": "peak_displacement", "Peak time": "peak_time"})
    sim = build_simulator(study, "studies.osc")   # validation cannot know the file's keys
    with pytest.raises(ConfigError) as exc:
        probe(sim, ROW, 5)
    assert exc.value.path == "studies.osc.simulator.options.output_map.Peak displacment"
    msg = exc.value.message
    assert "did you mean 'Peak displacement'" in msg
    assert "Rebound ratio" in msg and "Peak time" in msg   # the keys the file does contain


def test_probe_unmapped_output_names_output_map() -> None:
    study = osc(output_map={"Peak time": "peak_time"})      # peak_displacement unmapped
    with pytest.raises(ConfigError) as exc:
        probe(build_simulator(study, "studies.osc"), ROW, 5)
    assert exc.value.path == "studies.osc.simulator.options.output_map"
    assert "peak_displacement" in exc.value.message
    assert "did you mean 'Peak displacement'" in exc.value.message


def test_probe_indexed_key_hint() -> None:
    study = osc(output_map={"Displacement sample[1]": "peak_displacement",
                            "Peak time": "peak_time"})
    with pytest.raises(ConfigError, match=r"did you mean 'Displacement samples\[1\]'"):
        probe(build_simulator(study, "studies.osc"), ROW, 5)


def test_probe_good_study_equals_the_batch_row() -> None:
    sim = build_simulator(OSC, "studies.osc")
    one = probe(sim, ROW, 5)
    assert one.index.tolist() == [17] and one.status.iloc[0] == "ok"
    batch = sim.run(ROW, np.array([5]))
    pd.testing.assert_frame_equal(one, batch)
    assert probe_is_reusable(sim)


def test_probe_row_specific_failure_is_a_row_not_an_error() -> None:
    study = osc()
    study["contexts"] = {"failmode": {"values": [0, 1]}}
    row = ROW.assign(failmode=1)                       # exit status 3 on purpose
    res = probe(build_simulator(study, "studies.osc"), row, 5)
    assert res.status.iloc[0] == "error" and "exit status 3" in res.message.iloc[0]


def returns_wrong_column(df: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({"totl": df["x"] * 2})


def test_probe_python_function_missing_column() -> None:
    study = {"simulator": {"type": "python", "options": {
        "function": "test_probe_layer:returns_wrong_column", "path": str(Path(__file__).parent),
        "outputs": ["total"]}}, "parameters": {"x": {"lower": 0, "upper": 1}}}
    with pytest.raises(ConfigError) as exc:
        probe(build_simulator(study, "studies.p"), {"x": 0.5}, 1)
    assert exc.value.path == "studies.p.simulator.options.outputs"
    assert "did you mean 'totl'" in exc.value.message


def returns_odd_status(df: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({"total": df["x"], "status": "failed"})


def test_unknown_status_is_a_keyed_error() -> None:
    study = {"simulator": {"type": "python", "options": {
        "function": "test_probe_layer:returns_odd_status", "path": str(Path(__file__).parent),
        "outputs": ["total"]}}, "parameters": {"x": {"lower": 0, "upper": 1}}}
    sim = build_simulator(study, "studies.p")
    with pytest.raises(ConfigError) as exc:
        sim.run(pd.DataFrame({"x": [0.5]}), [1])
    assert exc.value.path == "studies.p.simulator.options.function"
    assert "'failed'" in exc.value.message


# ---------------------------------------------------------------------------
# replicates and derived outputs
# ---------------------------------------------------------------------------
NOISY = {
    "simulator": {"type": "rosenbrock", "options": {"noise_sd": 1.0}},
    "parameters": {"x": {"lower": -1, "upper": 1}, "y": {"lower": -1, "upper": 1}},
}
XY = pd.DataFrame({"x": [1.0, 0.0, 0.5], "y": [1.0, 0.0, 0.25]}, index=[4, 9, 11])


def test_replicates_average_and_keep_spread() -> None:
    k = 400
    study = {**NOISY, "simulator": {**NOISY["simulator"], "replicates": k}}
    sim = build_simulator(study, "studies.r")
    assert sim.extra_columns == ["f_sd"]
    seeds = row_seeds(3, "sim", XY.index.to_numpy())
    res = sim.run(XY, seeds)
    assert list(res.columns) == ["f", "f_sd", "status", "message"]
    assert res.index.tolist() == [4, 9, 11] and (res.status == "ok").all()
    exact = np.array([0.0, 1.0, 0.25])                 # noise-free Rosenbrock values
    se = 1.0 / np.sqrt(k)
    assert np.all(np.abs(res.f.to_numpy() - exact) < 4 * se)
    np.testing.assert_allclose(res.f_sd, 1.0, rtol=0.12)
    # the same seeds give the same means; one replicate per row would be far noisier
    pd.testing.assert_frame_equal(res, sim.run(XY, seeds))
    assert result_columns(sim, ["f"]) == ["f", "f_sd", "status", "message"]


@pytest.mark.slow
def test_replicates_one_failure_fails_the_row() -> None:
    code = "import sys; s = int(sys.argv[1]); sys.exit(3) if s % 2 else print('y: ' + str(s % 7))"
    study = {"simulator": {"type": "command", "replicates": 3, "options": {
        "command": [sys.executable, "-c", code, "{seed}"], "output_file": "-",
        "outputs": ["y"]}}, "parameters": {"x": {"lower": 0, "upper": 1}}}
    sim = build_simulator(study, "studies.c")
    from simcalib.simulators import replicate_seeds
    seeds = np.arange(40)
    reps = replicate_seeds(seeds, 3) & (2**31 - 1)
    res = sim.run(pd.DataFrame({"x": np.zeros(40)}), seeds, threads=2)
    all_even = (reps % 2 == 0).all(axis=1)
    assert all_even.any() and (~all_even).any()
    assert (res.status[all_even] == "ok").all() and (res.status[~all_even] == "error").all()
    np.testing.assert_allclose(res.y[all_even], (reps[all_even] % 7).mean(axis=1))
    np.testing.assert_allclose(res.y_sd[all_even], (reps[all_even] % 7).std(axis=1, ddof=1))
    assert res.message[~all_even].str.match(r"replicate [123]/3: exit status 3").all()


def test_derived_outputs_on_a_command_study_only_outputs_listed() -> None:
    study = osc()
    study["simulator"]["derived_outputs"] = {
        "speed": "peak_displacement / peak_time", "twice": "2 * speed"}
    study["outputs"] = ["speed", "twice"]   # the parsed outputs are found through the exprs
    sim = build_simulator(study, "studies.osc")
    assert sim.outputs == ["peak_displacement", "peak_time", "speed", "twice"]
    res = sim.run(ROW, [5])
    assert res.status.iloc[0] == "ok", res.message.iloc[0]
    assert res.speed.iloc[0] == pytest.approx(res.peak_displacement.iloc[0]
                                              / res.peak_time.iloc[0])
    assert res.twice.iloc[0] == pytest.approx(2 * res.speed.iloc[0])


def sum_and_divisor(df: pd.DataFrame, seeds: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({"s": df["x"] + df["y"], "k": seeds % 3 + 1.0})


def test_derived_then_replicated_on_a_python_function() -> None:
    study = {"simulator": {"type": "python", "replicates": 4,
                           "derived_outputs": {"r": "s / k"}, "options": {
                               "function": "test_probe_layer:sum_and_divisor",
                               "path": str(Path(__file__).parent), "outputs": ["s", "k"]}},
             "parameters": {"x": {"lower": 0, "upper": 1}, "y": {"lower": 0, "upper": 1}},
             "outputs": ["s", "r"]}
    sim = build_simulator(study, "studies.p")
    res = sim.run(pd.DataFrame({"x": [1.0, 0.5], "y": [2.0, 0.5]}), [8, 9])
    from simcalib.simulators import replicate_seeds
    k = replicate_seeds(np.array([8, 9]), 4) % 3 + 1.0
    assert (res.status == "ok").all()
    np.testing.assert_allclose(res.s, [3.0, 1.0])
    np.testing.assert_allclose(res.s_sd, [0.0, 0.0])
    # derived per run, then averaged: the mean of the ratios, not the ratio of means
    r = np.array([[3.0], [1.0]]) / k
    np.testing.assert_allclose(res.r, r.mean(axis=1))
    np.testing.assert_allclose(res.r_sd, r.std(axis=1, ddof=1))


def test_derived_outputs_on_epidemic_and_status_of_failed_rows() -> None:
    study = {**NOISY, "simulator": {"type": "rosenbrock", "derived_outputs": {"g": "f + 1"}}}
    sim = build_simulator(study, "studies.r")
    res = sim.run(pd.DataFrame({"x": [1.0, np.nan], "y": [1.0, 0.0]}), [1, 2])
    assert res.status.tolist() == ["ok", "invalid_input"]
    assert res.g.iloc[0] == pytest.approx(res.f.iloc[0] + 1) and np.isnan(res.g.iloc[1])


@pytest.mark.parametrize(("layer", "path", "text"), [
    ({"replicates": 0}, "studies.r.simulator.replicates", "positive"),
    ({"replicates": 2.5}, "studies.r.simulator.replicates", "positive"),
    ({"derived_outputs": {"g": "f + h"}}, "studies.r.simulator.derived_outputs.g", "'h'"),
    ({"derived_outputs": {"g": "ff * 2"}}, "studies.r.simulator.derived_outputs.g",
     "did you mean 'f'"),
    ({"derived_outputs": {"g": "f(2)"}}, "studies.r.simulator.derived_outputs.g", "unsupported"),
    ({"derived_outputs": {"g": "f +"}}, "studies.r.simulator.derived_outputs.g", "parse"),
    ({"derived_outputs": {"g": "f + 1/0"}}, "studies.r.simulator.derived_outputs.g",
     "division by zero"),
    ({"derived_outputs": {"g": "f + 10.0**400"}}, "studies.r.simulator.derived_outputs.g",
     "out of range"),
    ({"derived_outputs": {"f": "2"}}, "studies.r.simulator.derived_outputs.f", "already"),
    ({"derived_outputs": {"status": "f"}}, "studies.r.simulator.derived_outputs.status",
     "identifier"),
    ({"derived_outputs": {"g h": "f"}}, "studies.r.simulator.derived_outputs.g h", "identifier"),
    ({"derived_outputs": {"f_sd": "f"}, "replicates": 2}, "studies.r.simulator.replicates",
     "clash"),
    ({"derived_outputs": ["f"]}, "studies.r.simulator.derived_outputs", "must map"),
])
def test_layer_config_errors_are_keyed(layer: dict, path: str, text: str) -> None:
    study = {**NOISY, "simulator": {**NOISY["simulator"], **layer}}
    with pytest.raises(ConfigError) as exc:
        build_simulator(study, "studies.r")
    assert exc.value.path == path
    assert text in exc.value.message


def test_derived_output_usable_as_study_output_and_unknown_output_rejected() -> None:
    study = {**NOISY, "simulator": {"type": "rosenbrock", "derived_outputs": {"g": "f * 2"}},
             "outputs": ["g"]}
    build_simulator(study, "studies.r")
    with pytest.raises(ConfigError) as exc:
        build_simulator({**study, "outputs": ["gg"]}, "studies.r")
    assert exc.value.path == "studies.r.outputs"


def test_probe_through_replicates_layer_still_names_the_key() -> None:
    study = osc(output_map={"Peak tim": "peak_time", "Peak displacement": "peak_displacement"})
    study["simulator"]["replicates"] = 3
    sim = build_simulator(study, "studies.osc")
    assert not probe_is_reusable(sim)
    with pytest.raises(ConfigError) as exc:
        probe(sim, ROW, 5)
    assert exc.value.path == "studies.osc.simulator.options.output_map.Peak tim"
    assert "did you mean 'Peak time'" in exc.value.message
