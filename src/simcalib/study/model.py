"""A calibration study as the library sees it: its space, simulator and outputs,
built from one entry of ``config['studies']``.  The config checks a JSON schema cannot
express live in :mod:`simcalib.study.checks`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from simcalib.errors import ConfigError
from simcalib.simulators import Simulator, build_simulator, study_outputs
from simcalib.study.space import Space, build_space


@dataclass
class Study:
    name: str
    cfg: Mapping[str, Any]

    @property
    def key(self) -> str:
        return f"studies.{self.name}"

    @cached_property
    def space(self) -> Space:
        return build_space(self.cfg, self.key)

    @cached_property
    def simulator(self) -> Simulator:
        return build_simulator(self.cfg, self.key)

    @cached_property
    def outputs(self) -> list[str]:
        return study_outputs(self.cfg, self.simulator)

    @property
    def input_names(self) -> list[str]:
        return self.space.input_names


def build_study(config: Mapping[str, Any], name: str) -> Study:
    studies = config.get("studies") or {}
    if name not in studies:
        raise ConfigError("studies", f"no study named {name!r}; have {sorted(studies)}")
    return Study(name, studies[name])
