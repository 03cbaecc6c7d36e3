"""A calibration study as the library sees it: its space, simulator and outputs,
built from one entry of ``config['studies']``.  The config checks a JSON schema cannot
express live in :mod:`simcalib.study.checks`.

A :class:`Study` validates its mapping on construction exactly as a config file's
study is validated (schema, defaults filled, unknown keys rejected with a "did you
mean"; its space and simulator built), so settings given from Python keep the
promise of docs/api.md."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from simcalib.config import validate_section
from simcalib.errors import ConfigError
from simcalib.simulators import Simulator, build_simulator, study_outputs
from simcalib.study.names import check_study_names, study_derived
from simcalib.study.series import SeriesSpec
from simcalib.study.series_study import (
    observed_points_error,
    resolve_series,
    series_outputs,
    simulator_cfg,
)
from simcalib.study.space import Space, build_space

#: What a study built from Python must name (a config file's study also needs a design
#: and targets, which the workflow's stages read; the API takes them as arguments).
API_REQUIRED = ("simulator", "parameters")


@dataclass
class Study:
    """One study.  ``cfg`` is validated against ``study.schema.yaml`` and replaced by a
    copy with the schema's defaults filled (a design and targets are optional here).
    ``partial=True`` is for the workflow's rules, whose ``--params`` hold only the keys
    their step reads: no key is required then and nothing is built before it is used."""

    name: str
    cfg: Mapping[str, Any] | None = None
    partial: bool = field(default=False, kw_only=True)

    def __post_init__(self) -> None:
        if self.cfg is None and isinstance(self.name, Mapping):  # Study({...}): unnamed
            self.name, self.cfg = "study", self.name
        if not isinstance(self.cfg, Mapping):
            raise ConfigError(self.key, f"a study is a mapping of settings, got "
                              f"{type(self.cfg).__name__}")
        self.cfg = validate_section(self.cfg, "study.schema.yaml", self.key,
                                    () if self.partial else API_REQUIRED)
        if not self.partial:  # what validating a config file builds too
            self.check_names(self.cfg.get("outputs") or [])
            self.space  # noqa: B018
            self.simulator  # noqa: B018
            # a series' point columns (cases@7) are checked as its declaration
            self.check_names(self.scalar_outputs, None if self.cfg.get("outputs")
                             else f"{self.key}.simulator")

    def check_names(self, outputs: list[str], outputs_key: str | None = None) -> None:
        """Parameter, context and output names plain, unreserved and distinct
        (:mod:`simcalib.study.names`); called before anything is built, so a bad name
        is reported as a name, not as whatever it breaks first."""
        cfg = self.cfg or {}
        check_study_names(self.key, cfg.get("parameters") or {}, cfg.get("contexts") or {},
                          outputs, study_derived(cfg), outputs_key)

    @property
    def key(self) -> str:
        return f"studies.{self.name}"

    @cached_property
    def space(self) -> Space:
        return build_space(self.cfg, self.key)

    @cached_property
    def series(self) -> dict[str, SeriesSpec]:
        """The declared series with their points resolved (declared, else observed):
        :mod:`simcalib.study.series_study`; empty for a scalar study."""
        if not (self.cfg or {}).get("series"):
            return {}
        return resolve_series(self.cfg or {}, self.key)

    @cached_property
    def simulator(self) -> Simulator:
        try:
            return build_simulator(simulator_cfg(self.cfg or {}, self.series), self.key)
        except ConfigError as exc:
            raise observed_points_error(exc, self.cfg or {}, self.key) from None

    @cached_property
    def outputs(self) -> list[str]:
        """The columns calibrated on: the scalar outputs, then every series' point
        columns (``cases@7``).  A series study that lists no ``outputs`` calibrates on
        its series only."""
        if not self.series:
            return study_outputs(self.cfg or {}, self.simulator)
        return [*((self.cfg or {}).get("outputs") or []), *series_outputs(self.series)]

    @property
    def scalar_outputs(self) -> list[str]:
        """The outputs that are not series points."""
        cols = set(series_outputs(self.series))
        return [o for o in self.outputs if o not in cols]

    @property
    def input_names(self) -> list[str]:
        return self.space.input_names


def build_study(config: Mapping[str, Any], name: str) -> Study:
    studies = config.get("studies") or {}
    if name not in studies:
        raise ConfigError("studies", f"no study named {name!r}; have {sorted(studies)}")
    return Study(name, studies[name])
