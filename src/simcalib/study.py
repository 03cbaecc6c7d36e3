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
        _check_sizes(study, int(config.get("max_runs", 1_000_000)))
        _check_workdir(study)
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


def _check_sizes(study: Study, cap: int) -> None:
    """Design and target sets below the ``max_runs`` sanity cap (a typo such as
    ``n: 1e12`` would otherwise fill memory and disk in the first job)."""
    levels = len(study.space.context_levels())
    design = study.cfg.get("design") or {}
    if "n" in design:
        rows = int(design["n"]) * (levels if design.get("per_level", True) else 1)
        if rows > cap:
            raise ConfigError(f"{study.key}.design.n", f"{rows} design runs exceed the sanity "
                              f"cap max_runs = {cap}; raise the top-level 'max_runs' if you "
                              "mean it")
    sets = {"targets": study.cfg.get("targets") or {}}
    extra = study.cfg.get("extra_targets") or {}
    sets.update({f"extra_targets.{k}": v for k, v in extra.items()})
    for where, tcfg in sets.items():
        if int(tcfg.get("n", 0)) > cap:
            raise ConfigError(f"{study.key}.{where}.n", f"{tcfg['n']} targets exceed the sanity "
                              f"cap max_runs = {cap}; raise the top-level 'max_runs' if you "
                              "mean it")


def _check_workdir(study: Study) -> None:
    """A command simulator's scratch ``workdir`` must be (or be creatable as) a
    writable directory, else every run of every chunk fails."""
    import os
    import tempfile

    wdir = getattr(study.simulator, "workdir", None)
    if wdir is None:
        return
    key = f"{study.key}.simulator.options.workdir"
    probe = wdir
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise ConfigError(key, f"{probe} is not a directory")
    try:  # a real probe: os.access says yes to root even on a read-only file system
        tempfile.TemporaryDirectory(dir=probe, prefix=".simcalib-probe-").cleanup()
        writable = os.access(probe, os.W_OK | os.X_OK)
    except OSError:
        writable = False
    if not writable:
        raise ConfigError(key, f"{probe} is not writable" + ("" if probe == wdir else
                          f" (so {wdir} cannot be created)"))

