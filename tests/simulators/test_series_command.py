"""The command simulator's curves (issue 42): command_parse.read_series, the one call
command.py's output parsing makes for a study with series."""

from __future__ import annotations

import pytest

from simcalib.simulators.command_parse import OutputParseError, extract, parse_csv, read_series
from simcalib.study.series import SeriesSpec

SPECS = {"cases": SeriesSpec("cases", "day", (2.0, 3.0))}


def test_csv_time_series_gives_the_points_and_the_last_row_scalars():
    text = "day,cases,total\n1,5,5\n2,7,12\n3,4,16\n"
    assert read_series(text, "csv", SPECS, "Summary0") == {"cases@2": 7.0, "cases@3": 4.0}
    assert extract(parse_csv(text), "total") == 16.0     # scalars as before


def test_json_arrays_beside_scalars():
    text = '{"attack": 0.3, "day": [1, 2, 3], "cases": [5, 7, 4]}'
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
