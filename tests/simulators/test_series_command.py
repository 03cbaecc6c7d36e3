"""The command simulator's curves (issue 42): command_parse.read_series, and the
runner that reads a program's CSV rows or JSON arrays into <series>@<point> columns
(the shipped example resources/example_simulator/logistic_curve.py, with known answers
and every bad input it can write on purpose)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simcalib.errors import ConfigError, DataError
from simcalib.simulators import command_build
from simcalib.simulators.command_parse import OutputParseError, extract, parse_csv, read_series
from simcalib.study.model import Study
from simcalib.study.series import SeriesSpec
from simcalib.study.simulation import run_chunk, simulate_rows

SPECS = {"cases": SeriesSpec("cases", "day", (2.0, 3.0))}


def test_csv_time_series_gives_the_points_and_the_last_row_scalars():
    text = "day,cases,total\n1,5,5\n2,7,12\n3,4,16\n"
    assert read_series(text, "csv", SPECS, "Summary0") == {"cases@2": 7.0, "cases@3": 4.0}
    assert extract(parse_csv(text), "total") == 16.0     # scalars as before


def test_json_arrays_beside_scalars():
    text = '{"attack": 0.3, "day": [1, 2, 3], "cases": [5, 7, 4]}'
    assert read_series(text, "json", SPECS, "out.json") == {"cases@2": 7.0, "cases@3": 4.0}


def test_json_arrays_without_the_index_are_the_declared_points_in_order():
    text = '{"cases": [7, 4], "total": 16}'
    assert read_series(text, "json", SPECS, "out.json") == {"cases@2": 7.0, "cases@3": 4.0}


@pytest.mark.parametrize("parser, text, match", [
    ("csv", "day,cases\n1,5\n3,4\n", r"out: series 'cases' has no value at day 2"),
    ("csv", "day,cases\n2,5\n2,4\n3,1\n", "appears twice"),
    ("json", '{"cases": [1, 2, 3]}', "3 values, the series has 2 points"),
    ("keyvalue", "cases: 1", "need parser 'csv'"),
])
def test_a_file_without_the_curve_is_a_parse_error_naming_it(parser, text, match):
    with pytest.raises(OutputParseError, match=match):
        read_series(text, parser, SPECS, "out")


# ----------------------------------------------------------------------------- the runner
# The shipped example program (resources/example_simulator/logistic_curve.py) through
# the command simulator: a Study builds it, so the points come from the declaration or
# the observations exactly as in the workflow.

ROOT = Path(__file__).resolve().parents[2]
PROG = "resources/example_simulator/logistic_curve.py"
DAYS = list(range(1, 21))                       # the program writes days 1..30
PARAMS = {"rate": {"lower": 0.2, "upper": 0.5}, "capacity": {"lower": 50.0, "upper": 150.0},
          "fault": {"lower": 0, "upper": 5, "integer": True}}


@pytest.fixture(autouse=True)
def _at_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def options(fmt: str = "csv", **over: object) -> dict:
    opts = {"command": [sys.executable, PROG, "--config", "{input_file}", "--output",
                        "{output_file}", "--format", fmt],
            "input_file": {"format": "lines", "extra": {"seed": "{seed}"}},
            "output_file": "Summary0", "parser": fmt, "timeout": 20}
    opts.update(over)
    return opts


def curve_study(fmt: str = "csv", outputs: list[str] | None = None, series: object = None,
                **extra: object) -> Study:
    cfg = {"simulator": {"type": "command", "options": options(fmt)},
           "parameters": PARAMS,
           "series": series if series is not None else {
               "cases": {"index": "day", "points": DAYS},
               "cumulative": {"index": "day", "points": {"from": 5, "to": 20, "step": 5}}},
           **extra}
    if outputs is not None:
        cfg["outputs"] = outputs
    return Study("curve", cfg)


def rows(rate: list[float], fault: list[int] | None = None) -> pd.DataFrame:
    n = len(rate)
    return pd.DataFrame({"run_id": np.arange(n), "rate": rate,
                         "capacity": np.linspace(60.0, 140.0, n),
                         "fault": fault if fault is not None else [0] * n})


def logistic(t: float, rate: float, capacity: float) -> float:
    return capacity / (1.0 + (capacity - 1.0) * math.exp(-rate * t))


def expected(r: pd.Series) -> dict[str, float]:
    c = {f"cases@{d}": logistic(d, r.rate, r.capacity) - logistic(d - 1, r.rate, r.capacity)
         for d in DAYS}
    c.update({f"cumulative@{d}": logistic(d, r.rate, r.capacity) for d in (5, 10, 15, 20)})
    c["final_size"] = logistic(30, r.rate, r.capacity)
    return c


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_curves_and_scalars_round_trip_to_the_known_curve(fmt: str) -> None:
    st = curve_study(fmt, outputs=["final_size"])
    cols = ["final_size", *(f"cases@{d}" for d in DAYS),
            *(f"cumulative@{d}" for d in (5, 10, 15, 20))]
    assert st.outputs == cols and st.simulator.outputs == cols
    df = rows([0.25, 0.4, 0.3])
    out = simulate_rows(st, df, seed=1)
    assert (out.status == "ok").all(), out.message.tolist()
    for _, r in out.iterrows():
        want = expected(r)
        got = r[cols].to_numpy(dtype=float)
        np.testing.assert_allclose(got, [want[c] for c in cols], rtol=1e-12)


def test_csv_and_json_give_the_same_bits_and_seeds_reproduce_noisy_curves() -> None:
    noisy = {"input_file": {"format": "lines", "extra": {"seed": "{seed}", "noise": 0.3}}}
    out = {}
    for fmt in ("csv", "json"):
        cfg_opts = options(fmt, **noisy)
        st = Study("curve", {"simulator": {"type": "command", "options": cfg_opts},
                             "parameters": PARAMS,
                             "series": {"cases": {"index": "day", "points": DAYS}}})
        out[fmt] = simulate_rows(st, rows([0.3, 0.3]), seed=7)
    cols = [f"cases@{d}" for d in DAYS]
    a, b = out["csv"][cols].to_numpy(), out["json"][cols].to_numpy()
    assert np.array_equal(a, b)                 # repr and JSON floats round-trip exactly
    assert not np.allclose(a[0], a[1])          # same inputs, other seeds: other curves
    again = simulate_rows(st, rows([0.3, 0.3]), seed=7)[cols].to_numpy()
    assert np.array_equal(again, b)


def test_series_only_study_and_points_from_the_observations(tmp_path: Path) -> None:
    obs = tmp_path / "obs.csv"
    obs.write_text("target_id,day,cases,sd_cases\n0,3,1.5,0.2\n0,8,4.0,0.3\n"
                   "1,5,2.0,0.2\n1,8,3.5,0.3\n")
    st = curve_study(series={"cases": "day"}, targets={"file": str(obs)})
    assert st.outputs == ["cases@3", "cases@5", "cases@8"]   # the union of the targets'
    out = simulate_rows(st, rows([0.35]), seed=1)
    want = expected(out.iloc[0])
    assert out.status.tolist() == ["ok"]
    assert [out.iloc[0][c] for c in st.outputs] == pytest.approx(
        [want[c] for c in st.outputs], rel=1e-12)


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_bad_curves_are_that_runs_status_naming_file_and_series(fmt: str) -> None:
    st = curve_study(fmt, outputs=["final_size"],
                     series={"cases": {"index": "day", "points": list(range(1, 31))}})
    # fault: 1 day 2 twice, 2 days 2 and 3 swapped, 3 NaN on day 3, 4 five days short
    df = rows([0.3] * 6, fault=[0, 1, 2, 3, 4, 0])
    out = simulate_rows(st, df, seed=1)
    assert out.status.tolist() == ["ok", "parse_error", "parse_error", "nan_output",
                                   "parse_error", "ok"]
    msg = out.message.tolist()
    assert "Summary0: series 'cases': day 2 appears twice" in msg[1]
    assert "Summary0: series 'cases': day 2 comes after 3" in msg[2]
    assert "series 'cases' is not finite at day 3 (1 of 30 points)" in msg[3]
    assert "Summary0: series 'cases' has no value at day 26, 27, 28, 29, 30" in msg[4]
    # nothing computed is lost: the other runs are whole, a failed run keeps its scalar
    np.testing.assert_allclose(out.loc[[0, 5], "cases@1"], [expected(out.iloc[0])["cases@1"],
                                                             expected(out.iloc[5])["cases@1"]])
    assert np.isfinite(out.final_size).all()


def test_a_curve_the_program_never_writes_is_a_config_error_at_the_series() -> None:
    st = curve_study("csv", series={"cases": {"index": "day", "points": DAYS}})
    batch = rows([0.3], fault=[5])[st.input_names]
    with pytest.raises(ConfigError) as exc:
        st.simulator.probe_row(batch, 1)
    assert exc.value.path == "studies.curve.series.cases"
    assert "Summary0: no column 'cases'" in exc.value.message
    assert "'day', 'cumulative', 'final_size'" in exc.value.message
    # in a chunk: the first two runs fail alike, the chunk stops and says why
    with pytest.raises(DataError, match="no column 'cases' for series 'cases'"):
        run_chunk(st, rows([0.3, 0.3, 0.3], fault=[5, 5, 0]), seed=1)


def test_an_index_column_the_program_does_not_write_is_named() -> None:
    st = curve_study("csv", series={"cases": {"index": "week", "points": [1, 2]}})
    out = simulate_rows(st, rows([0.3]), seed=1)
    assert out.status.tolist() == ["parse_error"]
    assert "Summary0: no index column 'week'" in out.message.iloc[0]


@pytest.mark.parametrize(("over", "study_extra", "path", "text"), [
    ({"parser": "keyvalue"}, {}, "options.parser", "need parser 'csv'"),
    ({"output_map": {"new_cases": "cases"}}, {}, "options.output_map.new_cases",
     "read from the column"),
    ({"outputs": ["cases"]}, {}, "options.outputs", "declared as series"),
    ({}, {"outputs": ["cases"]}, "series.cases", "already"),
])
def test_series_settings_errors_name_the_key(over: dict, study_extra: dict, path: str,
                                             text: str) -> None:
    study = {"parameters": PARAMS, "series": {"cases": {"index": "day", "points": DAYS}},
             **study_extra}
    with pytest.raises(ConfigError) as exc:
        command_build.build(options(**over), study, "studies.curve.simulator.options")
    where = "studies.curve." + ("simulator." if path.startswith("options") else "") + path
    assert exc.value.path == where
    assert text in exc.value.message


def test_a_scalar_study_is_unchanged() -> None:
    study = {"parameters": PARAMS, "outputs": ["final_size"]}
    sim = command_build.build(options(), study, "studies.curve.simulator.options")
    assert sim.outputs == ["final_size"] and sim.series == {}


def test_the_documented_curve_study_runs_as_shipped() -> None:
    """docs/your_simulator.md's command curve study (<= 25 lines of YAML): it builds,
    takes its points from the shipped observations and simulates the observed days;
    at the hidden inputs of target 0 the program's curve is within 4 sd of the data."""
    import re

    import yaml

    from simcalib.study.observations import read_observations

    text = (ROOT / "docs/your_simulator.md").read_text()
    block = next(b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if "growth_curve" in b)
    assert len(block.strip().splitlines()) <= 25
    st = Study("growth_curve", yaml.safe_load(block)["studies"]["growth_curve"])
    days = list(range(2, 31, 2))
    assert st.outputs == [f"cases@{d}" for d in days]
    obs = read_observations(ROOT / "resources/curve_obs/observations.csv", st.outputs, [],
                            st.input_names, series=st.series)
    assert obs.target_id.tolist() == [0, 1]
    truth = pd.DataFrame({"run_id": [0], "rate": [0.32], "capacity": [90.0]})
    out = simulate_rows(st, truth, seed=1)
    assert out.status.tolist() == ["ok"]
    z = (out.iloc[0][st.outputs].to_numpy(float) - obs.iloc[0][st.outputs].to_numpy(float)) \
        / obs.iloc[0][[f"sd_{c}" for c in st.outputs]].to_numpy(float)
    assert np.abs(z).max() < 4.0
