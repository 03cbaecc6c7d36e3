"""Registers the FluTE-style epidemic model (:mod:`simcalib.simulators.epidemic`)
as simulator type ``epidemic``; options map onto ``EpidemicOptions`` fields.

Its series output (issue 42): a study that declares ``series: {cases: {index: day}}``
(optionally with ``points``, days 1..``max_days``) gets the case curve as the wide
columns ``cases@<day>`` after the nine scalar outputs (the representation of
:mod:`simcalib.study.series`); a study that declares no series gets exactly the frame
it always got, so no scalar study changes by a bit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from simcalib.errors import ConfigError, DataError
from simcalib.simulators.base import check_options, finalize, register


class EpidemicSimulator:
    """``series``: ``{name: days}`` of the series to emit (only ``cases``); ``outputs``
    are the nine scalars followed by those series' point columns."""

    def __init__(self, options: Any, series: Mapping[str, np.ndarray] | None = None) -> None:
        from simcalib.simulators import epidemic

        self._model = epidemic
        self.options = options
        self.series = {k: np.asarray(v, dtype=np.int64) for k, v in (series or {}).items()}
        unknown = sorted(set(self.series) - {epidemic.CURVE})
        if unknown:
            raise ValueError(f"the epidemic simulator has no series {unknown}")
        self.series_columns: dict[str, list[str]] = {}
        if self.series:
            from simcalib.study.series import columns

            self.series_columns = {k: columns(k, v) for k, v in self.series.items()}
        self.outputs = [*epidemic.OUTPUTS, *(c for cols in self.series_columns.values()
                                              for c in cols)]

    def run(self, inputs: pd.DataFrame, seeds: np.ndarray, threads: int = 1) -> pd.DataFrame:
        if not self.series:
            raw = self._model.simulate_batch(inputs, self.options, np.asarray(seeds))
            return finalize(raw, self.outputs, inputs.index)
        raw, curves = self._model.simulate_batch_curves(inputs, self.options,
                                                        np.asarray(seeds))
        days = self.series[self._model.CURVE]
        points = pd.DataFrame(curves[:, days - 1], index=inputs.index,
                              columns=self.series_columns[self._model.CURVE])
        return finalize(pd.concat([raw, points], axis=1), self.outputs, inputs.index)


def series_days(study: Mapping[str, Any], options: Any, study_key: str) -> dict[str, np.ndarray]:
    """The days of each series the study declares (all of 1..max_days when it gives no
    points); a ConfigError naming the key for a series the model lacks or a day it
    does not simulate."""
    from simcalib.simulators import epidemic
    from simcalib.study.series import check_available, parse_series

    decl = study.get("series")
    if not decl:
        return {}
    taken = [*(study.get("parameters") or {}), *(study.get("contexts") or {}),
             *(study.get("outputs") or [])]
    specs = parse_series(decl, f"{study_key}.series", taken)
    grid = epidemic.curve_days(options)
    out = {}
    for name, spec in specs.items():
        if name != epidemic.CURVE:
            raise ConfigError(f"{study_key}.series.{name}", f"the epidemic simulator has no "
                              f"series {name!r}; it gives {[epidemic.CURVE]} (index "
                              f"{epidemic.CURVE_INDEX!r}: days 1..max_days)")
        if spec.points is None:
            out[name] = grid
            continue
        try:
            check_available(spec.points, grid, name, f"{study_key}.series.{name}.points")
        except DataError as exc:
            raise ConfigError(exc.source, exc.message) from None
        out[name] = np.asarray(spec.points, dtype=np.int64)
    return out


@register("epidemic")
def build(options: Mapping[str, Any], study: Mapping[str, Any], key: str) -> EpidemicSimulator:
    from simcalib.simulators import epidemic

    fields = {f.name: f for f in dataclasses.fields(epidemic.EpidemicOptions)}
    check_options(options, fields, key)
    try:
        opts = epidemic.EpidemicOptions(**dict(options))
    except (TypeError, ValueError) as exc:
        raise ConfigError(key, str(exc)) from None
    study_key = key.rsplit(".", 2)[0]
    names = set(study.get("parameters", {})) | set(study.get("contexts", {}) or {})
    missing = sorted(set(epidemic.INPUTS) - names)
    if missing:
        raise ConfigError(study_key + ".parameters",
                          f"the epidemic simulator needs inputs {missing} "
                          "(as parameters or contexts)")
    return EpidemicSimulator(opts, series_days(study, opts, study_key))
