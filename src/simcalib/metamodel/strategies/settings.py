"""Settings of the ``calibration`` section, built once: :class:`CalibrationSettings`,
a frozen, typed object made from the schema-defaulted section where a job (or a
Python call) receives it, and the checks a strategy's settings must pass before any
run.

Why: the section used to travel as a dict, merged over the defaults and checked
again at every layer (the job, then every target), with the budget travelling both
as an argument and inside the dict.  Here :meth:`CalibrationSettings.from_config`
is the one place the section is merged over the schema's defaults (the one source
of truth) and checked (:func:`merged_settings`, :func:`check_settings`): a bad key
or budget is a :class:`ConfigError` naming ``calibration.<key>`` at construction;
the runner then reads attributes (``settings.budget``, ``settings.select.top``)
and never validates or re-defaults again.  Strategy modules that read keys get the
same values, read-only, from :meth:`CalibrationSettings.as_mapping`.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from simcalib.config import check_section, schema_defaults
from simcalib.errors import ConfigError
from simcalib.metamodel.strategies.registry import get

#: nested sections merged one level deep (a user's partial section keeps the defaults)
_NESTED = ("adaptive", "blackbox", "gpbo", "posterior", "select", "sequential")
#: sections nested one level further, merged the same way
_NESTED2 = {"sequential": ("ensemble", "solver")}


def defaults() -> dict[str, Any]:
    """The ``calibration`` section's defaults, from calibration.schema.yaml."""
    return schema_defaults("calibration.schema.yaml")


#: a study's metamodel section may travel with the settings (adaptive fine-tuning)
_CARRIED = ("metamodel",)


def merged_settings(cfg: Mapping[str, Any] | None) -> dict[str, Any]:
    """``cfg`` over the schema defaults (one level deep for the nested sections); an
    unknown or mistyped key is an error (also from Python)."""
    cfg = dict(cfg or {})
    check_section({k: v for k, v in cfg.items() if k not in _CARRIED},
                  "calibration.schema.yaml", "calibration")
    return _with_defaults(cfg)


