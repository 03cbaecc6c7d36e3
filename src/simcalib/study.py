"""A calibration study as the library sees it: its space, simulator and outputs,
built from one entry of ``config['studies']``.  Also the config checks that a JSON
schema cannot express (bounds order, names that must exist, simulator options)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from simcalib.config import semantic_check
from simcalib.errors import ConfigError
from simcalib.simulators import Simulator, make_simulator, study_outputs
from simcalib.space import Space, space_from_config


@dataclass
class Study:
    name: str
    cfg: Mapping[str, Any]

    @property
    def key(self) -> str:
        return f"studies.{self.name}"

    @cached_property
    def space(self) -> Space:
        return space_from_config(self.cfg, self.key)

    @cached_property
    def simulator(self) -> Simulator:
        return make_simulator(self.cfg, self.key)

    @cached_property
    def outputs(self) -> list[str]:
        return study_outputs(self.cfg, self.simulator)

    @property
    def input_names(self) -> list[str]:
        return self.space.input_names


def get_study(config: Mapping[str, Any], name: str) -> Study:
    studies = config.get("studies") or {}
    if name not in studies:
        raise ConfigError("studies", f"no study named {name!r}; have {sorted(studies)}")
    return Study(name, studies[name])


@semantic_check
def check_studies(config: Mapping[str, Any]) -> None:
    """Build every study's space and simulator (which validates bounds, constraints,
    options and templates), and check cross-references."""
    solvers = set((config.get("solvers") or {}).keys())
    for name, cfg in (config.get("studies") or {}).items():
        study = Study(name, cfg)
        study.space  # noqa: B018  (validates)
        study.simulator  # noqa: B018
        outs = study.outputs
        if not outs:
            raise ConfigError(f"{study.key}.outputs", "the study has no outputs")
        design = cfg.get("design", {})
        if design.get("chunk_size", 1) < 1:
            raise ConfigError(f"{study.key}.design.chunk_size", "must be >= 1")
        for sec in ("optimize", "calibration"):
            solver = (cfg.get(sec) or {}).get("solver")
            if solver is not None and solver not in solvers:
                raise ConfigError(f"{study.key}.{sec}.solver",
                                  f"unknown solver option set {solver!r}; defined in 'solvers': "
                                  f"{sorted(solvers)}")
        for tkey in ("targets",):
            override = (cfg.get(tkey) or {}).get("contexts") or {}
            unknown = set(override) - set(study.space.context_names)
            if unknown:
                raise ConfigError(f"{study.key}.{tkey}.contexts",
                                  f"{sorted(unknown)} are not contexts of the study "
                                  f"({study.space.context_names})")
        for tname, tcfg in (cfg.get("extra_targets") or {}).items():
            unknown = set(tcfg.get("contexts") or {}) - set(study.space.context_names)
            if unknown:
                raise ConfigError(f"{study.key}.extra_targets.{tname}.contexts",
                                  f"{sorted(unknown)} are not contexts of the study")
