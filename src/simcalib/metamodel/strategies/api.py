"""One call from Python: a simulator, the box of its inputs, one observed row -> the
calibrated inputs (and the runs behind them).

Why: a modeller with one data set and a simulator written as a Python function should
not need a config file, a design or a metamodel to try ``sequential``.  This is the
workflow's own code path (``cal-run`` of ``sequential`` on a five-section study: the
same ledger, search, answer and record), so an answer found here is the one the
workflow gives for the same study, seed and settings.

    res = sequential_calibrate(sir, {"beta": (0.1, 0.5), "gamma": (0.05, 0.2)},
                               {"peak": 812.0, "peak_day": 34.0}, budget=64)
    res.x, res.error, res.runs, res.posterior

``res.posterior`` is :func:`simcalib.metamodel.posterior.sequential_posterior` on the
same runs (the workflow's ``cal_seq_posterior``): per-input intervals, R-hat/ESS, the
"pinned down" column and whether the answer lies inside them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from simcalib.errors import ConfigError
from simcalib.metamodel.strategies.scale import RunScale
from simcalib.study.observations import SD_PREFIX, WEIGHT_PREFIX
from simcalib.study.series import parse_column


@dataclass(frozen=True)
class SequentialResult:
    """What :func:`sequential_calibrate` found: ``x`` the calibrated inputs, ``error``
    their Delta (re-simulated misfit), ``record`` the workflow's result row, ``runs``
    every simulator run (failed ones included), ``posterior`` (module doc)."""

    x: dict[str, float]
    error: float
    record: pd.Series
    runs: pd.DataFrame
    posterior: Any = None


def _study_cfg(simulator: Callable[..., Any] | Mapping[str, Any],
               parameters: Mapping[str, Any] | None, outputs: list[str]) -> dict[str, Any]:
    """A five-section study (without its targets and calibration) from a callable or a
    study mapping."""
    if isinstance(simulator, Mapping):
        cfg = dict(simulator)
        if parameters is not None:
            cfg["parameters"] = _box(parameters)
        if cfg.get("series"):
            # a declared curve's points (cases@7) come with the series, not as outputs
            outputs = [c for c in outputs if parse_column(c) is None]
        if outputs or not cfg.get("series"):
            cfg.setdefault("outputs", outputs)
    elif callable(simulator):
        cfg = {"simulator": {"type": "python", "options": {"function": simulator,
                                                           "outputs": outputs}},
               "parameters": _box(parameters or {}), "outputs": outputs}
    else:
        raise ConfigError("simulator", "give a Python function (inputs DataFrame -> outputs "
                          f"DataFrame) or a study mapping, got {type(simulator).__name__}")
    if not cfg.get("parameters"):
        raise ConfigError("parameters", "give the box of the inputs: {name: (lower, upper)}")
    return cfg


def _box(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """``{name: (lower, upper)}`` (or the config's ``{lower, upper, ...}``) as the
    config's parameters."""
    out = {}
    for name, b in parameters.items():
        if isinstance(b, Mapping):
            out[name] = dict(b)
        elif isinstance(b, (tuple, list)) and len(b) == 2:
            out[name] = {"lower": float(b[0]), "upper": float(b[1])}
        else:
            raise ConfigError(f"parameters.{name}", f"give (lower, upper), got {b!r}")
    return out


def _observed(observed: Mapping[str, float] | pd.Series | pd.DataFrame) -> pd.DataFrame:
    """One observed row as the targets table (``sd_``/``weight_`` columns kept)."""
    if isinstance(observed, pd.DataFrame):
        if len(observed) != 1:
            raise ConfigError("observed", f"one observed row, got {len(observed)}")
        row = observed.iloc[0].to_dict()
    else:
        row = dict(observed)
    row.pop("target_id", None)
    return pd.DataFrame([{"target_id": 0, **{k: float(v) for k, v in row.items()}}])


def sequential_calibrate(simulator: Callable[..., Any] | Mapping[str, Any],
                         parameters: Mapping[str, Any] | None,
                         observed: Mapping[str, float] | pd.Series | pd.DataFrame,
                         budget: int = 64, *, seed: int = 0,
                         settings: Mapping[str, Any] | None = None,
                         study: str = "model", posterior: bool = True) -> SequentialResult:
    """Calibrate ``simulator`` to one ``observed`` row with ``budget`` runs of
    ``sequential`` (module doc).

    ``simulator``: a function ``f(inputs: DataFrame) -> DataFrame`` of outputs (or
    ``f(inputs, seeds)`` for a stochastic one, as the ``python`` simulator type), or a
    study mapping (``simulator``, ``parameters``, ...; as one entry of the config's
    ``studies``).  ``parameters``: ``{name: (lower, upper)}``.  ``observed``: output
    values, optionally ``sd_<output>`` (Delta in measurement sds) and
    ``weight_<output>``.  ``settings``: more of the ``calibration`` section (e.g.
    ``{"sequential": {"batch": 8}}``), checked like a config file.  ``posterior``:
    False skips the posterior (it samples for ~1 CPU-minute; ``res.posterior`` is then
    None)."""
    from simcalib.metamodel.strategies.runner import calibrate
    from simcalib.metamodel.strategies.settings import CalibrationSettings
    from simcalib.study.model import Study

    tdf = _observed(observed)
    outputs = [c for c in tdf.columns if c != "target_id"
               and not c.startswith((SD_PREFIX, WEIGHT_PREFIX))]
    cfg = _study_cfg(simulator, parameters, outputs)
    st = Study(study, cfg)
    cal = {**dict(settings or {}), "budget": int(budget), "strategies": ["sequential"]}
    built = CalibrationSettings.from_config(cal, "sequential")   # the user's dict, checked once
    mm = RunScale(list(st.input_names), list(st.outputs), study=study)
    rec, runs = calibrate(st, mm, tdf, "sequential", built, {"backend": "highs"}, int(seed))
    r = rec.iloc[0]
    x = {n: float(r[f"x_{n}"]) for n in st.space.tunable_names}
    post = _posterior(st, rec, runs, tdf, cal, int(seed)) if posterior else None
    return SequentialResult(x, float(r["error"]), r, runs, post)


def _posterior(study: Any, records: pd.DataFrame, runs: pd.DataFrame,
               targets: pd.DataFrame, cal: Mapping[str, Any], seed: int) -> Any:
    """The posterior from the same runs, as the workflow's ``cal_seq_posterior`` builds
    it (``calibration.posterior`` and the sequential ensemble's settings)."""
    from simcalib.metamodel.posterior import sequential_posterior

    return sequential_posterior(study, runs, targets, records=records,
                                cfg=cal.get("posterior"),
                                ensemble=(cal.get("sequential") or {}).get("ensemble"),
                                seed=seed)


__all__ = ["SequentialResult", "sequential_calibrate"]