def _with_defaults(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """``cfg`` (checked) over the schema defaults, nested sections key by key."""
    base = defaults()
    out = {**base, **cfg}
    for sec in _NESTED:
        if sec in base:
            out[sec] = {**base[sec], **(cfg.get(sec) or {})}
            for sub in _NESTED2.get(sec, ()):
                out[sec][sub] = {**(base[sec].get(sub) or {}),
                                 **((cfg.get(sec) or {}).get(sub) or {})}
    return out


def check_settings(strategy: str, budget: int, proximity: float, settings: Mapping[str, Any],
                   key: str = "calibration") -> None:
    """Bad input fails here, before any simulator run, with the key path."""
    spec = get(strategy, f"{key}.strategies")
    if not isinstance(budget, int | np.integer) or budget < spec.min_budget:
        raise ConfigError(f"{key}.budget", f"strategy {strategy!r} needs a budget of at least "
                          f"{spec.min_budget} simulation run(s), got {budget}")
    check_proximity(proximity, key)
    if spec.check is not None:
        spec.check(settings, key)


def check_proximity(proximity: Any, key: str = "calibration") -> None:
    """A proximity R in (0, 1] (``calibration.proximity``, or a sweep's R)."""
    if not (isinstance(proximity, int | float) and 0.0 < float(proximity) <= 1.0):
        raise ConfigError(f"{key}.proximity", f"must lie in (0, 1], got {proximity}")


def solver_set_name(study_cfg: Mapping[str, Any]) -> str | None:
    """The solver option set calibration's OP solves use: ``calibration.solver``, else
    the study's ``optimize.solver`` (the one place this choice is made)."""
    return ((study_cfg.get("calibration") or {}).get("solver")
            or (study_cfg.get("optimize") or {}).get("solver"))


def solver_options(config: Mapping[str, Any], study: str) -> dict[str, Any]:
    """The option set named by :func:`solver_set_name` (``{}``: the backend defaults)."""
    name = solver_set_name(config["studies"][study])
    return dict((config.get("solvers") or {}).get(name, {})) if name else {}


# --------------------------------------------------------------------------------------
# the settings object
# --------------------------------------------------------------------------------------

class ReadOnlyDict(dict):
    """A nested section of :meth:`CalibrationSettings.as_mapping`: read like a dict
    (``dict()``, ``{**s}``, JSON, ``.get``), changed never.  A copy (``copy``,
    ``deepcopy``, pickle) is a plain dict, so code that derives its own variant of a
    section still can, without touching the job's settings."""

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("calibration settings are read-only (built once: "
                        "CalibrationSettings); copy the section to change it")

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return dict, (dict(self),)

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return {k: copy.deepcopy(v, memo) for k, v in self.items()}


def _frozen(value: Any) -> Any:
    """``value`` with every dict read-only (lists copied as lists: values compare as
    the config's do)."""
    if isinstance(value, Mapping):
        return ReadOnlyDict({k: _frozen(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return type(value)(_frozen(v) for v in value)
    return value


def _int_or_str(v: Any) -> int | str:
    return v if isinstance(v, str) else int(v)


def _float_or_str(v: Any) -> float | str:
    return v if isinstance(v, str) else float(v)


#: how a field's value is typed, by its annotation
_CONVERT: dict[str, Callable[[Any], Any]] = {
    "int": int, "float": float, "bool": bool, "str": str,
    "int | str": _int_or_str, "float | str": _float_or_str,
    "str | None": lambda v: None if v is None else str(v),
    "tuple[str, ...]": lambda v: tuple(str(x) for x in v),
    "tuple[float, ...]": lambda v: tuple(float(x) for x in v),
    "Mapping[str, Any]": _frozen,
}


def _typed(cls: type, values: Mapping[str, Any], key: str) -> Any:
    """``cls`` (a frozen section dataclass) from a merged section; its fields are the
    schema's keys (tests/strategies/test_calibration_settings.py checks they match)."""
    names = [f.name for f in dataclasses.fields(cls) if f.init]
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise ConfigError(f"{key}.{unknown[0]}", f"unknown setting; allowed: {names}")
    types = {f.name: str(f.type) for f in dataclasses.fields(cls)}
    return cls(**{n: _CONVERT[types[n]](values[n]) for n in names})


@dataclass(frozen=True)
class SelectSettings:
    """``calibration.select``: choosing by mean (``top``: a count or ``auto``)."""

    top: int | str
    reps: int


@dataclass(frozen=True)
class AdaptiveSettings:
    """``calibration.adaptive``: the trust region of the strategy ``adaptive``."""

    rounds: int
    grow: float
    shrink: float
    min_proximity: float
    update: str
    neighbours: int
    epochs: int


@dataclass(frozen=True)
class BlackboxSettings:
    """``calibration.blackbox``: Optuna's TPE."""

    n_startup_trials: int
    multivariate: bool


@dataclass(frozen=True)
class GpboSettings:
    """``calibration.gpbo``: GP Bayesian optimisation (BoTorch)."""

    n_init: int
    num_restarts: int
    raw_samples: int
    pool: int
    threads: int


@dataclass(frozen=True)
class PosteriorSettings:
    """``calibration.posterior``: the metamodel posterior's sampler and error model
    (``error_scale``: kappa, or ``calibrate``)."""

    enabled: bool
    sequential: bool
    chains: int
    warmup: int
    draws: int
    max_draws: int
    r_hat: float
    ess_bulk: float
    temperatures: int
    max_temperature: float
    init_draws: int
    archive: int
    obs_noise: str
    noise_scale: float
    error_dof: float
    error_scale: float | str
    curve_errors: str
    calibration_targets: int
    calibration_draws: int
    ppc_draws: int
    pair_plots: int
    save_draws: int


@dataclass(frozen=True)
class SequentialSettings:
    """``calibration.sequential``: the sequential search (its proposal MILPs' solver
    option set and its ensemble stay sections: :class:`SolverSettings` and
    :class:`EnsembleSettings` build them where they are used)."""

    initial_per_input: int
    batch: int
    mean_proposals: int
    local_share: float
    radius: float
    use_design: bool
    min_distance: float
    jobs: str
    chunk_size: int
    step_local: bool
    final: str
    final_top: int
    solver: Mapping[str, Any] = field(hash=False)
    ensemble: Mapping[str, Any] = field(hash=False)


#: the nested sections and their typed objects
_SECTIONS: dict[str, type] = {"select": SelectSettings, "adaptive": AdaptiveSettings,
                              "blackbox": BlackboxSettings, "gpbo": GpboSettings,
                              "posterior": PosteriorSettings,
                              "sequential": SequentialSettings}


@dataclass(frozen=True)
class CalibrationSettings:
    """One job's ``calibration`` section for one strategy, every default filled and
    every check passed (module doc).  Build it with :meth:`from_config` (a section as
    a config or a user gives it) or :meth:`build` (either that or an object already
    built); nothing changes it afterwards (:meth:`with_proximity` makes a new one)."""

    strategy: str
    enabled: bool
    strategies: tuple[str, ...]
    budget: int
    proximity: float
    sampling: str
    solver: str | None
    mc_samples: int
    rescore: int
    block_size: int
    one_job: bool
    sweep: tuple[float, ...]
    extra_targets: tuple[str, ...]
    extra_strategies: tuple[str, ...]
    noise_studies: tuple[str, ...]
    select: SelectSettings
    adaptive: AdaptiveSettings
    blackbox: BlackboxSettings
    gpbo: GpboSettings
    posterior: PosteriorSettings
    sequential: SequentialSettings
    #: the study's ``metamodel`` section where it travels with the settings (adaptive
    #: fine-tuning), else None
    metamodel: Mapping[str, Any] | None = field(default=None, hash=False)
    #: the merged section, read-only (:meth:`as_mapping`)
    _values: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False,
                                       hash=False)

    @classmethod
    def from_config(cls, section: Mapping[str, Any] | None, strategy: str, *,
                    proximity: float | None = None, key: str = "calibration"
                    ) -> CalibrationSettings:
        """The section over the schema's defaults, checked once for ``strategy``:
        an unknown or mistyped key, a budget below the strategy's minimum or a
        proximity outside (0, 1] is a :class:`ConfigError` naming ``key.<name>``.
        ``proximity``: a job's own R (a sweep's ``--proximity``), over the section's."""
        return cls._checked(merged_settings(section), strategy, proximity, key)

    @classmethod
    def from_study(cls, study_cfg: Mapping[str, Any], strategy: str, *,
                   proximity: float | None = None, error_scale: float | None = None,
                   key: str = "calibration") -> CalibrationSettings:
        """The ``calibration`` section of a study's mapping as a :class:`Study` holds it
        (validated against the schema, defaults filled, when the study was built; its
        ``metamodel`` section travels along): the schema check is not run a second
        time, only the strategy's checks.  ``proximity``: a sweep's R over the
        section's; ``error_scale``: the kappa ``cal-posterior`` calibrated (checked)."""
        section = dict(study_cfg.get("calibration") or {})
        if "metamodel" in study_cfg:
            section["metamodel"] = study_cfg["metamodel"]
        if error_scale is not None:
            check_section({"posterior": {"error_scale": error_scale}},
                          "calibration.schema.yaml", key)
            section["posterior"] = {**(section.get("posterior") or {}),
                                    "error_scale": error_scale}
        return cls._checked(_with_defaults(section), strategy, proximity, key)

    @classmethod
    def _checked(cls, merged: dict[str, Any], strategy: str, proximity: float | None,
                 key: str) -> CalibrationSettings:
        """The strategy's checks (budget, proximity, its own section), then the object."""
        if proximity is not None:
            check_proximity(proximity, key)
            merged["proximity"] = float(proximity)
        check_settings(strategy, merged["budget"], merged["proximity"], merged, key)
        return cls._from_merged(merged, strategy)

    @classmethod
    def build(cls, settings: CalibrationSettings | Mapping[str, Any] | None, strategy: str,
              proximity: float | None = None) -> CalibrationSettings:
        """``settings`` as an object: one already built is returned as it is (no
        second validation; ``proximity`` applied by :meth:`with_proximity`), a
        mapping (a user's section from Python) goes through :meth:`from_config`."""
        if not isinstance(settings, CalibrationSettings):
            return cls.from_config(settings, strategy, proximity=proximity)
        if settings.strategy != strategy:
            raise ConfigError("calibration.strategies", f"settings built for strategy "
                              f"{settings.strategy!r} were given to strategy {strategy!r}")
        if proximity is None or float(proximity) == settings.proximity:
            return settings
        return settings.with_proximity(proximity)

    @classmethod
    def _from_merged(cls, merged: Mapping[str, Any], strategy: str) -> CalibrationSettings:
        values = _frozen(dict(merged))
        top = {f.name: str(f.type) for f in dataclasses.fields(cls)
               if f.name not in _SECTIONS and f.name not in ("strategy", "metamodel",
                                                             "_values")}
        kwargs: dict[str, Any] = {n: _CONVERT[t](values[n]) for n, t in top.items()}
        kwargs.update({n: _typed(c, values[n], f"calibration.{n}")
                       for n, c in _SECTIONS.items()})
        return cls(strategy=str(strategy), metamodel=values.get("metamodel"),
                   _values=MappingProxyType(values), **kwargs)

    def with_proximity(self, proximity: float, key: str = "calibration"
                       ) -> CalibrationSettings:
        """These settings at another proximity R (checked), e.g. a sweep's."""
        check_proximity(proximity, key)
        values = dict(self._values)
        values["proximity"] = float(proximity)
        return dataclasses.replace(self, proximity=float(proximity),
                                   _values=MappingProxyType(values))

    def as_mapping(self) -> Mapping[str, Any]:
        """The merged section, read-only (nested sections too): for the strategy
        modules and helpers that read keys (``p.settings["adaptive"]``)."""
        return self._values
