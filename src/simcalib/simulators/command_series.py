"""A command program's curves (issue 42): which series the ``command`` simulator reads,
with which parser, and how a run's bad curve is reported.

What a program writes (``docs/command.md``, "Curves"): with ``parser: csv`` one row
per time point, the series' index column (``day``) and one column per series
(``cases``), any scalar output a column whose *last* row is read as before; with
``parser: json`` one object whose arrays are the curves (``{"day": [...], "cases":
[...]}``, the index array optional when a curve has exactly the declared points) beside
its scalar keys.  The reading itself is :mod:`simcalib.study.series`
(``from_command_csv`` / ``from_command_json``); this module decides what a failure
means for the run and for the study:

* a series the file does not hold at all (no ``cases`` column, no ``day`` column) is
  the same mistake in every run: :class:`SeriesAbsentError`, which the probe turns into
  a :class:`~simcalib.errors.ConfigError` at ``studies.<s>.series.<name>`` and the chunk
  (two failed probe runs) into a setup error;
* a run that misses a declared point, repeats or unsorts its times, or writes a curve
  of another length than the declared points (series of different lengths between
  runs) is that run's ``parse_error``: a row with the file and series named in its
  message, the scalars it did write kept, every other run unaffected;
* a NaN in a curve is the run's ``nan_output``, its message naming the series and the
  points (``cases at day 5, 6 (2 of 60 points)``), not 60 column names.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from simcalib.errors import ConfigError
from simcalib.simulators.command_parse import OutputParseError, read_series

if TYPE_CHECKING:  # simcalib.study imports the simulators: read lazily below
    from simcalib.study.series import SeriesSpec

#: parsers that can hold a curve (one row per time point; arrays)
SERIES_PARSERS = ("csv", "json")


class SeriesAbsentError(OutputParseError):
    """The output file has no column (CSV) or array (JSON) for a series, or no index
    column: a setting or a program that never writes it, not one run's accident."""

    def __init__(self, name: str, what: str, available: Sequence[str]) -> None:
        self.name, self.available = name, list(available)
        shown = self.available[:12] + (["..."] if len(self.available) > 12 else [])
        super().__init__(f"{what}; the file has {shown}")


def study_series(study: Mapping[str, Any], key: str) -> dict[str, SeriesSpec]:
    """The study's series with their points (resolved by the study before the builder
    runs: :func:`simcalib.study.series_study.simulator_cfg`); empty without series."""
    if not study.get("series"):
        return {}
    from simcalib.study.series_study import declared_series

    return declared_series(study, key.rsplit(".", 2)[0])


def check_parser(parser: str, series: Mapping[str, SeriesSpec], key: str) -> None:
    """A curve needs a parser that holds one: ``csv`` or ``json``."""
    if series and parser not in SERIES_PARSERS:
        raise ConfigError(f"{key}.parser", f"the study's series {sorted(series)} need parser "
                          f"'csv' (one row per time point: the index column and one column "
                          f"per series) or 'json' (arrays), not {parser!r}")


def series_columns(series: Mapping[str, SeriesSpec]) -> list[str]:
    """Every series' point columns (``cases@1`` ...), declaration order; a
    ConfigError at ``series.<name>.points`` where no points are known."""
    return [c for s in series.values() for c in s.columns()]


def _present(text: str, parser: str) -> list[str] | None:
    """The CSV header's columns or the JSON object's keys (None: unreadable; the
    reader says why)."""
    if parser == "csv":
        for row in csv.reader(io.StringIO(text)):
            if any(c.strip() for c in row):
                return [c.strip() for c in row]
        return []
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    return [str(k) for k in data] if isinstance(data, Mapping) else None


def read_curves(text: str, parser: str, series: Mapping[str, SeriesSpec],
                source: str) -> dict[str, float]:
    """The run's curves as ``{cases@7: value}``: :class:`SeriesAbsentError` when a
    series (or the CSV's index column) is not in the file at all, else
    :func:`~simcalib.simulators.command_parse.read_series` (an
    :class:`OutputParseError` naming ``source`` and the series on a bad curve)."""
    cols = _present(text, parser)
    if cols is not None:
        for name in series:
            if name not in cols:
                kind = "column" if parser == "csv" else "array"
                raise SeriesAbsentError(name, f"{source}: no {kind} {name!r} for series "
                                        f"{name!r}", cols)
        index = next(iter(series.values())).index
        if parser == "csv" and index not in cols:
            name = next(iter(series))
            raise SeriesAbsentError(name, f"{source}: no index column {index!r} (one row "
                                    f"per {index}, one column per series)", cols)
    return read_series(text, parser, series, source)


def describe_nonfinite(names: Sequence[str], series: Mapping[str, SeriesSpec]) -> str:
    """``non-finite output(s): ['peak']; cases at day 5, 6 (2 of 60 points)``: the
    scalars by name, each series' points grouped, at most 8 shown."""
    from simcalib.study.series import parse_column, point_label

    scalars = []
    points: dict[str, list[str]] = {}
    for n in names:
        p = parse_column(n)
        if p is not None and p[0] in series:
            points.setdefault(p[0], []).append(point_label(p[1]))
        else:
            scalars.append(n)
    parts = [f"non-finite output(s): {scalars}"] if scalars else []
    for name, pts in points.items():
        spec = series[name]
        total = len(spec.points or ())
        more = " ..." if len(pts) > 8 else ""
        parts.append(f"series {name!r} is not finite at {spec.index} "
                     f"{', '.join(pts[:8])}{more} ({len(pts)} of {total} points)")
    return "; ".join(parts)


def nonfinite(vals: Mapping[str, float]) -> list[str]:
    return [o for o, v in vals.items() if not math.isfinite(v)]
