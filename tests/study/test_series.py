"""Series outputs (simcalib.study.series): the column representation, the declaration,
long-form observations and every simulator-result format, each read back to the same
numbers, and every bad input of issue 42 item 6 a keyed error naming the file."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from simcalib.errors import ConfigError, DataError
from simcalib.study.series import (
    SeriesSpec,
    check_available,
    column,
    from_command_csv,
    from_command_json,
    from_python,
    parse_column,
    parse_series,
    point_label,
    read_series_observations,
    series_columns,
)

DAYS = np.array([1.0, 2.0, 3.0, 5.0, 8.0])
SPECS = {"cases": SeriesSpec("cases", "day"), "deaths": SeriesSpec("deaths", "day")}


def test_point_labels_and_columns_round_trip():
    for t, text in [(7.0, "7"), (7, "7"), (0.25, "0.25"), (1e-5, "1e-05"), (-3.0, "-3"),
                    (0.1 + 0.2, "0.30000000000000004")]:
        assert point_label(t) == text
        assert parse_column(column("cases", t)) == ("cases", float(t))
    for other in ["cases", "cases@7_sd", "cases@", "@7", "status", "cases@07", "cases@nan"]:
        assert parse_column(other) is None
    cols = ["R0", "cases@1", "cases@2.5", "cases@1_sd", "deaths@1", "status"]
    assert series_columns(cols, "cases") == ["cases@1", "cases@2.5"]
    with pytest.raises(ValueError):
        point_label(float("inf"))


def test_declaration_forms():
    specs = parse_series({"cases": "day",
                          "deaths": {"index": "day", "points": [7, 14, 21]},
                          "hosp": {"index": "day", "points": {"from": 0.5, "to": 2, "step": 0.5}}},
                         "studies.s.series", taken=["R0", "attack"])
    assert specs["cases"] == SeriesSpec("cases", "day", None)
    assert specs["deaths"].points == (7.0, 14.0, 21.0)
    assert specs["hosp"].points == (0.5, 1.0, 1.5, 2.0)
    assert specs["deaths"].columns() == ["deaths@7", "deaths@14", "deaths@21"]
    assert parse_series(None, "k") == {}
    with pytest.raises(ConfigError, match="no points declared"):
        specs["cases"].columns()


@pytest.mark.parametrize("decl, key, words", [
    ({"cases": {"index": "day", "points": [1, 2, 2]}}, "s.series.cases.points", "twice"),
    ({"cases": {"index": "day", "points": [1, 3, 2]}}, "s.series.cases.points", "increasing"),
    ({"cases": {"index": "day", "points": [1, float("nan")]}}, "s.series.cases.points",
     "non-finite"),
    ({"cases": {"index": "day", "points": []}}, "s.series.cases.points", "no points"),
    ({"cases": {"index": "day", "points": {"from": 3, "to": 1}}}, "s.series.cases.points",
     "from <= to"),
    ({"cases": {"index": "day", "every": 7}}, "s.series.cases.every", "unknown key"),
    ({"cases": {"index": "my day"}}, "s.series.cases.index", "not a plain name"),
    ({"cases@1": "day"}, "s.series.cases@1", "not a plain name"),
    ({"R0": "day"}, "s.series.R0", "already"),
    ({"cases": "status"}, "s.series.cases.index", "reserved"),
    (["cases"], "s.series", "mapping"),
])
def test_bad_declarations(decl, key, words):
    with pytest.raises(ConfigError) as exc:
        parse_series(decl, "s.series", taken=["R0"])
    assert exc.value.path == key and words in exc.value.message


# --------------------------------------------------------------------------- observations
def long_csv(tmp_path, text: str, name: str = "obs.csv"):
    p = tmp_path / name
    p.write_text(text)
    return p


GOOD = """target_id,day,cases,sd_cases,deaths,temp
0,1,0.10,0.01,,20
0,2,0.20,0.02,0.5,20
0,3,0.40,0.02,,20
3,2,0.15,0.01,0.2,25
3,5,0.05,0.01,0.1,25
"""


def test_long_observations_round_trip(tmp_path):
    obs = read_series_observations(long_csv(tmp_path, GOOD), SPECS, ["temp"], "s.targets.file")
    assert list(obs.curves) == [0, 3]
    c0 = obs.curves[0]["cases"]
    assert c0.points.tolist() == [1, 2, 3] and c0.values.tolist() == [0.1, 0.2, 0.4]
    assert c0.sd.tolist() == [0.01, 0.02, 0.02]
    # an empty cell: not observed at that day (deaths of target 0 only on day 2)
    assert obs.curves[0]["deaths"].points.tolist() == [2]
    assert obs.curves[0]["deaths"].sd is None
    assert obs.contexts.to_dict("records") == [{"target_id": 0, "temp": 20.0},
                                               {"target_id": 3, "temp": 25.0}]
    assert obs.points("cases").tolist() == [1, 2, 3, 5]
    wide = obs.wide(["cases", "deaths"])
    assert wide.loc[0, "cases@3"] == 0.4 and np.isnan(wide.loc[1, "cases@3"])
    assert wide.loc[1, "sd_cases@5"] == 0.01 and wide.loc[1, "deaths@5"] == 0.1
    # wide -> long -> read again: the same curves
    back = []
    for _, row in wide.iterrows():
        for t in [1, 2, 3, 5]:
            rec = {"target_id": int(row["target_id"]), "day": t, "temp": row["temp"]}
            for s in ("cases", "deaths"):
                v = row.get(f"{s}@{t}", np.nan)
                rec[s] = "" if pd.isna(v) else repr(float(v))
                sd = row.get(f"sd_{s}@{t}", np.nan)
                if s == "cases":
                    rec["sd_cases"] = "" if pd.isna(sd) else repr(float(sd))
            if rec["cases"] or rec["deaths"]:
                back.append(rec)
    p2 = tmp_path / "back.csv"
    pd.DataFrame(back).to_csv(p2, index=False)
    again = read_series_observations(p2, SPECS, ["temp"])
    for tid in (0, 3):
        for s in ("cases", "deaths"):
            a, b = obs.curves[tid][s], again.curves[tid][s]
            assert np.array_equal(a.points, b.points) and np.array_equal(a.values, b.values)
    # no target_id column: one target, 0
    one = read_series_observations(long_csv(tmp_path, "day,cases\n7,1\n14,2\n", "one.csv"),
                                   {"cases": SeriesSpec("cases", "day")})
    assert list(one.curves) == [0] and one.curves[0]["cases"].values.tolist() == [1, 2]


@pytest.mark.parametrize("text, words", [
    ("target_id,day,cases\n0,1,1\n0,3,2\n0,2,3\n", "not sorted: 2 (row 3) comes after 3"),
    ("target_id,day,cases\n0,1,1\n0,1,2\n", "day 1 appears twice (rows 1 and 2)"),
    ("target_id,day,cases\n0,1,1\n0,2,nan\n", "column 'cases', row 2: 'nan' is not a finite"),
    ("target_id,day,cases\n0,1,1\n0,2,inf\n", "'inf' is not a finite"),
    ("target_id,day,cases\n0,1,1\n0,,2\n", "column 'day', row 2: an empty cell"),
    ("target_id,day,cases,sd_cases\n0,1,1,0.1\n0,2,2,\n", "without its sd_cases"),
    ("target_id,day,cases,sd_cases\n0,1,1,0\n", "must be > 0"),
    ("target_id,day,cases,R0\n0,1,1,2\n", "unknown column(s) ['R0']"),
    ("target_id,cases\n0,1\n", "missing column(s) ['day']"),
    ("target_id,day,cases\n0.5,1,1\n", "must be integers"),
    ("target_id,day,cases\n0,1,\n0,2,\n", "target 0: no observed value"),
    ("target_id,day,cases\n", "no rows"),
    ("target_id,day,cases,cases\n0,1,1,1\n", "more than once"),
])
def test_bad_observations_name_the_file(tmp_path, text, words):
    p = long_csv(tmp_path, text)
    with pytest.raises(DataError) as exc:
        read_series_observations(p, {"cases": SeriesSpec("cases", "day")}, [], "s.targets.file")
    assert exc.value.source == f"{p} (s.targets.file)"
    assert words in exc.value.message


def test_observation_times_the_series_does_not_declare(tmp_path):
    p = long_csv(tmp_path, "day,cases\n7,1\n10,2\n14,3\n")
    spec = {"cases": SeriesSpec("cases", "day", (7.0, 14.0, 21.0))}
    with pytest.raises(DataError, match=r"target 0.*1 point\(s\) the simulator does not "
                       r"produce \(10\); it produces 3 points from 7 to 21"):
        read_series_observations(p, spec)
    with pytest.raises(DataError, match="cases.*does not produce"):
        check_available([1, 400], np.arange(1, 366), "cases", "obs.csv")
    check_available([1, 365], np.arange(1, 366), "cases", "obs.csv")  # all there: no error


def test_contexts_must_be_constant_within_a_target(tmp_path):
    p = long_csv(tmp_path, "target_id,day,cases,temp\n0,1,1,20\n0,2,2,21\n")
    with pytest.raises(DataError, match="context 'temp' changes within the target"):
        read_series_observations(p, {"cases": SeriesSpec("cases", "day")}, ["temp"])


def test_series_with_different_index_columns_cannot_share_a_file(tmp_path):
    p = long_csv(tmp_path, "day,cases\n1,1\n")
    specs = {"cases": SeriesSpec("cases", "day"), "load": SeriesSpec("load", "mm")}
    with pytest.raises(DataError, match="different index columns"):
        read_series_observations(p, specs)


# --------------------------------------------------------------------------- results
RUNS = pd.Index([10, 11, 12], name="run_id")
CURVES = np.array([[1.0, 2.0, 3.0, 4.0, 5.0], [0.5, 0.25, 0.125, 0.0, 0.0], [9, 8, 7, 6, 5]])
ONE = {"cases": SeriesSpec("cases", "day", tuple(DAYS))}
POINTS = {"cases": DAYS}


def expected_wide() -> pd.DataFrame:
    return pd.DataFrame(CURVES, index=RUNS, columns=[column("cases", t) for t in DAYS])


def test_python_result_formats_give_the_same_wide_frame():
    want = expected_wide()
    scal = pd.Series([0.1, 0.2, 0.3], index=RUNS)
    # (1) wide columns already
    wide = want.assign(attack=scal, status="ok")
    got = from_python(wide, RUNS, ONE, POINTS, "s.simulator.function")
    assert np.array_equal(got[want.columns].to_numpy(), CURVES)
    # (2) a sequence per run
    seq = pd.DataFrame({"attack": scal, "cases": [list(c) for c in CURVES], "status": "ok"},
                       index=RUNS)
    got = from_python(seq, RUNS, ONE, POINTS, "k")
    assert np.array_equal(got[want.columns].to_numpy(), CURVES)
    assert got["attack"].tolist() == [0.1, 0.2, 0.3] and "cases" not in got
    # (3) long: one row per (run, day), extra days ignored, rows in any run order
    recs = [(r, d, v) for r, c in zip(RUNS, CURVES, strict=True)
            for d, v in zip([*DAYS, 13.0], [*c, 99.0], strict=True)]
    long = pd.DataFrame(recs[::-1], columns=["run", "day", "cases"]).set_index("run")
    long["attack"] = long.index.map(dict(zip(RUNS, scal, strict=True)))
    long = long.sort_values("day", kind="stable").sort_index(kind="stable")
    got = from_python(long, RUNS, ONE, POINTS, "k")
    assert list(got.index) == list(RUNS)
    assert np.array_equal(got[want.columns].to_numpy(), CURVES)
    assert got["attack"].tolist() == [0.1, 0.2, 0.3]


def test_python_results_bad_shapes_name_the_key_and_run():
    seq = pd.DataFrame({"cases": [[1, 2, 3, 4, 5], [1, 2, 3, 4], [1, 2, 3, 4, 5]]}, index=RUNS)
    with pytest.raises(DataError, match=r"s.fn: series 'cases' of run 11 has 4 values, the "
                       r"series has 5 points \(run 10 gave 5\): series of different lengths"):
        from_python(seq, RUNS, ONE, POINTS, "s.fn")
    long = pd.DataFrame({"day": [1, 2, 3, 5, 8, 1, 2, 3, 5], "cases": np.arange(9.0)},
                        index=[10] * 5 + [11] * 4)
    with pytest.raises(DataError, match="run 11.*no value at day 8"):
        from_python(long, RUNS[:2], ONE, POINTS, "s.fn")
    with pytest.raises(DataError, match=r"no rows for run\(s\) \[12\]"):
        from_python(long, RUNS, ONE, POINTS, "s.fn")
    dup = pd.DataFrame({"day": [1, 2, 2, 3, 5, 8], "cases": np.arange(6.0)}, index=[10] * 6)
    with pytest.raises(DataError, match="day 2 appears twice"):
        from_python(dup, RUNS[:1], ONE, POINTS, "s.fn")
    with pytest.raises(DataError, match="lacks the point column"):
        from_python(pd.DataFrame({"attack": [1.0]}, index=RUNS[:1]), RUNS[:1], ONE, POINTS,
                    "s.fn")
    # a failed run's missing sequence stays NaN (finalize makes it a status row)
    failed = pd.DataFrame({"cases": [list(CURVES[0]), None, np.nan]}, index=RUNS)
    got = from_python(failed, RUNS, ONE, POINTS, "s.fn")
    assert np.isnan(got.iloc[1:].to_numpy(dtype=float)).all()


def test_command_formats_round_trip():
    want = dict(zip(expected_wide().columns, CURVES[0], strict=True))
    csv = "day,cases,other\n" + "".join(f"{d:g},{float(v)!r},1\n" for d, v in
                                         zip([0.0, *DAYS, 20.0], [7.0, *CURVES[0], 7.0],
                                             strict=True))
    assert from_command_csv(csv, ONE, POINTS, "run_10/out.csv") == want
    js = json.dumps({"day": [0, *DAYS.tolist()], "cases": [3.0, *CURVES[0].tolist()]})
    assert from_command_json(js, ONE, POINTS, "out.json") == want
    positional = json.dumps({"cases": CURVES[0].tolist()})
    assert from_command_json(positional, ONE, POINTS, "out.json") == want
    # null in a curve is NaN (the run becomes nan_output downstream), not a crash
    with_null = json.dumps({"cases": [1, None, 3, 4, 5]})
    assert np.isnan(from_command_json(with_null, ONE, POINTS, "o")["cases@2"])


@pytest.mark.parametrize("reader, text, words", [
    (from_command_csv, "day,cases\n1,1\n2,2\n3,3\n5,5\n", "no value at day 8"),
    (from_command_csv, "day,cases\n1,1\n2,2\n2,2\n3,3\n5,5\n8,8\n", "day 2 appears twice"),
    (from_command_csv, "day,cases\n1,1\n3,3\n2,2\n5,5\n8,8\n", "day 2 comes after 3"),
    (from_command_csv, "t,cases\n1,1\n", "lacks column(s) ['day']"),
    (from_command_csv, "day,cases\nx,1\n", "'x' is not a finite number"),
    (from_command_csv, "day,cases\n1,1\n2,abc\n", "row 2: 'abc' is not a number"),
    (from_command_json, '{"cases": [1, 2, 3]}', "has 3 values, the series has 5 points"),
    (from_command_json, '{"day": [1, 2], "cases": [1, 2, 3]}', "'day' has 2"),
    (from_command_json, '{"deaths": [1]}', "no array 'cases'"),
    (from_command_json, '{"cases": "1 2 3"}', "array of numbers"),
    (from_command_json, "[1, 2]", "object of arrays"),
    (from_command_json, "{", "not valid JSON"),
])
def test_command_bad_outputs_name_the_file(reader, text, words):
    with pytest.raises(DataError) as exc:
        reader(text, ONE, POINTS, "runs/7/out")
    assert exc.value.source == "runs/7/out" and words in exc.value.message


def test_a_nan_point_from_a_simulator_is_a_failed_run_not_a_crash():
    """NaN in a simulated curve: finalize turns the run into nan_output naming the
    point (failures are data); the other runs keep their curves."""
    from simcalib.simulators.base import finalize

    seq = pd.DataFrame({"cases": [list(CURVES[0]), [1.0, np.nan, 3, 4, 5], list(CURVES[2])],
                        "status": "ok"}, index=RUNS)
    wide = from_python(seq, RUNS, ONE, POINTS, "s.fn")
    cols = [column("cases", t) for t in DAYS]
    out = finalize(wide, cols, RUNS)
    assert out["status"].tolist() == ["ok", "nan_output", "ok"]
    assert "cases@2" in out["message"].iloc[1]
    assert np.array_equal(out.loc[[10, 12], cols].to_numpy(), CURVES[[0, 2]])
